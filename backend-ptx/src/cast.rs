//! Numeric conversions (`cast`) and bit reinterpretation (`bitcast`).
//!
//! # Semantics (the block IR's `cast`)
//!
//! - float → float: `cvt.rn` when narrowing (one rounding, to nearest even), exact `cvt` when
//!   widening. bf16 widens by shifting its bits into the top of an f32 (exact, any sm);
//!   rounding to bf16 is `cvt.rn.bf16.f32` (sm_80+). f64 → bf16 first rounds to f32 *to odd*
//!   (`cvt.rz` plus a sticky bit), so that the second rounding is the correct one.
//! - fp8: E4M3 and E5M2 from sm_89 widen exactly through f16 (`cvt.rn.f16x2.e4m3x2`/
//!   `e5m2x2`) and round from f32 with `cvt.rn.satfinite.e4m3x2.f32` (a finite value beyond
//!   the largest finite one saturated to it, as `rutile_ir::fp8` defines), an infinity set
//!   to E5M2's own after it; before sm_89, and for the other fp8 formats everywhere, the
//!   same values come from integer instructions (`fp8_bits.rs`). f64 sources round to odd
//!   in f32 first, as for bf16.
//! - int → float: `cvt.rn` (one rounding). int → bf16 of 32/64-bit integers goes through f32
//!   rounded to odd, for the same reason.
//! - float → int: truncation toward zero, saturating at the type's range, NaN → 0. `cvt.rzi`
//!   truncates and saturates for 32- and 64-bit results; 8- and 16-bit results convert to 32
//!   bits and clamp with `min`/`max`. NaN is selected to 0 explicitly: the hardware gives 0
//!   only for f32 to 32-bit integers (f64 sources and 64-bit results give `0x80...0`,
//!   measured on sm_90).
//! - int → int: wraps (two's complement truncation, or sign/zero extension by the source's
//!   signedness).
//! - number → bool: `x != 0`; for floats that is the unordered `setp.neu`, so NaN → true
//!   (f16/bf16 test the bits below the sign).
//! - bool → number: 1 or 0 (`selp`).
//! - bitcast: the same bits (`mov`), narrow integers re-normalized.

use crate::emit::{Emitter, Res};
use crate::expr::{mov, normalize};
use crate::names::{int_ty, Class};
use rutile_ir::fp8::Specials;
use rutile_ir::ScalarType::{self, *};

/// Whether `cvt` converts fp8 type `t` on this target: E4M3 and E5M2 from sm_89.
fn native_fp8(e: &Emitter, t: ScalarType) -> bool {
    t.is_ocp_fp8() && e.target.has_native_fp8()
}

/// The PTX name of fp8 type `t`'s pairs (E4M3 or E5M2).
fn fp8_pair(t: ScalarType) -> &'static str {
    if t == F8E4M3 {
        "e4m3x2"
    } else {
        "e5m2x2"
    }
}

/// An f32 register holding the exact value of `a`, a register of type `t` (fp8, f16, bf16,
/// f32).
pub(crate) fn widen(e: &mut Emitter, a: &str, t: ScalarType) -> String {
    match t {
        _ if t.is_fp8() && !native_fp8(e, t) => crate::fp8_bits::widen(e, a, t),
        _ if t.is_fp8() => {
            // The high byte is zero: the pair's high half is +0.
            let (pair, lo, hi) = (e.tmp(Class::R), e.tmp(Class::H), e.tmp(Class::H));
            let f = e.tmp(Class::F);
            e.ins(format!("cvt.rn.f16x2.{} {pair}, {a}", fp8_pair(t)));
            e.ins(format!("mov.b32 {{{lo}, {hi}}}, {pair}"));
            e.ins(format!("cvt.f32.f16 {f}, {lo}"));
            f
        }
        F32 => a.to_string(),
        F16 => {
            let f = e.tmp(Class::F);
            e.ins(format!("cvt.f32.f16 {f}, {a}"));
            f
        }
        BF16 => {
            let r = e.tmp(Class::R);
            let f = e.tmp(Class::F);
            e.ins(format!("cvt.u32.u16 {r}, {a}"));
            e.ins(format!("shl.b32 {r}, {r}, 16"));
            e.ins(format!("mov.b32 {f}, {r}"));
            f
        }
        _ => unreachable!("widen of {t}"),
    }
}

