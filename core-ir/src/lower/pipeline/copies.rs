//! The copies of a later iteration, as one group: the loads' slice lowered for that
//! iteration, then each load as `cp.async` copies into the stage it fills (zeros where
//! masked off or past the end), as TMA copies, or as loads into prefetch registers; the
//! group's commit; and the carried values the slice advances.

use super::prefetch::RegisterPrefetch;
use super::PipelineState;
use crate::ir::{BinaryOp, Inst, Literal, Op, ValueId};
use crate::layout::Layout;
use crate::lower::{LVal, LowerError, Lowerer};
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// The copies of the iteration whose loop variable is `iv` into stage `stage`, as one
    /// group, with the slice lowered for that iteration; then advances the ahead values.
    pub(crate) fn issue_copies(
        &mut self,
        state: &mut PipelineState,
        inst: &Inst,
        iv: Reg,
        end: Reg,
        stage: (Reg, usize),
    ) -> Result<(), LowerError> {
        let region = &inst.regions[0];
        self.emit(Stmt::Comment("pipeline (copies of a later iteration)".into()));
        self.set_lval(
            region.args[0],
            LVal {
                layout: Layout::scalar(),
                regs: vec![iv],
                ptr: None,
            },
        );
        for (slot, &c) in state.ahead.iter().zip(&state.plan.carried) {
            self.set_lval(region.args[c + 1], slot.clone());
            self.anchored[region.args[c + 1].index()] = true;
        }
        let k = self.k;
        for &id in &state.plan.slice {
            self.inst(&k.insts[id])?;
        }
        let in_range = self.before_end(iv, end, state.step, state.plan.step_const);
        // The loads into prefetch registers, emitted after every operand's predicates, and
        // the one condition under which every predicate holds, where the masks say it (in
        // the trips of the unmasked loop they hold: no predicate is computed).
        let unmasked = self.unmasked_prefetch && state.plan.registers;
        let mut prefetches: Vec<RegisterPrefetch> = Vec::new();
        let mut all_hold = (!unmasked).then_some(in_range);
        for (i, (load, (operand, index))) in state.plan.loads.iter().zip(&state.buffers).enumerate() {
            let Op::Load { ptr, mask, .. } = self.k.insts[load.inst].op else {
                return Err(self.internal("a pipelined load is not a load"));
            };
            // Copied once, with the first iteration's copies (into its one stage).
            if load.invariant && !state.first_copies {
                continue;
            }
            if let Some(t) = &load.tma {
                self.order_global_access(t.region_box.param, false);
                continue;
            }
            let (param, offsets) = self.pointer(ptr, load.layout)?;
            let masks = match mask {
                Some(m) if !unmasked => Some(self.ensure(m, load.layout)?),
                _ => None,
            };
            if let (true, Some(m), Some(all)) = (state.plan.registers, mask, all_hold) {
                all_hold = self
                    .mask_all_true(m)?
                    .map(|c| self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, all, c)));
            }
            self.order_global_access(param, false);
            let base = self.stage_base(load, operand, stage.0);
            for (g, &at) in (0..offsets.len()).step_by(load.width as usize).zip(index) {
                let pred = match &masks {
                    Some(m) => self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, m[g], in_range)),
                    None => in_range,
                };
                if state.plan.registers {
                    let set = &state.prefetch[stage.1 % state.prefetch.len()];
                    let dsts = set[i][g..g + load.width as usize].to_vec();
                    let elem = self.regs[dsts[0]].ty;
                    prefetches.push(RegisterPrefetch {
                        dsts,
                        param,
                        index: offsets[g],
                        pred,
                        zero: self.konst(elem, Literal::Float(0.0)),
                    });
                    continue;
                }
                let dst = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, base));
                self.emit(Stmt::AsyncCopy {
                    alloc: operand.alloc,
                    dst,
                    param,
                    src: offsets[g],
                    len: load.width,
                    pred: Some(pred),
                });
            }
        }
        state.first_copies = false;
        self.prefetch_into_registers(&prefetches, all_hold, unmasked);
        if let Some(ring) = &state.tma {
            let allocs: Vec<u32> = state.buffers.iter().map(|(o, _)| o.alloc).collect();
            self.tma_copies(ring, &state.plan.loads, &allocs, iv, in_range, stage.0)?;
        }
        if !state.plan.registers && state.plan.loads.iter().any(|l| l.tma.is_none()) {
            self.emit(Stmt::AsyncCommit);
        }
        // The carried values the slice advances, as the loop's yield would.
        let yields: Vec<ValueId> = match region.insts.last().map(|&i| &self.k.insts[i].op) {
            Some(Op::Yield { values }) => state.plan.carried.iter().map(|&c| values[c]).collect(),
            _ => Vec::new(),
        };
        self.assign_slots(inst, &state.ahead, &yields, &[])
    }
}
