//! `dot` operands staged before a warp-specialized loop by its producer, through TMA.
//!
//! A loop-invariant operand (fused attention's `Q`) is otherwise loaded by the consumers
//! into registers before the loop and stored into its hoisted buffer (`hoist`), a fence and
//! a barrier after: at short lengths that load is a good part of what a program does
//! besides its walk (docs/performance.md, "What an attention program costs besides its
//! walk"). Where the operand is a global load that is a box of a tensor, the producer
//! warpgroup copies it instead, with the loop's first stages (and, with
//! `Target::tma_staged_after`, the operands of the `dot`s after the loop that `hoist`
//! stages before it: the rotated walk's last values loaded ahead):
//!
//! ```text
//! before the split:  thread 0 initializes "full" (one arrival and the bytes) and, on a
//!                    persistent grid, "empty" (an arrival of every consumer warp); barrier
//! producer:          (persistent: wait for phase p ^ 1 of "empty", the first passing at once)
//!                    its first thread arrives on "full" expecting the bytes; its first
//!                    lanes copy the boxes into the hoisted buffer; (persistent: p ^= 1)
//! consumers:         wait for phase c of "full" where they would have stored the operand;
//!                    the loop; (persistent: after its last MMAs, or after those of the
//!                    last `dot` after it whose operand is copied, lane 0 of each warp
//!                    arrives on "empty"; c ^= 1)
//! ```
//!
//! On a persistent grid the producer thus copies the next tile's operand while the
//! consumers finish this one (its buffer is never shared with another: `thread::shared`
//! keeps every buffer of a persistent warp-specialized kernel apart). The consumers' own
//! loads of the operand are dropped, unless something else uses it (the ragged or causal
//! walk after this one). `Target::tma_staged_operands` turns this off.

use super::hoist::{AcrossLoop, HoistKey};
use super::mma::{fastest_dim, Operand, SharedOperand};
use super::tma::{boxes_fill, BoxCopy};
use super::tma_box::{Sym, TmaBox};
use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, Inst, InstId, Op, Region, ValueDef, ValueId};
use crate::thread::{Expr, MBarrier, Memory, Reg, SharedAlloc, Stmt};
use crate::types::ScalarType;

/// An operand the producer copies.
#[derive(Debug)]
struct StagedLoad {
    key: HoistKey,
    /// The loaded value (its registers are never filled).
    value: ValueId,
    operand: SharedOperand,
    region_box: TmaBox,
    /// Its tensor map (`Lowerer::tensor_maps`).
    map: u32,
}

/// The operands the producer of the loop being lowered copies, and their mbarriers.
#[derive(Debug)]
pub(crate) struct StagedCopies {
    loads: Vec<StagedLoad>,
    /// One mbarrier: the copies have landed.
    full: u32,
    /// One mbarrier, on a persistent grid: the consumers are done reading them.
    empty: Option<u32>,
    /// The consumers' phase of `full` (flips each tile on a persistent grid).
    phase: Reg,
    /// Bytes the copies deliver, together.
    bytes: u32,
    /// The `dot`s after the loop whose operands are copied: on a persistent grid the
    /// consumers hand the buffers back once these are lowered (their MMAs retired).
    after: Vec<InstId>,
}

impl StagedCopies {
    /// Whether the producer copies operand `key`.
    pub(crate) fn stages(&self, key: HoistKey) -> bool {
        self.loads.iter().any(|l| l.key == key)
    }
}

