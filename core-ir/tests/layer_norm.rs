//! The layer norm tutorial's kernels (forward, backward of the input gradient with the
//! locked partial sums, and the final sum of the weight and bias gradients) in the
//! interpreter against f64 references on random inputs and ragged sizes, and lowered for
//! several targets and run in the SIMT simulator against the interpreter.

mod tutorial_support;

use half::f16;
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::seeds::{
    layer_norm_backward_dwdb, layer_norm_backward_dx, layer_norm_forward, layer_norm_forward_row,
    layer_norm_forward_row_block, layer_norm_forward_row_one_exchange, layer_norm_forward_rows, LayerNormBackwardMeta,
    LayerNormMeta, RowParams, RowStats,
};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Memory, Stmt};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{self, F16, F32, I32};
use tutorial_support::rows::{layer_norm_reference, EPS};
use tutorial_support::{assert_close, buffer_of, ptr, simulate_on, simulate_targets, values};

/// The input, weight and bias gradients, in f64.
fn backward_reference(
    x: &[f64],
    w: &[f64],
    dy: &[f64],
    means: &[f64],
    rstds: &[f64],
    m: usize,
    n: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut dx, mut dw, mut db) = (vec![0.0; m * n], vec![0.0; n], vec![0.0; n]);
    for r in 0..m {
        let x_hat: Vec<f64> = (0..n).map(|c| (x[r * n + c] - means[r]) * rstds[r]).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] * dy[r * n + c]).collect();
        let c1 = x_hat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        for c in 0..n {
            dx[r * n + c] = (wdy[c] - (x_hat[c] * c1 + c2)) * rstds[r];
            dw[c] += dy[r * n + c] * x_hat[c];
            db[c] += dy[r * n + c];
        }
    }
    (dx, dw, db)
}

/// Random rows with a mean away from zero (so that the variance pass matters) and a
/// weight and bias of both signs.
struct Inputs {
    x: HostBuffer,
    w: HostBuffer,
    b: HostBuffer,
    dy: HostBuffer,
}

fn inputs(rng: &mut Rng, dtype: ScalarType, m: usize, n: usize) -> Inputs {
    let x: Vec<f32> = rng.f32s(m * n, -2.0, 4.0);
    Inputs {
        x: buffer_of(dtype, &x),
        w: buffer_of(dtype, &rng.f32s(n, -1.5, 1.5)),
        b: buffer_of(dtype, &rng.f32s(n, -1.0, 1.0)),
        dy: buffer_of(dtype, &rng.f32s(m * n, -1.0, 1.0)),
    }
}

fn forward_args(m: usize, n: usize) -> (Vec<ArgValue>, [u32; 3]) {
    let args = vec![
        ptr(0),
        ptr(1),
        ptr(2),
        ptr(3),
        ptr(4),
        ptr(5),
        ArgValue::Int(n as i64),
        ArgValue::Int(n as i64),
        ArgValue::Float(EPS),
    ];
    (args, [m as u32, 1, 1])
}

fn forward_buffers(inp: &Inputs, dtype: ScalarType, m: usize, n: usize) -> Vec<HostBuffer> {
    vec![
        inp.x.clone(),
        HostBuffer::zeros(dtype, m * n),
        inp.w.clone(),
        inp.b.clone(),
        HostBuffer::zeros(F32, m),
        HostBuffer::zeros(F32, m),
    ]
}

/// Rows that end inside their block, one that fills it (4096) and rows of one element, in
/// f16 and f32: `(M, N, type)`.
const RAGGED: [(usize, usize, ScalarType); 5] = [
    (13, 1500, F16),
    (9, 4096, F16),
    (37, 781, F32),
    (5, 1, F32),
    (3, 2047, F16),
];

/// The tolerance of a result of `dtype` computed in f32 (f16: half an ulp of the output
/// and of the f16 inputs' products).
fn tolerance(dtype: ScalarType) -> f64 {
    if dtype == F16 {
        4e-3
    } else {
        2e-5
    }
}

