//! Instruction selection for scalar expressions: constants, parameters, special registers,
//! integer and float arithmetic, comparisons, `select` and `fma` (casts are in
//! [`crate::cast`], transcendental functions in [`crate::math`], shuffles in
//! [`crate::shuffle`]).
//!
//! # Semantics
//!
//! These match the block IR's definitions (`rutile_ir::ir`) and the CPU interpreter:
//!
//! - **Integers** wrap. Types narrower than 32 bits are computed in 32-bit registers and
//!   re-normalized (sign- or zero-extended) after every operation that can leave the range.
//! - **Division and remainder** truncate (C semantics, `div`/`rem` `.s32`/`.u32`/`.s64`/`.u64`).
//!   A zero divisor gives 0 (PTX leaves it unspecified, so the result is selected);
//!   `MIN / -1` wraps to `MIN` and `MIN % -1` is 0. `cdiv` is `(a + b - 1) / b` in the type's
//!   wrapping arithmetic, then divided as `div`.
//! - **Shifts** read the amount as unsigned: an amount at or above the width (negative amounts
//!   included) gives 0, or the sign fill for `shr` of signed types. PTX's `shl`/`shr` clamp
//!   32-bit amounts to the width already; 64-bit amounts are clamped with `min.u64` first.
//! - **Float `+ - * /`** are IEEE with round-to-nearest-even: `add.rn`, `sub.rn`, `mul.rn`,
//!   `div.rn`. The explicit `.rn` keeps `ptxas` from contracting a multiply and an add into an
//!   `fma`. Subnormals are kept (no `.ftz`), except in `exp2`'s results (`math.rs`).
//! - **`div_full`** (division without IEEE rounding, asked for with `fdiv(.., false)`) is
//!   `div.full.f32`, as Triton's `/`: within 2 ulp over the whole range, and without
//!   `div.rn.f32`'s slow path for hard operands, which costs registers (at 2 warps the
//!   fused softmax at 1024 columns needs 40 with `div.rn`, 32 with `div.full`). f64 uses
//!   `div.rn.f64`; f16 and bf16 divide in f32 and round once (below).
//! - **f16 and bf16** `+ - *` use the type's own instructions (`add.rn.f16`; bf16's on
//!   sm_90, `fma.rn.bf16` forms on sm_80); other operations widen the values to f32
//!   (exactly), compute in f32 and round once back (`cvt.rn.f16.f32`, `cvt.rn.bf16.f32`).
//!   Both give the correctly rounded result, as the interpreter does (f32 has more than
//!   twice the precision plus two bits, so its one extra rounding is innocuous). `fma` uses
//!   `fma.rn.f16`/`fma.rn.bf16`, a single rounding. Rounding to bf16 needs sm_80;
//!   `neg`/`abs` are sign-bit operations and work everywhere.
//! - **`minimum`/`maximum` of floats** return NaN when either operand is NaN and order -0.0
//!   below +0.0: `min.NaN`/`max.NaN` on sm_80+ (f32, f16, bf16); elsewhere, and for f64
//!   (PTX has no `min.NaN.f64`), `min`/`max` with explicit NaN and signed-zero fix-ups.
//!   On booleans they are `and`/`or`.
//! - **`rem` of floats** is C's `fmod`, exact: the dividend is reduced by the divisor scaled
//!   by powers of two (a short loop; each subtraction is exact).
//! - **Comparisons** of floats are ordered (false when either is NaN) except `ne`, which is
//!   unordered (`setp.neu`), as in C. Integers compare signed or unsigned by type; booleans
//!   as 0/1.
//! - **`fma`** is `fma.rn` (one rounding).

use crate::cast;
use crate::emit::{Emitter, Res};
use crate::math::{self, Fk};
use crate::names::{bf16_bits, f16_bits, f32_lit, f64_lit, int_ty, mem_ty, Class};
use crate::shuffle;
use rutile_ir::fp8::Specials;
use rutile_ir::ir::{BinaryOp, CmpOp, Literal, RoundedOp, Rounding, UnaryOp};
use rutile_ir::thread::{Expr, Reg, Special};
use rutile_ir::ScalarType::{self, *};

