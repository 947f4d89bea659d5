//! libdevice's `lgamma` and `tgamma` of f64 values (gamma.rs routes f64 here), written out
//! in f64 ops: PTX has neither, and gamma.rs's f32 forms would keep 24 bits.
//!
//! Both rest on `lgamma(x)` computed as a sum of two f64s whose absolute error is about
//! 2^-53 or less over the whole range (far below an ulp of `lgamma` where it is large), so
//! that `Γ(x) = ±e^lgamma(x)`, the exponential taking both parts, keeps f64's relative
//! accuracy everywhere (1.5 ulp measured). gamma.rs's f32 form multiplies factors instead;
//! in f64 that would be up to 184 of them, each a rounding or, kept exact in two parts, a
//! loop of 184 steps, and their product overflows f64 before `Γ` does. For `y > 0`:
//! - on `[1, 3)`, gamma.rs's fit in f64: `(y - 1)(y - 2)·R(y - 2)`, `R` of degree 28, its
//!   constant in two parts and the product of the factors (exact) by `R` in two parts, so
//!   that `lgamma` keeps its relative accuracy next to its roots 1 and 2;
//! - below 1, `lgamma(y + 1) - ln y`, the fit at `y + 1` taking its factors `y` and `y - 1`
//!   from `y` (so `y + 1` is never rounded);
//! - on `[3, 8)`, the fit at `f = y - n` in `[2, 3)` plus `ln((y - 1)···(y - n))`, the
//!   product (at most five exact factors) kept in two parts;
//! - from 8, `(y - 1/2)·(ln y - 1) + (ln(2π) - 1)/2 + s·Q(s²)`, `s = 1/y`, `Q` a fit of
//!   Stirling's remainder (degree 7 in `s²`), the product in two parts.
//!
//! The logarithms are f64_pow.rs's two-part `log2` times `ln 2` in two parts. For `x < 0`
//! the reflection `lgamma(x) = ln π - ln|x·sinpi(x)| - lgamma(-x)` (the product and its
//! logarithm in two parts), and between -1/2 and 0 `lgamma(x + 2) - ln(-x·(1 + x))`, where
//! `x·sinpi(x)` would underflow; the sums of the parts are exact (two-sums). What is left
//! is `sinpi`'s error (an ulp, relative, of the product: 2^-53 absolute in `lgamma`) and the
//! fits': next to `lgamma`'s roots below -2 the result is far below its terms and its error
//! is absolute, about 2^-52, as libdevice's (whose bound leaves `[-10.001, -2.264]` out).
//! The second parts are fused multiply-adds' rounding errors: a Vulkan device whose `fma`
//! rounds twice (lavapipe) loses them, and there `lgamma` is off by about an ulp of its
//! larger terms and `tgamma` by up to 2.4 ulp per unit of `|lgamma(x)|`.
//! `scripts/fit_lgamma_f64.py` fits and prints `R`, `Q` and the two-part constants;
//! `core-ir/tests/f64_math.rs` measures `lgamma` against the libm crate's (musl's) and
//! `tgamma` against a reference whose products are kept in two parts.

use super::f64_math::{divide, exp_reduced_within, scale, two_sum};
use super::f64_pow::{fast_two_sum, log2_parts};
use super::f64_trig::sin_cos_pi;
use super::in_f32::horner;
use super::Value;
use crate::types::ScalarType::{F64, I64};

