//! TMA stores in the SIMT simulator, on a hand-written per-thread kernel: a staging tile of
//! 8 rows of 64 f16 (128-byte rows, 128-byte swizzle) written by the threads, then copied by
//! thread 0 to a box of a view, clipped to the view's edge; and the faults of a store whose
//! source is written before its read is waited for, that is never waited for, or that reads
//! other threads' writes (of its warp or others) with no barrier between.

use half::f16;
use rutile_ir::interp::simt::run_threads;
use rutile_ir::interp::{ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::layout::SwizzledTile;
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Expr, LaunchValue, Memory, Stmt, TensorMap, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{F16, I32};

/// The view: `D0 x D1` elements, rows `STRIDE` apart.
const D0: i64 = 100;
const D1: i64 = 20;
const STRIDE: i64 = 104;
const ROWS: u32 = 8;
const COLS: u32 = 64;

const SRC: Memory = Memory::Global { param: 0 };
const TILE: Memory = Memory::Shared { alloc: 0 };

#[derive(Clone, Copy)]
struct Case {
    warps: u32,
    barrier: bool,
    wait: bool,
    write_before_wait: bool,
}

const GOOD: Case = Case {
    warps: 2,
    barrier: true,
    wait: true,
    write_before_wait: false,
};

/// Parameters: `src: *f16` (the tile's contents, in its storage order), `out: *f16`, the
/// box's `x` and `y`, the view's `d0`, `d1`, `stride`.
fn kernel(case: Case) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("tma_store", case.warps, 32);
    k.ptr("src", F16);
    k.ptr("out", F16);
    for s in ["x", "y", "d0", "d1", "stride"] {
        k.scalar(s, I32);
    }
    k.shared(F16, ROWS * COLS);
    let tid = k.thread_id();
    let threads = (case.warps * 32) as i64;
    for j in 0..(ROWS * COLS) as i64 / threads {
        let step = k.int(I32, j * threads);
        let e = k.bin(BinaryOp::Add, tid, step);
        let v = k.load(F16, 1, SRC, e, None);
        k.store(v, TILE, e, None);
    }
    k.push(Stmt::FenceProxyAsync);
    if case.barrier {
        k.push(Stmt::Barrier);
    }
    let zero = k.int(I32, 0);
    let first = k.cmp(CmpOp::Eq, tid, zero);
    let x = k.set(I32, Expr::Param(2));
    let y = k.set(I32, Expr::Param(3));
    k.push(Stmt::TmaStore {
        map: 0,
        alloc: 0,
        src: zero,
        coords: vec![x, y],
        pred: Some(first),
    });
    k.push(Stmt::BulkCommit { pred: Some(first) });
    if case.write_before_wait {
        let v = k.float(F16, 3.0);
        k.store(vec![v], TILE, tid, None);
    }
    if case.wait {
        k.push(Stmt::BulkWaitRead {
            alloc: 0,
            pred: Some(first),
        });
    }
    let mut kernel = k.finish_unverified();
    kernel.shared[0].align = 1024;
    kernel.tensor_maps.push(TensorMap {
        param: 1,
        dims: [Some(LaunchValue::Param(4)), Some(LaunchValue::Param(5))],
        stride: LaunchValue::Param(6),
        outer: [None; 3],
        box_dims: [COLS, ROWS],
        swizzle: 128,
    });
    rutile_ir::thread::verify(&kernel).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
    kernel
}

/// Runs `case` with the box at `(x, y)`; returns the view's buffer.
fn run(case: Case, src: &[f16], (x, y): (i64, i64)) -> Result<Vec<f16>, InterpError> {
    let mut buffers = vec![
        HostBuffer::from_slice(src),
        HostBuffer::zeros(F16, (D1 * STRIDE) as usize),
    ];
    let mut args: Vec<ArgValue> = (0..2).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([x, y, D0, D1, STRIDE].map(ArgValue::Int));
    run_threads(&kernel(case), [1, 1, 1], &args, &mut buffers)?;
    Ok(buffers[1].to_vec().unwrap())
}

fn fault_kind(r: Result<Vec<f16>, InterpError>) -> FaultKind {
    match r {
        Err(InterpError::ThreadFault { kind, .. }) => kind,
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn a_box_is_stored_unswizzled_and_clipped_to_the_view() {
    let src = Rng::new(5).f16s((ROWS * COLS) as usize, -4.0, 4.0);
    let tile = SwizzledTile::for_wgmma(ROWS, COLS, 2).unwrap();
    // Inside the view, and across its right and bottom edges (a box's first column is on a
    // 16-byte boundary: 8 f16).
    for (x, y) in [(8, 3), (D0 - 12, D1 - 5)] {
        let out = run(GOOD, &src, (x, y)).unwrap();
        for yy in 0..D1 {
            for xx in 0..STRIDE {
                let (r, c) = (yy - y, xx - x);
                let inside_box = (0..ROWS as i64).contains(&r) && (0..COLS as i64).contains(&c);
                let want = if inside_box && xx < D0 {
                    src[tile.offset(r as u32, c as u32) as usize]
                } else {
                    f16::ZERO
                };
                assert_eq!(
                    out[(yy * STRIDE + xx) as usize],
                    want,
                    "box at ({x}, {y}), element ({xx}, {yy})"
                );
            }
        }
    }
}

#[test]
fn a_box_off_a_16_byte_boundary_is_a_fault() {
    let src = Rng::new(9).f16s((ROWS * COLS) as usize, -4.0, 4.0);
    assert_eq!(fault_kind(run(GOOD, &src, (4, 3))), FaultKind::Misaligned);
}

#[test]
fn a_write_to_the_source_before_the_wait_is_a_fault() {
    let src = Rng::new(6).f16s((ROWS * COLS) as usize, -4.0, 4.0);
    let case = Case {
        write_before_wait: true,
        ..GOOD
    };
    assert_eq!(fault_kind(run(case, &src, (8, 3))), FaultKind::MissingBarrier);
}

#[test]
fn a_store_never_waited_for_is_a_fault() {
    let src = Rng::new(7).f16s((ROWS * COLS) as usize, -4.0, 4.0);
    let case = Case { wait: false, ..GOOD };
    assert_eq!(fault_kind(run(case, &src, (8, 3))), FaultKind::InvalidIr);
}

#[test]
fn a_store_of_other_threads_writes_needs_a_barrier() {
    let src = Rng::new(8).f16s((ROWS * COLS) as usize, -4.0, 4.0);
    let case = Case { barrier: false, ..GOOD };
    assert_eq!(fault_kind(run(case, &src, (8, 3))), FaultKind::MissingBarrier);
    // With one warp too: thread 0 copies what the other threads of its warp wrote, and
    // they need not have written it yet (a warp's threads do not run in step).
    let one = Case { warps: 1, ..GOOD };
    assert!(run(one, &src, (8, 3)).is_ok());
    let one_unordered = Case {
        warps: 1,
        barrier: false,
        ..GOOD
    };
    assert_eq!(fault_kind(run(one_unordered, &src, (8, 3))), FaultKind::MissingBarrier);
}
