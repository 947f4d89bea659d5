//! Shared-memory bank conflicts as the SIMT simulator counts them ([`SharedStats`]), on
//! hand-written per-thread kernels whose counts follow from NVIDIA's model by hand.

use rutile_ir::interp::simt::{run_threads_with_stats, SharedAccess, SharedCounts, SharedStats};
use rutile_ir::interp::{ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::thread::{Memory, Reg, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, F16, F32, F64, I32, I8};

const SHARED: Memory = Memory::Shared { alloc: 0 };

/// The comment before the statements that the tests count.
const OP: &str = "store at test.rs:1:1";

/// A predicate on the thread id: `None` for an unpredicated statement.
type Pred = fn(&mut ThreadKernelBuilder, Reg) -> Option<Reg>;

fn all(_: &mut ThreadKernelBuilder, _: Reg) -> Option<Reg> {
    None
}

/// `tid < limit`.
fn below(k: &mut ThreadKernelBuilder, tid: Reg, limit: i64) -> Reg {
    let l = k.int(I32, limit);
    k.cmp(CmpOp::Lt, tid, l)
}

/// A register of type `ty` holding 1.
fn one(k: &mut ThreadKernelBuilder, ty: ScalarType) -> Reg {
    if ty.is_float() {
        k.float(ty, 1.0)
    } else {
        k.int(ty, 1)
    }
}

/// `num_warps` warps of `warp_size` threads, where thread `tid` stores a vector of `n`
/// elements of `ty` at element `tid * stride` of a shared buffer, where `pred` holds.
fn strided_store(num_warps: u32, warp_size: u32, ty: ScalarType, n: usize, stride: i64, pred: Pred) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("banks", num_warps, warp_size);
    let threads = (num_warps * warp_size) as i64;
    k.shared(ty, (threads * stride.max(1) + n as i64) as u32);
    let tid = k.thread_id();
    let s = k.int(I32, stride);
    let at = k.bin(BinaryOp::Mul, tid, s);
    let p = pred(&mut k, tid);
    let v = one(&mut k, ty);
    k.push(Stmt::Comment(OP.into()));
    k.store(vec![v; n], SHARED, at, p);
    k.finish()
}

fn run(kernel: &ThreadKernel, grid: [u32; 3]) -> Result<SharedStats, InterpError> {
    run_threads_with_stats(kernel, grid, &[], &mut [])
}

fn stats(kernel: &ThreadKernel) -> SharedStats {
    run(kernel, [1, 1, 1]).unwrap_or_else(|e| panic!("{e}\n{kernel}"))
}

fn counts(accesses: u64, wavefronts: u64, ideal_wavefronts: u64) -> SharedCounts {
    SharedCounts {
        accesses,
        wavefronts,
        ideal_wavefronts,
    }
}

/// The counts of a one-program run of `strided_store`, checking that the totals and the
/// statement's entry agree.
fn store_counts(num_warps: u32, warp_size: u32, ty: ScalarType, n: usize, stride: i64, pred: Pred) -> SharedCounts {
    let s = stats(&strided_store(num_warps, warp_size, ty, n, stride, pred));
    assert_eq!(s.op("store", SharedAccess::Store), s.total());
    assert_eq!(s.op("store", SharedAccess::Load), SharedCounts::default());
    s.total()
}

#[test]
fn f32_strides() {
    // Lane l writes word l: every bank once.
    let c = store_counts(1, 32, F32, 1, 1, all);
    assert_eq!(c, counts(1, 1, 1));
    assert_eq!(c.conflicts(), 0);
    // Words 0, 2, .., 62: the even banks, two words each.
    assert_eq!(store_counts(1, 32, F32, 1, 2, all), counts(1, 2, 1));
    // Words 0, 32, .., 992: all in bank 0.
    let c = store_counts(1, 32, F32, 1, 32, all);
    assert_eq!(c, counts(1, 32, 1));
    assert_eq!(c.conflicts(), 31);
    // An odd stride reaches every bank once.
    assert_eq!(store_counts(1, 32, F32, 1, 33, all), counts(1, 1, 1));
    // Stride 16: words 16l, two banks (0, 16) of 16 words each.
    assert_eq!(store_counts(1, 32, F32, 1, 16, all), counts(1, 16, 1));
}