#[test]
fn forward_matches_the_reference() {
    let mut rng = Rng::new(51);
    for (m, n, dtype, block) in [
        (37, 781, F32, None),
        (5, 1, F32, None),
        (13, 1500, F16, None),
        (9, 4096, F16, None),
        // Blocks shorter than the row: the passes loop, the last block masked.
        (11, 781, F32, Some(128)),
        (7, 3000, F16, Some(512)),
    ] {
        let meta = match block {
            Some(block_size) => LayerNormMeta { block_size, dtype },
            None => LayerNormMeta::for_row(n as u32, dtype).unwrap(),
        };
        let inp = inputs(&mut rng, dtype, m, n);
        let mut buffers = forward_buffers(&inp, dtype, m, n);
        let (args, grid) = forward_args(m, n);
        interp::run(&layer_norm_forward(&meta).unwrap(), grid, &args, &mut buffers).unwrap();
        let (x, w, b) = (values(&inp.x), values(&inp.w), values(&inp.b));
        let (means, rstds, y) = layer_norm_reference(&x, &w, &b, m, n);
        let at = format!("{m}x{n} {dtype}, block {}", meta.block_size);
        assert_close(&values(&buffers[4]), &means, 1e-5, 1e-5, &format!("{at}: mean"));
        assert_close(&values(&buffers[5]), &rstds, 1e-5, 0.0, &format!("{at}: rstd"));
        assert_close(
            &values(&buffers[1]),
            &y,
            tolerance(dtype),
            tolerance(dtype),
            &format!("{at}: y"),
        );
    }
}

/// The one-pass kernel for rows that fit one block: the tutorial's results bit for bit
/// (mean, rstd and y), on ragged rows and a row of one element, in f16 and f32.
#[test]
fn the_one_pass_forward_equals_the_tutorials() {
    let mut rng = Rng::new(57);
    for (m, n, dtype) in RAGGED {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let inp = inputs(&mut rng, dtype, m, n);
        let (args, grid) = forward_args(m, n);
        let mut tutorial = forward_buffers(&inp, dtype, m, n);
        interp::run(&layer_norm_forward(&meta).unwrap(), grid, &args, &mut tutorial).unwrap();
        let mut one_pass = forward_buffers(&inp, dtype, m, n);
        interp::run(&layer_norm_forward_row(&meta).unwrap(), grid, &args, &mut one_pass).unwrap();
        for (i, what) in [(1, "y"), (4, "mean"), (5, "rstd")] {
            assert_eq!(
                one_pass[i].as_bytes(),
                tutorial[i].as_bytes(),
                "{m}x{n} {dtype}: {what} differs from the tutorial's kernel"
            );
        }
        let (means, _, y) = layer_norm_reference(&values(&inp.x), &values(&inp.w), &values(&inp.b), m, n);
        assert_close(&values(&one_pass[4]), &means, 1e-5, 1e-5, &format!("{m}x{n}: mean"));
        assert_close(
            &values(&one_pass[1]),
            &y,
            tolerance(dtype),
            tolerance(dtype),
            &format!("{m}x{n}: y"),
        );
    }
    // A row longer than the block is refused where the kernel runs in the interpreter.
    let (m, n) = (2, 300);
    let inp = inputs(&mut rng, F32, m, n);
    let (args, grid) = forward_args(m, n);
    let short = LayerNormMeta {
        block_size: 256,
        dtype: F32,
    };
    let e = interp::run(
        &layer_norm_forward_row(&short).unwrap(),
        grid,
        &args,
        &mut forward_buffers(&inp, F32, m, n),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("longer than BLOCK_SIZE"), "{e}");
}

