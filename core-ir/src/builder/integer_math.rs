//! libdevice's integer helpers beyond `umulhi`: the halving adds `hadd` and `rhadd`
//! (`uhadd`, `urhadd` for unsigned types) and the signed high product `mulhi`
//! (`mul64hi`), built from ops every backend has.

use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::{ScalarType, Shape};

impl KernelBuilder {
    /// `⌊(a + b) / 2⌋` without overflow (integers of one type, broadcast together), as
    /// `libdevice.hadd` and `uhadd`: `(a & b) + ((a ^ b) >> 1)`, the shift arithmetic for
    /// signed types.
    #[track_caller]
    pub fn hadd<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        match self.same_ints("hadd", a, b, loc, |_| true) {
            Some((a, b)) => (a & b) + ((a ^ b) >> 1),
            None => self.poison(a.ty()),
        }
    }

    /// `⌈(a + b) / 2⌉` without overflow (integers of one type, broadcast together), as
    /// `libdevice.rhadd` and `urhadd`: `(a | b) - ((a ^ b) >> 1)`.
    #[track_caller]
    pub fn rhadd<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        match self.same_ints("rhadd", a, b, loc, |_| true) {
            Some((a, b)) => (a | b) - ((a ^ b) >> 1),
            None => self.poison(a.ty()),
        }
    }

    /// The high half of the double-width signed product of `a` and `b` (`i32` or `i64` of
    /// one type, broadcast together), as `libdevice.mulhi` and `mul64hi`: the unsigned
    /// high half ([`KernelBuilder::umulhi`]) less `b` where `a` is negative and `a` where
    /// `b` is.
    #[track_caller]
    pub fn mulhi<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let signed_word = |t: ScalarType| matches!(t, ScalarType::I32 | ScalarType::I64);
        match self.same_ints("mulhi", a, b, loc, signed_word) {
            Some((a, b)) => {
                let high = a.umulhi(b);
                let high = high - self.where_(a.lt(0), b, 0);
                high - self.where_(b.lt(0), a, 0)
            }
            None => self.poison(a.ty()),
        }
    }

    /// `a` and `b` broadcast to one shape, or `None` after an error naming `op` where they
    /// are not integers of one type that `accepts` or do not broadcast (unless one
    /// already failed).
    fn same_ints<'b>(
        &'b self,
        op: &str,
        a: Value<'b>,
        b: Value<'b>,
        loc: SourceLoc,
        accepts: impl Fn(ScalarType) -> bool,
    ) -> Option<(Value<'b>, Value<'b>)> {
        let (a, b) = (self.adopt(op, a, loc), self.adopt(op, b, loc));
        if self.is_poisoned(a.id) || self.is_poisoned(b.id) {
            return None;
        }
        let ok = a.dtype().is_some_and(|t| t.is_int() && accepts(t)) && a.dtype() == b.dtype();
        if !ok {
            let what = if op == "mulhi" {
                "two i32 or two i64"
            } else {
                "two integers of one type"
            };
            let message = format!("takes {what}, got {} and {}", a.ty(), b.ty());
            let _ = self.fail(op, loc, message, a.ty());
            return None;
        }
        let Some(shape) = Shape::broadcast(a.ty().shape, b.ty().shape) else {
            let message = format!(
                "shapes {} and {} cannot be broadcast together",
                a.ty().shape,
                b.ty().shape
            );
            let _ = self.fail(op, loc, message, a.ty());
            return None;
        };
        Some((
            self.broadcast_to(op, a, shape, loc),
            self.broadcast_to(op, b, shape, loc),
        ))
    }
}

impl<'b> Value<'b> {
    /// `⌊(self + b) / 2⌋` without overflow; see [`KernelBuilder::hadd`].
    #[track_caller]
    pub fn hadd(self, b: Value<'b>) -> Value<'b> {
        self.builder.hadd(self, b)
    }

    /// `⌈(self + b) / 2⌉` without overflow; see [`KernelBuilder::rhadd`].
    #[track_caller]
    pub fn rhadd(self, b: Value<'b>) -> Value<'b> {
        self.builder.rhadd(self, b)
    }

    /// The high half of the signed product with `b`; see [`KernelBuilder::mulhi`].
    #[track_caller]
    pub fn mulhi(self, b: Value<'b>) -> Value<'b> {
        self.builder.mulhi(self, b)
    }
}
