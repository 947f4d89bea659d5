//! `exp`, `exp2`, `log`, `log2`, `sigmoid` and `tanh` of f64 values, written out in f64 ops
//! when a kernel asks for them: PTX has no f64 transcendental instruction (those ops were
//! refused through CUDA) and Vulkan's GLSL.std.450 has them for 16- and 32-bit floats only
//! (backend-spirv computed them in f32). Written out, they have f64's accuracy on every
//! backend, the interpreter computing the same ops.
//!
//! The method is exp_log.rs's in f64: `e^x = 2^k·e^r` with `|r| ≤ ln(2)/2` by a two-part
//! `ln 2` (so that `k·ln2_hi` is exact), `e^r - 1` by its Taylor series to `r^13`
//! (truncation below 2^-57), the power of two applied in two normal steps; `ln(2^k·m) =
//! k·ln 2 + ln m` with `m` in `[√½, √2)` from the bits, `ln m = 2·atanh(s)`, `s = (m - 1) /
//! (m + 1)`, by its series to `s^23`. `core-ir/tests/f64_math.rs` measures each against
//! the platform's f64 functions.
//!
//! The builder's unary ops of f64 come here ([`KernelBuilder::f64_function`]), which also
//! routes `sin` and `cos` to f64_trig.rs and `erf` to f64_erf.rs; the pieces the other
//! `f64_*.rs` files build on are here too: the reduction of the exponential, the parts of
//! the logarithm, scaling by powers of two, and division and square root corrected by their
//! residuals (exact where `fma` is fused, whatever the device's own).

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::UnaryOp;
use crate::types::ScalarType::{F64, I64};

/// `ln 2` in two parts: `LN2_HI` has 21 significant bits, so that `k·LN2_HI` is exact for
/// every exponent f64 has; `LN2_LO` the rest.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
#[allow(clippy::excessive_precision)]
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const LOG2_E: f64 = std::f64::consts::LOG2_E;
pub(super) const LN_2: f64 = std::f64::consts::LN_2;
/// Past these `e^x` overflows and underflows f64 (with margin: the scaling then does).
const EXP_HIGH: f64 = 710.0;
const EXP_LOW: f64 = -746.0;
/// The smallest normal f64, and 2^54, which scales subnormals into the normals.
const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
const TWO_54: f64 = 18_014_398_509_481_984.0;
/// The bits of √½: adding 1 - √½'s significand carries into the exponent exactly when the
/// significand is at least √2.
const SQRT_HALF_BITS: i64 = 0x3FE6_A09E_667F_3BCD;
/// Below this `tanh x` is `x` to f64's precision (and keeps the sign of zero).
const TANH_TINY: f64 = 1.0e-9;

impl KernelBuilder {
    /// `op` of f64 `x` written out in f64 ops, for the ops this file covers; `None` for the
    /// others.
    pub(super) fn f64_function<'b>(&'b self, op: UnaryOp, x: Value<'b>) -> Option<Value<'b>> {
        Some(match op {
            UnaryOp::Exp => exp(x),
            UnaryOp::Exp2 => exp2(x),
            UnaryOp::Log => log(x),
            UnaryOp::Log2 => log2(x),
            UnaryOp::Sigmoid => sigmoid(x),
            UnaryOp::Tanh => tanh(x),
            UnaryOp::Sin => super::f64_trig::sin(x),
            UnaryOp::Cos => super::f64_trig::cos(x),
            UnaryOp::Erf => super::f64_erf::erf(x),
            _ => return None,
        })
    }
}