/// `R(t) - R0 = t·P(t)`, `lgamma(t + 2) = (t + 1)·t·R(t)` on `[-1, 1]`: P highest first.
#[allow(clippy::excessive_precision)]
const R: [f64; 28] = [
    3.9592899392841773e-10,
    -8.152852870624974e-10,
    -1.1901740908188623e-09,
    2.444386936885692e-09,
    4.305220610785349e-09,
    -8.87711600370437e-09,
    3.821541398410965e-10,
    -9.172949166290702e-10,
    2.4876913129422816e-08,
    -5.1889381335192836e-08,
    8.858800462314761e-08,
    -1.8624721164419038e-07,
    4.0491176292722286e-07,
    -8.554195306752008e-07,
    1.8077244952477939e-06,
    -3.8465374565754054e-06,
    8.22227252824938e-06,
    -1.7661849545809686e-05,
    3.8168877217049974e-05,
    -8.309510094797398e-05,
    0.00018255264018626728,
    -0.0004057073998333553,
    0.0009153769221939477,
    -0.0021081308338353785,
    0.004998641164698706,
    -0.012384192193374183,
    0.032965000621155816,
    -0.1003173016743539,
];
/// `R(0)` (near `1 - γ`) in two parts.
#[allow(clippy::excessive_precision)]
const R0: [f64; 2] = [0.42278433509846713, 4.942915152430645e-18];
/// `Q(z)`, `lgamma(y) - ((y - 1/2)·ln y - y + ln(2π)/2) = s·Q(s²)` for `s = 1/y ≤ 1/8`,
/// highest first.
#[allow(clippy::excessive_precision)]
const STIRLING: [f64; 8] = [
    -0.020855820837463117,
    0.0062081367662297935,
    -0.001914965912162907,
    0.0008417325268022405,
    -0.0005952380234291254,
    0.0007936507935117282,
    -0.0027777777777776747,
    0.08333333333333333,
];
/// `ln π`, `ln(2π)/2 - 1/2` and `ln 2`, each as the nearest f64 and the nearest f64 to the
/// rest.
#[allow(clippy::excessive_precision)]
const LN_PI: [f64; 2] = [1.1447298858494002, 1.0265951162707826e-17];
#[allow(clippy::excessive_precision)]
const HALF_LN_2PI_LESS_HALF: [f64; 2] = [0.4189385332046727, 1.6728209650585413e-17];
#[allow(clippy::excessive_precision)]
const LN_2: [f64; 2] = [std::f64::consts::LN_2, 2.319_046_813_846_299_6e-17];
/// Where the stepped factors end and Stirling's series starts.
const STIRLING_FROM: f64 = 8.0;
/// `tgamma` overflows f64 from 171.6243769563027, and is below half the smallest
/// subnormal (a zero) from -184 down; past these bounds the results are set (which also
/// keeps Stirling's products finite).
const TGAMMA_OVERFLOW: f64 = 172.0;
const TGAMMA_UNDERFLOW: f64 = -190.0;

/// `ln v` for f64 `v > 0` and finite, as a sum of two f64s.
fn ln_parts(v: Value<'_>) -> (Value<'_>, Value<'_>) {
    let (lh, ll) = log2_parts(v);
    let h = lh * LN_2[0];
    (h, lh.fma(LN_2[0], -h) + (lh * LN_2[1] + ll * LN_2[0]))
}

/// `a·b·R(t)` as a sum of two f64s, for exact `a` and `b` (the factors `(t + 1)·t` of
/// `lgamma(t + 2)`, or values within an ulp of them) and `t` in `[-1, 1]`: `R0 + t·P(t)`
/// as a two-part sum (`|t·P(t)| ≤ 0.16 < R0`), `a·b` exactly by a fused multiply-add.
fn fit<'b>(a: Value<'b>, b: Value<'b>, t: Value<'b>) -> (Value<'b>, Value<'b>) {
    let v = t * horner(t, &R);
    let (rh, re) = fast_two_sum(a.builder.zeros_like(v) + R0[0], v);
    let rl = re + R0[1];
    let p = a * b;
    let pe = a.fma(b, -p);
    let h = p * rh;
    (h, p.fma(rh, -h) + (p * rl + pe * rh))
}

