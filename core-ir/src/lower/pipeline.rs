//! Software pipelining of the loads that feed `dot` on the tensor cores, as Triton's
//! pipeliner: in a `for` loop, a load whose only use is as an operand of such a `dot`
//! becomes asynchronous copies (`cp.async`) straight into a ring of `num_stages` swizzled
//! shared-memory tiles, `A = num_stages - 1` iterations ahead of the `dot` that reads them
//! (`A = num_stages - 2` when that `dot` runs on warpgroup MMAs left in flight across the
//! back edge: the buffer being refilled was then read two iterations back).
//!
//! ```text
//! before the loop:  for s in 0..A: copies of iteration s into stage s; commit
//! iteration i:      wait until iteration i's group is complete
//!                   (fence.proxy.async where a wgmma reads the copies); barrier
//!                   copies of iteration i+A into stage (i+A) % S; commit
//!                   the body, its `dot` reading stage i % S (`ldmatrix`, or wgmma
//!                   descriptors; then wgmma.wait_group 1 in flight, else 0)
//! after the loop:   wait for all groups (and the last wgmmas); barrier, after which the
//!                   ring's shared memory may be reused
//! ```
//!
//! The copies of a later iteration need its pointers and masks: the instructions of the body
//! that compute them (the load's *slice*: index arithmetic, pointer increments) are lowered
//! a second time with the loop variable `S-1` steps ahead and with copies of the loop-carried
//! values they read, which the ahead slice advances itself (so those carried values must be
//! computed from the slice alone: `a_ptrs += BLOCK_K * stride_ak` is). Copies of iterations
//! past the end, and masked-off elements, read nothing and fill zeros: `cp.async`'s
//! zero-fill form, which equals the masked load when its `other` is 0.
//!
//! On a target without asynchronous copies whose `dot`s run on cooperative matrices
//! (Vulkan), the same pipeline runs through registers, with two stages in shared memory (one
//! where two do not fit, below) and `A = num_stages - 1` sets of prefetch registers (at most
//! 2): the loads of iteration `i + A` go into set `i % A` during iteration `i`, before its
//! `dot`, so that their latency hides behind `A` iterations of multiply-adds, and iteration
//! `i` begins by storing set `i % A` into its stage (zeros where masked, as the copies' zero
//! fill), then one barrier:
//!
//! ```text
//! before the loop:  loads of iterations 0..A into sets 0..A
//! iteration i:      store set i % A into stage i % 2; barrier
//!                   loads of iteration i+A into set i % A
//!                   the body, its `dot` reading stage i % 2
//! ```
//!
//! The loads into prefetch registers are predicated by their masks and by the iteration
//! being before the end. Where the masks say when they hold in every element
//! (`mask_bound.rs`), the loop runs the trips whose prefetches all hold first, in a loop of
//! their own whose loads are unpredicated ([`Lowerer::prefetch_holds`], `control.rs`), and
//! the other trips issue theirs behind one branch on the same condition: NVIDIA's Vulkan
//! driver keeps a branch or predicate per masked load, and the tutorial's matmul ran 10.6%
//! faster at 4096³ (H200) with its unmasked trips on their own.
//!
//! Where two stages do not fit shared memory beside the accumulator's exchange (128 x 256 x
//! 32 in Vulkan's 48 KiB) but one does, the one stage is refilled between two barriers: each
//! iteration first waits until every warp has read it in the last one, then stores, then
//! waits again. Hand-written first (`benches/matmul-wgsl/handwritten.py`, `hs1k32`), this
//! ran 128 x 256 x 32 at 4096³ in 0.59 ms where per-iteration staging without prefetch took
//! 0.92 (H200, `docs/performance.md`).
//!
//! With `num_stages` 1 (`A = 0`) the loads of iteration `i` go into the one set at its top,
//! right before they are stored: no load is in flight at a barrier. (What that costs against
//! loads ahead tells whether NVIDIA's driver waits at a barrier for loads in flight.)
//!
//! (Stage `i % 2` was last read in iteration `i - 2`, before iteration `i - 1`'s barrier.)
//! Registers cannot be indexed at run time, and a select or copy between sets would wait
//! for the loads in flight in the other, so with two sets the loop body is lowered twice a
//! trip, each copy naming its set, and an odd last iteration runs after the loop
//! (`control.rs`). Measured on an H100 through NVIDIA's driver, two sets made the tutorial's
//! matmul up to 6% faster than one (the chosen block 1.8%), and the driver's compile 2.5
//! times slower (`docs/performance.md`).
//!
//! A loop that asks for it (`for_range_staged`, `Op::For::num_stages`, Triton's
//! `tl.range(..., num_stages=)`) also pipelines, where the target has asynchronous copies,
//! its loads that feed no `dot` ("own copies"): each thread copies the elements it would
//! have loaded into slots of its own in the ring (vector `v` of thread `t` at
//! `(v * threads + t) * width`, so that a warp's slots are consecutive) and, once its own
//! group is complete, reads them back into the load's layout. No thread reads another's
//! slots, so neither the read nor the refill of a stage waits at a barrier: a load in
//! registers would be waited for at the body's first barrier (a barrier orders the memory
//! accesses before it), where a copy in flight is not. The loop's step may then be any
//! value, not only a positive constant (a persistent walk over rows steps by
//! `num_programs`), and `num_stages` there also sets the depth of the `dot` operands'
//! pipeline. A load such a loop makes alike in every iteration (the layer norm's weight
//! and bias, loaded beside each row) is copied once, before the loop, into slots of one
//! stage that every iteration reads back: held in registers across the loop instead, it
//! costs registers, and with them programs a multiprocessor.
//!
//! Since no thread reads another's slots, a loop whose pipelined loads are all own copies
//! refills the stage it has just read (`Target::refill_after_read`, on by default): its
//! copies of iteration `i + A` are lowered at the iteration's top as above but emitted after
//! the first instruction of the body that uses a value read back (`PendingRefill`), which
//! cannot run before the thread's reads of its slots have returned. The ring then holds
//! `A = num_stages - 1` stages, not `num_stages`, with the copies as far ahead: what lets
//! the cluster softmax's walk hold a share of 32768 f32 columns and its next row's copy
//! (128 KB a stage) in one multiprocessor's shared memory, or two programs of 16384.
//!
//! ```text
//! iteration i:      wait until iteration i's group is complete
//!                   the body: its own copies read back from stage i % A; after the first
//!                   use of them, copies of iteration i+A into stage i % A; commit
//! ```
//!
//! A load is pipelined when all of this holds; otherwise it stays a load in registers and the
//! `dot` stages it itself (`mma.rs`, `coop.rs`). Each access must move 4, 8 or 16 bytes (what `cp.async`
//! copies: 2 to 8 16-bit values, 1 to 4 f32 ones of a tf32 `dot`): a ragged K whose mask the
//! analysis cannot prove constant over a vector falls back.

