//! Operands of builder methods (values or Rust literals) and the implicit conversions of
//! `triton.language`: numpy broadcasting and type promotion, made explicit in the IR.

use super::{KernelBuilder, Value};
use crate::ir::{Literal, Op, SourceLoc};
use crate::types::{Elem, ScalarType, Shape, Type};

/// A value or a Rust literal. Literals are "weakly typed" as Python numbers are in Triton:
/// `x * 2` keeps `x`'s type; a float literal with an integer block gives `f32`.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'b> {
    /// A value of the kernel being built.
    Value(Value<'b>),
    /// An integer literal; wide enough for every Rust integer up to `u64` and `i64`, so that
    /// a literal is checked against the block's type as written, never wrapped first.
    Int(i128),
    /// A float literal: it takes the type of a float value it meets, and turns an integer
    /// or boolean value into `f32`; on its own it is an `f32`.
    Float(f64),
    /// A boolean literal: it takes the type of the value it meets (0 or 1 for numbers); on
    /// its own it is an `i1`.
    Bool(bool),
}

impl<'b> From<Value<'b>> for Operand<'b> {
    fn from(v: Value<'b>) -> Self {
        Operand::Value(v)
    }
}
impl<'b> From<&Value<'b>> for Operand<'b> {
    fn from(v: &Value<'b>) -> Self {
        Operand::Value(*v)
    }
}
macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self { Operand::Int(v as i128) }
        }
    )*};
}
int_operand!(i8, i16, i32, i64, u8, u16, u32, isize, usize);
impl From<f32> for Operand<'_> {
    fn from(v: f32) -> Self {
        Operand::Float(v as f64)
    }
}
impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Float(v)
    }
}
impl From<bool> for Operand<'_> {
    fn from(v: bool) -> Self {
        Operand::Bool(v)
    }
}

impl<'b> Operand<'b> {
    fn literal_type(&self) -> ScalarType {
        match self {
            Operand::Value(_) => unreachable!("only literals"),
            Operand::Int(_) => ScalarType::I32,
            Operand::Float(_) => ScalarType::F32,
            Operand::Bool(_) => ScalarType::Bool,
        }
    }
}

/// Triton's promotion of two element types for arithmetic.
pub fn promote(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a == b {
        return a;
    }
    if a == F64 || b == F64 {
        return F64;
    }
    if a == F32 || b == F32 || (a.is_float() && b.is_float()) {
        return F32; // f32 with anything, or f16 with bf16
    }
    if a.is_float() {
        return a;
    }
    if b.is_float() {
        return b;
    }
    if a == Bool {
        return b;
    }
    if b == Bool {
        return a;
    }
    // Two integers: the wider; at equal width the unsigned one.
    match a.bits().cmp(&b.bits()) {
        std::cmp::Ordering::Greater => a,
        std::cmp::Ordering::Less => b,
        std::cmp::Ordering::Equal => {
            if a.is_unsigned_int() {
                a
            } else {
                b
            }
        }
    }
}

impl KernelBuilder {
    /// `x` and `y` broadcast to one shape, with their element type, or `None` after an
    /// error naming `op` where they are not of one type that `accepts` (`what` says which,
    /// as "two floats of one type") or do not broadcast (unless one already failed): the
    /// operand check of the functions of two values of one type.
    pub(crate) fn same_typed<'b>(
        &'b self,
        op: &str,
        (x, y): (Value<'b>, Value<'b>),
        loc: SourceLoc,
        accepts: impl Fn(ScalarType) -> bool,
        what: &str,
    ) -> Option<(Value<'b>, Value<'b>, ScalarType)> {
        let (x, y) = (self.adopt(op, x, loc), self.adopt(op, y, loc));
        if self.is_poisoned(x.id) || self.is_poisoned(y.id) {
            return None;
        }
        let (Some(t), true) = (x.dtype().filter(|&t| accepts(t)), x.dtype() == y.dtype()) else {
            let message = format!("takes {what}, got {} and {}", x.ty(), y.ty());
            let _ = self.fail(op, loc, message, x.ty());
            return None;
        };
        let Some(shape) = Shape::broadcast(x.ty().shape, y.ty().shape) else {
            let message = format!(
                "shapes {} and {} cannot be broadcast together",
                x.ty().shape,
                y.ty().shape
            );
            let _ = self.fail(op, loc, message, x.ty());
            return None;
        };
        Some((
            self.broadcast_to(op, x, shape, loc),
            self.broadcast_to(op, y, shape, loc),
            t,
        ))
    }
}

