//! PTX registers: one register class per scalar type, one PTX register per virtual register,
//! and fresh temporaries for multi-instruction sequences.
//!
//! | IR types                        | class | PTX declaration |
//! |---------------------------------|-------|-----------------|
//! | `i1`                            | `%p`  | `.pred`         |
//! | `i8 i16 i32 u8 u16 u32`         | `%r`  | `.b32`          |
//! | `i64 u64`                       | `%rd` | `.b64`          |
//! | `f16 bf16 f8e4m3 f8e5m2`        | `%h`  | `.b16`          |
//! | `f32`                           | `%f`  | `.f32`          |
//! | `f64`                           | `%fd` | `.f64`          |
//!
//! Integers narrower than 32 bits live in 32-bit registers, always normalized: sign-extended
//! for `i8`/`i16`, zero-extended for `u8`/`u16` (every instruction sequence that can leave the
//! range re-normalizes), so 32-bit compares, divisions and shifts on them give the narrow
//! type's results. An fp8 value is the low byte of a 16-bit register, its high byte zero.

use rutile_ir::thread::{Reg, ThreadKernel};
use rutile_ir::ScalarType;

/// A PTX register class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Pred,
    H,
    R,
    Rd,
    F,
    Fd,
}

impl Class {
    const ALL: [Class; 6] = [Class::Pred, Class::H, Class::R, Class::Rd, Class::F, Class::Fd];

    pub(crate) fn of(ty: ScalarType) -> Class {
        use ScalarType::*;
        match ty {
            Bool => Class::Pred,
            I8 | I16 | I32 | U8 | U16 | U32 => Class::R,
            I64 | U64 => Class::Rd,
            F16 | BF16 | F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz => Class::H,
            F32 => Class::F,
            F64 => Class::Fd,
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%p",
            Class::H => "%h",
            Class::R => "%r",
            Class::Rd => "%rd",
            Class::F => "%f",
            Class::Fd => "%fd",
        }
    }
    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::H => ".b16",
            Class::R => ".b32",
            Class::Rd => ".b64",
            Class::F => ".f32",
            Class::Fd => ".f64",
        }
    }
    fn index(self) -> usize {
        Class::ALL.iter().position(|&c| c == self).unwrap()
    }
    /// The untyped width suffix for `mov`, `selp` and bitwise instructions.
    pub(crate) fn bits(self) -> &'static str {
        match self {
            Class::Pred => "pred",
            Class::H => "b16",
            Class::R | Class::F => "b32",
            Class::Rd | Class::Fd => "b64",
        }
    }
}

/// The registers of one kernel: virtual registers first, then temporaries.
pub(crate) struct RegFile {
    counts: [u32; 6],
    map: Vec<(Class, u32)>,
}

impl RegFile {
    pub(crate) fn new(k: &ThreadKernel) -> RegFile {
        let mut counts = [0u32; 6];
        let map = k
            .regs
            .iter()
            .map(|(_, d)| {
                let c = Class::of(d.ty);
                let n = counts[c.index()];
                counts[c.index()] += 1;
                (c, n)
            })
            .collect();
        RegFile { counts, map }
    }
    /// The PTX register of virtual register `r`.
    pub(crate) fn name(&self, r: Reg) -> String {
        let (c, n) = self.map[r.index()];
        format!("{}{n}", c.prefix())
    }
    /// A fresh temporary of class `c`.
    pub(crate) fn temp(&mut self, c: Class) -> String {
        let n = self.counts[c.index()];
        self.counts[c.index()] += 1;
        format!("{}{n}", c.prefix())
    }
    /// `.reg` lines for every class in use.
    pub(crate) fn declarations(&self) -> String {
        let mut s = String::new();
        for c in Class::ALL {
            let n = self.counts[c.index()];
            if n > 0 {
                s += &format!("\t.reg {} {}<{n}>;\n", c.decl(), c.prefix());
            }
        }
        s
    }
}

/// The arithmetic type suffix of an integer type (narrow types use their 32-bit form).
pub(crate) fn int_ty(ty: ScalarType) -> &'static str {
    use ScalarType::*;
    match ty {
        I8 | I16 | I32 => "s32",
        U8 | U16 | U32 | Bool => "u32",
        I64 => "s64",
        U64 => "u64",
        F16 | BF16 | F32 | F64 => unreachable!("int_ty of a float"),
        _ => unreachable!("int_ty of fp8"),
    }
}

/// The type suffix of a memory access or parameter of `ty` (booleans are bytes).
pub(crate) fn mem_ty(ty: ScalarType) -> &'static str {
    use ScalarType::*;
    match ty {
        Bool | U8 | F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz => "u8",
        I8 => "s8",
        I16 => "s16",
        U16 => "u16",
        I32 => "s32",
        U32 => "u32",
        I64 => "s64",
        U64 => "u64",
        F16 | BF16 => "b16",
        F32 => "f32",
        F64 => "f64",
    }
}

