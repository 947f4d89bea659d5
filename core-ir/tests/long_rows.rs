//! The long-row softmax and layer norm (rows walked in blocks, statistics gathered online)
//! in the interpreter against f64 references on random inputs, with rows of several blocks
//! and a ragged last block, and lowered and run in the SIMT simulator against the
//! interpreter.

mod tutorial_support;

use rutile_ir::interp::{self, HostBuffer};
use rutile_ir::seeds::{
    fits_one_block, layer_norm_cluster, layer_norm_long, softmax_cluster, softmax_long, LayerNormMeta, SoftmaxOptions,
};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::Stmt;
use rutile_ir::ScalarType::{F16, F32};
use tutorial_support::rows::{layer_norm_case, layer_norm_reference, softmax_args};
use tutorial_support::{assert_close, simulate_on, simulate_targets, values};

fn softmax_reference(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        for c in 0..cols {
            out[r * cols + c] = (row[c] as f64 - m).exp() / s;
        }
    }
    out
}

#[test]
fn long_row_softmax_matches_the_reference() {
    let mut rng = Rng::new(61);
    for (rows, cols, block) in [
        (3, 5000, 1024),
        (2, 4096, 1024),
        (4, 700, 256),
        (2, 1, 128),
        (3, 130, 64),
    ] {
        // A wide range, so that the running maximum moves and rescales the sums.
        let mut x = rng.f32s(rows * cols, -30.0, 30.0);
        // Rows whose maximum comes last and first.
        x[cols - 1] = 60.0;
        x[cols] = 55.0;
        let mut buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        let kernel = softmax_long(block, SoftmaxOptions::default()).unwrap();
        interp::run(&kernel, [rows as u32, 1, 1], &softmax_args(rows, cols), &mut buffers).unwrap();
        let want = softmax_reference(&x, rows, cols);
        let at = format!("softmax {rows}x{cols}, block {block}");
        assert_close(&values(&buffers[0]), &want, 1e-5, 1e-30, &at);
    }
}

/// The softmax whose rows the programs of a cluster share (`cluster_reduce` of the row's
/// maximum and sum), with ragged rows that leave a program's share partly or wholly masked.
#[test]
fn cluster_softmax_matches_the_reference() {
    let mut rng = Rng::new(67);
    for (rows, cols, block, cluster) in [(3, 1000, 256, 4), (2, 513, 256, 3), (4, 100, 64, 2), (2, 64, 16, 8)] {
        let mut x = rng.f32s(rows * cols, -30.0, 30.0);
        // The row's maximum in its last program's share.
        x[cols - 1] = 60.0;
        let mut buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        let kernel = softmax_cluster(block, cluster, SoftmaxOptions::default()).unwrap();
        let grid = [rows as u32 * cluster, 1, 1];
        interp::run_clustered(&kernel, grid, cluster, &softmax_args(rows, cols), &mut buffers).unwrap();
        let want = softmax_reference(&x, rows, cols);
        let at = format!("cluster softmax {rows}x{cols}, {cluster} programs of {block}");
        assert_close(&values(&buffers[0]), &want, 1e-5, 1e-30, &at);
    }
}

#[test]
fn long_row_softmax_of_a_row_with_infinities() {
    // -inf columns give 0; a row with one finite value gives 1 there.
    let (rows, cols) = (1, 300);
    let mut x = vec![f32::NEG_INFINITY; cols];
    x[200] = 3.0;
    let mut buffers = vec![HostBuffer::zeros(F32, cols), HostBuffer::from_slice(&x)];
    let kernel = softmax_long(64, SoftmaxOptions::default()).unwrap();
    interp::run(&kernel, [1, 1, 1], &softmax_args(rows, cols), &mut buffers).unwrap();
    let got = values(&buffers[0]);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &v)| v == if i == 200 { 1.0 } else { 0.0 }),
        "{got:?}"
    );
}

#[test]
fn long_row_layer_norm_matches_the_reference() {
    let mut rng = Rng::new(62);
    for (m, n, dtype, block) in [
        (3, 5000, F32, 1024),
        (2, 4096, F32, 512),
        (5, 700, F16, 256),
        (2, 1, F32, 64),
    ] {
        let (mut buffers, args) = layer_norm_case(&mut rng, dtype, m, n, (95.0, 105.0));
        let kernel = layer_norm_long(&LayerNormMeta {
            block_size: block,
            dtype,
        })
        .unwrap();
        interp::run(&kernel, [m as u32, 1, 1], &args, &mut buffers).unwrap();
        let (x, w, b) = (values(&buffers[0]), values(&buffers[2]), values(&buffers[3]));
        let (means, rstds, y) = layer_norm_reference(&x, &w, &b, m, n);
        let at = format!("layer norm {m}x{n} {dtype}, block {block}");
        assert_close(&values(&buffers[4]), &means, 1e-6, 0.0, &format!("{at}: mean"));
        // Welford's variance keeps its digits with a mean 30 times the spread.
        assert_close(&values(&buffers[5]), &rstds, 1e-4, 0.0, &format!("{at}: rstd"));
        let tol = if dtype == F16 { 4e-3 } else { 1e-4 };
        assert_close(&values(&buffers[1]), &y, tol, tol, &format!("{at}: y"));
    }
}