/// `d` (of type `t`: fp8, f16, bf16 or f32) = f32 register `x` rounded to nearest even
/// (fp8 saturating).
pub(crate) fn narrow(e: &mut Emitter, d: &str, x: &str, t: ScalarType) -> Res {
    match t {
        _ if t.is_fp8() => narrow_fp8(e, d, x, t),
        F32 => mov(e, d, F32, x),
        F16 => e.ins(format!("cvt.rn.f16.f32 {d}, {x}")),
        BF16 if e.target.has_sm80() => e.ins(format!("cvt.rn.bf16.f32 {d}, {x}")),
        BF16 => return Err("rounding to bf16 needs sm_80 or newer (cvt.rn.bf16.f32)".into()),
        _ => unreachable!("narrow to {t}"),
    }
    Ok(())
}

/// `d` (fp8 `t`) = f32 register `x` rounded to nearest even, saturating; E5M2 keeps
/// infinities, which `satfinite` would not.
fn narrow_fp8(e: &mut Emitter, d: &str, x: &str, t: ScalarType) {
    if !native_fp8(e, t) {
        return crate::fp8_bits::narrow(e, d, x, t);
    }
    // The pair's high byte is +0's.
    e.ins(format!("cvt.rn.satfinite.{}.f32 {d}, 0f00000000, {x}", fp8_pair(t)));
    if t == F8E5M2 {
        let (inf, bits, h) = (e.tmp(Class::Pred), e.tmp(Class::R), e.tmp(Class::H));
        e.ins(format!("testp.infinite.f32 {inf}, {x}"));
        e.ins(format!("mov.b32 {bits}, {x}"));
        e.ins(format!("shr.u32 {bits}, {bits}, 24"));
        e.ins(format!("and.b32 {bits}, {bits}, 128"));
        e.ins(format!("or.b32 {bits}, {bits}, 124"));
        e.ins(format!("cvt.u16.u32 {h}, {bits}"));
        e.ins(format!("selp.b16 {d}, {h}, {d}, {inf}"));
    }
}

/// `d` = f32 register `x`, whose value is representable in `t` (fp8, f16 or bf16): works on
/// every target that has `t` (bf16 takes the high half of the bits).
pub(crate) fn narrow_exact(e: &mut Emitter, d: &str, x: &str, t: ScalarType) {
    if t.is_fp8() {
        // Exact: nothing to round, an infinity kept as `narrow` keeps it.
        narrow_fp8(e, d, x, t);
    } else if t == BF16 {
        let lo = e.tmp(Class::H);
        e.ins(format!("mov.b32 {{{lo}, {d}}}, {x}"));
    } else {
        e.ins(format!("cvt.rn.f16.f32 {d}, {x}"));
    }
}

/// Sets the lowest bit of f32 register `f` where predicate `inexact` holds: after a
/// round-toward-zero conversion this is rounding to odd. Returns the new register.
fn sticky(e: &mut Emitter, f: &str, inexact: &str) -> String {
    let (b, o) = (e.tmp(Class::R), e.tmp(Class::R));
    let r = e.tmp(Class::F);
    e.ins(format!("mov.b32 {b}, {f}"));
    e.ins(format!("or.b32 {o}, {b}, 1"));
    e.ins(format!("selp.b32 {b}, {o}, {b}, {inexact}"));
    e.ins(format!("mov.b32 {r}, {b}"));
    r
}

pub(crate) fn cast(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) -> Res {
    if dt == st {
        mov(e, d, dt, a);
        return Ok(());
    }
    if st == Bool {
        from_bool(e, d, dt, a);
        return Ok(());
    }
    if dt == Bool {
        to_bool(e, d, st, a);
        return Ok(());
    }
    match (st.is_float(), dt.is_float()) {
        (false, false) => int_to_int(e, d, dt, a, st),
        (false, true) => return int_to_float(e, d, dt, a, st),
        (true, false) => float_to_int(e, d, dt, a, st),
        (true, true) => return float_to_float(e, d, dt, a, st),
    }
    Ok(())
}

