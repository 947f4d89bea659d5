//! The plan of a loop's pipeline, decided before the loop is lowered: which of its loads
//! are pipelined (operands of `dot`s, own copies), the slice that computes their pointers
//! and masks, how many stages the ring holds and how many iterations ahead the copies run.

use crate::ir::{InstId, Op, Region, ValueDef, ValueId};
use crate::layout::Layout;
use crate::lower::mma::SharedOperand;
use crate::lower::Lowerer;
use std::collections::{HashMap, HashSet};

/// The most iterations a pipeline through registers runs ahead: one prefetch register set
/// each, the loop unrolled by as many (`control.rs` runs the odd last iteration on its own).
const MAX_REGISTER_SETS: u32 = 2;

/// What a loop's pipeline does, decided before it is lowered.
pub(crate) struct PipelinePlan {
    pub(crate) loads: Vec<PipelinedLoad>,
    /// The body's top-level instructions that compute the loads' pointers and masks and the
    /// carried values they read, in body order.
    pub(super) slice: Vec<InstId>,
    /// The carried values (indices into the loop's carried values) the slice reads.
    pub(super) carried: Vec<usize>,
    pub(crate) stages: u32,
    /// Iterations the copies run ahead: `stages - 1`, or `stages - 2` when the warpgroup
    /// MMAs of `in_flight` still read the previous stage while the next iteration's copies
    /// are issued.
    pub(super) ahead: u32,
    /// The result of the loop's `dot` on warpgroup MMAs that may stay in flight across the
    /// back edge (`wgmma.wait_group 1`), if any, and the carried value its MMAs accumulate
    /// into (see [`Lowerer::wgmma_in_flight`]).
    pub(crate) in_flight: Option<(ValueId, ValueId)>,
    /// Through registers, for `dot`s on cooperative matrices (`mod.rs`), rather than
    /// asynchronous copies.
    pub(crate) registers: bool,
    /// Through registers: the sets of prefetch registers, one for each iteration in flight
    /// (iteration `i`'s in set `i % register_sets`): `ahead` of them, and one where `ahead`
    /// is 0 (the loads then go into it in the iteration that stores them).
    pub(super) register_sets: u32,
    /// The loop's step where it is a constant. `dot` operands need a positive one; where
    /// it is not known (own copies only), whether a later iteration is before the end is
    /// worked out from the step's sign at run time.
    pub(super) step_const: Option<i64>,
    /// Whether the copies of a later iteration refill the stage this iteration read, once
    /// what each thread read back is used (`mod.rs`): `stages` is then `num_stages -
    /// 1`, and `ahead` as many.
    pub(crate) refill_after_read: bool,
}

/// One load of a loop that the pipeline issues ahead: what it reads, where its stages go,
/// and how it is copied.
pub(crate) struct PipelinedLoad {
    /// The load instruction and its result.
    pub inst: InstId,
    pub value: ValueId,
    pub(super) layout: Layout,
    /// Elements per copy.
    pub(super) width: u32,
    /// The shared tile of one stage (buffer not yet allocated).
    pub operand: SharedOperand,
    /// Whether a `dot` on warpgroup MMAs reads it (through the asynchronous proxy).
    pub wgmma: bool,
    /// Where it is fetched through the tensor memory accelerator (`tma.rs`), how.
    pub tma: Option<crate::lower::tma::TmaLoad>,
    /// An own copy (`mod.rs`): a load that feeds no `dot`, read back by the thread
    /// that copied it; `operand.tile` is then the unswizzled row of one stage's slots.
    pub own: bool,
    /// An own copy of what every iteration loads alike: copied once, before the loop, into
    /// one stage.
    pub invariant: bool,
}

