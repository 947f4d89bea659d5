//! The SIMT simulator on hand-written per-thread kernels: what it computes, and the faults it
//! reports for code that would be wrong on a GPU.

use rutile_ir::interp::simt::run_threads;
use rutile_ir::interp::{ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::{BinaryOp, CmpOp, Literal};
use rutile_ir::thread::{Expr, Memory, Reg, Special, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::CacheModifier;
use rutile_ir::ScalarType::{Bool, F32, I32};

/// A kernel of `num_warps` warps of `warp_size` threads whose parameter 0 is `out: *i32`.
fn kernel(num_warps: u32, warp_size: u32) -> ThreadKernelBuilder {
    let mut k = ThreadKernelBuilder::new("test", num_warps, warp_size);
    k.ptr("out", I32);
    k
}

const OUT: Memory = Memory::Global { param: 0 };
const SHARED: Memory = Memory::Shared { alloc: 0 };

fn run(kernel: &ThreadKernel, grid: [u32; 3], out_len: usize) -> Result<Vec<i32>, InterpError> {
    let mut buffers = [HostBuffer::zeros(I32, out_len)];
    run_threads(kernel, grid, &[ArgValue::Ptr { buffer: 0, offset: 0 }], &mut buffers)?;
    Ok(buffers[0].to_vec().unwrap())
}

fn fault(e: InterpError) -> (FaultKind, Option<u32>, String) {
    let text = e.to_string();
    match e {
        InterpError::ThreadFault { kind, thread, .. } => (kind, thread, text),
        e => panic!("expected a thread fault, got {e}"),
    }
}

#[test]
fn threads_programs_and_shuffles() {
    // out[pid * 16 + tid] = (tid ^ 1 from a shuffle) + 100 * num_programs, on 2 warps of 8.
    let mut k = kernel(2, 8);
    let tid = k.thread_id();
    let pid = k.set(I32, Expr::Special(Special::ProgramId(0)));
    let np = k.set(I32, Expr::Special(Special::NumPrograms(0)));
    let swapped = k.set(I32, Expr::ShuffleXor { value: tid, mask: 1 });
    let three = k.int(I32, 3);
    let from_lane_3 = k.set(
        I32,
        Expr::ShuffleIdx {
            value: tid,
            lane: three,
        },
    );
    let hundred = k.int(I32, 100);
    let scaled = k.bin(BinaryOp::Mul, np, hundred);
    let v = k.bin(BinaryOp::Add, swapped, scaled);
    let sixteen = k.int(I32, 16);
    let base = k.bin(BinaryOp::Mul, pid, sixteen);
    let at = k.bin(BinaryOp::Add, base, tid);
    k.store(vec![v], OUT, at, None);
    let thirty_two = k.int(I32, 32);
    let at2 = k.bin(BinaryOp::Add, at, thirty_two);
    k.store(vec![from_lane_3], OUT, at2, None);
    let out = run(&k.finish(), [2, 1, 1], 64).unwrap();
    for p in 0..2 {
        for t in 0..16 {
            assert_eq!(out[p * 16 + t], (t ^ 1) as i32 + 200);
            // Lane 3 of the thread's own warp.
            assert_eq!(out[32 + p * 16 + t], (t / 8 * 8 + 3) as i32);
        }
    }
}

#[test]
fn vector_and_predicated_accesses() {
    // Thread t stores [t, t, t, t] at 4t where t is even; then reads them back, predicated,
    // into registers that hold -1 first.
    let mut k = kernel(1, 8);
    k.shared(I32, 32);
    let tid = k.thread_id();
    let four = k.int(I32, 4);
    let at = k.bin(BinaryOp::Mul, tid, four);
    let one = k.int(I32, 1);
    let odd = k.bin(BinaryOp::And, tid, one);
    let zero = k.int(I32, 0);
    let even = k.set(Bool, Expr::Compare(CmpOp::Eq, odd, zero));
    k.store(vec![tid; 4], SHARED, at, Some(even));
    k.push(Stmt::Barrier);
    let minus = k.int(I32, -1);
    let dsts: Vec<Reg> = (0..4).map(|_| k.set(I32, Expr::Copy(minus))).collect();
    k.push(Stmt::Load {
        dsts: dsts.clone(),
        mem: SHARED,
        index: at,
        pred: Some(even),
        cache: CacheModifier::Default,
    });
    k.store(dsts, OUT, at, None);
    let out = run(&k.finish(), [1, 1, 1], 32).unwrap();
    for t in 0..8 {
        let want = if t % 2 == 0 { t as i32 } else { -1 };
        assert_eq!(&out[4 * t..4 * t + 4], &[want; 4]);
    }
}

#[test]
fn misaligned_vectors_fault() {
    let mut k = kernel(1, 8);
    let tid = k.thread_id();
    let four = k.int(I32, 4);
    let at = k.bin(BinaryOp::Mul, tid, four);
    let two = k.int(I32, 2);
    let off = k.bin(BinaryOp::Add, at, two);
    k.store(vec![tid; 4], OUT, off, None);
    let (kind, thread, text) = fault(run(&k.finish(), [1, 1, 1], 64).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::Misaligned, Some(0)));
    assert!(text.contains("store global0[r4] = r0, r0, r0, r0"), "{text}");
    assert!(text.contains("thread 0: a vector of 4 elements at element 2"), "{text}");
}

#[test]
fn pointer_offsets_count_for_alignment_and_bounds() {
    // Thread t stores a pair at 2t, through a pointer 1 element into the buffer.
    let mut k = kernel(1, 8);
    let tid = k.thread_id();
    let two = k.int(I32, 2);
    let at = k.bin(BinaryOp::Mul, tid, two);
    k.store(vec![tid, tid], OUT, at, None);
    let kernel = k.finish();
    let mut buffers = [HostBuffer::zeros(I32, 18)];
    let err = run_threads(
        &kernel,
        [1, 1, 1],
        &[ArgValue::Ptr { buffer: 0, offset: 1 }],
        &mut buffers,
    )
    .unwrap_err();
    assert_eq!(fault(err).0, FaultKind::Misaligned);
    let mut buffers = [HostBuffer::zeros(I32, 18)];
    run_threads(
        &kernel,
        [1, 1, 1],
        &[ArgValue::Ptr { buffer: 0, offset: 2 }],
        &mut buffers,
    )
    .unwrap();
    assert_eq!(
        buffers[0].to_vec::<i32>().unwrap()[2..],
        [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    );
    let mut buffers = [HostBuffer::zeros(I32, 17)];
    let err = run_threads(
        &kernel,
        [1, 1, 1],
        &[ArgValue::Ptr { buffer: 0, offset: 2 }],
        &mut buffers,
    )
    .unwrap_err();
    let (kind, thread, text) = fault(err);
    assert_eq!((kind, thread), (FaultKind::OutOfBounds, Some(7)));
    assert!(
        text.contains("element offset 17 is outside buffer 0 (`out`, 17 elements)"),
        "{text}"
    );
}

#[test]
fn racing_stores_fault_but_equal_values_do_not() {
    let mut k = kernel(2, 4);
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    let seven = k.int(I32, 7);
    k.store(vec![seven], OUT, zero, None);
    k.store(vec![tid], OUT, zero, None);
    let (kind, thread, text) = fault(run(&k.finish(), [1, 1, 1], 1).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::RacingStores, Some(1)));
    assert!(
        text.contains("threads 0 and 1 write different values to element 0"),
        "{text}"
    );
}

#[test]
fn reads_of_unwritten_registers_fault() {
    // A register read before any statement writes it.
    let mut k = kernel(1, 8);
    let tid = k.thread_id();
    let r = k.reg(I32);
    k.bin(BinaryOp::Add, tid, r);
    let (kind, thread, text) = fault(run(&k.finish(), [1, 1, 1], 8).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::UndefinedRegister, Some(0)));
    assert!(
        text.contains("`r2: i32 = add r0, r1`, program (0, 0, 0), thread 0: r1 is read before it is written"),
        "{text}"
    );

    // A predicated load into a register that has no value where the predicate is false.
    let mut k = kernel(1, 8);
    k.shared(I32, 8);
    let tid = k.thread_id();
    let three = k.int(I32, 3);
    let low = k.set(Bool, Expr::Compare(CmpOp::Lt, tid, three));
    let r = k.reg(I32);
    k.store(vec![tid], SHARED, tid, None);
    k.push(Stmt::Barrier);
    k.push(Stmt::Load {
        dsts: vec![r],
        mem: SHARED,
        index: tid,
        pred: Some(low),
        cache: CacheModifier::Default,
    });
    let (kind, thread, text) = fault(run(&k.finish(), [1, 1, 1], 8).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::UndefinedRegister, Some(3)));
    assert!(
        text.contains("r3 keeps its value where the predicate is false, but has none"),
        "{text}"
    );
}

