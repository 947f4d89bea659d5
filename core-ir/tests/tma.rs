//! The pipeline's TMA copies (`lower::tma`): which loads the lowering proves to be boxes of a
//! tensor, the tensor maps it asks the runtime for, and the matmul seed through them in the
//! simulator (which lands a box only at the wait on its mbarrier's phase) against the
//! interpreter, on ragged M and N. The epilogue's store of the result goes through TMA too
//! (`lower::tma_store`): the simulator copies its boxes from the staging tile, clipped to
//! the tensor, and faults a write to the tile before the copy's read is waited for.

use rutile_ir::lower::{lower, LowerError};
use rutile_ir::seeds::{matmul, MatmulMeta};
use rutile_ir::target::Target;
use rutile_ir::testing::{assert_close_to_largest, float_buffer, row_major_matmul_args, runtime_spec, Rng};
use rutile_ir::thread::{LaunchValue, Memory, Stmt, ThreadKernel};
use rutile_ir::ScalarType;

fn hopper(num_warps: u32, stages: u32, tma: bool) -> Target {
    Target {
        mma_sync: true,
        wgmma: true,
        tma,
        async_copy: true,
        num_stages: stages,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

fn count(tk: &ThreadKernel, f: impl Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    tk.walk(&mut |s| n += f(s) as usize);
    n
}

#[test]
fn the_seed_s_operands_are_boxes() {
    let meta = MatmulMeta::fp16(128, 256, 64);
    let kernel = matmul(&meta).unwrap();
    let args = row_major_matmul_args(1000, 1008, 512);
    let tk = lower(&kernel, &hopper(8, 4, true), &runtime_spec(&args)).unwrap();
    // Both through TMA. A: a view of K x M elements (columns first), rows stride_am apart, in
    // one 64 x 128 box (rows in order: the accumulator's layout carries the warpgroup MMA's
    // row order). B: N x K, rows stride_bk apart, in 64 x 64 boxes (128-byte rows; the tile's
    // 256 columns in 4 boxes).
    // And C: the epilogue's store is a box too (N x M, rows stride_cm apart), stored from a
    // staging tile by 4 boxes of 64 x 128.
    assert_eq!(tk.tensor_maps.len(), 3, "{:?}", tk.tensor_maps);
    let a = tk.tensor_maps[0];
    assert_eq!(
        (a.param, a.dims, a.stride),
        (
            0,
            [Some(LaunchValue::Param(5)), Some(LaunchValue::Param(3))],
            LaunchValue::Param(6)
        )
    );
    assert_eq!((a.box_dims, a.swizzle), ([64, 128], 128));
    let b = tk.tensor_maps[1];
    assert_eq!(
        (b.param, b.dims, b.stride),
        (
            1,
            [Some(LaunchValue::Param(4)), Some(LaunchValue::Param(5))],
            LaunchValue::Param(8)
        )
    );
    assert_eq!((b.box_dims, b.swizzle), ([64, 64], 128));
    let c = tk.tensor_maps[2];
    assert_eq!(
        (c.param, c.dims, c.stride),
        (
            2,
            [Some(LaunchValue::Param(4)), Some(LaunchValue::Param(3))],
            LaunchValue::Param(10)
        )
    );
    assert_eq!((c.box_dims, c.swizzle), ([64, 128], 128));
    assert!(count(&tk, |s| matches!(s, Stmt::TmaLoad { .. })) > 0);
    assert_eq!(count(&tk, |s| matches!(s, Stmt::AsyncCopy { .. })), 0);
    assert_eq!(count(&tk, |s| matches!(s, Stmt::TmaStore { .. })), 4);
    assert_eq!(count(&tk, |s| matches!(s, Stmt::BulkWaitRead { .. })), 1);
    assert_eq!(
        count(&tk, |s| matches!(
            s,
            Stmt::Store {
                mem: Memory::Global { .. },
                ..
            }
        )),
        0
    );
}

#[test]
fn without_tma_stores_the_epilogue_keeps_the_exchange() {
    let meta = MatmulMeta::fp16(128, 256, 64);
    let kernel = matmul(&meta).unwrap();
    let args = row_major_matmul_args(1000, 1008, 512);
    let target = Target {
        tma_store: false,
        ..hopper(8, 4, true)
    };
    let tk = lower(&kernel, &target, &runtime_spec(&args)).unwrap();
    // The operands' maps only; C leaves through 16-byte global stores.
    assert_eq!(tk.tensor_maps.len(), 2, "{:?}", tk.tensor_maps);
    assert!(count(&tk, |s| matches!(s, Stmt::TmaLoad { .. })) > 0);
    assert_eq!(
        count(&tk, |s| matches!(s, Stmt::TmaStore { .. } | Stmt::BulkWaitRead { .. })),
        0
    );
    assert!(
        count(&tk, |s| matches!(
            s,
            Stmt::Store {
                mem: Memory::Global { .. },
                ..
            }
        )) > 0
    );
}

/// An f32 result tile of 128 x 256 needs 128 KiB of shared memory to leave by (the TMA
/// store's staging tile, or the exchange's), which cannot share bytes with the operand ring
/// that a warp-specialized producer keeps filling for the next tile: beside 3 stages of the
/// ring it does not fit the H100's 227 KiB, and the lowering says so (the autotuner skips
/// such a configuration); beside 2 it fits and leaves through TMA.
#[test]
fn an_f32_tile_beside_a_deep_specialized_ring_is_out_of_shared_memory() {
    let args = row_major_matmul_args(4096, 16, 4096);
    let meta = MatmulMeta {
        output: ScalarType::F32,
        ..MatmulMeta::fp16(128, 256, 64)
    };
    let kernel = matmul(&meta).unwrap();
    let target = |stages, tma_store| Target {
        persistent: true,
        warp_specialize: true,
        tma_store,
        ..hopper(8, stages, true)
    };
    for tma_store in [true, false] {
        match lower(&kernel, &target(3, tma_store), &runtime_spec(&args)) {
            Err(e @ LowerError::OutOfSharedMemory { .. }) => {
                assert!(
                    e.to_string().contains("matmul_kernel") && e.to_string().contains("232448"),
                    "{e}"
                )
            }
            r => panic!(
                "TMA store {tma_store}: expected OutOfSharedMemory, got {:?}",
                r.map(|t| t.shared_bytes())
            ),
        }
    }
    let tk = lower(&kernel, &target(2, true), &runtime_spec(&args)).unwrap();
    assert!(tk.shared_bytes() <= 232448, "{}", tk.shared_bytes());
    assert_eq!(count(&tk, |s| matches!(s, Stmt::TmaStore { .. })), 8);
}

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::seeds::{matmul_grid, Activation};
use rutile_ir::ScalarType::{BF16, F16, F32};

/// The matmul seed of `meta` on `m x n x k` (B column-major where `b_col`), lowered for
/// `target`, in the simulator against the interpreter; returns the tensor maps' count.
fn check(
    meta: &MatmulMeta,
    (m, n, k): (usize, usize, usize),
    b_col: bool,
    target: &Target,
    rng: &mut Rng,
    tol: f64,
) -> usize {
    let kernel = matmul(meta).unwrap();
    let buffers = vec![
        float_buffer(rng, meta.input, m * k),
        float_buffer(rng, meta.input, k * n),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let (sbk, sbn) = if b_col { (1, k) } else { (n, 1) };
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([m, n, k, k, 1, sbk, sbn, n, 1].iter().map(|&v| ArgValue::Int(v as i64)));
    let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    let tk = lower(&kernel, target, &runtime_spec(&args)).unwrap();
    let at = format!(
        "{}x{}x{} blocks, {} warps, {} stages, {m}x{n}x{k}, B column-major {b_col}",
        meta.block_m, meta.block_n, meta.block_k, target.num_warps, target.num_stages
    );
    let mut got = buffers.clone();
    simt::run_threads(&tk, grid, &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_close_to_largest(&got[2], &want[2], tol, &at);
    tk.tensor_maps.len()
}

/// Ragged M and N (B's wrapped columns read as zeros past the edge), K shorter than
/// the ring and K not a multiple of the block (the mask's bound), f16 and bf16, leaky ReLU,
/// B column-major: the same results as the interpreter.
#[test]
fn matmul_through_tma_matches_the_interpreter() {
    let mut rng = Rng::new(77);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    let t = |warps, stages| hopper(warps, stages, true);
    assert_eq!(
        check(&f32_out(128, 256, 64), (200, 272, 192), false, &t(8, 4), &mut rng, 1e-5),
        3
    );
    assert_eq!(
        check(&f32_out(128, 256, 64), (130, 256, 80), false, &t(8, 4), &mut rng, 1e-5),
        3
    );
    assert_eq!(
        check(&f32_out(64, 128, 32), (100, 144, 96), false, &t(4, 3), &mut rng, 1e-5),
        3
    );
    assert_eq!(
        check(&f32_out(128, 128, 64), (128, 128, 32), false, &t(8, 2), &mut rng, 1e-5),
        3
    );
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(128, 128, 64)
    };
    assert_eq!(check(&relu, (130, 160, 208), false, &t(8, 4), &mut rng, 2e-3), 3);
    // Results are stored through TMA, f32 ones above (a thread's columns span two 16-byte
    // chunks, its own chunk entering the swizzle) and f16 ones (the seed's own): ragged M
    // and N, the staging tile's boxes clipped to the tensor.
    let f16_out = MatmulMeta::fp16(128, 256, 64);
    assert_eq!(check(&f16_out, (200, 272, 192), false, &t(8, 4), &mut rng, 2e-3), 3);
    assert_eq!(check(&f16_out, (130, 272, 80), false, &t(8, 3), &mut rng, 2e-3), 3);
    let small = MatmulMeta::fp16(64, 128, 32);
    assert_eq!(check(&small, (100, 144, 96), false, &t(4, 3), &mut rng, 2e-3), 3);
    let bf = MatmulMeta {
        input: BF16,
        ..f32_out(64, 64, 32)
    };
    assert_eq!(check(&bf, (96, 80, 112), false, &t(4, 3), &mut rng, 1e-5), 3);
    assert_eq!(
        check(&f32_out(64, 64, 32), (96, 80, 64), true, &t(4, 3), &mut rng, 1e-5),
        3
    );
}

/// Where the view is not one the hardware takes (a row stride of 8 halves is not proved a
/// multiple of 16 bytes by the specialization), the load keeps `cp.async`; the two kinds of
/// copy share one ring.
#[test]
fn loads_that_are_not_boxes_keep_async_copies() {
    let mut rng = Rng::new(78);
    let meta = MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(64, 64, 32)
    };
    // K = 72: A's rows (stride K) are not known to be 16-element multiples; B's and C's
    // (stride N) are, so B is loaded and C stored through TMA.
    assert_eq!(
        check(&meta, (70, 64, 72), false, &hopper(4, 3, true), &mut rng, 1e-5),
        2
    );
    // N = 72 as well: none of them.
    assert_eq!(
        check(&meta, (70, 72, 72), false, &hopper(4, 3, true), &mut rng, 1e-5),
        0
    );
    // Without the target's TMA, none.
    assert_eq!(
        check(&meta, (64, 64, 64), false, &hopper(4, 3, false), &mut rng, 1e-5),
        0
    );
}

/// A matmul whose B columns are `(pid * 64 + j) % N` where `wrap`, else `pid * 64 + j + shift`
/// masked by `< N`, with epilogue `epilogue`.
fn matmul_with_b_columns(wrap: bool, shift: i32, epilogue: &str) -> rutile_ir::Kernel {
    use rutile_ir::Kernel;
    let (bm, bn, bk) = (64, 64, 32);
    Kernel::build("b_columns", |k| {
        let a_ptr = k.arg_ptr("a_ptr", F16);
        let b_ptr = k.arg_ptr("b_ptr", F16);
        let c_ptr = k.arg_ptr("c_ptr", F32);
        let (m, n, kk) = (k.arg_i32("M"), k.arg_i32("N"), k.arg_i32("K"));
        let (stride_am, stride_ak) = (k.arg_i32("stride_am"), k.arg_i32("stride_ak"));
        let (stride_bk, stride_bn) = (k.arg_i32("stride_bk"), k.arg_i32("stride_bn"));
        let pid_n = k.program_id(0);
        let offs_m = k.arange(0, bm);
        let cols = pid_n * bn + k.arange(0, bn);
        let offs_bn = if wrap { cols % n } else { cols + shift };
        let offs_k = k.arange(0, bk);
        let a_ptrs = a_ptr + (offs_m.expand_dims(1) * stride_am + offs_k.expand_dims(0) * stride_ak);
        let b_ptrs = b_ptr + (offs_k.expand_dims(1) * stride_bk + offs_bn.expand_dims(0) * stride_bn);
        let acc = k.zeros(&[bm as u32, bn as u32], F32);
        let out = k.for_range(0, k.cdiv(kk, bk), 1, &[acc, a_ptrs, b_ptrs], |step, c| {
            let k_left = kk - step * bk;
            let a = k.load_masked(
                c[1],
                offs_k.expand_dims(0).lt(k_left) & offs_m.expand_dims(1).lt(m),
                0.0,
            );
            let b_mask = offs_k.expand_dims(1).lt(k_left);
            let b_mask = if wrap {
                b_mask
            } else {
                b_mask & offs_bn.expand_dims(0).lt(n)
            };
            let b = k.load_masked(c[2], b_mask, 0.0);
            vec![k.dot(a, b) + c[0], c[1] + stride_ak * bk, c[2] + stride_bk * bk]
        });
        let rows = offs_m.expand_dims(1).lt(m);
        let in_n = cols.expand_dims(0).lt(n);
        let c_ptrs = c_ptr + offs_m.expand_dims(1) * n + cols.expand_dims(0);
        match epilogue {
            // The seed's: columns past N masked off.
            "masked" => k.store_masked(c_ptrs, out[0], rows & in_n),
            // Every column stored: the wrapped columns' values are visible.
            "unmasked" => k.store_masked(c_ptrs, out[0], rows),
            // Columns summed: a wrapped column reaches every row's sum.
            _ => k.store_masked(c_ptr + offs_m, out[0].sum(1), offs_m.lt(m)),
        }
    })
    .unwrap()
}

/// The tensor maps' pointer parameters of `kernel` lowered with TMA for a 100 x 64 x 64
/// problem (B's rows 80 apart).
fn map_params(kernel: &rutile_ir::Kernel) -> Vec<u32> {
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([100, 64, 64, 64, 1, 80, 1].iter().map(|&v| ArgValue::Int(v as i64)));
    let tk = lower(kernel, &hopper(4, 3, true), &runtime_spec(&args)).unwrap();
    tk.tensor_maps.iter().map(|t| t.param).collect()
}

/// The wrap of B's columns is read as the box's zeros only where the columns past N reach
/// nothing but masked-off stores: not where the store keeps them, nor where a reduction
/// mixes them in.
#[test]
fn wrapped_columns_are_boxes_only_where_stores_mask_them() {
    // A (param 0), its rows masked by `< M`, is a box in each; C (param 2) where its store
    // masks rows and columns.
    assert_eq!(map_params(&matmul_with_b_columns(true, 0, "masked")), vec![0, 1, 2]);
    assert_eq!(map_params(&matmul_with_b_columns(true, 0, "unmasked")), vec![0]);
    assert_eq!(map_params(&matmul_with_b_columns(true, 0, "sum")), vec![0]);
}

/// A box's first coordinate must be a multiple of 16 bytes (the hardware faults otherwise):
/// B's columns from 4 halves (8 bytes) on keep `cp.async`, from 8 (16 bytes) take TMA.
#[test]
fn box_origins_are_16_byte_aligned() {
    assert_eq!(map_params(&matmul_with_b_columns(false, 8, "masked")), vec![0, 1, 2]);
    assert_eq!(map_params(&matmul_with_b_columns(false, 4, "masked")), vec![0, 2]);
}