use super::mma::{fastest_dim, Operand, SharedOperand};
use super::wgmma::operand_tile;
use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Inst, InstId, Literal, Op, Region, ValueDef, ValueId};
use crate::layout::Layout;
use crate::thread::{Expr, Reg, SharedAlloc, Stmt};
use crate::types::ScalarType;
use std::collections::{HashMap, HashSet};

/// The most iterations a pipeline through registers runs ahead: one prefetch register set
/// each, the loop unrolled by as many (`control.rs` runs the odd last iteration on its own).
const MAX_REGISTER_SETS: u32 = 2;

/// What a loop's pipeline does, decided before it is lowered.
pub(crate) struct PipelinePlan {
    pub(crate) loads: Vec<PipelinedLoad>,
    /// The body's top-level instructions that compute the loads' pointers and masks and the
    /// carried values they read, in body order.
    slice: Vec<InstId>,
    /// The carried values (indices into the loop's carried values) the slice reads.
    carried: Vec<usize>,
    pub(crate) stages: u32,
    /// Iterations the copies run ahead: `stages - 1`, or `stages - 2` when the warpgroup
    /// MMAs of `in_flight` still read the previous stage while the next iteration's copies
    /// are issued.
    ahead: u32,
    /// The result of the loop's `dot` on warpgroup MMAs that may stay in flight across the
    /// back edge (`wgmma.wait_group 1`), if any, and the carried value its MMAs accumulate
    /// into (see [`Lowerer::wgmma_in_flight`]).
    pub(crate) in_flight: Option<(ValueId, ValueId)>,
    /// Through registers, for `dot`s on cooperative matrices (module comment), rather than
    /// asynchronous copies.
    pub(crate) registers: bool,
    /// Through registers: the sets of prefetch registers, one for each iteration in flight
    /// (iteration `i`'s in set `i % register_sets`): `ahead` of them, and one where `ahead`
    /// is 0 (the loads then go into it in the iteration that stores them).
    register_sets: u32,
    /// The loop's step where it is a constant. `dot` operands need a positive one; where
    /// it is not known (own copies only), whether a later iteration is before the end is
    /// worked out from the step's sign at run time.
    step_const: Option<i64>,
    /// Whether the copies of a later iteration refill the stage this iteration read, once
    /// what each thread read back is used (module comment): `stages` is then `num_stages -
    /// 1`, and `ahead` as many.
    pub(crate) refill_after_read: bool,
}

