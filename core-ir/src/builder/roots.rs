//! libdevice's `hypot`, `cbrt` and their kin (`rhypot`, `norm3d`, `norm4d`, `rnorm3d`,
//! `rnorm4d`, `rcbrt`), built from ops every backend has (multiply-adds, one
//! square root, divisions, integer ops on the bits), so that the interpreter, PTX and
//! SPIR-V compute them alike. f16 and bf16 compute in f32 and round once; f64 computes in
//! f64 (f64_roots.rs).
//! `core-ir/tests/roots.rs` measures them against f64 in the interpreter.

use super::in_f32::copysign;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};

/// The exponent field's mask and its first bit.
const EXPONENT_BITS: i32 = 0x7F80_0000;
const EXPONENT_ONE: i32 = 1 << 23;
/// The exponent fields of 2^-126 and 2^126: the range `hypot` scales by, so that neither
/// scale nor its inverse leaves the normals.
const EXPONENT_MIN: i32 = EXPONENT_ONE;
const EXPONENT_MAX: i32 = 253 << 23;
/// The smallest normal f32, and 2^24 and 2^-8, which scale subnormals into the normals and
/// their cube roots back.
const MIN_NORMAL: f32 = f32::MIN_POSITIVE;
const TWO_24: f32 = 16_777_216.0;
const TWO_MINUS_8: f32 = 1.0 / 256.0;
/// Added to a third of the bits of a positive normal `a` to give bits within 4% of `∛a`
/// (the exponent's bias, 127·2^23, times 2/3, lowered to balance the error over `[1, 8)`).
const CBRT_BIAS: i32 = 0x2A51_2000;