/// The layer norm whose rows the programs of a cluster share, with ragged rows that leave
/// a program's share partly or wholly masked; the row's first program stores its
/// statistics.
#[test]
fn cluster_layer_norm_matches_the_reference() {
    let mut rng = Rng::new(66);
    for (m, n, dtype, block, cluster) in [(3, 5000, F32, 1024, 5), (2, 700, F16, 256, 3), (2, 100, F32, 32, 8)] {
        let (mut buffers, args) = layer_norm_case(&mut rng, dtype, m, n, (95.0, 105.0));
        let meta = LayerNormMeta {
            block_size: block,
            dtype,
        };
        let kernel = layer_norm_cluster(&meta, cluster).unwrap();
        interp::run_clustered(&kernel, [m as u32 * cluster, 1, 1], cluster, &args, &mut buffers).unwrap();
        let (x, w, b) = (values(&buffers[0]), values(&buffers[2]), values(&buffers[3]));
        let (means, rstds, y) = layer_norm_reference(&x, &w, &b, m, n);
        let at = format!("cluster layer norm {m}x{n} {dtype}, {cluster} programs of {block}");
        assert_close(&values(&buffers[4]), &means, 1e-6, 0.0, &format!("{at}: mean"));
        assert_close(&values(&buffers[5]), &rstds, 1e-4, 0.0, &format!("{at}: rstd"));
        let tol = if dtype == F16 { 4e-3 } else { 1e-4 };
        assert_close(&values(&buffers[1]), &y, tol, tol, &format!("{at}: y"));
    }
}

#[test]
fn rows_over_64_kib_do_not_fit_one_block() {
    assert!(fits_one_block(16384, F32) && !fits_one_block(16385, F32));
    assert!(fits_one_block(32768, F16) && !fits_one_block(32769, F16));
    assert!(fits_one_block(0, F32) && !fits_one_block(u32::MAX, F32));
}

#[test]
fn lowered_long_row_kernels_match_the_interpreter() {
    let mut rng = Rng::new(63);
    for (rows, cols, block) in [(3, 1000, 256), (2, 512, 128)] {
        let x = rng.f32s(rows * cols, -20.0, 20.0);
        let buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        let kernel = softmax_long(block, SoftmaxOptions::default()).unwrap();
        let at = format!("softmax {rows}x{cols}, block {block}");
        simulate_targets(
            &at,
            &kernel,
            [rows as u32, 1, 1],
            &softmax_args(rows, cols),
            &buffers,
            1e-6,
        );
    }
    for (m, n, dtype, block) in [(3, 1000, F32, 256), (2, 300, F16, 128)] {
        let (buffers, args) = layer_norm_case(&mut rng, dtype, m, n, (95.0, 105.0));
        let kernel = layer_norm_long(&LayerNormMeta {
            block_size: block,
            dtype,
        })
        .unwrap();
        let at = format!("layer norm {m}x{n} {dtype}, block {block}");
        simulate_targets(&at, &kernel, [m as u32, 1, 1], &args, &buffers, 1e-5);
    }
}

/// On targets with asynchronous copies the walks' blocks are copied ahead (`WALK_STAGES`
/// deep, up the row and back down it): in the simulator, which completes a copy only at
/// the wait that covers it, against the interpreter, on rows of several 16-byte-vector
/// blocks with a ragged last one (4000 columns of blocks of 1024).
#[test]
fn walks_copied_ahead_match_the_interpreter() {
    let mut rng = Rng::new(64);
    let targets: Vec<Target> = [4, 8]
        .into_iter()
        .map(|w| Target {
            async_copy: true,
            ..Target::nvidia(w, 48 * 1024)
        })
        .collect();
    let copies = |kernel: &rutile_ir::Kernel| {
        let t = rutile_ir::lower::lower(kernel, &targets[0], &Specialization::all(kernel.params.len())).unwrap();
        let mut n = 0;
        t.walk(&mut |s| n += matches!(s, Stmt::AsyncCopy { .. }) as usize);
        n
    };
    for (rows, cols) in [(2, 4096), (2, 4000)] {
        let x = rng.f32s(rows * cols, -20.0, 20.0);
        let buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        let kernel = softmax_long(1024, SoftmaxOptions::default()).unwrap();
        assert!(copies(&kernel) > 0, "softmax: no asynchronous copy");
        let at = format!("softmax {rows}x{cols}, copied ahead");
        simulate_on(
            &at,
            &kernel,
            &targets,
            [rows as u32, 1, 1],
            &softmax_args(rows, cols),
            &buffers,
            1e-6,
        );
    }
    for (m, n) in [(2, 4096), (2, 4000)] {
        let (buffers, args) = layer_norm_case(&mut rng, F16, m, n, (95.0, 105.0));
        let kernel = layer_norm_long(&LayerNormMeta {
            block_size: 1024,
            dtype: F16,
        })
        .unwrap();
        assert!(copies(&kernel) > 0, "layer norm: no asynchronous copy");
        let at = format!("layer norm {m}x{n}, copied ahead");
        simulate_on(&at, &kernel, &targets, [m as u32, 1, 1], &args, &buffers, 1e-5);
    }
}
