//! Element-wise ops: unary and binary math, comparisons, `where`, `fma`, casts and bitcasts.
//!
//! Each op matches once on the representation and element type, then runs a tight loop over
//! the elements; results are wrapped (integers) or rounded (floats) to the element type.
//!
//! Choices beyond the op docs in `ir.rs`:
//! - Integer division and remainder by zero give 0 (unspecified on GPUs); `MIN / -1` wraps to
//!   `MIN` and `MIN % -1` is 0. `cdiv` is `(a + b - 1) / b` computed in the type's wrapping
//!   arithmetic, then divided as `div` (so also 0 for a zero divisor).
//! - Shift amounts are read as unsigned: negative amounts are at or above the width.
//! - `minimum`/`maximum` of floats order -0.0 below +0.0 and give a NaN if either operand is
//!   one (its payload is unspecified).
//! - Float `rem` is C's `fmod`, which is exact, so computing it in f64 loses nothing.
//! - Transcendentals (`exp`, `log`, `sin`, `erf`, ...) are computed in f64 and rounded once to
//!   the element type; `rsqrt` is `1 / sqrt(x)` and `sigmoid` is `1 / (1 + exp(-x))`. So are
//!   `tanh` and `pow` (C's `pow`, whose special cases Rust's `powf` follows).
//! - `umulhi` multiplies the operands' bits as unsigned integers of their width.
//! - Comparisons of booleans order false below true; pointers compare only for (in)equality.
//! - `fma` of f32 uses `f32::mul_add`; of f16/bf16, an f64 `mul_add` rounded once to the type,
//!   which is correctly rounded because the f64 result cannot land on a tie that the exact
//!   result misses (the product of two 11-bit significands is exact in f64).

use super::error::{invalid, Fault};
use super::tensor::{
    float_from_bits, float_to_bits, int_to_f64_round_to_odd, round_floats, wrap_int, wrap_ints, Data, Tensor,
};
use crate::ir::{BinaryOp, CmpOp, RoundedOp, Rounding, UnaryOp};
use crate::types::{Elem, ScalarType, Type};

fn map<T: Copy, R>(x: &[T], f: impl Fn(T) -> R) -> Vec<R> {
    x.iter().map(|&a| f(a)).collect()
}

fn zip<T: Copy, R>(x: &[T], y: &[T], f: impl Fn(T, T) -> R) -> Vec<R> {
    x.iter().zip(y).map(|(&a, &b)| f(a, b)).collect()
}

