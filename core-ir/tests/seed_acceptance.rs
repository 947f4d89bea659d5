//! Acceptance tests of the foundation: the seed kernels (vector add, softmax in its simple
//! and persistent forms, fp16 matmul) run by the CPU interpreter at the tutorials' sizes,
//! on random non-zero inputs, against references in plain Rust computed in f64.
//!
//! The tolerances are derived from the arithmetic each kernel does (see each test) and do
//! not depend on the order of the sums, so the same checks hold for any backend that rounds
//! each operation correctly.
//!
//! Run with `cargo test --release`: the 512³ matmul takes well under a second.

use half::f16;
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::seeds::{self, Activation, MatmulMeta};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F16, F32};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn int(v: usize) -> ArgValue {
    ArgValue::Int(v as i64)
}

/// 2^-24: the unit roundoff of f32 (half its machine epsilon).
const U32: f64 = 1.0 / (1u64 << 24) as f64;
/// 2^-11: the unit roundoff of f16.
const U16: f64 = 1.0 / (1u64 << 11) as f64;

#[test]
fn vector_add_f32_is_exact() {
    let n = 98_432;
    let block = 1024;
    let mut rng = Rng::new(0x5eed_0001);
    let x = rng.f32s(n, -1000.0, 1000.0);
    let y = rng.f32s(n, -1000.0, 1000.0);
    let kernel = seeds::vector_add(F32, block).unwrap();
    // The output starts as NaNs, so an element the kernel misses cannot pass.
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
        HostBuffer::from_slice(&vec![f32::NAN; n]),
    ];
    let grid = [n.div_ceil(block as usize) as u32, 1, 1];
    interp::run(&kernel, grid, &[ptr(0), ptr(1), ptr(2), int(n)], &mut buffers).unwrap();
    let z: Vec<f32> = buffers[2].to_vec().unwrap();
    for i in 0..n {
        // One correctly rounded f32 addition: bit-exact.
        assert_eq!(z[i].to_bits(), (x[i] + y[i]).to_bits(), "z[{i}] = {} + {}", x[i], y[i]);
    }
}

/// Row-wise softmax in f64 of an f32 matrix with the given row stride.
fn softmax_reference(x: &[f32], rows: usize, cols: usize, stride: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * stride..r * stride + cols];
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        for c in 0..cols {
            out[r * cols + c] = (row[c] as f64 - max).exp() / sum;
        }
    }
    out
}

/// The error bound of one row of the softmax kernel as the interpreter computes it in f32,
/// relative to the exact softmax of the same f32 inputs (the f64 reference), with `spread`
/// the row's largest `max - x`. With u = 2^-24 and first-order terms only:
///
/// - `z = x - max` rounds once: absolute error at most u·|z| ≤ u·spread, so `exp(z)` has a
///   relative error of at most u·spread; rounding `exp` to f32 adds u.
/// - The sum of the numerators (all positive) inherits their largest relative error and adds
///   u for its final rounding (its accumulation error is n·u² at worst, negligible).
/// - The quotient adds u.
///
/// Hence |y - ref| ≤ ref·(2·(spread + 1) + 2)·u, plus at most 2^-149 (f32's subnormal
/// spacing) where a numerator or the result falls below f32's normal range: the numerators
/// are divided by a sum of at least 1 (the row's maximum contributes exp(0)), so absolute
/// errors there stay at subnormal size. The relative bound is scaled by 1.01 to cover the
/// second-order terms, which are below 1e-5 of the first-order ones here.
fn softmax_tolerance(spread: f64) -> f64 {
    (2.0 * (spread + 1.0) + 2.0) * U32 * 1.01
}

