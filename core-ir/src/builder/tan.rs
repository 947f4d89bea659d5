//! libdevice's `tan`, built from ops every backend has (integer multiplies and shifts, a
//! polynomial, a division, selects), so that the interpreter, PTX and SPIR-V compute it
//! alike. f16 and bf16 compute in f32 and round once; f64 is refused.
//!
//! The argument is reduced by π/2 in integers, as Payne and Hanek do: its 24-bit
//! significand times 96 bits of 2/π gives the multiple's parity and 64 bits of what is
//! left, exactly, on any device (a reduction by fused multiply-adds is exact only where
//! the device fuses them, which Vulkan does not promise). `tan` of the reduced argument,
//! in `[-π/4, π/4]`, is Moshier's Cephes polynomial for single precision (`tanf`); an odd
//! multiple of π/2 away, `tan x = -1 / tan z`. `core-ir/tests/tan.rs` measures it against
//! f64, next to the poles too.

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32, U32};

/// 2/π in 96 fractional bits, most significant word first.
const TWO_OVER_PI: [u32; 3] = [0xA2F9_836E, 0x4E44_1529, 0xFC27_57D1];
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
/// π/2 as the f32 nearest it and the f32 nearest the rest.
#[allow(clippy::excessive_precision)]
const FRAC_PI_2_PARTS: [f32; 2] = [1.570796370506286621, -4.371139000186243e-8];
/// 2^-32 and 2^-24.
const TWO_MINUS_32: f32 = 1.0 / 4_294_967_296.0;
const TWO_MINUS_24: f32 = 1.0 / 16_777_216.0;
/// Below this an argument is its own reduction (the nearest multiple of π/2 is 0).
const UNREDUCED: f32 = 0.5;
/// From 2^24 on the 96 bits of 2/π no longer reach the bits the reduction keeps: the
/// result is NaN there (libdevice carries more of 2/π).
const REDUCIBLE: f32 = 16_777_216.0;

impl KernelBuilder {
    /// `tan x` of an angle in radians (floats), as `libdevice.tan`: `tan(±0) = ±0`, NaN at
    /// infinities and NaN; within 4 ulp of the exact value for `|x| < 2^24`
    /// (`core-ir/tests/tan.rs` measured at most 3.00 within 100 and 3.41 next to a pole;
    /// CUDA's `tanf` is specified within 4), and NaN from 2^24 (about 1.7·10^7) on, where
    /// libdevice still reduces exactly.
    #[track_caller]
    pub fn tan<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32("tan", x, loc, |x| {
            let a = x.abs();
            let (odd, z) = self.reduce_by_half_pi(a);
            let z = self.where_(a.lt(UNREDUCED), a, z);
            let odd = odd & a.ge(UNREDUCED);
            let s = z * z;
            let t = (s * horner(s, &TAN_P)).fma(z, z);
            // An odd multiple away, the cotangent's negative.
            let t = self.where_(odd, -1.0f32 / t, t);
            let t = self.where_(a.lt(REDUCIBLE), t, f32::NAN);
            // tan is odd: x's sign bit flips t's (so that tan(-0) = -0).
            (t.bitcast(I32) ^ (x.bitcast(I32) & i32::MIN)).bitcast(F32)
        })
    }

    /// For `a` in `[1/2, 2^24)`: whether the multiple of π/2 nearest `a` is odd, and `a`
    /// less that multiple, in `[-π/4, π/4]`. `a = m·2^(e-23)` with `m` its 24-bit
    /// significand; `m · 2/π` (a 120-bit product of 32-bit words) shifted by the exponent
    /// puts the multiple's last bit and the 64 bits after it in three words.
    fn reduce_by_half_pi<'b>(&'b self, a: Value<'b>) -> (Value<'b>, Value<'b>) {
        let bits = a.bitcast(U32);
        let m = (bits & 0x007F_FFFFu32) | 0x0080_0000u32;
        // 0 for `a` in [2^23, 2^24), 24 for [1/2, 1).
        let shift = 150u32 - (bits >> 23);
        let [w0, w1, w2] = TWO_OVER_PI;
        let (hi0, lo0) = (m.umulhi(w0), m * w0);
        let (hi1, lo1) = (m.umulhi(w1), m * w1);
        let hi2 = m.umulhi(w2);
        // The product's words above the lowest (whose bits the shift always drops), with
        // their carries.
        let p1 = hi2 + lo1;
        let c1 = p1.lt(lo1).to(U32);
        let p2 = hi1 + lo0;
        let c2 = p2.lt(lo0).to(U32);
        let p2 = p2 + c1;
        let c2 = c2 + p2.lt(c1).to(U32);
        let p3 = hi0 + c2;
        // The window: the multiple's last bit, then 64 bits of the fraction (a shift by 32,
        // at `shift` 0, gives 0).
        let up = 32u32 - shift;
        let low = (p1 >> shift) | (p2 << up);
        let high = (p2 >> shift) | (p3 << up);
        let last = (p3 >> shift) & 1u32;
        // A fraction of a half or more rounds the multiple up and is left as its negative
        // (the 64-bit two's complement), so that no subtraction loses its bits.
        let up_one = (high >> 31).eq(1u32);
        let odd = (last + (high >> 31)).eq(1u32);
        let neg_low = 0u32 - low;
        let neg_high = !high + low.eq(0u32).to(U32);
        let (high, low) = (self.where_(up_one, neg_high, high), self.where_(up_one, neg_low, low));
        // The fraction in f32 by one rounding (its top 24 bits exact, the next 32 below
        // them), times π/2 in two parts.
        let top = (high & 0xFFFF_FF00u32).to(F32) * TWO_MINUS_32;
        let rest = ((high << 24) | (low >> 8)).to(F32) * (TWO_MINUS_32 * TWO_MINUS_24);
        let f = top + rest;
        let z = f.fma(FRAC_PI_2_PARTS[0], f * FRAC_PI_2_PARTS[1]);
        (odd, self.where_(up_one, -z, z))
    }
}

impl<'b> Value<'b> {
    /// `tan self`; see [`KernelBuilder::tan`].
    #[track_caller]
    pub fn tan(self) -> Value<'b> {
        self.builder.tan(self)
    }
}