/// IEEE `minimum`: NaN if either is NaN, and -0.0 below +0.0.
#[inline]
pub(crate) fn fmin(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else if b < a {
        b
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a.is_sign_negative() {
        // Equal: only the signs of zeros can differ.
        a
    } else {
        b
    }
}

/// IEEE `maximum`: NaN if either is NaN, and +0.0 above -0.0.
#[inline]
pub(crate) fn fmax(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else if b > a {
        b
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

fn check_same(what: &str, operands: &[&Tensor], ty: Type) -> Result<(), Fault> {
    for (i, t) in operands.iter().enumerate() {
        if t.ty != ty {
            return Err(invalid!("{what} operand {i} has type {}, expected {ty}", t.ty));
        }
    }
    Ok(())
}

pub(crate) fn unary(op: UnaryOp, x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same(op.name(), &[x], ty)?;
    let s = x.scalar_type("the operand")?;
    let data = match &x.data {
        Data::Bool(v) => match op {
            UnaryOp::Not => Data::Bool(map(v, |a| !a)),
            _ => return Err(invalid!("{} is not defined for i1", op.name())),
        },
        Data::Int(v) => {
            let mut out = match op {
                UnaryOp::Neg => map(v, i64::wrapping_neg),
                UnaryOp::Not => map(v, |a| !a),
                UnaryOp::Abs if s.is_unsigned_int() => v.clone(),
                UnaryOp::Abs => map(v, i64::wrapping_abs),
                UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs => {
                    let width = s.bits();
                    map(v, |a| bit_op(op, width, a))
                }
                _ => return Err(invalid!("{} is not defined for {s}", op.name())),
            };
            wrap_ints(s, &mut out);
            Data::Int(out)
        }
        Data::Float(v) => {
            let mut out = match op {
                UnaryOp::Neg => map(v, |a| -a),
                UnaryOp::Not => return Err(invalid!("not is not defined for {s}")),
                UnaryOp::Abs => map(v, f64::abs),
                UnaryOp::Exp => map(v, f64::exp),
                UnaryOp::Exp2 => map(v, f64::exp2),
                UnaryOp::Log => map(v, f64::ln),
                UnaryOp::Log2 => map(v, f64::log2),
                UnaryOp::Sqrt => map(v, f64::sqrt),
                UnaryOp::Rsqrt => map(v, |a| 1.0 / a.sqrt()),
                UnaryOp::Sin => map(v, f64::sin),
                UnaryOp::Cos => map(v, f64::cos),
                UnaryOp::Floor => map(v, f64::floor),
                UnaryOp::Ceil => map(v, f64::ceil),
                UnaryOp::Trunc => map(v, f64::trunc),
                UnaryOp::Rint => map(v, f64::round_ties_even),
                UnaryOp::Erf => map(v, libm::erf),
                UnaryOp::Sigmoid => map(v, |a| 1.0 / (1.0 + (-a).exp())),
                UnaryOp::Tanh => map(v, f64::tanh),
                UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs => {
                    return Err(invalid!("{} is not defined for {s}", op.name()))
                }
            };
            round_floats(s, &mut out);
            Data::Float(out)
        }
        Data::Ptr(_) => unreachable!("scalar_type rejects pointers"),
    };
    Ok(Tensor { ty, data })
}

/// `popc`, `clz`, `brev` or `ffs` of the low `width` bits of `a` (the caller wraps the
/// result to the type, so that a reversed signed value takes its sign from its new top
/// bit).
fn bit_op(op: UnaryOp, width: u32, a: i64) -> i64 {
    let bits = (a as u64) & (u64::MAX >> (64 - width));
    match op {
        UnaryOp::Popc => bits.count_ones() as i64,
        UnaryOp::Clz => (bits.leading_zeros() - (64 - width)) as i64,
        UnaryOp::Brev => (bits.reverse_bits() >> (64 - width)) as i64,
        UnaryOp::Ffs if bits == 0 => 0,
        UnaryOp::Ffs => bits.trailing_zeros() as i64 + 1,
        _ => unreachable!("not a bit op"),
    }
}

pub(crate) fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same(op.name(), &[a, b], ty)?;
    let s = a.scalar_type("an operand")?;
    let data = match (&a.data, &b.data) {
        (Data::Int(x), Data::Int(y)) => Data::Int(int_binary(op, s, x, y)?),
        (Data::Float(x), Data::Float(y)) => Data::Float(float_binary(op, s, x, y)?),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(bool_binary(op, x, y)?),
        _ => unreachable!("operands of one scalar type share a representation"),
    };
    Ok(Tensor { ty, data })
}

fn int_binary(op: BinaryOp, s: ScalarType, x: &[i64], y: &[i64]) -> Result<Vec<i64>, Fault> {
    let unsigned = s.is_unsigned_int();
    let width = s.bits() as u64;
    let mut out = match op {
        BinaryOp::Add => zip(x, y, i64::wrapping_add),
        BinaryOp::Sub => zip(x, y, i64::wrapping_sub),
        BinaryOp::Mul => zip(x, y, i64::wrapping_mul),
        BinaryOp::Div if unsigned => zip(x, y, udiv),
        BinaryOp::Div => zip(x, y, sdiv),
        BinaryOp::Rem if unsigned => zip(x, y, |a, b| if b == 0 { 0 } else { ((a as u64) % (b as u64)) as i64 }),
        BinaryOp::Rem => zip(x, y, |a, b| if b == 0 { 0 } else { a.wrapping_rem(b) }),
        BinaryOp::CeilDiv if unsigned => zip(x, y, |a, b| udiv(wrap_int(s, a.wrapping_add(b).wrapping_sub(1)), b)),
        BinaryOp::CeilDiv => zip(x, y, |a, b| sdiv(wrap_int(s, a.wrapping_add(b).wrapping_sub(1)), b)),
        BinaryOp::And => zip(x, y, |a, b| a & b),
        BinaryOp::Or => zip(x, y, |a, b| a | b),
        BinaryOp::Xor => zip(x, y, |a, b| a ^ b),
        BinaryOp::Shl => zip(x, y, |a, b| if b as u64 >= width { 0 } else { a << b }),
        BinaryOp::Shr if unsigned => zip(
            x,
            y,
            |a, b| if b as u64 >= width { 0 } else { ((a as u64) >> b) as i64 },
        ),
        // Sign-extended values shift arithmetically in i64 as they would in their width.
        BinaryOp::Shr => zip(x, y, |a, b| if b as u64 >= width { a >> 63 } else { a >> b }),
        BinaryOp::Min if unsigned => zip(x, y, |a, b| (a as u64).min(b as u64) as i64),
        BinaryOp::Min => zip(x, y, i64::min),
        BinaryOp::Max if unsigned => zip(x, y, |a, b| (a as u64).max(b as u64) as i64),
        BinaryOp::Max => zip(x, y, i64::max),
        BinaryOp::UMulHi if width == 64 => zip(x, y, |a, b| ((a as u64 as u128 * b as u64 as u128) >> 64) as i64),
        // Narrower values are sign- or zero-extended: their own width's bits are the operands.
        BinaryOp::UMulHi => {
            let mask = (1u64 << width) - 1;
            zip(x, y, |a, b| (((a as u64 & mask) * (b as u64 & mask)) >> width) as i64)
        }
        BinaryOp::DivFull | BinaryOp::Pow => return Err(invalid!("{} is not defined for {s}", op.name())),
    };
    wrap_ints(s, &mut out);
    Ok(out)
}

/// Unsigned division of normalized values (0 for a zero divisor).
#[inline]
fn udiv(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        ((a as u64) / (b as u64)) as i64
    }
}

/// Truncating signed division of sign-extended values (0 for a zero divisor; the caller wraps
/// `MIN / -1`).
#[inline]
fn sdiv(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b)
    }
}