/// The one-pass kernel with its statistics in one exchange (shifted sums): within rounding
/// of the f64 reference on ragged rows, a row of one element, and rows far from zero
/// (mean 1000, spread 1: the shift by the row's first element keeps the variance's
/// cancellation to the spread), in f16 and f32.
#[test]
fn the_one_exchange_forward_matches_the_reference() {
    let mut rng = Rng::new(59);
    for (m, n, dtype, offset) in [
        (13, 1500, F16, 0.0),
        (9, 4096, F16, 0.0),
        (37, 781, F32, 0.0),
        (5, 1, F32, 0.0),
        (3, 2047, F16, 0.0),
        (7, 999, F32, 1000.0),
        (4, 1000, F16, 1000.0),
    ] {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let mut inp = inputs(&mut rng, dtype, m, n);
        if offset != 0.0 {
            let x: Vec<f32> = rng.f32s(m * n, -1.0, 1.0).into_iter().map(|v| offset + v).collect();
            inp.x = buffer_of(dtype, &x);
        }
        let (args, grid) = forward_args(m, n);
        let mut got = forward_buffers(&inp, dtype, m, n);
        interp::run(
            &layer_norm_forward_row_one_exchange(&meta).unwrap(),
            grid,
            &args,
            &mut got,
        )
        .unwrap();
        let (means, rstds, y) = layer_norm_reference(&values(&inp.x), &values(&inp.w), &values(&inp.b), m, n);
        let at = format!("{m}x{n} {dtype} about {offset}");
        assert_close(&values(&got[4]), &means, 1e-5, 1e-5, &format!("{at}: mean"));
        assert_close(&values(&got[5]), &rstds, 1e-4, 0.0, &format!("{at}: rstd"));
        if offset == 0.0 {
            assert_close(
                &values(&got[1]),
                &y,
                tolerance(dtype),
                tolerance(dtype),
                &format!("{at}: y"),
            );
            continue;
        }
        // Far from zero, f32's own rounding of `x - mean` (an ulp of 1000 is 6e-5) bounds any
        // f32 kernel: no worse than twice the one-pass kernel's error.
        let mut two = forward_buffers(&inp, dtype, m, n);
        interp::run(&layer_norm_forward_row(&meta).unwrap(), grid, &args, &mut two).unwrap();
        let worst = |out: &HostBuffer| {
            values(out)
                .iter()
                .zip(&y)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0f64, f64::max)
        };
        let (mine, theirs) = (worst(&got[1]), worst(&two[1]));
        assert!(
            mine <= 2.0 * theirs + 1e-6,
            "{at}: y off by {mine:.2e}, the one-pass kernel's by {theirs:.2e}"
        );
    }
}

/// The kernel whose programs walk rows in a loop pipelined 2 or 3 deep: bit for bit the
/// held-row kernel of the same statistics, on grids of fewer programs than rows (each
/// program walks several, the last program's walk ragged), as many, and more (programs
/// with no row store nothing), on ragged rows in f16 and f32.
#[test]
fn the_row_walking_forward_equals_the_held_row_kernels() {
    let mut rng = Rng::new(61);
    for (m, n, dtype) in [(13, 1500, F16), (10, 781, F32), (5, 1, F32), (7, 2048, F16)] {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let inp = inputs(&mut rng, dtype, m, n);
        let (mut args, grid) = forward_args(m, n);
        args.push(ArgValue::Int(m as i64));
        for stats in [RowStats::TwoReductions, RowStats::OneExchange] {
            let held = match stats {
                RowStats::TwoReductions => layer_norm_forward_row(&meta),
                RowStats::OneExchange => layer_norm_forward_row_one_exchange(&meta),
            };
            let mut want = forward_buffers(&inp, dtype, m, n);
            interp::run(&held.unwrap(), grid, &args[..9], &mut want).unwrap();
            for (stages, params) in [2, 3]
                .into_iter()
                .flat_map(|s| [(s, RowParams::Reloaded), (s, RowParams::Held)])
            {
                let kernel = layer_norm_forward_rows(&meta, stats, params, stages).unwrap();
                for programs in [1, 3, m as u32, m as u32 + 2] {
                    let mut got = forward_buffers(&inp, dtype, m, n);
                    interp::run(&kernel, [programs, 1, 1], &args, &mut got).unwrap();
                    for (i, what) in [(1, "y"), (4, "mean"), (5, "rstd")] {
                        assert_eq!(
                            got[i].as_bytes(),
                            want[i].as_bytes(),
                            "{m}x{n} {dtype} {stats:?}, {params:?}, {stages} stages, {programs} programs: {what} differs from the held-row kernel's"
                        );
                    }
                }
            }
        }
    }
}

