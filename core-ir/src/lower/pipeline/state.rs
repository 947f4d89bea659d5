//! A pipeline being lowered: its ring buffers, prefetch registers and the carried values
//! its slice runs ahead with, set up before the loop with the copies of the first
//! iterations; after the loop, the waits and the barrier after which the ring is free.

use super::PipelinePlan;
use crate::ir::{BinaryOp, Inst, ValueId};
use crate::layout::Layout;
use crate::lower::mma::SharedOperand;
use crate::lower::{LVal, LowerError, Lowerer};
use crate::thread::{Expr, Reg, SharedAlloc, Stmt};

/// A pipeline being lowered: its buffers and the registers it carries.
pub(crate) struct PipelineState {
    pub(crate) plan: PipelinePlan,
    /// Per load: its shared operand (stage unset) and the tile index of each copy.
    pub(crate) buffers: Vec<(SharedOperand, Vec<Reg>)>,
    /// The carried values the slice reads, `plan.ahead` iterations ahead.
    pub(crate) ahead: Vec<LVal>,
    /// The stage to read this iteration and the one to fill.
    pub(crate) read: Reg,
    pub(crate) fill: Reg,
    /// Through registers: per set, per load, the registers a later iteration is loaded into.
    pub(super) prefetch: Vec<Vec<Vec<Reg>>>,
    /// The mbarriers of the loads fetched through TMA, if any are.
    pub(crate) tma: Option<crate::lower::tma::TmaRing>,
    /// The loop's step (not known where a producer warpgroup issues the copies: its
    /// loops step by a positive constant, `PipelinePlan::step_const`).
    pub(super) step: Option<Reg>,
    /// Whether no copies were issued yet: the first ones include the invariant loads'.
    pub(super) first_copies: bool,
    /// Where a producer warpgroup issues the copies (`specialize`), the consumers' side.
    pub(crate) consumer: Option<crate::lower::specialize::ConsumerState>,
}

impl PipelineState {
    /// How many iterations of the loop body one trip runs: as many as there are prefetch
    /// register sets, so that each copy of the body names its set statically.
    pub(crate) fn unroll(&self) -> usize {
        self.prefetch.len().max(1)
    }
}

impl Lowerer<'_> {
    /// Before the loop: the ring buffers, the carried values' ahead copies, and the copies
    /// of the first `plan.ahead` iterations.
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
}
