//! CPU references of the seed kernels and comparisons with tolerances.

use half::f16;

/// Row-wise softmax in f64.
pub fn softmax_reference(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        for c in 0..cols {
            out[r * cols + c] = e[c] / s;
        }
    }
    out
}

/// `A @ B` in f64 from f16 inputs (row-major), optionally with leaky ReLU.
pub fn matmul_reference(a: &[f16], b: &[f16], m: usize, n: usize, k: usize, leaky_relu: bool) -> Vec<f64> {
    let wide = |x: &[f16]| x.iter().map(|v| v.to_f64()).collect::<Vec<f64>>();
    matmul_reference_of(&wide(a), &wide(b), (m, n, k), leaky_relu)
}

/// `A @ B` in f64 of row-major values (any input type's, exactly), optionally with leaky
/// ReLU.
pub fn matmul_reference_of(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), leaky_relu: bool) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p];
            for j in 0..n {
                out[i * n + j] += av * b[p * n + j];
            }
        }
    }
    if leaky_relu {
        for v in &mut out {
            if *v < 0.0 {
                *v *= 0.01;
            }
        }
    }
    out
}

/// `x^T` (`n x m`, row-major) for `x` (`m x n`, row-major).
pub fn transpose_reference<T: Copy>(x: &[T], m: usize, n: usize) -> Vec<T> {
    assert_eq!(x.len(), m * n, "a {m}x{n} matrix");
    let mut out = Vec::with_capacity(m * n);
    for j in 0..n {
        out.extend((0..m).map(|i| x[i * n + j]));
    }
    out
}

/// Where `got` first differs from `want`, both row-major with `cols` columns, as (row,
/// column); a NaN in `got` differs from everything, and so does a missing element.
pub fn first_difference<T: PartialEq>(got: &[T], want: &[T], cols: usize) -> Option<(usize, usize)> {
    let i = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .or((got.len() != want.len()).then(|| got.len().min(want.len())))?;
    Some((i / cols, i % cols))
}

/// The largest absolute difference between `got` and `want`; a NaN in `got` counts as an
/// infinite difference (a plain `fold(0.0, f64::max)` would skip it).
pub fn max_abs_error(got: impl IntoIterator<Item = f64>, want: impl IntoIterator<Item = f64>) -> f64 {
    got.into_iter()
        .zip(want)
        .map(|(g, w)| if g.is_nan() { f64::INFINITY } else { (g - w).abs() })
        .fold(0.0, f64::max)
}

/// The largest |got - want| / (|want| + floor), and where it is.
pub fn max_relative_error(got: impl IntoIterator<Item = f64>, want: &[f64], floor: f64) -> (f64, usize) {
    let mut worst = (0.0f64, 0usize);
    for (i, (g, w)) in got.into_iter().zip(want).enumerate() {
        let e = if g.is_nan() {
            f64::INFINITY
        } else {
            (g - w).abs() / (w.abs() + floor)
        };
        if e > worst.0 {
            worst = (e, i);
        }
    }
    worst
}

/// `‖got - want‖ / ‖want‖` (Frobenius norms): the relative error of a matrix; NaN where
/// `got` holds a NaN.
pub fn relative_frobenius(got: &[f64], want: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        diff += (g - w) * (g - w);
        norm += w * w;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}