fn float_binary(op: BinaryOp, s: ScalarType, x: &[f64], y: &[f64]) -> Result<Vec<f64>, Fault> {
    let mut out = match op {
        BinaryOp::Add => zip(x, y, |a, b| a + b),
        BinaryOp::Sub => zip(x, y, |a, b| a - b),
        BinaryOp::Mul => zip(x, y, |a, b| a * b),
        // The correctly rounded quotient is one of the results `div_full` allows.
        BinaryOp::Div | BinaryOp::DivFull => zip(x, y, |a, b| a / b),
        BinaryOp::Rem => zip(x, y, |a, b| a % b),
        BinaryOp::Min => zip(x, y, fmin),
        BinaryOp::Max => zip(x, y, fmax),
        // C's `pow` (Rust's `powf` is it), computed in f64 and rounded once to the type.
        BinaryOp::Pow => zip(x, y, f64::powf),
        _ => return Err(invalid!("{} is not defined for {s}", op.name())),
    };
    // Sums, differences, products and quotients of two values of at most 24 significant bits
    // are correctly rounded by computing in f64 and rounding once to the type.
    round_floats(s, &mut out);
    Ok(out)
}

fn bool_binary(op: BinaryOp, x: &[bool], y: &[bool]) -> Result<Vec<bool>, Fault> {
    Ok(match op {
        BinaryOp::And | BinaryOp::Min => zip(x, y, |a, b| a & b),
        BinaryOp::Or | BinaryOp::Max => zip(x, y, |a, b| a | b),
        BinaryOp::Xor => zip(x, y, |a, b| a ^ b),
        _ => return Err(invalid!("{} is not defined for i1", op.name())),
    })
}