#[test]
fn divergent_branches_fault() {
    let mut k = kernel(1, 8);
    let tid = k.thread_id();
    let five = k.int(I32, 5);
    let c = k.set(Bool, Expr::Compare(CmpOp::Lt, tid, five));
    k.push(Stmt::If {
        cond: c,
        then_body: vec![],
        else_body: vec![],
    });
    let (kind, thread, _) = fault(run(&k.finish(), [1, 1, 1], 1).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::DivergentControlFlow, Some(5)));
}

#[test]
fn uniform_loops_run() {
    // i = 0; while i < 5 { i += 1 }; out[tid] = i.
    let mut k = kernel(1, 4);
    let tid = k.thread_id();
    let i = k.int(I32, 0);
    let (five, one) = (k.int(I32, 5), k.int(I32, 1));
    let c = k.reg(Bool);
    let next = k.reg(I32);
    k.push(Stmt::While {
        cond_body: vec![Stmt::Set {
            dst: c,
            expr: Expr::Compare(CmpOp::Lt, i, five),
        }],
        cond: c,
        body: vec![
            Stmt::Set {
                dst: next,
                expr: Expr::Binary(BinaryOp::Add, i, one),
            },
            Stmt::Set {
                dst: i,
                expr: Expr::Copy(next),
            },
        ],
    });
    k.store(vec![i], OUT, tid, None);
    assert_eq!(run(&k.finish(), [1, 1, 1], 4).unwrap(), vec![5; 4]);
}

