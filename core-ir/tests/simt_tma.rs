//! TMA box copies and mbarriers in the SIMT simulator, on hand-written per-thread kernels:
//! where a box lands (swizzled as `SwizzledTile::for_wgmma` stores a tile, zeros outside the
//! view), when it lands (at the wait on its phase, not before), and the faults of barriers
//! that would hang or copies that would misbehave on a GPU.

use half::f16;
use rutile_ir::interp::simt::run_threads;
use rutile_ir::interp::{ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::layout::SwizzledTile;
use rutile_ir::testing::Rng;
use rutile_ir::thread::{
    Expr, LaunchValue, MBarrier, Memory, Reg, Special, Stmt, TensorMap, ThreadKernel, ThreadKernelBuilder,
};
use rutile_ir::ScalarType::{F16, I32, U64};

/// The view: `D0 x D1` elements, rows `STRIDE` apart (a multiple of 16 bytes).
const D0: i64 = 200;
const D1: i64 = 37;
const STRIDE: i64 = 208;
/// Rows of a box.
const BOX_ROWS: u32 = 8;
/// Elements of the tile buffer the boxes land in.
const TILE: u32 = 1024;

const OUT: Memory = Memory::Global { param: 1 };
const COORDS: Memory = Memory::Global { param: 2 };
const TABLE: Memory = Memory::Global { param: 3 };
const TILE_MEM: Memory = Memory::Shared { alloc: 1 };

/// A kernel of one box copy per program, its knobs.
#[derive(Clone, Copy)]
struct Case {
    warps: u32,
    /// Box width in f16s: 64 (rows of 128 bytes, 128-byte swizzle) or 32 (64-byte swizzle).
    box_w: u32,
    /// Bytes the arrival expects; `None`: no arrival.
    arrive: Option<u32>,
    /// The tile element the box goes to.
    dst: i64,
    /// Wait for the box and read it back into `out[..box]`.
    wait: bool,
    /// Store known values into the tile first, and read the box's elements before the wait
    /// into `out[box..]`.
    old_first: bool,
    /// Where box element `i` lands from a host table (`SwizzledTile::offset`), else by the
    /// kernel's own arithmetic (128-byte rows only).
    table: bool,
    /// A `Barrier` between the mbarrier's initialization and its use.
    init_barrier: bool,
    /// The thread that initializes the mbarrier.
    initializer: i64,
    /// The thread that arrives and issues the copy.
    issuer: i64,
    /// Every thread stores to the tile after the copy is issued.
    store_in_flight: bool,
}

impl Default for Case {
    fn default() -> Case {
        Case {
            warps: 1,
            box_w: 64,
            arrive: Some(64 * BOX_ROWS * 2),
            dst: 0,
            wait: true,
            old_first: false,
            table: true,
            init_barrier: true,
            initializer: 0,
            issuer: 0,
            store_in_flight: false,
        }
    }
}

impl Case {
    fn box_len(&self) -> u32 {
        self.box_w * BOX_ROWS
    }
    fn tile(&self) -> SwizzledTile {
        SwizzledTile::for_wgmma(BOX_ROWS, self.box_w, 2).unwrap()
    }
}

fn c(k: &mut ThreadKernelBuilder, v: i64) -> Reg {
    k.int(I32, v)
}

fn bin(k: &mut ThreadKernelBuilder, op: BinaryOp, a: Reg, v: i64) -> Reg {
    let b = c(k, v);
    k.bin(op, a, b)
}

/// The tile element where box element `i` (row-major in the box) lands, from the box's start.
fn landing(k: &mut ThreadKernelBuilder, case: &Case, i: Reg) -> Reg {
    if case.table {
        return k.load(I32, 1, TABLE, i, None)[0];
    }
    assert_eq!(case.box_w, 64);
    // Row r, column c: 16-byte chunk c / 8 goes to chunk (c / 8) ^ (r % 8).
    let r = bin(k, BinaryOp::Div, i, 64);
    let col = bin(k, BinaryOp::Rem, i, 64);
    let chunk = bin(k, BinaryOp::Div, col, 8);
    let phase = bin(k, BinaryOp::Rem, r, 8);
    let swizzled = k.bin(BinaryOp::Xor, chunk, phase);
    let row_at = bin(k, BinaryOp::Mul, r, 64);
    let chunk_at = bin(k, BinaryOp::Mul, swizzled, 8);
    let within = bin(k, BinaryOp::Rem, col, 8);
    let at = k.bin(BinaryOp::Add, row_at, chunk_at);
    k.bin(BinaryOp::Add, at, within)
}

/// Every thread copies its elements of the box (element `tid + j * threads`) from where
/// they land in the tile to `out[p * 2 box + base + i]`.
fn read_box(k: &mut ThreadKernelBuilder, case: &Case, tid: Reg, pid: Reg, base: i64) {
    let threads = (case.warps * 32) as i64;
    let box_len = case.box_len() as i64;
    let out_base = bin(k, BinaryOp::Mul, pid, 2 * box_len);
    let out_base = bin(k, BinaryOp::Add, out_base, base);
    for j in 0..box_len / threads {
        let i = bin(k, BinaryOp::Add, tid, j * threads);
        let at = landing(k, case, i);
        let at = bin(k, BinaryOp::Add, at, case.dst);
        let v = k.load(F16, 1, TILE_MEM, at, None);
        let o = k.bin(BinaryOp::Add, out_base, i);
        k.store(v, OUT, o, None);
    }
}

/// Parameters: `src: *f16`, `out: *f16`, `coords: *i32` (x, y per program), `table: *i32`,
/// then the view's `d0`, `d1` and `stride`. Shared buffers: the mbarrier, the tile.
fn box_kernel(case: &Case) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("tma_box", case.warps, 32);
    k.ptr("src", F16);
    k.ptr("out", F16);
    k.ptr("coords", I32);
    k.ptr("table", I32);
    k.scalar("d0", I32);
    k.scalar("d1", I32);
    k.scalar("stride", I32);
    k.shared(U64, 1);
    k.shared(F16, TILE);
    let tid = k.thread_id();
    let zero = c(&mut k, 0);
    let issuer = c(&mut k, case.issuer);
    let issues = k.cmp(CmpOp::Eq, tid, issuer);
    let initializer = c(&mut k, case.initializer);
    let initializes = k.cmp(CmpOp::Eq, tid, initializer);
    let bar = MBarrier { alloc: 0, index: zero };
    k.push(Stmt::MbarrierInit {
        bar,
        count: 1,
        pred: Some(initializes),
    });
    if case.old_first {
        // tile[e] = e + 1, every element.
        let threads = (case.warps * 32) as i64;
        for j in 0..TILE as i64 / threads {
            let e = bin(&mut k, BinaryOp::Add, tid, j * threads);
            let e1 = bin(&mut k, BinaryOp::Add, e, 1);
            let v = k.set(F16, Expr::Cast(e1));
            k.store(vec![v], TILE_MEM, e, None);
        }
    }
    if case.init_barrier {
        k.push(Stmt::Barrier);
    }
    let pid = k.special(Special::ProgramId(0));
    let at = bin(&mut k, BinaryOp::Mul, pid, 2);
    let cx = k.load(I32, 1, COORDS, at, None)[0];
    let at1 = bin(&mut k, BinaryOp::Add, at, 1);
    let cy = k.load(I32, 1, COORDS, at1, None)[0];
    if let Some(bytes) = case.arrive {
        k.push(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes,
            pred: Some(issues),
        });
    }
    let dst = c(&mut k, case.dst);
    k.push(Stmt::TmaLoad {
        map: 0,
        alloc: 1,
        dst,
        coords: vec![cx, cy],
        bar,
        pred: Some(issues),
    });
    if case.store_in_flight {
        let v = k.float(F16, 3.0);
        k.store(vec![v], TILE_MEM, tid, None);
    }
    if case.old_first {
        read_box(&mut k, case, tid, pid, case.box_len() as i64);
    }
    if case.wait {
        let parity = c(&mut k, 0);
        k.push(Stmt::MbarrierWait { bar, parity });
        read_box(&mut k, case, tid, pid, 0);
        k.push(Stmt::MbarrierInval {
            bar,
            pred: Some(issues),
        });
    }
    let mut kernel = k.finish_unverified();
    kernel.shared[1].align = 1024;
    kernel.tensor_maps.push(TensorMap {
        param: 0,
        dims: [Some(LaunchValue::Param(4)), Some(LaunchValue::Param(5))],
        stride: LaunchValue::Param(6),
        outer: [None; 3],
        box_dims: [case.box_w, BOX_ROWS],
        swizzle: case.box_w * 2,
    });
    rutile_ir::thread::verify(&kernel).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
    kernel
}

