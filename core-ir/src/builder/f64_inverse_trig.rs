//! libdevice's inverse trigonometric functions on f64 values (`atan`, `atan2`, `asin`,
//! `acos`), written out in f64 ops: inverse_trig.rs's functions take f64 values here.
//!
//! `atan` reduces `a = |x|` to `|t| ≤ 7/16` by `atan(a) = c + atan((a - b)/(1 + a·b))` with
//! `(b, c)` = `(1/2, atan 1/2)`, `(1, π/4)`, `(3/2, atan 3/2)` on the intervals up to 11/16,
//! 19/16 and 39/16, and `π/2 + atan(-1/a)` beyond, each difference `a - b` exact and each
//! `c` in two parts; `atan(t) = t + t·z·G(z)`. `asin` is `t + t·z·P(z)` up to 1/2 and
//! `π/2 - 2·asin(√((1 - a)/2))` beyond; `acos` and `atan2` are built on them as the f32
//! forms are. `scripts/fit_inverse_trig_f64.py` fits and prints `G` and `P`;
//! `core-ir/tests/f64_math.rs` measures the functions against the libm crate's.

use super::f64_math::{divide, sqrt};
use super::in_f32::horner;
use super::Value;
use crate::types::ScalarType::I64;

/// `(atan(√z) - √z)/(z·√z)` on `[0, (7/16)²]`, highest first.
#[allow(clippy::excessive_precision)]
const ATAN_G: [f64; 12] = [
    0.014773184616983806,
    -0.033128134256069586,
    0.04492259293193656,
    -0.05216679739313656,
    0.05876946456755061,
    -0.06666241923359964,
    0.07692285554889286,
    -0.09090908355602592,
    0.11111111096645038,
    -0.14285714285566806,
    0.1999999999999941,
    -0.3333333333333333,
];

/// `(asin(√z) - √z)/(z·√z)` on `[0, 1/4]`, highest first.
#[allow(clippy::excessive_precision)]
const ASIN_P: [f64; 14] = [
    0.02961201126495512,
    -0.01924167174674304,
    0.019554513336123378,
    0.0030448799094556773,
    0.009319560794767446,
    0.009621842970100282,
    0.011566459612121669,
    0.01396378001220357,
    0.017352816540325496,
    0.02237215744350722,
    0.03038194447553234,
    0.044642857142551895,
    0.07500000000000118,
    0.16666666666666666,
];

/// `π/2`, `π/4`, `π`, `atan 1/2` and `atan 3/2`, each as the nearest f64 and the nearest
/// f64 to the rest.
#[allow(clippy::excessive_precision)]
const FRAC_PI_2: [f64; 2] = [std::f64::consts::FRAC_PI_2, 6.123_233_995_736_766e-17];
#[allow(clippy::excessive_precision)]
const FRAC_PI_4: [f64; 2] = [std::f64::consts::FRAC_PI_4, 3.061_616_997_868_383e-17];
#[allow(clippy::excessive_precision)]
const PI: [f64; 2] = [std::f64::consts::PI, 1.224_646_799_147_353_2e-16];
#[allow(clippy::excessive_precision)]
const ATAN_HALF: [f64; 2] = [0.463_647_609_000_806_1, 2.269_877_745_296_168_7e-17];
#[allow(clippy::excessive_precision)]
const ATAN_3_2: [f64; 2] = [0.982_793_723_247_329, 1.390_331_103_123_099_8e-17];

/// `c - v` for `c` in two parts: the high part first, whose difference with `v` is exact or
/// nearly (`v` is at most `c`), then the low part.
fn minus<'b>(c: [f64; 2], v: Value<'b>) -> Value<'b> {
    (c[0] - v) + c[1]
}

