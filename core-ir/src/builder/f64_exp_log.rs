//! libdevice's exponential and logarithmic family on f64 values (`expm1`, `log1p`, `exp10`,
//! `log10`, `sinh`, `cosh`, `asinh`, `acosh`, `atanh`), written out in f64 ops from
//! f64_math.rs's exponential and logarithm and f64_pow.rs's two-part `log2` and `2^x`:
//! exp_log.rs's functions take f64 values here. The formulas are the usual cancellation-free
//! ones (each noted where it is used); `core-ir/tests/f64_math.rs` measures them against
//! the platform's f64 functions.

use super::f64_math::{divide, exp, exp_reduced_within, log, log_special, pow2, scale, sqrt, LN_2};
use super::f64_pow::{exp2_parts, log2_parts};
use super::Value;

/// `log2 10` and `log10 2`, each as the nearest f64 and the nearest f64 to the rest.
#[allow(clippy::excessive_precision)]
const LOG2_10: [f64; 2] = [std::f64::consts::LOG2_10, 1.661_617_516_973_592e-16];
#[allow(clippy::excessive_precision)]
const LOG10_2: [f64; 2] = [std::f64::consts::LOG10_2, -2.803_728_127_785_170_4e-18];
/// Past this `e^x - 1` overflows; below the other it is -1 to f64's precision.
const EXPM1_HIGH: f64 = 710.0;
const EXPM1_LOW: f64 = -40.0;
/// Past this `e^a/2` overflows (ln(2·MAX)), with margin.
const HALF_EXP_HIGH: f64 = 711.0;
/// From here `e^-a` is below 2^-63 of `e^a`: `sinh` and `cosh` are `e^a/2`.
const ONE_SIDED: f64 = 22.0;
/// From here `√(a² ± 1)` is `a` to f64's precision: `asinh` and `acosh` are `ln a + ln 2`.
const LARGE: f64 = 268_435_456.0;

/// `x` where it is NaN, `y` elsewhere (the clamps of the reductions lose NaN).
fn keep_nan<'b>(x: Value<'b>, y: Value<'b>) -> Value<'b> {
    x.builder.where_(x.isnan(), x, y)
}

/// `e^x - 1`: `2^k·p + (2^k - 1)` from `e^x = 2^k·(1 + p)`, the first term exact and the
/// second too while `|k| ≤ 53`, so one rounding; `2^k·(1 + p)` from 54 on.
pub(super) fn expm1(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let (kf, p) = exp_reduced_within(x, EXPM1_LOW, EXPM1_HIGH);
    let two = pow2(kf.clamp(-60.0, 60.0));
    let near = scale(p, kf) + (two - 1.0);
    let far = scale(p + 1.0, kf);
    let y = k.where_(kf.eq(0.0), p, k.where_(kf.le(53.0), near, far));
    // ±0 (and NaN) are their own results.
    k.where_(x.eq(0.0) | x.isnan(), x, y)
}

/// `ln(1 + x)`: `ln u + (x - (u - 1))/u` for `u = 1 + x` rounded, the second term putting
/// back what the rounding of `u` took (`u - 1` is exact below 2; above, the term is below
/// an ulp of the result).
pub(super) fn log1p(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let u = x + 1.0;
    let c = divide(x - (u - 1.0), u);
    let c = k.where_(u.gt(0.0) & u.lt(f64::INFINITY), c, 0.0);
    // The correction is the whole result where u rounds to 1 (ln 1 = 0); ±0 and NaN are
    // their own results.
    let y = log(u) + c;
    k.where_(x.eq(0.0) | x.isnan(), x, y)
}