/// Random non-zero data of the view's buffer.
fn source(rng: &mut Rng) -> Vec<f16> {
    rng.f16s((D1 * STRIDE) as usize, -4.0, 4.0)
}

/// Runs `case` with one program per coordinate pair; returns `out` (per program, the box
/// after the wait, then before it).
fn run_case(case: &Case, src: &[f16], coords: &[(i32, i32)]) -> Result<Vec<f16>, InterpError> {
    let kernel = box_kernel(case);
    let tile = case.tile();
    let table: Vec<i32> = (0..case.box_len())
        .map(|i| tile.offset(i / case.box_w, i % case.box_w) as i32)
        .collect();
    let flat: Vec<i32> = coords.iter().flat_map(|&(x, y)| [x, y]).collect();
    let mut buffers = vec![
        HostBuffer::from_slice(src),
        HostBuffer::zeros(F16, coords.len() * 2 * case.box_len() as usize),
        HostBuffer::from_slice(&flat),
        HostBuffer::from_slice(&table),
    ];
    let mut args: Vec<ArgValue> = (0..4).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([D0, D1, STRIDE].map(ArgValue::Int));
    run_threads(&kernel, [coords.len() as u32, 1, 1], &args, &mut buffers)?;
    Ok(buffers[1].to_vec().unwrap())
}

