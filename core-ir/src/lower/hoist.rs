//! `dot` operands staged once, before a loop: the loop's invariant ones, and those of the
//! `dot`s after it that were computed before it.
//!
//! A `dot` on the tensor cores reads its operands from shared memory (`mma.rs`,
//! `wgmma.rs`, and on cooperative matrices `coop.rs`): a load the enclosing loop pipelines arrives there by itself, anything else
//! the `dot` stores there each time it runs, between two barriers. An operand computed
//! before the loop (fused attention's `Q`, read by the `Q Kᵀ` of every key block) holds the
//! same value in every iteration, so it is stored once before the loop into a buffer of its
//! own, which the loop's `dot`s read as they read the pipeline's stages: no store and no
//! barrier a step for it. Only `dot`s directly in the loop's body are considered (a `dot`
//! under an `if` in the body may not run, and one in a nested loop is that loop's concern).
//!
//! An operand computed before a loop for a `dot` after it, and used by nothing else (the
//! rotated attention walk's last values loaded ahead, `AttentionMeta::last_values_ahead`),
//! goes the same way: held in registers across the loop it would take them from every
//! step, and stored after it, its load's latency and its store would stand between the
//! loop and the `dot`. Its buffer is live across the loop (`thread::shared` sees it
//! touched before and after), so the loop's own buffers never share its bytes.

use super::mma::{Operand, SharedOperand};
use super::{LowerError, Lowerer};
use crate::ir::{InstId, Op, Region, ValueDef, ValueId};
use crate::thread::Stmt;

/// Which operand of which `dot`: the `dot`'s result and whether it is `B`.
pub(crate) type HoistKey = (ValueId, bool);

/// An operand of a `dot` after a loop, computed before it: the `dot`, the operand and which.
pub(crate) type AcrossLoop = (InstId, ValueId, Operand);

impl Lowerer<'_> {
    /// Before the `for` loop whose body is `region`: stores the loop-invariant operands of
    /// the body's tensor-core `dot`s, and the operands `after` of `dot`s that follow the loop
    /// ([`Lowerer::dots_across_loop`]), into shared buffers of their own (then a barrier),
    /// and returns what [`Lowerer::forget_hoisted`] takes after the loop (the loop's own:
    /// those of `after` stay until their `dot`s read them).
    pub(crate) fn hoist_invariant_operands(
        &mut self,
        region: &Region,
        after: &[AcrossLoop],
    ) -> Result<Vec<HoistKey>, LowerError> {
        let mut own = Vec::new();
        for &id in &region.insts {
            let Op::Dot { a, b, .. } = self.k.insts[id].op else {
                continue;
            };
            for (v, which) in [(a, Operand::A), (b, Operand::B)] {
                if self.invariant_in(v, region) && self.pipelined_operand(v).is_none() {
                    own.push((id, v, which));
                }
            }
        }
        let mut keys = Vec::new();
        let (mut wgmma, mut any, mut copied) = (false, false, false);
        let staged = own.iter().map(|s| (s, true)).chain(after.iter().map(|s| (s, false)));
        for (&(id, v, which), loops_own) in staged {
            let inst = &self.k.insts[id];
            let Some(&result) = inst.results.first() else { continue };
            // Copied by the loop's producer into a buffer of its own (`staged`): waited for
            // below, not stored.
            let key = (result, which == Operand::B);
            if self.staged.as_ref().is_some_and(|s| s.stages(key)) {
                copied = true;
                if loops_own {
                    keys.push(key);
                }
                continue;
            }
            let mma = self.mma_plan(inst);
            if mma.is_none() && self.coop_plan(inst).is_none() {
                continue;
            }
            let (operand, stored) = match mma {
                Some(ref plan) => self.shared_operand(inst, v, which, plan.operand_type(which))?,
                None => self.coop_operand(v)?,
            };
            debug_assert!(stored, "an invariant operand is stored, not pipelined");
            let key = (result, which == Operand::B);
            self.hoisted.insert(key, operand);
            any = true;
            if loops_own {
                keys.push(key);
            }
            wgmma |= self.wgmma_shape(inst).is_some();
        }
        if any {
            if wgmma {
                // Stored through the generic proxy, read by wgmma through the async one.
                self.emit(Stmt::FenceProxyAsync);
            }
            self.emit(Stmt::Barrier);
        }
        if copied {
            self.staged_copies_wait()?;
        }
        Ok(keys)
    }

    /// The operands of the `dot`s in `r` after its `for` loop at `at` that were computed
    /// before the loop (by an instruction of `r` ahead of it) and are used by nothing else:
    /// what [`Lowerer::hoist_invariant_operands`] stages with the loop's own (it leaves
    /// those of `dot`s off the matrix units alone).
    pub(crate) fn dots_across_loop(&self, r: &Region, at: usize) -> Vec<AcrossLoop> {
        let before = &r.insts[..at];
        let ahead = |v: ValueId| match self.k.values[v].def {
            ValueDef::Result { inst, .. } => before.contains(&inst),
            _ => false,
        };
        let mut found = Vec::new();
        for &id in &r.insts[at + 1..] {
            let Op::Dot { a, b, .. } = self.k.insts[id].op else {
                continue;
            };
            for (v, which) in [(a, Operand::A), (b, Operand::B)] {
                if ahead(v) && self.use_count(v) == 1 {
                    found.push((id, v, which));
                }
            }
        }
        found
    }

    /// After `dot` `id` is lowered: the operands of it that `staged`
    /// ([`Lowerer::dots_across_loop`]) had staged before a loop are no longer in reach, so
    /// that a statement list lowered again (a loop body unrolled) stages them afresh rather
    /// than reading the first copy's buffer.
    pub(crate) fn forget_staged_for(&mut self, id: InstId, staged: &[AcrossLoop]) {
        let Some(&result) = self.k.insts[id].results.first() else {
            return;
        };
        for &(_, _, which) in staged.iter().filter(|s| s.0 == id) {
            self.hoisted.remove(&(result, which == Operand::B));
        }
    }

    /// The buffer a hoisted operand `which` of the `dot` whose result is `result` is in.
    pub(crate) fn hoisted_operand(&self, result: Option<ValueId>, which: Operand) -> Option<SharedOperand> {
        self.hoisted.get(&(result?, which == Operand::B)).copied()
    }

    /// After the loop: its hoisted operands are no longer in reach.
    pub(crate) fn forget_hoisted(&mut self, keys: &[HoistKey]) {
        for k in keys {
            self.hoisted.remove(k);
        }
    }

    /// Whether `v` is computed by an instruction outside `region` (so the same in every
    /// iteration of the loop whose body it is). Parameters are scalars, never operands, and
    /// region arguments are left alone (a loop's own are carried).
    fn invariant_in(&self, v: ValueId, region: &Region) -> bool {
        match self.k.values[v].def {
            ValueDef::Result { inst, .. } => !self.defined_inside(inst, region),
            _ => false,
        }
    }
}