#[test]
fn broadcasts_are_not_conflicts() {
    let mut k = ThreadKernelBuilder::new("broadcast", 1, 32);
    k.shared(F32, 64);
    let tid = k.thread_id();
    let v = one(&mut k, F32);
    // Lanes 0 and 1 write elements 0 and 32 (both in bank 0).
    k.push(Stmt::Comment("init".into()));
    let two = below(&mut k, tid, 2);
    let thirty_two = k.int(I32, 32);
    let at = k.bin(BinaryOp::Mul, tid, thirty_two);
    k.store(vec![v], SHARED, at, Some(two));
    // (The other lanes read what lanes 0 and 1 wrote: after a barrier.)
    k.push(Stmt::Barrier);
    // Every lane reads element 0: one word, one wavefront.
    k.push(Stmt::Comment("broadcast".into()));
    let zero = k.int(I32, 0);
    k.load(F32, 1, SHARED, zero, None);
    // Even lanes read element 0, odd ones element 32: two words of bank 0.
    k.push(Stmt::Comment("pair".into()));
    let one_i = k.int(I32, 1);
    let odd = k.bin(BinaryOp::And, tid, one_i);
    let at = k.bin(BinaryOp::Mul, odd, thirty_two);
    k.load(F32, 1, SHARED, at, None);
    let s = stats(&k.finish());
    assert_eq!(s.op("init", SharedAccess::Store), counts(1, 2, 1));
    assert_eq!(s.op("broadcast", SharedAccess::Load), counts(1, 1, 1));
    assert_eq!(s.op("pair", SharedAccess::Load), counts(1, 2, 1));
    assert_eq!(s.total(), counts(3, 5, 3));
    assert_eq!(s.conflicts(), 2);
    assert_eq!(s.by_op.len(), 3);
}

#[test]
fn vectors_of_16_bytes_go_by_quarter_warps() {
    // Each quarter-warp writes 8 lanes x 4 words: words 0..32 of every bank once.
    let c = store_counts(1, 32, F32, 4, 4, all);
    assert_eq!(c, counts(1, 4, 4));
    assert_eq!(c.conflicts(), 0);
    // Stride 8: lanes l and l + 4 of a quarter-warp hit the same 4 banks.
    assert_eq!(store_counts(1, 32, F32, 4, 8, all), counts(1, 8, 4));
    // Eight f16s are 16 bytes too.
    assert_eq!(store_counts(1, 32, F16, 8, 8, all), counts(1, 4, 4));
}

#[test]
fn accesses_of_8_bytes_go_by_half_warps() {
    assert_eq!(store_counts(1, 32, F32, 2, 2, all), counts(1, 2, 2));
    assert_eq!(store_counts(1, 32, F64, 1, 1, all), counts(1, 2, 2));
    // Stride 2 of f64: words 4l and 4l + 1, lanes l and l + 8 of a half-warp share banks.
    assert_eq!(store_counts(1, 32, F64, 1, 2, all), counts(1, 4, 2));
}

#[test]
fn narrow_elements_share_words() {
    // f16 at lane l: bytes 2l, words 0..16.
    let c = store_counts(1, 32, F16, 1, 1, all);
    assert_eq!(c, counts(1, 1, 1));
    // Stride 2: words 0..32.
    assert_eq!(store_counts(1, 32, F16, 1, 2, all), counts(1, 1, 1));
    // Stride 4: words 0, 2, .., 62, as f32 at stride 2.
    assert_eq!(store_counts(1, 32, F16, 1, 4, all), counts(1, 2, 1));
    // Pairs of f16 (4 bytes) still go as one phase.
    assert_eq!(store_counts(1, 32, F16, 2, 2, all), counts(1, 1, 1));
    // i8 at lane l: 8 words.
    assert_eq!(store_counts(1, 32, I8, 1, 1, all), counts(1, 1, 1));
    // i8 at 128 l: word 32 l, all in bank 0.
    assert_eq!(store_counts(1, 32, I8, 1, 128, all), counts(1, 32, 1));
}

#[test]
fn inactive_lanes_are_not_counted() {
    // The even lanes of a 32-way conflict: 16 words of bank 0.
    let even: Pred = |k, tid| {
        let one = k.int(I32, 1);
        let odd = k.bin(BinaryOp::And, tid, one);
        let zero = k.int(I32, 0);
        Some(k.cmp(CmpOp::Eq, odd, zero))
    };
    assert_eq!(store_counts(1, 32, F32, 1, 32, even), counts(1, 16, 1));
    // A warp with no active lane makes no access.
    let first_warp: Pred = |k, tid| Some(below(k, tid, 32));
    assert_eq!(store_counts(2, 32, F32, 1, 1, first_warp), counts(1, 1, 1));
    // Nor does a quarter-warp: only lanes 0..8 of 16-byte stores run, one phase.
    let first_quarter: Pred = |k, tid| Some(below(k, tid, 8));
    assert_eq!(store_counts(1, 32, F32, 4, 4, first_quarter), counts(1, 1, 1));
    let none: Pred = |k, tid| Some(below(k, tid, 0));
    let s = stats(&strided_store(1, 32, F32, 1, 1, none));
    assert_eq!(s, SharedStats::default());
}

