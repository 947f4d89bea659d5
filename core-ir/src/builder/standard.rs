//! The functions of `triton.language` that Triton itself writes in Python from other ops
//! (its `standard.py`): `flip`, `topk`, `xor_sum`, `swizzle2d`, `softmax`, `ravel`,
//! `zeros_like` and `div_rn`, built here from ops the IR already has (`gather`, `sort`, a
//! reduction with a combine, integer arithmetic, `reshape`, `fdiv`), so that the
//! interpreter, the lowering and every backend run them without knowing them. Each checks
//! its operands first, so that a mistake is reported under the function's own name, not
//! under an op it is made of.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{BinaryOp, ReduceOp, SourceLoc};
use crate::types::{ScalarType, Type};

impl KernelBuilder {
    /// `x` reversed along `axis`, as `tl.flip(x, dim)`: `flip(x)[.., i, ..] =
    /// x[.., n - 1 - i, ..]` for an axis of length `n`. Triton's `dim` defaults to the last
    /// axis; here it is always given. Any element type; `x` must be a block.
    #[track_caller]
    pub fn flip<'b>(&'b self, x: Value<'b>, axis: u32) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("flip", x, loc);
        if self.is_poisoned(x.id) {
            return self.poison(x.ty());
        }
        let dims = x.shape();
        if axis as usize >= dims.len() {
            let message = format!("axis {axis} is out of range for a value of type {}", x.ty());
            return self.fail("flip", loc, message, x.ty());
        }
        // The source index of each element: n - 1 - i along the axis, the same across the
        // others (a gather's index has the source's shape off its axis).
        let n = dims[axis as usize] as i32;
        let index = along_axis((n - 1) - self.arange(0, n), dims.len(), axis);
        self.gather(x, index.broadcast_to(&dims), axis)
    }

    /// The `k` largest elements of `x` along `axis`, largest first, as `tl.topk(x, k, dim)`:
    /// `x` sorted descending along the axis (see [`Op::Sort`](crate::ir::Op::Sort) for NaNs)
    /// and its first `k` there, by a gather. `k` is a power of two, at most the axis's
    /// length.
    #[track_caller]
    pub fn topk<'b>(&'b self, x: Value<'b>, k: u32, axis: u32) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("topk", x, loc);
        if self.is_poisoned(x.id) {
            return self.poison(x.ty());
        }
        let mut dims = x.shape();
        if axis as usize >= dims.len() {
            let message = format!("axis {axis} is out of range for a value of type {}", x.ty());
            return self.fail("topk", loc, message, x.ty());
        }
        let len = dims[axis as usize];
        if !k.is_power_of_two() || k > len {
            let message = format!("k must be a power of two of at most the axis's {len} elements, got {k}");
            return self.fail("topk", loc, message, x.ty());
        }
        let sorted = self.sort(x, axis, true);
        dims[axis as usize] = k;
        let first = along_axis(self.arange(0, k as i32), dims.len(), axis);
        self.gather(sorted, first.broadcast_to(&dims), axis)
    }

    /// The bitwise exclusive or of `x`'s elements along `axis`, as `tl.xor_sum(x, axis,
    /// keep_dims)` (integers only; Triton's `axis=None`, the whole block, is a `ravel`
    /// first).
    #[track_caller]
    pub fn xor_sum<'b>(&'b self, x: Value<'b>, axis: u32, keep_dims: bool) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("xor_sum", x, loc);
        if let Err(message) = self.along_axis(x, axis, |t| t.is_int()) {
            return self.fail("xor_sum", loc, format!("{message}; it takes integers"), x.ty());
        }
        x.reduce(axis, keep_dims, |_, a, b| a ^ b)
    }

    /// Where element `(i, j)` of a row-major `size_i x size_j` matrix goes when the matrix is
    /// walked column by column in groups of `size_g` rows, as `tl.swizzle2d(i, j, size_i,
    /// size_j, size_g)` (the last group may have fewer rows): the new `(i, j)`. With
    /// `size_i = size_j = 4` and `size_g = 2`, writing each element's row-major index where
    /// it goes turns `[[0, 1, 2, 3], [4, 5, 6, 7], [8, .., 11], [12, .., 15]]` into `[[0, 2,
    /// 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]`: how matmul programs are
    /// ordered so that those running together share rows of A. Integer operands, broadcast
    /// together; non-negative indices, positive sizes.
    #[track_caller]
    pub fn swizzle2d<'b>(
        &'b self,
        i: impl Into<Operand<'b>>,
        j: impl Into<Operand<'b>>,
        size_i: impl Into<Operand<'b>>,
        size_j: impl Into<Operand<'b>>,
        size_g: impl Into<Operand<'b>>,
    ) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let operands = [i.into(), j.into(), size_i.into(), size_j.into(), size_g.into()];
        let names = ["i", "j", "size_i", "size_j", "size_g"];
        for (operand, name) in operands.iter().zip(names) {
            match operand {
                Operand::Value(v) if !v.dtype().is_some_and(|t| t.is_int()) => {
                    let message = format!("`{name}` must be an integer, got {}", v.ty());
                    let poison = self.fail("swizzle2d", loc, message, v.ty());
                    return (poison, poison);
                }
                Operand::Float(_) | Operand::Bool(_) => {
                    let message = format!("`{name}` must be an integer, got {operand:?}");
                    let poison = self.fail("swizzle2d", loc, message, Type::scalar(ScalarType::I32));
                    return (poison, poison);
                }
                _ => {}
            }
        }
        let [i, j, size_i, size_j, size_g] = operands;
        let op = |op, a: Operand<'b>, b: Operand<'b>| Operand::Value(self.binary(op, a, b, loc));
        // The row-major index, and the group of `size_g` full rows it falls in.
        let ij = op(BinaryOp::Add, op(BinaryOp::Mul, i, size_j), j);
        let size_gj = op(BinaryOp::Mul, size_g, size_j);
        let off_i = op(BinaryOp::Mul, op(BinaryOp::Div, ij, size_gj), size_g);
        // The last group may have fewer rows.
        let rows = op(BinaryOp::Min, op(BinaryOp::Sub, size_i, off_i), size_g);
        let in_group = op(BinaryOp::Rem, ij, size_gj);
        let new_i = self.binary(BinaryOp::Add, off_i, op(BinaryOp::Rem, in_group, rows), loc);
        let new_j = self.binary(BinaryOp::Div, in_group, rows, loc);
        (new_i, new_j)
    }

    /// `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis`, as `tl.softmax(x, dim,
    /// ieee_rounding=...)`: the division correctly rounded where `ieee_rounding` says, as
    /// [`Value::fdiv`]. The maximum and the sum keep the reduced axis (size 1) to broadcast
    /// back, so the result is the softmax along `axis` whatever the axis (Triton's
    /// `keep_dims`, which only changes how those two broadcast, is not taken: without it
    /// they broadcast against the last axis). Float blocks only.
    #[track_caller]
    pub fn softmax<'b>(&'b self, x: Value<'b>, axis: u32, ieee_rounding: bool) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("softmax", x, loc);
        if let Err(message) = self.along_axis(x, axis, |t| t.is_float()) {
            return self.fail("softmax", loc, format!("{message}; it takes floats"), x.ty());
        }
        let z = x - x.reduce_with(ReduceOp::Max, axis, true);
        let num = z.exp();
        num.fdiv(num.reduce_with(ReduceOp::Sum, axis, true), ieee_rounding)
    }

    /// A block of zeros of `x`'s shape and element type, as `tl.zeros_like(x)` (a scalar
    /// zero for a scalar).
    #[track_caller]
    pub fn zeros_like<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("zeros_like", x, loc);
        let Some(dtype) = x.dtype() else {
            let message = format!("takes numbers, not pointers: got {}", x.ty());
            return self.fail("zeros_like", loc, message, x.ty());
        };
        match x.shape().as_slice() {
            [] => self.scalar(0, dtype),
            dims => self.zeros(dims, dtype),
        }
    }

    /// Checks that `x` is a block with an axis `axis` and an element type `elem` accepts;
    /// `Err` says which is not so.
    fn along_axis(&self, x: Value<'_>, axis: u32, elem: impl Fn(ScalarType) -> bool) -> Result<(), String> {
        let ty = x.ty();
        if self.is_poisoned(x.id) {
            return Ok(());
        }
        if !x.dtype().is_some_and(elem) {
            return Err(format!("got {ty}"));
        }
        if axis as usize >= x.shape().len() {
            return Err(format!("axis {axis} is out of range for a value of type {ty}"));
        }
        Ok(())
    }
}

