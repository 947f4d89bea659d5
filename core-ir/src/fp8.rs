//! The fp8 formats: E4M3 and E5M2 (the OCP 8-bit formats, Triton's `float8e4nv` and
//! `float8e5`), and Triton's three others: `float8e4b15` (E4M3 with f16's bias, every
//! pattern finite), `float8e4b8` and `float8e5b16` (the `fnuz` formats of AMD's MI300 and
//! Graphcore: one NaN where negative zero would be, no infinities). Their rounding, their
//! bits, and the host types that hold them.
//!
//! rutile computes on fp8 values in f32 and rounds each result once to the fp8 type, to
//! nearest even, **saturating**: a finite value beyond the largest finite one becomes that
//! largest value with its sign, as NVIDIA's conversion does (`cvt.rn.satfinite`, the only
//! fp8 conversion PTX has, and Triton's on sm_89 and newer). An infinity stays infinite in
//! E5M2, which has them, and saturates in the others, which have none; NaN stays NaN where
//! the format has one, and becomes +0 in `float8e4b15`, which has none (as a float
//! converted to an integer). The `fnuz` formats have no negative zero: a result that
//! rounds to zero is +0. The interpreter, PTX and SPIR-V agree on every value. One rounding
//! in f32 and one to fp8 is the correctly rounded fp8 of a sum, product, quotient or square
//! root (24 bits are more than twice fp8's 4, plus two).
//!
//! The host types are `u8` newtypes written here rather than taken from a crate: the one
//! candidate (`float8`) has no saturating conversion and gives E4M3's largest value as 416.

use std::fmt;

/// The patterns of an fp8 format that are not finite numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// The all-ones exponent holds the infinities and NaNs, as in IEEE 754 (E5M2).
    Ieee,
    /// One NaN of each sign, the all-ones magnitude `S.1111.111`; no infinities (E4M3,
    /// OCP's `e4m3fn`).
    AllOnesNan,
    /// One NaN, the pattern negative zero would have (`0x80`); no infinities and no
    /// negative zero (the `fnuz` formats).
    NegativeZeroNan,
    /// Every pattern is a finite number (`float8e4b15`); a NaN converts to +0.
    AllFinite,
}

/// The layout of an fp8 format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Format {
    /// Stored mantissa bits.
    pub mantissa: u32,
    /// Exponent bias.
    pub bias: i32,
    /// The largest finite value.
    pub max: f64,
    /// Which patterns are infinities or NaNs.
    pub specials: Specials,
}

/// E4M3: bias 7, 3 mantissa bits, largest 448, no infinities.
pub const E4M3: Format = Format {
    mantissa: 3,
    bias: 7,
    max: 448.0,
    specials: Specials::AllOnesNan,
};

/// E5M2: bias 15 (f16's), 2 mantissa bits, largest 57344.
pub const E5M2: Format = Format {
    mantissa: 2,
    bias: 15,
    max: 57344.0,
    specials: Specials::Ieee,
};

/// Triton's `float8e4b15`: E4M3 with bias 15 (an f16 whose top exponent bit is clear, its
/// mantissa cut to 3 bits), largest 1.875, no infinities, no NaN.
pub const E4M3B15: Format = Format {
    mantissa: 3,
    bias: 15,
    max: 1.875,
    specials: Specials::AllFinite,
};

/// `e4m3fnuz` (Triton's `float8e4b8`): bias 8, 3 mantissa bits, largest 240, NaN `0x80`.
pub const E4M3FNUZ: Format = Format {
    mantissa: 3,
    bias: 8,
    max: 240.0,
    specials: Specials::NegativeZeroNan,
};

/// `e5m2fnuz` (Triton's `float8e5b16`): bias 16, 2 mantissa bits, largest 57344, NaN `0x80`.
pub const E5M2FNUZ: Format = Format {
    mantissa: 2,
    bias: 16,
    max: 57344.0,
    specials: Specials::NegativeZeroNan,
};

impl Format {
    /// The exponent of the smallest normal value (`1 - bias`).
    pub const fn min_exponent(self) -> i32 {
        1 - self.bias
    }

    /// The bits of this format's NaN with the sign bit `sign` (`0x80` or 0), `None` where
    /// it has none.
    pub const fn nan_bits(self, sign: u8) -> Option<u8> {
        match self.specials {
            Specials::Ieee => Some(sign | 0x7e),
            Specials::AllOnesNan => Some(sign | 0x7f),
            Specials::NegativeZeroNan => Some(0x80),
            Specials::AllFinite => None,
        }
    }

