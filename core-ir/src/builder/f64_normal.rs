//! libdevice's functions of the normal distribution and the inverse error functions on f64
//! values (`normcdf`, `normcdfinv`, `erfcinv`, `erfinv`), written out in f64 ops on
//! f64_erf.rs's pieces: normal.rs and erfinv.rs route f64 here.
//!
//! `normcdf(x) = erfc(-x/√2)/2` with the Gaussian's exponent `x²/2` taken from `x` exactly
//! (the rounding of `x/√2` would move `e^(-x²/2)` by up to `x²` ulp). The inverses start
//! from the f32 functions' results and take Newton's steps in f64: on `erf(z) = y` where
//! `|y| < 1/2` (each step squares the error; the slope `2/√π·e^(-z²)`), and on
//! `ln erfc(z) = ln a` in the tails (slope `-2/(√π·erfcx(z))`, no underflow down to the
//! smallest subnormal), from the asymptotic `z² ≈ W - ln(√π·√W)`, `W = -ln a`, where `a`
//! is below f32's subnormals. `erfinv(y) = erfcinv(1 - y)` from 1/2 (the difference exact),
//! `normcdfinv(p) = -√2·erfcinv(2p)`. `core-ir/tests/f64_math.rs` measures them against
//! the libm crate's `erf` and `erfc` and their own definitions.

use super::f64_erf::{erf, erf_small, erfc_positive, erfcx_from_half, square_parts};
use super::f64_math::{exp, log};
use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F32, F64};

#[allow(clippy::excessive_precision)]
const FRAC_SQRT_PI_2: f64 = 0.886_226_925_452_758;
#[allow(clippy::excessive_precision)]
const SQRT_PI: f64 = 1.772_453_850_905_516;
/// `1/√2`, `√2` rounded.
const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const SQRT_2: f64 = std::f64::consts::SQRT_2;
/// Past this `normcdf(-|x|)` is below the smallest subnormal (erfc's 28 times √2, with
/// margin).
const NORMCDF_ZERO_FROM: f64 = 39.7;
/// Below this `a` is under f32's subnormals: the tail's start is the asymptotic one.
const F32_TINY: f64 = 1.0e-44;
/// Newton's steps from the starting points: from the f32 results' 2^-21, one gives 2^-42
/// and two f64's precision; the asymptotic start needs a third and a fourth.
const STEPS: usize = 4;

pub(super) fn normcdf(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs().minimum(NORMCDF_ZERO_FROM);
    // erfc(|x|/√2) with its square, x²/2, halved exactly from x's.
    let (s, ds) = square_parts(a);
    let e = erfc_positive(a * FRAC_1_SQRT_2, (s * 0.5, ds * 0.5)) * 0.5;
    let y = k.where_(x.lt(0.0), e, 1.0 - e);
    k.where_(x.isnan(), x, y)
}

/// `erfinv(y)` for `|y| < 1/2`: Newton on `erf(z) = y` from the f32 result.
fn erfinv_centre<'b>(k: &'b KernelBuilder, y: Value<'b>) -> Value<'b> {
    let mut z = k.erfinv(y.to(F32)).to(F64);
    for _ in 0..2 {
        z = z - (erf(z) - y) * FRAC_SQRT_PI_2 * exp(z * z);
    }
    z
}

/// `erfcinv(a)` for `a` in `(0, 1/2]`: Newton on `ln erfc(z) = ln a` from the f32 result or,
/// below f32's subnormals, the asymptotic start.
fn erfcinv_tail<'b>(k: &'b KernelBuilder, a: Value<'b>) -> Value<'b> {
    let ln_a = log(a);
    let big_w = -ln_a;
    let rough = (big_w - log(SQRT_PI * big_w.maximum(1.0).sqrt())).maximum(0.25).sqrt();
    let from_f32 = k.erfcinv(a.maximum(F32_TINY).to(F32)).to(F64);
    let mut z = k.where_(a.lt(F32_TINY), rough, from_f32).maximum(0.47);
    for _ in 0..STEPS {
        // ln erfc(z) = -z² + ln erfcx(z), its slope -2/(√π·erfcx(z)).
        let (s, ds) = square_parts(z);
        let r = erfcx_from_half(z.maximum(0.5));
        let small = z.lt(0.5);
        let erfc_small = 1.0 - erf_small(z);
        let ln_erfc = k.where_(small, log(erfc_small), -(s + ds) + log(r));
        let erfcx = k.where_(small, erfc_small * exp(s), r);
        z = z + (ln_erfc - ln_a) * FRAC_SQRT_PI_2 * erfcx;
    }
    z
}

pub(super) fn erfcinv(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    // Onto (0, 1]: erfcinv(2 - x) = -erfcinv(x), 2 - x exact from 1 on.
    let upper = x.gt(1.0);
    let a = k.where_(upper, 2.0 - x, x);
    let a = a.maximum(f64::from_bits(1));
    // Above 1/2 through erfinv(1 - a), 1 - a exact.
    let r = k.where_(
        a.gt(0.5),
        erfinv_centre(k, (-a + 1.0).minimum(0.5)),
        erfcinv_tail(k, a.minimum(0.5)),
    );
    let r = k.where_(upper, -r, r);
    let r = k.where_(x.eq(0.0), f64::INFINITY, r);
    let r = k.where_(x.eq(2.0), f64::NEG_INFINITY, r);
    k.where_(x.lt(0.0) | x.gt(2.0) | x.isnan(), f64::NAN, r)
}

pub(super) fn erfinv(y: Value<'_>) -> Value<'_> {
    let k = y.builder;
    let a = y.abs();
    let r = k.where_(
        a.lt(0.5),
        erfinv_centre(k, a.minimum(0.5)),
        erfcinv_tail(k, (-a + 1.0).clamp(f64::from_bits(1), 0.5)),
    );
    let r = k.where_(a.eq(1.0), f64::INFINITY, r);
    let r = k.where_(a.gt(1.0), f64::NAN, r);
    let r = r.copysign(y);
    k.where_(y.isnan(), y, r)
}

pub(super) fn normcdfinv(p: Value<'_>) -> Value<'_> {
    -(erfcinv(p + p) * SQRT_2)
}