pub(crate) fn set(e: &mut Emitter, dst: Reg, expr: &Expr) -> Res {
    let t = e.ty(dst);
    let d = e.r(dst);
    match expr {
        Expr::Const(l) => constant(e, &d, t, *l),
        Expr::Param(i) => {
            let name = format!("{}_param_{i}", e.k.name);
            e.ins(format!("ld.param.{} {d}, [{name}]", mem_ty(t)));
            Ok(())
        }
        Expr::Special(s) => special(e, &d, *s),
        Expr::Copy(a) => {
            let a = e.r(*a);
            mov(e, &d, t, &a);
            Ok(())
        }
        Expr::Unary(op, a) => {
            let a = e.r(*a);
            unary(e, &d, t, *op, &a)
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (e.r(*a), e.r(*b));
            binary(e, &d, t, *op, &a, &b)
        }
        Expr::Compare(op, a, b) => {
            let at = e.ty(*a);
            let (a, b) = (e.r(*a), e.r(*b));
            compare(e, &d, at, *op, &a, &b)
        }
        Expr::Select(c, a, b) => {
            let (c, a, b) = (e.r(*c), e.r(*a), e.r(*b));
            select(e, &d, t, &c, &a, &b);
            Ok(())
        }
        Expr::Fma(a, b, c) => {
            let (a, b, c) = (e.r(*a), e.r(*b), e.r(*c));
            fma(e, &d, t, &a, &b, &c)
        }
        Expr::BytePerm(a, b, s) => {
            // `prmt` in its default mode; each nibble's top bit would replicate a byte's
            // sign rather than pick it, so the selector keeps three bits a nibble.
            let (a, b, s) = (e.r(*a), e.r(*b), e.r(*s));
            let picks = e.tmp(Class::R);
            e.ins(format!("and.b32 {picks}, {s}, 0x7777"));
            e.ins(format!("prmt.b32 {d}, {a}, {b}, {picks}"));
            Ok(())
        }
        Expr::Rounded(op, rounding, args) => {
            let from = e.ty(args[0]);
            let args: Vec<String> = args.iter().map(|a| e.r(*a)).collect();
            rounded(e, &d, t, from, *op, *rounding, &args)
        }
        Expr::Cast(a) => {
            let st = e.ty(*a);
            let a = e.r(*a);
            cast::cast(e, &d, t, &a, st)
        }
        Expr::Bitcast(a) => {
            let st = e.ty(*a);
            let a = e.r(*a);
            cast::bitcast(e, &d, t, &a, st)
        }
        Expr::ShuffleXor { value, mask } => {
            let v = e.r(*value);
            shuffle::shuffle(e, &d, t, &v, "bfly", &mask.to_string());
            Ok(())
        }
        Expr::ShuffleIdx { value, lane } => {
            let (v, l) = (e.r(*value), e.r(*lane));
            shuffle::shuffle(e, &d, t, &v, "idx", &l);
            Ok(())
        }
    }
}

/// `d = a` for registers of type `t`.
pub(crate) fn mov(e: &mut Emitter, d: &str, t: ScalarType, a: &str) {
    if d != a {
        e.ins(format!("mov.{} {d}, {a}", Class::of(t).bits()));
    }
}

/// Re-normalizes an integer narrower than 32 bits held in 32-bit register `r`.
pub(crate) fn normalize(e: &mut Emitter, r: &str, t: ScalarType) {
    match t {
        I8 => e.ins(format!("cvt.s32.s8 {r}, {r}")),
        I16 => e.ins(format!("cvt.s32.s16 {r}, {r}")),
        U8 => e.ins(format!("and.b32 {r}, {r}, 255")),
        U16 => e.ins(format!("and.b32 {r}, {r}, 65535")),
        _ => {}
    }
}

/// An integer literal of type `t` as PTX writes it (normalized to the type).
pub(crate) fn int_lit(t: ScalarType, v: i64) -> String {
    let v = match t {
        I8 => v as i8 as i64,
        I16 => v as i16 as i64,
        I32 => v as i32 as i64,
        U8 => v as u8 as i64,
        U16 => v as u16 as i64,
        U32 => v as u32 as i64,
        _ => v,
    };
    if (t == U64 && v < 0) || v == i64::MIN {
        format!("0x{:016X}", v as u64)
    } else {
        v.to_string()
    }
}

