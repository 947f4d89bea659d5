//! The pipeline's TMA copies (`lower::tma`): which loads the lowering proves to be boxes of a
//! tensor, the tensor maps it asks the runtime for, and the matmul seed through them in the
//! simulator (which lands a box only at the wait on its mbarrier's phase) against the
//! interpreter, on ragged M and N.

use rutile_ir::lower::lower;
use rutile_ir::seeds::{matmul, MatmulMeta};
use rutile_ir::target::Target;
use rutile_ir::testing::{row_major_matmul_args, runtime_spec};
use rutile_ir::thread::{LaunchValue, Stmt, ThreadKernel};

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
    print!("{}", tk);
    assert_eq!(tk.tensor_maps.len(), 2, "{:?}", tk.tensor_maps);
    assert!(count(&tk, |s| matches!(s, Stmt::TmaLoad { .. })) > 0);
    assert_eq!(count(&tk, |s| matches!(s, Stmt::AsyncCopy { .. })), 0);
    // A: K x M of stride stride_am; B: N x K of stride stride_bk.
    let (a, b) = (tk.tensor_maps[0], tk.tensor_maps[1]);
    assert_eq!(
        (a.param, a.dims, a.stride),
        (0, [LaunchValue::Param(5), LaunchValue::Param(3)], LaunchValue::Param(6))
    );
    assert_eq!(
        (b.param, b.dims, b.stride),
        (1, [LaunchValue::Param(4), LaunchValue::Param(5)], LaunchValue::Param(8))
    );
}

use half::{bf16, f16};
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::seeds::{matmul_grid, Activation};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, BF16, F16, F32};

fn inputs(rng: &mut Rng, elem: ScalarType, n: usize) -> HostBuffer {
    let v = rng.f32s(n, -1.0, 1.0);
    match elem {
        F16 => HostBuffer::from_slice(&v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()),
        BF16 => HostBuffer::from_slice(&v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>()),
        _ => HostBuffer::from_slice(&v),
    }
}

fn values(b: &HostBuffer) -> Vec<f64> {
    match b.elem() {
        F16 => b.to_vec::<f16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        BF16 => b.to_vec::<bf16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        _ => b.to_vec::<f32>().unwrap().iter().map(|&v| v as f64).collect(),
    }
}

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
        inputs(rng, meta.input, m * k),
        inputs(rng, meta.input, k * n),
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
    let (g, w) = (values(&got[2]), values(&want[2]));
    let scale = w.iter().fold(1e-3f64, |s, v| s.max(v.abs()));
    for i in 0..m * n {
        assert!(
            (g[i] - w[i]).abs() <= tol * scale,
            "{at}: element {i}: {} against {}",
            g[i],
            w[i]
        );
    }
    tk.tensor_maps.len()
}