pub(crate) struct PipelinedLoad {
    /// The load instruction and its result.
    pub inst: InstId,
    pub value: ValueId,
    layout: Layout,
    /// Elements per copy.
    width: u32,
    /// The shared tile of one stage (buffer not yet allocated).
    pub operand: SharedOperand,
    /// Whether a `dot` on warpgroup MMAs reads it (through the asynchronous proxy).
    pub wgmma: bool,
    /// Where it is fetched through the tensor memory accelerator (`tma.rs`), how.
    pub tma: Option<super::tma::TmaLoad>,
    /// An own copy (module comment): a load that feeds no `dot`, read back by the thread
    /// that copied it; `operand.tile` is then the unswizzled row of one stage's slots.
    pub own: bool,
    /// An own copy of what every iteration loads alike: copied once, before the loop, into
    /// one stage.
    pub invariant: bool,
}

/// A pipeline being lowered: its buffers and the registers it carries.
pub(crate) struct PipelineState {
    pub(crate) plan: PipelinePlan,
    /// Per load: its shared operand (stage unset) and the tile index of each copy.
    pub(crate) buffers: Vec<(SharedOperand, Vec<Reg>)>,
    /// The carried values the slice reads, `S - 1` iterations ahead.
    pub(crate) ahead: Vec<LVal>,
    /// The stage to read this iteration and the one to fill.
    pub(crate) read: Reg,
    pub(crate) fill: Reg,
    /// Through registers: per set, per load, the registers a later iteration is loaded into.
    prefetch: Vec<Vec<Vec<Reg>>>,
    /// The mbarriers of the loads fetched through TMA, if any are.
    pub(crate) tma: Option<super::tma::TmaRing>,
    /// The loop's step (not known where a producer warpgroup issues the copies: its
    /// loops step by a positive constant, `PipelinePlan::step_const`).
    step: Option<Reg>,
    /// Whether no copies were issued yet: the first ones include the invariant loads'.
    first_copies: bool,
    /// Where a producer warpgroup issues the copies (`specialize`), the consumers' side.
    pub(crate) consumer: Option<super::specialize::ConsumerState>,
}

impl PipelineState {
    /// How many iterations of the loop body one trip runs: as many as there are prefetch
    /// register sets, so that each copy of the body names its set statically.
    pub(crate) fn unroll(&self) -> usize {
        self.prefetch.len().max(1)
    }
}

