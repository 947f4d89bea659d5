//! libdevice's `sinpi` and `cospi`, `sin(πx)` and `cos(πx)`, built from ops every backend
//! has (exact subtractions of multiples of 1/2, a product by π, polynomials, selects), so
//! that the interpreter, PTX and SPIR-V compute them alike. f16 and bf16 compute in f32
//! and round once; f64 computes in f64 (f64_trig.rs).
//!
//! Unlike `sin(π·x)`, the argument is reduced exactly: `x` less the nearest multiple of
//! 1/2, `f` in `[-1/4, 1/4]`, is exact in f32, and the quarter turns left select `±sin(πf)`
//! or `±cos(πf)`, each a polynomial of Moshier's Cephes library for single precision
//! (`sinf`, `cosf`) in `z = πf`. Integers give `sinpi` zeros and half-integers `cospi`
//! zeros exactly. `core-ir/tests/sinpi.rs` measures both against f64.

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};

/// `sin z ≈ z + z·s·S(s)`, `cos z ≈ 1 - s/2 + s²·C(s)`, `s = z²`, for `|z| <= π/4`: the
/// coefficients as Cephes publishes them, highest first.
#[allow(clippy::excessive_precision)]
const SIN: [f32; 3] = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1];
#[allow(clippy::excessive_precision)]
const COS: [f32; 3] = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2];
/// From here on every f32 is an even integer.
const EVEN: f32 = 16_777_216.0;

impl KernelBuilder {
    /// `sin(πx)` (floats), as `libdevice.sinpi`: exact zeros at integers (with `x`'s sign),
    /// `±1` at half-integers, NaN at infinities and NaN.
    #[track_caller]
    pub fn sinpi<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "sinpi",
            x,
            loc,
            |x| self.sin_cos_pi(x, 0),
            |x| super::f64_trig::sin_cos_pi(x, 0),
        )
    }

    /// `cos(πx)` (floats), as `libdevice.cospi`: `±1` at integers, exact `+0` at
    /// half-integers, NaN at infinities and NaN.
    #[track_caller]
    pub fn cospi<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "cospi",
            x,
            loc,
            |x| self.sin_cos_pi(x, 1),
            |x| super::f64_trig::sin_cos_pi(x, 1),
        )
    }

    /// `sin(π(x + shift/2))` for f32 `x`: `shift` 0 is `sinpi`, 1 is `cospi`.
    fn sin_cos_pi<'b>(&'b self, x: Value<'b>, shift: i32) -> Value<'b> {
        // From 2^24 every f32 is an even integer: taken as 0 (so that 2x cannot overflow).
        let a = self.where_(x.abs().lt(EVEN), x, 0.0f32);
        // The nearest multiple of 1/2, `halves` of them, and what is left, both exact.
        let halves = (a + a).rint();
        let f = a - halves * 0.5f32;
        // Quarter turns: `halves` modulo 4, exactly, then `shift` more.
        let m = halves - (halves * 0.25f32).floor() * 4.0f32;
        let n = (m.to(I32) + shift) & 3;
        let z = f * std::f32::consts::PI;
        let s = z * z;
        let sin = (z * s).fma(horner(s, &SIN), z);
        let cos = (s * s).fma(horner(s, &COS), 1.0f32 - s * 0.5f32);
        // Quarter turns 0 to 3: sin, cos, -sin, -cos of πf.
        let r = super::sincos::quarter_turns(n, sin, cos);
        // The exact zeros: `sinpi` of an integer has x's sign, `cospi` of a half-integer
        // is +0.
        let zero = f.eq(0.0f32) & (n & 1).eq(0);
        let signed_zero = (x.bitcast(I32) & i32::MIN).bitcast(F32);
        let r = self.where_(zero, if shift == 0 { signed_zero } else { self.zeros(&[], F32) }, r);
        self.where_(x.isfinite(), r, f32::NAN)
    }
}

impl<'b> Value<'b> {
    /// `sin(π·self)`; see [`KernelBuilder::sinpi`].
    #[track_caller]
    pub fn sinpi(self) -> Value<'b> {
        self.builder.sinpi(self)
    }
    /// `cos(π·self)`; see [`KernelBuilder::cospi`].
    #[track_caller]
    pub fn cospi(self) -> Value<'b> {
        self.builder.cospi(self)
    }
}