/// `atan(a)` for `a ≥ 0` (or NaN, which it keeps).
fn atan_positive(a: Value<'_>) -> Value<'_> {
    let k = a.builder;
    let one = k.zeros_like(a) + 1.0;
    let (i1, i2, i3) = (a.ge(7.0 / 16.0), a.ge(11.0 / 16.0), a.ge(19.0 / 16.0));
    let i4 = a.ge(39.0 / 16.0) | a.isnan();
    // The reduced argument's numerator and denominator, the numerator exact.
    let num = k.where_(i1, a + a - 1.0, a);
    let num = k.where_(i2, a - 1.0, num);
    let num = k.where_(i3, a - 1.5, num);
    let num = k.where_(i4, -one, num);
    let den = k.where_(i1, a + 2.0, one);
    let den = k.where_(i2, a + 1.0, den);
    let den = k.where_(i3, a.fma(1.5, 1.0), den);
    let den = k.where_(i4, a, den);
    let t = k.where_(i1, divide(num, den), a);
    let z = t * t;
    let r = t + t * z * horner(z, &ATAN_G);
    // The base angle c, in two parts, the low part added first.
    let bases = [(i1, ATAN_HALF), (i2, FRAC_PI_4), (i3, ATAN_3_2), (i4, FRAC_PI_2)];
    let part = |p: usize| bases.iter().fold(k.zeros_like(a), |v, &(i, c)| k.where_(i, c[p], v));
    let r = (r + part(1)) + part(0);
    k.where_(a.isnan(), a, r)
}

/// `asin(t)` for `|t| ≤ 1/2`.
fn asin_small(t: Value<'_>) -> Value<'_> {
    let z = t * t;
    t + t * z * horner(z, &ASIN_P)
}

pub(super) fn atan(x: Value<'_>) -> Value<'_> {
    atan_positive(x.abs()).copysign(x)
}

/// C's `atan2(y, x)`, with its signed zeros and infinities, as the f32 form computes it.
pub(super) fn atan2<'b>(y: Value<'b>, x: Value<'b>) -> Value<'b> {
    let k = x.builder;
    let (ax, ay) = (x.abs(), y.abs());
    let (small, large) = (k.minimum(ax, ay), k.maximum(ax, ay));
    // The angle from the nearer axis: atan of small / large in [0, 1], 0 / 0 as 0 and ∞ / ∞
    // as 1.
    let ratio = divide(small, large);
    let ratio = k.where_(large.eq(0.0), 0.0, ratio);
    let ratio = k.where_(small.eq(f64::INFINITY), 1.0, ratio);
    let t = atan_positive(ratio);
    // Nearer the y axis, π/2 ∓ t; nearer the x axis, t or π - t; left of the y axis (-0
    // included) the second of each: each angle one sum with a constant in two parts.
    let left = x.bitcast(I64).lt(0i64);
    let steep = k.where_(left, (t + FRAC_PI_2[0]) + FRAC_PI_2[1], minus(FRAC_PI_2, t));
    let flat = k.where_(left, minus(PI, t), t);
    let r = k.where_(ay.gt(ax), steep, flat).copysign(y);
    k.where_(x.isnan() | y.isnan(), f64::NAN, r)
}

pub(super) fn asin(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let big = a.gt(0.5);
    let t = k.where_(big, sqrt((1.0 - a) * 0.5), a);
    let s = asin_small(t);
    let r = k.where_(big, minus(FRAC_PI_2, s + s), s);
    let r = k.where_(a.gt(1.0), f64::NAN, r);
    k.where_(x.isnan(), x, r.copysign(x))
}

pub(super) fn acos(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    // Below -1/2, π - 2 asin(√((1 + x)/2)); above 1/2, 2 asin(√((1 - x)/2)); between,
    // π/2 - asin(x).
    let (low, high) = (x.lt(-0.5), x.gt(0.5));
    let half_gap = k.where_(low, x + 1.0, 1.0 - x) * 0.5;
    let t = k.where_(low | high, sqrt(half_gap), x);
    let s = asin_small(t);
    let outer = k.where_(low, minus(PI, s + s), s + s);
    let r = k.where_(low | high, outer, minus(FRAC_PI_2, s));
    let r = k.where_(x.abs().gt(1.0), f64::NAN, r);
    k.where_(x.isnan(), x, r)
}