/// `0fXXXXXXXX`: the exact bits of an f32 constant.
pub(crate) fn f32_lit(x: f32) -> String {
    format!("0f{:08X}", x.to_bits())
}

/// `0dXXXXXXXXXXXXXXXX`: the exact bits of an f64 constant.
pub(crate) fn f64_lit(x: f64) -> String {
    format!("0d{:016X}", x.to_bits())
}

/// Whether `name` is a valid PTX identifier (kernel names become one).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The bits of `x` rounded to nearest (ties to even) in the binary format with `exp_bits`
/// exponent and `man_bits` mantissa bits (f16: 5, 10; bf16: 8, 7; f32: 8, 23). NaNs become
/// the quiet NaN of that sign. Rounds once, straight from the f64 bits.
pub(crate) fn round_f64_to_bits(x: f64, exp_bits: u32, man_bits: u32) -> u64 {
    let sign = (x.to_bits() >> 63) << (exp_bits + man_bits);
    let max_field = (1u64 << exp_bits) - 1;
    if x.is_nan() {
        return sign | (max_field << man_bits) | (1 << (man_bits - 1));
    }
    if x.is_infinite() {
        return sign | (max_field << man_bits);
    }
    if x == 0.0 {
        return sign;
    }
    let b = x.abs().to_bits();
    let field = ((b >> 52) & 0x7ff) as i32;
    // |x| = mant * 2^e2.
    let (mant, e2) = if field == 0 {
        (b & ((1 << 52) - 1), -1074)
    } else {
        ((b & ((1 << 52) - 1)) | (1 << 52), field - 1075)
    };
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let log2 = 63 - mant.leading_zeros() as i32 + e2;
    let big_e = log2.max(1 - bias);
    // The target's quantum at this magnitude is 2^(big_e - man_bits).
    let shift = big_e - man_bits as i32 - e2;
    let r = if shift <= 0 {
        mant << -shift
    } else if shift >= 64 {
        0
    } else {
        let q = mant >> shift;
        let rem = mant & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    let (r, big_e) = if r == 1 << (man_bits + 1) {
        (r >> 1, big_e + 1)
    } else {
        (r, big_e)
    };
    if r < 1 << man_bits {
        // Subnormal (or zero after rounding).
        return sign | r;
    }
    let e = (big_e + bias) as u64;
    if e >= max_field {
        return sign | (max_field << man_bits);
    }
    sign | (e << man_bits) | (r & ((1 << man_bits) - 1))
}

/// The f16 bits nearest to `x`.
pub(crate) fn f16_bits(x: f64) -> u16 {
    round_f64_to_bits(x, 5, 10) as u16
}

/// The bf16 bits nearest to `x`.
pub(crate) fn bf16_bits(x: f64) -> u16 {
    round_f64_to_bits(x, 8, 7) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_matches_f32_casts() {
        // A simple LCG over many magnitudes, plus edge cases.
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            f64::MIN_POSITIVE,
            1e-45,
            1.4e-45,
            7e-46,
            3.4028235e38,
            3.4028236e38,
            1e39,
        ];
        for _ in 0..200_000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            values.push(f64::from_bits(s >> 1 | (s & 1) << 63));
            // Values near f32's precision, so that ties and sticky bits occur.
            let f = f32::from_bits((s >> 32) as u32) as f64;
            values.push(f + f * (((s & 0xff) as f64) - 128.0) * 2f64.powi(-32));
        }
        for x in values {
            let want = (x as f32).to_bits();
            let got = round_f64_to_bits(x, 8, 23) as u32;
            if x.is_nan() {
                assert!(f32::from_bits(got).is_nan());
            } else {
                assert_eq!(got, want, "{x:e}");
            }
        }
    }

    #[test]
    fn f16_and_bf16_literals() {
        assert_eq!(f16_bits(1.0), 0x3C00);
        assert_eq!(f16_bits(65504.0), 0x7BFF);
        assert_eq!(f16_bits(65520.0), 0x7C00);
        assert_eq!(f16_bits(-2.0f64.powi(-24)), 0x8001);
        assert_eq!(f16_bits(2.0f64.powi(-25)), 0x0000);
        assert_eq!(f16_bits(2.0f64.powi(-25) * 1.0000001), 0x0001);
        assert_eq!(bf16_bits(1.0), 0x3F80);
        assert_eq!(bf16_bits(-0.0), 0x8000);
        assert_eq!(bf16_bits(f64::INFINITY), 0x7F80);
        // 1 + 2^-8 is a tie: to even (1.0); a hair above rounds up, even in the low f64 bits.
        assert_eq!(bf16_bits(1.0 + 2f64.powi(-8)), 0x3F80);
        assert_eq!(bf16_bits(1.0 + 2f64.powi(-8) + 2f64.powi(-50)), 0x3F81);
        assert_eq!(f16_bits(1.0 + 2f64.powi(-11) + 2f64.powi(-50)), 0x3C01);
        assert!(bf16_bits(f64::NAN) & 0x7FFF > 0x7F80);
    }
}