    /// `v` rounded to this format (nearest, ties to even; finite values beyond the largest
    /// finite one saturated to it; infinities kept where the format has them, saturated
    /// where not; NaN kept where it has one, +0 where not; zero without a sign where the
    /// format has no negative zero), as an f64.
    pub fn round(self, v: f64) -> f64 {
        if v.is_nan() {
            return if self.specials == Specials::AllFinite { 0.0 } else { v };
        }
        if v.is_infinite() && self.specials == Specials::Ieee {
            return v;
        }
        let a = v.abs();
        let r = if a >= self.max {
            self.max
        } else {
            // The unbiased exponent of `a` (f64 subnormals count as below every fp8 one).
            let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            let quantum = e.max(self.min_exponent()) - self.mantissa as i32;
            let scale = 2f64.powi(quantum);
            ((a / scale).round_ties_even() * scale).min(self.max)
        };
        if r == 0.0 && self.specials == Specials::NegativeZeroNan {
            return 0.0;
        }
        r.copysign(v)
    }

    /// The bits of `v`, rounded first as [`Format::round`] does. NaN is the format's NaN
    /// with `v`'s sign where it has one of each sign ([`Format::nan_bits`]).
    pub fn encode(self, v: f64) -> u8 {
        let r = self.round(v);
        let sign = if r.is_sign_negative() { 0x80 } else { 0 };
        if let Some(nan) = self.nan_bits(sign).filter(|_| r.is_nan()) {
            return nan;
        }
        let a = r.abs();
        if a.is_infinite() {
            return sign | 0x7c;
        }
        let m = self.mantissa;
        let normal = 2f64.powi(self.min_exponent());
        let magnitude = if a < normal {
            // Subnormal: a whole number of the smallest steps, exactly.
            (a / 2f64.powi(self.min_exponent() - m as i32)) as u8
        } else {
            let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            let frac = ((a.to_bits() >> (52 - m)) & ((1 << m) - 1)) as u8;
            (((e + self.bias) as u8) << m) | frac
        };
        sign | magnitude
    }

    /// The value of fp8 bits `b`.
    pub fn decode(self, b: u8) -> f64 {
        let m = self.mantissa;
        let exp_mask: i32 = 0x7f >> m;
        let e = (b >> m) as i32 & exp_mask;
        let frac = (b & ((1 << m) - 1)) as f64;
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let magnitude = match self.specials {
            Specials::Ieee if e == exp_mask => {
                if frac == 0.0 {
                    f64::INFINITY
                } else {
                    return f64::NAN.copysign(sign);
                }
            }
            Specials::AllOnesNan if b & 0x7f == 0x7f => return f64::NAN.copysign(sign),
            Specials::NegativeZeroNan if b == 0x80 => return f64::NAN,
            _ if e == 0 => frac * 2f64.powi(self.min_exponent() - m as i32),
            _ => (1.0 + frac / (1 << m) as f64) * 2f64.powi(e - self.bias),
        };
        sign * magnitude
    }
}

macro_rules! host_type {
    ($(#[$doc:meta])* $name:ident, $format:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            /// The format's layout.
            pub const FORMAT: Format = $format;
            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> Self {
                $name(bits)
            }
            /// The bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// `v` rounded once ([`Format::round`]: nearest even, saturating).
            pub fn from_f64(v: f64) -> Self {
                $name(Self::FORMAT.encode(v))
            }
            /// `v` rounded once ([`Format::round`]: nearest even, saturating).
            pub fn from_f32(v: f32) -> Self {
                Self::from_f64(v as f64)
            }
            /// The value, exactly.
            pub fn to_f64(self) -> f64 {
                Self::FORMAT.decode(self.0)
            }
            /// The value, exactly.
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f64(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f64(), f)
            }
        }
    };
}

host_type!(
    /// An fp8 E4M3 value on the host ([`crate::ScalarType::F8E4M3`]), for buffers and
    /// scalar arguments.
    F8E4M3,
    E4M3
);
host_type!(
    /// An fp8 E5M2 value on the host ([`crate::ScalarType::F8E5M2`]), for buffers and
    /// scalar arguments.
    F8E5M2,
    E5M2
);

host_type!(
    /// A `float8e4b15` value on the host ([`crate::ScalarType::F8E4M3B15`]), for buffers
    /// and scalar arguments.
    F8E4M3B15,
    E4M3B15
);
host_type!(
    /// An `e4m3fnuz` value on the host ([`crate::ScalarType::F8E4M3Fnuz`]), for buffers and
    /// scalar arguments.
    F8E4M3Fnuz,
    E4M3FNUZ
);
host_type!(
    /// An `e5m2fnuz` value on the host ([`crate::ScalarType::F8E5M2Fnuz`]), for buffers and
    /// scalar arguments.
    F8E5M2Fnuz,
    E5M2FNUZ
);