/// Thread t writes shared[t]; thread t then reads shared[(t + 8) % 16] (another warp's, with
/// warps of 8), with or without a barrier between.
fn exchange(barrier: bool, overwrite: bool) -> ThreadKernel {
    exchange_among(2, 8, barrier, overwrite)
}

/// On `warps` warps of 8 threads, thread t writes shared[t], then reads
/// shared[(t + shift) % threads], with or without a barrier between; with `overwrite` it
/// writes shared[t] again after the read, with no barrier.
fn exchange_among(warps: u32, shift: i64, barrier: bool, overwrite: bool) -> ThreadKernel {
    let threads = warps as i64 * 8;
    let mut k = kernel(warps, 8);
    k.shared(I32, threads as u32);
    let tid = k.thread_id();
    k.store(vec![tid], SHARED, tid, None);
    if barrier {
        k.push(Stmt::Barrier);
    }
    let (shift, mask) = (k.int(I32, shift), k.int(I32, threads - 1));
    let shifted = k.bin(BinaryOp::Add, tid, shift);
    let other = k.bin(BinaryOp::And, shifted, mask);
    let r = k.reg(I32);
    k.push(Stmt::Load {
        dsts: vec![r],
        mem: SHARED,
        index: other,
        pred: None,
        cache: CacheModifier::Default,
    });
    if overwrite {
        // Reuse the buffer without a barrier: another warp may not have read it yet.
        let hundred = k.int(I32, 100);
        k.store(vec![hundred], SHARED, tid, None);
    }
    k.store(vec![r], OUT, tid, None);
    k.finish()
}

/// Thread t writes shared[t]; thread t then reads shared[(t + 1) % 8], its neighbour's in
/// its own warp (one warp of 8), with or without a barrier between: a warp's threads do not
/// run in step either (independent thread scheduling since Volta; Vulkan promises nothing
/// of a subgroup's), so an exchange within a warp needs the barrier too.
#[test]
fn shared_memory_within_a_warp_needs_barriers_too() {
    let exchange = |barrier| exchange_among(1, 1, barrier, false);
    let out = run(&exchange(true), [1, 1, 1], 8).unwrap();
    assert_eq!(out, (0..8).map(|t| (t + 1) % 8).collect::<Vec<i32>>());
    let (kind, thread, text) = fault(run(&exchange(false), [1, 1, 1], 8).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::MissingBarrier, Some(0)));
    assert!(
        text.contains("warp 0 reads element 1 of shared0, which another thread wrote"),
        "{text}"
    );
}