fn from_bool(e: &mut Emitter, d: &str, dt: ScalarType, p: &str) {
    let (one, zero, ty) = match dt {
        F32 => ("0f3F800000", "0f00000000", "f32"),
        F64 => ("0d3FF0000000000000", "0d0000000000000000", "f64"),
        F16 => ("0x3C00", "0x0000", "b16"),
        BF16 => ("0x3F80", "0x0000", "b16"),
        I64 | U64 => ("1", "0", "u64"),
        _ if dt.is_fp8() => {
            let one = rutile_ir::fp8::format_of(dt).expect("an fp8 type").encode(1.0);
            e.ins(format!("selp.b16 {d}, 0x{one:04X}, 0x0000, {p}"));
            return;
        }
        _ => ("1", "0", "u32"),
    };
    e.ins(format!("selp.{ty} {d}, {one}, {zero}, {p}"));
}

fn to_bool(e: &mut Emitter, d: &str, st: ScalarType, a: &str) {
    match st {
        F32 => e.ins(format!("setp.neu.f32 {d}, {a}, 0f00000000")),
        F64 => e.ins(format!("setp.neu.f64 {d}, {a}, 0d0000000000000000")),
        _ if st.is_fp8() || matches!(st, F16 | BF16) => {
            let m = e.tmp(Class::H);
            // (The `fnuz` formats have no negative zero: their `0x80` is NaN, true.)
            let fnuz = rutile_ir::fp8::format_of(st).is_some_and(|f| f.specials == Specials::NegativeZeroNan);
            let magnitude = if fnuz {
                "0x00FF"
            } else if st.is_fp8() {
                "0x007F"
            } else {
                "0x7FFF"
            };
            e.ins(format!("and.b16 {m}, {a}, {magnitude}"));
            e.ins(format!("setp.ne.b16 {d}, {m}, 0"));
        }
        _ => e.ins(format!("setp.ne.{} {d}, {a}, 0", int_ty(st))),
    }
}

fn int_to_int(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) {
    match (st.bits() == 64, dt.bits() == 64) {
        (false, false) => mov(e, d, dt, a),
        (true, false) => e.ins(format!("cvt.u32.u64 {d}, {a}")),
        (false, true) => {
            let src = if st.is_signed_int() { "s32" } else { "u32" };
            e.ins(format!("cvt.{}.{src} {d}, {a}", int_ty(dt)));
        }
        (true, true) => mov(e, d, dt, a),
    }
    normalize(e, d, dt);
}

fn int_to_float(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) -> Res {
    let s = int_ty(st);
    match dt {
        F32 | F64 | F16 => {
            let f = match dt {
                F32 => "f32",
                F64 => "f64",
                _ => "f16",
            };
            e.ins(format!("cvt.rn.{f}.{s} {d}, {a}"));
            Ok(())
        }
        _ => {
            // bf16 or fp8.
            if dt == BF16 && !e.target.has_sm80() {
                return Err("rounding to bf16 needs sm_80 or newer (cvt.rn.bf16.f32)".into());
            }
            let f = e.tmp(Class::F);
            if st.bits() < 32 {
                // Exact in f32.
                e.ins(format!("cvt.rn.f32.{s} {f}, {a}"));
                return narrow(e, d, &f, dt);
            }
            let back = e.tmp(Class::of(st));
            let inexact = e.tmp(Class::Pred);
            e.ins(format!("cvt.rz.f32.{s} {f}, {a}"));
            e.ins(format!("cvt.rzi.{s}.f32 {back}, {f}"));
            e.ins(format!("setp.ne.{s} {inexact}, {back}, {a}"));
            let odd = sticky(e, &f, &inexact);
            narrow(e, d, &odd, dt)
        }
    }
}

