//! fp8 values (E4M3, E5M2, and `float8e4b15` and the `fnuz` formats). naga has no 8-bit
//! float: as for `bf16` (`bf16.rs`, whose expression and cast paths they share), an fp8
//! register is an `f32` holding an fp8 value, every op computes in `f32` and rounds once to
//! the fp8 type, to nearest even and saturating as `rutile_ir::fp8` defines (NVIDIA's
//! `cvt.rn.satfinite`; E5M2 keeps infinities; NaN is +0 in `float8e4b15`; the `fnuz`
//! formats' zero has no sign). The rounding
//! scales by powers of two and rounds to an integer (`RoundEven`), exact operations that no
//! driver can round its own way; the bits in memory are made and read with integer
//! operations.

use super::*;
use rutile_ir::fp8::{format_of, Format, Specials};

fn format(ty: ScalarType) -> Format {
    format_of(ty).expect("an fp8 type")
}

impl Cx<'_> {
    /// `f32` `x` rounded to fp8 type `ty`, still as an `f32`: nearest, ties to even, finite
    /// values beyond the largest finite one saturated to it, infinities kept in E5M2
    /// (saturated in the others), NaN kept (+0 in `float8e4b15`, which has none), zero
    /// without a sign in the `fnuz` formats.
    pub(super) fn round_fp8(&mut self, ty: ScalarType, x: H) -> H {
        let f = format(ty);
        let m = f.mantissa;
        let bits = self.as_(x, ScalarKind::Uint, None);
        let mask = self.u32c(0x7fff_ffff);
        let magnitude = self.bin(Bo::And, bits, mask);
        // The biased exponent of the quantum, 2^(max(e, e_min) - m): from 118 (E4M3) or
        // 111 (E5M2) to 255 - m, so both the scale and its inverse are normal f32 values.
        let s = self.u32c(23);
        let biased = self.bin(Bo::ShiftRight, magnitude, s);
        let lowest = self.u32c((127 + f.min_exponent()) as u32);
        let e = self.math(Mf::Max, &[biased, lowest]);
        let mc = self.u32c(m);
        let q = self.bin(Bo::Subtract, e, mc);
        let s = self.u32c(23);
        let scale_bits = self.bin(Bo::ShiftLeft, q, s);
        let scale = self.as_(scale_bits, ScalarKind::Float, None);
        let top = self.u32c(254);
        let inv = self.bin(Bo::Subtract, top, q);
        let s = self.u32c(23);
        let inv_bits = self.bin(Bo::ShiftLeft, inv, s);
        let inv_scale = self.as_(inv_bits, ScalarKind::Float, None);
        let a = self.as_(magnitude, ScalarKind::Float, None);
        // Exact scalings around one rounding to an integer.
        let y = self.bin(Bo::Multiply, a, inv_scale);
        let y = self.math(Mf::Round, &[y]);
        let r = self.bin(Bo::Multiply, y, scale);
        let max = self.float_lit(ScalarType::F32, f.max);
        let r = self.math(Mf::Min, &[r, max]);
        let r_bits = self.as_(r, ScalarKind::Uint, None);
        let sign_mask = self.u32c(0x8000_0000);
        let sign = self.bin(Bo::And, bits, sign_mask);
        let sign = if f.specials == Specials::NegativeZeroNan {
            let zero = self.u32c(0);
            let is_zero = self.bin(Bo::Equal, r_bits, zero);
            self.select(is_zero, zero, sign)
        } else {
            sign
        };
        let signed = self.bin(Bo::InclusiveOr, r_bits, sign);
        let nan_bits = if f.specials == Specials::AllFinite {
            self.u32c(0)
        } else {
            let quiet = self.u32c(0x0040_0000);
            self.bin(Bo::InclusiveOr, bits, quiet)
        };
        let nan = self.is_nan(ScalarType::F32, x);
        let out = self.select(nan, nan_bits, signed);
        let out = if f.specials == Specials::Ieee {
            let inf = self.u32c(0x7f80_0000);
            let infinite = self.bin(Bo::Equal, magnitude, inf);
            self.select(infinite, bits, out)
        } else {
            out
        };
        self.as_(out, ScalarKind::Float, None)
    }

    /// The 8 bits of `x`, an `f32` holding a value of fp8 type `ty`, in the low bits of a
    /// `u32` (NaN as the format's, with its sign where it has one of each sign; a zero
    /// without a sign in the `fnuz` formats).
    pub(super) fn fp8_bits(&mut self, ty: ScalarType, x: H) -> H {
        let f = format(ty);
        let m = f.mantissa;
        let bits = self.as_(x, ScalarKind::Uint, None);
        let s = self.u32c(24);
        let sign = self.bin(Bo::ShiftRight, bits, s);
        let c = self.u32c(0x80);
        let sign = self.bin(Bo::And, sign, c);
        let mask = self.u32c(0x7fff_ffff);
        let magnitude = self.bin(Bo::And, bits, mask);
        // Normal: the f32 exponent and top mantissa bits, rebiased.
        let s = self.u32c(23 - m);
        let top = self.bin(Bo::ShiftRight, magnitude, s);
        let rebias = self.u32c(((127 - f.bias) as u32) << m);
        let normal = self.bin(Bo::Subtract, top, rebias);
        // Subnormal: a whole number of the smallest steps.
        let a = self.as_(magnitude, ScalarKind::Float, None);
        let steps = self.float_lit(ScalarType::F32, 2f64.powi(m as i32 - f.min_exponent()));
        let n = self.bin(Bo::Multiply, a, steps);
        let n = self.as_(n, ScalarKind::Uint, Some(4));
        let smallest_normal = self.u32c(((127 + f.min_exponent()) as u32) << 23);
        let sub = self.bin(Bo::Less, magnitude, smallest_normal);
        let field = self.select(sub, n, normal);
        let nan_field = self.u32c(f.nan_bits(0).unwrap_or(0) as u32);
        let nan = self.is_nan(ScalarType::F32, x);
        let field = self.select(nan, nan_field, field);
        let field = if f.specials == Specials::Ieee {
            let inf = self.u32c(0x7f80_0000);
            let infinite = self.bin(Bo::Equal, magnitude, inf);
            let inf_field = self.u32c(0x7c);
            self.select(infinite, inf_field, field)
        } else {
            field
        };
        if f.specials == Specials::NegativeZeroNan {
            // The one NaN is `0x80`, the pattern a negative zero would have; a zero has no
            // sign.
            let c = self.u32c(0x7f);
            let magnitude = self.bin(Bo::And, field, c);
            let zero = self.u32c(0);
            let is_zero = self.bin(Bo::Equal, magnitude, zero);
            let sign = self.select(is_zero, zero, sign);
            let signed = self.bin(Bo::InclusiveOr, sign, magnitude);
            return self.select(nan, nan_field, signed);
        }
        let c = self.u32c(0x7f);
        let field = self.bin(Bo::And, field, c);
        self.bin(Bo::InclusiveOr, sign, field)
    }

    /// The value of fp8 type `ty` whose bits are the low 8 of `u32` `bits` (the rest
    /// ignored), as an `f32`.
    pub(super) fn fp8_of_bits(&mut self, ty: ScalarType, bits: H) -> H {
        let f = format(ty);
        let m = f.mantissa;
        let c = self.u32c(0x7f);
        let magnitude = self.bin(Bo::And, bits, c);
        let c = self.u32c(0x80);
        let sign = self.bin(Bo::And, bits, c);
        let s = self.u32c(24);
        let sign = self.bin(Bo::ShiftLeft, sign, s);
        // Normal: the fields moved into an f32's and rebiased.
        let s = self.u32c(23 - m);
        let moved = self.bin(Bo::ShiftLeft, magnitude, s);
        let rebias = self.u32c(((127 - f.bias) as u32) << 23);
        let normal = self.bin(Bo::Add, moved, rebias);
        // Subnormal (exponent field zero): the mantissa times the smallest step, exactly.
        let frac_mask = self.u32c((1 << m) - 1);
        let frac = self.bin(Bo::And, magnitude, frac_mask);
        let frac = self.as_(frac, ScalarKind::Float, Some(4));
        let step = self.float_lit(ScalarType::F32, 2f64.powi(f.min_exponent() - m as i32));
        let sub = self.bin(Bo::Multiply, frac, step);
        let sub = self.as_(sub, ScalarKind::Uint, None);
        let smallest_normal = self.u32c(1 << m);
        let is_sub = self.bin(Bo::Less, magnitude, smallest_normal);
        let value = self.select(is_sub, sub, normal);
        let value = if f.specials == Specials::Ieee {
            // Exponent all ones: infinity, or NaN where the mantissa is not zero.
            let ones = self.u32c(0x7f & !((1 << m) - 1));
            let special = self.bin(Bo::GreaterEqual, magnitude, ones);
            let inf = self.u32c(0x7f80_0000);
            let nan = self.u32c(0x7fc0_0000);
            let is_inf = self.bin(Bo::Equal, magnitude, ones);
            let special_value = self.select(is_inf, inf, nan);
            self.select(special, special_value, value)
        } else if f.specials == Specials::AllOnesNan {
            let all = self.u32c(0x7f);
            let is_nan = self.bin(Bo::Equal, magnitude, all);
            let nan = self.u32c(0x7fc0_0000);
            self.select(is_nan, nan, value)
        } else {
            value
        };
        let out = self.bin(Bo::InclusiveOr, value, sign);
        if f.specials == Specials::NegativeZeroNan {
            // `0x80`, which would be negative zero, is the one NaN.
            let c = self.u32c(0xff);
            let byte = self.bin(Bo::And, bits, c);
            let c = self.u32c(0x80);
            let is_nan = self.bin(Bo::Equal, byte, c);
            let nan = self.u32c(0x7fc0_0000);
            let out = self.select(is_nan, nan, out);
            return self.as_(out, ScalarKind::Float, None);
        }
        self.as_(out, ScalarKind::Float, None)
    }

    /// The bits of 8-bit `x` of `src` (an fp8 type, `i8` or `u8`) as the 8-bit `dst`.
    pub(super) fn bitcast_8(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        let bits = if src.is_fp8() {
            self.fp8_bits(src, x)
        } else {
            let u = self.as_(x, ScalarKind::Uint, None);
            let c = self.u32c(0xff);
            self.bin(Bo::And, u, c)
        };
        if dst.is_fp8() {
            return self.fp8_of_bits(dst, bits);
        }
        let v = self.as_(bits, naga_scalar(dst).kind, None);
        self.narrow(dst, v)
    }
}
