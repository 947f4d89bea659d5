//! `dot` on the tensor cores (`Stmt::Mma`, and `Stmt::MmaTf32` for f32 inputs at input
//! precision tf32): the matmul seed and plain dots lowered for an NVIDIA target with
//! `mma_sync`, run in the SIMT simulator (which computes each `mma` exactly and rounds once
//! to f32) and compared with the interpreter (one `fma` per product, in order) within the f32
//! accumulation's rounding; ragged shapes, leaky ReLU, f16 and f32 outputs, bf16 and tf32
//! inputs, every warp count.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::seeds::{matmul, matmul_grid, Activation, MatmulMeta};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::{assert_close_to_largest, float_buffer, float_values, Rng};
use rutile_ir::thread::{Stmt, ThreadKernel};
use rutile_ir::ScalarType::{self, BF16, F16, F32, F8E4M3, F8E5M2};
use rutile_ir::{DotPrecision, Kernel};

fn target(num_warps: u32) -> Target {
    Target {
        mma_sync: true,
        async_copy: false,
        num_stages: 1,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

/// As [`target`], with operand loads pipelined through `stages` shared buffers.
fn pipelined(num_warps: u32, stages: u32) -> Target {
    Target {
        async_copy: true,
        num_stages: stages,
        ..target(num_warps)
    }
}

use rutile_ir::testing::runtime_spec;

fn count_stmts(tk: &ThreadKernel, f: impl Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    tk.walk(&mut |s| n += f(s) as usize);
    n
}

/// The `mma`s of either kind.
fn mmas(tk: &ThreadKernel) -> usize {
    count_stmts(tk, |s| matches!(s, Stmt::Mma { .. } | Stmt::MmaTf32 { .. }))
}

/// The warpgroup MMAs.
fn wgmmas(tk: &ThreadKernel) -> usize {
    count_stmts(tk, |s| matches!(s, Stmt::Wgmma { .. }))
}

/// As [`pipelined`], on Hopper's warpgroup MMAs.
fn hopper(num_warps: u32, stages: u32) -> Target {
    Target {
        wgmma: true,
        async_copy: stages > 1,
        ..pipelined(num_warps, stages)
    }
}

fn tf32_mmas(tk: &ThreadKernel) -> usize {
    count_stmts(tk, |s| matches!(s, Stmt::MmaTf32 { .. }))
}

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Runs the matmul seed of `meta` on `m x n x k` in the interpreter and, lowered for
/// `warps` with the tensor cores, in the simulator; checks that the lowering used them and
/// that the results agree within `tol` (relative to the largest output, as the sums differ
/// in rounding only).
fn check_matmul(meta: &MatmulMeta, shape: (usize, usize, usize), warps: u32, rng: &mut Rng, tol: f64) {
    check_matmul_on(meta, shape, &target(warps), rng, tol);
}

/// The matmul seed of `meta` on random row-major `m x n x k` operands: its kernel, the
/// buffers, the launch's arguments and grid, and the interpreter's results.
struct RowMajorMatmul {
    kernel: Kernel,
    buffers: Vec<HostBuffer>,
    args: Vec<ArgValue>,
    grid: [u32; 3],
    want: Vec<HostBuffer>,
}

fn row_major_matmul(meta: &MatmulMeta, (m, n, k): (usize, usize, usize), rng: &mut Rng) -> RowMajorMatmul {
    let kernel = matmul(meta).unwrap();
    let buffers = vec![
        float_buffer(rng, meta.input, m * k),
        float_buffer(rng, meta.input, k * n),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    RowMajorMatmul {
        kernel,
        buffers,
        args,
        grid,
        want,
    }
}

/// [`check_matmul`] lowered for `target`, specialized as the runtime would.
fn check_matmul_on(meta: &MatmulMeta, (m, n, k): (usize, usize, usize), target: &Target, rng: &mut Rng, tol: f64) {
    let warps = target.num_warps;
    let RowMajorMatmul {
        kernel,
        buffers,
        args,
        grid,
        want,
    } = row_major_matmul(meta, (m, n, k), rng);
    let tk = lower(&kernel, target, &runtime_spec(&args)).unwrap();
    let at = format!(
        "{}x{}x{} blocks, {warps} warps, {} stages, {m}x{n}x{k}, {} -> {}",
        meta.block_m, meta.block_n, meta.block_k, target.num_stages, meta.input, meta.output
    );
    if target.async_copy {
        let copies = count_stmts(&tk, |s| matches!(s, Stmt::AsyncCopy { .. }));
        let aligned = [m, n, k].iter().all(|d| d % 8 == 0);
        assert!(!aligned || copies > 0, "{at}: operands not pipelined");
    }
    if target.wgmma {
        assert!(wgmmas(&tk) > 0, "{at}: no wgmma");
    } else {
        assert!(mmas(&tk) > 0, "{at}: no mma");
    }
    let mut got = buffers.clone();
    simt::run_threads(&tk, grid, &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_close_to_largest(&got[2], &want[2], tol, &at);
}

#[test]
fn matmul_on_the_tensor_cores_matches_the_interpreter() {
    let mut rng = Rng::new(31);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    // f32 outputs: the sums agree to f32 rounding.
    check_matmul(&f32_out(32, 32, 16), (32, 32, 16), 1, &mut rng, 1e-5);
    check_matmul(&f32_out(64, 64, 32), (100, 77, 50), 4, &mut rng, 1e-5);
    check_matmul(&f32_out(32, 64, 32), (17, 33, 129), 2, &mut rng, 1e-5);
    check_matmul(&f32_out(64, 32, 16), (64, 64, 64), 8, &mut rng, 1e-5);
    // f16 outputs (one more rounding), leaky ReLU, bf16 inputs.
    check_matmul(&MatmulMeta::fp16(32, 32, 32), (40, 48, 70), 4, &mut rng, 2e-3);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(64, 64, 32)
    };
    check_matmul(&relu, (65, 64, 96), 4, &mut rng, 2e-3);
    let bf = MatmulMeta {
        input: BF16,
        output: F32,
        ..MatmulMeta::fp16(32, 32, 16)
    };
    check_matmul(&bf, (32, 48, 40), 2, &mut rng, 1e-5);
}

/// The operand loads of the K loop pipelined through 2 to 4 shared buffers with
/// asynchronous copies: the same products, on ragged M, N and K (the zero-filled copies of
/// masked elements and of iterations past the end), f16 and bf16, leaky ReLU.
#[test]
fn pipelined_matmul_matches_the_interpreter() {
    let mut rng = Rng::new(34);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    for stages in [2, 3, 4] {
        check_matmul_on(
            &f32_out(64, 64, 32),
            (100, 72, 80),
            &pipelined(4, stages),
            &mut rng,
            1e-5,
        );
        check_matmul_on(
            &f32_out(32, 64, 32),
            (48, 80, 160),
            &pipelined(2, stages),
            &mut rng,
            1e-5,
        );
    }
    // One iteration, fewer than the stages; a K loop of many.
    check_matmul_on(&f32_out(64, 64, 32), (64, 64, 32), &pipelined(4, 4), &mut rng, 1e-5);
    check_matmul_on(&f32_out(32, 32, 16), (32, 32, 256), &pipelined(1, 3), &mut rng, 1e-5);
    // Shapes the copies cannot take (K = 77: vectors of one element) still pipeline what
    // they can and give the same results.
    check_matmul_on(&f32_out(32, 64, 32), (17, 33, 77), &pipelined(2, 3), &mut rng, 1e-5);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(64, 64, 32)
    };
    check_matmul_on(&relu, (65, 64, 96), &pipelined(4, 3), &mut rng, 2e-3);
    let bf = MatmulMeta {
        input: BF16,
        output: F32,
        ..MatmulMeta::fp16(64, 32, 32)
    };
    check_matmul_on(&bf, (64, 48, 96), &pipelined(4, 3), &mut rng, 1e-5);
    check_matmul_on(&f32_out(128, 128, 32), (128, 256, 96), &pipelined(4, 4), &mut rng, 1e-5);
}

/// The matmul seed on f32 inputs at input precision tf32.
fn tf32(bm: u32, bn: u32, bk: u32) -> MatmulMeta {
    MatmulMeta {
        input: F32,
        output: F32,
        input_precision: DotPrecision::Tf32,
        ..MatmulMeta::fp16(bm, bn, bk)
    }
}

/// f32 inputs at input precision tf32 run `mma.m16n8k8` (`Stmt::MmaTf32`, one per m16n8 tile
/// and k8 step) and give the interpreter's tf32 products within the f32 accumulation's
/// rounding: A row-major (read with `ldmatrix`), B row-major (contiguous along N: read with
/// 32-bit loads), ragged shapes, leaky ReLU, every warp count.
#[test]
fn tf32_matmul_on_the_tensor_cores_matches_the_interpreter() {
    let mut rng = Rng::new(35);
    check_matmul(&tf32(32, 32, 16), (32, 32, 16), 1, &mut rng, 1e-5);
    check_matmul(&tf32(64, 64, 32), (100, 77, 50), 4, &mut rng, 1e-5);
    check_matmul(&tf32(32, 64, 32), (17, 33, 129), 2, &mut rng, 1e-5);
    check_matmul(&tf32(64, 32, 16), (64, 64, 64), 8, &mut rng, 1e-5);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..tf32(64, 64, 32)
    };
    check_matmul(&relu, (65, 64, 96), 4, &mut rng, 1e-5);
    // One mma per m16n8 tile and k8 step of a warp: a 64x64x32 tile at 4 warps (2 x 2)
    // gives each warp 2 m16 by 4 n8 tiles, over 4 k8 steps.
    let tk = lower(
        &matmul(&tf32(64, 64, 32)).unwrap(),
        &target(4),
        &Specialization::all(12),
    )
    .unwrap();
    assert_eq!((tf32_mmas(&tk), mmas(&tk)), (2 * 4 * 4, 2 * 4 * 4));
    assert!(count_stmts(&tk, |s| matches!(s, Stmt::LdMatrix { .. })) > 0);
}

/// The simulator's results are the tf32 products, not the f32 ones: against the
/// interpreter at the default precision they differ by the operands' rounding.
#[test]
fn tf32_results_differ_from_ieee_ones_by_the_operand_rounding() {
    let mut rng = Rng::new(36);
    let (m, n, k) = (64usize, 64usize, 64usize);
    let meta = tf32(64, 64, 32);
    let ieee = MatmulMeta {
        input_precision: DotPrecision::Ieee,
        ..meta
    };
    let buffers = vec![
        float_buffer(&mut rng, F32, m * k),
        float_buffer(&mut rng, F32, k * n),
        HostBuffer::zeros(F32, m * n),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let grid = [matmul_grid(&meta, m as u32, n as u32), 1, 1];
    let run_interp = |meta: &MatmulMeta| {
        let mut b = buffers.clone();
        interp::run(&matmul(meta).unwrap(), grid, &args, &mut b).unwrap();
        float_values(&b[2])
    };
    let (want_tf32, want_ieee) = (run_interp(&meta), run_interp(&ieee));
    let tk = lower(&matmul(&meta).unwrap(), &target(4), &runtime_spec(&args)).unwrap();
    let mut got = buffers.clone();
    simt::run_threads(&tk, grid, &args, &mut got).unwrap();
    let got = float_values(&got[2]);
    let scale = want_ieee.iter().fold(0f64, |s, v| s.max(v.abs()));
    let worst = |w: &[f64]| got.iter().zip(w).fold(0f64, |d, (g, w)| d.max((g - w).abs())) / scale;
    let (to_tf32, to_ieee) = (worst(&want_tf32), worst(&want_ieee));
    println!("largest difference relative to the largest output: {to_tf32:.1e} from tf32, {to_ieee:.1e} from f32");
    assert!(to_tf32 <= 1e-5, "{to_tf32}");
    // Operands within 2^-11 relative: products within about 2^-10, over 64 terms of mixed
    // signs mostly cancelling.
    assert!(to_ieee > 1e-4 && to_ieee < 1e-2, "{to_ieee}");
}

/// The matmul seed on f32 inputs at input precision tf32x3.
fn tf32x3(bm: u32, bn: u32, bk: u32) -> MatmulMeta {
    MatmulMeta {
        input_precision: DotPrecision::Tf32x3,
        ..tf32(bm, bn, bk)
    }
}

/// tf32x3 on the tensor cores: three `MmaTf32` per m16n8 tile and k8 step (`big·small`,
/// `small·big`, `big·big`), and results within the f32 accumulation's rounding of the
/// interpreter's IEEE product (a tf32 `dot`'s are more than 1e-4 of the largest output
/// off, `tf32_results_differ_from_ieee_ones_by_the_operand_rounding`), pipelined or not,
/// ragged; an infinite operand makes its row of the result infinite where the other
/// operand's parts have one sign (NaN where not), and leaves the other rows finite.
#[test]
fn tf32x3_matmul_on_the_tensor_cores_matches_the_ieee_product() {
    let mut rng = Rng::new(38);
    check_matmul(&tf32x3(64, 64, 32), (100, 77, 50), 4, &mut rng, 1e-5);
    check_matmul(&tf32x3(32, 64, 32), (17, 33, 129), 2, &mut rng, 1e-5);
    check_matmul_on(&tf32x3(64, 64, 32), (100, 72, 80), &pipelined(4, 3), &mut rng, 1e-5);
    let spec = Specialization::all(12);
    let tk = lower(&matmul(&tf32x3(64, 64, 32)).unwrap(), &target(4), &spec).unwrap();
    assert_eq!(tf32_mmas(&tk), 3 * 2 * 4 * 4);

    let (m, n, k) = (32usize, 32usize, 32usize);
    let meta = tf32x3(32, 32, 32);
    let mut a = rng.f32s(m * k, -1.0, 1.0);
    a[5 * k + 7] = f32::INFINITY;
    let buffers = vec![
        HostBuffer::from_slice(&a),
        float_buffer(&mut rng, F32, k * n),
        HostBuffer::zeros(F32, m * n),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let tk = lower(&matmul(&meta).unwrap(), &target(4), &runtime_spec(&args)).unwrap();
    let mut got = buffers.clone();
    simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
    let got = float_values(&got[2]);
    let b = float_values(&buffers[1]);
    for j in 0..n {
        let (x, big) = (
            b[7 * n + j] as f32,
            f32::from_bits((b[7 * n + j] as f32).to_bits().wrapping_add(1 << 12) & !0x1fff),
        );
        let small = x - big;
        // (`inf · 0` is NaN too.)
        if small != 0.0 && small.signum() == big.signum() {
            assert_eq!(got[5 * n + j], f64::INFINITY * x.signum() as f64, "row 5, column {j}");
        } else {
            assert!(got[5 * n + j].is_nan(), "row 5, column {j}: {}", got[5 * n + j]);
        }
        for i in (0..m).filter(|&i| i != 5) {
            assert!(got[i * n + j].is_finite(), "row {i}, column {j}: {}", got[i * n + j]);
        }
    }
}

/// The tf32 operand loads of the K loop pipelined through 2 to 4 shared buffers: copies of
/// 4 to 16 bytes of f32 (1 to 4 values), the same products as without.
#[test]
fn pipelined_tf32_matmul_matches_the_interpreter() {
    let mut rng = Rng::new(37);
    for stages in [2, 3, 4] {
        check_matmul_on(&tf32(64, 64, 32), (100, 72, 80), &pipelined(4, stages), &mut rng, 1e-5);
        check_matmul_on(&tf32(32, 64, 16), (48, 80, 160), &pipelined(2, stages), &mut rng, 1e-5);
    }
    check_matmul_on(&tf32(64, 64, 32), (64, 64, 32), &pipelined(4, 4), &mut rng, 1e-5);
    // K = 77: copies of one f32 (4 bytes) where the mask cannot be proven constant wider.
    check_matmul_on(&tf32(32, 64, 32), (17, 33, 77), &pipelined(2, 3), &mut rng, 1e-5);
    check_matmul_on(&tf32(128, 128, 32), (128, 256, 96), &pipelined(4, 3), &mut rng, 1e-5);
}

/// Column-major A (read with 32-bit loads) or B (read with `ldmatrix`), pipelined or not:
/// the interpreter's tf32 products; the fragment reads' bank conflicts are printed.
#[test]
fn column_major_tf32_operands_on_the_tensor_cores() {
    use rutile_ir::interp::simt::{run_threads_with_stats, SharedAccess};
    let mut rng = Rng::new(38);
    let meta = tf32(64, 64, 32);
    let kernel = matmul(&meta).unwrap();
    let (m, n, k) = (96usize, 80usize, 64usize);
    for (a_col, b_col) in [(false, false), (false, true), (true, false), (true, true)] {
        for t in [target(4), pipelined(4, 3)] {
            let a = float_buffer(&mut rng, F32, m * k);
            let b = float_buffer(&mut rng, F32, k * n);
            let (sam, sak) = if a_col { (1, m) } else { (k, 1) };
            let (sbk, sbn) = if b_col { (1, k) } else { (n, 1) };
            let buffers = vec![a, b, HostBuffer::zeros(F32, m * n)];
            let ints = [m, n, k, sam, sak, sbk, sbn, n, 1];
            let mut args = vec![ptr(0), ptr(1), ptr(2)];
            args.extend(ints.iter().map(|&v| ArgValue::Int(v as i64)));
            let spec = Specialization {
                equal_to_1: args.iter().map(|a| matches!(a, ArgValue::Int(1))).collect(),
                ..Specialization::all(args.len())
            };
            let grid = [matmul_grid(&meta, m as u32, n as u32), 1, 1];
            let mut want = buffers.clone();
            interp::run(&kernel, grid, &args, &mut want).unwrap();
            let tk = lower(&kernel, &t, &spec).unwrap();
            let at = format!("A col {a_col}, B col {b_col}, {} stages", t.num_stages);
            assert!(tf32_mmas(&tk) > 0, "{at}");
            // `ldmatrix` for each operand stored along K, 32-bit loads for the others.
            let ldmatrix = count_stmts(&tk, |s| matches!(s, Stmt::LdMatrix { .. }));
            assert_eq!(ldmatrix > 0, !a_col || b_col, "{at}");
            let mut got = buffers.clone();
            let stats = run_threads_with_stats(&tk, grid, &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_close_to_largest(&got[2], &want[2], 1e-5, &at);
            let rd = stats.op("dot", SharedAccess::Load);
            println!("{at}: fragment reads {rd:?}");
            if !a_col && b_col {
                // Both read with `ldmatrix` from swizzled tiles: no conflicts.
                assert_eq!(rd.conflicts(), 0, "{at}: fragments {rd:?}");
            }
        }
    }
}

/// Where the tensor cores cannot take a tf32 `dot` (no `mma.sync`, warps of 8), it runs on
/// the CUDA cores with its operands rounded to tf32: the interpreter's results bit for bit.
#[test]
fn tf32_dots_off_the_tensor_cores_round_their_operands() {
    let mut rng = Rng::new(39);
    let meta = tf32(32, 32, 16);
    let kernel = matmul(&meta).unwrap();
    let (m, n, k) = (40usize, 48usize, 40usize);
    // Values whose rounding is a tie (away from zero, not to even), and an infinity.
    let mut a = rng.f32s(m * k, -1.0, 1.0);
    a[0] = 1.0 + 2f32.powi(-11);
    a[1] = -(1.0 + 2f32.powi(-11));
    a[k + 1] = f32::INFINITY;
    let buffers = vec![
        HostBuffer::from_slice(&a),
        float_buffer(&mut rng, F32, k * n),
        HostBuffer::zeros(F32, m * n),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let grid = [matmul_grid(&meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    let off = Target {
        mma_sync: false,
        ..target(4)
    };
    let warp8 = Target {
        warp_size: 8,
        ..target(4)
    };
    for t in [off, warp8] {
        let tk = lower(&kernel, &t, &runtime_spec(&args)).unwrap();
        assert_eq!(mmas(&tk), 0);
        let mut got = buffers.clone();
        simt::run_threads(&tk, grid, &args, &mut got).unwrap();
        let (g, w) = (got[2].to_vec::<f32>().unwrap(), want[2].to_vec::<f32>().unwrap());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&g), bits(&w), "warp size {}", t.warp_size);
    }
}

/// The precision is part of the op: printed when not the default, compared and hashed;
/// tf32 is for f32 operands only.
#[test]
fn the_input_precision_is_printed_compared_and_checked() {
    let ieee = matmul(&MatmulMeta {
        input_precision: DotPrecision::Ieee,
        ..tf32(32, 32, 16)
    })
    .unwrap();
    let t = matmul(&tf32(32, 32, 16)).unwrap();
    assert_ne!(ieee, t);
    let hash = |k: &Kernel| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        k.hash(&mut h);
        h.finish()
    };
    assert_ne!(hash(&ieee), hash(&t));
    let (ti, tt) = (ieee.to_string(), t.to_string());
    assert!(!ti.contains("input_precision"), "{ti}");
    let dot = tt.lines().find(|l| l.contains(" dot ")).expect("a dot");
    assert!(dot.contains(", input_precision=tf32"), "{dot}");
    rutile_ir::verify::verify(&t).unwrap();
    let err = matmul(&MatmulMeta {
        input_precision: DotPrecision::Tf32,
        ..MatmulMeta::fp16(32, 32, 16)
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("tf32") && err.contains("f16"), "{err}");
}

/// Where the tensor cores cannot take the tile (f32 inputs, warps of 8, a tile narrower
/// than the warps' m16n8 steps), `dot` stays on the CUDA cores, with the same results.
#[test]
fn dots_the_tensor_cores_cannot_take_stay_on_the_cuda_cores() {
    let meta = MatmulMeta {
        input: F32,
        output: F32,
        ..MatmulMeta::fp16(32, 32, 16)
    };
    let k = matmul(&meta).unwrap();
    assert_eq!(mmas(&lower(&k, &target(4), &Specialization::none(12)).unwrap()), 0);
    let f16k = matmul(&MatmulMeta::fp16(32, 32, 16)).unwrap();
    let warp8 = Target {
        warp_size: 8,
        ..target(4)
    };
    assert_eq!(mmas(&lower(&f16k, &warp8, &Specialization::none(12)).unwrap()), 0);
    let narrow = matmul(&MatmulMeta::fp16(16, 16, 16)).unwrap();
    assert_eq!(mmas(&lower(&narrow, &target(8), &Specialization::none(12)).unwrap()), 0);
    assert!(mmas(&lower(&narrow, &target(2), &Specialization::none(12)).unwrap()) > 0);
    let off = Target {
        mma_sync: false,
        async_copy: false,
        num_stages: 1,
        ..target(4)
    };
    assert_eq!(mmas(&lower(&f16k, &off, &Specialization::none(12)).unwrap()), 0);
}

/// The matmul's accumulator is carried through its K loop in the `mma` layout: no
/// iteration converts it (the loop's only shared-memory exchanges are the operands).
#[test]
fn the_accumulator_stays_in_the_mma_layout_across_the_loop() {
    let kernel = matmul(&MatmulMeta::fp16(64, 64, 32)).unwrap();
    let tk = lower(&kernel, &target(4), &Specialization::all(12)).unwrap();
    let text = tk.to_string();
    let dot_line = text.lines().find(|l| l.contains("// dot at ")).expect("a dot");
    assert!(
        dot_line.contains("spt [1, 2], tpw [8, 4], wpc [2, 2], order [1, 0]"),
        "{dot_line}"
    );
    // Inside the loop: two stagings (A and B) and the fragment reads, no conversion of the
    // accumulator (which would store 32 f32 registers a thread to shared memory).
    let mut loop_f32_stores = 0;
    fn count(stmts: &[Stmt], tk: &ThreadKernel, inside: bool, n: &mut usize) {
        for s in stmts {
            match s {
                Stmt::While { cond_body, body, .. } => {
                    count(cond_body, tk, true, n);
                    count(body, tk, true, n);
                }
                Stmt::Store {
                    values,
                    mem: rutile_ir::thread::Memory::Shared { .. },
                    ..
                } if inside && tk.reg_type(values[0]) == F32 => *n += 1,
                _ => {}
            }
        }
    }
    count(&tk.body, &tk, false, &mut loop_f32_stores);
    assert_eq!(loop_f32_stores, 0, "{text}");
}

/// The operands' staging and fragment reads, counted by the simulator's bank model, are
/// free of bank conflicts thanks to the 16-byte row padding (without it, the fragment reads
/// of a 64x64x32 tile at 4 warps take 4 times the ideal wavefronts: rows of 64 bytes put
/// the 8 rows of an A fragment on 2 sets of banks).
#[test]
fn operand_fragments_read_shared_memory_without_conflicts() {
    use rutile_ir::interp::simt::{run_threads_with_stats, SharedAccess};
    let mut rng = Rng::new(32);
    for (bm, bn, bk, warps) in [
        (64u32, 64u32, 32u32, 4u32),
        (128, 128, 32, 4),
        (32, 64, 32, 2),
        (128, 256, 32, 8),
    ] {
        let meta = MatmulMeta {
            output: F32,
            ..MatmulMeta::fp16(bm, bn, bk)
        };
        let kernel = matmul(&meta).unwrap();
        let (m, n, k) = (bm as usize, bn as usize, bk as usize);
        let buffers = vec![
            float_buffer(&mut rng, F16, m * k),
            float_buffer(&mut rng, F16, k * n),
            HostBuffer::zeros(F32, m * n),
        ];
        let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
        for t in [target(warps), pipelined(warps, 3)] {
            let tk = lower(&kernel, &t, &runtime_spec(&args)).unwrap();
            let stats = run_threads_with_stats(&tk, [1, 1, 1], &args, &mut buffers.clone()).unwrap();
            let (w, r, c) = (
                stats.op("dot", SharedAccess::Store),
                stats.op("dot", SharedAccess::Load),
                stats.op("pipeline", SharedAccess::Store),
            );
            let s = t.num_stages;
            println!("{bm}x{bn}x{bk} at {warps} warps, {s} stages: staging {w:?}, copies {c:?}, fragments {r:?}");
            assert_eq!(w.conflicts(), 0, "{bm}x{bn}: staging {w:?}");
            assert_eq!(c.conflicts(), 0, "{bm}x{bn}: copies {c:?}");
            assert_eq!(r.conflicts(), 0, "{bm}x{bn}: fragment reads {r:?}");
            assert_eq!(t.async_copy, c.accesses > 0 && w.accesses == 0, "{bm}x{bn}, {s} stages");
        }
    }
}

/// Column-major A or B (unit strides specialized, so that their loads run down the
/// columns): each is staged contiguous along its own axis, and the fragments read from
/// there give the interpreter's product; the fragment reads stay free of bank conflicts.
/// The 96x80x64 matmul of 64x64x32 blocks with A, B or both column-major, lowered for
/// `target` and run in the simulator against the interpreter: per layout, the lowered
/// kernel and the simulator's shared-memory statistics.
fn column_major_matmuls(
    target: &Target,
    seed: u64,
    input: ScalarType,
) -> Vec<((bool, bool), ThreadKernel, rutile_ir::interp::simt::SharedStats)> {
    use rutile_ir::interp::simt::run_threads_with_stats;
    let mut rng = Rng::new(seed);
    let meta = MatmulMeta {
        input,
        output: F32,
        ..MatmulMeta::fp16(64, 64, 32)
    };
    let kernel = matmul(&meta).unwrap();
    let (m, n, k) = (96usize, 80usize, 64usize);
    let mut out = Vec::new();
    for (a_col, b_col) in [(false, true), (true, false), (true, true)] {
        let a = float_buffer(&mut rng, input, m * k);
        let b = float_buffer(&mut rng, input, k * n);
        let (sam, sak) = if a_col { (1, m) } else { (k, 1) };
        let (sbk, sbn) = if b_col { (1, k) } else { (n, 1) };
        let buffers = vec![a, b, HostBuffer::zeros(F32, m * n)];
        let ints = [m, n, k, sam, sak, sbk, sbn, n, 1];
        let mut args = vec![ptr(0), ptr(1), ptr(2)];
        args.extend(ints.iter().map(|&v| ArgValue::Int(v as i64)));
        let spec = Specialization {
            equal_to_1: args.iter().map(|a| matches!(a, ArgValue::Int(1))).collect(),
            ..Specialization::all(args.len())
        };
        let grid = [matmul_grid(&meta, m as u32, n as u32), 1, 1];
        let mut want = buffers.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let tk = lower(&kernel, target, &spec).unwrap();
        let mut got = buffers.clone();
        let stats = run_threads_with_stats(&tk, grid, &args, &mut got)
            .unwrap_or_else(|e| panic!("A col {a_col}, B col {b_col}: {e}"));
        assert_close_to_largest(&got[2], &want[2], 1e-5, &format!("A col {a_col}, B col {b_col}"));
        out.push(((a_col, b_col), tk, stats));
    }
    out
}

#[test]
fn column_major_operands_on_the_tensor_cores() {
    use rutile_ir::interp::simt::SharedAccess;
    for ((a_col, b_col), tk, stats) in column_major_matmuls(&target(4), 33, F16) {
        assert!(mmas(&tk) > 0);
        let (st, rd) = (
            stats.op("dot", SharedAccess::Store),
            stats.op("dot", SharedAccess::Load),
        );
        // A column-major operand's lines of 64 bytes, 80 bytes apart, share a few banks
        // between the two lines of one quarter-warp's 16-byte stores: at most 2-way.
        assert!(
            st.wavefronts <= 2 * st.ideal_wavefronts,
            "A col {a_col}, B col {b_col}: staging {st:?}"
        );
        assert_eq!(rd.conflicts(), 0, "A col {a_col}, B col {b_col}: fragments {rd:?}");
    }
}

/// The matmul seed on warpgroup MMAs (`Stmt::Wgmma`), whose operands the simulator reads
/// through the descriptors' canonical layouts and swizzles as the PTX ISA defines them:
/// one and two warpgroups, one and two m64 steps per warpgroup, B in one to four 128-byte
/// column blocks, 64- and 128-byte swizzles (BLOCK_K 32 and 64), pipelined or staged from
/// registers, ragged M, N and K, f16 and bf16, leaky ReLU and f16 outputs.
#[test]
fn matmul_on_warpgroup_mmas_matches_the_interpreter() {
    let mut rng = Rng::new(35);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    for stages in [1, 2, 3] {
        check_matmul_on(&f32_out(64, 32, 32), (64, 32, 96), &hopper(4, stages), &mut rng, 1e-5);
        check_matmul_on(&f32_out(128, 64, 32), (100, 72, 80), &hopper(4, stages), &mut rng, 1e-5);
    }
    check_matmul_on(&f32_out(128, 128, 64), (128, 128, 192), &hopper(8, 3), &mut rng, 1e-5);
    check_matmul_on(&f32_out(64, 256, 32), (64, 256, 64), &hopper(4, 4), &mut rng, 1e-5);
    check_matmul_on(&f32_out(128, 256, 64), (130, 250, 136), &hopper(8, 3), &mut rng, 1e-5);
    // K = 77 and 129: copies of one element are not pipelined, so the dot stages its
    // operands from registers.
    check_matmul_on(&f32_out(64, 64, 32), (17, 33, 77), &hopper(4, 3), &mut rng, 1e-5);
    check_matmul_on(&f32_out(64, 32, 16), (70, 40, 129), &hopper(4, 1), &mut rng, 1e-5);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(128, 64, 64)
    };
    check_matmul_on(&relu, (130, 64, 96), &hopper(4, 3), &mut rng, 2e-3);
    let bf = MatmulMeta {
        input: BF16,
        output: F32,
        ..MatmulMeta::fp16(64, 64, 32)
    };
    check_matmul_on(&bf, (64, 48, 96), &hopper(4, 3), &mut rng, 1e-5);
}

/// Column-major operands on warpgroup MMAs: B read K-major (`imm-trans-b` 0), a
/// column-major A staged from registers into its K-major tile.
#[test]
fn column_major_operands_on_warpgroup_mmas() {
    for (_, tk, _) in column_major_matmuls(&hopper(4, 3), 36, F16) {
        assert!(wgmmas(&tk) > 0);
    }
}

/// The matmul seed on fp8 warpgroup MMAs (`k32`, both operands K-major): E5M2 and E4M3,
/// 32-, 64- and 128-byte rows of K, one and two warpgroups, ragged shapes, B along N (staged
/// from registers into its K-major tile) and along K (pipelined, as the tutorial's `b.T`),
/// a column-major A (staged from registers); on `mma.sync` (2 warps) the operands' f16
/// conversions. The products are exact in f32, so only the order of the sums differs.
#[test]
fn fp8_matmul_on_warpgroup_mmas_matches_the_interpreter() {
    let mut rng = Rng::new(38);
    for input in [F8E5M2, F8E4M3] {
        let meta = |bm, bn, bk| MatmulMeta {
            input,
            output: F32,
            ..MatmulMeta::fp16(bm, bn, bk)
        };
        check_matmul_on(&meta(64, 32, 32), (64, 32, 96), &hopper(4, 3), &mut rng, 1e-5);
        check_matmul_on(&meta(128, 64, 64), (100, 72, 160), &hopper(4, 2), &mut rng, 1e-5);
        check_matmul_on(&meta(128, 128, 128), (128, 128, 256), &hopper(8, 3), &mut rng, 1e-5);
        check_matmul_on(&meta(64, 32, 32), (17, 33, 77), &hopper(4, 3), &mut rng, 1e-5);
        for (_, tk, _) in column_major_matmuls(&hopper(4, 3), 39, input) {
            assert!(wgmmas(&tk) > 0);
        }
        let kernel = matmul(&meta(32, 32, 32)).unwrap();
        let tk = lower(&kernel, &hopper(2, 3), &Specialization::all(kernel.params.len())).unwrap();
        assert_eq!(wgmmas(&tk), 0);
        assert!(mmas(&tk) > 0, "{input} on mma.sync: its f16 conversions");
        // The block-pointer form (its edges masked by the pointers' checks), on fp8 MMAs too.
        let m = meta(64, 64, 64);
        let (shape, grid) = ((100, 72, 160), [matmul_grid(&m, 100, 72), 1, 1]);
        let kernel = rutile_ir::seeds::matmul_block_ptr(&m).unwrap();
        let buffers = vec![
            float_buffer(&mut rng, input, shape.0 * shape.2),
            float_buffer(&mut rng, input, shape.2 * shape.1),
            HostBuffer::zeros(F32, shape.0 * shape.1),
        ];
        let args = rutile_ir::testing::row_major_matmul_args(shape.0, shape.1, shape.2);
        let mut want = buffers.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let tk = lower(&kernel, &hopper(4, 3), &runtime_spec(&args)).unwrap();
        assert!(wgmmas(&tk) > 0, "{input} block pointers: no wgmma");
        let mut got = buffers.clone();
        simt::run_threads(&tk, grid, &args, &mut got).unwrap_or_else(|e| panic!("{input} block pointers: {e}"));
        assert_close_to_largest(&got[2], &want[2], 1e-5, &format!("{input} block pointers"));
    }
}

/// What the simulator checks of a wgmma lowering can fail: the same kernel with an A
/// operand described with the wrong stride between 8-row groups (its rows then belong to
/// other warps' accumulators) or its waits dropped (the accumulators are read before the
/// MMAs land) gives wrong results.
#[test]
fn the_wgmma_model_catches_wrong_rows_and_missing_waits() {
    let mut rng = Rng::new(37);
    let meta = MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(128, 64, 32)
    };
    let RowMajorMatmul {
        kernel,
        buffers,
        args,
        grid,
        want,
    } = row_major_matmul(&meta, (128, 64, 64), &mut rng);
    let tk = lower(&kernel, &hopper(4, 3), &runtime_spec(&args)).unwrap();
    let agrees = |tk: &ThreadKernel| {
        let mut got = buffers.clone();
        match simt::run_threads(tk, grid, &args, &mut got) {
            Err(_) => false,
            Ok(()) => float_values(&got[2])
                .iter()
                .zip(float_values(&want[2]))
                .all(|(g, w)| (g - w).abs() <= 1e-4),
        }
    };
    assert!(agrees(&tk), "the lowering itself");
    // Three stages: the loop's MMAs stay in flight across the back edge.
    let in_flight = count_stmts(&tk, |s| matches!(s, Stmt::WgmmaWait { pending: 1 }));
    assert_eq!(in_flight, 1, "one wgmma group left running per iteration");
    // The first A operand described with twice its stride between 8-row groups.
    let mut shifted = tk.clone();
    let mut first_a = true;
    shifted.walk_mut(&mut |s| {
        if let Stmt::Wgmma {
            a: rutile_ir::thread::WgmmaA::Shared(a),
            ..
        } = s
        {
            if first_a {
                a.sbo *= 2;
                first_a = false;
            }
        }
    });
    assert!(!agrees(&shifted), "a wrong stride went unnoticed");
    let mut unwaited = tk.clone();
    unwaited.walk_mut(&mut |s| {
        if let Stmt::WgmmaWait { pending } = s {
            *pending = 1;
        }
    });
    assert!(!agrees(&unwaited), "a missing wait went unnoticed");
}

/// The epilogue reuses the pipeline's ring: the tutorial's 128x256x64 blocks fit four
/// stages (192 KiB of ring) in an H100's 227 KiB with the 64 KiB exchange of the f16 output,
/// and the simulator, which checks that buffers sharing bytes are never in use between the
/// same two barriers, runs it.
#[test]
fn the_epilogue_reuses_the_rings_shared_memory() {
    let meta = MatmulMeta::fp16(128, 256, 64);
    let kernel = matmul(&meta).unwrap();
    let (m, n, k) = (128usize, 256usize, 256usize);
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let tk = lower(&kernel, &hopper(8, 4), &runtime_spec(&args)).unwrap();
    let separate: u32 = tk.shared.iter().map(|a| a.bytes()).sum();
    assert!(separate > 227 * 1024, "the buffers side by side: {separate} bytes");
    assert!(
        tk.shared_bytes() <= 227 * 1024,
        "{} bytes with reuse",
        tk.shared_bytes()
    );
    let mut rng = Rng::new(38);
    check_matmul_on(&meta, (m, n, k), &hopper(8, 4), &mut rng, 2e-3);
    // Without reuse the same kernel does not fit.
    let apart = Target {
        reuse_shared: rutile_ir::target::SharedReuse::Never,
        ..hopper(8, 4)
    };
    assert!(lower(&kernel, &apart, &runtime_spec(&args)).is_err());
}

/// A loop's own `num_stages` sets the depth of its `dot` operands' pipeline, the launch's
/// none: a K loop that asks for 2 stages on a launch of 3, on warpgroup MMAs, keeps no MMA
/// group in flight across its back edge (which needs 3) and copies one iteration ahead,
/// and computes the interpreter's product.
#[test]
fn a_loops_own_stages_set_its_dot_pipeline() {
    let (m, n, kdim) = (64usize, 64usize, 96usize);
    let kernel = Kernel::build("staged_dot", |k| {
        let a = k.arg_ptr("A", F16);
        let b = k.arg_ptr("B", F16);
        let c = k.arg_ptr("C", F32);
        let kk = k.arg_i32("K");
        let (rm, rn, rk) = (k.arange(0, 64), k.arange(0, 64), k.arange(0, 32));
        let acc = k.zeros(&[64, 64], F32);
        let out = k.for_range_staged(0, kk, 32, 2, &[acc], |off, carried| {
            let a_tile = k.load(a + rm.expand_dims(1) * kk + (off + rk).expand_dims(0));
            let b_tile = k.load(b + (off + rk).expand_dims(1) * 64 + rn.expand_dims(0));
            vec![k.dot_acc(a_tile, b_tile, carried[0])]
        });
        k.store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), out[0]);
    })
    .unwrap();
    let mut rng = Rng::new(83);
    let buffers = vec![
        float_buffer(&mut rng, F16, m * kdim),
        float_buffer(&mut rng, F16, kdim * n),
        HostBuffer::zeros(F32, m * n),
    ];
    let args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Int(kdim as i64)];
    let mut want = buffers.clone();
    interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
    let target = hopper(4, 3);
    let tk = lower(&kernel, &target, &runtime_spec(&args)).unwrap();
    assert!(wgmmas(&tk) > 0, "no wgmma");
    assert!(
        count_stmts(&tk, |s| matches!(s, Stmt::AsyncCopy { .. })) > 0,
        "operands not pipelined"
    );
    assert_eq!(
        count_stmts(&tk, |s| matches!(s, Stmt::WgmmaWait { pending: 1 })),
        0,
        "an MMA group kept in flight on a 2-stage ring"
    );
    let mut got = buffers.clone();
    simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
    assert_close_to_largest(&got[2], &want[2], 1e-5, "2-stage K loop on a 3-stage launch");
}

