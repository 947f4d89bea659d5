//! libdevice's `tan`, built from ops every backend has (integer multiplies and shifts, a
//! polynomial, a division, selects), so that the interpreter, PTX and SPIR-V compute it
//! alike. f16 and bf16 compute in f32 and round once; f64 computes in f64 (f64_trig.rs).
//!
//! The argument is reduced by π/2 in integers, exactly, on any device and over the whole
//! f32 range (reduce_pi.rs, Payne and Hanek's method). `tan` of the reduced argument,
//! in `[-π/4, π/4]`, is Moshier's Cephes polynomial for single precision (`tanf`); an odd
//! multiple of π/2 away, `tan x = -1 / tan z`. `core-ir/tests/tan.rs` measures it against
//! f64, next to the poles too.

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};

/// `tan(z) ≈ z + z·s·P(s)`, `s = z²`, for `|z| <= π/4`: P's coefficients as Cephes
/// publishes them, highest first.
#[allow(clippy::excessive_precision)]
const TAN_P: [f32; 6] = [
    9.38540185543e-3,
    3.11992232697e-3,
    2.44301354525e-2,
    5.34112807005e-2,
    1.33387994085e-1,
    3.33331568548e-1,
];

impl KernelBuilder {
    /// `tan x` of an angle in radians (floats), as `libdevice.tan`: `tan(±0) = ±0`, NaN at
    /// infinities and NaN; within 4 ulp of the exact value for every finite `x`
    /// (`core-ir/tests/tan.rs` measured at most 3.00 within 100 and 3.41 next to a pole;
    /// CUDA's `tanf` is specified within 4).
    #[track_caller]
    pub fn tan<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "tan",
            x,
            loc,
            |x| {
                let a = x.abs();
                let (quadrant, z) = self.reduce_by_half_pi_from_zero(a);
                let odd = (quadrant & 1u32).eq(1u32);
                let s = z * z;
                let t = (s * horner(s, &TAN_P)).fma(z, z);
                // An odd multiple away, the cotangent's negative.
                let t = self.where_(odd, -1.0f32 / t, t);
                let t = self.where_(a.lt(f32::INFINITY), t, f32::NAN);
                // tan is odd: x's sign bit flips t's (so that tan(-0) = -0).
                (t.bitcast(I32) ^ (x.bitcast(I32) & i32::MIN)).bitcast(F32)
            },
            super::f64_trig::tan,
        )
    }
}

impl<'b> Value<'b> {
    /// `tan self`; see [`KernelBuilder::tan`].
    #[track_caller]
    pub fn tan(self) -> Value<'b> {
        self.builder.tan(self)
    }
}
