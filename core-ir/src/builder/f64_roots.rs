//! libdevice's roots on f64 values (`hypot`, `rhypot`, `norm3d`, `norm4d`, `rnorm3d`,
//! `rnorm4d`, `cbrt`, `rcbrt`), written out in f64 ops as roots.rs's f32 forms are: the
//! norms scaled by a power of two, their squares summed by fused multiply-adds, and one
//! square root (corrected by its residual, since Vulkan bounds its square root in ulps);
//! the cube root from Newton's iteration for its reciprocal (no division), its last step on
//! a residual in two parts. `core-ir/tests/f64_math.rs` measures them against the platform's.

use super::f64_math::{divide, sqrt};
use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F64, I64};

/// The exponent field of an f64, and the clamp that keeps the scale and its inverse normal.
const EXPONENT_BITS: i64 = 0x7FF0_0000_0000_0000;
const EXPONENT_MIN: i64 = 1 << 52;
const EXPONENT_MAX: i64 = 2045 << 52;
/// Four thirds of 1023's bits: `RCBRT_BIAS - bits/3` is `1/∛a` within about 10%.
const RCBRT_BIAS: i64 = 1364 << 52;
/// 2^54, which scales subnormals into the normals (their roots then by 2^-18).
const TWO_54: f64 = 18_014_398_509_481_984.0;
const TWO_MINUS_18: f64 = 1.0 / 262_144.0;

/// The Euclidean norm of f64 `values` (or its reciprocal), as roots.rs's `scaled_norm`.
pub(super) fn scaled_norm<'b>(k: &'b KernelBuilder, values: &[Value<'b>], reciprocal: bool) -> Value<'b> {
    let magnitudes: Vec<Value<'b>> = values.iter().map(|v| v.abs()).collect();
    let big = magnitudes[1..].iter().fold(magnitudes[0], |m, &v| k.maximum(m, v));
    let exponent = (big.bitcast(I64) & EXPONENT_BITS)
        .maximum(EXPONENT_MIN)
        .minimum(EXPONENT_MAX);
    let down = ((2046i64 << 52) - exponent).bitcast(F64);
    let up = exponent.bitcast(F64);
    let scaled: Vec<Value<'b>> = magnitudes.iter().map(|&v| v * down).collect();
    let sum = scaled[1..].iter().fold(scaled[0] * scaled[0], |acc, &v| v.fma(v, acc));
    let root = sqrt(sum);
    let infinite = magnitudes[1..]
        .iter()
        .fold(magnitudes[0].eq(f64::INFINITY), |i, &v| i | v.eq(f64::INFINITY));
    if reciprocal {
        k.where_(infinite, 0.0, divide(down, root))
    } else {
        k.where_(infinite, f64::INFINITY, root * up)
    }
}

/// The real cube root, negative for negative `x`; `±0`, `±∞` and NaN as given.
pub(super) fn cbrt(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let subnormal = a.lt(f64::MIN_POSITIVE);
    let a = k.where_(subnormal, a * TWO_54, a);
    // Newton's iteration for r = 1/∛a, which needs no division (NVIDIA's Vulkan driver
    // computed the cube root's own iteration, `(2y + a/y²)/3`, wrong from its second step
    // on an H200): r + r·(1 - a·r³)/3, the error squaring at each step, 10% to 1e-16 in
    // four; then ∛a = a·r², its last bits from the residual y²·y - a in two parts.
    let mut r = (RCBRT_BIAS - a.bitcast(I64) / 3).bitcast(F64);
    for _ in 0..4 {
        let r3 = r * r * r;
        r = r + r * (1.0 - a * r3) * (1.0 / 3.0);
    }
    let y = a * (r * r);
    let y2 = y * y;
    let residual = y2.fma(y, -a) + y.fma(y, -y2) * y;
    let y = y - residual * (r * r) * (1.0 / 3.0);
    let y = k.where_(subnormal, y * TWO_MINUS_18, y);
    // Zeros, infinities and NaNs are their own roots.
    let own = a.eq(0.0) | a.eq(f64::INFINITY) | a.isnan();
    k.where_(own, x.abs(), y).copysign(x)
}

/// `1/∛x`: `±∞` at `±0`, `±0` at `±∞`.
pub(super) fn rcbrt(x: Value<'_>) -> Value<'_> {
    divide(x.builder.zeros_like(x) + 1.0, cbrt(x))
}