/// The matmul written with block pointers (`seeds::matmul_block_ptr`: edges masked on both
/// dimensions, where the plain kernel wraps rows and columns) computes the plain kernel's
/// results bit for bit in the interpreter, and on the tensor cores (`mma.sync` with
/// pipelined copies, and Hopper's warpgroup MMAs) the simulator agrees with it; where the
/// shape is aligned its operands are copied asynchronously, as the plain kernel's are.
#[test]
fn the_block_pointer_matmul_matches_the_plain_one() {
    use rutile_ir::seeds::matmul_block_ptr;
    let mut rng = Rng::new(37);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    let cases = [
        (f32_out(64, 64, 32), (64, 64, 96), pipelined(4, 3)),
        (f32_out(64, 64, 32), (100, 72, 80), pipelined(4, 3)),
        (f32_out(128, 64, 32), (17, 33, 77), pipelined(4, 2)),
        (f32_out(128, 128, 64), (128, 128, 192), hopper(8, 3)),
        (f32_out(128, 64, 32), (130, 72, 96), hopper(4, 3)),
        (MatmulMeta::fp16(64, 32, 32), (70, 40, 64), pipelined(2, 3)),
    ];
    for (meta, (m, n, k), target) in cases {
        let at = format!(
            "{}x{}x{} blocks, {} warps, {} stages, {m}x{n}x{k}",
            meta.block_m, meta.block_n, meta.block_k, target.num_warps, target.num_stages
        );
        let plain = row_major_matmul(&meta, (m, n, k), &mut rng);
        let kernel = matmul_block_ptr(&meta).unwrap();
        let mut want = plain.buffers.clone();
        interp::run(&kernel, plain.grid, &plain.args, &mut want).unwrap();
        assert_eq!(
            want[2].as_bytes(),
            plain.want[2].as_bytes(),
            "{at}: the interpreter's results differ"
        );
        let tk = lower(&kernel, &target, &runtime_spec(&plain.args)).unwrap();
        if target.wgmma {
            assert!(wgmmas(&tk) > 0, "{at}: no wgmma");
        } else {
            assert!(mmas(&tk) > 0, "{at}: no mma");
        }
        let aligned = [m, n, k].iter().all(|d| d % 8 == 0);
        let copies = count_stmts(&tk, |s| matches!(s, Stmt::AsyncCopy { .. }));
        assert!(!aligned || copies > 0, "{at}: operands not pipelined");
        let mut got = plain.buffers.clone();
        simt::run_threads(&tk, plain.grid, &plain.args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_close_to_largest(&got[2], &want[2], 2e-3, &at);
    }
}

/// E4M3 by E5M2 on one fp8 warpgroup MMA of both types, B along K and along N, in the
/// simulator against the interpreter.
#[test]
fn mixed_fp8_dot_on_warpgroup_mmas_matches_the_interpreter() {
    let mut rng = Rng::new(42);
    for b_along_k in [true, false] {
        let kernel = rutile_ir::testing::mixed_fp8_dot(b_along_k);
        let buffers = vec![
            float_buffer(&mut rng, F8E4M3, 64 * 64),
            float_buffer(&mut rng, F8E5M2, 64 * 64),
            HostBuffer::zeros(F32, 64 * 64),
        ];
        let args = vec![ptr(0), ptr(1), ptr(2)];
        let mut want = buffers.clone();
        interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
        let tk = lower(&kernel, &hopper(4, 1), &Specialization::all(3)).unwrap();
        assert!(wgmmas(&tk) > 0, "B along K {b_along_k}: no wgmma");
        let mut got = buffers.clone();
        simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
        assert_close_to_largest(&got[2], &want[2], 1e-5, &format!("B along K {b_along_k}"));
    }
}

/// fp8 dots that promote their sums (`max_num_imprecise_acc`): every run of that many
/// elements of K (rounded up to MMAs of 32) goes into a second accumulator from zero, which
/// is waited for and added into the f32 one, in the loop of the matmul seed (ragged, 3
/// stages, so that an unpromoted dot would stay in flight) and in a lone dot on a zero
/// accumulator (whose first run writes the accumulator itself); off the warpgroup MMAs
/// nothing changes. In the simulator against the interpreter, with the waits and additions
/// counted.
#[test]
fn fp8_dots_promote_their_sums_where_asked() {
    let mut rng = Rng::new(43);
    let meta = |limit| MatmulMeta {
        input: F8E4M3,
        output: F32,
        max_num_imprecise_acc: limit,
        ..MatmulMeta::fp16(128, 64, 128)
    };
    let shape = (100, 72, 320);
    let waits =
        |tk: &ThreadKernel, pending| count_stmts(tk, |s| matches!(s, Stmt::WgmmaWait { pending: p } if *p == pending));
    // (K block 128: four MMAs of 32 a step.) Runs of one, two and four MMAs; 100 rounds up
    // to four.
    for (limit, runs) in [(32, 4), (64, 2), (100, 1), (128, 1)] {
        check_matmul_on(&meta(Some(limit)), shape, &hopper(8, 3), &mut rng, 1e-5);
        let kernel = matmul(&meta(Some(limit))).unwrap();
        let args = rutile_ir::testing::row_major_matmul_args(shape.0, shape.1, shape.2);
        let tk = lower(&kernel, &hopper(8, 3), &runtime_spec(&args)).unwrap();
        assert_eq!(
            waits(&tk, 1),
            0,
            "limit {limit}: a promoting dot is never left in flight"
        );
        assert_eq!(waits(&tk, 0), runs, "limit {limit}: one wait a run");
        let line = kernel.to_string();
        assert!(line.contains(&format!("max_num_imprecise_acc={limit}")), "{line}");
    }
    // Off the warpgroup MMAs (`mma.sync` on the operands' f16 conversions, f32 sums) the
    // limit changes nothing.
    let on_mma_sync = |limit| {
        let kernel = matmul(&meta(limit)).unwrap();
        let args = rutile_ir::testing::row_major_matmul_args(shape.0, shape.1, shape.2);
        lower(&kernel, &pipelined(2, 3), &runtime_spec(&args)).unwrap()
    };
    assert_eq!(on_mma_sync(Some(64)).to_string(), on_mma_sync(None).to_string());
    // B column-major (the tutorial's `b.T`, pipelined as it comes): the unpromoted dot stays
    // in flight across the back edge, the promoting one waits for itself.
    let (m, n, k) = shape;
    let b_col_args = || {
        let mut args = vec![ptr(0), ptr(1), ptr(2)];
        args.extend([m, n, k, k, 1, 1, k, n, 1].iter().map(|&v| ArgValue::Int(v as i64)));
        let spec = runtime_spec(&args);
        (args, spec)
    };
    // (Waits for all: the unpromoted loop's after it, the promoting dot's one a run.)
    for (limit, in_flight, whole) in [(None, 1, 1), (Some(64), 0, 2)] {
        let kernel = matmul(&meta(limit)).unwrap();
        let (args, spec) = b_col_args();
        let tk = lower(&kernel, &hopper(8, 3), &spec).unwrap();
        assert_eq!(
            waits(&tk, 1),
            in_flight,
            "limit {limit:?}, B column-major: waits left pending"
        );
        assert_eq!(waits(&tk, 0), whole, "limit {limit:?}, B column-major: waits for all");
        let buffers = vec![
            float_buffer(&mut rng, F8E4M3, m * k),
            float_buffer(&mut rng, F8E4M3, k * n),
            HostBuffer::zeros(F32, m * n),
        ];
        let grid = [matmul_grid(&meta(limit), m as u32, n as u32), 1, 1];
        let mut want = buffers.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let mut got = buffers.clone();
        simt::run_threads(&tk, grid, &args, &mut got).unwrap();
        assert_close_to_largest(&got[2], &want[2], 1e-5, &format!("limit {limit:?}, B column-major"));
    }
    // A lone dot on a zero accumulator, K = 128 (four MMAs), runs of one MMA: the first run
    // writes the accumulator, the other three are added.
    let kernel = Kernel::build("promoted_dot", |k| {
        let (pa, pb, pc) = (k.arg_ptr("a", F8E4M3), k.arg_ptr("b", F8E4M3), k.arg_ptr("c", F32));
        let (r, kk) = (k.arange(0, 64), k.arange(0, 128));
        let a = k.load(pa + (r.expand_dims(1) * 128 + kk.expand_dims(0)));
        let b = k.load(pb + (kk.expand_dims(1) * 64 + r.expand_dims(0)));
        let zero = k.zeros(&[64, 64], F32);
        let options = rutile_ir::DotOptions {
            max_num_imprecise_acc: Some(32),
            ..Default::default()
        };
        k.store(
            pc + (r.expand_dims(1) * 64 + r.expand_dims(0)),
            k.dot_with_options(a, b, zero, options),
        );
    })
    .unwrap();
    let buffers = vec![
        float_buffer(&mut rng, F8E4M3, 64 * 128),
        float_buffer(&mut rng, F8E4M3, 128 * 64),
        HostBuffer::zeros(F32, 64 * 64),
    ];
    let args = vec![ptr(0), ptr(1), ptr(2)];
    let mut want = buffers.clone();
    interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
    let tk = lower(&kernel, &hopper(4, 1), &Specialization::all(3)).unwrap();
    assert_eq!(wgmmas(&tk), 4);
    assert_eq!(waits(&tk, 0), 3, "the first run needs no addition");
    let mut got = buffers.clone();
    simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
    assert_close_to_largest(&got[2], &want[2], 1e-5, "a promoting dot on a zero accumulator");
}

/// `dot_scaled` lowered for Hopper (its bf16 `dot` on warpgroup MMAs) and for `mma.sync`,
/// run in the simulator against the interpreter: fp4 on either side (its nibbles
/// interleaved in registers), mxfp8 on both, scales on the quantized sides; the products
/// of the rounded scaled values are exact in f32, so only the order of the sums differs.
/// The factors are read from shared memory once for each group of 32 a thread holds.
#[test]
fn dot_scaled_on_the_tensor_cores_matches_the_interpreter() {
    use rutile_ir::{Microscaled, MxFormat};
    let (bm, bn, kk) = (64i32, 64i32, 128i32);
    let mut rng = Rng::new(46);
    for (lf, rf) in [
        (MxFormat::Bf16, MxFormat::E2M1),
        (MxFormat::E2M1, MxFormat::E4M3),
        (MxFormat::E4M3, MxFormat::E5M2),
    ] {
        let stored = |f: MxFormat| match f {
            MxFormat::Bf16 => BF16,
            MxFormat::E4M3 => F8E4M3,
            MxFormat::E5M2 => F8E5M2,
            _ => rutile_ir::ScalarType::U8,
        };
        let kd = |f: MxFormat| if f == MxFormat::E2M1 { kk / 2 } else { kk };
        let kernel = Kernel::build("dot_scaled", |k| {
            let (pa, pb) = (k.arg_ptr("a", stored(lf)), k.arg_ptr("b", stored(rf)));
            let (psa, psb) = (
                k.arg_ptr("sa", rutile_ir::ScalarType::U8),
                k.arg_ptr("sb", rutile_ir::ScalarType::U8),
            );
            let pc = k.arg_ptr("c", F32);
            let (rm, rn) = (k.arange(0, bm), k.arange(0, bn));
            let a = k.load(pa + (rm.expand_dims(1) * kd(lf) + k.arange(0, kd(lf)).expand_dims(0)));
            // B K-contiguous, as weights are stored.
            let b = k.load(pb + (k.arange(0, kd(rf)).expand_dims(1) + rn.expand_dims(0) * kd(rf)));
            let g = k.arange(0, kk / 32).expand_dims(0);
            let sa = k.load(psa + (rm.expand_dims(1) * (kk / 32) + g));
            let sb = k.load(psb + (rn.expand_dims(1) * (kk / 32) + g));
            let c = k.dot_scaled(
                Microscaled::new(a, (lf != MxFormat::Bf16).then_some(sa), lf),
                Microscaled::new(b, Some(sb), rf),
                None,
            );
            k.store(pc + (rm.expand_dims(1) * bn + rn.expand_dims(0)), c);
        })
        .unwrap();
        let bytes = |rng: &mut Rng, f: MxFormat, n: usize| match f {
            MxFormat::E2M1 => {
                HostBuffer::from_slice(&(0..n).map(|_| (rng.next_u64() & 0xff) as u8).collect::<Vec<u8>>())
            }
            f => float_buffer(rng, stored(f), n),
        };
        let scales = |rng: &mut Rng, n: usize| {
            HostBuffer::from_slice(&(0..n).map(|_| 120 + (rng.next_u64() % 15) as u8).collect::<Vec<u8>>())
        };
        let (m, n) = (bm as usize, bn as usize);
        let buffers = vec![
            bytes(&mut rng, lf, m * kd(lf) as usize),
            bytes(&mut rng, rf, kd(rf) as usize * n),
            scales(&mut rng, m * kk as usize / 32),
            scales(&mut rng, n * kk as usize / 32),
            HostBuffer::zeros(F32, m * n),
        ];
        let label = format!("{} x {}", lf.name(), rf.name());
        for (tk, at) in scaled_dot_on_the_tensor_cores(&kernel, &buffers, &label) {
            let shared_loads = count_stmts(&tk, |s| {
                matches!(
                    s,
                    rutile_ir::thread::Stmt::Load {
                        mem: rutile_ir::thread::Memory::Shared { .. },
                        ..
                    }
                )
            });
            // The scales' factors are gathered along K by `arange(K) / 32`: a thread's values
            // of one group of 32 read their factor once (`lower/affine_index.rs`), where
            // each read its own before (at least one read a scaled value).
            // (Each operand is 64 x 128 values on 128 threads.)
            let scaled_values = if lf == MxFormat::Bf16 { 64 } else { 128 };
            assert!(
                shared_loads < scaled_values / 2,
                "{at}: {shared_loads} shared loads for {scaled_values} scaled values a thread"
            );
        }
    }
}

/// A `dot_scaled` kernel of five buffers (A, B, their scales, C) lowered for Hopper and
/// for `mma.sync`, each on the tensor cores and run in the simulator against the
/// interpreter; the lowered kernels, each with its label, for further checks.
fn scaled_dot_on_the_tensor_cores(
    kernel: &Kernel,
    buffers: &[HostBuffer],
    label: &str,
) -> Vec<(rutile_ir::thread::ThreadKernel, String)> {
    let args: Vec<ArgValue> = (0..5).map(ptr).collect();
    let mut want = buffers.to_vec();
    interp::run(kernel, [1, 1, 1], &args, &mut want).unwrap();
    let mut lowered = Vec::new();
    for (target, on) in [(hopper(4, 1), "wgmma"), (target(4), "mma.sync")] {
        let tk = lower(kernel, &target, &Specialization::all(5)).unwrap();
        let at = format!("{label} on {on}");
        assert!(wgmmas(&tk) + mmas(&tk) > 0, "{at}: not on the tensor cores");
        let mut got = buffers.to_vec();
        simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_close_to_largest(&got[4], &want[4], 1e-5, &at);
        lowered.push((tk, at));
    }
    lowered
}

/// `dot_scaled` with fp4 packed along M (left) and N (right), Triton's `k_pack=False`,
/// lowered for Hopper and `mma.sync` and run in the simulator against the interpreter: the
/// nibbles interleaved along the other dimension, then the scales along K.
#[test]
fn dot_scaled_packed_along_m_and_n_matches_the_interpreter() {
    use rutile_ir::{DotScaledOptions, Microscaled, MxFormat};
    let (bm, bn, kk) = (64i32, 64i32, 128i32);
    let mut rng = Rng::new(47);
    for (lhs_packed, rhs_packed, fast_math) in [(true, false, false), (false, true, false), (true, true, true)] {
        let (pm, pn) = (if lhs_packed { 2 } else { 1 }, if rhs_packed { 2 } else { 1 });
        let kernel = Kernel::build("dot_scaled_mn", |k| {
            let u8_ = rutile_ir::ScalarType::U8;
            let (pa, pb, psa, psb) = (
                k.arg_ptr("a", u8_),
                k.arg_ptr("b", u8_),
                k.arg_ptr("sa", u8_),
                k.arg_ptr("sb", u8_),
            );
            let pc = k.arg_ptr("c", F32);
            // A `[M / pm, K * pm / 2]` bytes, B `[K * pn / 2, N / pn]`, both row-major.
            let (ar, ac) = (bm / pm, kk * pm / 2);
            let (br, bc) = (kk * pn / 2, bn / pn);
            let a = k.load(pa + (k.arange(0, ar).expand_dims(1) * ac + k.arange(0, ac).expand_dims(0)));
            let b = k.load(pb + (k.arange(0, br).expand_dims(1) * bc + k.arange(0, bc).expand_dims(0)));
            let g = k.arange(0, kk / 32).expand_dims(0);
            let (rm, rn) = (k.arange(0, bm), k.arange(0, bn));
            let sa = k.load(psa + (rm.expand_dims(1) * (kk / 32) + g));
            let sb = k.load(psb + (rn.expand_dims(1) * (kk / 32) + g));
            let side = |v, s, packed: bool| {
                let o = Microscaled::new(v, Some(s), MxFormat::E2M1);
                if packed {
                    o.packed_along_m_or_n()
                } else {
                    o
                }
            };
            let c = k.dot_scaled_with(
                side(a, sa, lhs_packed),
                side(b, sb, rhs_packed),
                None,
                DotScaledOptions { fast_math },
            );
            k.store(pc + (rm.expand_dims(1) * bn + rn.expand_dims(0)), c);
        })
        .unwrap();
        let bytes = |rng: &mut Rng, n: usize| {
            HostBuffer::from_slice(&(0..n).map(|_| (rng.next_u64() & 0xff) as u8).collect::<Vec<u8>>())
        };
        let scales = |rng: &mut Rng, n: usize| {
            HostBuffer::from_slice(&(0..n).map(|_| 120 + (rng.next_u64() % 15) as u8).collect::<Vec<u8>>())
        };
        let (m, n, k) = (bm as usize, bn as usize, kk as usize);
        let buffers = vec![
            bytes(&mut rng, m * k / 2),
            bytes(&mut rng, k * n / 2),
            scales(&mut rng, m * k / 32),
            scales(&mut rng, n * k / 32),
            HostBuffer::zeros(F32, m * n),
        ];
        let label = format!("packed along M {lhs_packed}, along N {rhs_packed}");
        scaled_dot_on_the_tensor_cores(&kernel, &buffers, &label);
    }
}

/// `dot_scaled` in a matmul's K loop, as microscaled weights are used, on Hopper's and
/// Ampere's pipelines: its loads are copied iterations ahead (the bf16 activations into the
/// MMA's tile, the fp4 or fp8 bytes and their scales into each thread's own slots), so
/// that no global load is left in the loop, and the loaded bytes are decoded in the layout
/// they were loaded in, with no exchange of them; on warpgroup MMAs, the MMAs of one
/// iteration stay in flight while the next decodes (`wait_group 1`), the widened operands
/// stored into two tiles in turn. Ragged M and N (masked rows and columns), several
/// iterations, one and two warpgroups, checked in the simulator against the interpreter.
#[test]
fn dot_scaled_in_a_k_loop_copies_its_loads_ahead() {
    use rutile_ir::thread::Memory;
    use rutile_ir::{Microscaled, MxFormat};
    let (bm, bn, bk, kk) = (128i32, 64i32, 128i32, 384i32);
    let (m, n) = (100usize, 37usize);
    let mut rng = Rng::new(47);
    for (lf, rf) in [(MxFormat::Bf16, MxFormat::E2M1), (MxFormat::E4M3, MxFormat::E4M3)] {
        let stored = |f: MxFormat| match f {
            MxFormat::Bf16 => BF16,
            _ => rutile_ir::ScalarType::U8,
        };
        let kd = |f: MxFormat, k: i32| if f == MxFormat::E2M1 { k / 2 } else { k };
        let kernel = Kernel::build("scaled_matmul", |k| {
            let (pa, pb) = (k.arg_ptr("a", stored(lf)), k.arg_ptr("b", stored(rf)));
            let u8t = rutile_ir::ScalarType::U8;
            let (psa, psb) = (k.arg_ptr("sa", u8t), k.arg_ptr("sb", u8t));
            let pc = k.arg_ptr("c", F32);
            let (mm, nn) = (k.arg_i32("M"), k.arg_i32("N"));
            let (rm, rn) = (k.arange(0, bm), k.arange(0, bn));
            let (rows, cols) = (rm.lt(mm).expand_dims(1), rn.lt(nn).expand_dims(0));
            let g = k.arange(0, bk / 32).expand_dims(0);
            let acc = k.zeros(&[bm as u32, bn as u32], F32);
            let out = k.for_range(0, kk / bk, 1, &[acc], |step, carried| {
                let ka = step * kd(lf, bk) + k.arange(0, kd(lf, bk));
                let kb = step * kd(rf, bk) + k.arange(0, kd(rf, bk));
                let a_ptr = pa + (rm.expand_dims(1) * kd(lf, kk) + ka.expand_dims(0));
                let a = match lf {
                    MxFormat::Bf16 => k.load_masked(a_ptr, rows, 0.0),
                    _ => k.load_masked(a_ptr, rows, 0),
                };
                // B K-contiguous, as weights are stored.
                let b = k.load_masked(pb + (kb.expand_dims(1) + rn.expand_dims(0) * kd(rf, kk)), cols, 0);
                let s = step * (bk / 32) + g;
                let sa = k.load_masked(psa + (rm.expand_dims(1) * (kk / 32) + s), rows, 0);
                let sb = k.load_masked(psb + (rn.expand_dims(1) * (kk / 32) + s), rn.lt(nn).expand_dims(1), 0);
                vec![k.dot_scaled(
                    Microscaled::new(a, (lf != MxFormat::Bf16).then_some(sa), lf),
                    Microscaled::new(b, Some(sb), rf),
                    Some(carried[0]),
                )]
            });
            k.store_masked(pc + (rm.expand_dims(1) * bn + rn.expand_dims(0)), out[0], rows & cols);
        })
        .unwrap();
        let bytes = |rng: &mut Rng, f: MxFormat, count: usize| match f {
            MxFormat::Bf16 => float_buffer(rng, BF16, count),
            // fp4 pairs, or E4M3 bytes of finite values (no 0x7f/0xff NaNs).
            _ => HostBuffer::from_slice(
                &(0..count)
                    .map(|_| (rng.next_u64() & 0xff) as u8)
                    .map(|b| {
                        if f == MxFormat::E4M3 && b & 0x7f == 0x7f {
                            b ^ 1
                        } else {
                            b
                        }
                    })
                    .collect::<Vec<u8>>(),
            ),
        };
        let scales = |rng: &mut Rng, count: usize| {
            HostBuffer::from_slice(
                &(0..count)
                    .map(|_| 120 + (rng.next_u64() % 15) as u8)
                    .collect::<Vec<u8>>(),
            )
        };
        let buffers = vec![
            bytes(&mut rng, lf, bm as usize * kd(lf, kk) as usize),
            bytes(&mut rng, rf, kd(rf, kk) as usize * bn as usize),
            scales(&mut rng, bm as usize * kk as usize / 32),
            scales(&mut rng, bn as usize * kk as usize / 32),
            HostBuffer::zeros(F32, bm as usize * bn as usize),
        ];
        let mut args: Vec<ArgValue> = (0..5).map(ptr).collect();
        args.extend([ArgValue::Int(m as i64), ArgValue::Int(n as i64)]);
        let mut want = buffers.clone();
        interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
        for (target, on) in [
            (hopper(4, 3), "wgmma, 4 warps"),
            (hopper(8, 3), "wgmma, 8 warps"),
            (pipelined(4, 3), "mma.sync"),
        ] {
            let tk = lower(&kernel, &target, &runtime_spec(&args)).unwrap();
            let at = format!("{} x {} on {on}", lf.name(), rf.name());
            assert!(wgmmas(&tk) + mmas(&tk) > 0, "{at}: not on the tensor cores");
            let in_flight = count_stmts(&tk, |s| matches!(s, Stmt::WgmmaWait { pending: 1 }));
            assert_eq!(in_flight > 0, target.wgmma, "{at}: MMAs left in flight");
            // In the loop (after its first wait for the copies): no global load, and the
            // shared stores are the MMA's staging of the widened operands (one for each
            // computed operand) and the scale factors' gather, not an exchange of bytes.
            let (mut waited, mut global_loads) = (false, 0);
            tk.walk(&mut |s| match s {
                Stmt::AsyncWait { .. } => waited = true,
                Stmt::Load {
                    mem: Memory::Global { .. },
                    ..
                } if waited => global_loads += 1,
                _ => {}
            });
            assert_eq!(global_loads, 0, "{at}: global loads left in the loop");
            if rf == MxFormat::E2M1 {
                // Two neighbouring bytes' four magnitudes looked up together (two `prmt`s),
                // each byte's two placed as the halves of one word (one `prmt` a byte):
                // a byte permute a value. Each value is its word's half as it is: no
                // conversion of a decoded value (the only roundings to bf16 are the
                // scales' factors, one for each group of 32 a thread holds part of: a
                // handful, where a rounding a value would be one for each).
                use rutile_ir::thread::Expr;
                let set = |s: &Stmt, f: &dyn Fn(&Expr) -> bool| matches!(s, Stmt::Set { expr, .. } if f(expr));
                let permutes = count_stmts(&tk, |s| set(s, &|e| matches!(e, Expr::BytePerm(..))));
                let typed = |s: &Stmt, bitcast: bool| match s {
                    Stmt::Set { dst, expr } if tk.reg_type(*dst) == BF16 => {
                        matches!(expr, Expr::Bitcast(_)) == bitcast && matches!(expr, Expr::Bitcast(_) | Expr::Cast(_))
                    }
                    _ => false,
                };
                let (values, to_bf16) = (
                    count_stmts(&tk, |s| typed(s, true)),
                    count_stmts(&tk, |s| typed(s, false)),
                );
                assert!(
                    values > 0 && permutes == values && 4 * to_bf16 <= values,
                    "{at}: {permutes} byte permutes, {values} values, {to_bf16} roundings to bf16"
                );
            }
            let mut got = buffers.clone();
            simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_close_to_largest(&got[4], &want[4], 1e-5, &at);
        }
    }
}

/// Every fp4 byte decodes to its two values by their definition (`±m/2` where the
/// exponent field is 0, else `±2^(e - 1) (1 + m/2)`), in bf16 and in f16, along both of
/// the ways `dot_scaled` decodes them: packed along K (neighbouring bytes of a row share a
/// lookup) and along M (the bytes transposed first). Each product is with an identity, so
/// the result is the decoded operand itself; in the interpreter and lowered for a plain
/// target in the simulator.
#[test]
fn every_fp4_byte_decodes_to_its_values() {
    use rutile_ir::{Microscaled, MxFormat};
    fn fp4(nibble: u8) -> f32 {
        let (e, m) = ((nibble >> 1) & 3, (nibble & 1) as f32);
        let magnitude = if e == 0 {
            m / 2.0
        } else {
            2f32.powi(e as i32 - 1) * (1.0 + m / 2.0)
        };
        if nibble & 8 != 0 {
            -magnitude
        } else {
            magnitude
        }
    }
    let u8_ = rutile_ir::ScalarType::U8;
    for (identity_type, identity_format) in [(BF16, MxFormat::Bf16), (F16, MxFormat::Fp16)] {
        // (rows of bytes, bytes a row, packed along K) and the result's shape.
        for (rows, cols, k_pack) in [(16, 8, true), (8, 16, false)] {
            let (m, k) = if k_pack { (rows, 2 * cols) } else { (2 * rows, cols) };
            let kernel = Kernel::build("fp4_decode", |b| {
                let (pa, pi, pc) = (b.arg_ptr("a", u8_), b.arg_ptr("i", identity_type), b.arg_ptr("c", F32));
                let a = b.load(pa + (b.arange(0, rows).expand_dims(1) * cols + b.arange(0, cols).expand_dims(0)));
                let at = b.arange(0, k).expand_dims(1) * k + b.arange(0, k).expand_dims(0);
                let identity = b.load(pi + at);
                let lhs = Microscaled::new(a, None, MxFormat::E2M1);
                let lhs = if k_pack { lhs } else { lhs.packed_along_m_or_n() };
                let c = b.dot_scaled(lhs, Microscaled::new(identity, None, identity_format), None);
                b.store(
                    pc + (b.arange(0, m).expand_dims(1) * k + b.arange(0, k).expand_dims(0)),
                    c,
                );
            })
            .unwrap();
            let identity: Vec<f32> = (0..k * k).map(|i| (i / k == i % k) as u8 as f32).collect();
            let identity = match identity_type {
                BF16 => HostBuffer::from_slice(&identity.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>()),
                _ => HostBuffer::from_slice(&identity.iter().map(|&v| half::f16::from_f32(v)).collect::<Vec<_>>()),
            };
            let per_launch = (rows * cols) as usize;
            for first in (0..256).step_by(per_launch) {
                let bytes: Vec<u8> = (first..first + per_launch).map(|b| b as u8).collect();
                // The decoded operand `[m, k]`: a byte's low nibble first along K, or
                // (packed along M) in row 0 and its high nibble in row 1.
                let mut want = vec![0f32; (m * k) as usize];
                for (i, &byte) in bytes.iter().enumerate() {
                    let (r, c) = (i / cols as usize, i % cols as usize);
                    let (lo, hi) = (fp4(byte & 15), fp4(byte >> 4));
                    if k_pack {
                        want[r * k as usize + 2 * c] = lo;
                        want[r * k as usize + 2 * c + 1] = hi;
                    } else {
                        want[2 * r * k as usize + c] = lo;
                        want[(2 * r + 1) * k as usize + c] = hi;
                    }
                }
                let buffers = vec![
                    HostBuffer::from_slice(&bytes),
                    identity.clone(),
                    HostBuffer::zeros(F32, (m * k) as usize),
                ];
                let args: Vec<ArgValue> = (0..3).map(|b| ArgValue::Ptr { buffer: b, offset: 0 }).collect();
                let mut got = buffers.clone();
                interp::run(&kernel, [1, 1, 1], &args, &mut got).unwrap();
                let at = format!("{identity_type}, packed along K {k_pack}, bytes {first}..");
                assert_eq!(got[2].to_vec::<f32>().unwrap(), want, "interpreter: {at}");
                let tk = lower(&kernel, &Target::nvidia(4, 48 * 1024), &Specialization::none(3)).unwrap();
                let mut got = buffers.clone();
                simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
                assert_eq!(got[2].to_vec::<f32>().unwrap(), want, "lowered: {at}");
            }
        }
    }
}
