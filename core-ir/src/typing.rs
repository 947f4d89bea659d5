//! The typing rules of every op, in one place: the builder checks each op with them as it is
//! built, and the verifier checks a whole kernel with them again.
//!
//! Operands here already have their final types (the builder has inserted casts and
//! broadcasts); a rule only says whether the op is well-typed and what it produces.

use crate::ir::{BinaryOp, Literal, Op, ReduceOp, UnaryOp};
use crate::types::{Elem, ScalarType, Shape, Type, MAX_RANK};

mod scan;
pub use scan::{check_combine_inst, combine_arg_types, combine_yield_types};

/// The smallest dimension of a `dot` operand, as on NVIDIA's matrix units.
pub const MIN_DOT_DIM: u32 = 16;

/// The most elements a block may have: Triton's `TRITON_MAX_TENSOR_NUMEL`. It also keeps
/// every element count, register count and shared-memory size of the lowering within
/// `u32`, and the interpreter's blocks within memory.
pub const MAX_NUMEL: usize = 1 << 20;

/// Checks a non-control-flow op. `operand` gives the type of each operand; `hint` is the
/// result type the op was asked to produce, for the ops whose result is not implied by their
/// operands (constant, splat, broadcast, reshape, cast, bitcast). Returns the result types.
pub fn infer(op: &Op, operand: &dyn Fn(crate::ir::ValueId) -> Type, hint: Option<Type>) -> Result<Vec<Type>, String> {
    if let Some(types) = scan::infer(op, operand) {
        return types;
    }
    let need_hint = || hint.ok_or_else(|| "internal: result type missing".to_string());
    let one = |t: Type| Ok(vec![t]);
    match op {
        Op::ProgramId { axis } | Op::NumPrograms { axis } => {
            if *axis > 2 {
                return Err(format!("axis must be 0, 1 or 2, got {axis}"));
            }
            one(Type::scalar(ScalarType::I32))
        }
        Op::Constant { value } => {
            let t = need_hint()?;
            let s = t.scalar_type().ok_or("a constant cannot be a pointer")?;
            check_block_shape(t.shape)?;
            match (value, s) {
                (Literal::Bool(_), ScalarType::Bool) => {}
                (Literal::Int(v), s) if s.is_int() => check_int_fits(*v as i128, s)?,
                (Literal::Float(_), s) if s.is_float() => {}
                (v, s) => return Err(format!("literal {v} cannot have type {s}")),
            }
            one(t)
        }
        Op::Arange { start, end } => {
            let n = i64::from(*end) - i64::from(*start);
            if n <= 0 {
                return Err(format!("end ({end}) must be greater than start ({start})"));
            }
            if !(n as u64).is_power_of_two() {
                return Err(format!("the length end - start = {n} must be a power of two"));
            }
            // `n` is below 2^32: the difference of two `i32`s.
            let shape = Shape::new(&[n as u32]).expect("rank 1 is within MAX_RANK");
            check_block_shape(shape)?;
            one(Type::block(Elem::Scalar(ScalarType::I32), shape))
        }
        Op::Splat { value } => {
            let (v, t) = (operand(*value), need_hint()?);
            if !v.is_scalar() {
                return Err(format!("splat needs a scalar, got {v}"));
            }
            if t.elem != v.elem {
                return Err(format!(
                    "splat cannot change the element type from {} to {}",
                    v.elem, t.elem
                ));
            }
            check_block_shape(t.shape)?;
            one(t)
        }
        Op::Broadcast { value } => {
            let (v, t) = (operand(*value), need_hint()?);
            if v.elem != t.elem || v.shape.rank() != t.shape.rank() {
                return Err(format!("cannot broadcast {v} to {t}"));
            }
            for (a, b) in v.shape.dims().iter().zip(t.shape.dims()) {
                if a != b && *a != 1 {
                    return Err(format!(
                        "cannot broadcast {v} to {t}: dimension {a} is neither 1 nor {b}"
                    ));
                }
            }
            check_block_shape(t.shape)?;
            one(t)
        }
        Op::ExpandDims { value, axis } => {
            let v = operand(*value);
            let axis = *axis as usize;
            if axis > v.shape.rank() {
                return Err(format!("axis {axis} is out of range for {v} (rank {})", v.shape.rank()));
            }
            let shape = v.shape.insert_axis(axis).ok_or_else(|| {
                format!(
                    "the result would have rank {}, above the limit of {MAX_RANK}",
                    v.shape.rank() + 1
                )
            })?;
            one(v.with_shape(shape))
        }
        Op::Reshape { value } => {
            let (v, t) = (operand(*value), need_hint()?);
            if v.elem != t.elem {
                return Err(format!(
                    "reshape cannot change the element type ({} to {})",
                    v.elem, t.elem
                ));
            }
            check_block_shape(t.shape)?;
            if v.shape.numel() != t.shape.numel() {
                return Err(format!(
                    "cannot reshape {} ({} elements) to {} ({} elements)",
                    v.shape,
                    v.shape.numel(),
                    t.shape,
                    t.shape.numel()
                ));
            }
            one(t)
        }
        Op::Permute { value, perm } => {
            let v = operand(*value);
            let rank = v.shape.rank();
            let mut seen = [false; MAX_RANK];
            if perm.len() != rank
                || perm
                    .iter()
                    .any(|&p| (p as usize) >= rank || std::mem::replace(&mut seen[p as usize], true))
            {
                return Err(format!("{perm:?} is not a permutation of the {rank} dimensions of {v}"));
            }
            let dims: Vec<u32> = perm.iter().map(|&p| v.shape.dims()[p as usize]).collect();
            one(v.with_shape(Shape::new(&dims).expect("a permutation keeps the rank")))
        }
        Op::Unary { op, value } => {
            let v = operand(*value);
            let s = scalar_of(v, op.name())?;
            if op.float_only() && !s.is_float() {
                return Err(format!("needs a float operand, got {v}"));
            }
            if *op == UnaryOp::Not && s.is_float() {
                return Err(format!("needs an integer or boolean operand, got {v}"));
            }
            if op.bits_only() && !s.is_int() {
                return Err(format!("needs an integer operand, got {v}"));
            }
            if matches!(op, UnaryOp::Neg | UnaryOp::Abs) && s.is_bool() {
                return Err(format!("needs a number, got {v}"));
            }
            one(v)
        }
        Op::Binary { op, lhs, rhs } => {
            let (a, b) = (operand(*lhs), operand(*rhs));
            same_types(a, b)?;
            let s = scalar_of(a, op.name())?;
            if op.integral_only() && !s.is_integral() {
                return Err(format!("needs integer or boolean operands, got {a}"));
            }
            if op.float_only() && !s.is_float() {
                return Err(format!("needs float operands, got {a}"));
            }
            let arithmetic = matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
            );
            if s.is_bool() && (arithmetic || matches!(op, BinaryOp::Shl | BinaryOp::Shr | BinaryOp::CeilDiv)) {
                return Err(format!("needs numbers, got {a}"));
            }
            if *op == BinaryOp::UMulHi && !matches!(s.bits(), 32 | 64) {
                return Err(format!("needs 32- or 64-bit integer operands, got {a}"));
            }
            one(a)
        }
        Op::Compare { lhs, rhs, .. } => {
            let (a, b) = (operand(*lhs), operand(*rhs));
            same_types(a, b)?;
            one(a.with_elem(Elem::Scalar(ScalarType::Bool)))
        }
        Op::Select {
            cond,
            on_true,
            on_false,
        } => {
            let (c, a, b) = (operand(*cond), operand(*on_true), operand(*on_false));
            same_types(a, b)?;
            if c != a.with_elem(Elem::Scalar(ScalarType::Bool)) {
                return Err(format!(
                    "the condition must be a boolean block of shape {}, got {c}",
                    a.shape
                ));
            }
            one(a)
        }
        Op::Fma { a, b, c } => {
            let (ta, tb, tc) = (operand(*a), operand(*b), operand(*c));
            same_types(ta, tb)?;
            same_types(ta, tc)?;
            if !scalar_of(ta, "fma")?.is_float() {
                return Err(format!("needs float operands, got {ta}"));
            }
            one(ta)
        }
        Op::BytePerm { x, y, selector } => {
            let (tx, ty, ts) = (operand(*x), operand(*y), operand(*selector));
            same_types(tx, ty)?;
            same_types(tx, ts)?;
            if !matches!(scalar_of(tx, "byte_perm")?, ScalarType::I32 | ScalarType::U32) {
                return Err(format!("needs 32-bit integers (i32 or u32), got {tx}"));
            }
            one(tx)
        }
        Op::Rounded { op: r, rounding, args } => {
            let name = r.name(*rounding);
            if args.len() != r.arity() {
                return Err(format!("{name} takes {} operands, got {}", r.arity(), args.len()));
            }
            if *r == crate::ir::RoundedOp::Convert {
                let (v, t) = (operand(args[0]), need_hint()?);
                let (from, to) = (scalar_of(v, name)?, scalar_of(t, name)?);
                if v.shape != t.shape {
                    return Err(format!("cannot change the shape ({} to {})", v.shape, t.shape));
                }
                if !crate::ir::RoundedOp::converts(from, to) {
                    return Err(format!(
                        "converts an i32, u32, i64, u64 or f64 to f32, an i64 or u64 to f64, or an f32 or f64 \
                         to f16 or bf16 (the conversions that can be inexact), got {from} to {to}"
                    ));
                }
                return one(t);
            }
            let t0 = operand(args[0]);
            for &a in &args[1..] {
                same_types(t0, operand(a))?;
            }
            let s = scalar_of(t0, name)?;
            if !matches!(s, ScalarType::F32 | ScalarType::F64) {
                return Err(format!("needs f32 or f64 operands (as libdevice's {name}), got {t0}"));
            }
            one(t0)
        }
        Op::Cast { value } => {
            let (v, t) = (operand(*value), need_hint()?);
            scalar_of(v, "cast")?;
            scalar_of(t, "cast")?;
            if v.shape != t.shape {
                return Err(format!("cast cannot change the shape ({} to {})", v.shape, t.shape));
            }
            one(t)
        }
        Op::Bitcast { value } => {
            let (v, t) = (operand(*value), need_hint()?);
            let (a, b) = (scalar_of(v, "bitcast")?, scalar_of(t, "bitcast")?);
            if a.bits() != b.bits() || v.shape != t.shape {
                return Err(format!("bitcast needs the same width and shape, got {v} to {t}"));
            }
            one(t)
        }
        Op::AddPtr { ptr, offset } => {
            let (p, o) = (operand(*ptr), operand(*offset));
            if !p.elem.is_ptr() {
                return Err(format!("the base must be a pointer, got {p}"));
            }
            if !o.scalar_type().is_some_and(|s| s.is_int()) {
                return Err(format!("the offset must be an integer, got {o}"));
            }
            if p.shape != o.shape {
                return Err(format!("pointer {p} and offset {o} differ in shape"));
            }
            one(p)
        }
        Op::Load { ptr, mask, other, .. } => {
            let p = operand(*ptr);
            let Elem::Ptr(pointee) = p.elem else {
                return Err(format!("needs a pointer or block of pointers, got {p}"));
            };
            let result = p.with_elem(Elem::Scalar(pointee));
            if let Some(m) = mask {
                check_mask(operand(*m), p)?;
            }
            if let Some(o) = other {
                let o = operand(*o);
                if o != result {
                    return Err(format!("`other` must be {result}, got {o}"));
                }
            }
            one(result)
        }
        Op::Store { ptr, value, mask } => {
            let p = operand(*ptr);
            let Elem::Ptr(pointee) = p.elem else {
                return Err(format!("needs a pointer or block of pointers, got {p}"));
            };
            let v = operand(*value);
            if v != p.with_elem(Elem::Scalar(pointee)) {
                return Err(format!(
                    "the value must be {}, got {v}",
                    p.with_elem(Elem::Scalar(pointee))
                ));
            }
            if let Some(m) = mask {
                check_mask(operand(*m), p)?;
            }
            Ok(vec![])
        }
        Op::Reduce { op, value, axis } => {
            let v = operand(*value);
            let s = scalar_of(v, op.name())?;
            let axis = *axis as usize;
            if v.shape.rank() == 0 {
                return Err(format!("cannot reduce a scalar ({v})"));
            }
            let Some(shape) = v.shape.remove_axis(axis) else {
                return Err(format!("axis {axis} is out of range for {v} (rank {})", v.shape.rank()));
            };
            if s.is_bool() && *op == ReduceOp::Sum {
                return Err("cannot sum booleans; cast them to an integer type first".into());
            }
            let elem = match op {
                ReduceOp::ArgMax | ReduceOp::ArgMin => ScalarType::I32,
                _ => s,
            };
            one(Type::block(Elem::Scalar(elem), shape))
        }
        Op::Dot {
            a,
            b,
            acc,
            precision,
            max_num_imprecise_acc,
        } => {
            let (ta, tb, tc) = (operand(*a), operand(*b), operand(*acc));
            let (sa, sb, sc) = (scalar_of(ta, "dot")?, scalar_of(tb, "dot")?, scalar_of(tc, "dot")?);
            if ta.shape.rank() != 2 || tb.shape.rank() != 2 || tc.shape.rank() != 2 {
                return Err(format!("needs 2-D blocks, got {ta} and {tb} with accumulator {tc}"));
            }
            let (m, k) = (ta.shape.dims()[0], ta.shape.dims()[1]);
            let (k2, n) = (tb.shape.dims()[0], tb.shape.dims()[1]);
            if k != k2 {
                return Err(format!("inner dimensions differ: {ta} @ {tb}"));
            }
            if tc.shape.dims() != [m, n] {
                return Err(format!("the accumulator must have shape [{m}, {n}], got {tc}"));
            }
            if m < MIN_DOT_DIM || n < MIN_DOT_DIM || k < MIN_DOT_DIM {
                return Err(format!(
                    "every dimension must be at least {MIN_DOT_DIM}, got M={m}, N={n}, K={k}"
                ));
            }
            // (The fp8 formats mix, as the fp8 MMAs take E4M3 and E5M2: E4M3 values and
            // E5M2 gradients in training. The others are multiplied as f16, which holds
            // every fp8 value, so any two mix.)
            if sa != sb && !(sa.is_fp8() && sb.is_fp8()) {
                return Err(format!("operands must have the same element type, got {sa} and {sb}"));
            }
            let ok = match sa {
                ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 => sc == ScalarType::F32,
                _ if sa.is_fp8() => sc == ScalarType::F32,
                ScalarType::F64 => sc == ScalarType::F64,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "supports fp8/f16/bf16/f32 inputs with an f32 accumulator and f64 with f64, got {sa} inputs with {sc}"
                ));
            }
            // (As Triton: the limit is checked for fp8 operands, the only ones whose MMAs add
            // in less than f32; other types ignore it.)
            if let Some(limit) = max_num_imprecise_acc.filter(|&l| sa.is_fp8() && l > k) {
                return Err(format!(
                    "max_num_imprecise_acc ({limit}) must be at most the dot's K ({k}): its fp8 sums are promoted within one dot"
                ));
            }
            if let Some(name) = precision.name().filter(|_| sa != ScalarType::F32) {
                return Err(format!(
                    "input precision {name} rounds f32 operands, got {sa} (f16 and bf16 products are exact: use the default precision)"
                ));
            }
            one(tc)
        }
        Op::Atomic {
            ptr, value, mask, op, ..
        } => {
            let p = operand(*ptr);
            let result = atomic_value_type(p, op.name())?;
            let v = operand(*value);
            if v != result {
                return Err(format!("the value must be {result}, got {v}"));
            }
            let s = scalar_of(result, op.name())?;
            use crate::ir::AtomicOp as A;
            if matches!(op, A::And | A::Or | A::Xor) && !s.is_integral() {
                return Err(format!("needs an integer pointee, got {s}"));
            }
            if s.bits() < 32 && !(s == ScalarType::F16 && *op == A::Add) {
                return Err(format!("needs 32- or 64-bit elements (or f16 for atomic_add), got {s}"));
            }
            if let Some(m) = mask {
                check_mask(operand(*m), p)?;
            }
            one(result)
        }
        Op::AtomicCas {
            ptr, cmp, value, mask, ..
        } => {
            let p = operand(*ptr);
            let result = atomic_value_type(p, "atomic_cas")?;
            for (what, v) in [("compared value", operand(*cmp)), ("new value", operand(*value))] {
                if v != result {
                    return Err(format!("the {what} must be {result}, got {v}"));
                }
            }
            if scalar_of(result, "atomic_cas")?.bits() < 32 {
                return Err(format!("needs 32- or 64-bit elements, got {result}"));
            }
            if let Some(m) = mask {
                check_mask(operand(*m), p)?;
            }
            one(result)
        }
        Op::For { .. } | Op::If { .. } | Op::While { .. } | Op::Yield { .. } => {
            Err("internal: control flow is checked by its builder and the verifier".into())
        }
        Op::Scan { .. }
        | Op::ReduceCombine { .. }
        | Op::ClusterReduceCombine { .. }
        | Op::Gather { .. }
        | Op::Sort { .. }
        | Op::Histogram { .. } => {
            unreachable!("checked by typing::scan above")
        }
        Op::ClusterReduce { op, value } => {
            let v = operand(*value);
            let s = scalar_of(v, "cluster_reduce")?;
            if v.shape.rank() != 0 {
                return Err(format!("combines one number a program, so it needs a scalar, got {v}"));
            }
            if !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
                return Err(format!("combines by sum, max or min, got {}", op.name()));
            }
            if s.is_bool() || s.bits() < 32 {
                return Err(format!("needs a 32- or 64-bit number, got {v}"));
            }
            one(v)
        }
        Op::Assert { cond, .. } => {
            let c = operand(*cond);
            if c.elem != Elem::Scalar(ScalarType::Bool) {
                return Err(format!("needs a boolean condition (i1), got {c}"));
            }
            Ok(vec![])
        }
        Op::Print { values, .. } => {
            let Some(first) = values.first().map(|&v| operand(v)) else {
                return Ok(vec![]);
            };
            for &v in values {
                let t = operand(v);
                if t.elem.is_ptr() {
                    return Err(format!("prints numbers, got {t}"));
                }
                if t.shape != first.shape {
                    return Err(format!("needs values of one shape, got {first} and {t}"));
                }
            }
            Ok(vec![])
        }
    }
}

