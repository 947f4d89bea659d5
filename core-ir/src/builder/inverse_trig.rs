//! The inverse trigonometric functions, `asin`, `acos`, `atan` and `atan2`, which Triton's
//! "extern functions" tutorial takes from CUDA's libdevice (`libdevice.asin`): built here
//! from ops every backend has (a polynomial by multiply-adds, `sqrt`, a division, selects),
//! so that the interpreter, PTX and SPIR-V compute them alike. f16 and bf16 compute in f32
//! and round once; f64 computes in f64 with polynomials of its own (f64_inverse_trig.rs).
//!
//! The reductions and polynomials are those of Moshier's Cephes library for single
//! precision (`asinf`, `acosf`, `atanf`): within 3 ulp of the exact values over their
//! domains in the interpreter (`core-ir/tests/inverse_trig.rs` measured at most 2.3 ulp for
//! `asin`, 1.3 for `acos`, 2.6 for `atan` and 2.8 for `atan2`); a device's `sqrt` and
//! division round as it does (through Vulkan, within 3 and 2.5 ulp).

use super::in_f32::{copysign, horner};
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType;

/// π/2 and π/4 in f32.
const FRAC_PI_2: f32 = std::f32::consts::FRAC_PI_2;
const FRAC_PI_4: f32 = std::f32::consts::FRAC_PI_4;
const PI: f32 = std::f32::consts::PI;

// The coefficients as Cephes publishes them, in decimal (each rounds to its f32).
/// `asin(t) ≈ t + t·z·P(z)`, `z = t²`, for `|t| <= 1/2`: P's coefficients, highest first.
#[allow(clippy::excessive_precision)]
const ASIN_P: [f32; 5] = [
    4.2163199048e-2,
    2.4181311049e-2,
    4.5470025998e-2,
    7.4953002686e-2,
    1.6666752422e-1,
];
/// `atan(t) ≈ t + t·z·Q(z)`, `z = t²`, for `|t| <= tan(π/8)`: Q's coefficients, highest
/// first.
#[allow(clippy::excessive_precision)]
const ATAN_Q: [f32; 4] = [8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1];
/// tan(3π/8) and tan(π/8): where `atan` reduces its argument.
#[allow(clippy::excessive_precision)]
const TAN_3PI_8: f32 = 2.414213562373095;
#[allow(clippy::excessive_precision)]
const TAN_PI_8: f32 = 0.4142135623730950;