/// The 1-D block `v` as axis `axis` of a block of rank `rank`, its other dimensions of
/// size 1 (to broadcast along them).
pub(super) fn along_axis(v: Value<'_>, rank: usize, axis: u32) -> Value<'_> {
    (0..rank as u32)
        .filter(|&a| a != axis)
        .fold(v, |v, other| v.expand_dims(other))
}

impl<'b> Value<'b> {
    /// `tl.flip(self, dim)`; see [`KernelBuilder::flip`].
    #[track_caller]
    pub fn flip(self, axis: u32) -> Value<'b> {
        self.builder.flip(self, axis)
    }

    /// `tl.topk(self, k, dim)`; see [`KernelBuilder::topk`].
    #[track_caller]
    pub fn topk(self, k: u32, axis: u32) -> Value<'b> {
        self.builder.topk(self, k, axis)
    }

    /// `tl.xor_sum(self, axis, keep_dims)`; see [`KernelBuilder::xor_sum`].
    #[track_caller]
    pub fn xor_sum(self, axis: u32, keep_dims: bool) -> Value<'b> {
        self.builder.xor_sum(self, axis, keep_dims)
    }

    /// `tl.softmax(self, dim, ieee_rounding=...)`; see [`KernelBuilder::softmax`].
    #[track_caller]
    pub fn softmax(self, axis: u32, ieee_rounding: bool) -> Value<'b> {
        self.builder.softmax(self, axis, ieee_rounding)
    }

    /// The block's elements in one dimension, in row-major order, as `tl.ravel(self)`:
    /// `reshape` to `[numel]`.
    #[track_caller]
    pub fn ravel(self) -> Value<'b> {
        let numel = self.shape().iter().product::<u32>();
        self.reshape(&[numel])
    }

    /// `self / other` correctly rounded, as `tl.div_rn`: [`Value::fdiv`] with
    /// `ieee_rounding` (through Vulkan, the device's division, within 2.5 ulp).
    #[track_caller]
    pub fn div_rn(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.fdiv(other, true)
    }
}