/// Runs both softmax kernels on an `rows x cols` matrix stored with row stride `in_stride`,
/// writing a dense output, and checks every element against the f64 reference with a
/// relative bound of `rel` (and 2^-149 absolute below f32's normal range).
fn check_softmax(x: &[f32], rows: usize, cols: usize, in_stride: usize, rel: impl Fn(usize) -> f64) {
    let want = softmax_reference(x, rows, cols, in_stride);
    let block = seeds::softmax_block(cols as u32);
    let args = [ptr(0), ptr(1), int(in_stride), int(cols), int(rows), int(cols)];
    let tiny = f64::from(f32::from_bits(1)); // 2^-149
    let kernels = [
        (seeds::softmax(block).unwrap(), rows as u32),
        // The persistent form with 132 programs (one per SM of an H100), so that each
        // program loops over 13 or 14 rows.
        (seeds::softmax_persistent(block).unwrap(), 132),
        // Several rows per program; 1823 rows leave the last program 3 rows short.
        (seeds::softmax_rows(4, block).unwrap(), (rows as u32).div_ceil(4)),
        // The read-once forms compute the same (the modifier is a cache policy only).
        (
            seeds::softmax_persistent_with(block, 2, rutile_ir::CacheModifier::Streaming).unwrap(),
            132,
        ),
        (
            seeds::softmax_rows_with(2, block, rutile_ir::CacheModifier::Streaming).unwrap(),
            (rows as u32).div_ceil(2),
        ),
        // The loop over rows pipelined three deep.
        (seeds::softmax_persistent_staged(block, 3).unwrap(), 132),
    ];
    for (kernel, grid) in kernels {
        let mut buffers = [
            HostBuffer::from_slice(&vec![f32::NAN; rows * cols]),
            HostBuffer::from_slice(x),
        ];
        interp::run(&kernel, [grid, 1, 1], &args, &mut buffers).unwrap();
        let got: Vec<f32> = buffers[0].to_vec().unwrap();
        for r in 0..rows {
            let tol = rel(r);
            for c in 0..cols {
                let (g, w) = (got[r * cols + c] as f64, want[r * cols + c]);
                let err = (g - w).abs();
                let ok = if w >= f64::from(f32::MIN_POSITIVE) {
                    err <= tol * w
                } else {
                    err <= tol * w + tiny
                };
                assert!(
                    ok,
                    "{} (input stride {in_stride}) y[{r}, {c}] = {g:e}, reference {w:e}: relative error {:e} > {tol:e}",
                    kernel.name,
                    err / w
                );
            }
        }
    }
}

#[test]
fn softmax_1823x781_within_1e6_relative_of_f64() {
    let (rows, cols) = (1823, 781);
    let mut rng = Rng::new(0x5eed_0002);
    // Inputs in [-1, 1): a row's spread is below 2, so the derived bound is
    // (2·3 + 2)·2^-24·1.01 ≈ 4.8e-7, and the requested 1e-6 is a sound tolerance.
    assert!(softmax_tolerance(2.0) < 1e-6);
    for in_stride in [cols, 800] {
        // The padding columns hold large values: reading one would break the result.
        let mut x = vec![1e30f32; rows * in_stride];
        let values = rng.f32s(rows * cols, -1.0, 1.0);
        for r in 0..rows {
            x[r * in_stride..r * in_stride + cols].copy_from_slice(&values[r * cols..(r + 1) * cols]);
        }
        check_softmax(&x, rows, cols, in_stride, |_| 1e-6);
    }
}

#[test]
fn softmax_with_a_wide_range_underflows_gracefully() {
    // Rows spanning [-60, 60): exp(x - max) reaches e^-120, far below f32's range, so
    // numerators and results are subnormal or zero; the bound of `softmax_tolerance` holds
    // with each row's own spread.
    let (rows, cols, in_stride) = (64, 781, 800);
    let mut rng = Rng::new(0x5eed_0003);
    let x = rng.f32s(rows * in_stride, -60.0, 60.0);
    let spreads: Vec<f64> = (0..rows)
        .map(|r| {
            let row = &x[r * in_stride..r * in_stride + cols];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            row.iter().map(|&v| max as f64 - v as f64).fold(0.0, f64::max)
        })
        .collect();
    let want = softmax_reference(&x, rows, cols, in_stride);
    assert!(
        want.iter().any(|&w| w < f64::from(f32::MIN_POSITIVE)),
        "the inputs should reach f32's subnormals"
    );
    check_softmax(&x, rows, cols, in_stride, |r| softmax_tolerance(spreads[r]));
}

/// `act(A @ B)` in f64 from the same f16 inputs (row-major A `m x k`, B `k x n`), and
/// `sum_k |a_ik · b_kj|` for the error bound.
fn matmul_reference(a: &[f16], b: &[f16], m: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let a: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    let b: Vec<f64> = b.iter().map(|v| v.to_f64()).collect();
    let mut c = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            let x = a[i * k + kk];
            let (c_row, abs_row) = (&mut c[i * n..(i + 1) * n], &mut abs[i * n..(i + 1) * n]);
            for j in 0..n {
                // Products of f16s are exact in f64; the f64 sums are off by at most
                // k·2^-53·s, 2^29 times below the f32 accumulation term of the tolerance.
                c_row[j] += x * b[kk * n + j];
                abs_row[j] += (x * b[kk * n + j]).abs();
            }
        }
    }
    (c, abs)
}

fn activate(act: Option<Activation>, x: f64) -> f64 {
    match act {
        Some(Activation::LeakyRelu) if x < 0.0 => 0.01 * x,
        _ => x,
    }
}

