//! libdevice's `cyl_bessel_i0` and `cyl_bessel_i1` of f64 values, written out in f64 ops
//! (bessel.rs routes f64 here): PTX has no f64 Bessel function and bessel.rs's
//! polynomials hold f32's precision only.
//!
//! As bessel.rs's f32 form: below 10, the Taylor series in `y = x²/4` to `y^27` (all terms
//! positive, the last below 10^-20 of the sum), `y`'s rounding error taken back through the
//! series' slope; from 10 on, `e^x/√x·H(1/x)` with `H` a degree-20 polynomial in `1/x -
//! 1/20` (`scripts/fit_bessel_f64.py` fits it), `e^x`'s power of two applied last, so that
//! the result overflows only where it does (from about 713.98). `core-ir/tests/f64_bessel.rs`
//! measures both against their series in double-double arithmetic.

use super::f64_math::{divide, exp_reduced_within, scale, sqrt};
use super::in_f32::horner;
use super::{KernelBuilder, Value};

/// Where the series hands over to the tail polynomial, and the tail's centre in `1/x`.
const SPLIT: f64 = 10.0;
const CENTRE: f64 = 0.05;
/// Past this both overflow f64 (from about 713.98).
const OVERFLOW: f64 = 720.0;
/// The series' terms: `25^27/(27!·28!)` is below 10^-20 of `I1(10)·2/10`.
const TERMS: usize = 28;

impl KernelBuilder {
    /// `I0(x)` for f64 `x`: even; `+∞` past about 713.98, NaN at NaN.
    pub(super) fn f64_bessel_i0<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let a = x.abs();
        let small = series_of_square(a * 0.5, &taylor(0));
        let r = self.where_(a.lt(SPLIT), small, tail(a, &I0_TAIL));
        self.where_(x.isnan(), x, r)
    }

    /// `I1(x)` for f64 `x`: odd; `±∞` past about ±713.98, NaN at NaN.
    pub(super) fn f64_bessel_i1<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let a = x.abs();
        let h = a * 0.5;
        let small = h * series_of_square(h, &taylor(1));
        let r = self.where_(a.lt(SPLIT), small, tail(a, &I1_TAIL));
        let r = self.where_(x.signbit(), -r, r);
        self.where_(x.isnan(), x, r)
    }
}

/// `Σ y^k/(k!(k + order)!)`'s coefficients, highest first.
fn taylor(order: usize) -> Vec<f64> {
    let factorial = |n: usize| (1..=n).map(|i| i as f64).product::<f64>();
    (0..TERMS)
        .rev()
        .map(|k| 1.0 / (factorial(k) * factorial(k + order)))
        .collect()
}

/// The series `Σ c_k·h^2k` (coefficients highest first) for f64 `h ≥ 0`, at `h²`'s
/// rounded value plus the series' slope times the rounding's remainder (exact by a fused
/// multiply-add): the rounding alone would move the sum by up to `h²·S'/S`, 5 half-ulps at
/// the split.
fn series_of_square<'b>(h: Value<'b>, c: &[f64]) -> Value<'b> {
    let y = h * h;
    let remainder = h.fma(h, -y);
    let n = c.len() - 1;
    let slope: Vec<f64> = c[..n].iter().enumerate().map(|(i, &v)| v * (n - i) as f64).collect();
    horner(y, c) + horner(y, &slope) * remainder
}

/// `e^a/√a·H(1/a)` for f64 `a ≥ 10` (others clamped; `+∞` past the overflow), the power of
/// two of `e^a` applied last.
fn tail<'b>(a: Value<'b>, h: &[f64]) -> Value<'b> {
    let ac = a.clamp(SPLIT, OVERFLOW);
    let (k, p) = exp_reduced_within(ac, 0.0, OVERFLOW);
    let t = divide(a.builder.zeros_like(ac) + 1.0, ac);
    let q = divide(horner(t - CENTRE, h), sqrt(ac));
    let r = scale(q.fma(p, q), k);
    a.builder.where_(a.gt(OVERFLOW), f64::INFINITY, r)
}

// `H_n(t) = √x·e^-x·I_n(x)` at `x = 1/t` from 10 on, in `t - 1/20`, highest first
// (`scripts/fit_bessel_f64.py`).
#[allow(clippy::excessive_precision)]
const I0_TAIL: [f64; 21] = [
    504785097719842.94,
    14508829890602.61,
    -8011017382754.924,
    -317533806564.39307,
    54685647030.6319,
    3336155509.9933376,
    -159195605.60324293,
    -19863893.796235055,
    -451685.6069287476,
    31041.161077056404,
    3834.200791730509,
    324.3883548687664,
    32.75482837628545,
    4.556123979040328,
    0.8726586195971147,
    0.22650880888720873,
    0.08066011933152437,
    0.041216271610180176,
    0.0332453090548865,
    0.05291771934372408,
    0.4015097608312065,
];
#[allow(clippy::excessive_precision)]
const I1_TAIL: [f64; 21] = [
    -524478654427942.4,
    -14204200571914.82,
    8365663440940.719,
    317111230505.48486,
    -57668830573.47794,
    -3399817653.361911,
    172753062.7055206,
    20688005.99681601,
    448103.138013136,
    -33781.57615804971,
    -4084.1393208771074,
    -347.862999543306,
    -35.709382978868774,
    -5.075237096007929,
    -0.9982916221301973,
    -0.268468570934436,
    -0.10070874114435314,
    -0.056098890508010174,
    -0.05392058653515518,
    -0.15461810253511876,
    0.39133972251206706,
];