/// `lgamma(y)` for f64 `y > 0` and finite, as a sum of two f64s (any value for other `y`,
/// which the callers replace). `near_zero` selects instead `lgamma(x + 2)` at `x = -y`
/// (for `y < 1/2`), the fit being shared.
fn lgamma_parts<'b>(y: Value<'b>, near_zero: Value<'b>) -> (Value<'b>, Value<'b>) {
    let k = y.builder;
    let (below_one, fitted, stepped) = (y.lt(1.0), y.lt(3.0), y.lt(STIRLING_FROM));
    // [3, 8): n = floor(y) - 2 factors y - 1, ..., y - n (n ≤ 5), their product in two parts
    // (each step's rounding error by a fused multiply-add), f = y - n in [2, 3).
    let ym = y.clamp(3.0, STIRLING_FROM);
    let n = ym.floor() - 2.0;
    let f = ym - n;
    let (mut ph, mut pl) = (ym - 1.0, k.zeros_like(ym));
    for j in 2..=5 {
        let j = j as f64;
        let factor = k.where_(n.ge(j), ym - j, 1.0);
        let h = ph * factor;
        (ph, pl) = (h, ph.fma(factor, -h) + pl * factor);
    }
    // One fit for every branch: the factors and the variable each takes.
    let x = -y;
    let pick = |zero: Value<'b>, below: Value<'b>, on: Value<'b>, above: Value<'b>| {
        let v = k.where_(fitted, on, above);
        let v = k.where_(below_one, below, v);
        k.where_(near_zero, zero, v)
    };
    let a = pick(x + 1.0, y, y - 1.0, f - 1.0);
    let t = pick(x, y - 1.0, y - 2.0, f - 2.0);
    let (fh, fl) = fit(a, t, t);
    // One logarithm: of y below 1 and from 8, of the product between.
    let yl = k.where_(stepped & !fitted, ph, y);
    let (lh, ll) = ln_parts(yl);
    let ll = ll + k.where_(stepped & !fitted, divide(pl, ph), 0.0);
    // From 8: (y - 1/2)·(ln y - 1) (ln y - 1 exact: ln y ≥ 2), then the constant and the
    // remainder s·Q(s²).
    let ys = y.maximum(STIRLING_FROM);
    let s = divide(k.zeros_like(ys) + 1.0, ys);
    let series = s * horner(s * s, &STIRLING);
    let a = ys - 0.5;
    let m = lh - 1.0;
    let p = a * m;
    let pe = a.fma(m, -p);
    let stirling_lo = pe + (a * ll + (series + HALF_LN_2PI_LESS_HALF[1]));
    // The sum of two two-part values u + v, by branch: the fit and -ln y below 1, the fit
    // alone on [1, 3), the fit and ln(product) on [3, 8), Stirling's parts from 8.
    let (uh, ul) = (k.where_(stepped, fh, p), k.where_(stepped, fl, stirling_lo));
    let (lh, ll) = (k.where_(below_one, -lh, lh), k.where_(below_one, -ll, ll));
    let vh = k.where_(stepped, lh, HALF_LN_2PI_LESS_HALF[0]);
    let vl = k.where_(stepped, ll, 0.0);
    let on = fitted & !below_one;
    let (vh, vl) = (k.where_(on | near_zero, 0.0, vh), k.where_(on | near_zero, 0.0, vl));
    let (h, e) = two_sum(uh, vh);
    let r = fast_two_sum(h, e + (ul + vl));
    // Past about 2.5e305 lgamma overflows, and the fused multiply-add's residual with it.
    let huge = p.abs().eq(f64::INFINITY) & !stepped;
    (k.where_(huge, p, r.0), k.where_(huge, 0.0, r.1))
}

