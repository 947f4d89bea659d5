//! The ring's stage counters: the stage to read and the one to fill, started before the
//! loop (or once, for a ring that lives across a persistent kernel's tiles) and moved round
//! the ring at the end of each iteration; and where a stage starts in a load's buffer.

use super::{PipelineState, PipelinedLoad};
use crate::ir::{BinaryOp, CmpOp, Literal};
use crate::lower::mma::SharedOperand;
use crate::lower::Lowerer;
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// At the end of an iteration: the next stages to read and fill.
    pub(crate) fn pipeline_advance(&mut self, state: &PipelineState) {
        if let Some(c) = &state.consumer {
            self.release_stage(state, c);
        }
        if let Some(ring) = &state.tma {
            self.flip_phase_at_wrap(ring.phase, state.read, state.plan.stages);
        }
        // (A ring of one stage stays at stage 0: its counters are then constants, which
        // spares the loop two carried registers and their selects.)
        if state.plan.stages > 1 {
            for r in [state.read, state.fill] {
                self.next_stage(r, state.plan.stages);
            }
        }
    }

    /// Stage register `r` to the next of `stages`, round the ring.
    pub(crate) fn next_stage(&mut self, r: Reg, stages: u32) {
        let (zero, one) = (self.i32c(0), self.i32c(1));
        let last = self.i32c(stages as i64 - 1);
        let wrap = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, r, last));
        let next = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, r, one));
        self.emit(Stmt::Set {
            dst: r,
            expr: Expr::Select(wrap, zero, next),
        });
    }

    /// A ring's stage or phase counter starting at `value`: set before the loop, or, for a
    /// ring that lives `across_tiles` of a persistent kernel, once in the prologue.
    pub(crate) fn ring_counter(&mut self, value: u32, across_tiles: bool) -> Reg {
        let c = Expr::Const(Literal::Int(value as i64));
        if across_tiles {
            self.pset(ScalarType::I32, c)
        } else {
            self.set(ScalarType::I32, c)
        }
    }

    /// Where stage `stage` of `load`'s buffer starts: stage 0 always for an invariant copy,
    /// which has one.
    pub(super) fn stage_base(&mut self, load: &PipelinedLoad, operand: &SharedOperand, stage: Reg) -> Reg {
        if load.invariant {
            return self.i32c(0);
        }
        let len = self.i32c(operand.tile.len() as i64);
        self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, stage, len))
    }
}
