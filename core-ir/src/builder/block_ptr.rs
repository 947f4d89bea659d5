//! Triton's block pointers (`tl.make_block_ptr`, `tl.advance`, `tl.load` and `tl.store` of
//! a block pointer with `boundary_check`) and tensor descriptors
//! (`tl.make_tensor_descriptor`, `desc.load`, `desc.store`), built from the ops the IR
//! already has: a block's element pointers are `base + Σ (offset_d + i_d) * stride_d`, and
//! a bounds check is the mask `0 <= offset_d + i_d < shape_d` of a masked load or store. So
//! the interpreter, the lowering (its coalescing and vector width analyses see the usual
//! `offset + arange` times a stride) and every backend run them without knowing them.
//!
//! A block pointer is a description, not a value: it lives in the host-side builder, and a
//! loop that walks one advances it by its own induction variable (`ptr.advance([0, k])`
//! inside `for_range`), where Triton carries the advanced pointer from one iteration to the
//! next.

use super::standard::along_axis;
use super::{KernelBuilder, Operand, Value};
use crate::ir::{CmpOp, SourceLoc};
use crate::types::{Elem, ScalarType, Shape, Type};

/// A block pointer (`tl.make_block_ptr`): a `block_shape` window at `offsets` into a tensor
/// of `shape` (elements, per dimension) laid out with `strides` (elements) from `base`. Made
/// by [`KernelBuilder::make_block_ptr`]; loaded and stored by [`KernelBuilder::load_block`]
/// and [`KernelBuilder::store_block`].
#[derive(Clone, Debug)]
pub struct BlockPtr<'b> {
    base: Value<'b>,
    shape: Vec<Value<'b>>,
    strides: Vec<Value<'b>>,
    offsets: Vec<Value<'b>>,
    block_shape: Vec<u32>,
    order: Vec<u32>,
    /// False when making it (or advancing it) failed: an error is recorded, and its loads
    /// are placeholders.
    valid: bool,
}

/// What a load through a block pointer gives outside the tensor where its dimension is
/// bounds-checked (Triton's `padding_option`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Zeros (`"zero"`; also what rutile gives for Triton's `""`, "undefined").
    Zero,
    /// NaN (`"nan"`), for float tensors.
    Nan,
}

/// A tensor descriptor (`tl.make_tensor_descriptor`): a tensor of `shape` with `strides`
/// from `base`, read and written in blocks of `block_shape` at offsets given at each access,
/// every dimension bounds-checked (zeros read outside the tensor, nothing written there).
/// Made by [`KernelBuilder::make_tensor_descriptor`].
#[derive(Clone, Debug)]
pub struct TensorDescriptor<'b> {
    block: BlockPtr<'b>,
}

/// One integer a dimension: a block pointer's shape, strides, offsets and deltas. Arrays,
/// vectors and slices of one type (`[m, n]`, `[64, 1]`), or tuples of up to three that mix
/// values and literals (`(stride_m, 1)`).
pub trait Indices<'b> {
    /// The integers, one a dimension.
    fn operands(self) -> Vec<Operand<'b>>;
}

impl<'b, T: Into<Operand<'b>>, const N: usize> Indices<'b> for [T; N] {
    fn operands(self) -> Vec<Operand<'b>> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<'b, T: Into<Operand<'b>>> Indices<'b> for Vec<T> {
    fn operands(self) -> Vec<Operand<'b>> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<'b, T: Into<Operand<'b>> + Copy> Indices<'b> for &[T] {
    fn operands(self) -> Vec<Operand<'b>> {
        self.iter().map(|&t| t.into()).collect()
    }
}

impl<'b, A: Into<Operand<'b>>> Indices<'b> for (A,) {
    fn operands(self) -> Vec<Operand<'b>> {
        vec![self.0.into()]
    }
}

impl<'b, A: Into<Operand<'b>>, B: Into<Operand<'b>>> Indices<'b> for (A, B) {
    fn operands(self) -> Vec<Operand<'b>> {
        vec![self.0.into(), self.1.into()]
    }
}

impl<'b, A: Into<Operand<'b>>, B: Into<Operand<'b>>, C: Into<Operand<'b>>> Indices<'b> for (A, B, C) {
    fn operands(self) -> Vec<Operand<'b>> {
        vec![self.0.into(), self.1.into(), self.2.into()]
    }
}

impl<'b> BlockPtr<'b> {
    /// The window's element type.
    pub fn dtype(&self) -> Option<ScalarType> {
        match self.base.ty().elem {
            Elem::Ptr(t) => Some(t),
            Elem::Scalar(_) => None,
        }
    }

    /// The window's shape.
    pub fn block_shape(&self) -> &[u32] {
        &self.block_shape
    }

