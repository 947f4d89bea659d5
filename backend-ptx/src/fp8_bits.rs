//! fp8 conversions from integer and f32 instructions, for targets without sm_89's `cvt` to
//! and from `e4m3x2`/`e5m2x2` (sm_70 to sm_86, or any target that asks for them with
//! [`crate::PtxTarget::native_fp8_conversions`] off, to test and time them beside the
//! native ones). They give the values `rutile_ir::fp8` defines, bit for bit: widening is
//! exact, narrowing rounds to nearest even and saturates, E5M2 keeps infinities, NaN keeps
//! its sign with the format's quiet pattern.

use crate::emit::Emitter;
use crate::names::Class;
use rutile_ir::fp8::{format_of, Format};
use rutile_ir::ScalarType::{self, F8E5M2};

/// An f32 register holding the exact value of fp8 register `a` (type `t`, the low byte of
/// 16 bits).
pub(crate) fn widen(e: &mut Emitter, a: &str, t: ScalarType) -> String {
    let f = e.tmp(Class::F);
    if t == F8E5M2 {
        // E5M2 is the top byte of an f16 (bias 15, IEEE infinities and NaNs).
        let h = e.tmp(Class::H);
        e.ins(format!("shl.b16 {h}, {a}, 8"));
        e.ins(format!("cvt.f32.f16 {f}, {h}"));
        return f;
    }
    // E4M3: the magnitude's 7 bits put at the top of an f32's exponent and mantissa read as
    // a value 2^120 too small (2^(127 - 7)), normal or subnormal alike, so one exact
    // multiply (no flush: `mul` keeps subnormal inputs) scales it; `S.1111.111` is NaN.
    let [r, magnitude, sign, bits, nan] = [(); 5].map(|_| e.tmp(Class::R));
    let is_nan = e.tmp(Class::Pred);
    e.ins(format!("cvt.u32.u16 {r}, {a}"));
    e.ins(format!("and.b32 {magnitude}, {r}, 127"));
    e.ins(format!("and.b32 {sign}, {r}, 128"));
    e.ins(format!("shl.b32 {sign}, {sign}, 24"));
    e.ins(format!("shl.b32 {bits}, {magnitude}, 20"));
    e.ins(format!("or.b32 {bits}, {bits}, {sign}"));
    e.ins(format!("mov.b32 {f}, {bits}"));
    e.ins(format!("mul.rn.f32 {f}, {f}, 0f7B800000"));
    e.ins(format!("setp.eq.u32 {is_nan}, {magnitude}, 127"));
    e.ins(format!("or.b32 {nan}, {sign}, 2147483647"));
    e.ins(format!("mov.b32 {bits}, {f}"));
    e.ins(format!("selp.b32 {bits}, {nan}, {bits}, {is_nan}"));
    e.ins(format!("mov.b32 {f}, {bits}"));
    f
}

/// `d` (f16) = the exact value of fp8 register `a` (type `t`): one shift for E5M2, the
/// top byte of an f16; E4M3's magnitude put where an f16's exponent and mantissa start,
/// read 2^8 too small (2^(15 - 7)) and scaled by one exact f16 multiply (subnormals kept).
pub(crate) fn to_f16(e: &mut Emitter, d: &str, a: &str, t: ScalarType) {
    if t == F8E5M2 {
        e.ins(format!("shl.b16 {d}, {a}, 8"));
        return;
    }
    let [magnitude, sign, bits, nan, scale] = [(); 5].map(|_| e.tmp(Class::H));
    let is_nan = e.tmp(Class::Pred);
    e.ins(format!("and.b16 {magnitude}, {a}, 127"));
    e.ins(format!("and.b16 {sign}, {a}, 128"));
    e.ins(format!("shl.b16 {sign}, {sign}, 8"));
    e.ins(format!("shl.b16 {bits}, {magnitude}, 7"));
    e.ins(format!("or.b16 {bits}, {bits}, {sign}"));
    // (f16 operands take no immediates.)
    e.ins(format!("mov.b16 {scale}, 0x5C00"));
    e.ins(format!("mul.rn.f16 {bits}, {bits}, {scale}"));
    e.ins(format!("setp.eq.u16 {is_nan}, {magnitude}, 127"));
    e.ins(format!("or.b16 {nan}, {sign}, 32767"));
    e.ins(format!("selp.b16 {d}, {nan}, {bits}, {is_nan}"));
}