pub(crate) fn compare(op: CmpOp, a: &Tensor, b: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same(op.name(), &[b], a.ty)?;
    if ty != a.ty.with_elem(Elem::Scalar(ScalarType::Bool)) {
        return Err(invalid!("{} of {} gives i1 of that shape, not {ty}", op.name(), a.ty));
    }
    fn cmp<T: Copy + PartialOrd>(op: CmpOp, x: &[T], y: &[T]) -> Vec<bool> {
        match op {
            CmpOp::Eq => zip(x, y, |a, b| a == b),
            CmpOp::Ne => zip(x, y, |a, b| a != b),
            CmpOp::Lt => zip(x, y, |a, b| a < b),
            CmpOp::Le => zip(x, y, |a, b| a <= b),
            CmpOp::Gt => zip(x, y, |a, b| a > b),
            CmpOp::Ge => zip(x, y, |a, b| a >= b),
        }
    }
    let out = match (&a.data, &b.data) {
        (Data::Int(x), Data::Int(y)) if a.ty.elem == Elem::Scalar(ScalarType::U64) => {
            let ux = map(x, |v| v as u64);
            let uy = map(y, |v| v as u64);
            cmp(op, &ux, &uy)
        }
        // Other unsigned types are zero-extended, so they compare correctly as i64.
        (Data::Int(x), Data::Int(y)) => cmp(op, x, y),
        // Rust's float comparisons are IEEE's: ordered, except `!=`.
        (Data::Float(x), Data::Float(y)) => cmp(op, x, y),
        (Data::Bool(x), Data::Bool(y)) => cmp(op, x, y),
        // Pointers into one parameter's buffer compare by their offsets; into two, they are
        // refused, as the lowering refuses them: two parameters may be bound to one buffer,
        // and only a device knows how their addresses order.
        (Data::Ptr(x), Data::Ptr(y)) => {
            if let Some((a, b)) = x.iter().zip(y).find(|(a, b)| a.param != b.param) {
                return Err(invalid!(
                    "compares pointers into two parameters ({} and {}); only pointers into one \
                     parameter's buffer compare",
                    a.param,
                    b.param
                ));
            }
            let (ox, oy) = (map(x, |p| p.offset), map(y, |p| p.offset));
            cmp(op, &ox, &oy)
        }
        _ => unreachable!("operands of one type share a representation"),
    };
    Ok(Tensor {
        ty,
        data: Data::Bool(out),
    })
}

pub(crate) fn select(cond: &Tensor, t: &Tensor, f: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same("where", &[t, f], ty)?;
    if cond.ty != ty.with_elem(Elem::Scalar(ScalarType::Bool)) {
        return Err(invalid!(
            "where's condition has type {}, expected i1 of shape {}",
            cond.ty,
            ty.shape
        ));
    }
    let c = cond.bools()?;
    fn pick<T: Copy>(c: &[bool], t: &[T], f: &[T]) -> Vec<T> {
        c.iter()
            .zip(t.iter().zip(f))
            .map(|(&c, (&t, &f))| if c { t } else { f })
            .collect()
    }
    let data = match (&t.data, &f.data) {
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(pick(c, x, y)),
        (Data::Int(x), Data::Int(y)) => Data::Int(pick(c, x, y)),
        (Data::Float(x), Data::Float(y)) => Data::Float(pick(c, x, y)),
        (Data::Ptr(x), Data::Ptr(y)) => Data::Ptr(pick(c, x, y)),
        _ => unreachable!("operands of one type share a representation"),
    };
    Ok(Tensor { ty, data })
}

pub(crate) fn fma(a: &Tensor, b: &Tensor, c: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same("fma", &[a, b, c], ty)?;
    let s = a.scalar_type("an operand")?;
    let (x, y, z) = (a.floats()?, b.floats()?, c.floats()?);
    let it = x.iter().zip(y).zip(z);
    let mut out: Vec<f64> = match s {
        ScalarType::F32 => it
            .map(|((&a, &b), &c)| (a as f32).mul_add(b as f32, c as f32) as f64)
            .collect(),
        ScalarType::F64 => it.map(|((&a, &b), &c)| a.mul_add(b, c)).collect(),
        // f16/bf16: the product is exact in f64, but rounding the sum to f64 and then to the
        // narrow type can round twice (a tiny addend that breaks a tie would be lost);
        // rounding the f64 step to odd makes the final rounding correct.
        _ => it.map(|((&a, &b), &c)| fma_round_to_odd(a, b, c)).collect(),
    };
    round_floats(s, &mut out);
    Ok(Tensor {
        ty,
        data: Data::Float(out),
    })
}

/// Byte `n` of a word's selected bytes: of `x` (bytes 0 to 3) and `y` (4 to 7), byte
/// `(selector >> 4n) & 7`, as [`crate::ir::Op::BytePerm`] says.
pub(crate) fn byte_perm_word(x: u32, y: u32, selector: u32) -> u32 {
    let bytes = (u64::from(y) << 32) | u64::from(x);
    (0..4).fold(0, |r, n| {
        let pick = (selector >> (4 * n)) & 7;
        r | ((((bytes >> (8 * pick)) & 0xFF) as u32) << (8 * n))
    })
}