/// The error bound of one output element of the fp16 matmul, given the exact result `r` of
/// `act(A @ B)` and `s = sum_k |a_ik · b_kj|`. With u = 2^-24 (f32) and v = 2^-11 (f16):
///
/// - The products of f16 inputs are exact in f32; accumulating k of them in f32, in any
///   order and with or without fused multiply-adds, is off by at most (k - 1)·u·s (the
///   classical bound for recursive or tree summation); `e = k·u·s` covers it.
/// - LeakyReLU has slope at most 1, so it carries the error over unchanged; its multiply by
///   0.01 (an f32 constant, 0.01·(1 + 2.2e-8)) adds a relative error below 2u of its
///   result: together, the f32 value `y` before conversion is within `e + 2u·|r|` of `r`.
/// - Converting to f16 rounds once: v·|y| for normal results, at most 2^-25 (half f16's
///   subnormal spacing) below f16's normal range, 2^-14.
///
/// So |c - r| ≤ (e + 2u·|r|)·(1 + v) + v·|r| + 2^-25. For 512³ with inputs uniform in
/// [-1, 1], s ≈ 128, so e ≈ 4e-3, the same size as the f16 rounding of a typical |r| ≈ 7.5.
fn matmul_tolerance(r: f64, s: f64, k: usize) -> f64 {
    let e = k as f64 * U32 * s;
    (e + 2.0 * U32 * r.abs()) * (1.0 + U16) + U16 * r.abs() + 2f64.powi(-25)
}

/// Runs the seed matmul on row-major A (`m x k`), B (`k x n`) and C (`m x n`) and checks
/// every element against the f64 reference.
fn check_matmul(
    meta: &MatmulMeta,
    a: &[f16],
    b: &[f16],
    m: usize,
    n: usize,
    k: usize,
    reference: &(Vec<f64>, Vec<f64>),
) {
    let kernel = seeds::matmul(meta).unwrap();
    let mut buffers = [
        HostBuffer::from_slice(a),
        HostBuffer::from_slice(b),
        HostBuffer::from_slice(&vec![f16::NAN; m * n]),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    let grid = [seeds::matmul_grid(meta, m as u32, n as u32), 1, 1];
    interp::run(&kernel, grid, &args, &mut buffers).unwrap();
    let got: Vec<f16> = buffers[2].to_vec().unwrap();
    let (c, abs) = reference;
    for i in 0..m {
        for j in 0..n {
            let r = activate(meta.activation, c[i * n + j]);
            let tol = matmul_tolerance(r, abs[i * n + j], k);
            let g = got[i * n + j].to_f64();
            let err = (g - r).abs();
            assert!(
                err <= tol,
                "{m}x{n}x{k} with {}x{}x{} blocks, {:?}: c[{i}, {j}] = {g}, reference {r}, error {err:e} > {tol:e}",
                meta.block_m,
                meta.block_n,
                meta.block_k,
                meta.activation
            );
        }
    }
}

#[test]
fn matmul_fp16_512_cubed() {
    let (m, n, k) = (512, 512, 512);
    let mut rng = Rng::new(0x5eed_0004);
    let a = rng.f16s(m * k, -1.0, 1.0);
    let b = rng.f16s(k * n, -1.0, 1.0);
    let reference = matmul_reference(&a, &b, m, n, k);
    for activation in [None, Some(Activation::LeakyRelu)] {
        let meta = MatmulMeta {
            activation,
            ..MatmulMeta::fp16(64, 64, 32)
        };
        assert_eq!((meta.group_m, meta.input, meta.output), (8, F16, F16));
        check_matmul(&meta, &a, &b, m, n, k, &reference);
    }
}

#[test]
fn matmul_fp16_ragged_1000x300x77() {
    // No dimension is a multiple of any block: ragged rows and columns are masked at the
    // store, and the K tail (77 = 2·32 + 13) is masked with zeros at the loads.
    let (m, n, k) = (1000, 300, 77);
    let mut rng = Rng::new(0x5eed_0005);
    let a = rng.f16s(m * k, -1.0, 1.0);
    let b = rng.f16s(k * n, -1.0, 1.0);
    let reference = matmul_reference(&a, &b, m, n, k);
    for (bm, bn, bk) in [(64, 64, 32), (32, 64, 32)] {
        for activation in [None, Some(Activation::LeakyRelu)] {
            let meta = MatmulMeta {
                activation,
                ..MatmulMeta::fp16(bm, bn, bk)
            };
            check_matmul(&meta, &a, &b, m, n, k, &reference);
        }
    }
}