/// The box at `(x, y)` of width `w`, row-major: the view's elements, zeros outside it.
fn reference(src: &[f16], (x, y): (i32, i32), w: u32) -> Vec<f16> {
    let mut out = Vec::new();
    for by in 0..BOX_ROWS as i64 {
        for bx in 0..w as i64 {
            let (gx, gy) = (x as i64 + bx, y as i64 + by);
            let inside = (0..D0).contains(&gx) && (0..D1).contains(&gy);
            out.push(if inside {
                src[(gy * STRIDE + gx) as usize]
            } else {
                f16::ZERO
            });
        }
    }
    out
}

/// Coordinates of a box inside the view, one past its right and bottom edges, and one
/// before its left and top edges.
fn coords(w: u32) -> Vec<(i32, i32)> {
    vec![(8, 3), (D0 as i32 - w as i32 / 2 - 8, D1 as i32 - 5), (-24, -3)]
}

fn check_boxes(case: &Case, seed: u64) {
    let mut rng = Rng::new(seed);
    let src = source(&mut rng);
    let coords = coords(case.box_w);
    let out = run_case(case, &src, &coords).unwrap_or_else(|e| panic!("{e}"));
    let n = case.box_len() as usize;
    for (p, &at) in coords.iter().enumerate() {
        let want = reference(&src, at, case.box_w);
        // Zero fill is tested where the box leaves the view, data everywhere.
        let zeros = want.iter().filter(|v| v.to_f32() == 0.0).count();
        assert_eq!(zeros == 0, p == 0, "box {at:?} has {zeros} zeros");
        let got = &out[2 * n * p..2 * n * p + n];
        for i in 0..n {
            assert_eq!(got[i].to_bits(), want[i].to_bits(), "box {at:?}, element {i}");
        }
    }
}