impl Lowerer<'_> {
    /// The pipeline of a `for` loop (body `region`), if any of its loads qualifies.
    /// `num_stages` is the loop's own (`Op::For::num_stages`), if it gives one.
    pub(crate) fn plan_pipeline(
        &self,
        region: &Region,
        step: ValueId,
        num_stages: Option<u32>,
    ) -> Option<PipelinePlan> {
        let registers = !self.target.async_copy && !self.target.coop_matrix.is_empty();
        if registers && !self.coop_stages {
            return None;
        }
        let stages = if registers {
            2
        } else {
            num_stages.unwrap_or(self.target.num_stages)
        };
        if !(registers || self.target.async_copy) || stages < 2 {
            return None;
        }
        // `dot` operands need a positive constant step; own copies take any.
        let step_const = self.axis[step.index()].constant;
        let positive_step = step_const.is_some_and(|s| s > 0);
        // Other loads are copied ahead where the loop asks for its own stages, or where
        // its tensor-core `dot` takes an operand computed from them (`dot_scaled`'s
        // decoded and scaled values, a cast's): as Triton pipelines every load of such a
        // loop, so that their latency is not paid in each iteration.
        let own_copies =
            (num_stages.is_some() || self.computes_dot_operand(region)) && !registers && self.own_copies_allowed;
        let top: HashMap<ValueId, InstId> = region
            .insts
            .iter()
            .flat_map(|&i| self.k.insts[i].results.iter().map(move |&v| (v, i)))
            .collect();
        let yields: Vec<ValueId> = match region.insts.last().map(|&i| &self.k.insts[i].op) {
            Some(Op::Yield { values }) => values.clone(),
            _ => Vec::new(),
        };
        let mut loads = Vec::new();
        let mut slice: HashSet<InstId> = HashSet::new();
        let mut carried: HashSet<usize> = HashSet::new();
        for &id in &region.insts {
            let load = match positive_step {
                true => self.pipelinable(id, region, registers),
                false => None,
            };
            let Some(load) = load.or_else(|| own_copies.then(|| self.own_copy(id)).flatten()) else {
                continue;
            };
            let Op::Load { ptr, mask, .. } = self.k.insts[id].op else {
                continue;
            };
            let roots: Vec<ValueId> = std::iter::once(ptr).chain(mask).collect();
            // What every iteration loads alike is copied once (`mod.rs`).
            let load = PipelinedLoad {
                invariant: load.own && !self.varies_in_loop(&roots, &top, region),
                ..load
            };
            if let Some((s, c)) = self.load_slice(&roots, &top, &yields, region) {
                slice.extend(s);
                carried.extend(c);
                loads.push(load);
            }
        }
        if loads.is_empty() {
            return None;
        }
        let mut carried: Vec<usize> = carried.into_iter().collect();
        carried.sort_unstable();
        if let ValueDef::RegionArg { inst: loop_inst, .. } = self.k.values[region.args[0]].def {
            for load in &mut loads {
                load.tma = self.tma_plan(loop_inst, load);
            }
        }
        // Through registers, two stages in shared memory where they fit, else one (whose
        // refill waits at a second barrier for every warp to have read it).
        let stages = match registers {
            true => [2, 1].into_iter().find(|&s| self.coop_ring_fits(region, &loads, s))?,
            false => stages,
        };
        let in_flight = self.wgmma_in_flight(region, &loads, &yields, stages);
        // Through registers, `num_stages - 1` iterations ahead, at most two: one set of
        // registers per iteration in flight (the body unrolled by two names them
        // statically), and one for a single stage's loads, which are stored in the
        // iteration that loads them.
        let registers_ahead = self.target.num_stages.saturating_sub(1).min(MAX_REGISTER_SETS);
        let register_sets = if registers { registers_ahead.max(1) } else { 0 };
        let ahead = if registers {
            registers_ahead
        } else if in_flight.is_some() {
            stages - 2
        } else {
            stages - 1
        };
        // Own copies alone (each thread reads back only its slots) may refill the stage just
        // read, once the thread has used what it read: one stage fewer.
        let refill_after_read = self.target.refill_after_read
            && !registers
            && in_flight.is_none()
            && loads.iter().all(|l| l.own && l.tma.is_none())
            && loads.iter().any(|l| !l.invariant);
        Some(PipelinePlan {
            loads,
            slice: region.insts.iter().copied().filter(|i| slice.contains(i)).collect(),
            carried,
            stages: if refill_after_read { stages - 1 } else { stages },
            ahead,
            in_flight,
            registers,
            register_sets,
            step_const,
            refill_after_read,
        })
    }

    /// Whether a `dot` of the loop's body runs on the tensor cores with an operand the
    /// body computes from what it loads (widened, scaled), not loaded as it is. (Not an
    /// operand computed from another `dot`, as attention's probabilities: its loop's
    /// other loads stay as they were tuned.)
    fn computes_dot_operand(&self, region: &Region) -> bool {
        let defs: HashMap<ValueId, InstId> = region
            .insts
            .iter()
            .flat_map(|&i| self.k.insts[i].results.iter().map(move |&v| (v, i)))
            .collect();
        // Whether `v` is computed in the body from one of its loads, not through a `dot`.
        let from_load = |v: ValueId| {
            let mut stack = vec![v];
            let mut seen = HashSet::new();
            while let Some(v) = stack.pop() {
                let Some(&i) = defs.get(&v) else { continue };
                if !seen.insert(i) {
                    continue;
                }
                match &self.k.insts[i].op {
                    Op::Load { .. } => return true,
                    Op::Dot { .. } => {}
                    op => stack.extend(op.operands()),
                }
            }
            false
        };
        let loaded = |v: ValueId| {
            defs.get(&v)
                .is_some_and(|&i| matches!(self.k.insts[i].op, Op::Load { .. }))
        };
        region.insts.iter().any(|&i| {
            let inst = &self.k.insts[i];
            match inst.op {
                Op::Dot { a, b, .. } => {
                    self.mma_plan(inst).is_some() && [a, b].into_iter().any(|v| !loaded(v) && from_load(v))
                }
                _ => false,
            }
        })
    }

    /// Whether `stages` stages of the loop's `dot`s on cooperative matrices fit shared
    /// memory beside the smallest exchange of each accumulator.
    fn coop_ring_fits(&self, region: &Region, loads: &[PipelinedLoad], stages: u32) -> bool {
        let ring: u64 = loads
            .iter()
            .map(|l| {
                let elem = self.k.ty(l.value).scalar_type().map_or(4, |e| e.size_bytes() as u64);
                stages as u64 * l.operand.tile.len() as u64 * elem
            })
            .sum();
        let exchange: u64 = region
            .insts
            .iter()
            .filter_map(|&i| self.coop_plan(&self.k.insts[i]))
            .map(|t| (t.wm * t.wn * t.shape.m * t.shape.n * 4) as u64)
            .max()
            .unwrap_or(0);
        ring + exchange <= self.target.max_shared_bytes as u64
    }
}