#[test]
fn shared_memory_across_warps_needs_barriers() {
    let out = run(&exchange(true, false), [1, 1, 1], 16).unwrap();
    assert_eq!(out, (0..16).map(|t| (t + 8) % 16).collect::<Vec<i32>>());
    let (kind, thread, text) = fault(run(&exchange(false, false), [1, 1, 1], 16).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::MissingBarrier, Some(0)));
    assert!(
        text.contains("warp 0 reads element 8 of shared0, which another thread wrote"),
        "{text}"
    );
    let (kind, _, text) = fault(run(&exchange(true, true), [1, 1, 1], 16).unwrap_err());
    assert_eq!(kind, FaultKind::MissingBarrier);
    assert!(
        text.contains("overwrites element 0 of shared0, which another thread read"),
        "{text}"
    );
}

#[test]
fn shared_memory_starts_unwritten() {
    // Shared memory is garbage on a GPU until the program writes it, in every program.
    let mut k = kernel(1, 4);
    k.shared(I32, 4);
    let tid = k.thread_id();
    let pid = k.set(I32, Expr::Special(Special::ProgramId(0)));
    let zero = k.int(I32, 0);
    let first = k.set(Bool, Expr::Compare(CmpOp::Eq, pid, zero));
    let then_body = vec![
        Stmt::Store {
            values: vec![tid],
            mem: SHARED,
            index: tid,
            pred: None,
        },
        Stmt::Barrier,
    ];
    k.push(Stmt::If {
        cond: first,
        then_body,
        else_body: vec![],
    });
    let r = k.reg(I32);
    k.push(Stmt::Load {
        dsts: vec![r],
        mem: SHARED,
        index: tid,
        pred: None,
        cache: CacheModifier::Default,
    });
    let err = run(&k.finish(), [2, 1, 1], 4).unwrap_err();
    let (kind, thread, text) = fault(err);
    assert_eq!((kind, thread), (FaultKind::Uninitialized, Some(0)));
    assert!(text.contains("program (1, 0, 0)"), "{text}");
}

#[test]
fn float_math_is_the_interpreters() {
    // out[t] = bits of f32(t) / 3 + 0.1, rounded as the interpreter rounds.
    let mut k = kernel(1, 8);
    let tid = k.thread_id();
    let f = k.set(F32, Expr::Cast(tid));
    let three = k.set(F32, Expr::Const(Literal::Float(3.0)));
    let tenth = k.set(F32, Expr::Const(Literal::Float(0.1)));
    let q = k.set(F32, Expr::Binary(BinaryOp::Div, f, three));
    let s = k.set(F32, Expr::Binary(BinaryOp::Add, q, tenth));
    let bits = k.set(I32, Expr::Bitcast(s));
    k.store(vec![bits], OUT, tid, None);
    let out = run(&k.finish(), [1, 1, 1], 8).unwrap();
    for (t, &b) in out.iter().enumerate() {
        assert_eq!(f32::from_bits(b as u32), t as f32 / 3.0 + 0.1f32);
    }
}

#[test]
fn launch_errors() {
    let k = kernel(1, 4).finish();
    let err = run_threads(&k, [1, 1, 1], &[], &mut []).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::ArgumentCount {
                expected: 1,
                got: 0,
                ..
            }
        ),
        "{err}"
    );
    let err = run_threads(&k, [0, 1, 1], &[ArgValue::Int(0)], &mut []).unwrap_err();
    assert!(matches!(err, InterpError::EmptyGrid { .. }), "{err}");
    let err = run_threads(&k, [1, 1, 1], &[ArgValue::Int(0)], &mut []).unwrap_err();
    assert!(matches!(err, InterpError::BadArgument { index: 0, .. }), "{err}");
}