/// The bits of an f32, as PTX writes a 32-bit constant.
fn bits_of(v: f64) -> u32 {
    (v as f32).to_bits()
}

/// `d` (fp8 `t`) = f32 register `x` rounded to nearest even, saturating (an E4M3 infinity
/// too); E5M2 keeps infinities.
pub(crate) fn narrow(e: &mut Emitter, d: &str, x: &str, t: ScalarType) {
    let format = format_of(t).expect("an fp8 type");
    let Format {
        mantissa, bias, max, ..
    } = format;
    // Dropped f32 mantissa bits, and the f32 exponent bias minus the format's, at the
    // position the rounded bits put it.
    let shift = 23 - mantissa;
    let rebias = ((127 - bias) as u32) << mantissa;
    let smallest_normal = bits_of(2f64.powi(format.min_exponent()));
    // Below the smallest normal value the steps are 2^(min_exponent - mantissa) apart.
    let to_steps = bits_of(2f64.powi(mantissa as i32 - format.min_exponent()));
    let nan_pattern = if format.ieee_specials { 0x7e } else { 0x7f };

    let [u, sign, magnitude, c, lsb, normal, steps, code] = [(); 8].map(|_| e.tmp(Class::R));
    let scaled = e.tmp(Class::F);
    let [subnormal, is_nan] = [(); 2].map(|_| e.tmp(Class::Pred));
    e.ins(format!("mov.b32 {u}, {x}"));
    e.ins(format!("shr.u32 {sign}, {u}, 24"));
    e.ins(format!("and.b32 {sign}, {sign}, 128"));
    e.ins(format!("and.b32 {magnitude}, {u}, 2147483647"));
    // Saturate first: every magnitude past the largest finite value (infinity too) becomes
    // it, which rounds to itself.
    e.ins(format!("min.u32 {c}, {magnitude}, {}", bits_of(max)));
    // Normal: round the f32 bits to `mantissa` bits, to nearest even (a carry moves the
    // exponent up, as it should), then rebias.
    e.ins(format!("shr.u32 {lsb}, {c}, {shift}"));
    e.ins(format!("and.b32 {lsb}, {lsb}, 1"));
    e.ins(format!("add.u32 {normal}, {c}, {}", (1u32 << (shift - 1)) - 1));
    e.ins(format!("add.u32 {normal}, {normal}, {lsb}"));
    e.ins(format!("shr.u32 {normal}, {normal}, {shift}"));
    e.ins(format!("sub.u32 {normal}, {normal}, {rebias}"));
    // Subnormal: a whole number of the smallest steps, rounded to nearest even (the
    // scaling by a power of two is exact; one step short of normal rounds up into it).
    e.ins(format!("mov.b32 {scaled}, {c}"));
    e.ins(format!("mul.rn.f32 {scaled}, {scaled}, 0f{to_steps:08X}"));
    e.ins(format!("cvt.rni.u32.f32 {steps}, {scaled}"));
    e.ins(format!("setp.lt.u32 {subnormal}, {c}, {smallest_normal}"));
    e.ins(format!("selp.b32 {code}, {steps}, {normal}, {subnormal}"));
    e.ins(format!("setp.gt.u32 {is_nan}, {magnitude}, 2139095040"));
    e.ins(format!("selp.b32 {code}, {nan_pattern}, {code}, {is_nan}"));
    if format.ieee_specials {
        let inf = e.tmp(Class::Pred);
        e.ins(format!("setp.eq.u32 {inf}, {magnitude}, 2139095040"));
        e.ins(format!("selp.b32 {code}, 124, {code}, {inf}"));
    }
    e.ins(format!("or.b32 {code}, {code}, {sign}"));
    e.ins(format!("cvt.u16.u32 {d}, {code}"));
}