impl KernelBuilder {
    /// A constant of type `ty` (a block constant when `ty` has a shape).
    pub(crate) fn constant(&self, value: Literal, ty: Type, loc: SourceLoc) -> Value<'_> {
        self.emit1(Op::Constant { value }, Some(ty), loc)
    }

    /// The literal `lit` as a value of scalar type `s`, shape `shape`.
    pub(crate) fn literal_as(
        &self,
        op: &str,
        lit: Operand<'_>,
        s: ScalarType,
        shape: Shape,
        loc: SourceLoc,
    ) -> Value<'_> {
        let ty = Type::block(Elem::Scalar(s), shape);
        let value = match (lit, s) {
            (Operand::Bool(b), ScalarType::Bool) => Literal::Bool(b),
            (Operand::Bool(b), s) if s.is_int() => Literal::Int(b as i64),
            (Operand::Bool(b), _) => Literal::Float(b as i64 as f64),
            (Operand::Int(i), s) if s.is_float() => Literal::Float(i as f64),
            (Operand::Int(i), ScalarType::Bool) => Literal::Bool(i != 0),
            (Operand::Int(i), s) => {
                if let Err(message) = crate::typing::check_int_fits(i, s) {
                    return self.fail(op, loc, message, ty);
                }
                // `check_int_fits` bounds it to i64, or for `u64` to i64::MIN..=u64::MAX,
                // which the IR keeps as the 64-bit pattern.
                Literal::Int(i as i64)
            }
            (Operand::Float(x), s) if s.is_float() => Literal::Float(x),
            (Operand::Float(x), s) => {
                return self.fail(op, loc, format!("the float literal {x} cannot become {s}"), ty)
            }
            (Operand::Value(_), _) => unreachable!("only literals"),
        };
        self.constant(value, ty, loc)
    }

    /// Converts `v` to element type `s` (no-op when it already is).
    pub(crate) fn cast_to(&self, v: Value<'_>, s: ScalarType, loc: SourceLoc) -> Value<'_> {
        let ty = self.ty_of(v.id);
        if ty.scalar_type() == Some(s) {
            return self.value(v.id);
        }
        self.emit1(Op::Cast { value: v.id }, Some(ty.with_elem(Elem::Scalar(s))), loc)
    }

    /// Broadcasts `v` to `shape` with numpy's rules: a scalar is splat, a lower rank gets
    /// leading size-1 dimensions, size-1 dimensions are repeated.
    pub(crate) fn broadcast_to(&self, op: &str, v: Value<'_>, shape: Shape, loc: SourceLoc) -> Value<'_> {
        let ty = self.ty_of(v.id);
        if ty.shape == shape {
            return self.value(v.id);
        }
        if ty.shape.is_scalar() {
            return self.emit1(Op::Splat { value: v.id }, Some(ty.with_shape(shape)), loc);
        }
        if Shape::broadcast(ty.shape, shape) != Some(shape) {
            return self.fail(
                op,
                loc,
                format!("cannot broadcast {ty} to shape {shape}"),
                ty.with_shape(shape),
            );
        }
        let mut cur = self.value(v.id);
        if ty.shape.rank() < shape.rank() {
            let mut dims = vec![1u32; shape.rank() - ty.shape.rank()];
            dims.extend_from_slice(ty.shape.dims());
            let padded = Shape::new(&dims).expect("the rank of `shape`, a valid shape");
            cur = self.emit1(Op::Reshape { value: cur.id }, Some(ty.with_shape(padded)), loc);
        }
        if self.ty_of(cur.id).shape == shape {
            return cur;
        }
        self.emit1(Op::Broadcast { value: cur.id }, Some(ty.with_shape(shape)), loc)
    }

    /// Brings two operands to a common shape and (for numbers) a common element type, as
    /// `triton.language` does for arithmetic and comparisons. Literals take the other side's
    /// type. Returns `None` if an operand failed (the error is recorded).
    pub(crate) fn unify<'s>(
        &'s self,
        op: &str,
        a: Operand<'_>,
        b: Operand<'_>,
        loc: SourceLoc,
    ) -> Option<(Value<'s>, Value<'s>)> {
        let (a, b) = (self.adopt_operand(op, a, loc), self.adopt_operand(op, b, loc));
        let (va, vb) = match (a, b) {
            (Operand::Value(x), Operand::Value(y)) => {
                let (tx, ty) = (self.ty_of(x.id), self.ty_of(y.id));
                let Some(shape) = Shape::broadcast(tx.shape, ty.shape) else {
                    self.check_operands(op, loc, &[x.id, y.id]).ok()?;
                    self.report(
                        op,
                        loc,
                        format!("shapes {} and {} cannot be broadcast together", tx.shape, ty.shape),
                    );
                    return None;
                };
                // Checked here, once, so that the error names this op rather than the two
                // broadcasts that would each fail.
                if let Err(message) = crate::typing::check_block_shape(shape) {
                    self.check_operands(op, loc, &[x.id, y.id]).ok()?;
                    self.report(op, loc, message);
                    return None;
                }
                let (mut x, mut y) = (self.value(x.id), self.value(y.id));
                if let (Some(sx), Some(sy)) = (tx.scalar_type(), ty.scalar_type()) {
                    let s = promote(sx, sy);
                    x = self.cast_to(x, s, loc);
                    y = self.cast_to(y, s, loc);
                }
                (
                    self.broadcast_to(op, x, shape, loc),
                    self.broadcast_to(op, y, shape, loc),
                )
            }
            (Operand::Value(x), lit) => {
                let (x, l) = self.value_with_literal(op, x, lit, loc);
                (x, l)
            }
            (lit, Operand::Value(y)) => {
                let (y, l) = self.value_with_literal(op, y, lit, loc);
                (l, y)
            }
            (la, lb) => {
                let s = promote(la.literal_type(), lb.literal_type());
                (
                    self.literal_as(op, la, s, Shape::SCALAR, loc),
                    self.literal_as(op, lb, s, Shape::SCALAR, loc),
                )
            }
        };
        if self.is_poisoned(va.id) || self.is_poisoned(vb.id) {
            return None;
        }
        Some((va, vb))
    }

    /// A value and a literal made to match: the literal takes the value's type, except that a
    /// float literal turns an integer or boolean value into `f32`, and an integer literal
    /// turns a boolean value into `i32`.
    fn value_with_literal<'s>(
        &'s self,
        op: &str,
        x: Value<'_>,
        lit: Operand<'_>,
        loc: SourceLoc,
    ) -> (Value<'s>, Value<'s>) {
        let tx = self.ty_of(x.id);
        let mut x = self.value(x.id);
        let s = match (tx.elem, lit) {
            (Elem::Ptr(_), _) => ScalarType::I32, // pointer + literal offset
            (Elem::Scalar(s), Operand::Float(_)) if !s.is_float() => ScalarType::F32,
            (Elem::Scalar(ScalarType::Bool), Operand::Int(_)) => ScalarType::I32,
            (Elem::Scalar(s), _) => s,
        };
        if !tx.elem.is_ptr() {
            x = self.cast_to(x, s, loc);
        }
        let lit_shape = if tx.elem.is_ptr() { Shape::SCALAR } else { tx.shape };
        let l = self.literal_as(op, lit, s, lit_shape, loc);
        (x, l)
    }

    /// Turns an operand into a value: literals become scalars of their natural type
    /// (`i32`, `f32`, `i1`).
    pub(crate) fn operand_value(&self, op: &str, a: Operand<'_>, loc: SourceLoc) -> Value<'_> {
        match a {
            Operand::Value(v) => self.adopt(op, v, loc),
            lit => self.literal_as(op, lit, lit.literal_type(), Shape::SCALAR, loc),
        }
    }
}
