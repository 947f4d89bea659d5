//! The top of each iteration of a pipelined loop: the waits for its operands (the
//! asynchronous copies' groups, TMA's mbarriers) and the barrier before any thread reads
//! another's, or through registers the store of its prefetched operands into their stage;
//! then the copies of the iteration `A` ahead, and the `dot`s pointed at the stage to read.

use super::{PendingRefill, PipelineState};
use crate::ir::{BinaryOp, Inst, Literal, Op, ValueId};
use crate::lower::mma::SharedOperand;
use crate::lower::{LowerError, Lowerer};
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// At the top of an iteration with loop variable `iv`: waits for this iteration's
    /// operands, starts the copies `plan.ahead` iterations ahead, and points the `dot`s at the
    /// stage to read.
    pub(crate) fn pipeline_iteration(
        &mut self,
        state: &mut PipelineState,
        inst: &Inst,
        iv: Reg,
        (end, step): (Reg, Reg),
        set: usize,
    ) -> Result<(), LowerError> {
        if state.consumer.is_some() {
            // The producer warpgroup issues the copies; the consumers only wait for them.
            if let Some(ring) = &state.tma {
                self.tma_wait(ring, state.read);
            }
            self.point_dots_at_read(state);
            return Ok(());
        }
        let ahead = state.plan.ahead;
        if state.plan.registers && state.plan.stages == 1 {
            // The one stage is refilled once every warp has read it (in the last iteration).
            self.emit(Stmt::Barrier);
        }
        if state.plan.registers && ahead == 0 {
            // `num_stages` 1, nothing ahead: this iteration's operands are loaded now, into
            // the one set, and stored below (no load stays in flight across the barrier).
            let fill = state.fill;
            self.issue_copies(state, inst, iv, end, (fill, set))?;
        }
        if state.plan.registers {
            // This iteration's operands, loaded `ahead` iterations ago into its set (or just
            // now), into its stage.
            self.store_prefetched(state, set);
        } else {
            if state.plan.loads.iter().any(|l| l.tma.is_none()) {
                self.emit(Stmt::AsyncWait { pending: ahead - 1 });
            }
            if let Some(ring) = &state.tma {
                self.tma_wait(ring, state.read);
            }
        }
        // Own copies: each thread reads back its slots, its own group being complete, where
        // the body loads them.
        self.point_own_copies(state);
        // (TMA writes through the asynchronous proxy itself.)
        if state.plan.loads.iter().any(|l| l.wgmma && l.tma.is_none()) {
            // The copies were written through the generic proxy; wgmma reads through the
            // asynchronous one.
            self.emit(Stmt::FenceProxyAsync);
        }
        // Other threads' copies are read once all are complete; own copies need no barrier.
        if state.plan.loads.iter().any(|l| !l.own) {
            self.emit(Stmt::Barrier);
        }
        if ahead > 0 {
            let iv_ty = self.regs[iv].ty;
            let ahead_by = self.konst(iv_ty, Literal::Int(ahead as i64));
            let delta = self.set(iv_ty, Expr::Binary(BinaryOp::Mul, step, ahead_by));
            let later = self.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, delta));
            let fill = state.fill;
            if state.plan.refill_after_read {
                // Lowered here (the slice's values are this iteration's until the body
                // lowers them again), emitted once the body has used what it read back.
                let (stmts, ()) = self.nested(|l| l.issue_copies(state, inst, later, end, (fill, set)))?;
                self.pending_refill = Some(PendingRefill {
                    stmts,
                    reads: state
                        .plan
                        .loads
                        .iter()
                        .filter(|l| !l.invariant)
                        .map(|l| l.value)
                        .collect(),
                    depth: self.body.len(),
                });
            } else {
                self.issue_copies(state, inst, later, end, (fill, set))?;
            }
        }
        self.point_dots_at_read(state);
        Ok(())
    }

    /// The `dot`s of this iteration read stage `read` (and may leave their warpgroup MMAs
    /// in flight, where the plan says).
    fn point_dots_at_read(&mut self, state: &PipelineState) {
        self.wgmma_in_flight = state.plan.in_flight;
        for (load, (operand, _)) in state.plan.loads.iter().zip(&state.buffers) {
            let len = self.i32c(operand.tile.len() as i64);
            let at = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, state.read, len));
            self.pipelined.insert(
                load.value,
                SharedOperand {
                    stage: Some(at),
                    ..*operand
                },
            );
        }
    }

    /// The shared operand the enclosing loop's pipeline gives `v`, if it is pipelined.
    pub(crate) fn pipelined_operand(&self, v: ValueId) -> Option<SharedOperand> {
        self.pipelined.get(&v).copied()
    }

    /// Whether load `inst` is replaced by its loop's pipeline (then it is not lowered).
    pub(crate) fn is_pipelined_load(&self, inst: &Inst) -> bool {
        matches!(inst.op, Op::Load { .. }) && inst.results.first().is_some_and(|v| self.pipelined.contains_key(v))
    }
}
