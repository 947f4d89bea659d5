//! Element-wise ops: each register of the result from the same registers of the operands,
//! all in the layout their anchored operands have (`assign`).
//!
//! A comparison's register is computed once where the axis analysis finds the result
//! constant over a run of the thread's elements: a mask `cols < n` with `n` divisible by 16
//! is one predicate a thread's 16-byte vector, not one an element, so that `ptxas` keeps a
//! few predicates across a loop where it kept a 0 or 1 in a register for every element.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, Inst, Op, UnaryOp, ValueId};
use crate::layout::{Layout, RegisterMap};
use crate::thread::{Expr, Reg};
use crate::types::{Elem, ScalarType, MAX_RANK};

impl Lowerer<'_> {
    pub(crate) fn elementwise(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let result = inst.results[0];
        let ty = self.k.ty(result);
        let layout = self.elementwise_layout(&inst.op.operands(), ty.shape);
        if let Op::AddPtr { ptr, offset } = inst.op {
            return self.add_ptr(ptr, offset, layout);
        }
        if let Op::Compare { op, lhs, rhs } = inst.op {
            if self.k.ty(lhs).elem.is_ptr() {
                return self.compare_pointers(inst, op, lhs, rhs, layout);
            }
        }
        let out_ty = ty
            .scalar_type()
            .ok_or_else(|| self.internal("element-wise op on pointers"))?;
        let operands = inst.op.operands();
        let mut regs: Vec<Vec<Reg>> = Vec::with_capacity(operands.len());
        for &v in &operands {
            if self.k.ty(v).elem.is_ptr() {
                return Err(self.unsupported(inst, "pointers can only be offset, loaded from and stored to"));
            }
            regs.push(self.ensure(v, layout)?);
        }
        let map = layout.map(ty.shape);
        let n = map.len;
        let same = match inst.op {
            Op::Compare { .. } if self.target.masks_by_runs => self.constant_runs(result, layout, &map),
            _ => (0..n).collect(),
        };
        let mut out: Vec<Reg> = Vec::with_capacity(n);
        let exp2_f32 = matches!(inst.op, Op::Unary { op: UnaryOp::Exp2, .. }) && out_ty == ScalarType::F32;
        for i in 0..n {
            let r = |k: usize| regs[k][i];
            if same[i] < i {
                out.push(out[same[i]]);
                continue;
            }
            if exp2_f32 && self.exp2_on_fma(i) {
                out.push(self.exp2_polynomial(r(0)));
                continue;
            }
            // Index arithmetic on coordinates, once per thread where it can be
            // (`affine_index.rs`).
            if let Op::Binary { op, .. } = &inst.op {
                if let Some(q) = self.affine_binary(out_ty, *op, r(0), r(1)) {
                    out.push(q);
                    continue;
                }
            }
            if let Op::BytePerm { x, y, selector } = inst.op {
                out.push(self.byte_perm(out_ty, [r(0), r(1), r(2)], [x, y, selector]));
                continue;
            }
            let expr = match &inst.op {
                Op::Unary { op, .. } => Expr::Unary(*op, r(0)),
                Op::Binary { op, .. } => Expr::Binary(*op, r(0), r(1)),
                Op::Compare { op, .. } => Expr::Compare(*op, r(0), r(1)),
                Op::Select { .. } => Expr::Select(r(0), r(1), r(2)),
                Op::Fma { .. } => Expr::Fma(r(0), r(1), r(2)),
                Op::Rounded { op, rounding, args } => Expr::Rounded(*op, *rounding, (0..args.len()).map(r).collect()),
                Op::Cast { .. } => Expr::Cast(r(0)),
                Op::Bitcast { .. } => Expr::Bitcast(r(0)),
                Op::ProgramId { axis } => self.program_id(*axis),
                Op::NumPrograms { axis } => self.num_programs(*axis),
                op => return Err(self.internal(format!("`{}` is not element-wise", op.name()))),
            };
            out.push(self.set(out_ty, expr));
        }
        Ok(LVal {
            layout,
            regs: out,
            ptr: None,
        })
    }

    /// For each register of `value` (of `map`, in `layout`), the first register of the
    /// thread that holds the same value by the axis analysis's constancy: registers whose
    /// elements lie in one aligned run of `g` along each dimension, `g` the largest power of
    /// two dividing both the constancy and the thread's consecutive elements there. A thread's
    /// base coordinate along a dimension is a multiple of its `size_per_thread` (powers of
    /// two), so elements at compile-time offsets `o` and `o'` share a run when `o / g`
    /// and `o' / g` agree in every dimension.
    fn constant_runs(&self, value: ValueId, layout: Layout, map: &RegisterMap) -> Vec<usize> {
        let identity: Vec<usize> = (0..map.len).collect();
        if layout.rows.is_some() {
            return identity;
        }
        let info = &self.axis[value.index()];
        let b = layout.blocked;
        let mut group = [1u32; MAX_RANK];
        for (vd, &c) in info.constancy.iter().enumerate().take(self.k.ty(value).shape.rank()) {
            let d = layout.blocked_dim(vd);
            let (spt, full, tile, run) = (b.size_per_thread[d], map.full[d], b.tile(d), map.run[d]);
            if c <= 1 || ![spt, full, tile, run].iter().all(|x| x.is_power_of_two()) {
                continue;
            }
            group[d] = 1 << c.trailing_zeros().min(run.trailing_zeros());
        }
        if group.iter().all(|&g| g == 1) {
            return identity;
        }
        identity
            .into_iter()
            .map(|i| {
                let mut o = map.offsets(i);
                for d in 0..b.rank as usize {
                    o[d] -= o[d] % group[d];
                }
                map.register_at(o)
            })
            .collect()
    }

    /// A comparison of two pointers into one parameter's buffer: of their element offsets
    /// from it, widened to 64 bits where one of them is. Pointers into two parameters are an
    /// error: two parameters may be bound to one buffer, and only the device knows how their
    /// addresses order (the interpreter refuses them too).
    fn compare_pointers(
        &mut self,
        inst: &Inst,
        op: crate::ir::CmpOp,
        lhs: ValueId,
        rhs: ValueId,
        layout: Layout,
    ) -> Result<LVal, LowerError> {
        let (a_base, a) = self.pointer(lhs, layout)?;
        let (b_base, b) = self.pointer(rhs, layout)?;
        if a_base != b_base {
            let name = |p: u32| self.k.params[p as usize].name.clone();
            return Err(self.unsupported(
                inst,
                format!(
                    "compares pointers into two parameters (`{}` and `{}`); only pointers into one \
                     parameter's buffer compare",
                    name(a_base),
                    name(b_base)
                ),
            ));
        }
        let wide = |l: &Self, r: &[Reg]| r.first().is_some_and(|&r| l.regs[r].ty.bits() == 64);
        let widen = wide(self, &a) || wide(self, &b);
        let mut regs = Vec::with_capacity(a.len());
        for (&x, &y) in a.iter().zip(&b) {
            let (x, y) = if widen {
                (self.widened_to_i64(x), self.widened_to_i64(y))
            } else {
                (x, y)
            };
            regs.push(self.set(ScalarType::Bool, Expr::Compare(op, x, y)));
        }
        Ok(LVal {
            layout,
            regs,
            ptr: None,
        })
    }

    /// `r` as an `i64`: itself where it is one, else sign-extended (pointer offsets are
    /// signed).
    fn widened_to_i64(&mut self, r: Reg) -> Reg {
        match self.regs[r].ty {
            ScalarType::I64 => r,
            _ => self.set(ScalarType::I64, Expr::Cast(r)),
        }
    }

    /// `ptr + offset`: the offsets add up; the base parameter stays. Offsets are `i32`
    /// unless either side is 64-bit.
    fn add_ptr(
        &mut self,
        ptr: crate::ir::ValueId,
        offset: crate::ir::ValueId,
        layout: crate::layout::Layout,
    ) -> Result<LVal, LowerError> {
        let p = self.lval(ptr)?;
        let base = p.ptr.ok_or_else(|| self.internal("pointer without a base parameter"))?;
        let pregs = self.ensure(ptr, layout)?;
        let oregs = self.ensure(offset, layout)?;
        let Elem::Scalar(ot) = self.k.ty(offset).elem else {
            return Err(self.internal("pointer offset is not a number"));
        };
        let pt = self.regs[pregs[0]].ty;
        let wide = pt.bits() == 64 || ot.bits() == 64 || ot == ScalarType::U32;
        let t = if wide { ScalarType::I64 } else { ScalarType::I32 };
        let mut out = Vec::with_capacity(pregs.len());
        for (&a, &b) in pregs.iter().zip(&oregs) {
            let a = if self.regs[a].ty == t {
                a
            } else {
                self.set(t, Expr::Cast(a))
            };
            let b = if self.regs[b].ty == t {
                b
            } else {
                self.set(t, Expr::Cast(b))
            };
            out.push(self.set(t, Expr::Binary(BinaryOp::Add, a, b)));
        }
        Ok(LVal {
            layout,
            regs: out,
            ptr: Some(base),
        })
    }
}