fn constant(e: &mut Emitter, d: &str, t: ScalarType, l: Literal) -> Res {
    let text = match (t, l) {
        (Bool, Literal::Bool(b)) => format!("mov.pred {d}, {}", b as u8),
        (t, Literal::Int(v)) if t.is_int() => format!("mov.{} {d}, {}", Class::of(t).bits(), int_lit(t, v)),
        (F32, Literal::Float(x)) => format!("mov.f32 {d}, {}", f32_lit(x as f32)),
        (F64, Literal::Float(x)) => format!("mov.f64 {d}, {}", f64_lit(x)),
        (F16, Literal::Float(x)) => format!("mov.b16 {d}, 0x{:04X}", f16_bits(x)),
        (BF16, Literal::Float(x)) => format!("mov.b16 {d}, 0x{:04X}", bf16_bits(x)),
        (t, Literal::Float(x)) if t.is_fp8() => {
            let format = rutile_ir::fp8::format_of(t).expect("an fp8 type");
            format!("mov.b16 {d}, 0x{:04X}", format.encode(x))
        }
        _ => return Err(format!("constant {l} cannot be {t}")),
    };
    e.ins(text);
    Ok(())
}

fn special(e: &mut Emitter, d: &str, s: Special) -> Res {
    let axis = |a: u8| match a {
        0 => Ok("x"),
        1 => Ok("y"),
        2 => Ok("z"),
        _ => Err(format!("grid axis {a} does not exist (0, 1 or 2)")),
    };
    let src = match s {
        Special::ThreadId => "%tid.x".to_string(),
        Special::ProgramId(a) => format!("%ctaid.{}", axis(a)?),
        Special::NumPrograms(a) => format!("%nctaid.{}", axis(a)?),
    };
    e.ins(format!("mov.u32 {d}, {src}"));
    Ok(())
}

pub(crate) fn unary(e: &mut Emitter, d: &str, t: ScalarType, op: UnaryOp, a: &str) -> Res {
    let undefined = || Err(format!("`{}` of {t} is not defined", op.name()));
    if t == Bool {
        return match op {
            UnaryOp::Not => {
                e.ins(format!("not.pred {d}, {a}"));
                Ok(())
            }
            _ => undefined(),
        };
    }
    if t.is_int() {
        let s = int_ty(t);
        match op {
            UnaryOp::Neg => e.ins(format!("neg.s{} {d}, {a}", if t.bits() == 64 { 64 } else { 32 })),
            UnaryOp::Abs if t.is_signed_int() => e.ins(format!("abs.{s} {d}, {a}")),
            UnaryOp::Abs => mov(e, d, t, a),
            UnaryOp::Not => e.ins(format!("not.{} {d}, {a}", Class::of(t).bits())),
            UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs => bit_op(e, d, t, op, a),
            _ => return undefined(),
        }
        normalize(e, d, t);
        return Ok(());
    }
    match (t, op) {
        (_, UnaryOp::Not) => undefined(),
        (F16 | BF16, UnaryOp::Neg) => {
            e.ins(format!("xor.b16 {d}, {a}, 0x8000"));
            Ok(())
        }
        (F16 | BF16, UnaryOp::Abs) => {
            e.ins(format!("and.b16 {d}, {a}, 0x7FFF"));
            Ok(())
        }
        (t, UnaryOp::Neg | UnaryOp::Abs) if t.is_fp8() => {
            fp8_sign(e, d, t, op, a);
            Ok(())
        }
        (t, _) if t.is_fp8() || matches!(t, F16 | BF16) => {
            let x = cast::widen(e, a, t);
            let r = math::unary(e, Fk::F32, op, &x)?;
            cast::narrow(e, d, &r, t)
        }
        _ => {
            let fk = Fk::of(t);
            let r = math::unary(e, fk, op, a)?;
            mov(e, d, t, &r);
            Ok(())
        }
    }
}