/// The layout of fp8 type `s`, `None` for other types.
pub const fn format_of(s: crate::ScalarType) -> Option<Format> {
    match s {
        crate::ScalarType::F8E4M3 => Some(E4M3),
        crate::ScalarType::F8E5M2 => Some(E5M2),
        crate::ScalarType::F8E4M3B15 => Some(E4M3B15),
        crate::ScalarType::F8E4M3Fnuz => Some(E4M3FNUZ),
        crate::ScalarType::F8E5M2Fnuz => Some(E5M2FNUZ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pattern decodes to a value that encodes back to it (NaNs to the quiet one),
    /// and is already rounded.
    #[test]
    fn every_pattern_round_trips() {
        for f in [E4M3, E5M2, E4M3B15, E4M3FNUZ, E5M2FNUZ] {
            for b in 0..=255u8 {
                let v = f.decode(b);
                if v.is_nan() {
                    assert_eq!(f.encode(v) & 0x80, b & 0x80);
                    continue;
                }
                assert_eq!(f.round(v), v, "{f:?} {b:#04x}");
                assert_eq!(f.encode(v), b, "{f:?} {b:#04x} = {v}");
            }
        }
    }

    #[test]
    fn limits_and_ties() {
        assert_eq!(E4M3.decode(0x7e), 448.0);
        assert_eq!(E4M3.decode(0x01), 2f64.powi(-9));
        assert_eq!(E5M2.decode(0x7b), 57344.0);
        assert_eq!(E5M2.decode(0x7c), f64::INFINITY);
        assert_eq!(E5M2.decode(0x01), 2f64.powi(-16));
        // Saturation, infinities included.
        assert_eq!(E4M3.round(1e9), 448.0);
        assert_eq!(E4M3.round(f64::NEG_INFINITY), -448.0);
        assert_eq!(E4M3.round(470.0), 448.0);
        assert_eq!(E5M2.round(1e9), 57344.0);
        assert_eq!(E5M2.round(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(E5M2.encode(f64::INFINITY), 0x7c);
        // Ties to even: 1.0625 lies halfway between 1 and 1.125.
        assert_eq!(E4M3.round(1.0625), 1.0);
        assert_eq!(E4M3.round(1.1875), 1.25);
        assert_eq!(E4M3.round(1.0625 + 1e-12), 1.125);
        // Subnormal ties: half the smallest step rounds to zero, 1.5 steps to 2.
        assert_eq!(E4M3.round(2f64.powi(-10)), 0.0);
        assert_eq!(E4M3.round(3.0 * 2f64.powi(-10)), 2f64.powi(-8));
        assert!(E5M2.round(-1e-30).is_sign_negative());
    }

    /// Triton's three other formats: their ranges, their one NaN or none, and no negative
    /// zero in the `fnuz` ones.
    #[test]
    fn b15_and_fnuz_limits() {
        assert_eq!(E4M3B15.decode(0x7f), 1.875);
        assert_eq!(E4M3B15.decode(0x70), 0.5);
        assert_eq!(E4M3B15.decode(0x78), 1.0);
        assert_eq!(E4M3B15.decode(0x01), 2f64.powi(-17));
        assert_eq!(E4M3B15.round(1e9), 1.875);
        assert_eq!(E4M3B15.round(f64::NEG_INFINITY), -1.875);
        assert_eq!(E4M3B15.encode(f64::NAN), 0x00);
        assert_eq!(E4M3B15.encode(-0.0), 0x80);
        // Every E4M3B15 pattern is the f16 with its bits shifted into place.
        for b in 0..=255u8 {
            let h = ((b as u16 & 0x80) << 8) | ((b as u16 & 0x7f) << 7);
            assert_eq!(E4M3B15.decode(b), half::f16::from_bits(h).to_f64(), "{b:#04x}");
        }
        assert_eq!(E4M3FNUZ.decode(0x7f), 240.0);
        assert_eq!(E4M3FNUZ.decode(0xff), -240.0);
        assert_eq!(E4M3FNUZ.decode(0x08), 2f64.powi(-7));
        assert_eq!(E4M3FNUZ.decode(0x01), 2f64.powi(-10));
        assert!(E4M3FNUZ.decode(0x80).is_nan());
        assert_eq!(E4M3FNUZ.encode(f64::NAN), 0x80);
        assert_eq!(E4M3FNUZ.encode(-f64::NAN), 0x80);
        assert_eq!(E4M3FNUZ.encode(-0.0), 0x00);
        assert_eq!(E4M3FNUZ.encode(-1e-30), 0x00);
        assert!(E4M3FNUZ.round(-1e-30).is_sign_positive());
        assert_eq!(E4M3FNUZ.round(f64::INFINITY), 240.0);
        assert_eq!(E5M2FNUZ.decode(0x7f), 57344.0);
        assert_eq!(E5M2FNUZ.decode(0x01), 2f64.powi(-17));
        assert!(E5M2FNUZ.decode(0x80).is_nan());
        assert_eq!(E5M2FNUZ.encode(f64::NEG_INFINITY), 0xff);
        assert_eq!(E5M2FNUZ.encode(-0.0), 0x00);
    }
}