fn float_to_int(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) {
    let (x, f) = match st {
        F64 => (a.to_string(), "f64"),
        F32 => (a.to_string(), "f32"),
        _ => (widen(e, a, st), "f32"),
    };
    // `cvt.rzi` saturates, but NaN gives 0 only for f32 to 32-bit integers (f64 sources and
    // 64-bit results give 0x80...0), so NaN is selected explicitly.
    let t = e.tmp(Class::of(dt));
    let nan = e.tmp(Class::Pred);
    match dt {
        I32 | U32 | I64 | U64 => e.ins(format!("cvt.rzi.{}.{f} {t}, {x}", int_ty(dt))),
        I8 | I16 => {
            let (lo, hi) = if dt == I8 { (-128, 127) } else { (-32768, 32767) };
            e.ins(format!("cvt.rzi.s32.{f} {t}, {x}"));
            e.ins(format!("max.s32 {t}, {t}, {lo}"));
            e.ins(format!("min.s32 {t}, {t}, {hi}"));
        }
        _ => {
            let hi = if dt == U8 { 255 } else { 65535 };
            e.ins(format!("cvt.rzi.u32.{f} {t}, {x}"));
            e.ins(format!("min.u32 {t}, {t}, {hi}"));
        }
    }
    e.ins(format!("setp.nan.{f} {nan}, {x}, {x}"));
    e.ins(format!("selp.{} {d}, 0, {t}, {nan}", Class::of(dt).bits()));
}

fn float_to_float(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) -> Res {
    match (st, dt) {
        (F32, F64) => e.ins(format!("cvt.f64.f32 {d}, {a}")),
        (F64, F32) => e.ins(format!("cvt.rn.f32.f64 {d}, {a}")),
        (F16, F32) => e.ins(format!("cvt.f32.f16 {d}, {a}")),
        // Exact, and what a `dot` of fp8 blocks off fp8 MMAs converts its operands by.
        (_, F16) if st.is_fp8() => fp8_to_f16(e, d, a, st),
        (F16, F64) => e.ins(format!("cvt.f64.f16 {d}, {a}")),
        (F64, F16) => e.ins(format!("cvt.rn.f16.f64 {d}, {a}")),
        (_, F64) if st == BF16 || st.is_fp8() => {
            let w = widen(e, a, st);
            e.ins(format!("cvt.f64.f32 {d}, {w}"));
        }
        (F64, _) if dt == BF16 || dt.is_fp8() => {
            if dt == BF16 && !e.target.has_sm80() {
                return Err("rounding to bf16 needs sm_80 or newer (cvt.rn.bf16.f32)".into());
            }
            return narrow_f64(e, d, a, dt);
        }
        // Among f16, bf16 and f32: widen exactly, round once.
        _ => {
            let w = widen(e, a, st);
            return narrow(e, d, &w, dt);
        }
    }
    Ok(())
}

/// `d` (f16) = the exact value of fp8 register `a` (type `t`): the low half of the pair
/// sm_89's `cvt` widens, or `fp8_bits.rs`'s integer conversion.
fn fp8_to_f16(e: &mut Emitter, d: &str, a: &str, t: ScalarType) {
    if !native_fp8(e, t) {
        return crate::fp8_bits::to_f16(e, d, a, t);
    }
    // The high byte is zero: the pair's high half is +0.
    let (pair, hi) = (e.tmp(Class::R), e.tmp(Class::H));
    e.ins(format!("cvt.rn.f16x2.{} {pair}, {a}", fp8_pair(t)));
    e.ins(format!("mov.b32 {{{d}, {hi}}}, {pair}"));
}

/// `d` (bf16 or fp8) = f64 register `x` rounded once: to odd in f32 first (`cvt.rz` plus
/// a sticky bit), which keeps what the second rounding needs.
pub(crate) fn narrow_f64(e: &mut Emitter, d: &str, x: &str, t: ScalarType) -> Res {
    let odd = f64_to_f32_odd(e, x);
    narrow(e, d, &odd, t)
}

/// An f32 register holding f64 register `x` rounded to odd (`cvt.rz` plus a sticky bit).
fn f64_to_f32_odd(e: &mut Emitter, x: &str) -> String {
    let f = e.tmp(Class::F);
    let back = e.tmp(Class::Fd);
    let inexact = e.tmp(Class::Pred);
    e.ins(format!("cvt.rz.f32.f64 {f}, {x}"));
    e.ins(format!("cvt.f64.f32 {back}, {f}"));
    e.ins(format!("setp.neu.f64 {inexact}, {back}, {x}"));
    sticky(e, &f, &inexact)
}