/// `popc`, `clz`, `brev` or `ffs` of integer `a` of `t` into `d` (the caller normalizes a
/// narrow result). PTX counts, reverses and finds bits of 32 and 64 bits; an 8- or 16-bit
/// integer, held in 32 bits and extended from its width, has its bits masked first where
/// the extension would count (`popc`, `clz`), and its reversal shifted down to its width.
/// `ffs` is the position of the lowest set bit (`x & -x`, which extension leaves alone)
/// plus one, `bfind`'s "none" (all ones) becoming 0.
fn bit_op(e: &mut Emitter, d: &str, t: ScalarType, op: UnaryOp, a: &str) {
    let wide = t.bits() == 64;
    let b = if wide { "b64" } else { "b32" };
    let narrow = 32 - t.bits().min(32);
    let masked = |e: &mut Emitter| match narrow {
        0 => a.to_string(),
        _ => {
            let m = e.tmp(Class::R);
            e.ins(format!("and.b32 {m}, {a}, {}", (1u64 << t.bits()) - 1));
            m
        }
    };
    // The counts are 32-bit in PTX; a 64-bit result takes them widened.
    let count = |e: &mut Emitter, ins: &str, x: &str| match wide {
        false => e.ins(format!("{ins} {d}, {x}")),
        true => {
            let c = e.tmp(Class::R);
            e.ins(format!("{ins} {c}, {x}"));
            e.ins(format!("cvt.u64.u32 {d}, {c}"));
        }
    };
    match op {
        UnaryOp::Popc => {
            let x = masked(e);
            count(e, &format!("popc.{b}"), &x);
        }
        UnaryOp::Clz => {
            let x = masked(e);
            count(e, &format!("clz.{b}"), &x);
            if narrow > 0 {
                e.ins(format!("sub.u32 {d}, {d}, {narrow}"));
            }
        }
        UnaryOp::Brev => {
            e.ins(format!("brev.{b} {d}, {a}"));
            if narrow > 0 {
                e.ins(format!("shr.u32 {d}, {d}, {narrow}"));
            }
        }
        UnaryOp::Ffs => {
            let c = if wide { Class::Rd } else { Class::R };
            let (neg, low) = (e.tmp(c), e.tmp(c));
            e.ins(format!("neg.s{} {neg}, {a}", if wide { 64 } else { 32 }));
            e.ins(format!("and.{b} {low}, {a}, {neg}"));
            let at = e.tmp(Class::R);
            e.ins(format!("bfind.u{} {at}, {low}", if wide { 64 } else { 32 }));
            e.ins(format!("add.u32 {at}, {at}, 1"));
            match wide {
                false => e.ins(format!("mov.b32 {d}, {at}")),
                true => e.ins(format!("cvt.u64.u32 {d}, {at}")),
            }
        }
        _ => unreachable!("not a bit op"),
    }
}

pub(crate) fn binary(e: &mut Emitter, d: &str, t: ScalarType, op: BinaryOp, a: &str, b: &str) -> Res {
    let undefined = || Err(format!("`{}` of {t} is not defined", op.name()));
    if t == Bool {
        let i = match op {
            BinaryOp::And | BinaryOp::Min => "and",
            BinaryOp::Or | BinaryOp::Max => "or",
            BinaryOp::Xor => "xor",
            _ => return undefined(),
        };
        e.ins(format!("{i}.pred {d}, {a}, {b}"));
        return Ok(());
    }
    if t.is_int() {
        return int_binary(e, d, t, op, a, b);
    }
    if op.integral_only() {
        return undefined();
    }
    match t {
        F32 | F64 => {
            let f = Fk::of(t).ty();
            match op {
                BinaryOp::Add => e.ins(format!("add.rn.{f} {d}, {a}, {b}")),
                BinaryOp::Sub => e.ins(format!("sub.rn.{f} {d}, {a}, {b}")),
                BinaryOp::Mul => e.ins(format!("mul.rn.{f} {d}, {a}, {b}")),
                BinaryOp::Div => e.ins(format!("div.rn.{f} {d}, {a}, {b}")),
                BinaryOp::DivFull if t == F32 => e.ins(format!("div.full.f32 {d}, {a}, {b}")),
                // PTX has no `div.full.f64`: the correctly rounded quotient is within bounds.
                BinaryOp::DivFull => e.ins(format!("div.rn.f64 {d}, {a}, {b}")),
                BinaryOp::Rem => {
                    let r = math::fmod(e, Fk::of(t), a, b);
                    mov(e, d, t, &r);
                }
                BinaryOp::Min | BinaryOp::Max => {
                    let r = math::minmax(e, Fk::of(t), op == BinaryOp::Max, a, b);
                    mov(e, d, t, &r);
                }
                BinaryOp::Pow if t == F32 => {
                    let r = math::pow_f32(e, a, b);
                    mov(e, d, t, &r);
                }
                BinaryOp::Pow => return Err("f64 `pow` is not supported by the PTX backend yet".into()),
                _ => return undefined(),
            }
            Ok(())
        }
        _ => {
            // f16 / bf16 / fp8.
            if matches!(op, BinaryOp::Min | BinaryOp::Max) {
                let i = if op == BinaryOp::Min { "min" } else { "max" };
                let native = match t {
                    F16 => Some("f16"),
                    BF16 => Some("bf16"),
                    _ => None,
                };
                if let Some(f) = native.filter(|_| e.target.has_sm80()) {
                    e.ins(format!("{i}.NaN.{f} {d}, {a}, {b}"));
                    return Ok(());
                }
                // The chosen operand, exactly.
                let (x, y) = (cast::widen(e, a, t), cast::widen(e, b, t));
                let r = math::minmax(e, Fk::F32, op == BinaryOp::Max, &x, &y);
                cast::narrow_exact(e, d, &r, t);
                return Ok(());
            }
            if half_arithmetic(e, d, t, op, a, b) {
                return Ok(());
            }
            let (x, y) = (cast::widen(e, a, t), cast::widen(e, b, t));
            let r = e.tmp(Class::F);
            binary(e, &r, F32, op, &x, &y)?;
            cast::narrow(e, d, &r, t)
        }
    }
}

