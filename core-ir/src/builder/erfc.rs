//! libdevice's `erfc`, `1 - erf(x)` without the cancellation, and `erfcx`, built from ops
//! every backend has (a division, polynomials, integer ops on the bits), so that the
//! interpreter, PTX and SPIR-V compute them alike. f16 and bf16 compute in f32 and round
//! once; f64 computes in f64 (f64_erf.rs).
//!
//! For `z = |x|`, `erfc(z) = t·e^(-z² + P(t))`, `t = 1 / (1 + z/2)`, with the Chebyshev fit
//! `P` of Press et al. (Numerical Recipes' `erfcc`, relative error below 1.2·10^-7); the
//! exponent is kept exact where it is large: `z²` from `z`'s top 12 bits and the rest
//! (each product exact), and the exponential is `exp_log.rs`'s (a two-part `ln 2` and a
//! series), not a device's, whose error grows with its argument. Below 1/2, where `P(t)`
//! nears zero by cancellation, `1 - erf(z)` by `erf`'s Taylor series instead.
//! `erfc(-z) = 2 - erfc(z)`.
//!
//! libdevice's `erfcx`, `e^(x²)·erfc(x)`, is the same fit with the `e^(-z²)` left out:
//! `t·e^(P(t))` for `x ≥ 1/2` (`1/(√π·x)` in the limit, where `erfc` underflows), `e^(x²)·
//! (1 - erf(x))` by the series for `|x| < 1/2`, and `2·e^(x²) - erfcx(-x)` below `-1/2`
//! (the exponent exact as above; `+∞` from about -9.4, where `e^(x²)` overflows).
//! `core-ir/tests/erfc.rs` measures both against f64.

use super::exp_log::{exp_reduced, ln_positive, scale};
use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};

/// `P(t)`'s coefficients, highest first.
#[allow(clippy::excessive_precision)]
const P: [f32; 10] = [
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
];
/// `erf(z) = z·E(z²)` by its Taylor series, `E`'s coefficients highest first: below
/// `SERIES_BELOW`, where `P(t)` is near zero by cancellation, `erfc = 1 - erf`.
#[allow(clippy::excessive_precision)]
const ERF_SERIES: [f32; 8] = [
    -1.492565035840625e-05,
    0.00012055332981789664,
    -0.0008548327023450852,
    0.005223977625442188,
    -0.026866170645131252,
    0.11283791670955126,
    -0.37612638903183754,
    std::f32::consts::FRAC_2_SQRT_PI,
];
const SERIES_BELOW: f32 = 0.5;
/// Past this `erfc` is below the smallest subnormal f32.
const UNDERFLOW: f32 = 10.5;
/// Past this `e^(z²)` overflows f32 (from z = 9.42).
const SQUARE_OVERFLOW: f32 = 9.5;
/// `z`'s bits but the low 12 of its significand: its square is exact.
const TOP_BITS: i32 = !0xFFF;

impl KernelBuilder {
    /// The complementary error function `1 - erf(x)` (floats), as `libdevice.erfc`:
    /// accurate where `erf(x)` is near 1 and the difference would keep none of its digits;
    /// within 7 ulp of the exact value over its whole range (`core-ir/tests/erfc.rs`
    /// measured at most 6.67 over 3 million points; CUDA's `erfcf` is specified within 4,
    /// and `1 - erf(x)` keeps no digit past 4), 2 at `-∞`, 0 at `+∞`
    /// and past 10.5, NaN at NaN.
    #[track_caller]
    pub fn erfc<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "erfc",
            x,
            loc,
            |x| {
                let z = x.abs().minimum(UNDERFLOW);
                let (hi, lo) = split_square(z);
                let y = erfc_positive(z, hi, lo);
                let y = self.where_(x.lt(0.0f32), 2.0f32 - y, y);
                self.where_(x.isnan(), x, y)
            },
            super::f64_erf::erfc,
        )
    }

    /// The scaled complementary error function `e^(x²)·erfc(x)` (floats), as
    /// `libdevice.erfcx`: finite where `erfc` underflows (about `1/(√π·x)` for large `x`)
    /// and without the overflow of `e^(x²)` there; within 7 ulp of the exact value
    /// (`core-ir/tests/erfc.rs` measured at most 6.09 over 1.2 million points); 1 at 0, 0
    /// at `+∞`, `+∞` from about -9.4 down, NaN at NaN.
    #[track_caller]
    pub fn erfcx<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "erfcx",
            x,
            loc,
            |x| {
                let z = x.abs();
                let t = 1.0f32 / z.fma(0.5f32, 1.0f32);
                let (k, p) = exp_reduced(fit(t));
                let tail = t * scale(p + 1.0f32, k);
                // |x| < 1/2: e^(x²)·(1 - erf(x)), x² small enough to take as it rounds.
                let s = x * x;
                let (ks, ps) = exp_reduced(s.minimum(SERIES_BELOW));
                let small = scale(ps + 1.0f32, ks) * (1.0f32 - x * horner(s, &ERF_SERIES));
                // x <= -1/2: 2·e^(z²) - erfcx(z), no cancellation (2·e^(1/4) against 0.62 at most).
                let (hi, lo) = split_square(z.minimum(SQUARE_OVERFLOW));
                let negative = exp_of_sum(hi, lo) * 2.0f32 - tail;
                let y = self.where_(x.lt(0.0f32), negative, tail);
                let y = self.where_(z.lt(SERIES_BELOW), small, y);
                self.where_(x.isnan(), x, y)
            },
            super::f64_erf::erfcx,
        )
    }
}