    /// The dimensions from the fastest-varying to the slowest, as given (Triton takes it as
    /// a layout hint; rutile's layouts follow the strides and offsets instead).
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// The same window moved by `deltas` elements along each dimension, as
    /// `tl.advance(ptr, deltas)`.
    #[track_caller]
    pub fn advance(&self, deltas: impl Indices<'b>) -> BlockPtr<'b> {
        self.moved("advance", "deltas", deltas, true, SourceLoc::caller())
    }

    /// The window at `offsets` (added to its own where `add`, else in their place), one a
    /// dimension, or an invalid copy after reporting under `op` that the count is wrong.
    fn moved(&self, op: &str, what: &str, offsets: impl Indices<'b>, add: bool, loc: SourceLoc) -> BlockPtr<'b> {
        let k = self.base.builder();
        let offsets = k.index_operands(op, what, offsets, loc);
        let mut moved = self.clone();
        match offsets {
            Some(o) if o.len() == self.offsets.len() => {
                moved.offsets = match add {
                    true => self.offsets.iter().zip(o).map(|(&a, b)| a + b).collect(),
                    false => o,
                };
            }
            Some(o) => {
                let message = format!(
                    "takes one offset a dimension: got {} for a block of rank {}",
                    o.len(),
                    self.offsets.len()
                );
                k.report(op, loc, message);
                moved.valid = false;
            }
            None => moved.valid = false,
        }
        moved
    }
}

impl<'b> TensorDescriptor<'b> {
    /// The block at element `offsets` (one a dimension), zeros where it leaves the tensor,
    /// as `desc.load(offsets)`.
    #[track_caller]
    pub fn load(&self, offsets: impl Indices<'b>) -> Value<'b> {
        let block = self
            .block
            .moved("descriptor load", "offsets", offsets, false, SourceLoc::caller());
        block
            .base
            .builder()
            .load_block(&block, &self.every_dimension(), Padding::Zero)
    }

    /// Stores `value` (the block's shape, or broadcast to it) at element `offsets`, nothing
    /// where it leaves the tensor, as `desc.store(offsets, value)`.
    #[track_caller]
    pub fn store(&self, offsets: impl Indices<'b>, value: impl Into<Operand<'b>>) {
        let block = self
            .block
            .moved("descriptor store", "offsets", offsets, false, SourceLoc::caller());
        block.base.builder().store_block(&block, value, &self.every_dimension())
    }

    /// Every dimension, for the bounds checks of each access.
    fn every_dimension(&self) -> Vec<u32> {
        (0..self.block.block_shape.len() as u32).collect()
    }

    /// The blocks' shape.
    pub fn block_shape(&self) -> &[u32] {
        &self.block.block_shape
    }
}

impl KernelBuilder {
    /// A block pointer, as `tl.make_block_ptr(base, shape, strides, offsets, block_shape,
    /// order)`: `base` a pointer, then one integer a dimension for the tensor's `shape`, its
    /// `strides` and the window's `offsets` (elements; literals or scalar values), the
    /// window's `block_shape` (powers of two, rank 1 to 3) and `order` (a permutation of the
    /// dimensions). Nothing is checked against the tensor here: [`Self::load_block`] and
    /// [`Self::store_block`] check the dimensions they are asked to.
    ///
    /// ```
    /// use rutile_ir::{Kernel, Padding, ScalarType};
    /// // Each program copies a 32 x 64 tile of an M x N matrix; the tiles at the edges are
    /// // cut to the matrix.
    /// let kernel = Kernel::build("tile_copy", |k| {
    ///     let (x, y) = (k.arg_ptr("x", ScalarType::F32), k.arg_ptr("y", ScalarType::F32));
    ///     let (m, n, stride) = (k.arg_i32("M"), k.arg_i32("N"), k.arg_i32("stride"));
    ///     let at = (k.program_id(0) * 32, k.program_id(1) * 64);
    ///     let src = k.make_block_ptr(x, (m, n), (stride, 1), at, &[32, 64], &[1, 0]);
    ///     let dst = k.make_block_ptr(y, (m, n), (stride, 1), at, &[32, 64], &[1, 0]);
    ///     k.store_block(&dst, k.load_block(&src, &[0, 1], Padding::Zero), &[0, 1]);
    /// });
    /// assert!(kernel.is_ok());
    /// ```
    #[track_caller]
    #[allow(clippy::too_many_arguments)] // Triton's signature, argument for argument
    pub fn make_block_ptr<'b>(
        &'b self,
        base: Value<'b>,
        shape: impl Indices<'b>,
        strides: impl Indices<'b>,
        offsets: impl Indices<'b>,
        block_shape: &[u32],
        order: &[u32],
    ) -> BlockPtr<'b> {
        let loc = SourceLoc::caller();
        self.block_ptr_at(
            "make_block_ptr",
            base,
            shape,
            strides,
            offsets,
            block_shape,
            Some(order),
            loc,
        )
    }

    /// A tensor descriptor, as `tl.make_tensor_descriptor(base, shape, strides,
    /// block_shape)`. Triton asks for a 16-byte aligned base, strides that are multiples of
    /// 16 bytes but the last, which is 1 (what TMA needs); rutile reads and writes through
    /// ordinary loads and stores, so any strides work, and a kernel within Triton's rules runs
    /// the same.
    #[track_caller]
    pub fn make_tensor_descriptor<'b>(
        &'b self,
        base: Value<'b>,
        shape: impl Indices<'b>,
        strides: impl Indices<'b>,
        block_shape: &[u32],
    ) -> TensorDescriptor<'b> {
        let loc = SourceLoc::caller();
        // Each access puts its own offsets in place of these.
        let zeros = vec![0i32; block_shape.len()];
        let block = self.block_ptr_at(
            "make_tensor_descriptor",
            base,
            shape,
            strides,
            zeros,
            block_shape,
            None,
            loc,
        );
        TensorDescriptor { block }
    }

    /// The block `ptr` points at, as `tl.load(ptr, boundary_check=..., padding_option=...)`:
    /// along each dimension of `boundary_check`, elements outside `[0, shape)` are not read
    /// and are `padding` instead; along the others every element is read (the kernel
    /// answers for them being inside the tensor, as in Triton).
    #[track_caller]
    pub fn load_block<'b>(&'b self, ptr: &BlockPtr<'b>, boundary_check: &[u32], padding: Padding) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some(dtype) = ptr.dtype() else {
            return self.poison(ptr.base.ty());
        };
        let fallback =
            Shape::new(&ptr.block_shape).map_or(Type::scalar(dtype), |s| Type::block(Elem::Scalar(dtype), s));
        if !ptr.valid {
            return self.poison(fallback);
        }
        if padding == Padding::Nan && !dtype.is_float() {
            let message = format!("NaN padding needs a float tensor, got {dtype}");
            return self.fail("load_block", loc, message, fallback);
        }
        let Some((pointers, mask)) = self.block_addresses("load_block", ptr, boundary_check, loc) else {
            return self.poison(fallback);
        };
        match (mask, padding) {
            (None, _) => self.load(pointers),
            (Some(mask), Padding::Zero) => self.load_masked(pointers, mask, 0),
            (Some(mask), Padding::Nan) => self.load_masked(pointers, mask, f64::NAN),
        }
    }

    /// Stores `value` (converted to the tensor's element type; the block's shape, or
    /// broadcast to it) where `ptr` points, as `tl.store(ptr, value, boundary_check=...)`:
    /// along each dimension of `boundary_check`, nothing is written outside `[0, shape)`.
    #[track_caller]
    pub fn store_block<'b>(&'b self, ptr: &BlockPtr<'b>, value: impl Into<Operand<'b>>, boundary_check: &[u32]) {
        let loc = SourceLoc::caller();
        let value = self.adopt_operand("store_block", value.into(), loc);
        if !ptr.valid || ptr.dtype().is_none() {
            return;
        }
        if let Operand::Value(v) = value {
            let fits = Shape::new(&ptr.block_shape)
                .and_then(|block| Shape::broadcast(v.ty().shape, block).filter(|&s| s == block));
            if fits.is_none() && !self.is_poisoned(v.id) {
                let message = format!(
                    "the value ({}) does not fit the block {:?}: it must have the block's shape or broadcast to it",
                    v.ty(),
                    ptr.block_shape
                );
                self.report("store_block", loc, message);
                return;
            }
        }
        let Some((pointers, mask)) = self.block_addresses("store_block", ptr, boundary_check, loc) else {
            return;
        };
        match mask {
            None => self.store(pointers, value),
            Some(mask) => self.store_masked(pointers, value, mask),
        }
    }

    /// [`Self::make_block_ptr`] under `op`'s name; `order` `None`: the dimensions from the
    /// last (row-major).
    #[allow(clippy::too_many_arguments)] // make_block_ptr's arguments and where it was called
    fn block_ptr_at<'b>(
        &'b self,
        op: &str,
        base: Value<'b>,
        shape: impl Indices<'b>,
        strides: impl Indices<'b>,
        offsets: impl Indices<'b>,
        block_shape: &[u32],
        order: Option<&[u32]>,
        loc: SourceLoc,
    ) -> BlockPtr<'b> {
        let base = self.adopt(op, base, loc);
        let rank = block_shape.len();
        let order = order.map_or_else(|| (0..rank as u32).rev().collect(), <[u32]>::to_vec);
        let shape = self.index_operands(op, "shape", shape, loc);
        let strides = self.index_operands(op, "strides", strides, loc);
        let offsets = self.index_operands(op, "offsets", offsets, loc);
        let mut valid = shape.is_some() && strides.is_some() && offsets.is_some() && !self.is_poisoned(base.id);
        let problem = if !valid {
            None
        } else if !matches!(base.ty().elem, Elem::Ptr(_)) || !base.ty().shape.dims().is_empty() {
            Some(format!("`base` must be a pointer, got {}", base.ty()))
        } else if let Some(message) = Shape::new(block_shape).map_or(
            Some(format!("`block_shape` {block_shape:?} has rank 1 to 3 here")),
            |s| {
                crate::typing::check_block_shape(s)
                    .err()
                    .or_else(|| (rank == 0).then(|| "`block_shape` needs at least one dimension".to_string()))
            },
        ) {
            Some(message)
        } else if let Some((name, n)) = [("shape", &shape), ("strides", &strides), ("offsets", &offsets)]
            .into_iter()
            .map(|(name, v)| (name, v.as_ref().map_or(rank, Vec::len)))
            .chain([("order", order.len())])
            .find(|&(_, n)| n != rank)
        {
            Some(format!("`{name}` has {n} dimensions where `block_shape` has {rank}"))
        } else {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            (sorted != (0..rank as u32).collect::<Vec<_>>())
                .then(|| format!("`order` {order:?} is not a permutation of the {rank} dimensions"))
        };
        if let Some(message) = problem {
            self.report(op, loc, message);
            valid = false;
        }
        BlockPtr {
            base,
            shape: shape.unwrap_or_default(),
            strides: strides.unwrap_or_default(),
            offsets: offsets.unwrap_or_default(),
            block_shape: block_shape.to_vec(),
            order,
            valid,
        }
    }

    /// `items` as scalar integer values (literals as `i32`, or `i64` past its range), or
    /// `None` after reporting the first that is not one.
    fn index_operands<'b>(
        &'b self,
        op: &str,
        what: &str,
        items: impl Indices<'b>,
        loc: SourceLoc,
    ) -> Option<Vec<Value<'b>>> {
        let mut values = Vec::new();
        for (d, item) in items.operands().into_iter().enumerate() {
            let value = match self.adopt_operand(op, item, loc) {
                Operand::Int(i) => {
                    let t = if i32::try_from(i).is_ok() {
                        ScalarType::I32
                    } else {
                        ScalarType::I64
                    };
                    self.literal_as(op, Operand::Int(i), t, Shape::SCALAR, loc)
                }
                Operand::Value(v) if v.dtype().is_some_and(|t| t.is_int()) && v.shape().is_empty() => v,
                Operand::Value(v) if self.is_poisoned(v.id) => return None,
                other => {
                    let got = match other {
                        Operand::Value(v) => v.ty().to_string(),
                        literal => format!("{literal:?}"),
                    };
                    self.report(op, loc, format!("`{what}[{d}]` must be a scalar integer, got {got}"));
                    return None;
                }
            };
            values.push(value);
        }
        Some(values)
    }

    /// The element pointers of `ptr`'s block and, where `boundary_check` names dimensions,
    /// the mask of the elements inside the tensor along them; `None` after reporting a
    /// dimension out of range.
    fn block_addresses<'b>(
        &'b self,
        op: &str,
        ptr: &BlockPtr<'b>,
        boundary_check: &[u32],
        loc: SourceLoc,
    ) -> Option<(Value<'b>, Option<Value<'b>>)> {
        let rank = ptr.block_shape.len();
        if let Some(d) = boundary_check.iter().find(|&&d| d as usize >= rank) {
            let message = format!("`boundary_check` names dimension {d} of a block of rank {rank}");
            self.report(op, loc, message);
            return None;
        }
        let mut pointers = ptr.base;
        let mut mask: Option<Value<'b>> = None;
        for d in 0..rank {
            // The tensor index of each element along `d`, shaped to broadcast along the
            // other dimensions.
            let index = along_axis(
                ptr.offsets[d] + self.arange(0, ptr.block_shape[d] as i32),
                rank,
                d as u32,
            );
            pointers = pointers + index * ptr.strides[d];
            if boundary_check.contains(&(d as u32)) {
                let inside = self.compare(CmpOp::Ge, index.into(), 0.into(), loc)
                    & self.compare(CmpOp::Lt, index.into(), ptr.shape[d].into(), loc);
                mask = Some(match mask {
                    Some(m) => m & inside,
                    None => inside,
                });
            }
        }
        let block = Shape::new(&ptr.block_shape)?;
        let pointers = self.broadcast_to(op, pointers, block, loc);
        Some((pointers, mask.map(|m| self.broadcast_to(op, m, block, loc))))
    }
}
