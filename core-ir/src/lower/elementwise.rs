//! Element-wise ops: each register of the result from the same registers of the operands,
//! all in the layout their anchored operands have (`assign`).

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, Inst, Op, UnaryOp};
use crate::thread::{Expr, Reg};
use crate::types::{Elem, ScalarType};

impl Lowerer<'_> {
    pub(crate) fn elementwise(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let result = inst.results[0];
        let ty = self.k.ty(result);
        let layout = self.elementwise_layout(&inst.op.operands(), ty.shape);
        if let Op::AddPtr { ptr, offset } = inst.op {
            return self.add_ptr(ptr, offset, layout);
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
        let n = layout.map(ty.shape).len;
        let mut out = Vec::with_capacity(n);
        let exp2_f32 = matches!(inst.op, Op::Unary { op: UnaryOp::Exp2, .. }) && out_ty == ScalarType::F32;
        for i in 0..n {
            let r = |k: usize| regs[k][i];
            if exp2_f32 && self.exp2_on_fma(i) {
                out.push(self.exp2_polynomial(r(0)));
                continue;
            }
            let expr = match &inst.op {
                Op::Unary { op, .. } => Expr::Unary(*op, r(0)),
                Op::Binary { op, .. } => Expr::Binary(*op, r(0), r(1)),
                Op::Compare { op, .. } => Expr::Compare(*op, r(0), r(1)),
                Op::Select { .. } => Expr::Select(r(0), r(1), r(2)),
                Op::Fma { .. } => Expr::Fma(r(0), r(1), r(2)),
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