/// `byte_perm(x, y, selector)` (`Op::BytePerm`), element by element.
pub(crate) fn byte_perm(x: &Tensor, y: &Tensor, selector: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    check_same("byte_perm", &[x, y, selector], ty)?;
    let s = x.scalar_type("an operand")?;
    let it = x.ints()?.iter().zip(y.ints()?).zip(selector.ints()?);
    let out = it
        .map(|((&a, &b), &c)| wrap_int(s, i64::from(byte_perm_word(a as u32, b as u32, c as u32))))
        .collect();
    Ok(Tensor {
        ty,
        data: Data::Int(out),
    })
}

/// `op` of `args` rounded in direction `rounding` (`Op::Rounded`), element by element.
pub(crate) fn rounded(op: RoundedOp, rounding: Rounding, args: &[&Tensor], ty: Type) -> Result<Tensor, Fault> {
    let name = op.name(rounding);
    let s = ty.scalar_type().ok_or_else(|| invalid!("{name} of pointers"))?;
    if op == RoundedOp::Convert {
        let [x] = args else {
            return Err(invalid!("{name} takes one operand, got {}", args.len()));
        };
        let from = x.scalar_type("the operand")?;
        if !RoundedOp::converts(from, s) || x.ty.shape != ty.shape {
            return Err(invalid!("{name} from {} to {ty}", x.ty));
        }
        let out = if from.is_float() {
            x.floats()?
                .iter()
                .map(|&v| super::rounding::convert_float(v, rounding, s))
                .collect()
        } else {
            let unsigned = !from.is_signed_int();
            let wide = |v: i64| {
                if unsigned && from == ScalarType::U32 {
                    v as u32 as i128
                } else if unsigned {
                    v as u64 as i128
                } else {
                    v as i128
                }
            };
            x.ints()?
                .iter()
                .map(|&v| super::rounding::convert_int(wide(v), rounding, s))
                .collect()
        };
        return Ok(Tensor {
            ty,
            data: Data::Float(out),
        });
    }
    check_same(name, args, ty)?;
    if !matches!(s, ScalarType::F32 | ScalarType::F64) || args.len() != op.arity() {
        return Err(invalid!(
            "{name} takes {} f32 or f64 operands, got {} of {ty}",
            op.arity(),
            args.len()
        ));
    }
    let columns = args.iter().map(|t| t.floats()).collect::<Result<Vec<_>, _>>()?;
    let n = columns[0].len();
    let mut element = Vec::with_capacity(args.len());
    let out = (0..n)
        .map(|i| {
            element.clear();
            element.extend(columns.iter().map(|c| c[i]));
            super::rounding::rounded(op, rounding, s, &element)
        })
        .collect();
    Ok(Tensor {
        ty,
        data: Data::Float(out),
    })
}

/// `a * b + c` rounded to odd in f64, for operands whose product is exact in f64.
fn fma_round_to_odd(a: f64, b: f64, c: f64) -> f64 {
    let p = a * b;
    let s = p + c;
    if !s.is_finite() {
        return s;
    }
    // Knuth's two-sum: `err` is exactly (p + c) - s.
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    if err == 0.0 || s.to_bits() & 1 == 1 {
        return s;
    }
    if s == 0.0 {
        return if err > 0.0 {
            f64::from_bits(1)
        } else {
            -f64::from_bits(1)
        };
    }
    // Inexact and even: the odd neighbour on the side of the exact sum.
    let bits = s.to_bits();
    let away_from_zero = (err > 0.0) == (s > 0.0);
    f64::from_bits(if away_from_zero { bits + 1 } else { bits - 1 })
}