/// Per-thread kernels the simulator cannot run, built by hand (its fields are public), are
/// the verifier's errors; each was an index out of bounds or an overflow before.
#[test]
fn malformed_kernels_are_errors() {
    let invalid = |k: ThreadKernelBuilder, words: &str| {
        let (kind, _, text) = fault(run(&k.finish_unverified(), [1, 1, 1], 64).unwrap_err());
        assert_eq!(kind, FaultKind::InvalidIr, "{text}");
        assert!(text.contains(words), "expected {words:?} in: {text}");
    };
    // A grid axis beyond z.
    let mut k = kernel(1, 4);
    let (pid, tid) = (k.special(Special::ProgramId(5)), k.thread_id());
    k.store(vec![pid], OUT, tid, None);
    invalid(k, "grid axis 5 is not 0, 1 or 2");
    // Lanes are taken modulo the warp size as a bit mask.
    let mut k = kernel(2, 6);
    let tid = k.thread_id();
    let v = k.set(I32, Expr::ShuffleXor { value: tid, mask: 5 });
    k.store(vec![v], OUT, tid, None);
    invalid(k, "the warp size (6) must be a power of two");
    // num_warps * warp_size overflows a u32.
    invalid(
        kernel(1 << 31, 1 << 31),
        "4611686018427387904 threads per program; at most 65536",
    );
    // The size of shared memory overflows a u32.
    let mut k = kernel(1, 4);
    k.shared(F32, u32::MAX);
    invalid(k, "17179869184 bytes of shared memory do not fit a u32");
}

/// Thread t writes out[t]; then thread t reads out[(t + 8) % 16] (another warp's, with warps
/// of 8), with or without a barrier between; or every thread adds 1 to out[0] atomically and
/// then reads it.
fn global_exchange(barrier: bool, atomics: bool) -> ThreadKernel {
    let mut k = kernel(2, 8);
    let tid = k.thread_id();
    let (zero, one) = (k.int(I32, 0), k.int(I32, 1));
    let at = if atomics {
        let old = k.reg(I32);
        k.push(Stmt::Atomic {
            dst: old,
            op: rutile_ir::ir::AtomicOp::Add,
            param: 0,
            index: zero,
            value: one,
            pred: None,
            order: Default::default(),
        });
        zero
    } else {
        k.store(vec![tid], OUT, tid, None);
        let (eight, mask) = (k.int(I32, 8), k.int(I32, 15));
        let shifted = k.bin(BinaryOp::Add, tid, eight);
        k.bin(BinaryOp::And, shifted, mask)
    };
    if barrier {
        k.push(Stmt::Barrier);
    }
    let r = k.reg(I32);
    k.push(Stmt::Load {
        dsts: vec![r],
        mem: OUT,
        index: at,
        pred: None,
        cache: CacheModifier::Default,
    });
    let sixteen = k.int(I32, 16);
    let out_at = k.bin(BinaryOp::Add, tid, sixteen);
    k.store(vec![r], OUT, out_at, None);
    k.finish()
}

#[test]
fn global_memory_across_warps_needs_barriers_too() {
    let out = run(&global_exchange(true, false), [1, 1, 1], 32).unwrap();
    assert_eq!(out[16..], (0..16).map(|t| (t + 8) % 16).collect::<Vec<i32>>());
    let (kind, thread, text) = fault(run(&global_exchange(false, false), [1, 1, 1], 32).unwrap_err());
    assert_eq!((kind, thread), (FaultKind::MissingBarrier, Some(0)));
    assert!(
        text.contains("warp 0 reads element 8 of buffer 0 (`out`), which another thread wrote"),
        "{text}"
    );
    // Atomics do not race with each other, but a read after them does.
    assert_eq!(
        run(&global_exchange(true, true), [1, 1, 1], 32).unwrap()[16..],
        [16; 16]
    );
    let (kind, _, text) = fault(run(&global_exchange(false, true), [1, 1, 1], 32).unwrap_err());
    assert_eq!(kind, FaultKind::MissingBarrier);
    assert!(text.contains("which another thread updated atomically"), "{text}");
}

