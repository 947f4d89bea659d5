//! libdevice's functions of the normal distribution: `normcdf`, its inverse `normcdfinv`,
//! and `erfcinv` under it, built from ops every backend has (erfc.rs's fit, erfinv.rs's
//! polynomials, exp_log.rs's logarithm and exponential), so that the interpreter, PTX and
//! SPIR-V compute them alike. f16 and bf16 compute in f32 and round once; f64 computes in
//! f64 (f64_normal.rs).
//!
//! `normcdf(x) = erfc(-x/√2) / 2`, with the exponent's square `x²/2` taken from `x`
//! exactly (the rounding of `x/√2` would otherwise move `e^(-x²/2)` by up to `x²` ulp).
//!
//! `erfcinv(x) = erfinv(1 - x)`, but `1 - x` would lose `x`'s digits where it is small:
//! Giles' `w = -ln((1 - y)(1 + y))` is taken as `-ln(x·(2 - x))`; his central polynomial
//! serves for `w < 5`, and beyond (`x` below about 0.0034) Newton's method on `ln erfc`
//! (erfc.rs's `ln t - z² + P(t)`, whose slope is `-2 / (√π·erfcx(z))`: no underflow down
//! to the smallest subnormal), two steps from Giles' tail polynomial (good to `w` = 16)
//! or from the asymptotic `z² ≈ W - ln(√π·√W)`, `W = -ln x`. `erfcinv(2 - x) =
//! -erfcinv(x)`. `normcdfinv(p) = -√2·erfcinv(2p)`.
//! `core-ir/tests/normal.rs` measures the three against f64.

use super::erfc::{erfc_positive, ln_erfc_and_erfcx, split_square};
use super::erfinv::{CENTRE, TAIL};
use super::exp_log::ln_positive;
use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;

#[allow(clippy::excessive_precision)]
const SQRT_PI: f32 = 1.772_453_850_905_516;
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
const SQRT_2: f32 = std::f32::consts::SQRT_2;
/// Past this `normcdf(-|x|)` is below the smallest subnormal f32 (erfc's 10.5 times √2).
const NORMCDF_UNDERFLOW: f32 = 14.85;
/// Giles' polynomials hand over at `w` = 5; his tail one holds to `w` = 16.
const CENTRE_BELOW: f32 = 5.0;
const TAIL_BELOW: f32 = 16.0;

impl KernelBuilder {
    /// The standard normal distribution function `Φ(x) = erfc(-x/√2) / 2` (floats), as
    /// `libdevice.normcdf`: within 7 ulp of the exact value, erfc's (`core-ir/tests/normal.rs`
    /// measured 6.85),
    /// down into the subnormals of its left tail; 0 at `-∞`, 1 at `+∞`, NaN at NaN.
    #[track_caller]
    pub fn normcdf<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "normcdf",
            x,
            loc,
            |x| {
                let a = x.abs().minimum(NORMCDF_UNDERFLOW);
                let (hi, lo) = split_square(a);
                // erfc(|x|/√2), its square (x²/2) halved exactly.
                let e = erfc_positive(a * FRAC_1_SQRT_2, hi * 0.5f32, lo * 0.5f32) * 0.5f32;
                let y = self.where_(x.lt(0.0f32), e, 1.0f32 - e);
                self.where_(x.isnan(), x, y)
            },
            super::f64_normal::normcdf,
        )
    }

    /// The inverse of the standard normal distribution function (floats), as
    /// `libdevice.normcdfinv`: `normcdf(normcdfinv(p)) = p` for `p` in `(0, 1)`, within 5
    /// ulp of the exact value (`core-ir/tests/normal.rs` measured 4.49), `-∞` at 0, `+∞` at
    /// 1, NaN outside `[0, 1]` and at NaN.
    #[track_caller]
    pub fn normcdfinv<'b>(&'b self, p: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "normcdfinv",
            p,
            loc,
            |p| -SQRT_2 * erfcinv(self, p + p),
            super::f64_normal::normcdfinv,
        )
    }

    /// The inverse complementary error function (floats), as `libdevice.erfcinv`:
    /// `erfc(erfcinv(x)) = x` for `x` in `(0, 2)`, accurate where `x` is small and
    /// `erfinv(1 - x)` would keep none of its digits: within 5 ulp of the exact value, down
    /// to the smallest subnormal (`core-ir/tests/normal.rs` measured 4.02 in Giles' centre,
    /// 3.54 in the tails); `+∞` at 0, 0 at 1, `-∞` at 2,
    /// NaN outside `[0, 2]` and at NaN.
    #[track_caller]
    pub fn erfcinv<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64("erfcinv", x, loc, |x| erfcinv(self, x), super::f64_normal::erfcinv)
    }
}

/// `erfcinv(x)` for f32 `x`, special values included.
fn erfcinv<'b>(k: &'b KernelBuilder, x: Value<'b>) -> Value<'b> {
    // Onto (0, 1]: erfcinv(2 - x) = -erfcinv(x), 2 - x exact from 1 on.
    let upper = x.gt(1.0f32);
    let a = k.where_(upper, 2.0f32 - x, x);
    let a = a.maximum(f32::from_bits(1));
    let y = 1.0f32 - a;
    // Giles' w from a itself: (1 - y)(1 + y) = a·(2 - a).
    let w = -ln_positive(a * (2.0f32 - a));
    let centre = y * horner(w - 2.5f32, &CENTRE);
    // Beyond: Newton on ln erfc(z) = ln a, from Giles' tail or the asymptotic form.
    let ln_a = ln_positive(a);
    let big_w = -ln_a;
    let rough = (big_w - ln_positive(SQRT_PI * big_w.maximum(1.0f32).sqrt()))
        .maximum(0.25f32)
        .sqrt();
    let tail = y * horner(w.maximum(CENTRE_BELOW).sqrt() - 3.0f32, &TAIL);
    let mut z = k.where_(w.lt(TAIL_BELOW), tail, rough).maximum(0.5f32);
    for _ in 0..2 {
        let (ln_erfc, erfcx) = ln_erfc_and_erfcx(z);
        z = z + (ln_erfc - ln_a) * (SQRT_PI * 0.5f32) * erfcx;
    }
    let r = k.where_(w.lt(CENTRE_BELOW), centre, z);
    let r = k.where_(upper, -r, r);
    let r = k.where_(x.eq(0.0f32), f32::INFINITY, r);
    let r = k.where_(x.eq(2.0f32), f32::NEG_INFINITY, r);
    k.where_(x.lt(0.0f32) | x.gt(2.0f32) | x.isnan(), f32::NAN, r)
}

impl<'b> Value<'b> {
    /// `Φ(self)`; see [`KernelBuilder::normcdf`].
    #[track_caller]
    pub fn normcdf(self) -> Value<'b> {
        self.builder.normcdf(self)
    }

    /// `Φ⁻¹(self)`; see [`KernelBuilder::normcdfinv`].
    #[track_caller]
    pub fn normcdfinv(self) -> Value<'b> {
        self.builder.normcdfinv(self)
    }

    /// The inverse complementary error function of `self`; see [`KernelBuilder::erfcinv`].
    #[track_caller]
    pub fn erfcinv(self) -> Value<'b> {
        self.builder.erfcinv(self)
    }
}