impl Lowerer<'_> {
    /// Before a warp-specialized loop (`loop_inst`), while the statements before it are still
    /// open: the operands its producer will copy, their buffers registered as hoisted, their
    /// mbarriers initialized (in the prologue where the ring lives `across_tiles`). `None`
    /// where there are none.
    pub(crate) fn plan_staged_copies(
        &mut self,
        loop_inst: &Inst,
        after: &[AcrossLoop],
        consumer_warps: u32,
        across_tiles: bool,
    ) -> Result<Option<StagedCopies>, LowerError> {
        // (Several programs a block share one producer, and their operands differ: each
        // program's consumers load their own.)
        if !self.target.tma_staged_operands || !self.target.tma || self.target.programs_per_block > 1 {
            return Ok(None);
        }
        let region = &loop_inst.regions[0];
        // The loop's own invariant operands, and those of the `dot`s after it that were
        // computed before it (the rotated walk's last values loaded ahead; on a persistent
        // grid the consumers then hand every buffer back after those `dot`s, not after the
        // loop).
        let mut candidates = Vec::new();
        for &id in &region.insts {
            if let Op::Dot { a, b, .. } = self.k.insts[id].op {
                candidates.extend([(id, a, Operand::A, false), (id, b, Operand::B, false)]);
            }
        }
        if self.target.tma_staged_after {
            candidates.extend(after.iter().map(|&(id, v, which)| (id, v, which, true)));
        }
        let mut loads = Vec::new();
        let mut after_dots = Vec::new();
        let mut bytes = 0;
        for (id, v, which, is_after) in candidates {
            let inst = &self.k.insts[id];
            let Some((operand, region_box, elem)) = self.stageable(inst, v, which, region) else {
                continue;
            };
            let Some(&result) = inst.results.first() else {
                continue;
            };
            let tile = operand.tile;
            let alloc = self.operand_alloc(SharedAlloc {
                align: tile.align,
                ..SharedAlloc::new(elem, tile.len())
            });
            let operand = SharedOperand { alloc, ..operand };
            let map = self.tensor_map_for(&region_box, &tile, elem.size_bytes() as u32);
            bytes += tile.len() * elem.size_bytes() as u32;
            if is_after && !after_dots.contains(&id) {
                after_dots.push(id);
            }
            loads.push(StagedLoad {
                key: (result, which == Operand::B),
                value: v,
                operand,
                region_box,
                map,
            });
        }
        if loads.is_empty() {
            return Ok(None);
        }
        for l in &loads {
            self.hoisted.insert(l.key, l.operand);
        }
        let mut init = Vec::new();
        let first = self.first_thread();
        let full = self.new_mbarriers(1, 1, first, &mut init);
        let empty = across_tiles.then(|| self.new_mbarriers(1, consumer_warps, first, &mut init));
        self.publish_mbarriers(init, across_tiles);
        let phase = self.ring_counter(0, across_tiles);
        Ok(Some(StagedCopies {
            loads,
            full,
            empty,
            phase,
            bytes,
            after: after_dots,
        }))
    }

    /// The hoisted tile, box and element type of operand `v` (`which`) of `dot` `inst` in
    /// the loop body `region`, where the producer can copy it: loop-invariant, a global load,
    /// read from shared memory by a warpgroup MMA, and a box whose tile the copies can fill.
    /// (Used elsewhere too, as by the ragged or causal walk after this one, it is still
    /// loaded by the consumers for those uses.)
    fn stageable(
        &self,
        inst: &Inst,
        v: ValueId,
        which: Operand,
        region: &Region,
    ) -> Option<(SharedOperand, TmaBox, ScalarType)> {
        let ValueDef::Result { inst: load_id, .. } = self.k.values[v].def else {
            return None;
        };
        let load = &self.k.insts[load_id];
        // (A masked-off element takes the copy's zero: only a load whose `other` is zero
        // may go.)
        let Op::Load { other, .. } = load.op else {
            return None;
        };
        if other.is_some_and(|o| !self.is_zero(o))
            || self.defined_inside(load_id, region)
            || self.pipelined_operand(v).is_some()
        {
            return None;
        }
        let shape = self.wgmma_shape(inst)?;
        let plan = self.mma_plan(inst)?;
        let elem = self.k.ty(v).scalar_type()?;
        let lval = self.values[v.index()].as_ref()?;
        if elem != plan.operand_type(which) || (which == Operand::A && self.register_a(v, plan.layout, shape).is_some())
        {
            return None;
        }
        let v_shape = self.k.ty(v).shape;
        let dims = v_shape.dims();
        let dims = [*dims.first()?, *dims.get(1)?];
        let (tile, contiguous) = super::wgmma::operand_tile(Some(shape), which, dims, fastest_dim(lval.layout), elem)?;
        // (A box lands in shared memory as it lies in memory: an fp8 B along N is staged
        // from registers into its K-major tile.)
        if contiguous != fastest_dim(lval.layout) || !boxes_fill(&tile, elem.size_bytes() as u32) {
            return None;
        }
        let region_box = self.tma_box_before_loop(load, contiguous)?;
        // The producer computes the box's coordinates from what it recomputes of the
        // statements before the loop: register arithmetic, never a loaded value.
        let polys = region_box.origin.iter().chain(region_box.outer.iter().map(|(_, p)| p));
        let scalars = polys.flat_map(|p| p.terms.iter()).flat_map(|t| t.symbols.iter());
        if !scalars.into_iter().all(|s| match *s {
            Sym::Value(v) => self.computed_without_loads(v),
            Sym::Trip => false,
        }) {
            return None;
        }
        let operand = SharedOperand {
            alloc: 0,
            tile,
            contiguous,
            stage: None,
        };
        Some((operand, region_box, elem))
    }

    /// Whether `v` is computed from parameters, program ids and constants alone.
    fn computed_without_loads(&self, v: ValueId) -> bool {
        let mut stack = vec![v];
        let mut seen = std::collections::HashSet::new();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let ValueDef::Result { inst, .. } = self.k.values[v].def {
                let inst = &self.k.insts[inst];
                if !inst.regions.is_empty() || matches!(inst.op, Op::Load { .. }) {
                    return false;
                }
                stack.extend(inst.op.operands());
            }
        }
        true
    }

    /// The producer's copies of `staged` (its side's statements, before its loop).
    pub(crate) fn staged_copies_producer(
        &mut self,
        staged: &StagedCopies,
        across_tiles: bool,
    ) -> Result<(), LowerError> {
        let zero = self.i32c(0);
        let producer_phase = self.ring_counter(0, across_tiles);
        if let Some(empty) = staged.empty {
            let bar = MBarrier {
                alloc: empty,
                index: zero,
            };
            self.wait_until_freed(bar, producer_phase, "the staged operands");
        }
        let bar = MBarrier {
            alloc: staged.full,
            index: zero,
        };
        let first = self.first_thread();
        self.emit(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: staged.bytes,
            pred: Some(first),
        });
        let tid = self.copy_thread();
        for l in &staged.loads {
            let to = BoxCopy {
                map: l.map,
                alloc: l.operand.alloc,
                tile: l.operand.tile,
                stage: zero,
                bar,
            };
            self.copy_boxes(&l.region_box, zero, tid, &to, None)?;
        }
        if staged.empty.is_some() {
            let one = self.i32c(1);
            self.emit(Stmt::Set {
                dst: producer_phase,
                expr: Expr::Binary(BinaryOp::Xor, producer_phase, one),
            });
        }
        Ok(())
    }

    /// Drops from `stmts` (the consumers' statements before the loop) the global loads of
    /// the staged operands that nothing else uses: their registers are never read.
    pub(crate) fn drop_staged_loads(&self, staged: &StagedCopies, stmts: &mut Vec<Stmt>) {
        let regs: std::collections::HashSet<Reg> = staged
            .loads
            .iter()
            .filter(|l| self.use_count(l.value) == 1)
            .filter_map(|l| self.values[l.value.index()].as_ref())
            .flat_map(|lval| lval.regs.iter().copied())
            .collect();
        stmts.retain(|s| {
            !matches!(s, Stmt::Load { dsts, mem: Memory::Global { .. }, .. } if dsts.iter().all(|r| regs.contains(r)))
        });
    }

    /// The consumers' wait for the staged operands of the loop being lowered (where they
    /// would have stored them).
    pub(crate) fn staged_copies_wait(&mut self) -> Result<(), LowerError> {
        let Some((alloc, parity)) = self.staged.as_ref().map(|s| (s.full, s.phase)) else {
            return Err(self.internal("a wait for staged copies without any"));
        };
        let zero = self.i32c(0);
        self.emit(Stmt::MbarrierWait {
            bar: MBarrier { alloc, index: zero },
            parity,
        });
        Ok(())
    }

    /// After the consumers' loop and its last MMAs: on a persistent grid, the staged
    /// operands go back to the producer for the next tile, now or, where operands of
    /// `dot`s after the loop are copied too, once those are lowered
    /// ([`Lowerer::staged_dot_lowered`]).
    pub(crate) fn staged_copies_after_loop(&mut self, staged: StagedCopies) {
        if staged.empty.is_some() && !staged.after.is_empty() {
            self.staged_after = Some(staged);
        } else {
            self.staged_copies_release(&staged);
        }
    }

    /// After `dot` `id` is lowered (its MMAs waited for): where it was the last `dot` after
    /// the loop whose operands the producer copies, the consumers hand the buffers back.
    pub(crate) fn staged_dot_lowered(&mut self, id: InstId) {
        let Some(staged) = self.staged_after.as_mut() else {
            return;
        };
        staged.after.retain(|&d| d != id);
        if staged.after.is_empty() {
            let staged = self.staged_after.take().expect("checked above");
            self.staged_copies_release(&staged);
        }
    }

    /// Where the statement list of a warp-specialized loop ends with the staged operands
    /// not handed back (a `dot` after the loop never lowered), the producer would wait for
    /// them forever: an internal error rather than a kernel that hangs.
    pub(crate) fn staged_all_released(&self) -> Result<(), LowerError> {
        // (Held only while some of those `dot`s are still to be lowered.)
        match self.staged_after {
            Some(_) => Err(self.internal("the staged operands of dots after a loop are never handed back")),
            None => Ok(()),
        }
    }

    fn staged_copies_release(&mut self, staged: &StagedCopies) {
        let Some(empty) = staged.empty else {
            return;
        };
        let zero = self.i32c(0);
        let lane0 = self.lane_zero();
        self.emit(Stmt::MbarrierArrive {
            bar: MBarrier {
                alloc: empty,
                index: zero,
            },
            pred: Some(lane0),
        });
        let one = self.i32c(1);
        self.emit(Stmt::Set {
            dst: staged.phase,
            expr: Expr::Binary(BinaryOp::Xor, staged.phase, one),
        });
    }
}