/// `a op b` of f16 or bf16 by the type's own instruction where the target has one (`+ - *`:
/// f16 everywhere, bf16 on sm_90; on sm_80 bf16 as `fma.rn.bf16` with 1 or -0 as the
/// missing operand), one rounding as the f32 computation gives: one instruction where the
/// widened form is three to five (the two widenings, the f32 operation, the rounding back).
/// Returns false where the operation must go through f32.
fn half_arithmetic(e: &mut Emitter, d: &str, t: ScalarType, op: BinaryOp, a: &str, b: &str) -> bool {
    let name = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        _ => return false,
    };
    match t {
        F16 => e.ins(format!("{name}.rn.f16 {d}, {a}, {b}")),
        BF16 if e.target.has_sm90() => e.ins(format!("{name}.rn.bf16 {d}, {a}, {b}")),
        BF16 if e.target.has_sm80() => {
            // `a * b + (-0)` keeps the product's zero signs; `a * 1 + b` and `b * -1 + a`
            // round the sum or difference once, with IEEE's signs of zero sums.
            let c = e.tmp(Class::H);
            let (bits, x, y, z) = match op {
                BinaryOp::Mul => (0x8000, a, b, c.as_str()),
                BinaryOp::Add => (0x3F80, a, c.as_str(), b),
                _ => (0xBF80, b, c.as_str(), a),
            };
            e.ins(format!("mov.b16 {c}, 0x{bits:04X}"));
            e.ins(format!("fma.rn.bf16 {d}, {x}, {y}, {z}"));
        }
        _ => return false,
    }
    true
}

