//! `pow` of f64 values, written out in f64 ops (the builder routes f64 `pow` here): PTX has
//! no f64 power, and backend-spirv's is computed in f32.
//!
//! `|x|^y = 2^(y·log2|x|)`, where the product can reach ±1075 and each unit of its error
//! in the last place becomes a relative error of the result: so `log2|x|` is computed as an
//! unevaluated sum of two f64s (about 2^-100 relative), `y` times it likewise (the product's
//! rounding error by a fused multiply-add), and the power of two from both parts. The
//! logarithm is f64_math.rs's reduction, `ln m = 2·atanh(s)`, `s = f/(2 + f)`, with `s`'s
//! division error, `s³`'s term and the products by `log2 e` kept in second parts; the
//! higher terms of the series are below 2^-12 of the result, where one rounding is enough.
//! The special values are C's (`pow(x, ±0) = 1`, `pow(1, y) = 1`, `pow(-1, ±∞) = 1`, signed
//! results for negative `x` and odd integral `y`, NaN for negative finite `x` and
//! non-integral `y`). `core-ir/tests/f64_math.rs` measures it against the platform's `pow`.

use super::f64_math::{expm1_series, log_parts, scale};
use super::in_f32::horner;
use super::Value;

/// `log2 e`, `ln 2` and `2/3`, each as the nearest f64 and the nearest f64 to the rest.
#[allow(clippy::excessive_precision)]
const LOG2_E: [f64; 2] = [std::f64::consts::LOG2_E, 2.035_527_374_093_103_3e-17];
#[allow(clippy::excessive_precision)]
const LN_2: [f64; 2] = [std::f64::consts::LN_2, 2.319_046_813_846_299_6e-17];
#[allow(clippy::excessive_precision)]
const TWO_THIRDS: [f64; 2] = [0.666_666_666_666_666_6, 3.700_743_415_417_188e-17];
/// Past this `2^p` overflows or underflows f64 whatever the rest.
const POWER_BOUND: f64 = 1100.0;

/// `a + b` as the rounded sum and its error, for `|a| ≥ |b|` (or `a` zero).
pub(super) fn fast_two_sum<'b>(a: Value<'b>, b: Value<'b>) -> (Value<'b>, Value<'b>) {
    let s = a + b;
    (s, b - (s - a))
}

/// `ln(1 + f)` for `1 + f` in `[√½, √2)`, as a sum of two f64s.
fn ln_parts(f: Value<'_>) -> (Value<'_>, Value<'_>) {
    // s = f/(2 + f) in two parts: 2 + f = u + ue exactly, then the quotient's residual
    // f - sh·(u + ue), whose first difference is exact (sh·u is within an ulp or two of f).
    let u = f + 2.0;
    let ue = (2.0 - u) + f;
    let sh = f / u;
    let t = sh * u;
    let sl = (((f - t) - sh.fma(u, -t)) - sh * ue) / u;
    // 2·atanh(s) = 2s + (2/3)s³ + s^5·Q(s²): (2/3)·sh³ in two parts, the rest rounded once,
    // and sl through the derivative 2 + 2s².
    let z = sh * sh;
    let z_error = sh.fma(sh, -z);
    let cube = z * sh;
    let cube_error = z.fma(sh, -cube) + z_error * sh;
    let [c_hi, c_lo] = TWO_THIRDS;
    let third = cube * c_hi;
    let third_error = cube.fma(c_hi, -third) + (cube * c_lo + cube_error * c_hi);
    let coefficients: Vec<f64> = (2..=12).rev().map(|j| 2.0 / (2 * j + 1) as f64).collect();
    let rest = cube * z * horner(z, &coefficients);
    let (hi, e) = fast_two_sum(sh + sh, third);
    let lo = e + (third_error + rest + (sl + sl) * (1.0 + z));
    fast_two_sum(hi, lo)
}

/// `log2 a` for f64 `a > 0` and finite, as a sum of two f64s.
pub(super) fn log2_parts(a: Value<'_>) -> (Value<'_>, Value<'_>) {
    let (kf, f) = log_parts(a);
    let (lh, ll) = ln_parts(f);
    let [e_hi, e_lo] = LOG2_E;
    let p = lh * e_hi;
    let p_error = lh.fma(e_hi, -p) + (lh * e_lo + ll * e_hi);
    // |k| ≥ 1 > |p| unless k is 0.
    let (hi, e) = fast_two_sum(kf, p);
    (hi, e + p_error)
}

/// `2^(p + q)` for f64 `p` (any, NaN excepted) and `|q|` at most an ulp or so of `p`
/// (ignored where `p` is past the bounds, or NaN there).
pub(super) fn exp2_parts<'b>(p: Value<'b>, q: Value<'b>) -> Value<'b> {
    let k = p.builder;
    let q = k.where_(p.abs().le(POWER_BOUND), q, 0.0);
    let pc = p.clamp(-POWER_BOUND, POWER_BOUND);
    let n = pc.rint();
    // pc - n is exact; e^(r·ln 2) with r·ln 2 in two parts, e^(t + te) = e^t·(1 + te).
    let r = (pc - n) + q;
    let [l_hi, l_lo] = LN_2;
    let t = r * l_hi;
    let te = r.fma(l_hi, -t) + r * l_lo;
    let em1 = expm1_series(t);
    scale((em1 + (em1 + 1.0) * te) + 1.0, n)
}

pub(super) fn pow<'b>(x: Value<'b>, y: Value<'b>) -> Value<'b> {
    let k = x.builder;
    let a = x.abs();
    let finite = a.lt(f64::INFINITY);
    let positive = a.gt(0.0) & finite;
    let (lh, ll) = log2_parts(k.where_(positive, a, 1.0));
    // log2 0 = -∞, log2 ∞ = ∞ (NaN is restored at the end).
    let lh = k.where_(a.eq(0.0), f64::NEG_INFINITY, k.where_(finite, lh, f64::INFINITY));
    let ll = k.where_(positive, ll, 0.0);
    let p = y * lh;
    let q = y.fma(lh, -p) + y * ll;
    let magnitude = exp2_parts(p, q);
    // Integral y: unchanged by truncation (±∞ too); odd: its half is not integral (every
    // f64 from 2^53 on is even).
    let integral = y.trunc().eq(y);
    let half = y * 0.5;
    let odd = integral & half.trunc().ne(half);
    let r = k.where_(odd & x.signbit(), -magnitude, magnitude);
    let r = k.where_(x.lt(0.0) & finite & !integral, f64::NAN, r);
    let r = k.where_(x.isnan() | y.isnan(), f64::NAN, r);
    let one = y.eq(0.0) | x.eq(1.0) | (a.eq(1.0) & y.abs().eq(f64::INFINITY));
    k.where_(one, 1.0, r)
}