/// Lowered for a target with asynchronous copies, the row walk's loads become copies into
/// each thread's own slots, `num_stages - 1` rows ahead, with no barrier of their own: as
/// many barriers as the one-pass kernel's reductions, and one after the loop. Run in the
/// simulator against the interpreter (which reports a thread reading slots before its copy
/// is complete, or another thread's), on rows whose accesses are 16 bytes (f16 at 2048
/// columns, f32 at 2000 of a block of 2048, the last vectors masked), 2 and 3 stages, 3
/// programs walking 7 rows (2 stages also with the weight and bias held across rows);
/// without asynchronous copies, the same loop with plain loads.
#[test]
fn the_row_walk_copies_rows_ahead_without_barriers() {
    let mut rng = Rng::new(67);
    for (m, n, dtype) in [(7, 2048, F16), (7, 2000, F32)] {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let inp = inputs(&mut rng, dtype, m, n);
        let (mut args, _) = forward_args(m, n);
        args.push(ArgValue::Int(m as i64));
        for (stages, params) in [(2, RowParams::Reloaded), (3, RowParams::Reloaded), (2, RowParams::Held)] {
            let kernel = layer_norm_forward_rows(&meta, RowStats::TwoReductions, params, stages).unwrap();
            let spec = Specialization::all(kernel.params.len());
            for async_copy in [true, false] {
                let target = Target {
                    async_copy,
                    ..Target::nvidia(4, 48 * 1024)
                };
                let t = rutile_ir::lower::lower(&kernel, &target, &spec)
                    .unwrap_or_else(|e| panic!("{m}x{n} {dtype} {stages} {async_copy}: {e}"));
                let (mut copies, mut barriers) = (0, 0);
                t.walk(&mut |s| {
                    copies += matches!(s, Stmt::AsyncCopy { .. }) as usize;
                    barriers += matches!(s, Stmt::Barrier) as usize;
                });
                let one_pass =
                    rutile_ir::lower::lower(&layer_norm_forward_row(&meta).unwrap(), &target, &spec).unwrap();
                let mut row_barriers = 0;
                one_pass.walk(&mut |s| row_barriers += matches!(s, Stmt::Barrier) as usize);
                let at = format!("{m}x{n} {dtype}, {params:?}, {stages} stages, async copies {async_copy}");
                match async_copy {
                    // The copies of the first rows before the loop and of a later row in it.
                    true => {
                        assert!(copies > 0, "{at}: no asynchronous copy");
                        assert_eq!(barriers, row_barriers + 1, "{at}: barriers");
                    }
                    false => assert_eq!(copies, 0, "{at}"),
                }
                simulate_on_three_programs(&format!("row walk {at}"), &kernel, target, &args, &inp, (dtype, m, n));
            }
        }
    }
}