fn int_binary(e: &mut Emitter, d: &str, t: ScalarType, op: BinaryOp, a: &str, b: &str) -> Res {
    let s = int_ty(t);
    let w = Class::of(t).bits();
    let wide = t.bits() == 64;
    match op {
        BinaryOp::Add => e.ins(format!("add.{s} {d}, {a}, {b}")),
        BinaryOp::Sub => e.ins(format!("sub.{s} {d}, {a}, {b}")),
        BinaryOp::Mul => e.ins(format!("mul.lo.{s} {d}, {a}, {b}")),
        BinaryOp::Div | BinaryOp::Rem => divide(e, d, t, op == BinaryOp::Rem, a, b),
        BinaryOp::CeilDiv => {
            let n = e.tmp(Class::of(t));
            e.ins(format!("add.{s} {n}, {a}, {b}"));
            e.ins(format!("sub.{s} {n}, {n}, 1"));
            normalize(e, &n, t);
            divide(e, d, t, false, &n, b);
        }
        BinaryOp::And => e.ins(format!("and.{w} {d}, {a}, {b}")),
        BinaryOp::Or => e.ins(format!("or.{w} {d}, {a}, {b}")),
        BinaryOp::Xor => e.ins(format!("xor.{w} {d}, {a}, {b}")),
        BinaryOp::Shl | BinaryOp::Shr => {
            let amount = if wide {
                let c = e.tmp(Class::Rd);
                let n = e.tmp(Class::R);
                e.ins(format!("min.u64 {c}, {b}, 64"));
                e.ins(format!("cvt.u32.u64 {n}, {c}"));
                n
            } else {
                b.to_string()
            };
            let i = match (op, t.is_signed_int()) {
                (BinaryOp::Shl, _) => format!("shl.{w}"),
                (_, true) => format!("shr.s{}", if wide { 64 } else { 32 }),
                (_, false) => format!("shr.u{}", if wide { 64 } else { 32 }),
            };
            e.ins(format!("{i} {d}, {a}, {amount}"));
        }
        BinaryOp::Min => e.ins(format!("min.{s} {d}, {a}, {b}")),
        BinaryOp::Max => e.ins(format!("max.{s} {d}, {a}, {b}")),
        BinaryOp::UMulHi if matches!(t.bits(), 32 | 64) => {
            e.ins(format!("mul.hi.u{} {d}, {a}, {b}", t.bits()));
        }
        BinaryOp::UMulHi | BinaryOp::DivFull | BinaryOp::Pow => {
            return Err(format!("`{}` of {t} is not defined", op.name()))
        }
    }
    normalize(e, d, t);
    Ok(())
}

/// `d = a / b` or `a % b`, 0 where `b` is 0.
fn divide(e: &mut Emitter, d: &str, t: ScalarType, rem: bool, a: &str, b: &str) {
    let s = int_ty(t);
    let z = e.tmp(Class::Pred);
    let q = e.tmp(Class::of(t));
    e.ins(format!("setp.eq.{s} {z}, {b}, 0"));
    e.ins(format!("{}.{s} {q}, {a}, {b}", if rem { "rem" } else { "div" }));
    e.ins(format!("selp.{} {d}, 0, {q}, {z}", Class::of(t).bits()));
}

pub(crate) fn compare(e: &mut Emitter, d: &str, t: ScalarType, op: CmpOp, a: &str, b: &str) -> Res {
    let c = match op {
        CmpOp::Eq => "eq",
        CmpOp::Ne => "ne",
        CmpOp::Lt => "lt",
        CmpOp::Le => "le",
        CmpOp::Gt => "gt",
        CmpOp::Ge => "ge",
    };
    match t {
        Bool => {
            let (x, y) = (e.tmp(Class::R), e.tmp(Class::R));
            e.ins(format!("selp.u32 {x}, 1, 0, {a}"));
            e.ins(format!("selp.u32 {y}, 1, 0, {b}"));
            e.ins(format!("setp.{c}.u32 {d}, {x}, {y}"));
        }
        t if t.is_int() => e.ins(format!("setp.{c}.{} {d}, {a}, {b}", int_ty(t))),
        F32 | F64 => {
            let c = if op == CmpOp::Ne { "neu" } else { c };
            e.ins(format!("setp.{c}.{} {d}, {a}, {b}", Fk::of(t).ty()));
        }
        _ => {
            let (x, y) = (cast::widen(e, a, t), cast::widen(e, b, t));
            return compare(e, d, F32, op, &x, &y);
        }
    }
    Ok(())
}

pub(crate) fn select(e: &mut Emitter, d: &str, t: ScalarType, c: &str, a: &str, b: &str) {
    if t == Bool {
        let (x, y, z) = (e.tmp(Class::R), e.tmp(Class::R), e.tmp(Class::R));
        e.ins(format!("selp.u32 {x}, 1, 0, {a}"));
        e.ins(format!("selp.u32 {y}, 1, 0, {b}"));
        e.ins(format!("selp.b32 {z}, {x}, {y}, {c}"));
        e.ins(format!("setp.ne.u32 {d}, {z}, 0"));
    } else {
        e.ins(format!("selp.{} {d}, {a}, {b}, {c}", Class::of(t).bits()));
    }
}

fn fma(e: &mut Emitter, d: &str, t: ScalarType, a: &str, b: &str, c: &str) -> Res {
    let f = match t {
        F32 => "f32",
        F64 => "f64",
        F16 => "f16",
        BF16 if e.target.has_sm80() => "bf16",
        BF16 => return Err("bf16 `fma` needs sm_80 or newer (fma.rn.bf16)".into()),
        _ if t.is_fp8() => return fma_fp8(e, d, t, [a, b, c]),
        _ => return Err(format!("`fma` of {t} is not defined")),
    };
    e.ins(format!("fma.rn.{f} {d}, {a}, {b}, {c}"));
    Ok(())
}

