//! fp8 conversions from integer and f32 instructions: for the formats `cvt` has no name for
//! (`float8e4b15`, the `fnuz` ones) on every target, and for E4M3 and E5M2 on targets
//! without sm_89's `cvt` to and from `e4m3x2`/`e5m2x2` (sm_70 to sm_86, or any target that
//! asks for them with [`crate::PtxTarget::native_fp8_conversions`] off, to test and time
//! them beside the native ones). They give the values `rutile_ir::fp8` defines, bit for
//! bit: widening is exact, narrowing rounds to nearest even and saturates, E5M2 keeps
//! infinities, NaN becomes the format's NaN (its sign kept where it has one of each) or +0
//! where it has none, and the `fnuz` formats never make negative zero.

use crate::emit::Emitter;
use crate::names::Class;
use rutile_ir::fp8::{format_of, Format, Specials};
use rutile_ir::ScalarType;

fn format(t: ScalarType) -> Format {
    format_of(t).expect("an fp8 type")
}

/// A predicate register set where fp8 register `a` (of `format`, in the low byte of a
/// `bits`-wide register; `magnitude` its low 7 bits) is NaN; `None` for E5M2 (widened
/// through f16, which keeps its NaNs) and the formats without one.
fn nan_test(e: &mut Emitter, a: &str, magnitude: &str, format: Format, bits: u32) -> Option<String> {
    let p = e.tmp(Class::Pred);
    match format.specials {
        Specials::AllOnesNan => e.ins(format!("setp.eq.u{bits} {p}, {magnitude}, 127")),
        Specials::NegativeZeroNan => {
            let byte = e.tmp(if bits == 16 { Class::H } else { Class::R });
            e.ins(format!("and.b{bits} {byte}, {a}, 255"));
            e.ins(format!("setp.eq.u{bits} {p}, {byte}, 128"));
        }
        Specials::Ieee | Specials::AllFinite => return None,
    }
    Some(p)
}

/// An f32 register holding the exact value of fp8 register `a` (type `t`, the low byte of
/// 16 bits).
pub(crate) fn widen(e: &mut Emitter, a: &str, t: ScalarType) -> String {
    let format = format(t);
    let f = e.tmp(Class::F);
    if format.specials == Specials::Ieee {
        // E5M2 is the top byte of an f16 (bias 15, IEEE infinities and NaNs).
        let h = e.tmp(Class::H);
        e.ins(format!("shl.b16 {h}, {a}, 8"));
        e.ins(format!("cvt.f32.f16 {f}, {h}"));
        return f;
    }
    // The magnitude's 7 bits put at the top of an f32's exponent and mantissa read as a
    // value 2^(127 - bias) too small, normal or subnormal alike, so one exact multiply (no
    // flush: `mul` keeps subnormal inputs) scales it.
    let [r, magnitude, sign, bits] = [(); 4].map(|_| e.tmp(Class::R));
    e.ins(format!("cvt.u32.u16 {r}, {a}"));
    e.ins(format!("and.b32 {magnitude}, {r}, 127"));
    e.ins(format!("and.b32 {sign}, {r}, 128"));
    e.ins(format!("shl.b32 {sign}, {sign}, 24"));
    e.ins(format!("shl.b32 {bits}, {magnitude}, {}", 23 - format.mantissa));
    e.ins(format!("or.b32 {bits}, {bits}, {sign}"));
    e.ins(format!("mov.b32 {f}, {bits}"));
    let scale = bits_of(2f64.powi(127 - format.bias));
    e.ins(format!("mul.rn.f32 {f}, {f}, 0f{scale:08X}"));
    if let Some(is_nan) = nan_test(e, &r, &magnitude, format, 32) {
        // E4M3's NaN keeps its sign; the `fnuz` formats' one NaN is positive.
        let nan = e.tmp(Class::R);
        match format.specials {
            Specials::AllOnesNan => e.ins(format!("or.b32 {nan}, {sign}, 2147483647")),
            _ => e.ins(format!("mov.b32 {nan}, 2147483647")),
        }
        e.ins(format!("mov.b32 {bits}, {f}"));
        e.ins(format!("selp.b32 {bits}, {nan}, {bits}, {is_nan}"));
        e.ins(format!("mov.b32 {f}, {bits}"));
    }
    f
}