/// `10^x = 2^(x·log2 10)`, the product in two parts.
pub(super) fn exp10(x: Value<'_>) -> Value<'_> {
    let [hi, lo] = LOG2_10;
    let p = x * hi;
    let q = x.fma(hi, -p) + x * lo;
    keep_nan(x, exp2_parts(p, q))
}

/// `log10 x = log2 x · log10 2`, both in two parts.
pub(super) fn log10(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let positive = x.gt(0.0) & x.lt(f64::INFINITY);
    let (lh, ll) = log2_parts(k.where_(positive, x, 1.0));
    let [hi, lo] = LOG10_2;
    let p = lh * hi;
    let y = p + (lh.fma(hi, -p) + (lh * lo + ll * hi));
    log_special(x, y)
}

/// `e^a / 2` for `a ≥ 0`, halved in the scaling (no overflow before it).
fn half_exp(a: Value<'_>) -> Value<'_> {
    let (kf, p) = exp_reduced_within(a, 0.0, HALF_EXP_HIGH);
    scale(p + 1.0, kf - 1.0)
}

/// `sinh x`: from `t = e^a - 1` below 22 (`(t + t/(t + 1))/2`, and below 1
/// `(2t - t²/(t + 1))/2`, no cancellation), `e^a/2` from there; signed as `x`.
pub(super) fn sinh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let t = expm1(a.minimum(ONE_SIDED));
    let ratio = divide(t, t + 1.0);
    let small = ((t + t) - t * ratio) * 0.5;
    let middle = (t + ratio) * 0.5;
    let y = k.where_(a.lt(1.0), small, k.where_(a.lt(ONE_SIDED), middle, half_exp(a)));
    keep_nan(x, y.copysign(x))
}

/// `cosh x`: `1 + t²/(2(t + 1))` from `t = e^a - 1` below 1, `e^a/2 + 1/(2e^a)` below 22,
/// `e^a/2` from there.
pub(super) fn cosh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let t = expm1(a.minimum(1.0));
    let small = divide(t * t, (t + 1.0) * 2.0) + 1.0;
    let e = exp(a.minimum(ONE_SIDED));
    let middle = e * 0.5 + divide(k.zeros_like(e) + 0.5, e);
    let y = k.where_(a.lt(1.0), small, k.where_(a.lt(ONE_SIDED), middle, half_exp(a)));
    keep_nan(x, y)
}

/// `asinh x`: `log1p(a + a²/(1 + √(1 + a²)))` up to 2, `ln(2a + 1/(a + √(a² + 1)))` up to
/// 2^28, `ln a + ln 2` from there; signed as `x`.
pub(super) fn asinh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let m = a.minimum(LARGE);
    let root = sqrt(m * m + 1.0);
    let small = log1p(m + divide(m * m, root + 1.0));
    let middle = log(m + m + divide(k.zeros_like(m) + 1.0, root + m));
    let large = log(a) + LN_2;
    let y = k.where_(a.le(2.0), small, k.where_(a.lt(LARGE), middle, large));
    keep_nan(x, y.copysign(x))
}

/// `acosh x` (NaN below 1): `log1p(t + √(2t + t²))`, `t = x - 1` (exact) up to 2,
/// `ln(2x - 1/(x + √(x² - 1)))` up to 2^28, `ln x + ln 2` from there.
pub(super) fn acosh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let m = x.clamp(1.0, LARGE);
    let t = m - 1.0;
    let small = log1p(t + sqrt(t.fma(t, t + t)));
    let middle = log(m + m - divide(k.zeros_like(m) + 1.0, m + sqrt(m.fma(m, -1.0))));
    let large = log(x) + LN_2;
    let y = k.where_(x.le(2.0), small, k.where_(x.lt(LARGE), middle, large));
    let y = k.where_(x.lt(1.0), f64::NAN, y);
    keep_nan(x, y)
}

/// `atanh x` (NaN outside `[-1, 1]`, `±∞` at `±1`): `log1p(2a + 2a²/(1 - a))/2` below
/// 1/2, `log1p(2a/(1 - a))/2` from there; signed as `x`.
pub(super) fn atanh(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let d = 1.0 - a;
    let small = log1p((a + a) + divide((a + a) * a, d)) * 0.5;
    let large = log1p(divide(a + a, d)) * 0.5;
    let y = k.where_(a.lt(0.5), small, large);
    let y = k.where_(a.gt(1.0), f64::NAN, y);
    keep_nan(x, y.copysign(x))
}
