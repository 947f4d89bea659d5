//! Element-wise math beyond the operators: `pow`, `umulhi` and `clamp`, as
//! `triton.language` has them.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{BinaryOp, SourceLoc};

impl KernelBuilder {
    /// `a` raised to the power `b`, as `tl.math.pow` (C's `pow`; floats only, with
    /// Triton's broadcasting and promotion).
    #[track_caller]
    pub fn pow<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.binary(BinaryOp::Pow, a.into(), b.into(), SourceLoc::caller())
    }
    /// The high half of the double-width unsigned product of `a` and `b`, as `tl.umulhi`
    /// (32- and 64-bit integers).
    #[track_caller]
    pub fn umulhi<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.binary(BinaryOp::UMulHi, a.into(), b.into(), SourceLoc::caller())
    }
    /// `x` limited to `[lo, hi]`, as `tl.clamp`: `minimum(maximum(x, lo), hi)`. A NaN in `x`
    /// (or a bound) gives NaN, as Triton's `propagate_nan=ALL`; for integers it is exact.
    /// As in Triton, the result is unspecified when `lo > hi`.
    #[track_caller]
    pub fn clamp<'b>(
        &'b self,
        x: impl Into<Operand<'b>>,
        lo: impl Into<Operand<'b>>,
        hi: impl Into<Operand<'b>>,
    ) -> Value<'b> {
        let loc = SourceLoc::caller();
        let above = self.binary(BinaryOp::Max, x.into(), lo.into(), loc);
        self.binary(BinaryOp::Min, above.into(), hi.into(), loc)
    }
}

impl<'b> Value<'b> {
    /// `self` raised to the power `exponent` (floats), as `tl.math.pow`.
    #[track_caller]
    pub fn pow(self, exponent: impl Into<Operand<'b>>) -> Value<'b> {
        self.builder
            .binary(BinaryOp::Pow, self.into(), exponent.into(), SourceLoc::caller())
    }
    /// The high half of the double-width unsigned product with `other`, as `tl.umulhi`.
    #[track_caller]
    pub fn umulhi(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.builder
            .binary(BinaryOp::UMulHi, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self` limited to `[lo, hi]`, as `tl.clamp` (see [`KernelBuilder::clamp`]).
    #[track_caller]
    pub fn clamp(self, lo: impl Into<Operand<'b>>, hi: impl Into<Operand<'b>>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let above = self.builder.binary(BinaryOp::Max, self.into(), lo.into(), loc);
        self.builder.binary(BinaryOp::Min, above.into(), hi.into(), loc)
    }
}
