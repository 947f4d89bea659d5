//! The `dot` whose warpgroup MMAs stay in flight across the loop's back edge
//! (`wgmma.wait_group 1`): whether a loop has one, and its wait before the yield where it
//! reads A from registers of a carried value.

use super::{PipelineState, PipelinedLoad};
use crate::ir::{Op, Region, ValueDef, ValueId};
use crate::lower::Lowerer;
use crate::thread::Stmt;

impl Lowerer<'_> {
    /// The result of the loop body's `dot` whose warpgroup MMAs may run on while the next
    /// iteration waits for its copies, issues the ones after and starts its own MMAs (one
    /// `wgmma` group in flight, as the hand-written kernel measured best), with the carried
    /// value whose registers they accumulate into. It is the body's last `dot`, on warpgroup
    /// MMAs, each operand pipelined, read from registers (A, decided as it is lowered) or
    /// computed in the body and stored by the `dot` into two tiles in turn;
    /// its result is yielded into a carried value and used by nothing else, and its
    /// accumulator is that carried value or computed from it alone (attention's `acc *
    /// alpha`), so that the MMAs can update the carried registers in place. Nothing may read
    /// those registers before the next iteration's wait: the carried value is read by the
    /// `dot` itself (MMAs chained on one accumulator), or after an earlier `dot` of the body
    /// on warpgroup MMAs, whose `wait_group 0` retires the group in flight too, or anywhere
    /// when the `dot` reads A from a carried value (retired before the yield). It needs a
    /// third stage: the copies then run `stages - 2` ahead, so that the buffer they refill
    /// was read two iterations back.
    pub(super) fn wgmma_in_flight(
        &self,
        region: &Region,
        loads: &[PipelinedLoad],
        yields: &[ValueId],
        stages: u32,
    ) -> Option<(ValueId, ValueId)> {
        // (The ring's depth: the launch's `num_stages`, or the loop's own.)
        if stages < 3 {
            return None;
        }
        let dots: Vec<usize> = (0..region.insts.len())
            .filter(|&p| matches!(self.k.insts[region.insts[p]].op, Op::Dot { .. }))
            .collect();
        let (&last, earlier) = dots.split_last()?;
        let dot = &self.k.insts[region.insts[last]];
        self.wgmma_shape(dot)?;
        // (A dot promoting its fp8 sums waits for its own MMAs.)
        if self.wgmma_promotion(dot).is_some() {
            return None;
        }
        let Op::Dot { a, b, acc, .. } = dot.op else {
            return None;
        };
        let pipelined = |v: ValueId| loads.iter().any(|l| l.value == v);
        let uses = |v: ValueId| {
            self.k
                .insts
                .iter()
                .map(|(_, i)| i.op.operands().into_iter().filter(|&o| o == v).count())
                .sum::<usize>()
        };
        let result = dot.results[0];
        let carried_at = yields.iter().position(|&y| y == result)?;
        let carried = region.args[1 + carried_at];
        // B pipelined, or computed in the body (`dot_scaled`'s decoded values): the `dot`
        // then stores it into two tiles in turn (`Lowerer::shared_operand_in_turn`).
        let body_load = |v: ValueId| {
            region
                .insts
                .iter()
                .any(|&i| matches!(self.k.insts[i].op, Op::Load { .. }) && self.k.insts[i].results.contains(&v))
        };
        if (!pipelined(b) && body_load(b)) || uses(result) != 1 || uses(carried) != 1 || uses(acc) != 1 {
            return None;
        }
        // `a` pipelined, or not a load of this body (then it is read from registers or
        // stored in turn as B is).
        let a_def = region.insts.iter().find(|&&i| self.k.insts[i].results.contains(&a));
        if !pipelined(a) && a_def.is_some_and(|&i| matches!(self.k.insts[i].op, Op::Load { .. })) {
            return None;
        }
        if acc != carried {
            // `acc` computed from the carried value alone, after an earlier warpgroup `dot`.
            let def = region
                .insts
                .iter()
                .position(|&i| self.k.insts[i].results.contains(&acc))?;
            let op = &self.k.insts[region.insts[def]].op;
            let from_carried = op.operands().contains(&carried)
                && matches!(
                    op,
                    Op::Binary { .. } | Op::Unary { .. } | Op::Cast { .. } | Op::Fma { .. } | Op::Rounded { .. }
                );
            let waited = earlier
                .iter()
                .any(|&p| p < def && self.wgmma_shape(&self.k.insts[region.insts[p]]).is_some());
            // Or nothing is in flight when the step starts: a `dot` reading A from a carried
            // value is retired before the yield (`retire_before_yield`), so the rotated walk
            // may rescale its accumulator before its first `dot` is issued.
            let retired_at_yield = region.args.contains(&a);
            if !from_carried || !(waited || retired_at_yield) {
                return None;
            }
        }
        Some((result, carried))
    }

    /// At the end of an iteration's body, before its yield: the `dot` left in flight is
    /// waited for where it reads A from registers of a value the loop carries (a walk
    /// rotated by one step, as attention's `P` of the step before), since the yield
    /// overwrites them and the MMAs read them until their wait. Its MMAs then still overlap
    /// whatever follows them in the body.
    pub(crate) fn retire_before_yield(&mut self, state: &PipelineState, region: &Region) {
        let Some((result, _)) = state.plan.in_flight else {
            return;
        };
        let ValueDef::Result { inst, .. } = self.k.values[result].def else {
            return;
        };
        if let Op::Dot { a, .. } = self.k.insts[inst].op {
            if region.args.contains(&a) {
                self.emit(Stmt::WgmmaWait { pending: 0 });
            }
        }
    }
}