#[test]
fn warps_of_other_sizes() {
    // Warps of 8: four accesses, each 8 words of bank 0.
    assert_eq!(store_counts(4, 8, F32, 1, 32, all), counts(4, 32, 4));
    assert_eq!(store_counts(4, 8, F32, 1, 1, all), counts(4, 4, 4));
    // Warps of 16 lanes storing 16 bytes each: two phases of 8 lanes x 4 words per warp.
    assert_eq!(store_counts(2, 16, F32, 4, 4, all), counts(2, 4, 4));
    // A warp of 64 is one access, served as two groups of 32 lanes.
    assert_eq!(store_counts(1, 64, F32, 1, 1, all), counts(1, 2, 2));
    assert_eq!(store_counts(1, 64, F32, 1, 32, all), counts(1, 64, 2));
    // Only the first group active.
    let first_group: Pred = |k, tid| Some(below(k, tid, 32));
    assert_eq!(store_counts(1, 64, F32, 1, 1, first_group), counts(1, 1, 1));
}

#[test]
fn programs_add_up() {
    let k = strided_store(2, 32, F32, 1, 2, all);
    let s = run(&k, [3, 2, 1]).unwrap();
    assert_eq!(s.total(), counts(12, 24, 12));
    assert_eq!(s.by_op[&(OP.to_string(), SharedAccess::Store)], s.total());
}

#[test]
fn global_memory_is_not_counted() {
    let mut k = ThreadKernelBuilder::new("global", 1, 32);
    let out = k.ptr("out", I32);
    let tid = k.thread_id();
    let s = k.int(I32, 32);
    let at = k.bin(BinaryOp::Mul, tid, s);
    k.store(vec![tid], Memory::Global { param: out }, at, None);
    let kernel = k.finish();
    let mut buffers = [HostBuffer::zeros(I32, 32 * 32)];
    let args = [ArgValue::Ptr { buffer: 0, offset: 0 }];
    let s = run_threads_with_stats(&kernel, [1, 1, 1], &args, &mut buffers).unwrap();
    assert_eq!(s, SharedStats::default());
    assert_eq!(buffers[0].to_vec::<i32>().unwrap()[32 * 5], 5);
}

#[test]
fn ops_are_told_apart_by_name() {
    let mut k = ThreadKernelBuilder::new("ops", 1, 32);
    k.shared(F32, 1024);
    let tid = k.thread_id();
    let v = one(&mut k, F32);
    let thirty_two = k.int(I32, 32);
    let strided = k.bin(BinaryOp::Mul, tid, thirty_two);
    k.push(Stmt::Comment("convert at k.rs:3:9 -> blocked".into()));
    k.store(vec![v], SHARED, tid, None);
    k.push(Stmt::Barrier);
    k.load(F32, 1, SHARED, tid, None);
    k.push(Stmt::Comment("converter at k.rs:4:9".into()));
    k.store(vec![v], SHARED, strided, None);
    k.push(Stmt::Comment("convert at k.rs:5:9".into()));
    k.store(vec![v], SHARED, tid, None);
    let s = stats(&k.finish());
    // The two `convert`s, summed; not the `converter`.
    let store = s.op("convert", SharedAccess::Store);
    assert_eq!(store, counts(2, 2, 2));
    assert_eq!(store.conflicts(), 0);
    assert_eq!(s.op("convert", SharedAccess::Load), counts(1, 1, 1));
    assert_eq!(s.op("converter", SharedAccess::Store).conflicts(), 31);
    assert_eq!(s.op("conv", SharedAccess::Store), SharedCounts::default());
    let key = ("convert at k.rs:3:9 -> blocked".to_string(), SharedAccess::Store);
    assert_eq!(s.by_op[&key], counts(1, 1, 1));
    assert_eq!(s.by_op.len(), 4);
    assert_eq!(s.total(), counts(4, 35, 4));
    assert_eq!(s.conflicts(), 31);
}

#[test]
fn faults_are_still_reported() {
    // A 4-vector at element 2 of shared memory.
    let mut k = ThreadKernelBuilder::new("misaligned", 1, 32);
    k.shared(F32, 256);
    let tid = k.thread_id();
    let four = k.int(I32, 4);
    let at = k.bin(BinaryOp::Mul, tid, four);
    let two = k.int(I32, 2);
    let at = k.bin(BinaryOp::Add, at, two);
    let v = one(&mut k, F32);
    k.store(vec![v; 4], SHARED, at, None);
    match run(&k.finish(), [1, 1, 1]) {
        Err(InterpError::ThreadFault { kind, .. }) => assert_eq!(kind, FaultKind::Misaligned),
        other => panic!("expected a misaligned access, got {other:?}"),
    }
}