impl Lowerer<'_> {
    /// The pipeline of `for` loop `inst` (body `region`), if any of its loads qualifies.
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
        let own_copies = num_stages.is_some() && !registers && self.own_copies_allowed;
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
            // What every iteration loads alike is copied once (module comment).
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
            for i in 0..loads.len() {
                loads[i].tma = self.tma_plan(loop_inst, &loads[i]);
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

    /// Load `id` as an own copy (module comment), if it can be one: it feeds no `dot` and
    /// each of its accesses moves 4, 8 or 16 bytes (what `cp.async` copies). Masked-off
    /// elements are copied as zeros; a load whose `other` is not zero gets it where its
    /// mask is off when read back.
    fn own_copy(&self, id: InstId) -> Option<PipelinedLoad> {
        let inst = &self.k.insts[id];
        let Op::Load { ptr, mask, .. } = inst.op else {
            return None;
        };
        let value = *inst.results.first()?;
        let ty = self.k.ty(value);
        // (Numbers: booleans live in registers as predicates, not as the bytes copied.)
        let elem = ty.scalar_type().filter(|&e| e != ScalarType::Bool)?;
        let feeds_dot = self
            .k
            .insts
            .iter()
            .any(|(_, i)| matches!(i.op, Op::Dot { a, b, .. } if a == value || b == value));
        if feeds_dot {
            return None;
        }
        let layout = self.load_layout(ptr);
        if layout.sliced != 0 {
            return None;
        }
        let width = self.access_width(&layout, ty.shape, ptr, mask) as u32;
        if !matches!(width * elem.size_bytes() as u32, 4 | 8 | 16) {
            return None;
        }
        let threads = self.target.num_warps * self.target.warp_size;
        let slots = layout.map(ty.shape).len as u32 * threads;
        Some(PipelinedLoad {
            inst: id,
            value,
            layout,
            width,
            operand: SharedOperand {
                alloc: 0,
                tile: crate::layout::SwizzledTile {
                    rows: 1,
                    cols: slots,
                    vec: width,
                    per_phase: 1,
                    max_phase: 1,
                    block_cols: slots,
                    align: 16,
                },
                contiguous: 0,
                stage: None,
            },
            wgmma: false,
            tma: None,
            own: true,
            invariant: false,
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

    /// The result of the loop body's `dot` whose warpgroup MMAs may run on while the next
    /// iteration waits for its copies, issues the ones after and starts its own MMAs (one
    /// `wgmma` group in flight, as the hand-written kernel measured best), with the carried
    /// value whose registers they accumulate into. It is the body's last `dot`, on warpgroup
    /// MMAs, B pipelined and A pipelined or (decided as it is lowered) read from registers;
    /// its result is yielded into a carried value and used by nothing else, and its
    /// accumulator is that carried value or computed from it alone (attention's `acc *
    /// alpha`), so that the MMAs can update the carried registers in place. Nothing may read
    /// those registers before the next iteration's wait: the carried value is read by the
    /// `dot` itself (MMAs chained on one accumulator), or after an earlier `dot` of the body
    /// on warpgroup MMAs, whose `wait_group 0` retires the group in flight too, or anywhere
    /// when the `dot` reads A from a carried value (retired before the yield). It needs a
    /// third stage: the copies then run `stages - 2` ahead, so that the buffer they refill
    /// was read two iterations back.
    fn wgmma_in_flight(
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
        if !pipelined(b) || uses(result) != 1 || uses(carried) != 1 || uses(acc) != 1 {
            return None;
        }
        // `a` pipelined, or not a load of this body (then it is read from registers or the
        // `dot` falls back to waiting: see `dot_wgmma`).
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
                    Op::Binary { .. } | Op::Unary { .. } | Op::Cast { .. } | Op::Fma { .. }
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

    /// Load `id` as a pipelined operand, if it can be one (module comment).
    fn pipelinable(&self, id: InstId, region: &Region, registers: bool) -> Option<PipelinedLoad> {
        let inst = &self.k.insts[id];
        let Op::Load { ptr, mask, other, .. } = inst.op else {
            return None;
        };
        let value = inst.results[0];
        let ty = self.k.ty(value);
        let elem = ty.scalar_type()?;
        // (f32 operands reach the tensor cores only as tf32, which `mma_plan` checks below.)
        if !matches!(elem, ScalarType::F16 | ScalarType::BF16 | ScalarType::F32) || ty.shape.rank() != 2 {
            return None;
        }
        if other.is_some_and(|o| !self.is_zero(o)) {
            return None;
        }
        // Used only as an operand of `dot`s on the tensor cores in this body.
        // A `dot` on warpgroup MMAs reads its own tile layout, so such a load feeds only it.
        let mut uses = 0;
        let mut wgmma = None;
        for (iid, i) in self.k.insts.iter() {
            for o in i.op.operands() {
                if o != value {
                    continue;
                }
                match i.op {
                    Op::Dot { a, b, acc, .. } if acc != value && a != b && region.insts.contains(&iid) => {
                        if registers {
                            self.coop_plan(i)?;
                            uses += 1;
                            continue;
                        }
                        self.mma_plan(i)?;
                        if let Some(shape) = self.wgmma_shape(i) {
                            wgmma = Some((shape, if a == value { Operand::A } else { Operand::B }));
                        }
                        uses += 1;
                    }
                    _ => return None,
                }
            }
        }
        if uses == 0 || (wgmma.is_some() && uses > 1) {
            return None;
        }
        let layout = self.load_layout(ptr);
        let map = layout.map(ty.shape);
        if layout.sliced != 0 || (0..2).any(|d| map.replicated(d)) {
            return None;
        }
        let width = self.access_width(&layout, ty.shape, ptr, mask) as u32;
        let contiguous = fastest_dim(layout);
        let dims = [ty.shape.dims()[0], ty.shape.dims()[1]];
        let (shape, which) = match wgmma {
            Some((s, w)) => (Some(s), w),
            None => (None, Operand::A),
        };
        // (A column-major A is not copied: wgmma reads A along K, so it is staged from
        // registers.)
        let (tile, stored) = if registers {
            (super::coop::coop_tile(dims, contiguous, elem), contiguous)
        } else {
            operand_tile(shape, which, dims, contiguous, elem)?
        };
        let bytes = width * elem.size_bytes() as u32;
        // (Registers take any width the access has; `cp.async` copies 4, 8 or 16 bytes.)
        if stored != contiguous
            || !(matches!(bytes, 4 | 8 | 16) || registers)
            || width > tile.vec
            || layout.blocked.order[0] as usize != contiguous
        {
            return None;
        }
        Some(PipelinedLoad {
            inst: id,
            value,
            layout,
            width,
            operand: SharedOperand {
                alloc: 0,
                tile,
                contiguous,
                stage: None,
            },
            wgmma: shape.is_some(),
            tma: None,
            own: false,
            invariant: false,
        })
    }

    /// Whether `v` is the constant +0 (a constant, or a splat or broadcast of one): what the
    /// copies' zero fill writes. (Not -0.0: a masked-off row of -0.0 products could then
    /// give a sum of the other sign.)
    pub(crate) fn is_zero(&self, v: ValueId) -> bool {
        let ValueDef::Result { inst, .. } = self.k.values[v].def else {
            return false;
        };
        match self.k.insts[inst].op {
            Op::Constant { value } => match value {
                Literal::Float(f) => f.to_bits() == 0,
                Literal::Int(i) => i == 0,
                Literal::Bool(b) => !b,
            },
            Op::Splat { value } | Op::Broadcast { value } => self.is_zero(value),
            _ => false,
        }
    }

    /// The body instructions that compute `roots` from the loop variable, carried values
    /// and values from outside the loop, and the carried values read (whose yields join the
    /// slice); `None` when something else (a load, a nested region) is needed.
    fn load_slice(
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
    fn varies_in_loop(&self, roots: &[ValueId], top: &HashMap<ValueId, InstId>, region: &Region) -> bool {
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

    /// Before the loop: the ring buffers, the carried values' ahead copies, and the copies
    /// of the first `S - 1` iterations.
    pub(crate) fn pipeline_prologue(
        &mut self,
        plan: PipelinePlan,
        inst: &Inst,
        init: &[ValueId],
        layouts: &[Option<Layout>],
        (start, end, step): (Reg, Reg, Reg),
    ) -> Result<PipelineState, LowerError> {
        let mut state = self.pipeline_setup(plan, init, layouts, None)?;
        state.step = Some(step);
        let iv_ty = self.regs[start].ty;
        let mut iv = start;
        for s in 0..state.plan.ahead {
            if s > 0 {
                iv = self.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, step));
            }
            let stage = self.i32c(s as i64);
            self.issue_copies(&mut state, inst, iv, end, (stage, s as usize))?;
        }
        Ok(state)
    }

    /// The ring buffers, their mbarriers where TMA fills them (with the "empty" ones that
    /// the consumers of a warp-specialized loop arrive on: `specialized` gives their
    /// arrivals a phase, and whether the ring lives across the tiles of a persistent
    /// kernel), and the carried values' ahead copies.
    pub(crate) fn pipeline_setup(
        &mut self,
        plan: PipelinePlan,
        init: &[ValueId],
        layouts: &[Option<Layout>],
        specialized: Option<(u32, bool)>,
    ) -> Result<PipelineState, LowerError> {
        let mut buffers = Vec::new();
        for load in &plan.loads {
            let ty = self.k.ty(load.value);
            let elem = ty.scalar_type().expect("a pipelined load gives numbers");
            let stages = if load.invariant { 1 } else { plan.stages };
            let alloc = self.operand_alloc(SharedAlloc {
                align: load.operand.tile.align,
                ..SharedAlloc::new(elem, load.operand.tile.len() * stages)
            });
            let operand = SharedOperand { alloc, ..load.operand };
            let map = load.layout.map(ty.shape);
            let index = match load.own {
                true => self.own_slots(map.len as u32, load.width),
                false => self.operand_store_indices(&map, load.layout, &operand, load.width),
            };
            buffers.push((operand, index));
        }
        let tma = self.tma_ring(&plan.loads, plan.stages, specialized);
        let carried_init: Vec<ValueId> = plan.carried.iter().map(|&c| init[c]).collect();
        let carried_layouts: Vec<Option<Layout>> = plan.carried.iter().map(|&c| layouts[c]).collect();
        let ahead = self.carried_slots(&carried_init, &carried_layouts)?;
        let prefetch = (0..plan.register_sets)
            .map(|_| {
                plan.loads
                    .iter()
                    .map(|l| {
                        let ty = self.k.ty(l.value);
                        let elem = ty.scalar_type().expect("a pipelined load gives numbers");
                        (0..l.layout.map(ty.shape).len).map(|_| self.new_reg(elem)).collect()
                    })
                    .collect()
            })
            .collect();
        // A ring that lives across a persistent kernel's tiles starts once.
        let across_tiles = specialized.is_some_and(|(_, across)| across);
        Ok(PipelineState {
            buffers,
            ahead,
            read: self.ring_counter(0, across_tiles),
            fill: self.ring_counter(plan.ahead % plan.stages, across_tiles),
            plan,
            prefetch,
            tma,
            step: None,
            first_copies: true,
            consumer: None,
        })
    }

    /// At the top of an iteration with loop variable `iv`: waits for this iteration's
    /// operands, starts the copies `S - 1` iterations ahead, and points the `dot`s at the
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
            let set = &state.prefetch[set % state.prefetch.len()];
            for ((load, (operand, index)), regs) in state.plan.loads.iter().zip(&state.buffers).zip(set) {
                let len = self.i32c(operand.tile.len() as i64);
                let base = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, state.read, len));
                for (g, &at) in (0..regs.len()).step_by(load.width as usize).zip(index) {
                    let dst = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, base));
                    self.emit(Stmt::Store {
                        values: regs[g..g + load.width as usize].to_vec(),
                        mem: crate::thread::Memory::Shared { alloc: operand.alloc },
                        index: dst,
                        pred: None,
                    });
                }
            }
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

    /// The slots of one stage of an own copy of `len` elements a thread in vectors of
    /// `width` (module comment): vector `v` of thread `t` at `(v * threads + t) * width`,
    /// computed once, in the prologue.
    fn own_slots(&mut self, len: u32, width: u32) -> Vec<Reg> {
        let threads = (self.target.num_warps * self.target.warp_size) as i64;
        let tid = self.program_thread_id();
        let w = self.i32c(width as i64);
        let first = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Mul, tid, w));
        (0..len / width)
            .map(|v| {
                let offset = self.i32c(v as i64 * threads * width as i64);
                self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, first, offset))
            })
            .collect()
    }

    /// Where stage `stage` of `load`'s buffer starts: stage 0 always for an invariant copy,
    /// which has one.
    fn stage_base(&mut self, load: &PipelinedLoad, operand: &SharedOperand, stage: Reg) -> Reg {
        if load.invariant {
            return self.i32c(0);
        }
        let len = self.i32c(operand.tile.len() as i64);
        self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, stage, len))
    }

    /// Where this iteration's own copies are read back (from stage `read`, or the one
    /// stage of an invariant copy), when their loads are lowered ([`Self::read_own_copy`]).
    fn point_own_copies(&mut self, state: &PipelineState) {
        for (load, (operand, index)) in state.plan.loads.iter().zip(&state.buffers) {
            if !load.own {
                continue;
            }
            let base = self.stage_base(load, operand, state.read);
            let read = OwnRead {
                alloc: operand.alloc,
                base,
                index: index.clone(),
                width: load.width,
                layout: load.layout,
            };
            self.own_copies.insert(load.value, read);
        }
    }

    /// Load `inst`, if it is an own copy, read back from its slots into its layout: the
    /// value the load stands for. (Where the program loads it, not at the top of the
    /// iteration: read there, a value used late in the body, as the layer norm's weights,
    /// would hold registers through all of it.)
    pub(crate) fn read_own_copy(&mut self, inst: &Inst) -> Result<(), LowerError> {
        let Some(&value) = inst.results.first() else {
            return Ok(());
        };
        let Some(read) = self.own_copies.get(&value).cloned() else {
            return Ok(());
        };
        let elem = self.k.ty(value).scalar_type().expect("a pipelined load gives numbers");
        let mut regs = Vec::new();
        for &at in &read.index {
            let dsts: Vec<Reg> = (0..read.width).map(|_| self.new_reg(elem)).collect();
            let index = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, read.base));
            self.emit(Stmt::Load {
                dsts: dsts.clone(),
                mem: crate::thread::Memory::Shared { alloc: read.alloc },
                index,
                pred: None,
                cache: crate::ir::CacheModifier::Default,
            });
            regs.extend(dsts);
        }
        // The copies filled zeros where the mask is off; the load gives `other` there.
        if let Op::Load {
            mask: Some(mask),
            other: Some(other),
            ..
        } = inst.op
        {
            if !self.is_zero(other) {
                let (mask, other) = (self.ensure(mask, read.layout)?, self.ensure(other, read.layout)?);
                for (i, r) in regs.iter_mut().enumerate() {
                    *r = self.set(elem, Expr::Select(mask[i], *r, other[i]));
                }
            }
        }
        self.set_lval(
            value,
            LVal {
                layout: read.layout,
                regs,
                ptr: None,
            },
        );
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

    /// After the loop: no copy stays in flight.
    pub(crate) fn pipeline_epilogue(&mut self, state: &PipelineState) {
        if let Some(c) = &state.consumer {
            if state.plan.in_flight.is_some() {
                self.emit(Stmt::WgmmaWait { pending: 0 });
                self.wgmma_in_flight = None;
            }
            self.release_last_stage(state, c);
            // The consumers' barrier (made a named one of theirs): after it the epilogue may
            // reuse the ring's bytes, which the producer, done with its last copy, no longer
            // touches (`thread::ThreadKernel::shared_offsets`; not in a persistent kernel,
            // whose producer is then filling the next tile's stages).
            self.emit(Stmt::Barrier);
            for load in &state.plan.loads {
                self.pipelined.remove(&load.value);
            }
            return;
        }
        if !state.plan.registers && state.plan.loads.iter().any(|l| l.tma.is_none()) {
            self.emit(Stmt::AsyncWait { pending: 0 });
        }
        if state.plan.in_flight.is_some() {
            // The last iteration's MMAs, before anything reads the accumulator.
            self.emit(Stmt::WgmmaWait { pending: 0 });
            self.wgmma_in_flight = None;
        }
        // Every thread has waited for its last stage (before the last iteration's barrier).
        if let Some(ring) = &state.tma {
            self.tma_release(ring, state.plan.stages);
        }
        // Every thread done with the ring: what follows (the epilogue's exchange) may reuse
        // its shared memory (`thread::ThreadKernel::shared_offsets`).
        self.emit(Stmt::Barrier);
        for load in &state.plan.loads {
            self.pipelined.remove(&load.value);
            self.own_copies.remove(&load.value);
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

/// The copies of a later iteration that refill the stage this one read
/// ([`PipelinePlan::refill_after_read`]), waiting to be emitted after the first instruction
/// of the loop body (at its top level, `depth`) that computes with a value read back from
/// it (`reads`, and views of them): that instruction cannot run before the thread's reads
/// of its slots have returned, so the refill cannot overtake them.
pub(crate) struct PendingRefill {
    stmts: Vec<Stmt>,
    reads: Vec<ValueId>,
    depth: usize,
}

impl Lowerer<'_> {
    /// Emits the pending refill after `inst`, just lowered, if it is the first to use what
    /// was read back (at the loop body's top level). A view of it (a reshape, a broadcast:
    /// the same registers, possibly no instruction at all) does not count as a use; its
    /// result is then watched as what was read.
    pub(crate) fn refill_after(&mut self, inst: &Inst) {
        let depth = self.body.len();
        let Some(p) = self.pending_refill.as_mut() else {
            return;
        };
        if p.depth != depth || !inst.op.operands().iter().any(|v| p.reads.contains(v)) {
            return;
        }
        let view = matches!(
            inst.op,
            Op::Broadcast { .. } | Op::ExpandDims { .. } | Op::Reshape { .. } | Op::Permute { .. } | Op::Bitcast { .. }
        );
        if view {
            p.reads.extend(inst.results.iter().copied());
            return;
        }
        self.flush_refill();
    }

    /// Emits the pending refill, if any: at the end of the loop body where nothing at its
    /// top level used what was read back.
    pub(crate) fn flush_refill(&mut self) {
        if let Some(p) = self.pending_refill.take() {
            for stmt in p.stmts {
                self.emit(stmt);
            }
        }
    }
}

/// Where an own copy's load reads its value back from (see [`Lowerer::read_own_copy`]):
/// its slots in `alloc`, at `base` plus each vector's `index`.
#[derive(Clone)]
pub(crate) struct OwnRead {
    alloc: u32,
    base: Reg,
    index: Vec<Reg>,
    width: u32,
    layout: Layout,
}

/// One vector of a pipeline's loads into prefetch registers: `dsts` from `index` of `param`
/// where `pred` holds, else `zero` (the copies' zero fill).
struct RegisterPrefetch {
    dsts: Vec<Reg>,
    param: u32,
    index: Reg,
    pred: Reg,
    zero: Reg,
}

impl Lowerer<'_> {
    /// The loads of one iteration into prefetch registers. With `unmasked` (the trips that
    /// [`Lowerer::prefetch_holds`] admits) every load is unpredicated. Otherwise each under
    /// its own predicate, zeros where it fails, is what they mean; where `all_hold` (the
    /// same in every thread: `Lowerer::mask_all_true`) says that every predicate holds,
    /// they run behind one branch on it, unpredicated, and the predicated form is the
    /// branch's other side. (The branch alone did not speed the matmul up through NVIDIA's
    /// driver; the loop of unmasked trips did: `docs/performance.md`, "Masks in the K
    /// loop".)
    fn prefetch_into_registers(&mut self, prefetches: &[RegisterPrefetch], all_hold: Option<Reg>, unmasked: bool) {
        let load = |p: &RegisterPrefetch, pred: Option<Reg>| Stmt::Load {
            dsts: p.dsts.clone(),
            mem: crate::thread::Memory::Global { param: p.param },
            index: p.index,
            pred,
            cache: crate::ir::CacheModifier::Default,
        };
        if unmasked {
            for p in prefetches {
                self.emit(load(p, None));
            }
            return;
        }
        let mut predicated = Vec::new();
        for p in prefetches {
            predicated.extend(p.dsts.iter().map(|&d| Stmt::Set {
                dst: d,
                expr: Expr::Copy(p.zero),
            }));
            predicated.push(load(p, Some(p.pred)));
        }
        match all_hold {
            Some(cond) if !prefetches.is_empty() => self.emit(Stmt::If {
                cond,
                then_body: prefetches.iter().map(|p| load(p, None)).collect(),
                else_body: predicated,
            }),
            _ => predicated.into_iter().for_each(|s| self.emit(s)),
        }
    }

    /// The condition of the loop of unmasked trips before a register pipeline's loop, and
    /// the statements computing it (its `cond_body`): every iteration the trip starting at
    /// `iv` prefetches (`unroll` of them, `ahead` iterations on) holds
    /// ([`Lowerer::prefetch_holds`]). Each of them is past the trip's own iterations, which
    /// so run too. `None` where the masks do not say when they hold.
    pub(crate) fn unmasked_trips_condition(
        &mut self,
        state: &PipelineState,
        inst: &Inst,
        iv: Reg,
        (end, step): (Reg, Reg),
        unroll: usize,
    ) -> Result<Option<(Vec<Stmt>, Reg)>, LowerError> {
        if !state.plan.registers || state.plan.ahead == 0 {
            return Ok(None);
        }
        let iv_ty = self.regs[iv].ty;
        let (cond_body, cond) = self.nested(|l| {
            let mut all = None;
            for u in 0..unroll as i64 {
                let by = l.konst(iv_ty, Literal::Int(u + state.plan.ahead as i64));
                let delta = l.set(iv_ty, Expr::Binary(BinaryOp::Mul, step, by));
                let j = l.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, delta));
                let Some(h) = l.prefetch_holds(state, inst, j, end)? else {
                    return Ok(None);
                };
                all = Some(match all {
                    None => h,
                    Some(a) => l.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, a, h)),
                });
            }
            Ok(all)
        })?;
        Ok(cond.map(|c| (cond_body, c)))
    }

    /// A boolean register, the same in every thread, true only where the register pipeline
    /// of loop `inst` may load iteration `j` unpredicated: `j < end` and every load's mask
    /// true in every element (`Lowerer::mask_all_true`). `None` where that cannot be said:
    /// not a pipeline through registers, or a mask whose scalars the slice computes from
    /// anything but the loop variable and values from outside the loop.
    ///
    /// Lowers the slice's scalar instructions for iteration `j` (the caller's statement
    /// list then computes them; the body lowers them again for its own iterations).
    pub(crate) fn prefetch_holds(
        &mut self,
        state: &PipelineState,
        inst: &Inst,
        j: Reg,
        end: Reg,
    ) -> Result<Option<Reg>, LowerError> {
        if !state.plan.registers || state.consumer.is_some() || state.tma.is_some() {
            return Ok(None);
        }
        let region = &inst.regions[0];
        let inside: HashSet<ValueId> = region
            .insts
            .iter()
            .flat_map(|&i| self.k.insts[i].results.clone())
            .collect();
        let carried: HashSet<ValueId> = region.args[1..].iter().copied().collect();
        let k = self.k;
        let scalar_slice: Vec<InstId> = state
            .plan
            .slice
            .iter()
            .copied()
            .filter(|&i| k.insts[i].results.iter().all(|&v| k.ty(v).shape.is_scalar()) && k.insts[i].regions.is_empty())
            .collect();
        for &i in &scalar_slice {
            let operands = k.insts[i].op.operands();
            if operands
                .iter()
                .any(|v| carried.contains(v) || (inside.contains(v) && !k.ty(*v).shape.is_scalar()))
            {
                return Ok(None);
            }
        }
        self.set_lval(
            region.args[0],
            LVal {
                layout: Layout::scalar(),
                regs: vec![j],
                ptr: None,
            },
        );
        for &i in &scalar_slice {
            self.inst(&k.insts[i])?;
        }
        let mut holds = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, j, end));
        for load in &state.plan.loads {
            let Op::Load { mask: Some(m), .. } = k.insts[load.inst].op else {
                continue;
            };
            let Some(c) = self.mask_all_true(m)? else {
                return Ok(None);
            };
            holds = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, holds, c));
        }
        Ok(Some(holds))
    }
}
