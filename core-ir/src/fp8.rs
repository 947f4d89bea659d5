//! The fp8 formats, E4M3 and E5M2 (the OCP 8-bit formats, Triton's `float8e4nv` and
//! `float8e5`): their rounding, their bits, and the host types that hold them.
//!
//! rutile computes on fp8 values in f32 and rounds each result once to the fp8 type, to
//! nearest even, **saturating**: a finite value beyond the largest finite one becomes that
//! largest value with its sign, as NVIDIA's conversion does (`cvt.rn.satfinite`, the only
//! fp8 conversion PTX has, and Triton's on sm_89 and newer). An infinity stays infinite in
//! E5M2, which has them, and saturates in E4M3, which has none; NaN stays NaN. The
//! interpreter, PTX and SPIR-V agree on every value. One rounding in f32 and one to fp8 is the correctly rounded fp8 of a sum,
//! product, quotient or square root (24 bits are more than twice fp8's 4, plus two).
//!
//! The host types are `u8` newtypes written here rather than taken from a crate: the one
//! candidate (`float8`) has no saturating conversion and gives E4M3's largest value as 416.

use std::fmt;

/// The layout of an fp8 format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Format {
    /// Stored mantissa bits.
    pub mantissa: u32,
    /// Exponent bias.
    pub bias: i32,
    /// The largest finite value.
    pub max: f64,
    /// Whether the all-ones exponent is infinity and NaN (E5M2, as IEEE) rather than
    /// ordinary values with one NaN pattern (E4M3's `S.1111.111`).
    pub ieee_specials: bool,
}

/// E4M3: bias 7, 3 mantissa bits, largest 448, no infinities.
pub const E4M3: Format = Format {
    mantissa: 3,
    bias: 7,
    max: 448.0,
    ieee_specials: false,
};

/// E5M2: bias 15 (f16's), 2 mantissa bits, largest 57344.
pub const E5M2: Format = Format {
    mantissa: 2,
    bias: 15,
    max: 57344.0,
    ieee_specials: true,
};

impl Format {
    /// The exponent of the smallest normal value (`1 - bias`).
    pub const fn min_exponent(self) -> i32 {
        1 - self.bias
    }

    /// `v` rounded to this format (nearest, ties to even; finite values beyond the largest
    /// finite one saturated to it; infinities kept where the format has them, saturated
    /// where not; NaN kept), as an f64.
    pub fn round(self, v: f64) -> f64 {
        if v.is_nan() || (v.is_infinite() && self.ieee_specials) {
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
        r.copysign(v)
    }

    /// The bits of `v`, rounded first as [`Format::round`] does. NaN is the quiet pattern
    /// with `v`'s sign (`S.1111.111` for E4M3, `S.11111.10` for E5M2).
    pub fn encode(self, v: f64) -> u8 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        if v.is_nan() {
            return sign | if self.ieee_specials { 0x7e } else { 0x7f };
        }
        let a = self.round(v).abs();
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
        let magnitude = if self.ieee_specials && e == exp_mask {
            if frac == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if !self.ieee_specials && b & 0x7f == 0x7f {
            f64::NAN
        } else if e == 0 {
            frac * 2f64.powi(self.min_exponent() - m as i32)
        } else {
            (1.0 + frac / (1 << m) as f64) * 2f64.powi(e - self.bias)
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
            /// `v` rounded once (nearest even, saturating, NaN kept).
            pub fn from_f64(v: f64) -> Self {
                $name(Self::FORMAT.encode(v))
            }
            /// `v` rounded once (nearest even, saturating, NaN kept).
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

/// The layout of fp8 type `s`, `None` for other types.
pub fn format_of(s: crate::ScalarType) -> Option<Format> {
    match s {
        crate::ScalarType::F8E4M3 => Some(E4M3),
        crate::ScalarType::F8E5M2 => Some(E5M2),
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
        for f in [E4M3, E5M2] {
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
}