impl KernelBuilder {
    /// `√(x² + y²)` (floats) without overflow or underflow on the way, as
    /// `libdevice.hypot`: infinite where either is infinite (a NaN in the other too), NaN
    /// where either is NaN otherwise.
    #[track_caller]
    pub fn hypot<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "hypot",
            &[x, y],
            loc,
            |v| self.scaled_norm(v, false),
            |v| super::f64_roots::scaled_norm(self, v, false),
        )
    }

    /// `1 / √(x² + y²)` (floats), as `libdevice.rhypot`: scaled as [`KernelBuilder::hypot`]
    /// is, so no overflow or underflow on the way; 0 where either is infinite, `+∞` where
    /// both are zero, NaN where either is NaN otherwise.
    #[track_caller]
    pub fn rhypot<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "rhypot",
            &[x, y],
            loc,
            |v| self.scaled_norm(v, true),
            |v| super::f64_roots::scaled_norm(self, v, true),
        )
    }

    /// `√(a² + b² + c²)` (floats, broadcast together), as `libdevice.norm3d`: scaled by a
    /// power of two, so no overflow or underflow on the way; infinite where any is
    /// infinite, NaN where any is NaN otherwise.
    #[track_caller]
    pub fn norm3d<'b>(&'b self, a: Value<'b>, b: Value<'b>, c: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "norm3d",
            &[a, b, c],
            loc,
            |v| self.scaled_norm(v, false),
            |v| super::f64_roots::scaled_norm(self, v, false),
        )
    }

    /// `√(a² + b² + c² + d²)` (floats, broadcast together), as `libdevice.norm4d`; see
    /// [`KernelBuilder::norm3d`].
    #[track_caller]
    pub fn norm4d<'b>(&'b self, a: Value<'b>, b: Value<'b>, c: Value<'b>, d: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "norm4d",
            &[a, b, c, d],
            loc,
            |v| self.scaled_norm(v, false),
            |v| super::f64_roots::scaled_norm(self, v, false),
        )
    }

    /// `1 / √(a² + b² + c²)` (floats, broadcast together), as `libdevice.rnorm3d`: 0 where
    /// any is infinite, `+∞` where all are zero; see [`KernelBuilder::norm3d`].
    #[track_caller]
    pub fn rnorm3d<'b>(&'b self, a: Value<'b>, b: Value<'b>, c: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "rnorm3d",
            &[a, b, c],
            loc,
            |v| self.scaled_norm(v, true),
            |v| super::f64_roots::scaled_norm(self, v, true),
        )
    }

    /// `1 / √(a² + b² + c² + d²)` (floats, broadcast together), as `libdevice.rnorm4d`; see
    /// [`KernelBuilder::rnorm3d`].
    #[track_caller]
    pub fn rnorm4d<'b>(&'b self, a: Value<'b>, b: Value<'b>, c: Value<'b>, d: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64_n(
            "rnorm4d",
            &[a, b, c, d],
            loc,
            |v| self.scaled_norm(v, true),
            |v| super::f64_roots::scaled_norm(self, v, true),
        )
    }

    /// The Euclidean norm of f32 `values` (or its reciprocal): scaled by the power of two
    /// that brings the largest near 1 (exact: 2^-126 .. 2^126, so that neither the scale
    /// nor its inverse leaves the normals), the squares summed by fused multiply-adds (one
    /// rounding a square where the device fuses them), one square root.
    fn scaled_norm<'b>(&'b self, values: &[Value<'b>], reciprocal: bool) -> Value<'b> {
        let magnitudes: Vec<Value<'b>> = values.iter().map(|v| v.abs()).collect();
        let big = magnitudes[1..].iter().fold(magnitudes[0], |m, &v| self.maximum(m, v));
        let exponent = (big.bitcast(I32) & EXPONENT_BITS)
            .maximum(EXPONENT_MIN)
            .minimum(EXPONENT_MAX);
        let down = ((254i32 << 23) - exponent).bitcast(F32);
        let up = exponent.bitcast(F32);
        let scaled: Vec<Value<'b>> = magnitudes.iter().map(|&v| v * down).collect();
        let sum = scaled.iter().fold(None, |acc: Option<Value<'b>>, &v| {
            Some(match acc {
                None => v * v,
                Some(acc) => v.fma(v, acc),
            })
        });
        let root = sum.expect("two or more values").sqrt();
        let infinite = magnitudes[1..]
            .iter()
            .fold(magnitudes[0].eq(f32::INFINITY), |i, &v| i | v.eq(f32::INFINITY));
        if reciprocal {
            self.where_(infinite, 0.0f32, down / root)
        } else {
            self.where_(infinite, f32::INFINITY, root * up)
        }
    }

    /// `1 / ∛x` (floats), as `libdevice.rcbrt`: [`KernelBuilder::cbrt`]'s root, inverted;
    /// `±∞` at `±0`, `±0` at `±∞`, NaN at NaN.
    #[track_caller]
    pub fn rcbrt<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64("rcbrt", x, loc, |x| 1.0f32 / x.cbrt(), super::f64_roots::rcbrt)
    }

    /// The real cube root `∛x` (floats), as `libdevice.cbrt`: negative for negative `x`,
    /// `±0`, `±∞` and NaN as given.
    #[track_caller]
    pub fn cbrt<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "cbrt",
            x,
            loc,
            |x| {
                let a = x.abs();
                // Subnormals scaled by 2^24 first (their root then by 2^-8).
                let subnormal = a.lt(MIN_NORMAL);
                let a = self.where_(subnormal, a * TWO_24, a);
                // A third of the bits (the exponent divided by three, roughly), then Newton's
                // iteration `y - (y³ - a) / 3y²`: the error squares at each step, 4% to 1e-3 to
                // 1e-6, then f32's last bits, with the residual `y²·y - a` from one fused
                // multiply-add.
                let mut y = (a.bitcast(I32) / 3 + CBRT_BIAS).bitcast(F32);
                for _ in 0..2 {
                    y = (y + y + a / (y * y)) * (1.0f32 / 3.0);
                }
                let y2 = y * y;
                let y = y - y2.fma(y, -a) / (y2 * 3.0f32);
                let y = self.where_(subnormal, y * TWO_MINUS_8, y);
                // Zeros, infinities and NaNs are their own roots.
                let own = a.eq(0.0f32) | a.eq(f32::INFINITY) | a.isnan();
                copysign(self.where_(own, x.abs(), y), x)
            },
            super::f64_roots::cbrt,
        )
    }
}

impl<'b> Value<'b> {
    /// `1 / √(self² + y²)`; see [`KernelBuilder::rhypot`].
    #[track_caller]
    pub fn rhypot(self, y: Value<'b>) -> Value<'b> {
        self.builder.rhypot(self, y)
    }

    /// `1 / ∛self`; see [`KernelBuilder::rcbrt`].
    #[track_caller]
    pub fn rcbrt(self) -> Value<'b> {
        self.builder.rcbrt(self)
    }

    /// `√(self² + y²)`; see [`KernelBuilder::hypot`].
    #[track_caller]
    pub fn hypot(self, y: Value<'b>) -> Value<'b> {
        self.builder.hypot(self, y)
    }
    /// `∛self`; see [`KernelBuilder::cbrt`].
    #[track_caller]
    pub fn cbrt(self) -> Value<'b> {
        self.builder.cbrt(self)
    }
}