/// `e^r - 1` for `|r| ≤ ln(2)/2`: `r + r²·(1/2! + r/3! + ... + r^11/13!)`.
pub(super) fn expm1_series(r: Value<'_>) -> Value<'_> {
    let factorial = |n: u32| (1..=n).map(f64::from).product::<f64>();
    let coefficients: Vec<f64> = (2..=13).rev().map(|n| 1.0 / factorial(n)).collect();
    r + r * r * horner(r, &coefficients)
}

/// `a / b` correctly rounded wherever `fma` is fused, whatever the device's division: the
/// quotient plus its residual's quotient (`a - q·b` is exact by a fused multiply-add). The
/// interpreter and PTX divide correctly rounded, and the correction is then zero; Vulkan
/// bounds `OpFDiv` in ulps (2.5 for f32), not to the correctly rounded quotient.
pub(super) fn divide<'b>(a: Value<'b>, b: Value<'b>) -> Value<'b> {
    let q = a / b;
    // Where the quotient is infinite or NaN the residual is NaN: the quotient stands.
    let r = (-q).fma(b, a);
    a.builder.where_(r.abs().lt(f64::INFINITY), q + r / b, q)
}

/// `√s` correctly rounded wherever `fma` is fused, whatever the device's square root (Vulkan
/// bounds it in ulps): the root plus its residual over twice the root. Zeros, infinities,
/// NaN and negative `s` are the device's `√s`.
pub(super) fn sqrt(s: Value<'_>) -> Value<'_> {
    let r = s.sqrt();
    let corrected = r + (-r).fma(r, s) / (r + r);
    s.builder.where_(s.gt(0.0) & s.lt(f64::INFINITY), corrected, r)
}

/// `2^k` for integral f64 `kf` in `[-1022, 1023]`, from the bits.
pub(super) fn pow2(kf: Value<'_>) -> Value<'_> {
    ((kf.to(I64) + 1023) << 52).bitcast(F64)
}

/// `y·2^k` for integral f64 `kf` in `[-2044, 2046]`: by two powers of two, each normal, so
/// that the product overflows or goes subnormal only as the result does.
pub(super) fn scale<'b>(y: Value<'b>, kf: Value<'b>) -> Value<'b> {
    let first = (kf * 0.5).floor();
    y * pow2(first) * pow2(kf - first)
}

/// `(k, e^r - 1)` with `e^x = 2^k·e^r` for f64 `x` (clamped to where `k` stays in range).
pub(super) fn exp_reduced(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    exp_reduced_within(x, EXP_LOW, EXP_HIGH)
}

/// [`exp_reduced`] with `x` clamped to `[low, high]` (within `[-1400, 1400]`), for the
/// functions whose results overflow or underflow elsewhere than `e^x`'s.
pub(super) fn exp_reduced_within<'b>(x: Value<'b>, low: f64, high: f64) -> (Value<'b>, Value<'b>) {
    let xc = x.clamp(low, high);
    let kf = (xc * LOG2_E).rint();
    // k·LN2_HI is exact and xc - k·LN2_HI too (the two are within a factor of two). As a
    // chain of fused multiply-adds, which no driver rearranges: NVIDIA's Vulkan driver
    // rewrote the products-and-differences form `(xc - k·LN2_HI) - k·LN2_LO` inside
    // `sigmoid` as `xc - k·(LN2_HI + LN2_LO)`, folding the two parts into one f64 (18 ulp
    // at x = -67 on an H200), before backend-spirv marked f64 arithmetic `NoContraction`.
    let r = (-kf).fma(LN2_LO, (-kf).fma(LN2_HI, xc));
    (kf, expm1_series(r))
}

pub(super) fn exp(x: Value<'_>) -> Value<'_> {
    let (kf, p) = exp_reduced(x);
    let r = scale(p + 1.0, kf);
    // NaN stays NaN (the clamp would turn it into a bound on some devices).
    x.builder.where_(x.isnan(), x, r)
}

fn exp2(x: Value<'_>) -> Value<'_> {
    let xc = x.clamp(-1100.0, 1100.0);
    let kf = xc.rint();
    // x - k is exact; its product by ln 2 rounds once, an error the exponential keeps
    // below half an ulp of the result (|t| ≤ ln(2)/2).
    let t = (xc - kf) * LN_2;
    let r = scale(expm1_series(t) + 1.0, kf);
    x.builder.where_(x.isnan(), x, r)
}

/// `(k, f)` with `x = 2^k·(1 + f)`, `1 + f` in `[√½, √2)` (k as f64, f exact), for f64
/// `x > 0` and finite, subnormals included (scaled by 2^54 first).
pub(super) fn log_parts(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    let k = x.builder;
    let subnormal = x.lt(MIN_NORMAL);
    let xs = k.where_(subnormal, x * TWO_54, x);
    let bits = xs.bitcast(I64) + (0x3FF0_0000_0000_0000i64 - SQRT_HALF_BITS);
    let e = (bits >> 52) - 1023;
    let m = ((bits & 0x000F_FFFF_FFFF_FFFFi64) + SQRT_HALF_BITS).bitcast(F64);
    let kf = e.to(F64) - k.where_(subnormal, 54.0, 0.0);
    (kf, m - 1.0)
}

/// `(k, ln m)` with `x = 2^k·m`, `m` in `[√½, √2)` (k as f64), for f64 `x > 0` and finite.
fn log_reduced(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    let (kf, f) = log_parts(x);
    // ln m = 2·atanh(s), s = f/(2 + f): f - s·(f - R) with R the series past its first
    // term (2s = f - s·f keeps f exact in the sum).
    let s = divide(f, f + 2.0);
    let z = s * s;
    let coefficients: Vec<f64> = (1..=11).rev().map(|j| 2.0 / (2 * j + 1) as f64).collect();
    let r = z * horner(z, &coefficients);
    (kf, f - s * (f - r))
}

/// `y` where `x` is positive and finite; `-∞` at zero, `+∞` at `+∞`, NaN below zero and at
/// NaN: a logarithm's special values.
pub(super) fn log_special<'b>(x: Value<'b>, y: Value<'b>) -> Value<'b> {
    let k = x.builder;
    let y = k.where_(x.eq(f64::INFINITY), x, y);
    let y = k.where_(x.eq(0.0), f64::NEG_INFINITY, y);
    k.where_(x.lt(0.0) | x.isnan(), f64::NAN, y)
}

pub(super) fn log(x: Value<'_>) -> Value<'_> {
    let (kf, ln_m) = log_reduced(x);
    log_special(x, kf * LN2_HI + (ln_m + kf * LN2_LO))
}

fn log2(x: Value<'_>) -> Value<'_> {
    let (kf, ln_m) = log_reduced(x);
    log_special(x, kf + ln_m * LOG2_E)
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` below zero, so that nothing overflows.
fn sigmoid(x: Value<'_>) -> Value<'_> {
    let e = exp(-x.abs());
    let k = x.builder;
    let d = e + 1.0;
    divide(k.where_(x.lt(0.0), e, 1.0), d)
}

/// `tanh x = -expm1(-2|x|) / (expm1(-2|x|) + 2)`, signed: `expm1(t)` by its Taylor
/// series to `t^19` where `|t| < 1` (no cancellation near zero), from the reduction
/// (`2^k·(1 + p) - 1`) beyond.
fn tanh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let t = -(a + a);
    let (kf, p) = exp_reduced(t);
    let factorial = |n: u32| (1..=n).map(f64::from).product::<f64>();
    let coefficients: Vec<f64> = (2..=19).rev().map(|n| 1.0 / factorial(n)).collect();
    let series = t + t * t * horner(t, &coefficients);
    let em1 = k.where_(t.gt(-1.0), series, scale(p + 1.0, kf) - 1.0);
    let t = divide(-em1, em1 + 2.0);
    let t = k.where_(a.lt(TANH_TINY), a, t);
    let t = k.where_(x.lt(0.0) | x.signbit(), -t, t);
    k.where_(x.isnan(), x, t)
}

/// `(s, e)` with `s + e = a + b` exactly, `s` the rounded sum (Knuth's two-sum: no fused
/// multiply-add, no condition on the operands' magnitudes).
pub(super) fn two_sum<'b>(a: Value<'b>, b: Value<'b>) -> (Value<'b>, Value<'b>) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}
