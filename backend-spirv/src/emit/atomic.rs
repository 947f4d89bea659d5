//! Atomics: integer ones as naga's atomic statements; f32 ones on the float's bits held
//! as `u32` (exchange directly, add, min and max as compare-and-swap loops).

use super::*;

impl Cx<'_> {
    pub(super) fn atomic(&mut self, dst: Reg, op: AtomicOp, param: u32, index: Reg, value: Reg) -> R<()> {
        let mem = Memory::Global { param };
        let base = self.index_u32(index);
        let pointer = self.element(mem, base, 0);
        let v = self.read(value);
        let ty = self.k.reg_type(value);
        if self.holding(mem) == Holding::AtomicF32Bits {
            let old = match op {
                AtomicOp::Xchg => {
                    let bits = self.as_(v, ScalarKind::Uint, None);
                    let ty = self.scalar_ty(ScalarType::U32);
                    let result = self.result(Expression::AtomicResult { ty, comparison: false });
                    self.stmt(Statement::Atomic {
                        pointer,
                        fun: AtomicFunction::Exchange { compare: None },
                        value: bits,
                        result: Some(result),
                    });
                    result
                }
                AtomicOp::Add | AtomicOp::Min | AtomicOp::Max => self.f32_cas_loop(pointer, op, v)?,
                _ => unreachable!("rejected by the scan"),
            };
            let old = self.as_(old, ScalarKind::Float, None);
            self.write(dst, old);
            return Ok(());
        }
        let fun = match op {
            AtomicOp::Add => AtomicFunction::Add,
            AtomicOp::Max => AtomicFunction::Max,
            AtomicOp::Min => AtomicFunction::Min,
            AtomicOp::Xchg => AtomicFunction::Exchange { compare: None },
            AtomicOp::And => AtomicFunction::And,
            AtomicOp::Or => AtomicFunction::InclusiveOr,
            AtomicOp::Xor => AtomicFunction::ExclusiveOr,
        };
        let rty = self.scalar_ty(ty);
        let result = self.result(Expression::AtomicResult {
            ty: rty,
            comparison: false,
        });
        self.stmt(Statement::Atomic {
            pointer,
            fun,
            value: v,
            result: Some(result),
        });
        self.write(dst, result);
        Ok(())
    }

    /// `op` on the `f32` whose bits `pointer` (an `atomic<u32>`) holds, by compare-and-swap;
    /// the old bits.
    pub(super) fn f32_cas_loop(&mut self, pointer: H, op: AtomicOp, v: H) -> R<H> {
        let old_var = self.new_temp(ScalarType::U32, "cas_old");
        let first = self.load(pointer);
        self.stmt(Statement::Store {
            pointer: old_var,
            value: first,
        });
        let cas_ty = self
            .module
            .generate_predeclared_type(naga::PredeclaredType::AtomicCompareExchangeWeakResult(Scalar::U32));
        let body = self.nested(|cx| {
            let old = cx.load(old_var);
            let oldf = cx.as_(old, ScalarKind::Float, None);
            let newf = match op {
                AtomicOp::Add => cx.bin(Bo::Add, oldf, v),
                AtomicOp::Min => cx.fminmax(true, ScalarType::F32, oldf, v),
                AtomicOp::Max => cx.fminmax(false, ScalarType::F32, oldf, v),
                _ => unreachable!(),
            };
            let new = cx.as_(newf, ScalarKind::Uint, None);
            let (_, exchanged) = cx.compare_exchange(cas_ty, pointer, old, new, old_var);
            cx.break_if(exchanged);
            Ok(())
        })?;
        self.loop_until_break(body);
        Ok(self.load(old_var))
    }

    /// One weak compare-exchange of `pointer` (`compare` → `value`): stores the value seen into
    /// `seen_var` and returns (seen, exchanged).
    pub(super) fn compare_exchange(
        &mut self,
        cas_ty: naga::Handle<naga::Type>,
        pointer: H,
        compare: H,
        value: H,
        seen_var: H,
    ) -> (H, H) {
        let result = self.result(Expression::AtomicResult {
            ty: cas_ty,
            comparison: true,
        });
        self.stmt(Statement::Atomic {
            pointer,
            fun: AtomicFunction::Exchange { compare: Some(compare) },
            value,
            result: Some(result),
        });
        let seen = self.index(result, 0);
        let exchanged = self.index(result, 1);
        self.stmt(Statement::Store {
            pointer: seen_var,
            value: seen,
        });
        (seen, exchanged)
    }

    /// Leaves the enclosing loop when `condition` holds.
    pub(super) fn break_if(&mut self, condition: H) {
        let mut accept = Block::new();
        accept.push(Statement::Break, SPAN);
        self.stmt(Statement::If {
            condition,
            accept,
            reject: Block::new(),
        });
    }

    pub(super) fn atomic_cas(&mut self, dst: Reg, param: u32, index: Reg, cmp: Reg, value: Reg) -> R<()> {
        let mem = Memory::Global { param };
        let base = self.index_u32(index);
        let pointer = self.element(mem, base, 0);
        let mut c = self.read(cmp);
        let mut v = self.read(value);
        let bits = self.holding(mem) == Holding::AtomicF32Bits;
        let ty = if bits { ScalarType::U32 } else { self.k.reg_type(value) };
        if bits {
            c = self.as_(c, ScalarKind::Uint, None);
            v = self.as_(v, ScalarKind::Uint, None);
        }
        let cas_ty = self
            .module
            .generate_predeclared_type(naga::PredeclaredType::AtomicCompareExchangeWeakResult(naga_scalar(ty)));
        // A weak compare-exchange may fail spuriously: retry while it failed although the
        // value matched, which makes it the strong operation of the IR.
        let old_var = self.new_temp(ty, "cas_old");
        let body = self.nested(|cx| {
            let (seen, exchanged) = cx.compare_exchange(cas_ty, pointer, c, v, old_var);
            let differs = cx.bin(Bo::NotEqual, seen, c);
            let done = cx.bin(Bo::LogicalOr, exchanged, differs);
            cx.break_if(done);
            Ok(())
        })?;
        self.loop_until_break(body);
        let mut old = self.load(old_var);
        if bits {
            old = self.as_(old, ScalarKind::Float, None);
        }
        self.write(dst, old);
        Ok(())
    }

    // ---- Expressions ------------------------------------------------------------------
}