/// `erfc(z)` for f32 `z` in `[0, 10.5]` whose square is `hi + lo`, `hi` exact (as
/// [`split_square`] gives it; a caller whose `z` is rounded gives the square of the value it
/// means, which the exponent needs exactly, where `t` and the series do not).
pub(super) fn erfc_positive<'b>(z: Value<'b>, hi: Value<'b>, lo: Value<'b>) -> Value<'b> {
    let t = 1.0f32 / z.fma(0.5f32, 1.0f32);
    // -z² + P(t) as an exact -hi and the rest.
    let e = exp_of_sum(-hi, fit(t) - lo);
    z.builder
        .where_(z.lt(SERIES_BELOW), 1.0f32 - z * horner(z * z, &ERF_SERIES), t * e)
}

/// `ln erfc(z)` and `erfcx(z)` for f32 `z ≥ 1/2` (where the fit holds alone), without
/// underflow however large `z` is: `ln t - z² + P(t)` (`z²` as it rounds) and `t·e^P(t)`.
pub(super) fn ln_erfc_and_erfcx(z: Value<'_>) -> (Value<'_>, Value<'_>) {
    let t = 1.0f32 / z.fma(0.5f32, 1.0f32);
    let p = fit(t);
    let (k, e) = exp_reduced(p);
    (ln_positive(t) + (p - z * z), t * scale(e + 1.0f32, k))
}

/// `P(t)` by fused multiply-adds, one rounding a step where the device fuses them.
fn fit(t: Value<'_>) -> Value<'_> {
    P[2..].iter().fold(t.fma(P[0], P[1]), |acc, &c| acc.fma(t, c))
}

/// `z²` (f32, not negative) as `hi + lo` with `hi` exact: `z = zh + zl`, `zh` of 12 bits,
/// `hi = zh²`, `lo = 2·zh·zl + zl²` (each product exact).
pub(super) fn split_square(z: Value<'_>) -> (Value<'_>, Value<'_>) {
    let zh = (z.bitcast(I32) & TOP_BITS).bitcast(F32);
    let zl = z - zh;
    (zh * zh, zh * zl * 2.0f32 + zl * zl)
}

/// `e^(a + b)` as `e^a·e^b`, each by exp_log.rs's reduction (`a`'s exactly, for all its
/// size), with no sum of the two that a driver could round first.
fn exp_of_sum<'b>(a: Value<'b>, b: Value<'b>) -> Value<'b> {
    let (ka, pa) = exp_reduced(a);
    let (kb, pb) = exp_reduced(b);
    scale((pa + 1.0f32) * (pb + 1.0f32), ka + kb)
}

impl<'b> Value<'b> {
    /// `1 - erf(self)`; see [`KernelBuilder::erfc`].
    #[track_caller]
    pub fn erfc(self) -> Value<'b> {
        self.builder.erfc(self)
    }

    /// `e^(self²)·erfc(self)`; see [`KernelBuilder::erfcx`].
    #[track_caller]
    pub fn erfcx(self) -> Value<'b> {
        self.builder.erfcx(self)
    }
}
