//! The ops of `triton.language`, as methods of the builder and of values.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{
    AtomicOp, AtomicOrder, BinaryOp, CacheModifier, CmpOp, DotOptions, DotPrecision, Op, ReduceOp, SourceLoc, UnaryOp,
    ValueId,
};
use crate::types::{Elem, ScalarType, Shape, Type};

/// A shape given by the kernel author, checked: rank at most 3, power-of-two dimensions.
fn block_shape(k: &KernelBuilder, op: &str, dims: &[u32], loc: SourceLoc) -> Option<Shape> {
    let shape = Shape::new(dims);
    let problem = match shape {
        None => Some(format!(
            "blocks have rank at most {}, got {dims:?}",
            crate::types::MAX_RANK
        )),
        Some(s) => crate::typing::check_block_shape(s).err(),
    };
    if let Some(message) = problem {
        k.report(op, loc, message);
        return None;
    }
    shape
}

impl KernelBuilder {
    /// Declares a pointer parameter to elements of type `elem`.
    #[track_caller]
    pub fn arg_ptr(&self, name: &str, elem: ScalarType) -> Value<'_> {
        self.arg(name, Type::ptr(elem))
    }
    /// Declares an `i32` parameter.
    #[track_caller]
    pub fn arg_i32(&self, name: &str) -> Value<'_> {
        self.arg(name, Type::scalar(ScalarType::I32))
    }
    /// Declares a scalar parameter of type `s`.
    #[track_caller]
    pub fn arg_scalar(&self, name: &str, s: ScalarType) -> Value<'_> {
        self.arg(name, Type::scalar(s))
    }

    /// The index of this program along grid axis `axis` (0, 1 or 2), as `tl.program_id`.
    #[track_caller]
    pub fn program_id(&self, axis: u32) -> Value<'_> {
        match grid_axis(axis) {
            Some(axis) => self.emit1(Op::ProgramId { axis }, None, SourceLoc::caller()),
            None => self.bad_grid_axis("program_id", axis),
        }
    }
    /// The number of programs along grid axis `axis`, as `tl.num_programs`.
    #[track_caller]
    pub fn num_programs(&self, axis: u32) -> Value<'_> {
        match grid_axis(axis) {
            Some(axis) => self.emit1(Op::NumPrograms { axis }, None, SourceLoc::caller()),
            None => self.bad_grid_axis("num_programs", axis),
        }
    }

    /// The error of a grid axis past 2, naming the axis as the caller gave it.
    #[track_caller]
    fn bad_grid_axis(&self, op: &str, axis: u32) -> Value<'_> {
        let message = format!("axis must be 0, 1 or 2, got {axis}");
        self.fail(op, SourceLoc::caller(), message, Type::scalar(ScalarType::I32))
    }

    /// `[start, ..., end - 1]` as an `i32` block; the length must be a power of two.
    #[track_caller]
    pub fn arange(&self, start: i32, end: i32) -> Value<'_> {
        self.emit1(Op::Arange { start, end }, None, SourceLoc::caller())
    }

    /// A block of `shape` filled with `value`, of element type `dtype`, as `tl.full`.
    #[track_caller]
    pub fn full(&self, shape: &[u32], value: impl Into<Operand<'static>>, dtype: ScalarType) -> Value<'_> {
        let loc = SourceLoc::caller();
        let Some(shape) = block_shape(self, "full", shape, loc) else {
            return self.poison(Type::scalar(dtype));
        };
        self.literal_as("full", value.into(), dtype, shape, loc)
    }
    /// A block of zeros, as `tl.zeros`.
    #[track_caller]
    pub fn zeros(&self, shape: &[u32], dtype: ScalarType) -> Value<'_> {
        self.full(shape, 0, dtype)
    }
    /// A scalar constant of type `dtype`.
    #[track_caller]
    pub fn scalar(&self, value: impl Into<Operand<'static>>, dtype: ScalarType) -> Value<'_> {
        self.literal_as("constant", value.into(), dtype, Shape::SCALAR, SourceLoc::caller())
    }

    /// Loads the elements at `ptr` (a pointer or block of pointers), as `tl.load(ptr)`.
    #[track_caller]
    pub fn load<'b>(&'b self, ptr: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let ptr = self.adopt("load", ptr, loc);
        self.emit1(
            Op::Load {
                ptr: ptr.id,
                mask: None,
                other: None,
                cache: CacheModifier::Default,
            },
            None,
            loc,
        )
    }

    /// Loads where `mask` is true and gives `other` elsewhere, as
    /// `tl.load(ptr, mask=mask, other=other)`. `mask` and `other` broadcast to the pointer's
    /// shape; `other` is converted to the pointee type.
    #[track_caller]
    pub fn load_masked<'b>(&'b self, ptr: Value<'b>, mask: Value<'b>, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.load_masked_with(ptr, mask, other, CacheModifier::Default)
    }

    /// [`Self::load_masked`] with a cache policy, as `tl.load(..., cache_modifier=".cs")`:
    /// [`CacheModifier::Streaming`] for data each program reads once.
    #[track_caller]
    pub fn load_masked_with<'b>(
        &'b self,
        ptr: Value<'b>,
        mask: Value<'b>,
        other: impl Into<Operand<'b>>,
        cache: CacheModifier,
    ) -> Value<'b> {
        let loc = SourceLoc::caller();
        let (ptr, mask) = (self.adopt("load", ptr, loc), self.adopt("load", mask, loc));
        let other = self.adopt_operand("load", other.into(), loc);
        let pt = ptr.ty();
        let Elem::Ptr(pointee) = pt.elem else {
            if self.is_poisoned(ptr.id) {
                return self.poison(pt);
            }
            return self.fail(
                "load",
                loc,
                format!("needs a pointer or block of pointers, got {pt}"),
                pt,
            );
        };
        let (ptr, mask) = self.pointer_and_mask("load", ptr, mask, loc);
        let pt = ptr.ty();
        let other = match other {
            Operand::Value(v) => {
                let v = self.cast_to(v, pointee, loc);
                self.broadcast_to("load", v, pt.shape, loc)
            }
            lit => self.literal_as("load", lit, pointee, pt.shape, loc),
        };
        self.emit1(
            Op::Load {
                ptr: ptr.id,
                mask: Some(mask.id),
                other: Some(other.id),
                cache,
            },
            None,
            loc,
        )
    }

    /// Stores `value` (converted to the pointee type and broadcast) at `ptr`, as `tl.store`.
    #[track_caller]
    pub fn store<'b>(&'b self, ptr: Value<'b>, value: impl Into<Operand<'b>>) {
        let loc = SourceLoc::caller();
        self.store_impl(ptr, value.into(), None, loc)
    }

    /// Stores where `mask` is true, as `tl.store(ptr, value, mask=mask)`.
    #[track_caller]
    pub fn store_masked<'b>(&'b self, ptr: Value<'b>, value: impl Into<Operand<'b>>, mask: Value<'b>) {
        let loc = SourceLoc::caller();
        self.store_impl(ptr, value.into(), Some(mask), loc)
    }

    fn store_impl<'b>(&'b self, ptr: Value<'b>, value: Operand<'b>, mask: Option<Value<'b>>, loc: SourceLoc) {
        let ptr = self.adopt("store", ptr, loc);
        let value = self.adopt_operand("store", value, loc);
        let mask = mask.map(|m| self.adopt("store", m, loc));
        let pt = ptr.ty();
        let Elem::Ptr(pointee) = pt.elem else {
            if !self.is_poisoned(ptr.id) {
                self.report("store", loc, format!("needs a pointer or block of pointers, got {pt}"));
            }
            return;
        };
        let (ptr, mask) = match mask {
            Some(m) => {
                let (p, m) = self.pointer_and_mask("store", ptr, m, loc);
                (p, Some(m))
            }
            None => (ptr, None),
        };
        let pt = ptr.ty();
        let value = match value {
            Operand::Value(v) => {
                let vt = v.ty();
                if vt.elem.is_ptr() {
                    if !self.is_poisoned(v.id) {
                        self.report("store", loc, format!("cannot store pointers ({vt})"));
                    }
                    return;
                }
                // A value block larger than the pointer block broadcasts the pointers, as
                // `tl.store` does.
                let shape = Shape::broadcast(vt.shape, pt.shape).unwrap_or(pt.shape);
                let v = self.cast_to(v, pointee, loc);
                self.broadcast_to("store", v, shape, loc)
            }
            lit => self.literal_as("store", lit, pointee, pt.shape, loc),
        };
        let shape = value.ty().shape;
        let ptr = self.broadcast_to("store", ptr, shape, loc);
        let mask = mask.map(|m| self.broadcast_to("store", m, shape, loc).id);
        self.emit(
            Op::Store {
                ptr: ptr.id,
                value: value.id,
                mask,
            },
            None,
            loc,
        );
    }

    /// Broadcasts a pointer block and a mask to their common shape.
    fn pointer_and_mask<'b>(
        &'b self,
        op: &str,
        ptr: Value<'b>,
        mask: Value<'b>,
        loc: SourceLoc,
    ) -> (Value<'b>, Value<'b>) {
        let (pt, mt) = (ptr.ty(), mask.ty());
        let shape = Shape::broadcast(pt.shape, mt.shape).unwrap_or(pt.shape);
        (
            self.broadcast_to(op, ptr, shape, loc),
            self.broadcast_to(op, mask, shape, loc),
        )
    }

    /// `cond ? a : b` element-wise with broadcasting, as `tl.where`.
    #[track_caller]
    pub fn where_<'b>(&'b self, cond: Value<'b>, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let cond = self.adopt("where", cond, loc);
        let Some((a, b)) = self.unify("where", a.into(), b.into(), loc) else {
            return self.poison(cond.ty());
        };
        let shape = Shape::broadcast(a.ty().shape, cond.ty().shape).unwrap_or(a.ty().shape);
        let cond = if cond.dtype() == Some(ScalarType::Bool) || cond.ty().elem.is_ptr() {
            cond
        } else {
            // A number used as a condition means "is not zero".
            let s = cond.dtype().expect("not a pointer: checked above");
            let zero = self.literal_as("where", Operand::Int(0), s, cond.ty().shape, loc);
            self.emit1(
                Op::Compare {
                    op: CmpOp::Ne,
                    lhs: cond.id,
                    rhs: zero.id,
                },
                None,
                loc,
            )
        };
        let (cond, a, b) = (
            self.broadcast_to("where", cond, shape, loc),
            self.broadcast_to("where", a, shape, loc),
            self.broadcast_to("where", b, shape, loc),
        );
        self.emit1(
            Op::Select {
                cond: cond.id,
                on_true: a.id,
                on_false: b.id,
            },
            None,
            loc,
        )
    }

    /// Matrix product `a @ b` into a new `f32` accumulator, as `tl.dot(a, b)`. The operands
    /// are f16, bf16, f32 (f64 into an f64 accumulator), or fp8 (E4M3 and E5M2 may mix):
    /// Hopper's warpgroup MMAs multiply fp8 themselves (adding into their own accumulator,
    /// narrower than f32, as Triton's default there; [`Self::dot_with_options`] with
    /// [`DotOptions::max_num_imprecise_acc`] limits how much of K they add there), other
    /// units their exact f16 conversions.
    #[track_caller]
    pub fn dot<'b>(&'b self, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let (a, b) = (self.adopt("dot", a, loc), self.adopt("dot", b, loc));
        let (m, n) = (
            a.shape().first().copied().unwrap_or(1),
            b.shape().get(1).copied().unwrap_or(1),
        );
        let acc_type = if a.dtype() == Some(ScalarType::F64) {
            ScalarType::F64
        } else {
            ScalarType::F32
        };
        let acc = match Shape::new(&[m, n]) {
            Some(shape) => self.literal_as("dot", Operand::Float(0.0), acc_type, shape, loc),
            None => self.poison(a.ty()),
        };
        self.emit1(
            Op::Dot {
                a: a.id,
                b: b.id,
                acc: acc.id,
                precision: DotPrecision::Ieee,
                max_num_imprecise_acc: None,
            },
            None,
            loc,
        )
    }
    /// `a @ b + acc`, as `tl.dot(a, b, acc)`: f32 operands multiplied in full precision
    /// (Triton's `input_precision="ieee"`).
    #[track_caller]
    pub fn dot_acc<'b>(&'b self, a: Value<'b>, b: Value<'b>, acc: Value<'b>) -> Value<'b> {
        self.dot_with_at(a, b, acc, DotOptions::default(), SourceLoc::caller())
    }
    /// `a @ b + acc` with f32 operands multiplied at `precision`, as `tl.dot(a, b, acc,
    /// input_precision=...)`. [`DotPrecision::Tf32`] (f32 operands only) rounds each operand
    /// to tf32 first, which lets NVIDIA's tensor cores run it (sm_80 and later); every
    /// device computes the same products, only the order of the f32 sums differs.
    /// [`DotPrecision::Tf32x3`] runs three tf32 MMAs for products within about 2^-21 of
    /// f32's (Triton's `tf32x3`), and the IEEE `dot` where there are no tensor cores.
    #[track_caller]
    pub fn dot_with<'b>(&'b self, a: Value<'b>, b: Value<'b>, acc: Value<'b>, precision: DotPrecision) -> Value<'b> {
        let options = DotOptions {
            input_precision: precision,
            ..DotOptions::default()
        };
        self.dot_with_at(a, b, acc, options, SourceLoc::caller())
    }
    /// `a @ b + acc` with all of `tl.dot`'s options (`input_precision`,
    /// `max_num_imprecise_acc`): see [`DotOptions`].
    #[track_caller]
    pub fn dot_with_options<'b>(
        &'b self,
        a: Value<'b>,
        b: Value<'b>,
        acc: Value<'b>,
        options: DotOptions,
    ) -> Value<'b> {
        self.dot_with_at(a, b, acc, options, SourceLoc::caller())
    }
    fn dot_with_at<'b>(
        &'b self,
        a: Value<'b>,
        b: Value<'b>,
        acc: Value<'b>,
        options: DotOptions,
        loc: SourceLoc,
    ) -> Value<'b> {
        let [a, b, acc] = [a, b, acc].map(|v| self.adopt("dot", v, loc));
        self.emit1(
            Op::Dot {
                a: a.id,
                b: b.id,
                acc: acc.id,
                precision: options.input_precision,
                max_num_imprecise_acc: options.max_num_imprecise_acc,
            },
            None,
            loc,
        )
    }

    /// Atomic read-modify-write at `ptr` where `mask` holds (everywhere when `None`); returns
    /// the old values. `value` is converted to the pointee type and broadcast. Acquire-release
    /// at device scope, Triton's default; [`Self::atomic_rmw_ordered`] takes `sem` and
    /// `scope`.
    #[track_caller]
    pub fn atomic_rmw<'b>(
        &'b self,
        op: AtomicOp,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_rmw_ordered(op, ptr, value, mask, AtomicOrder::default())
    }
    /// [`Self::atomic_rmw`] with the memory ordering and scope of Triton's `sem` and `scope`
    /// arguments: `k.atomic_rmw_ordered(AtomicOp::Add, p, 1, None, AtomicOrder::relaxed())`
    /// is `tl.atomic_add(p, 1, sem="relaxed")`. A relaxed or acquire atomic waits for no
    /// other thread's stores (no barrier before it).
    #[track_caller]
    pub fn atomic_rmw_ordered<'b>(
        &'b self,
        op: AtomicOp,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
        order: AtomicOrder,
    ) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((ptr, [value], mask)) = self.atomic_operands(op.name(), ptr, [value.into()], mask, loc) else {
            return self.poison(ptr.ty());
        };
        self.emit1(
            Op::Atomic {
                op,
                ptr: ptr.id,
                value: value.id,
                mask: mask.map(|m| m.id),
                order,
            },
            None,
            loc,
        )
    }
    /// `tl.atomic_add`.
    #[track_caller]
    pub fn atomic_add<'b>(
        &'b self,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_rmw(AtomicOp::Add, ptr, value, mask)
    }
    /// `tl.atomic_max`.
    #[track_caller]
    pub fn atomic_max<'b>(
        &'b self,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_rmw(AtomicOp::Max, ptr, value, mask)
    }
    /// `tl.atomic_min`.
    #[track_caller]
    pub fn atomic_min<'b>(
        &'b self,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_rmw(AtomicOp::Min, ptr, value, mask)
    }
    /// `tl.atomic_xchg`.
    #[track_caller]
    pub fn atomic_xchg<'b>(
        &'b self,
        ptr: Value<'b>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_rmw(AtomicOp::Xchg, ptr, value, mask)
    }
    /// Compare-and-swap, as `tl.atomic_cas`: where `*ptr == cmp`, stores `value`.
    /// Acquire-release at device scope; [`Self::atomic_cas_ordered`] takes `sem` and `scope`.
    #[track_caller]
    pub fn atomic_cas<'b>(
        &'b self,
        ptr: Value<'b>,
        cmp: impl Into<Operand<'b>>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
    ) -> Value<'b> {
        self.atomic_cas_ordered(ptr, cmp, value, mask, AtomicOrder::default())
    }
    /// [`Self::atomic_cas`] with the memory ordering and scope of Triton's `sem` and
    /// `scope` arguments (a lock's acquire: `AtomicOrder::new(MemSem::Acquire,
    /// MemScope::Gpu)`).
    #[track_caller]
    pub fn atomic_cas_ordered<'b>(
        &'b self,
        ptr: Value<'b>,
        cmp: impl Into<Operand<'b>>,
        value: impl Into<Operand<'b>>,
        mask: Option<Value<'b>>,
        order: AtomicOrder,
    ) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((ptr, [cmp, value], mask)) =
            self.atomic_operands("atomic_cas", ptr, [cmp.into(), value.into()], mask, loc)
        else {
            return self.poison(ptr.ty());
        };
        self.emit1(
            Op::AtomicCas {
                ptr: ptr.id,
                cmp: cmp.id,
                value: value.id,
                mask: mask.map(|m| m.id),
                order,
            },
            None,
            loc,
        )
    }

    /// Converts an atomic's operands: values to the pointee type, everything broadcast.
    fn atomic_operands<'b, const N: usize>(
        &'b self,
        op: &str,
        ptr: Value<'b>,
        values: [Operand<'b>; N],
        mask: Option<Value<'b>>,
        loc: SourceLoc,
    ) -> Option<(Value<'b>, [Value<'b>; N], Option<Value<'b>>)> {
        let ptr = self.adopt(op, ptr, loc);
        let values = values.map(|v| self.adopt_operand(op, v, loc));
        let mask = mask.map(|m| self.adopt(op, m, loc));
        let pt = ptr.ty();
        let Elem::Ptr(pointee) = pt.elem else {
            if !self.is_poisoned(ptr.id) {
                self.report(op, loc, format!("needs a pointer or block of pointers, got {pt}"));
            }
            return None;
        };
        let (ptr, mask) = match mask {
            Some(m) => {
                let (p, m) = self.pointer_and_mask(op, ptr, m, loc);
                (p, Some(m))
            }
            None => (ptr, None),
        };
        let shape = ptr.ty().shape;
        let values = values.map(|v| match v {
            Operand::Value(v) => {
                let v = self.cast_to(v, pointee, loc);
                self.broadcast_to(op, v, shape, loc)
            }
            lit => self.literal_as(op, lit, pointee, shape, loc),
        });
        Some((ptr, values, mask))
    }

    /// `(a + b - 1) / b` for integers, as `triton.cdiv`.
    #[track_caller]
    pub fn cdiv<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.binary(BinaryOp::CeilDiv, a.into(), b.into(), SourceLoc::caller())
    }
    /// Element-wise `minimum` (NaN-propagating), as `tl.minimum`.
    #[track_caller]
    pub fn minimum<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.binary(BinaryOp::Min, a.into(), b.into(), SourceLoc::caller())
    }
    /// Element-wise `maximum` (NaN-propagating), as `tl.maximum`.
    #[track_caller]
    pub fn maximum<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.binary(BinaryOp::Max, a.into(), b.into(), SourceLoc::caller())
    }

    /// A binary op with Triton's broadcasting and promotion.
    pub(crate) fn binary(&self, op: BinaryOp, a: Operand<'_>, b: Operand<'_>, loc: SourceLoc) -> Value<'_> {
        let Some((a, b)) = self.unify(op.name(), a, b, loc) else {
            return self.poison(Type::scalar(ScalarType::I32));
        };
        // Pointer arithmetic: `ptr + offsets` and `ptr - offsets`.
        let (ta, tb) = (a.ty(), b.ty());
        if ta.elem.is_ptr() || tb.elem.is_ptr() {
            return match (op, ta.elem.is_ptr(), tb.elem.is_ptr()) {
                (BinaryOp::Add, true, false) => self.add_ptr(a, b, loc),
                (BinaryOp::Add, false, true) => self.add_ptr(b, a, loc),
                (BinaryOp::Sub, true, false) => {
                    let neg = self.emit1(
                        Op::Unary {
                            op: UnaryOp::Neg,
                            value: b.id,
                        },
                        None,
                        loc,
                    );
                    self.add_ptr(a, neg, loc)
                }
                _ => self.fail(op.name(), loc, format!("is not defined for {ta} and {tb}"), ta),
            };
        }
        // f64's power is written out in f64 ops (f64_pow.rs): no backend has it.
        if op == BinaryOp::Pow
            && a.dtype() == Some(ScalarType::F64)
            && !self.is_poisoned(a.id)
            && !self.is_poisoned(b.id)
        {
            return super::f64_pow::pow(a, b);
        }
        self.emit1(
            Op::Binary {
                op,
                lhs: a.id,
                rhs: b.id,
            },
            None,
            loc,
        )
    }

    fn add_ptr<'b>(&'b self, ptr: Value<'b>, offset: Value<'b>, loc: SourceLoc) -> Value<'b> {
        let (pt, ot) = (ptr.ty(), offset.ty());
        let Some(shape) = Shape::broadcast(pt.shape, ot.shape) else {
            return self.fail(
                "addptr",
                loc,
                format!("shapes {} and {} cannot be broadcast together", pt.shape, ot.shape),
                pt,
            );
        };
        let ptr = self.broadcast_to("addptr", ptr, shape, loc);
        let offset = self.broadcast_to("addptr", offset, shape, loc);
        self.emit1(
            Op::AddPtr {
                ptr: ptr.id,
                offset: offset.id,
            },
            None,
            loc,
        )
    }

    pub(crate) fn compare(&self, op: CmpOp, a: Operand<'_>, b: Operand<'_>, loc: SourceLoc) -> Value<'_> {
        let Some((a, b)) = self.unify(op.name(), a, b, loc) else {
            return self.poison(Type::scalar(ScalarType::Bool));
        };
        self.emit1(
            Op::Compare {
                op,
                lhs: a.id,
                rhs: b.id,
            },
            None,
            loc,
        )
    }

    pub(crate) fn unary(&self, op: UnaryOp, v: ValueId, loc: SourceLoc) -> Value<'_> {
        // f64's transcendental functions are written out in f64 ops (f64_math.rs): no
        // backend has them as instructions.
        let x = self.value(v);
        if x.dtype() == Some(ScalarType::F64) && !self.is_poisoned(v) {
            if let Some(r) = self.f64_function(op, x) {
                return r;
            }
        }
        self.emit1(Op::Unary { op, value: v }, None, loc)
    }
}