pub(crate) fn cast(x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    if x.ty.shape != ty.shape {
        return Err(invalid!("cast changes the shape from {} to {}", x.ty.shape, ty.shape));
    }
    let src = x.scalar_type("a cast's operand")?;
    let dst = ty
        .scalar_type()
        .ok_or_else(|| invalid!("cannot cast to a pointer ({ty})"))?;
    let data = match &x.data {
        Data::Bool(v) => {
            if dst.is_bool() {
                Data::Bool(v.clone())
            } else if dst.is_float() {
                Data::Float(map(v, |b| b as u8 as f64))
            } else {
                Data::Int(map(v, |b| b as i64))
            }
        }
        Data::Int(v) => {
            if dst.is_bool() {
                Data::Bool(map(v, |a| a != 0))
            } else if dst.is_int() {
                let mut out = v.clone();
                wrap_ints(dst, &mut out);
                Data::Int(out)
            } else {
                Data::Float(int_to_float(src.is_unsigned_int(), dst, v))
            }
        }
        Data::Float(v) => {
            if dst.is_bool() {
                // NaN != 0, so NaN is true.
                Data::Bool(map(v, |a| a != 0.0))
            } else if dst.is_float() {
                let mut out = v.clone();
                round_floats(dst, &mut out);
                Data::Float(out)
            } else {
                Data::Int(float_to_int(dst, v))
            }
        }
        Data::Ptr(_) => unreachable!("scalar_type rejects pointers"),
    };
    Ok(Tensor { ty, data })
}

/// Integers to the nearest float of `dst`, rounding once.
fn int_to_float(unsigned: bool, dst: ScalarType, v: &[i64]) -> Vec<f64> {
    match (dst, unsigned) {
        (ScalarType::F64, false) => map(v, |a| a as f64),
        (ScalarType::F64, true) => map(v, |a| a as u64 as f64),
        (ScalarType::F32, false) => map(v, |a| a as f32 as f64),
        (ScalarType::F32, true) => map(v, |a| a as u64 as f32 as f64),
        _ => {
            let mut out = map(v, |a| int_to_f64_round_to_odd(a, unsigned));
            round_floats(dst, &mut out);
            out
        }
    }
}

/// Floats to integers: truncation toward zero, saturating, NaN to 0 (Rust's `as`).
fn float_to_int(dst: ScalarType, v: &[f64]) -> Vec<i64> {
    match dst {
        ScalarType::I8 => map(v, |a| a as i8 as i64),
        ScalarType::I16 => map(v, |a| a as i16 as i64),
        ScalarType::I32 => map(v, |a| a as i32 as i64),
        ScalarType::I64 => map(v, |a| a as i64),
        ScalarType::U8 => map(v, |a| a as u8 as i64),
        ScalarType::U16 => map(v, |a| a as u16 as i64),
        ScalarType::U32 => map(v, |a| a as u32 as i64),
        ScalarType::U64 => map(v, |a| a as u64 as i64),
        _ => unreachable!("float_to_int to an integer type"),
    }
}

pub(crate) fn bitcast(x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    if x.ty.shape != ty.shape {
        return Err(invalid!(
            "bitcast changes the shape from {} to {}",
            x.ty.shape,
            ty.shape
        ));
    }
    let src = x.scalar_type("a bitcast's operand")?;
    let dst = ty
        .scalar_type()
        .ok_or_else(|| invalid!("cannot bitcast to a pointer ({ty})"))?;
    if src.bits() != dst.bits() {
        return Err(invalid!("bitcast from {src} to {dst} changes the width"));
    }
    let mask = if src.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << src.bits()) - 1
    };
    let bits: Vec<u64> = match &x.data {
        Data::Bool(v) => map(v, |b| b as u64),
        Data::Int(v) => map(v, |a| a as u64 & mask),
        Data::Float(v) => map(v, |a| float_to_bits(src, a)),
        Data::Ptr(_) => unreachable!("scalar_type rejects pointers"),
    };
    let data = if dst.is_bool() {
        Data::Bool(map(&bits, |b| b != 0))
    } else if dst.is_int() {
        Data::Int(map(&bits, |b| wrap_int(dst, b as i64)))
    } else {
        Data::Float(map(&bits, |b| float_from_bits(dst, b)))
    };
    Ok(Tensor { ty, data })
}

#[cfg(test)]
mod fma_tests {
    use super::super::tensor::bf16_from_f64;
    use super::*;
    use half::bf16;

    #[test]
    fn bf16_fma_rounds_once() {
        // 3 * bf16(0xf14a) is a tie between two bf16 values; the addend 3 breaks it. Rounding
        // to f64 first would lose the addend (the GPU gives 0xf217).
        let b = bf16::from_bits(0xf14a).to_f64();
        let r = fma_round_to_odd(3.0, b, 3.0);
        assert_eq!(bf16_from_f64(r).to_bits(), 0xf217);
        // Exact sums are untouched.
        assert_eq!(fma_round_to_odd(2.0, 3.0, 1.0), 7.0);
    }
}