/// Buffers that share bytes (`ThreadKernel::shared_offsets`, where the backend reuses
/// shared memory) are checked at run time to be in use in different barrier epochs: a copy
/// into the first that lands only after the barrier between them (its wait comes after it)
/// is reported, the same kernel with the wait before the barrier runs.
#[test]
fn buffers_sharing_bytes_must_be_apart_by_a_barrier() {
    let build = |wait_first: bool| {
        let mut b = ThreadKernelBuilder::new("alias", 1, 32);
        let src = b.ptr("src", F32);
        let dst = b.ptr("dst", F32);
        let first = b.shared(F32, 32);
        let second = b.shared(F32, 32);
        let tid = b.thread_id();
        b.push(Stmt::AsyncCopy {
            alloc: first,
            dst: tid,
            param: src,
            src: tid,
            len: 1,
            pred: None,
        });
        b.push(Stmt::AsyncCommit);
        if wait_first {
            b.push(Stmt::AsyncWait { pending: 0 });
        }
        b.push(Stmt::Barrier);
        if !wait_first {
            b.push(Stmt::AsyncWait { pending: 0 });
        }
        let v = b.float(F32, 2.0);
        b.store(vec![v], Memory::Shared { alloc: second }, tid, None);
        let back = b.load(F32, 1, Memory::Shared { alloc: second }, tid, None);
        b.store(back, Memory::Global { param: dst }, tid, None);
        let mut k = b.finish();
        k.reuse_shared = rutile_ir::target::SharedReuse::Any;
        k
    };
    let run = |k: &ThreadKernel| {
        let mut buffers = vec![HostBuffer::from_slice(&[1.0f32; 32]), HostBuffer::zeros(F32, 32)];
        let args = [
            ArgValue::Ptr { buffer: 0, offset: 0 },
            ArgValue::Ptr { buffer: 1, offset: 0 },
        ];
        run_threads(k, [1, 1, 1], &args, &mut buffers)
    };
    for wait_first in [true, false] {
        let k = build(wait_first);
        assert_eq!(k.shared_offsets(), vec![0, 0], "the two buffers share bytes");
        let result = run(&k);
        assert_eq!(
            result.is_ok(),
            wait_first,
            "wait before the barrier: {wait_first}: {result:?}"
        );
    }
}

/// Transient buffers used only inside a loop share bytes where barriers in its body keep
/// them apart, between them and around the iteration (`SharedAlloc::transient`). The
/// simulator checks what that layout assumes element by element: a buffer marked transient
/// that carries what it holds into the next iteration (so it is not) reads bytes the other
/// buffer overwrote in between, and the run reports it; not marked transient, it gets bytes
/// of its own and runs.
#[test]
fn buffers_in_a_loop_share_bytes_apart_by_barriers() {
    // Per iteration: `second` stored and read back by the neighbouring thread; then `first`
    // read (from the iteration before, where there was one) and stored.
    let build = |transient: bool| {
        let mut b = ThreadKernelBuilder::new("loop_alias", 1, 32);
        let dst = b.ptr("dst", F32);
        let first = b.shared(F32, 32);
        let second = b.shared(F32, 32);
        let tid = b.thread_id();
        let (zero, one, three, lanes) = (b.int(I32, 0), b.int(I32, 1), b.int(I32, 3), b.int(I32, 32));
        let i = b.set(I32, Expr::Copy(zero));
        let next = b.bin(BinaryOp::Add, tid, one);
        let neighbour = b.bin(BinaryOp::Rem, next, lanes);
        b.while_(
            |b| b.cmp(CmpOp::Lt, i, three),
            |b| {
                let v = b.float(F32, 2.0);
                b.store(vec![v], Memory::Shared { alloc: second }, tid, None);
                b.push(Stmt::Barrier);
                let x = b.load(F32, 1, Memory::Shared { alloc: second }, neighbour, None);
                b.push(Stmt::Barrier);
                let later = b.cmp(CmpOp::Gt, i, zero);
                let y = b.float(F32, 0.0);
                b.push(Stmt::Load {
                    dsts: vec![y],
                    mem: Memory::Shared { alloc: first },
                    index: tid,
                    pred: Some(later),
                    cache: CacheModifier::default(),
                });
                b.store(vec![y], Memory::Global { param: dst }, tid, Some(later));
                b.store(x, Memory::Shared { alloc: first }, tid, None);
                b.push(Stmt::Barrier);
                b.assign(i, Expr::Binary(BinaryOp::Add, i, one));
            },
        );
        let mut k = b.finish();
        k.reuse_shared = rutile_ir::target::SharedReuse::SameType;
        k.shared[first as usize].transient = transient;
        k.shared[second as usize].transient = true;
        k
    };
    let run = |k: &ThreadKernel| {
        let mut buffers = vec![HostBuffer::zeros(F32, 32)];
        run_threads(k, [1, 1, 1], &[ArgValue::Ptr { buffer: 0, offset: 0 }], &mut buffers)
    };
    let wrong = build(true);
    assert_eq!(wrong.shared_offsets(), vec![0, 0], "apart by barriers in the body");
    // One f32 workgroup array, both buffers at its start (SPIR-V's declaration).
    let arrays = wrong.shared_arrays();
    assert_eq!(
        (arrays.arrays, arrays.of_buffer),
        (vec![(F32, 32)], vec![(0, 0), (0, 0)])
    );
    let (kind, _, text) = fault(run(&wrong).unwrap_err());
    assert_eq!(kind, FaultKind::MissingBarrier, "{text}");
    assert!(
        text.contains("read after shared1, which shares its bytes, overwrote it"),
        "{text}"
    );
    let right = build(false);
    assert_eq!(
        right.shared_offsets(),
        vec![0, 128],
        "a buffer carried across iterations"
    );
    let arrays = right.shared_arrays();
    assert_eq!(
        (arrays.arrays, arrays.of_buffer),
        (vec![(F32, 64)], vec![(0, 0), (0, 32)])
    );
    run(&right).unwrap();
}

