//! Rust operators on values: `+ - * / % & | ^ << >>`, unary `-` and `!`, with values or
//! literals on either side. `/` on integers is C-style truncating division (Triton's `//`);
//! use [`Value::truediv`] for Python's `/`.

use super::{Operand, Value};
use crate::ir::{BinaryOp, SourceLoc, UnaryOp};
use std::ops;

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl<'b, R: Into<Operand<'b>>> ops::$trait<R> for Value<'b> {
            type Output = Value<'b>;
            #[track_caller]
            fn $method(self, rhs: R) -> Value<'b> {
                self.builder.binary(BinaryOp::$op, self.into(), rhs.into(), SourceLoc::caller())
            }
        }
        binary_operator!(@literal_lhs $trait, $method, $op, i32, i64, u32, u64, usize, f32, f64, bool);
    };
    (@literal_lhs $trait:ident, $method:ident, $op:ident, $($lit:ty),*) => {$(
        impl<'b> ops::$trait<Value<'b>> for $lit {
            type Output = Value<'b>;
            #[track_caller]
            fn $method(self, rhs: Value<'b>) -> Value<'b> {
                rhs.builder.binary(BinaryOp::$op, Operand::from(self), rhs.into(), SourceLoc::caller())
            }
        }
    )*};
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);
binary_operator!(Rem, rem, Rem);
binary_operator!(BitAnd, bitand, And);
binary_operator!(BitOr, bitor, Or);
binary_operator!(BitXor, bitxor, Xor);
binary_operator!(Shl, shl, Shl);
binary_operator!(Shr, shr, Shr);

impl From<u64> for Operand<'_> {
    fn from(v: u64) -> Self {
        Operand::Int(v as i128)
    }
}

impl<'b> ops::Neg for Value<'b> {
    type Output = Value<'b>;
    #[track_caller]
    fn neg(self) -> Value<'b> {
        self.builder.unary(UnaryOp::Neg, self.id, SourceLoc::caller())
    }
}

impl<'b> ops::Not for Value<'b> {
    type Output = Value<'b>;
    /// Logical not of booleans, bitwise not of integers.
    #[track_caller]
    fn not(self) -> Value<'b> {
        self.builder.unary(UnaryOp::Not, self.id, SourceLoc::caller())
    }
}
