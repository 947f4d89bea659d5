//! `join`, `split`, `interleave` and `cat`, as `triton.language` defines them, built from
//! ops the IR already has (`expand_dims`, `broadcast`, `where`, `reshape`, `permute` and a
//! reduction along a size-2 axis), so that the interpreter, the lowering and every backend
//! run them without knowing them.
//!
//! Blocks have rank at most 3, and `join` adds a dimension: `join`, `interleave` and `cat`
//! take operands of rank at most 2.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{CmpOp, Literal, Op, ReduceOp, SourceLoc};
use crate::types::{ScalarType, Shape};

impl KernelBuilder {
    /// `a` and `b` side by side along a new last dimension of size 2, as `tl.join(a, b)`:
    /// `join(a, b)[..., 0] = a`, `[..., 1] = b`. The operands are broadcast to one shape
    /// (scalars give a block of 2) and must have one element type.
    #[track_caller]
    pub fn join<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        self.join_at("join", a, b, SourceLoc::caller())
    }

    fn join_at<'b>(&'b self, op: &str, a: Value<'b>, b: Value<'b>, loc: SourceLoc) -> Value<'b> {
        let (a, b) = (self.adopt(op, a, loc), self.adopt(op, b, loc));
        let (ta, tb) = (a.ty(), b.ty());
        if self.is_poisoned(a.id) || self.is_poisoned(b.id) {
            return self.poison(ta);
        }
        if ta.elem != tb.elem {
            let message = format!("needs operands of one element type, got {ta} and {tb}");
            return self.fail(op, loc, message, ta);
        }
        let Some(shape) = Shape::broadcast(ta.shape, tb.shape) else {
            let message = format!("shapes {} and {} cannot be broadcast together", ta.shape, tb.shape);
            return self.fail(op, loc, message, ta);
        };
        let rank = shape.rank();
        let mut dims = shape.dims().to_vec();
        dims.push(2);
        let Some(joined) = Shape::new(&dims) else {
            let message = format!(
                "adds a dimension, and blocks have rank at most {}: got operands of shape {shape}",
                crate::types::MAX_RANK
            );
            return self.fail(op, loc, message, ta);
        };
        if let Err(message) = crate::typing::check_block_shape(joined) {
            return self.fail(op, loc, message, ta.with_shape(joined));
        }
        let side = |v: Value<'b>| {
            let v = self.broadcast_to(op, v, shape, loc);
            let v = self.emit1(
                Op::ExpandDims {
                    value: v.id,
                    axis: rank as u8,
                },
                None,
                loc,
            );
            self.broadcast_to(op, v, joined, loc)
        };
        let (wa, wb) = (side(a), side(b));
        let first = self.lane_is(op, 0, joined, loc);
        self.emit1(
            Op::Select {
                cond: first.id,
                on_true: wa.id,
                on_false: wb.id,
            },
            None,
            loc,
        )
    }

    /// Whether each element's index along the last axis of `shape` (of size 2) is `lane`.
    fn lane_is<'b>(&'b self, op: &str, lane: i64, shape: Shape, loc: SourceLoc) -> Value<'b> {
        let rank = shape.rank();
        let mut idx = self.emit1(Op::Arange { start: 0, end: 2 }, None, loc);
        // Leading dimensions of 1 by `expand_dims`, not `reshape`: the index stays
        // arithmetic the lowering recomputes in whatever layout the data has.
        for _ in 1..rank {
            idx = self.emit1(Op::ExpandDims { value: idx.id, axis: 0 }, None, loc);
        }
        let idx = self.broadcast_to(op, idx, shape, loc);
        self.compare(CmpOp::Eq, idx.into(), Operand::Int(lane as i128), loc)
    }

    /// The two halves of a block whose last dimension has size 2, as `tl.split(a)`: the
    /// inverse of [`Self::join`] (`a[..., 0]`, `a[..., 1]`; a block of 2 gives two scalars).
    /// Floats are taken with a NaN-propagating maximum against -∞ (a NaN comes out as a
    /// NaN, possibly another one), integers with a sum against 0: both exact, and neither
    /// flushes subnormals.
    #[track_caller]
    pub fn split<'b>(&'b self, a: Value<'b>) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let a = self.adopt("split", a, loc);
        let t = a.ty();
        if self.is_poisoned(a.id) {
            return (self.poison(t), self.poison(t));
        }
        let rank = t.shape.rank();
        let Some(s) = t.scalar_type().filter(|_| rank > 0 && t.shape.dims()[rank - 1] == 2) else {
            let message = format!("needs a block of numbers whose last dimension has size 2, got {t}");
            let f = self.fail("split", loc, message, t);
            return (f, f);
        };
        let half = |lane: i64| {
            let pick = self.lane_is("split", lane, t.shape, loc);
            let (v, op, filler) = if s.is_float() {
                (a, ReduceOp::Max, Literal::Float(f64::NEG_INFINITY))
            } else if s.is_bool() {
                (self.cast_to(a, ScalarType::I32, loc), ReduceOp::Sum, Literal::Int(0))
            } else {
                (a, ReduceOp::Sum, Literal::Int(0))
            };
            let filler = self.constant(filler, v.ty(), loc);
            let masked = self.emit1(
                Op::Select {
                    cond: pick.id,
                    on_true: v.id,
                    on_false: filler.id,
                },
                None,
                loc,
            );
            let r = self.emit1(
                Op::Reduce {
                    op,
                    value: masked.id,
                    axis: (rank - 1) as u8,
                },
                None,
                loc,
            );
            if s.is_bool() {
                self.compare(CmpOp::Ne, r.into(), Operand::Int(0), loc)
            } else {
                r
            }
        };
        (half(0), half(1))
    }

    /// `a` and `b` interleaved along their last axis, as `tl.interleave(a, b)`:
    /// `[a0, b0, a1, b1, ...]` (for 2-D blocks, row by row); [`Self::join`] reshaped.
    #[track_caller]
    pub fn interleave<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let j = self.join_at("interleave", a, b, loc);
        if self.is_poisoned(j.id) {
            return j;
        }
        let dims = j.ty().shape.dims().to_vec();
        let mut out = dims[..dims.len() - 1].to_vec();
        match out.last_mut() {
            Some(last) => *last *= 2,
            None => out.push(2),
        }
        let shape = Shape::new(&out).expect("no higher rank than the operands'");
        self.emit1(Op::Reshape { value: j.id }, Some(j.ty().with_shape(shape)), loc)
    }

    /// `a` followed by `b` along the first axis, both of one shape: rutile's `cat(a, b)` is
    /// the plain concatenation (for 1-D blocks `[a..., b...]`), where Triton's `tl.cat`
    /// requires `can_reorder=True` and leaves the order of the elements open.
    #[track_caller]
    pub fn cat<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let (ta, tb) = (a.ty(), b.ty());
        if ta.shape != tb.shape || ta.shape.rank() == 0 {
            let (a, b) = (self.adopt("cat", a, loc), self.adopt("cat", b, loc));
            if self.is_poisoned(a.id) || self.is_poisoned(b.id) {
                return self.poison(ta);
            }
            let message = format!("needs two blocks of one shape, got {ta} and {tb}");
            return self.fail("cat", loc, message, ta);
        }
        let j = self.join_at("cat", a, b, loc);
        if self.is_poisoned(j.id) {
            return j;
        }
        // [d0, ..., 2] → [2, d0, ...] → [2·d0, ...]: a's elements, then b's.
        let rank = ta.shape.rank();
        let mut perm = vec![rank as u8];
        perm.extend(0..rank as u8);
        let p = self.emit1(Op::Permute { value: j.id, perm }, None, loc);
        let mut dims = ta.shape.dims().to_vec();
        dims[0] *= 2;
        let shape = Shape::new(&dims).expect("the operands' rank");
        self.emit1(Op::Reshape { value: p.id }, Some(ta.with_shape(shape)), loc)
    }
}