/// Under `SharedReuse::SameType` (SPIR-V) each element type has one workgroup array, and
/// only buffers of one type share elements: two unused f32 buffers share the start of the
/// f32 array, the f16 buffer has its own array, placed after it in the one-block offsets.
#[test]
fn buffers_of_different_types_never_share_an_array() {
    let mut b = ThreadKernelBuilder::new("arrays", 1, 32);
    b.shared(F32, 8);
    b.shared(rutile_ir::ScalarType::F16, 16);
    b.shared(F32, 4);
    let mut k = b.finish();
    k.reuse_shared = rutile_ir::target::SharedReuse::SameType;
    let arrays = k.shared_arrays();
    assert_eq!(arrays.arrays, vec![(F32, 8), (rutile_ir::ScalarType::F16, 16)]);
    assert_eq!(arrays.of_buffer, vec![(0, 0), (1, 0), (0, 0)]);
    assert_eq!(k.shared_offsets(), vec![0, 32, 0]);
    assert_eq!(k.shared_bytes(), 64);
    k.reuse_shared = rutile_ir::target::SharedReuse::Never;
    assert_eq!(k.shared_arrays().arrays.len(), 3, "one array per buffer");
}

/// A cooperative store then a cooperative load of the same elements by one subgroup is an
/// exchange: which invocation holds which element is the device's choice (and differs
/// between roles), so it needs a barrier like any other; with one, it runs.
#[test]
fn cooperative_accesses_of_one_subgroup_need_barriers_between_them() {
    use rutile_ir::thread::{CoopMatrix, CoopRole};
    let build = |barrier: bool| {
        let mut k = kernel(1, 32);
        let buf = k.shared(F32, 256);
        let zero = k.int(I32, 0);
        k.push(Stmt::CoopZero { dst: 0 });
        let at = |alloc| (alloc, zero, 16, true);
        let (alloc, index, stride, row_major) = at(buf);
        k.push(Stmt::CoopStore {
            src: 0,
            alloc,
            index,
            stride,
            row_major,
        });
        if barrier {
            k.push(Stmt::Barrier);
        }
        k.push(Stmt::CoopLoad {
            dst: 1,
            alloc,
            index,
            stride,
            row_major,
        });
        let mut t = k.finish_unverified();
        t.coop = vec![
            CoopMatrix {
                role: CoopRole::Acc,
                rows: 16,
                cols: 16,
                elem: F32,
            };
            2
        ];
        t
    };
    run(&build(true), [1, 1, 1], 1).unwrap();
    let (kind, _, text) = fault(run(&build(false), [1, 1, 1], 1).unwrap_err());
    assert_eq!(kind, FaultKind::MissingBarrier, "{text}");
    assert!(text.contains("another thread wrote"), "{text}");
}