/// Checks the shape of a block made by an op: power-of-two dimensions, at most
/// [`MAX_NUMEL`] elements.
pub fn check_block_shape(shape: Shape) -> Result<(), String> {
    if !shape.is_pow2() {
        return Err(format!("block dimensions must be powers of two, got {shape}"));
    }
    if shape.numel() > MAX_NUMEL {
        return Err(format!(
            "blocks have at most {MAX_NUMEL} elements, got {shape} ({} elements)",
            shape.dims().iter().map(|&d| d as u128).product::<u128>()
        ));
    }
    Ok(())
}

/// Whether the integer literal `v` can be a value of type `s`. A `u64` also takes negative
/// literals down to `i64::MIN`, as their two's-complement bit patterns (`-1` is all ones).
/// Booleans and floats take no integer here.
pub fn check_int_fits(v: i128, s: ScalarType) -> Result<(), String> {
    let fits = match s {
        ScalarType::I8 => i8::try_from(v).is_ok(),
        ScalarType::I16 => i16::try_from(v).is_ok(),
        ScalarType::I32 => i32::try_from(v).is_ok(),
        ScalarType::I64 => i64::try_from(v).is_ok(),
        ScalarType::U64 => (i64::MIN as i128..=u64::MAX as i128).contains(&v),
        ScalarType::U8 => u8::try_from(v).is_ok(),
        ScalarType::U16 => u16::try_from(v).is_ok(),
        ScalarType::U32 => u32::try_from(v).is_ok(),
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(format!("the literal {v} does not fit {s}"))
    }
}

fn scalar_of(t: Type, what: &str) -> Result<ScalarType, String> {
    t.scalar_type()
        .ok_or_else(|| format!("`{what}` needs numbers, got pointers ({t})"))
}

fn same_types(a: Type, b: Type) -> Result<(), String> {
    if a != b {
        return Err(format!("operand types differ: {a} and {b}"));
    }
    Ok(())
}

fn check_mask(mask: Type, ptr: Type) -> Result<(), String> {
    let want = ptr.with_elem(Elem::Scalar(ScalarType::Bool));
    if mask != want {
        return Err(format!("the mask must be {want}, got {mask}"));
    }
    Ok(())
}

fn atomic_value_type(p: Type, what: &str) -> Result<Type, String> {
    match p.elem {
        Elem::Ptr(s) => Ok(p.with_elem(Elem::Scalar(s))),
        _ => Err(format!("`{what}` needs a pointer or block of pointers, got {p}")),
    }
}