impl KernelBuilder {
    /// `arcsin x` (floats), as `libdevice.asin` (`tl.extra.cuda.libdevice.asin`): NaN
    /// outside `[-1, 1]`, `asin(±0) = ±0`.
    #[track_caller]
    pub fn asin<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "asin",
            x,
            loc,
            |x| {
                let a = x.abs();
                // Past 1/2: asin(a) = π/2 - 2 asin(sqrt((1 - a) / 2)).
                let big = a.gt(0.5f32);
                let t = self.where_(big, ((1.0f32 - a) * 0.5f32).sqrt(), a);
                let s = self.asin_small(t);
                copysign(self.where_(big, FRAC_PI_2 - (s + s), s), x)
            },
            super::f64_inverse_trig::asin,
        )
    }

    /// `arccos x` (floats), as `libdevice.acos`: NaN outside `[-1, 1]`.
    #[track_caller]
    pub fn acos<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "acos",
            x,
            loc,
            |x| {
                // Below -1/2, π - 2 asin(sqrt((1 + x) / 2)); above 1/2, 2 asin(sqrt((1 - x) / 2));
                // between, π/2 - asin(x): one argument of at most 1/2 for the polynomial.
                let (low, high) = (x.lt(-0.5f32), x.gt(0.5f32));
                let half_gap = self.where_(low, 1.0f32 + x, 1.0f32 - x) * 0.5f32;
                let t = self.where_(low | high, half_gap.sqrt(), x);
                let s = self.asin_small(t);
                let outer = self.where_(low, PI - (s + s), s + s);
                self.where_(low | high, outer, FRAC_PI_2 - s)
            },
            super::f64_inverse_trig::acos,
        )
    }

    /// `arctan x` (floats), as `libdevice.atan`: `±π/2` at `±∞`, `atan(±0) = ±0`.
    #[track_caller]
    pub fn atan<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "atan",
            x,
            loc,
            |x| copysign(self.atan_positive(x.abs()), x),
            super::f64_inverse_trig::atan,
        )
    }

    /// The angle of the point `(x, y)`, as C's and `libdevice.atan2(y, x)`: in `[-π, π]`,
    /// with C's signed zeros and infinities (`atan2(±0, -0) = ±π`, `atan2(±∞, ±∞) = ±π/4`
    /// or `±3π/4`); NaN if either is. `y` and `x` broadcast together; the result has their
    /// type where they have one, f32 otherwise.
    #[track_caller]
    pub fn atan2<'b>(&'b self, y: Value<'b>, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "atan2",
            &[y, x],
            loc,
            |v| {
                let (y, x) = (v[0], v[1]);
                let (ax, ay) = (x.abs(), y.abs());
                let (small, large) = (self.minimum(ax, ay), self.maximum(ax, ay));
                // The angle from the nearer axis: atan of small / large in [0, 1], with 0 / 0 (the
                // origin) as 0 and ∞ / ∞ as 1.
                let ratio = small / large;
                let ratio = self.where_(large.eq(0.0f32), 0.0f32, ratio);
                let ratio = self.where_(small.eq(f32::INFINITY), 1.0f32, ratio);
                let r = self.atan_positive(ratio);
                let r = self.where_(ay.gt(ax), FRAC_PI_2 - r, r);
                // Left of the y axis (-0 included): π minus it.
                let left = x.bitcast(ScalarType::I32).lt(0);
                copysign(self.where_(left, PI - r, r), y)
            },
            |v| super::f64_inverse_trig::atan2(v[0], v[1]),
        )
    }

    /// `asin(t)` for `|t| <= 1/2`: `t + t·z·P(z)`.
    fn asin_small<'b>(&'b self, t: Value<'b>) -> Value<'b> {
        let z = t * t;
        t + t * z * horner(z, &ASIN_P)
    }

    /// `atan(a)` for `a >= 0` (or NaN): reduced to `|t| <= tan(π/8)` by
    /// `atan(a) = π/2 + atan(-1/a)` past tan(3π/8) and `π/4 + atan((a - 1)/(a + 1))` past
    /// tan(π/8).
    fn atan_positive<'b>(&'b self, a: Value<'b>) -> Value<'b> {
        let (big, mid) = (a.gt(TAN_3PI_8), a.gt(TAN_PI_8));
        let t = self.where_(big, -1.0f32 / a, self.where_(mid, (a - 1.0f32) / (a + 1.0f32), a));
        let base = self.where_(big, FRAC_PI_2, self.where_(mid, FRAC_PI_4, 0.0f32));
        let z = t * t;
        base + (t + t * z * horner(z, &ATAN_Q))
    }
}

impl<'b> Value<'b> {
    /// `arcsin self`; see [`KernelBuilder::asin`].
    #[track_caller]
    pub fn asin(self) -> Value<'b> {
        self.builder.asin(self)
    }

    /// `arccos self`; see [`KernelBuilder::acos`].
    #[track_caller]
    pub fn acos(self) -> Value<'b> {
        self.builder.acos(self)
    }

    /// `arctan self`; see [`KernelBuilder::atan`].
    #[track_caller]
    pub fn atan(self) -> Value<'b> {
        self.builder.atan(self)
    }

    /// The angle of the point `(x, self)`: `atan2(self, x)`; see [`KernelBuilder::atan2`].
    #[track_caller]
    pub fn atan2(self, x: Value<'b>) -> Value<'b> {
        self.builder.atan2(self, x)
    }
}