/// What the one-exchange kernel is for: lowered for 8 warps of 32 (shuffles within a warp,
/// shared memory between warps), it meets its warps at half the barriers of the one-pass
/// kernel, whose variance waits for its mean.
#[test]
fn the_one_exchange_forward_halves_the_barriers() {
    let meta = LayerNormMeta::for_row(4096, F16).unwrap();
    let target = Target::nvidia(8, 48 * 1024);
    let barriers = |kernel: &Kernel| {
        let t = rutile_ir::lower::lower(kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
        let mut n = 0;
        t.walk(&mut |s| n += matches!(s, Stmt::Barrier) as usize);
        n
    };
    let two = barriers(&layer_norm_forward_row(&meta).unwrap());
    let one = barriers(&layer_norm_forward_row_one_exchange(&meta).unwrap());
    assert!(
        two > 0 && one * 2 == two,
        "one-pass: {two} barriers, one exchange: {one}"
    );
}

/// The kernel of `block_m` rows a program: within rounding of the f64 reference on ragged
/// rows and row counts (`M` not a multiple of `block_m`, so that the last program's rows
/// past `M` must store nothing), a row of one element, in f16 and f32; the same results
/// from every grid of at least `cdiv(M, block_m)` programs.
#[test]
fn the_row_block_forward_matches_the_reference() {
    let mut rng = Rng::new(71);
    for (m, n, dtype) in RAGGED {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let inp = inputs(&mut rng, dtype, m, n);
        let (mut args, _) = forward_args(m, n);
        args.push(ArgValue::Int(m as i64));
        let (means, rstds, y) = layer_norm_reference(&values(&inp.x), &values(&inp.w), &values(&inp.b), m, n);
        for block_m in [1u32, 2, 4, 8] {
            let kernel = layer_norm_forward_row_block(&meta, block_m).unwrap();
            let programs = (m as u32).div_ceil(block_m);
            let mut first = None;
            for grid in [programs, programs + 1] {
                let mut got = forward_buffers(&inp, dtype, m, n);
                interp::run(&kernel, [grid, 1, 1], &args, &mut got).unwrap();
                let at = format!("{m}x{n} {dtype}, {block_m} rows a program, {grid} programs");
                assert_close(&values(&got[4]), &means, 1e-5, 1e-5, &format!("{at}: mean"));
                assert_close(&values(&got[5]), &rstds, 1e-4, 0.0, &format!("{at}: rstd"));
                let tol = tolerance(dtype);
                assert_close(&values(&got[1]), &y, tol, tol, &format!("{at}: y"));
                let bytes: Vec<Vec<u8>> = got.iter().map(|b| b.as_bytes().to_vec()).collect();
                assert_eq!(
                    first.get_or_insert_with(|| bytes.clone()),
                    &bytes,
                    "{at}: another grid's results"
                );
            }
        }
    }
}

/// What the row-block kernel is for: lowered for as many warps as rows or fewer, each row
/// lies in one warp, and its statistics need no barrier; with more warps than rows, a
/// row spans warps and meets them at the one-pass kernel's barriers. Simulated against the
/// interpreter (which the simulator checks for races and a missing barrier) on 16-byte
/// rows and ragged ones, on warps of 32 and of 8, with and without shuffles.
#[test]
fn the_row_block_forward_reduces_each_row_within_a_warp() {
    let mut rng = Rng::new(73);
    let barriers = |kernel: &Kernel, target: &Target| {
        let t = rutile_ir::lower::lower(kernel, target, &Specialization::all(kernel.params.len())).unwrap();
        let mut n = 0;
        t.walk(&mut |s| n += matches!(s, Stmt::Barrier) as usize);
        n
    };
    let meta = LayerNormMeta::for_row(2048, F16).unwrap();
    let kernel = layer_norm_forward_row_block(&meta, 4).unwrap();
    for warps in [1, 2, 4] {
        let b = barriers(&kernel, &Target::nvidia(warps, 48 * 1024));
        assert_eq!(b, 0, "4 rows on {warps} warps: {b} barriers");
    }
    let one_pass = barriers(&layer_norm_forward_row(&meta).unwrap(), &Target::nvidia(8, 48 * 1024));
    let spread = barriers(&kernel, &Target::nvidia(8, 48 * 1024));
    assert!(
        spread > 0 && spread == one_pass,
        "4 rows on 8 warps: {spread} barriers, the one-pass kernel {one_pass}"
    );
    for (m, n, dtype) in [(7, 2048, F16), (6, 1000, F32)] {
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let inp = inputs(&mut rng, dtype, m, n);
        let (mut args, _) = forward_args(m, n);
        args.push(ArgValue::Int(m as i64));
        for block_m in [2, 4] {
            let kernel = layer_norm_forward_row_block(&meta, block_m).unwrap();
            simulate_targets(
                &format!("{m}x{n} {dtype}, {block_m} rows a program"),
                &kernel,
                [(m as u32).div_ceil(block_m), 1, 1],
                &args,
                &forward_buffers(&inp, dtype, m, n),
                1e-5,
            );
        }
    }
}

#[test]
fn the_heuristic_covers_rows_up_to_64_kib() {
    let meta = LayerNormMeta::for_row(781, F16).unwrap();
    assert_eq!((meta.block_size, meta.num_warps()), (1024, 4));
    assert_eq!(LayerNormMeta::for_row(4096, F16).unwrap().num_warps(), 8);
    assert_eq!(LayerNormMeta::for_row(8192, F16).unwrap().num_warps(), 16);
    assert_eq!(LayerNormMeta::for_row(32768, F16).unwrap().num_warps(), 32);
    assert_eq!(LayerNormMeta::for_row(16384, F32).unwrap().block_size, 16384);
    assert!(LayerNormMeta::for_row(16385, F32).is_none());
    assert!(LayerNormMeta::for_row(32769, F16).is_none());
}

/// Runs the backward pass (both kernels) in the interpreter; returns `dx`, `dw`, `db`.
fn backward(
    inp: &Inputs,
    means: &HostBuffer,
    rstds: &HostBuffer,
    meta: &LayerNormBackwardMeta,
    m: usize,
    n: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (buffers, dx_args, grid) = backward_launch(inp, means, rstds, meta, m, n);
    let mut buffers = buffers;
    interp::run(&layer_norm_backward_dx(meta).unwrap(), grid, &dx_args, &mut buffers).unwrap();
    let groups = (meta.group_size_m as usize).min(m);
    let dtype = meta.dtype;
    let mut sums = vec![
        buffers[2].clone(),
        buffers[3].clone(),
        HostBuffer::zeros(dtype, n),
        HostBuffer::zeros(dtype, n),
    ];
    let args = [
        ptr(0),
        ptr(1),
        ptr(2),
        ptr(3),
        ArgValue::Int(groups as i64),
        ArgValue::Int(n as i64),
    ];
    let kernel = layer_norm_backward_dwdb(32, 128, dtype).unwrap();
    interp::run(&kernel, [n.div_ceil(128) as u32, 1, 1], &args, &mut sums).unwrap();
    (values(&buffers[0]), values(&sums[2]), values(&sums[3]))
}

/// The buffers and arguments of `_layer_norm_bwd_dx_fused`: `DX, DY, DW, DB, X, W, Mean,
/// Rstd, Lock`.
fn backward_launch(
    inp: &Inputs,
    means: &HostBuffer,
    rstds: &HostBuffer,
    meta: &LayerNormBackwardMeta,
    m: usize,
    n: usize,
) -> (Vec<HostBuffer>, Vec<ArgValue>, [u32; 3]) {
    let group = meta.group_size_m as usize;
    let buffers = vec![
        HostBuffer::zeros(meta.dtype, m * n),
        inp.dy.clone(),
        HostBuffer::zeros(meta.dtype, group * n),
        HostBuffer::zeros(meta.dtype, group * n),
        inp.x.clone(),
        inp.w.clone(),
        means.clone(),
        rstds.clone(),
        HostBuffer::zeros(I32, 2 * group),
    ];
    let mut args: Vec<ArgValue> = (0..9).map(ptr).collect();
    args.extend([ArgValue::Int(n as i64), ArgValue::Int(n as i64)]);
    (buffers, args, [m as u32, 1, 1])
}

#[test]
fn backward_matches_the_reference() {
    let mut rng = Rng::new(52);
    for (m, n, dtype, group_size_m) in [(37, 781, F32, 8), (5, 100, F32, 16), (40, 300, F16, 6), (3, 1, F32, 4)] {
        let inp = inputs(&mut rng, dtype, m, n);
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let mut fwd = forward_buffers(&inp, dtype, m, n);
        let (args, grid) = forward_args(m, n);
        interp::run(&layer_norm_forward(&meta).unwrap(), grid, &args, &mut fwd).unwrap();
        let bwd = LayerNormBackwardMeta {
            group_size_m,
            block_size_n: meta.block_size,
            dtype,
        };
        let (dx, dw, db) = backward(&inp, &fwd[4], &fwd[5], &bwd, m, n);
        let (x, w, dy) = (values(&inp.x), values(&inp.w), values(&inp.dy));
        let (want_dx, want_dw, want_db) = backward_reference(&x, &w, &dy, &values(&fwd[4]), &values(&fwd[5]), m, n);
        let at = format!("{m}x{n} {dtype}, {group_size_m} groups");
        let tol = tolerance(dtype);
        assert_close(&dx, &want_dx, tol, tol, &format!("{at}: dx"));
        // The partial sums add up to m / group_size_m rows in `dtype`: scale the bound by
        // the number of rounding steps and the size of the sums (about sqrt(rows)).
        let steps = m.div_ceil(group_size_m as usize) as f64;
        let scale = (m as f64).sqrt();
        assert_close(&dw, &want_dw, tol * steps, tol * steps * scale, &format!("{at}: dw"));
        assert_close(&db, &want_db, tol * steps, tol * steps * scale, &format!("{at}: db"));
    }
}

#[test]
fn lowered_kernels_match_the_interpreter() {
    let mut rng = Rng::new(53);
    for (m, n, dtype) in [(9, 781, F32), (6, 200, F16)] {
        let inp = inputs(&mut rng, dtype, m, n);
        let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
        let looped = LayerNormMeta { block_size: 128, dtype };
        let (args, grid) = forward_args(m, n);
        for meta in [meta, looped] {
            let kernel = layer_norm_forward(&meta).unwrap();
            let at = format!("forward {m}x{n} {dtype}, block {}", meta.block_size);
            simulate_targets(&at, &kernel, grid, &args, &forward_buffers(&inp, dtype, m, n), 1e-5);
        }
        let kernel = layer_norm_forward_row(&meta).unwrap();
        let at = format!("one-pass forward {m}x{n} {dtype}");
        simulate_targets(&at, &kernel, grid, &args, &forward_buffers(&inp, dtype, m, n), 1e-5);
        let kernel = layer_norm_forward_row_one_exchange(&meta).unwrap();
        let at = format!("one-exchange forward {m}x{n} {dtype}");
        simulate_targets(&at, &kernel, grid, &args, &forward_buffers(&inp, dtype, m, n), 1e-5);
        let mut fwd = forward_buffers(&inp, dtype, m, n);
        interp::run(&layer_norm_forward(&meta).unwrap(), grid, &args, &mut fwd).unwrap();
        let bwd = LayerNormBackwardMeta {
            group_size_m: 4,
            block_size_n: meta.block_size,
            dtype,
        };
        let (buffers, dx_args, grid) = backward_launch(&inp, &fwd[4], &fwd[5], &bwd, m, n);
        let kernel = layer_norm_backward_dx(&bwd).unwrap();
        simulate_targets(
            &format!("backward dx {m}x{n} {dtype}"),
            &kernel,
            grid,
            &dx_args,
            &buffers,
            1e-5,
        );
        let sums = vec![
            buffer_of(dtype, &rng.f32s(4 * n, -1.0, 1.0)),
            buffer_of(dtype, &rng.f32s(4 * n, -1.0, 1.0)),
            HostBuffer::zeros(dtype, n),
            HostBuffer::zeros(dtype, n),
        ];
        let args = [
            ptr(0),
            ptr(1),
            ptr(2),
            ptr(3),
            ArgValue::Int(4),
            ArgValue::Int(n as i64),
        ];
        let kernel = layer_norm_backward_dwdb(32, 128, dtype).unwrap();
        let grid = [n.div_ceil(128) as u32, 1, 1];
        simulate_targets(
            &format!("backward dwdb {m}x{n} {dtype}"),
            &kernel,
            grid,
            &args,
            &sums,
            1e-5,
        );
    }
}

#[test]
fn a_constant_row_gives_the_bias() {
    // x - mean is exactly 0, so y is exactly b, whatever rstd is: an f16 output rounds
    // the f32 result once, and the bias passes through unchanged.
    let (m, n) = (1, 64);
    let dtype = F16;
    let inp = Inputs {
        x: HostBuffer::from_slice(&vec![f16::from_f32(3.0); n]),
        w: HostBuffer::from_slice(&vec![f16::from_f32(2.0); n]),
        b: buffer_of(dtype, &Rng::new(54).f32s(n, -1.0, 1.0)),
        dy: HostBuffer::zeros(dtype, n),
    };
    let mut buffers = forward_buffers(&inp, dtype, m, n);
    let (args, grid) = forward_args(m, n);
    let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
    interp::run(&layer_norm_forward(&meta).unwrap(), grid, &args, &mut buffers).unwrap();
    assert_eq!(values(&buffers[1]), values(&inp.b));
}

/// The lock's release publishes the partial sums of every thread of the program: between
/// the last store of `DW`/`DB` and each atomic of the backward pass there is a barrier (an
/// atomic is acquire-release for the whole program, `lower/ordering.rs`). Without it the
/// release could overtake other threads' stores (lost partial sums through Vulkan on an
/// H100).
#[test]
fn the_lock_is_released_after_every_threads_stores() {
    use rutile_ir::target::{Specialization, Target};
    use rutile_ir::thread::{Memory, Stmt};
    fn check(stmts: &[Stmt], pending: &mut bool, atomics: &mut usize) {
        for s in stmts {
            match s {
                Stmt::Store {
                    mem: Memory::Global { .. },
                    ..
                } => *pending = true,
                Stmt::Barrier => *pending = false,
                Stmt::Atomic { .. } | Stmt::AtomicCas { .. } => {
                    assert!(!*pending, "an atomic with another thread's store possibly pending");
                    *atomics += 1;
                }
                Stmt::If {
                    then_body, else_body, ..
                } => {
                    let mut other = *pending;
                    check(then_body, pending, atomics);
                    check(else_body, &mut other, atomics);
                    *pending |= other;
                }
                Stmt::While { cond_body, body, .. } => {
                    // Twice: the second pass sees what the first iteration left pending.
                    for _ in 0..2 {
                        check(cond_body, pending, atomics);
                        check(body, pending, atomics);
                    }
                }
                _ => {}
            }
        }
    }
    let meta = LayerNormBackwardMeta {
        group_size_m: 4,
        block_size_n: 1024,
        dtype: F16,
    };
    let kernel = layer_norm_backward_dx(&meta).unwrap();
    for target in [Target::nvidia(4, 48 * 1024), Target::vulkan(32, 4, 48 * 1024)] {
        let tk = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
        let mut atomics = 0;
        check(&tk.body, &mut false, &mut atomics);
        assert!(atomics >= 3, "the lock's atomics: {atomics}");
    }
}

/// The row walk `kernel` on 3 programs, lowered for `target` and simulated against the
/// interpreter on the forward pass's buffers of `inp` (`m x n` of `dtype`).
fn simulate_on_three_programs(
    at: &str,
    kernel: &Kernel,
    target: Target,
    args: &[ArgValue],
    inp: &Inputs,
    (dtype, m, n): (ScalarType, usize, usize),
) {
    simulate_on(
        at,
        kernel,
        &[target],
        [3, 1, 1],
        args,
        &forward_buffers(inp, dtype, m, n),
        1e-5,
    );
}

/// Where a loop's pipelined loads are all own copies, each iteration refills the stage its
/// threads have just read back, after the first instruction that uses what they read
/// (`Target::refill_after_read`): the ring holds `num_stages - 1` stages, and in the loop
/// the first copy comes after the first read of the slots; turned off, the ring holds
/// `num_stages` and the copies of a later row come before the read. Both compute the
/// held-row kernel's results in the simulator.
#[test]
fn the_row_walk_refills_the_stage_it_read() {
    let mut rng = Rng::new(71);
    let (m, n, dtype) = (7, 2048, F16);
    let meta = LayerNormMeta::for_row(n as u32, dtype).unwrap();
    let inp = inputs(&mut rng, dtype, m, n);
    let (mut args, _) = forward_args(m, n);
    args.push(ArgValue::Int(m as i64));
    for stages in [2, 3] {
        let kernel = layer_norm_forward_rows(&meta, RowStats::TwoReductions, RowParams::Held, stages).unwrap();
        let spec = Specialization::all(kernel.params.len());
        let mut shared = Vec::new();
        for refill_after_read in [true, false] {
            let target = Target {
                async_copy: true,
                refill_after_read,
                ..Target::nvidia(4, 48 * 1024)
            };
            let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
            // In walk order: the copies before the loop, then in it a wait, and after it
            // (refilling) the reads of the slots first, or (not) a copy first.
            let (mut waited, mut read_first, mut copy_first) = (false, false, false);
            t.walk(&mut |s| match s {
                Stmt::AsyncWait { .. } => waited = true,
                Stmt::Load {
                    mem: Memory::Shared { .. },
                    ..
                } if waited && !copy_first => read_first = true,
                Stmt::AsyncCopy { .. } if waited && !read_first => copy_first = true,
                _ => {}
            });
            let at = format!("{stages} stages, refill after read {refill_after_read}");
            assert_eq!(
                read_first, refill_after_read,
                "{at}: the loop's first read before its first copy"
            );
            shared.push(t.shared_bytes());
            simulate_on_three_programs(&at, &kernel, target, &args, &inp, (dtype, m, n));
        }
        // A row of 2048 fp16 is 4 KB a stage (the weight and bias held in registers).
        assert_eq!(shared[1] - shared[0], 4096, "{stages} stages: {shared:?} bytes");
    }
}

/// A loop's `num_stages` is a hint: where its copies ahead do not fit shared memory (8
/// stages of rows of 16384 f32 in 48 KiB), the kernel is lowered with plain loads instead
/// of failing, and still computes the held-row kernel's results (simulated); where they
/// fit (2 stages of rows of 1024), it copies.
#[test]
fn copies_ahead_that_do_not_fit_fall_back_to_loads() {
    let target = Target {
        async_copy: true,
        ..Target::nvidia(4, 48 * 1024)
    };
    let copies = |n: u32, stages: u32| {
        let meta = LayerNormMeta::for_row(n, F32).unwrap();
        let kernel = layer_norm_forward_rows(&meta, RowStats::TwoReductions, RowParams::Reloaded, stages).unwrap();
        let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len()))
            .unwrap_or_else(|e| panic!("{n} columns, {stages} stages: {e}"));
        let mut copies = 0;
        t.walk(&mut |s| copies += matches!(s, Stmt::AsyncCopy { .. }) as usize);
        (kernel, copies)
    };
    assert!(copies(1024, 2).1 > 0, "rows of 1024, 2 stages: no copies");
    let (kernel, n_copies) = copies(16384, 8);
    assert_eq!(n_copies, 0, "rows of 16384 f32, 8 stages: copies that cannot fit");
    let (m, n) = (3, 16384);
    let inp = inputs(&mut Rng::new(71), F32, m, n);
    let (mut args, _) = forward_args(m, n);
    args.push(ArgValue::Int(m as i64));
    simulate_on(
        "fallen back",
        &kernel,
        &[target],
        [2, 1, 1],
        &args,
        &forward_buffers(&inp, F32, m, n),
        1e-5,
    );
}