impl<'b> Value<'b> {
    fn k(&self) -> &'b KernelBuilder {
        self.builder
    }

    /// `self < other`, element-wise with broadcasting.
    #[track_caller]
    pub fn lt(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Lt, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self <= other`.
    #[track_caller]
    pub fn le(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Le, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self > other`.
    #[track_caller]
    pub fn gt(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Gt, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self >= other`.
    #[track_caller]
    pub fn ge(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Ge, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self == other`.
    #[track_caller]
    pub fn eq(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Eq, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self != other`.
    #[track_caller]
    pub fn ne(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .compare(CmpOp::Ne, self.into(), other.into(), SourceLoc::caller())
    }

    /// Element-wise `minimum` (NaN-propagating).
    #[track_caller]
    pub fn minimum(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .binary(BinaryOp::Min, self.into(), other.into(), SourceLoc::caller())
    }
    /// Element-wise `maximum` (NaN-propagating).
    #[track_caller]
    pub fn maximum(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .binary(BinaryOp::Max, self.into(), other.into(), SourceLoc::caller())
    }
    /// `(self + other - 1) / other` for integers.
    #[track_caller]
    pub fn cdiv(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        self.k()
            .binary(BinaryOp::CeilDiv, self.into(), other.into(), SourceLoc::caller())
    }
    /// True division: integers are converted to `f32` first (Python's `/` in Triton).
    #[track_caller]
    pub fn truediv(self, other: impl Into<Operand<'b>>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let k = self.k();
        let to_float = |v: Value<'b>| match v.dtype() {
            Some(s) if !s.is_float() => k.cast_to(v, ScalarType::F32, loc),
            _ => v,
        };
        let a = to_float(self);
        let b = match other.into() {
            Operand::Value(v) => Operand::Value(to_float(k.adopt("div", v, loc))),
            Operand::Int(i) => Operand::Float(i as f64),
            lit => lit,
        };
        k.binary(BinaryOp::Div, a.into(), b, loc)
    }
    /// Float division, as Triton's `tl.fdiv(x, y, ieee_rounding)`: with `ieee_rounding` the
    /// correctly rounded quotient (as `/`), without it a quotient within 2 ulp over the
    /// whole range ([`BinaryOp::DivFull`], what Triton's `/` compiles to for f32), which
    /// needs fewer instructions and registers on NVIDIA GPUs. Through Vulkan both are the
    /// device's `OpFDiv`, which the Vulkan specification bounds by 2.5 ulp. Integers are an
    /// error: there is no rounding to choose (use `/` or [`Value::truediv`]).
    #[track_caller]
    pub fn fdiv(self, other: impl Into<Operand<'b>>, ieee_rounding: bool) -> Value<'b> {
        let op = if ieee_rounding {
            BinaryOp::Div
        } else {
            BinaryOp::DivFull
        };
        self.k().binary(op, self.into(), other.into(), SourceLoc::caller())
    }
    /// `self * b + c` with one rounding (floats).
    #[track_caller]
    pub fn fma(self, b: impl Into<Operand<'b>>, c: impl Into<Operand<'b>>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let k = self.k();
        let Some((a, b)) = k.unify("fma", self.into(), b.into(), loc) else {
            return k.poison(self.ty());
        };
        let Some((a, c)) = k.unify("fma", a.into(), c.into(), loc) else {
            return k.poison(self.ty());
        };
        let shape = a.ty().shape;
        let s = a.dtype().unwrap_or(ScalarType::F32);
        let b = k.cast_to(b, s, loc);
        let b = k.broadcast_to("fma", b, shape, loc);
        k.emit1(
            Op::Fma {
                a: a.id,
                b: b.id,
                c: c.id,
            },
            None,
            loc,
        )
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident,)*) => {
        impl<'b> Value<'b> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self) -> Value<'b> {
                self.k().unary(UnaryOp::$op, self.id, SourceLoc::caller())
            }
        )*}
    };
}
unary_methods! {
    /// `e^x` (floats), as `tl.exp`. Through CUDA within 2.3 ulp over the whole range, which
    /// takes ten instructions for f32 (`ex2` of `x·log2 e` and a correction for the
    /// product's rounding, `backend-ptx/src/math.rs`). Where many exponentials a thread
    /// stand between a kernel's loads and its stores, `(x * LOG2_E).exp2()` is two (a
    /// multiply and one `ex2`), at a relative error of about `|x|·2^-24` more: what the
    /// long-row softmax's clusters do (`docs/performance.md`, "The clusters' exponentials").
    exp => Exp,
    /// `2^x` (floats), as `tl.exp2`. Approximate on GPUs; through CUDA, f32 results below
    /// 2^-126 flush to zero, as Triton's do (`backend-ptx/src/math.rs` gives the bounds).
    exp2 => Exp2,
    /// Natural logarithm (floats).
    log => Log,
    /// Base-2 logarithm (floats).
    log2 => Log2,
    /// Square root (floats).
    sqrt => Sqrt,
    /// `1 / sqrt(x)` (floats).
    rsqrt => Rsqrt,
    /// Sine (floats).
    sin => Sin,
    /// Cosine (floats).
    cos => Cos,
    /// Absolute value.
    abs => Abs,
    /// Round down (floats).
    floor => Floor,
    /// Round up (floats).
    ceil => Ceil,
    /// Round toward zero (floats), as `libdevice.trunc`.
    trunc => Trunc,
    /// Round to the nearest integer, ties to even (floats), as `libdevice.rint` and
    /// `libdevice.nearbyint`: what a quantization to integers wants (`x.rint().to(I8)`).
    rint => Rint,
    /// The error function (floats).
    erf => Erf,
    /// `1 / (1 + e^-x)` (floats).
    sigmoid => Sigmoid,
    /// Hyperbolic tangent (floats), as `tl.math.tanh`.
    tanh => Tanh,
    /// The number of set bits of an integer's bits, as `libdevice.popc` / `popcll` (the
    /// result in the operand's type).
    popc => Popc,
    /// The zero bits above an integer's highest set bit (its width for 0), as
    /// `libdevice.clz` / `clzll`.
    clz => Clz,
    /// An integer's bits in reverse order, as `libdevice.brev` / `brevll`.
    brev => Brev,
    /// The position of an integer's lowest set bit counting from 1 (0 for 0), as
    /// `libdevice.ffs` / `ffsll`.
    ffs => Ffs,
}

impl<'b> Value<'b> {
    /// Numeric conversion to `dtype`, as `x.to(dtype)`; a value already of `dtype` is
    /// returned as it is (as Triton's `to`), so that a load converted to its own type stays
    /// a load to the lowering (which pipelines a `dot`'s loaded operands, not computed ones).
    #[track_caller]
    pub fn to(self, dtype: ScalarType) -> Value<'b> {
        let loc = SourceLoc::caller();
        let t = self.ty();
        if t.elem == Elem::Scalar(dtype) {
            return self;
        }
        if t.elem.is_ptr() {
            if self.k().is_poisoned(self.id) {
                return self.k().poison(t);
            }
            return self
                .k()
                .fail("cast", loc, format!("cannot convert pointers ({t}) to {dtype}"), t);
        }
        self.k()
            .emit1(Op::Cast { value: self.id }, Some(t.with_elem(Elem::Scalar(dtype))), loc)
    }
    /// Reinterprets the bits as `dtype` (same width), as `x.to(dtype, bitcast=True)`; a
    /// value already of `dtype` is returned as it is.
    #[track_caller]
    pub fn bitcast(self, dtype: ScalarType) -> Value<'b> {
        let t = self.ty();
        if t.elem == Elem::Scalar(dtype) {
            return self;
        }
        self.k().emit1(
            Op::Bitcast { value: self.id },
            Some(t.with_elem(Elem::Scalar(dtype))),
            SourceLoc::caller(),
        )
    }
    /// Inserts a size-1 dimension at `axis`: `x.expand_dims(1)` is `x[:, None]`.
    #[track_caller]
    pub fn expand_dims(self, axis: u32) -> Value<'b> {
        self.k().emit1(
            Op::ExpandDims {
                value: self.id,
                axis: axis.min(255) as u8,
            },
            None,
            SourceLoc::caller(),
        )
    }
    /// The same elements in another shape, as `tl.reshape`.
    #[track_caller]
    pub fn reshape(self, shape: &[u32]) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some(shape) = block_shape(self.k(), "reshape", shape, loc) else {
            return self.k().poison(self.ty());
        };
        self.k()
            .emit1(Op::Reshape { value: self.id }, Some(self.ty().with_shape(shape)), loc)
    }
    /// Reorders dimensions: result dimension `i` is dimension `perm[i]`, as `tl.permute`.
    #[track_caller]
    pub fn permute(self, perm: &[u32]) -> Value<'b> {
        let perm = perm.iter().map(|&p| p.min(255) as u8).collect();
        self.k()
            .emit1(Op::Permute { value: self.id, perm }, None, SourceLoc::caller())
    }
    /// Transposes a 2-D block, as `tl.trans`.
    #[track_caller]
    pub fn trans(self) -> Value<'b> {
        self.k().emit1(
            Op::Permute {
                value: self.id,
                perm: vec![1, 0],
            },
            None,
            SourceLoc::caller(),
        )
    }
    /// Broadcasts to `shape` with numpy's rules, as `tl.broadcast_to`.
    #[track_caller]
    pub fn broadcast_to(self, shape: &[u32]) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some(shape) = block_shape(self.k(), "broadcast_to", shape, loc) else {
            return self.k().poison(self.ty());
        };
        self.k().broadcast_to("broadcast_to", self, shape, loc)
    }

    fn reduce_op(self, op: ReduceOp, axis: u32, keep_dims: bool, loc: SourceLoc) -> Value<'b> {
        let k = self.k();
        let r = k.emit1(
            Op::Reduce {
                op,
                value: self.id,
                axis: axis.min(255) as u8,
            },
            None,
            loc,
        );
        if keep_dims {
            k.emit1(
                Op::ExpandDims {
                    value: r.id,
                    axis: axis as u8,
                },
                None,
                loc,
            )
        } else {
            r
        }
    }
    /// Sum along `axis`, as `tl.sum(x, axis)`.
    #[track_caller]
    pub fn sum(self, axis: u32) -> Value<'b> {
        self.reduce_op(ReduceOp::Sum, axis, false, SourceLoc::caller())
    }
    /// Maximum along `axis` (NaN-propagating), as `tl.max(x, axis)`.
    #[track_caller]
    pub fn max(self, axis: u32) -> Value<'b> {
        self.reduce_op(ReduceOp::Max, axis, false, SourceLoc::caller())
    }
    /// Minimum along `axis` (NaN-propagating), as `tl.min(x, axis)`.
    #[track_caller]
    pub fn min(self, axis: u32) -> Value<'b> {
        self.reduce_op(ReduceOp::Min, axis, false, SourceLoc::caller())
    }
    /// Index (`i32`) of the first maximum along `axis`, as `tl.argmax(x, axis)`.
    #[track_caller]
    pub fn argmax(self, axis: u32) -> Value<'b> {
        self.reduce_op(ReduceOp::ArgMax, axis, false, SourceLoc::caller())
    }
    /// Index (`i32`) of the first minimum along `axis`, as `tl.argmin(x, axis)`.
    #[track_caller]
    pub fn argmin(self, axis: u32) -> Value<'b> {
        self.reduce_op(ReduceOp::ArgMin, axis, false, SourceLoc::caller())
    }
    /// Any reduction, keeping the reduced axis with size 1 when `keep_dims`
    /// (`tl.sum(x, axis, keep_dims=True)`).
    #[track_caller]
    pub fn reduce_with(self, op: ReduceOp, axis: u32, keep_dims: bool) -> Value<'b> {
        self.reduce_op(op, axis, keep_dims, SourceLoc::caller())
    }
    /// This scalar combined (`Sum`, `Max` or `Min`) over the programs of the cluster, the
    /// consecutive programs along grid axis 0 that a launch groups with
    /// `LaunchConfig::cluster` (CUDA's thread-block clusters, from sm_90): how programs that
    /// split one row between them agree on its maximum or sum while the row stays on chip.
    /// Every program of a cluster must reach it equally often; without a cluster it is the
    /// value itself. A 32- or 64-bit number. Several values that depend on each other
    /// combine in one exchange with
    /// [`KernelBuilder::cluster_reduce_n`](crate::KernelBuilder::cluster_reduce_n).
    #[track_caller]
    pub fn cluster_reduce(self, op: ReduceOp) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.k().emit1(Op::ClusterReduce { op, value: self.id }, None, loc)
    }
}

/// `axis` as the IR stores it, when it names a grid axis.
fn grid_axis(axis: u32) -> Option<u8> {
    (axis <= 2).then_some(axis as u8)
}