/// `d` (f16) = the exact value of fp8 register `a` (type `t`): one shift for E5M2, the
/// top byte of an f16; a 3-bit mantissa's magnitude put where an f16's exponent and
/// mantissa start, read 2^(15 - bias) too small and scaled by one exact f16 multiply
/// (subnormals kept; none for `float8e4b15`, whose bias is f16's); `e5m2fnuz`, whose
/// largest exponent field is an f16's infinity, through f32.
pub(crate) fn to_f16(e: &mut Emitter, d: &str, a: &str, t: ScalarType) {
    let format = format(t);
    if format.specials == Specials::Ieee {
        e.ins(format!("shl.b16 {d}, {a}, 8"));
        return;
    }
    if format.mantissa != 3 {
        let f = widen(e, a, t);
        e.ins(format!("cvt.rn.f16.f32 {d}, {f}"));
        return;
    }
    let [magnitude, sign, bits, nan, scale] = [(); 5].map(|_| e.tmp(Class::H));
    e.ins(format!("and.b16 {magnitude}, {a}, 127"));
    e.ins(format!("and.b16 {sign}, {a}, 128"));
    e.ins(format!("shl.b16 {sign}, {sign}, 8"));
    e.ins(format!("shl.b16 {bits}, {magnitude}, 7"));
    e.ins(format!("or.b16 {bits}, {bits}, {sign}"));
    if format.bias != 15 {
        // (f16 operands take no immediates.)
        let factor = crate::names::f16_bits(2f64.powi(15 - format.bias));
        e.ins(format!("mov.b16 {scale}, 0x{factor:04X}"));
        e.ins(format!("mul.rn.f16 {bits}, {bits}, {scale}"));
    }
    let Some(is_nan) = nan_test(e, a, &magnitude, format, 16) else {
        e.ins(format!("mov.b16 {d}, {bits}"));
        return;
    };
    match format.specials {
        Specials::AllOnesNan => e.ins(format!("or.b16 {nan}, {sign}, 32767")),
        _ => e.ins(format!("mov.b16 {nan}, 32767")),
    }
    e.ins(format!("selp.b16 {d}, {nan}, {bits}, {is_nan}"));
}

/// The bits of an f32, as PTX writes a 32-bit constant.
fn bits_of(v: f64) -> u32 {
    (v as f32).to_bits()
}

/// `d` (fp8 `t`) = f32 register `x` rounded to nearest even, saturating (an infinity too,
/// but in E5M2, which keeps them).
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
    if format.specials == Specials::NegativeZeroNan {
        // No negative zero: a result that rounds to zero is +0.
        let zero = e.tmp(Class::Pred);
        e.ins(format!("setp.eq.u32 {zero}, {code}, 0"));
        e.ins(format!("selp.b32 {sign}, 0, {sign}, {zero}"));
    }
    // NaN: the format's NaN, with its sign where it has one of each sign (the `fnuz`
    // formats' is `0x80`); +0 where it has none.
    let nan_code = format.nan_bits(0).unwrap_or(0);
    e.ins(format!("setp.gt.u32 {is_nan}, {magnitude}, 2139095040"));
    e.ins(format!("selp.b32 {code}, {nan_code}, {code}, {is_nan}"));
    if matches!(format.specials, Specials::NegativeZeroNan | Specials::AllFinite) {
        e.ins(format!("selp.b32 {sign}, 0, {sign}, {is_nan}"));
    }
    if format.specials == Specials::Ieee {
        let inf = e.tmp(Class::Pred);
        e.ins(format!("setp.eq.u32 {inf}, {magnitude}, 2139095040"));
        e.ins(format!("selp.b32 {code}, 124, {code}, {inf}"));
    }
    e.ins(format!("or.b32 {code}, {code}, {sign}"));
    e.ins(format!("cvt.u16.u32 {d}, {code}"));
}