/// `d = op(args)` rounded once toward `rounding`: PTX's own rounding modifiers, which also
/// keep `ptxas` from contracting or rearranging the instruction.
fn rounded(
    e: &mut Emitter,
    d: &str,
    t: ScalarType,
    from: ScalarType,
    op: RoundedOp,
    rounding: Rounding,
    args: &[String],
) -> Res {
    let mode = match rounding {
        Rounding::NearestEven => "rn",
        Rounding::TowardZero => "rz",
        Rounding::Down => "rm",
        Rounding::Up => "rp",
    };
    if op == RoundedOp::Convert && matches!(t, F16 | BF16) && matches!(from, F32 | F64) {
        return cast::to_half_rounded(e, d, t, &args[0], from, mode);
    }
    let f = match t {
        F32 => "f32",
        F64 => "f64",
        _ => {
            return Err(format!(
                "`{}` of {t} is not defined (f32 and f64 only)",
                op.name(rounding)
            ))
        }
    };
    if op == RoundedOp::Convert {
        let src = match from {
            I32 => "s32",
            U32 => "u32",
            I64 => "s64",
            U64 => "u64",
            F64 => "f64",
            _ => return Err(format!("`{}` from {from} is not defined", op.name(rounding))),
        };
        e.ins(format!("cvt.{mode}.{f}.{src} {d}, {}", args[0]));
        return Ok(());
    }
    let name = match op {
        RoundedOp::Add => "add",
        RoundedOp::Sub => "sub",
        RoundedOp::Mul => "mul",
        RoundedOp::Div => "div",
        RoundedOp::Rcp => "rcp",
        RoundedOp::Sqrt => "sqrt",
        RoundedOp::Fma => "fma",
        RoundedOp::Convert => unreachable!("converted above"),
    };
    e.ins(format!("{name}.{mode}.{f} {d}, {}", args.join(", ")));
    Ok(())
}

/// `d` = `-a` or `|a|` of fp8 type `t`, on the sign bit. In the `fnuz` formats that bit
/// makes zero NaN (`0x80`), so zero and NaN keep theirs.
fn fp8_sign(e: &mut Emitter, d: &str, t: ScalarType, op: UnaryOp, a: &str) {
    let fnuz = rutile_ir::fp8::format_of(t).is_some_and(|f| f.specials == Specials::NegativeZeroNan);
    let (flip, mask) = match op {
        UnaryOp::Neg => ("xor.b16", "0x0080"),
        _ => ("and.b16", "0x007F"),
    };
    if !fnuz {
        e.ins(format!("{flip} {d}, {a}, {mask}"));
        return;
    }
    let (magnitude, flipped) = (e.tmp(Class::H), e.tmp(Class::H));
    let changes = e.tmp(Class::Pred);
    e.ins(format!("and.b16 {magnitude}, {a}, 0x007F"));
    e.ins(format!("setp.ne.u16 {changes}, {magnitude}, 0"));
    e.ins(format!("{flip} {flipped}, {a}, {mask}"));
    e.ins(format!("selp.b16 {d}, {flipped}, {a}, {changes}"));
}

/// `d = fma(a, b, c)` of fp8 registers, rounded once: in f64, where the product is exact
/// and the sum is too unless the addend is so much larger that the product cannot move its
/// fp8 rounding; then rounded as a cast from f64 is.
fn fma_fp8(e: &mut Emitter, d: &str, t: ScalarType, [a, b, c]: [&str; 3]) -> Res {
    let wide: Vec<String> = [a, b, c]
        .iter()
        .map(|x| {
            let f = cast::widen(e, x, t);
            let w = e.tmp(Class::Fd);
            e.ins(format!("cvt.f64.f32 {w}, {f}"));
            w
        })
        .collect();
    let r = e.tmp(Class::Fd);
    e.ins(format!("fma.rn.f64 {r}, {}, {}, {}", wide[0], wide[1], wide[2]));
    cast::narrow_f64(e, d, &r, t)
}