#[test]
fn a_box_lands_swizzled_on_one_warp() {
    // The kernel undoes the swizzle with its own arithmetic.
    check_boxes(
        &Case {
            table: false,
            ..Case::default()
        },
        1,
    );
}

#[test]
fn a_box_lands_swizzled_on_four_warps() {
    // Every warp reads the box with no barrier after the wait; where it lands is the wgmma
    // tile's `SwizzledTile::offset`.
    check_boxes(
        &Case {
            warps: 4,
            ..Case::default()
        },
        2,
    );
}

#[test]
fn a_box_of_64_byte_rows_lands_as_the_wgmma_tile_of_that_swizzle() {
    check_boxes(
        &Case {
            warps: 2,
            box_w: 32,
            arrive: Some(32 * BOX_ROWS * 2),
            ..Case::default()
        },
        3,
    );
}

#[test]
fn the_swizzle_is_the_wgmma_tiles() {
    // Byte l of a box of 128-byte rows lands on l ^ (((l >> 7) & 7) << 4): chunk c of row r
    // on chunk c ^ (r % 8), as the tile stores element (r, col).
    let tile = SwizzledTile::for_wgmma(8, 64, 2).unwrap();
    for r in 0..8u32 {
        for col in 0..64u32 {
            let l = (r * 64 + col) * 2;
            let swizzled = l ^ (((l >> 7) & 7) << 4);
            assert_eq!(swizzled / 2, tile.offset(r, col), "({r}, {col})");
        }
    }
}

#[test]
fn the_destination_before_the_wait_holds_its_old_contents() {
    let mut rng = Rng::new(4);
    let src = source(&mut rng);
    let case = Case {
        warps: 2,
        old_first: true,
        dst: 512,
        ..Case::default()
    };
    let at = (40, 10);
    let out = run_case(&case, &src, &[at]).unwrap_or_else(|e| panic!("{e}"));
    let (n, tile) = (case.box_len() as usize, case.tile());
    let want = reference(&src, at, 64);
    for i in 0..n {
        let (r, col) = (i as u32 / 64, i as u32 % 64);
        let e = 512 + tile.offset(r, col);
        // Before: what the kernel stored there (e + 1); after: the box's element.
        assert_eq!(out[n + i].to_f32(), (e + 1) as f32, "element {i} before the wait");
        assert_eq!(out[i].to_bits(), want[i].to_bits(), "element {i} after the wait");
        assert_ne!(out[i].to_bits(), out[n + i].to_bits(), "element {i}");
    }
}

fn fault(r: Result<Vec<f16>, InterpError>) -> (FaultKind, String) {
    match r {
        Err(e @ InterpError::ThreadFault { kind, .. }) => (kind, e.to_string()),
        Err(e) => panic!("expected a thread fault, got {e}"),
        Ok(_) => panic!("expected a thread fault, the kernel ran"),
    }
}

fn run_one(case: &Case) -> Result<Vec<f16>, InterpError> {
    let mut rng = Rng::new(5);
    run_case(case, &source(&mut rng), &[(16, 4)])
}