/// Ragged M and N (the wrapped rows and columns read as zeros past the edge), K shorter than
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
        2
    );
    assert_eq!(
        check(&f32_out(128, 256, 64), (130, 256, 80), false, &t(8, 4), &mut rng, 1e-5),
        2
    );
    assert_eq!(
        check(&f32_out(64, 128, 32), (100, 144, 96), false, &t(4, 3), &mut rng, 1e-5),
        2
    );
    assert_eq!(
        check(&f32_out(128, 128, 64), (128, 128, 32), false, &t(8, 2), &mut rng, 1e-5),
        2
    );
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(128, 128, 64)
    };
    assert_eq!(check(&relu, (130, 160, 208), false, &t(8, 4), &mut rng, 2e-3), 2);
    let bf = MatmulMeta {
        input: BF16,
        ..f32_out(64, 64, 32)
    };
    assert_eq!(check(&bf, (96, 80, 112), false, &t(4, 3), &mut rng, 1e-5), 2);
    assert_eq!(
        check(&f32_out(64, 64, 32), (96, 80, 64), true, &t(4, 3), &mut rng, 1e-5),
        2
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
    // K = 72: A's rows (stride K) are not known to be 16-element multiples; B's (stride N) are.
    assert_eq!(
        check(&meta, (70, 64, 72), false, &hopper(4, 3, true), &mut rng, 1e-5),
        1
    );
    // N = 72 as well: neither.
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

/// A matmul as the seed's (rows of A wrapped `% M`) whose epilogue is `epilogue`, reading A
/// from column `shift` on.
fn wrapped_rows_matmul(epilogue: &str, shift: i32) -> rutile_ir::Kernel {
    use rutile_ir::Kernel;
    let (bm, bn, bk) = (64, 64, 32);
    Kernel::build("wrapped", |k| {
        let a_ptr = k.arg_ptr("a_ptr", F16);
        let b_ptr = k.arg_ptr("b_ptr", F16);
        let c_ptr = k.arg_ptr("c_ptr", F32);
        let (m, n, kk) = (k.arg_i32("M"), k.arg_i32("N"), k.arg_i32("K"));
        let (stride_am, stride_ak) = (k.arg_i32("stride_am"), k.arg_i32("stride_ak"));
        let (stride_bk, stride_bn) = (k.arg_i32("stride_bk"), k.arg_i32("stride_bn"));
        let pid_m = k.program_id(0);
        let offs_am = (pid_m * bm + k.arange(0, bm)) % m;
        let offs_bn = k.arange(0, bn);
        let offs_k = k.arange(0, bk);
        let a_cols = offs_k + shift;
        let a_ptrs = a_ptr + (offs_am.expand_dims(1) * stride_am + a_cols.expand_dims(0) * stride_ak);
        let b_ptrs = b_ptr + (offs_k.expand_dims(1) * stride_bk + offs_bn.expand_dims(0) * stride_bn);
        let acc = k.zeros(&[bm as u32, bn as u32], F32);
        let out = k.for_range(0, k.cdiv(kk, bk), 1, &[acc, a_ptrs, b_ptrs], |step, c| {
            let k_left = kk - step * bk;
            let a = k.load_masked(c[1], a_cols.expand_dims(0).lt(k_left), 0.0);
            let b = k.load_masked(
                c[2],
                offs_k.expand_dims(1).lt(k_left) & offs_bn.expand_dims(0).lt(n),
                0.0,
            );
            vec![k.dot(a, b) + c[0], c[1] + stride_ak * bk, c[2] + stride_bk * bk]
        });
        let offs_cm = pid_m * bm + k.arange(0, bm);
        let rows = offs_cm.expand_dims(1).lt(m);
        let cols = offs_bn.expand_dims(0).lt(n);
        match epilogue {
            // The seed's: rows past M masked off.
            "masked" => k.store_masked(
                c_ptr + offs_cm.expand_dims(1) * n + offs_bn.expand_dims(0),
                out[0],
                rows & cols,
            ),
            // Every row stored (C has room): the wrapped rows' values are visible.
            "unmasked" => k.store_masked(
                c_ptr + offs_cm.expand_dims(1) * n + offs_bn.expand_dims(0),
                out[0],
                cols,
            ),
            // Rows summed: a wrapped row reaches every column's sum.
            _ => k.store_masked(c_ptr + offs_bn, out[0].sum(0), offs_bn.lt(n)),
        }
    })
    .unwrap()
}

/// The wrap of A's rows is read as the box's zeros only where the rows past M reach nothing
/// but masked-off stores: not where the store keeps them, nor where a reduction mixes them in.
#[test]
fn wrapped_rows_are_boxes_only_where_stores_mask_them() {
    let (m, n, k) = (100usize, 64usize, 64usize);
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([m, n, k, k, 1, n, 1].iter().map(|&v| ArgValue::Int(v as i64)));
    let maps = |epilogue: &str| {
        let tk = lower(
            &wrapped_rows_matmul(epilogue, 0),
            &hopper(4, 3, true),
            &runtime_spec(&args),
        )
        .unwrap();
        tk.tensor_maps.iter().map(|t| t.param).collect::<Vec<_>>()
    };
    // B (param 1) is a box each time; A (param 0) only under the masked store.
    assert_eq!(maps("masked"), vec![0, 1]);
    assert_eq!(maps("unmasked"), vec![1]);
    assert_eq!(maps("sum"), vec![1]);
}

/// A box's first coordinate must be a multiple of 16 bytes (the hardware faults otherwise):
/// A read from column 4 (8 bytes in) keeps `cp.async`, from column 8 (16 bytes) takes TMA.
#[test]
fn box_origins_are_16_byte_aligned() {
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([100, 64, 64, 80, 1, 64, 1].iter().map(|&v| ArgValue::Int(v as i64)));
    let maps = |shift| {
        let tk = lower(
            &wrapped_rows_matmul("masked", shift),
            &hopper(4, 3, true),
            &runtime_spec(&args),
        )
        .unwrap();
        tk.tensor_maps.iter().map(|t| t.param).collect::<Vec<_>>()
    };
    assert_eq!(maps(8), vec![0, 1]);
    assert_eq!(maps(4), vec![1]);
}