/// `d` (f16 or bf16) = f32 or f64 register `x` (of `from`) rounded toward `rounding`
/// (`Op::Rounded`'s `Convert`, Triton's `fp_downcast_rounding`). f16: `cvt`'s own rounding
/// modifiers. bf16 (whose `cvt` rounds to nearest or toward zero only): the f32 value (an
/// f64 rounded to odd first, which keeps every direction's answer), its low 16 bits
/// dropped and one unit of the kept ones added where the direction points away from zero
/// and they were not all zero; NaN quieted as `cvt` does.
pub(crate) fn to_half_rounded(e: &mut Emitter, d: &str, t: ScalarType, x: &str, from: ScalarType, mode: &str) -> Res {
    let src = if from == F64 { "f64" } else { "f32" };
    if t == F16 {
        e.ins(format!("cvt.{mode}.f16.{src} {d}, {x}"));
        return Ok(());
    }
    if mode == "rn" {
        return if from == F64 {
            narrow_f64(e, d, x, BF16)
        } else {
            narrow(e, d, x, BF16)
        };
    }
    let f = if from == F64 {
        f64_to_f32_odd(e, x)
    } else {
        x.to_string()
    };
    let [u, magnitude, kept, quiet] = [(); 4].map(|_| e.tmp(Class::R));
    let nan = e.tmp(Class::Pred);
    e.ins(format!("mov.b32 {u}, {f}"));
    e.ins(format!("and.b32 {magnitude}, {u}, 2147483647"));
    e.ins(format!("and.b32 {kept}, {u}, 4294901760"));
    // Away from zero: up for positive values, down for negative ones (toward zero never).
    // Sign and magnitude: one unit more is one step away from zero; past the largest finite
    // value, infinity.
    if mode != "rz" {
        let (low, next) = (e.tmp(Class::R), e.tmp(Class::R));
        let (inexact, away) = (e.tmp(Class::Pred), e.tmp(Class::Pred));
        e.ins(format!("and.b32 {low}, {u}, 65535"));
        e.ins(format!("setp.ne.u32 {inexact}, {low}, 0"));
        let side = if mode == "rp" { "ge" } else { "lt" };
        e.ins(format!("setp.{side}.s32 {away}, {u}, 0"));
        e.ins(format!("and.pred {away}, {away}, {inexact}"));
        e.ins(format!("add.u32 {next}, {kept}, 65536"));
        e.ins(format!("selp.b32 {kept}, {next}, {kept}, {away}"));
    }
    e.ins(format!("setp.gt.u32 {nan}, {magnitude}, 2139095040"));
    e.ins(format!("or.b32 {quiet}, {u}, 4194304"));
    e.ins(format!("and.b32 {quiet}, {quiet}, 4294901760"));
    e.ins(format!("selp.b32 {kept}, {quiet}, {kept}, {nan}"));
    let lo = e.tmp(Class::H);
    e.ins(format!("mov.b32 {{{lo}, {d}}}, {kept}"));
    Ok(())
}

pub(crate) fn bitcast(e: &mut Emitter, d: &str, dt: ScalarType, a: &str, st: ScalarType) -> Res {
    match (Class::of(st), Class::of(dt)) {
        // i8/u8/i16/u16 (32-bit registers) <-> fp8/f16/bf16 (16-bit registers).
        (Class::R, Class::H) => {
            e.ins(format!("cvt.u16.u32 {d}, {a}"));
            if dt.is_fp8() {
                // An i8's sign extension is not the fp8's high byte, which is zero.
                e.ins(format!("and.b16 {d}, {d}, 0x00FF"));
            }
        }
        (Class::H, Class::R) => {
            e.ins(format!("cvt.u32.u16 {d}, {a}"));
            normalize(e, d, dt);
        }
        (sc, dc) if sc.bits() == dc.bits() => {
            e.ins(format!("mov.{} {d}, {a}", dc.bits()));
            normalize(e, d, dt);
        }
        _ => return Err(format!("bitcast from {st} to {dt} changes the width")),
    }
    Ok(())
}