#[test]
fn a_wait_with_no_arrival_would_hang() {
    let (kind, message) = fault(run_one(&Case {
        arrive: None,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(message.contains("hang"), "{message}");
    assert!(message.contains("0 of 1 arrivals"), "{message}");
    assert!(message.contains("mbarrier 0 of shared0"), "{message}");
}

#[test]
fn expected_bytes_must_be_the_copies() {
    for expected in [512, 2048] {
        let (kind, message) = fault(run_one(&Case {
            arrive: Some(expected),
            ..Case::default()
        }));
        assert_eq!(kind, FaultKind::InvalidIr, "{message}");
        assert!(
            message.contains(&format!("copies of 1024 bytes against {expected} expected")),
            "{message}"
        );
    }
    // The right count runs.
    run_one(&Case::default()).unwrap();
}

#[test]
fn a_copy_never_waited_for_is_reported() {
    let (kind, message) = fault(run_one(&Case {
        wait: false,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(message.contains("never completed"), "{message}");
}

#[test]
fn the_destination_starts_where_the_swizzle_repeats() {
    // 128-byte swizzle: a multiple of 1024 bytes (512 f16s).
    run_one(&Case {
        dst: 512,
        ..Case::default()
    })
    .unwrap();
    for dst in [64, 256] {
        let (kind, message) = fault(run_one(&Case { dst, ..Case::default() }));
        assert_eq!(kind, FaultKind::Misaligned, "{message}");
    }
    // A box that runs past the tile.
    let (kind, message) = fault(run_one(&Case {
        dst: 1024,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::OutOfBounds, "{message}");
}

#[test]
fn an_mbarrier_is_published_by_a_barrier() {
    // Without the barrier after its initialization, another warp may not arrive on it...
    let (kind, message) = fault(run_one(&Case {
        warps: 2,
        issuer: 32,
        init_barrier: false,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::MissingBarrier, "{message}");
    assert!(message.contains("warp 1 uses"), "{message}");
    // ...nor a copy count on it, even one issued by the initializing thread.
    let (kind, message) = fault(run_one(&Case {
        init_barrier: false,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::MissingBarrier, "{message}");
    assert!(message.contains("a TMA copy uses"), "{message}");
    // With it, another warp's thread may.
    run_one(&Case {
        warps: 2,
        issuer: 32,
        ..Case::default()
    })
    .unwrap();
}

#[test]
fn a_store_to_a_destination_in_flight_races_with_the_copy() {
    let (kind, message) = fault(run_one(&Case {
        store_in_flight: true,
        ..Case::default()
    }));
    assert_eq!(kind, FaultKind::MissingBarrier, "{message}");
    assert!(message.contains("in flight"), "{message}");
}

/// Two phases of one mbarrier on 2 warps: phase 0 counts two copies (boxes at `(x, y)` and
/// `(x, y + 8)`, one per issuing thread, 2048 bytes), phase 1 one (at `(x2, y2)`); `out`
/// gets the two boxes of phase 0, then the box of phase 1.
fn two_phases(x: i32, y: i32, x2: i32, y2: i32, tail: impl FnOnce(&mut ThreadKernelBuilder, MBarrier)) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("tma_phases", 2, 32);
    k.ptr("src", F16);
    k.ptr("out", F16);
    k.ptr("table", I32);
    k.scalar("d0", I32);
    k.scalar("d1", I32);
    k.scalar("stride", I32);
    k.shared(U64, 4);
    k.shared(F16, TILE);
    let tid = k.thread_id();
    let (zero, one, two) = (c(&mut k, 0), c(&mut k, 1), c(&mut k, 2));
    let first = k.cmp(CmpOp::Eq, tid, zero);
    let first_two = k.cmp(CmpOp::Lt, tid, two);
    // Element 3 of the buffer, to see that the index counts.
    let three = c(&mut k, 3);
    let bar = MBarrier { alloc: 0, index: three };
    k.push(Stmt::MbarrierInit {
        bar,
        count: 1,
        pred: Some(first),
    });
    k.push(Stmt::Barrier);
    k.push(Stmt::MbarrierArriveExpectTx {
        bar,
        bytes: 2048,
        pred: Some(first),
    });
    // Thread b copies box b to tile element 512 b.
    let dst = bin(&mut k, BinaryOp::Mul, tid, 512);
    let cx = c(&mut k, x as i64);
    let dy = bin(&mut k, BinaryOp::Mul, tid, 8);
    let cy = bin(&mut k, BinaryOp::Add, dy, y as i64);
    k.push(Stmt::TmaLoad {
        map: 0,
        alloc: 1,
        dst,
        coords: vec![cx, cy],
        bar,
        pred: Some(first_two),
    });
    k.push(Stmt::MbarrierWait { bar, parity: zero });
    // out[e] = tile[e] for the 1024 elements of the two boxes, as they lie in the tile.
    let copy_tile = |k: &mut ThreadKernelBuilder, elems: i64, out_base: i64| {
        for j in 0..elems / 64 {
            let e = bin(k, BinaryOp::Add, tid, j * 64);
            let v = k.load(F16, 1, TILE_MEM, e, None);
            let o = bin(k, BinaryOp::Add, e, out_base);
            k.store(v, OUT, o, None);
        }
    };
    copy_tile(&mut k, 1024, 0);
    // Every warp has read the tile before the next copy overwrites it.
    k.push(Stmt::Barrier);
    k.push(Stmt::MbarrierArriveExpectTx {
        bar,
        bytes: 1024,
        pred: Some(first),
    });
    let cx2 = c(&mut k, x2 as i64);
    let cy2 = c(&mut k, y2 as i64);
    k.push(Stmt::TmaLoad {
        map: 0,
        alloc: 1,
        dst: zero,
        coords: vec![cx2, cy2],
        bar,
        pred: Some(first),
    });
    k.push(Stmt::MbarrierWait { bar, parity: one });
    copy_tile(&mut k, 512, 1024);
    tail(&mut k, bar);
    let mut kernel = k.finish_unverified();
    kernel.shared[1].align = 1024;
    kernel.tensor_maps.push(TensorMap {
        param: 0,
        dims: [Some(LaunchValue::Param(3)), Some(LaunchValue::Param(4))],
        stride: LaunchValue::Param(5),
        outer: [None; 3],
        box_dims: [64, BOX_ROWS],
        swizzle: 128,
    });
    rutile_ir::thread::verify(&kernel).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
    kernel
}

fn run_phases(kernel: &ThreadKernel, src: &[f16]) -> Result<Vec<f16>, InterpError> {
    let mut buffers = vec![
        HostBuffer::from_slice(src),
        HostBuffer::zeros(F16, 1536),
        HostBuffer::zeros(I32, 1),
    ];
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([D0, D1, STRIDE].map(ArgValue::Int));
    run_threads(kernel, [1, 1, 1], &args, &mut buffers)?;
    Ok(buffers[1].to_vec().unwrap())
}

#[test]
fn one_mbarrier_counts_two_phases() {
    let mut rng = Rng::new(6);
    let src = source(&mut rng);
    let (x, y, x2, y2) = (100, 20, 150, -2);
    // Waits on the phases already completed return at once: parity 1 is the last one.
    let kernel = two_phases(x, y, x2, y2, |k, bar| {
        let one = c(k, 1);
        k.push(Stmt::MbarrierWait { bar, parity: one });
    });
    let out = run_phases(&kernel, &src).unwrap_or_else(|e| panic!("{e}"));
    let tile = SwizzledTile::for_wgmma(8, 64, 2).unwrap();
    let boxes = [((x, y), 0), ((x, y + 8), 512), ((x2, y2), 1024)];
    for (at, base) in boxes {
        let want = reference(&src, at, 64);
        for i in 0..512u32 {
            let e = base + tile.offset(i / 64, i % 64) as usize;
            assert_eq!(out[e].to_bits(), want[i as usize].to_bits(), "box {at:?}, element {i}");
        }
    }
    // Phase 2 (parity 0 again) has no arrival: waiting for it would hang.
    let kernel = two_phases(x, y, x2, y2, |k, bar| {
        let zero = c(k, 0);
        k.push(Stmt::MbarrierWait { bar, parity: zero });
    });
    let (kind, message) = fault(run_phases(&kernel, &src));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(message.contains("phase 0 of mbarrier 3 of shared0"), "{message}");
}

#[test]
fn a_live_mbarrier_is_not_memory() {
    let src = source(&mut Rng::new(7));
    // A load of the mbarrier's element while it is live.
    let kernel = two_phases(0, 0, 0, 0, |k, _| {
        let three = c(k, 3);
        k.load(U64, 1, Memory::Shared { alloc: 0 }, three, None);
    });
    let (kind, message) = fault(run_phases(&kernel, &src));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(message.contains("live mbarrier"), "{message}");
    // After `mbarrier.inval` its bytes are memory again (written before they are read).
    let kernel = two_phases(0, 0, 0, 0, |k, bar| {
        let tid = k.thread_id();
        let zero = c(k, 0);
        let first = k.cmp(CmpOp::Eq, tid, zero);
        k.push(Stmt::MbarrierInval { bar, pred: Some(first) });
        let three = c(k, 3);
        let v = k.int(U64, 9);
        k.store(vec![v], Memory::Shared { alloc: 0 }, three, Some(first));
        k.push(Stmt::Barrier);
        k.load(U64, 1, Memory::Shared { alloc: 0 }, three, None);
    });
    run_phases(&kernel, &src).unwrap_or_else(|e| panic!("{e}"));
    // Invalidating it with a copy pending is a fault.
    let kernel = two_phases(0, 0, 0, 0, |k, bar| {
        let tid = k.thread_id();
        let zero = c(k, 0);
        let first = k.cmp(CmpOp::Eq, tid, zero);
        k.push(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: 1024,
            pred: Some(first),
        });
        k.push(Stmt::MbarrierInval { bar, pred: Some(first) });
    });
    let (kind, message) = fault(run_phases(&kernel, &src));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(
        message.contains("invalidated while its phase has 1 arrivals"),
        "{message}"
    );
}

#[test]
fn arrivals_and_initializations_are_counted() {
    let src = source(&mut Rng::new(8));
    // A second arrival on a phase that expects one, while its bytes are still due.
    let kernel = two_phases(0, 0, 0, 0, |k, bar| {
        let tid = k.thread_id();
        let two = c(k, 2);
        let first_two = k.cmp(CmpOp::Lt, tid, two);
        k.push(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: 16,
            pred: Some(first_two),
        });
    });
    let (kind, message) = fault(run_phases(&kernel, &src));
    assert_eq!(kind, FaultKind::InvalidIr, "{message}");
    assert!(message.contains("past the 1 its phase expects"), "{message}");
    // Two threads initializing the same mbarrier.
    let kernel = two_phases(0, 0, 0, 0, |k, bar| {
        let tid = k.thread_id();
        let two = c(k, 2);
        let first_two = k.cmp(CmpOp::Lt, tid, two);
        k.push(Stmt::MbarrierInit {
            bar,
            count: 1,
            pred: Some(first_two),
        });
    });
    let (kind, message) = fault(run_phases(&kernel, &src));
    assert_eq!(kind, FaultKind::RacingStores, "{message}");
    // An arrival with nothing in flight completes its phase at once, so a second one is the
    // next phase's: phases 2 and 3 complete, and the wait for parity 1 (phase 3) returns.
    let kernel = two_phases(0, 0, 0, 0, |k, bar| {
        let tid = k.thread_id();
        let zero = c(k, 0);
        let first = k.cmp(CmpOp::Eq, tid, zero);
        for _ in 0..2 {
            k.push(Stmt::MbarrierArriveExpectTx {
                bar,
                bytes: 0,
                pred: Some(first),
            });
        }
        let one = c(k, 1);
        k.push(Stmt::MbarrierWait { bar, parity: one });
    });
    run_phases(&kernel, &src).unwrap_or_else(|e| panic!("{e}"));
}
