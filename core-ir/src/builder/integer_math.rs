//! libdevice's integer helpers beyond `umulhi`: the halving adds `hadd` and `rhadd`
//! (`uhadd`, `urhadd` for unsigned types), the signed high product `mulhi` (`mul64hi`),
//! the absolute difference `sad` (`usad`) and the 24-bit product `mul24` (`umul24`), built
//! from ops every backend has.

use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType;

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

    /// `|a - b| + c` (integers of one type, broadcast together), as `libdevice.sad` and
    /// `usad`: the difference taken the larger less the smaller, wrapping into the type as
    /// C's unsigned sum does.
    #[track_caller]
    pub fn sad<'b>(&'b self, a: Value<'b>, b: Value<'b>, c: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((a, b)) = self.same_ints("sad", a, b, loc, |_| true) else {
            return self.poison(a.ty());
        };
        let difference = self.where_(a.gt(b), a - b, b - a);
        match self.same_ints("sad", difference, c, loc, |_| true) {
            Some((difference, c)) => difference + c,
            None => self.poison(a.ty()),
        }
    }

    /// The product of the low 24 bits of `a` and `b` (`i32` or `u32` of one type,
    /// broadcast together), as `libdevice.mul24` and `umul24`: the bits sign-extended from
    /// the 24th for `i32`, the low 32 bits of the product.
    #[track_caller]
    pub fn mul24<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let word = |t: ScalarType| matches!(t, ScalarType::I32 | ScalarType::U32);
        match self.same_ints("mul24", a, b, loc, word) {
            // Shifted up by 8 and back: arithmetic for i32 (sign-extended), logical for u32.
            Some((a, b)) => ((a << 8) >> 8) * ((b << 8) >> 8),
            None => self.poison(a.ty()),
        }
    }

    /// `a` and `b` broadcast to one shape, or `None` after an error naming `op` where they
    /// are not integers of one type that `accepts` or do not broadcast.
    fn same_ints<'b>(
        &'b self,
        op: &str,
        a: Value<'b>,
        b: Value<'b>,
        loc: SourceLoc,
        accepts: impl Fn(ScalarType) -> bool,
    ) -> Option<(Value<'b>, Value<'b>)> {
        let what = match op {
            "mulhi" => "two i32 or two i64",
            "mul24" => "two i32 or two u32",
            _ => "two integers of one type",
        };
        let accepts = |t: ScalarType| t.is_int() && accepts(t);
        self.same_typed(op, (a, b), loc, accepts, what).map(|(a, b, _)| (a, b))
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

    /// The product of the low 24 bits with `b`'s; see [`KernelBuilder::mul24`].
    #[track_caller]
    pub fn mul24(self, b: Value<'b>) -> Value<'b> {
        self.builder.mul24(self, b)
    }

    /// The high half of the signed product with `b`; see [`KernelBuilder::mulhi`].
    #[track_caller]
    pub fn mulhi(self, b: Value<'b>) -> Value<'b> {
        self.builder.mulhi(self, b)
    }
}
