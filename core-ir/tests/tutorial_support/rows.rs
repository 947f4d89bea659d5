//! Inputs shared by the tests of the row kernels (softmax, layer norm, and their cluster
//! forms): argument lists, random inputs that are never zero, and the kernel of
//! `cluster_reduce` in a loop.

use super::{buffer_of, ptr};
use rutile_ir::interp::{ArgValue, HostBuffer};
use rutile_ir::ir::ReduceOp;
use rutile_ir::testing::Rng;
use rutile_ir::{Kernel, ScalarType};

/// The layer norm's `eps`.
pub const EPS: f64 = 1e-5;

/// Random f32s of magnitude `lo` to `hi` (above 0) and either sign: never zero.
pub fn nonzero_f32s(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    rng.f32s(n, lo, hi)
        .into_iter()
        .map(|v| if rng.next_u64() & 1 == 1 { -v } else { v })
        .collect()
}

/// The softmax's arguments for buffers 0 (output) and 1 (input) of `rows x cols`.
pub fn softmax_args(rows: usize, cols: usize) -> Vec<ArgValue> {
    let c = ArgValue::Int(cols as i64);
    vec![ptr(0), ptr(1), c, c, ArgValue::Int(rows as i64), c]
}

/// The layer norm forward pass of `m x n` in f64: each row's mean, reciprocal standard
/// deviation, and the output.
pub fn layer_norm_reference(x: &[f64], w: &[f64], b: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut means, mut rstds, mut y) = (vec![0.0; m], vec![0.0; m], vec![0.0; m * n]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + EPS).sqrt();
        for c in 0..n {
            y[r * n + c] = (row[c] - mean) * rstd * w[c] + b[c];
        }
        (means[r], rstds[r]) = (mean, rstd);
    }
    (means, rstds, y)
}

/// The layer norm forward pass's buffers (`X, Y, W, B, Mean, Rstd`) and arguments for `m x
/// n` of `dtype`: `X` uniform in `x_range`, weights and biases non-zero of either sign.
pub fn layer_norm_case(
    rng: &mut Rng,
    dtype: ScalarType,
    m: usize,
    n: usize,
    x_range: (f32, f32),
) -> (Vec<HostBuffer>, Vec<ArgValue>) {
    let x = rng.f32s(m * n, x_range.0, x_range.1);
    let buffers = vec![
        buffer_of(dtype, &x),
        HostBuffer::zeros(dtype, m * n),
        buffer_of(dtype, &nonzero_f32s(rng, n, 0.125, 1.5)),
        buffer_of(dtype, &nonzero_f32s(rng, n, 0.125, 1.0)),
        HostBuffer::zeros(ScalarType::F32, m),
        HostBuffer::zeros(ScalarType::F32, m),
    ];
    let mut args: Vec<ArgValue> = (0..6).map(ptr).collect();
    args.extend([ArgValue::Int(n as i64), ArgValue::Int(n as i64), ArgValue::Float(EPS)]);
    (buffers, args)
}

/// `rounds` reductions in a `for` loop: in round `i` the program of rank `r` of cluster `c`
/// reduces block `(c * rounds + i) * cluster + r` of `x` (of `block` elements); every
/// program stores each round's max and, at the end, the sum of the rounds' sums (carried
/// through the loop). Parameters `x, max, total` (f32), `cluster, rounds` (i32).
pub fn rounds_kernel(block: u32) -> Kernel {
    Kernel::build("cluster_rounds", |k| {
        let x = k.arg_ptr("x", ScalarType::F32);
        let max_out = k.arg_ptr("max", ScalarType::F32);
        let total_out = k.arg_ptr("total", ScalarType::F32);
        let cluster = k.arg_i32("cluster");
        let rounds = k.arg_i32("rounds");
        let pid = k.program_id(0);
        let (c, rank) = (pid / cluster, pid % cluster);
        let zero = k.scalar(0.0, ScalarType::F32);
        let total = k.for_range(0, rounds, 1, &[zero], |i, acc| {
            let at = (c * rounds + i) * cluster + rank;
            let v = k.load(x + (at * block as i32 + k.arange(0, block as i32)));
            k.store(max_out + at, v.max(0).cluster_reduce(ReduceOp::Max));
            vec![acc[0] + v.sum(0).cluster_reduce(ReduceOp::Sum)]
        });
        k.store(total_out + pid, total[0]);
    })
    .unwrap()
}

/// Each program, in clusters, passes the pair `(x[2p], x[2p+1])`
/// to `cluster_reduce_n`, combined as affine maps compose (associative, not commutative);
/// every program stores the pair its cluster combines to `out[2p..2p+2]`.
pub fn affine_kernel() -> Kernel {
    Kernel::build("cluster_affine", |k| {
        let x = k.arg_ptr("x", ScalarType::I64);
        let out = k.arg_ptr("out", ScalarType::I64);
        let pid = k.program_id(0);
        let pair = [k.load(x + 2 * pid), k.load(x + (2 * pid + 1))];
        let composed = k.cluster_reduce_n(&pair, |_, a, b| vec![a[0] * b[0], a[1] * b[0] + b[1]]);
        k.store(out + 2 * pid, composed[0]);
        k.store(out + (2 * pid + 1), composed[1]);
    })
    .unwrap()
}
