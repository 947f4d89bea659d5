//! A pipelined load's slice: the instructions of the loop body that compute its pointers
//! and masks (lowered again for a later iteration), and the carried values they read; and
//! whether a load varies in the loop at all.

use crate::ir::{InstId, Op, Region, ValueDef, ValueId};
use crate::lower::Lowerer;
use std::collections::{HashMap, HashSet};

impl Lowerer<'_> {
    /// The body instructions that compute `roots` from the loop variable, carried values
    /// and values from outside the loop, and the carried values read (whose yields join the
    /// slice); `None` when something else (a load, a nested region) is needed.
    pub(super) fn load_slice(
        &self,
        roots: &[ValueId],
        top: &HashMap<ValueId, InstId>,
        yields: &[ValueId],
        region: &Region,
    ) -> Option<(HashSet<InstId>, HashSet<usize>)> {
        let (mut insts, mut carried) = (HashSet::new(), HashSet::new());
        let mut work: Vec<ValueId> = roots.to_vec();
        let mut seen: HashSet<ValueId> = HashSet::new();
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(i) = region.args.iter().position(|&a| a == v) {
                if i > 0 && carried.insert(i - 1) {
                    work.push(*yields.get(i - 1)?);
                }
                continue;
            }
            let Some(&id) = top.get(&v) else {
                // Defined outside the loop, or inside a nested region (rejected below).
                if let ValueDef::Result { inst, .. } = self.k.values[v].def {
                    if self.defined_inside(inst, region) {
                        return None;
                    }
                }
                continue;
            };
            let op = &self.k.insts[id].op;
            let pure = !matches!(
                op,
                Op::Load { .. }
                    | Op::Store { .. }
                    | Op::Atomic { .. }
                    | Op::AtomicCas { .. }
                    | Op::For { .. }
                    | Op::If { .. }
                    | Op::While { .. }
                    | Op::Dot { .. }
                    | Op::Yield { .. }
            );
            if !pure {
                return None;
            }
            insts.insert(id);
            work.extend(op.operands());
        }
        Some((insts, carried))
    }

    /// Whether any of `roots` depends on the loop variable or a carried value of the loop
    /// whose body is `region` (`top`: the body's results and their instructions).
    pub(super) fn varies_in_loop(&self, roots: &[ValueId], top: &HashMap<ValueId, InstId>, region: &Region) -> bool {
        let mut work: Vec<ValueId> = roots.to_vec();
        let mut seen: HashSet<ValueId> = HashSet::new();
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            if region.args.contains(&v) {
                return true;
            }
            if let Some(&id) = top.get(&v) {
                work.extend(self.k.insts[id].op.operands());
            }
        }
        false
    }

    /// Whether instruction `inst` is inside `region`, at any depth.
    pub(crate) fn defined_inside(&self, inst: InstId, region: &Region) -> bool {
        region
            .insts
            .iter()
            .any(|&i| i == inst || self.k.insts[i].regions.iter().any(|r| self.defined_inside(inst, r)))
    }
}