/// `lgamma(x)` for f64 `x` finite, nonzero and not a negative integer, as a sum of two
/// f64s: [`lgamma_parts`] above zero, the reflection below.
fn lgamma_signed(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    let k = x.builder;
    let y = x.abs();
    let negative = x.lt(0.0);
    let near_zero = negative & y.lt(0.5);
    let (gh, gl) = lgamma_parts(y, near_zero);
    // The logarithm's argument in two parts: |x·sinpi(x)|, or between -1/2 and 0 -x·(1 + x)
    // = y - y².
    let s = sin_cos_pi(x, 0).abs();
    let q = y * s;
    let qe = y.fma(s, -q);
    let square = y * y;
    let (r, re) = two_sum(y, -square);
    let re = re - y.fma(y, -square);
    let (qh, ql) = (k.where_(near_zero, r, q), k.where_(near_zero, re, qe));
    let positive = qh.gt(0.0) & qh.lt(f64::INFINITY);
    let (lh, ll) = ln_parts(k.where_(positive, qh, 1.0));
    let ll = ll + divide(ql, k.where_(positive, qh, 1.0));
    // ln π - ln q - lgamma(y); between -1/2 and 0, lgamma(x + 2) - ln q.
    let zero = k.zeros_like(x);
    let (ch, cl) = (k.where_(near_zero, zero, LN_PI[0]), k.where_(near_zero, zero, LN_PI[1]));
    let (mh, ml) = (k.where_(near_zero, gh, -gh), k.where_(near_zero, gl, -gl));
    let (a, ae) = two_sum(ch, -lh);
    let (b, be) = two_sum(a, mh);
    let lo = (ae + be) + ((cl - ll) + ml);
    let (rh, rl) = fast_two_sum(b, lo);
    (k.where_(negative, rh, gh), k.where_(negative, rl, gl))
}

/// `ln|Γ(x)|` of f64 `x`, with C's special values: `+∞` at `±0`, the negative integers and
/// `±∞`, NaN at NaN, `+0` at 1 and 2.
pub(super) fn lgamma(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let finite = x.abs().lt(f64::INFINITY);
    let xs = k.where_(finite & x.ne(0.0), x, 1.0);
    let (h, l) = lgamma_signed(xs);
    let r = h + l;
    let pole = x.le(0.0) & x.floor().eq(x);
    let r = k.where_(pole | !finite, f64::INFINITY, r);
    // +0 at 1 and 2, where a factor is zero of either sign.
    let r = k.where_(r.eq(0.0), 0.0, r);
    k.where_(x.isnan(), x, r)
}

/// `Γ(x)` of f64 `x`: `±e^lgamma(x)`, the exponential of both parts (`e^(h + l) = 2^k·(1 +
/// p)·(1 + l)`), negative where `floor(x)` is odd below zero; C's special values: `±∞` at
/// `±0`, `+∞` from 171.62 on, NaN at the negative integers, `-∞` and NaN, zeros of `Γ`'s
/// sign below the underflow.
pub(super) fn tgamma(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let inside = x.gt(TGAMMA_UNDERFLOW) & x.lt(TGAMMA_OVERFLOW) & x.ne(0.0);
    let xs = k.where_(inside, x, 1.0);
    let (h, l) = lgamma_signed(xs);
    let (kf, p) = exp_reduced_within(h, -800.0, 710.0);
    let magnitude = scale((p + (p + 1.0) * l) + 1.0, kf);
    let half = x.floor() * 0.5;
    let odd = x.lt(0.0) & half.floor().ne(half);
    let r = k.where_(odd, -magnitude, magnitude);
    let r = k.where_(x.ge(TGAMMA_OVERFLOW), f64::INFINITY, r);
    let zero = k.zeros_like(x);
    let r = k.where_(x.le(TGAMMA_UNDERFLOW), k.where_(odd, -zero, zero), r);
    // ±∞ at ±0.
    let r = k.where_(x.eq(0.0), (x.bitcast(I64) | 0x7FF0_0000_0000_0000i64).bitcast(F64), r);
    let bad = (x.lt(0.0) & x.floor().eq(x)) | x.isnan();
    k.where_(bad, f64::NAN, r)
}
