//! The pipeline's copies through the tensor memory accelerator (sm_90): a pipelined load
//! that is a box of a tensor (`tma_box.rs`) is fetched by a few `cp.async.bulk.tensor`
//! instructions instead of one `cp.async` per thread and vector, and its completion is
//! tracked by an mbarrier per stage instead of `cp.async` groups:
//!
//! ```text
//! before the loop:  thread 0 initializes one mbarrier per stage; barrier
//! a stage's copies: thread 0 arrives on the stage's mbarrier expecting the stage's bytes;
//!                   lane b of warp 0 copies box b of each load (its own coordinates)
//! iteration i:      every thread waits for phase (i / S) % 2 of stage i % S's mbarrier
//! after the loop:   thread 0 invalidates the mbarriers (their bytes may then be reused)
//! ```
//!
//! The boxes land in the stage exactly as the `wgmma` operand tile stores them
//! ([`SwizzledTile::for_wgmma`]): a box per 128-byte column block, swizzled by the hardware
//! as the descriptors read it. Both operands' rows are in order (the accumulator's layout
//! carries the warpgroup MMA's row order, `layout::WarpgroupRows`), so an A tile is one box
//! per column block too: the hand-written study (`benches/cuda/wgmma_tma_hand.cu`) measured
//! the alternative, an A tile reordered in shared memory and fetched in 8-row boxes (form
//! `tma_rows8`), at 64% of cuBLAS where one box gives 83%.
//! Stages start on 1024-byte boundaries and every box on a multiple of its swizzle's repeat,
//! so the address-bit swizzle of the copy and of the descriptor agree.

use super::pipeline::PipelinedLoad;
use super::tma_box::{Poly, Sym, TmaBox};
use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp};
use crate::layout::SwizzledTile;
use crate::thread::{Expr, MBarrier, Reg, SharedAlloc, Special, Stmt, TensorMap};
use crate::types::ScalarType;

/// How one pipelined load is fetched by boxes.
#[derive(Clone, Debug)]
pub(crate) struct TmaLoad {
    pub region_box: TmaBox,
    /// Bytes one stage of this load receives.
    pub bytes: u32,
}

/// The mbarriers of a pipeline's TMA copies, and the phase this iteration waits for.
pub(crate) struct TmaRing {
    /// A shared buffer of one u64 mbarrier per stage.
    pub bars: u32,
    /// The parity of the phase of the stage being read (flips each time the ring wraps).
    pub phase: Reg,
    /// Per pipelined load: its tensor map, where it goes through TMA.
    pub maps: Vec<Option<u32>>,
    /// Bytes one stage receives through TMA, all loads together.
    pub bytes: u32,
    /// Where a producer warpgroup fills the ring (`specialize`): a buffer of one mbarrier per
    /// stage that the consumers arrive on once they are done reading the stage.
    pub empty: Option<u32>,
}

/// At most one warp issues a stage's boxes, a lane each.
const MAX_BOXES: u32 = 32;

/// Where the boxes of one load go: its tensor map, the buffer and tile they fill, the
/// stage (of the tile's length) and the mbarrier that counts their bytes.
pub(super) struct BoxCopy {
    pub map: u32,
    pub alloc: u32,
    pub tile: SwizzledTile,
    pub stage: Reg,
    pub bar: MBarrier,
}

/// Whether copies can fill `tile` of elements of `elem_bytes`: one swizzled box per column
/// block, issued by the lanes of one warp, into a buffer on the swizzle's repeat.
pub(super) fn boxes_fill(tile: &SwizzledTile, elem_bytes: u32) -> bool {
    let swizzle = tile.block_cols * elem_bytes;
    matches!(swizzle, 32 | 64 | 128)
        && tile.rows <= 256
        && tile.cols / tile.block_cols <= MAX_BOXES
        && tile.align >= 1024
}

impl Lowerer<'_> {
    /// How `load` goes through TMA, if the target has it and its tile and access allow.
    pub(crate) fn tma_plan(&self, loop_inst: crate::ir::InstId, load: &PipelinedLoad) -> Option<TmaLoad> {
        if !self.target.tma || !load.wgmma {
            return None;
        }
        let tile = load.operand.tile;
        let elem = self.k.ty(load.value).scalar_type()?.size_bytes() as u32;
        if !boxes_fill(&tile, elem) {
            return None;
        }
        let region_box = self.tma_box(loop_inst, &self.k.insts[load.inst], load.operand.contiguous)?;
        Some(TmaLoad {
            region_box,
            bytes: tile.len() * elem,
        })
    }

    /// Before the loop: the tensor maps and the mbarriers, initialized and published.
    /// `specialized`: the consumers' arrivals an "empty" phase counts, where a producer
    /// warpgroup fills the ring, and whether the ring lives across a persistent kernel's
    /// tiles (then it is set up once, in the prologue).
    pub(crate) fn tma_ring(
        &mut self,
        loads: &[PipelinedLoad],
        stages: u32,
        specialized: Option<(u32, bool)>,
    ) -> Option<TmaRing> {
        if loads.iter().all(|l| l.tma.is_none()) {
            return None;
        }
        let mut maps = Vec::new();
        let mut bytes = 0;
        for l in loads {
            let Some(t) = &l.tma else {
                maps.push(None);
                continue;
            };
            let elem = self.k.ty(l.value).scalar_type().map_or(2, |e| e.size_bytes() as u32);
            let map = self.tensor_map_for(&t.region_box, &l.operand.tile, elem);
            maps.push(Some(map));
            bytes += t.bytes;
        }
        let once = specialized.is_some_and(|(_, across)| across);
        let mut init = Vec::new();
        let first = self.first_thread();
        let bars = self.new_mbarriers(stages, 1, first, &mut init);
        let empty = specialized.map(|(consumers, _)| self.new_mbarriers(stages, consumers, first, &mut init));
        self.publish_mbarriers(init, once);
        let phase = self.ring_counter(0, once);
        Some(TmaRing {
            bars,
            phase,
            maps,
            bytes,
            empty,
        })
    }

    /// A new buffer of `count` mbarriers, each counting `arrivals`, and their initialization
    /// by the thread where `first` holds, appended to `init`: its index.
    pub(super) fn new_mbarriers(&mut self, count: u32, arrivals: u32, first: Reg, init: &mut Vec<Stmt>) -> u32 {
        let bars = self.shared.len() as u32;
        self.shared.push(SharedAlloc::new(ScalarType::U64, count));
        for s in 0..count {
            let index = self.i32c(s as i64);
            init.push(Stmt::MbarrierInit {
                bar: MBarrier { alloc: bars, index },
                count: arrivals,
                pred: Some(first),
            });
        }
        bars
    }

    /// The mbarriers' initialization `init`, then a barrier after which every thread may use
    /// them: in the prologue where they live across a persistent kernel's tiles (`once`),
    /// else here.
    pub(super) fn publish_mbarriers(&mut self, mut init: Vec<Stmt>, once: bool) {
        init.push(Stmt::Barrier);
        if once {
            self.prologue.append(&mut init);
        } else {
            for s in init {
                self.emit(s);
            }
        }
    }

    /// A new tensor map for the boxes of `region_box` that fill `tile` (elements of
    /// `elem_bytes`), one per column block, swizzled as the tile is: its index.
    pub(super) fn tensor_map_for(&mut self, region_box: &TmaBox, tile: &SwizzledTile, elem_bytes: u32) -> u32 {
        let mut outer = [None; 3];
        for (o, &(stride, _)) in outer.iter_mut().zip(&region_box.outer) {
            *o = Some(stride);
        }
        self.tensor_maps.push(TensorMap {
            param: region_box.param,
            dims: region_box.dims,
            stride: region_box.stride,
            outer,
            box_dims: [tile.block_cols, tile.rows],
            swizzle: tile.block_cols * elem_bytes,
        });
        self.tensor_maps.len() as u32 - 1
    }

    /// Whether this thread is the first of those that issue the copies: thread 0 of the
    /// program, or of its producer warpgroup (`copy_threads_from`).
    pub(super) fn first_thread(&mut self) -> Reg {
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        let first = self.i32c(self.copy_threads_from as i64);
        self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, tid, first))
    }

    /// The thread's index among those that issue the copies (see `first_thread`).
    pub(super) fn copy_thread(&mut self) -> Reg {
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        if self.copy_threads_from == 0 {
            return tid;
        }
        let first = self.i32c(self.copy_threads_from as i64);
        self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Sub, tid, first))
    }

    /// The copies of the iteration with loop variable `iv` (if `in_range`) into stage
    /// `stage`: the arrival that expects their bytes, then each load's boxes.
    pub(crate) fn tma_copies(
        &mut self,
        ring: &TmaRing,
        loads: &[PipelinedLoad],
        allocs: &[u32],
        iv: Reg,
        in_range: Reg,
        stage: Reg,
    ) -> Result<(), LowerError> {
        let bar = MBarrier {
            alloc: ring.bars,
            index: stage,
        };
        let first = self.first_thread();
        let arrive = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, first, in_range));
        self.emit(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: ring.bytes,
            pred: Some(arrive),
        });
        let tid = self.copy_thread();
        for ((load, map), &alloc) in loads.iter().zip(&ring.maps).zip(allocs) {
            let (Some(t), Some(map)) = (&load.tma, *map) else {
                continue;
            };
            let b = &t.region_box;
            let trip = self.trip_count(iv, &b.start, &b.step)?;
            let to = BoxCopy {
                map,
                alloc,
                tile: load.operand.tile,
                stage,
                bar,
            };
            self.copy_boxes(b, trip, tid, &to, Some(in_range))?;
        }
        Ok(())
    }

    /// Lane `tid`'s box of `region_box` (at trip count `trip`) into `to`, where `also` (if
    /// any) holds too.
    pub(super) fn copy_boxes(
        &mut self,
        region_box: &TmaBox,
        trip: Reg,
        tid: Reg,
        to: &BoxCopy,
        also: Option<Reg>,
    ) -> Result<(), LowerError> {
        let x0 = self.poly_value(&region_box.origin[0], trip)?;
        let y0 = self.poly_value(&region_box.origin[1], trip)?;
        let (dst, [x, y], count) = self.box_of_lane(tid, &to.tile, to.stage, [x0, y0]);
        let mut coords = vec![x, y];
        for (_, index) in &region_box.outer {
            coords.push(self.poly_value(index, trip)?);
        }
        let n = self.i32c(count as i64);
        let mut pred = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, tid, n));
        if let Some(also) = also {
            pred = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, pred, also));
        }
        self.emit(Stmt::TmaLoad {
            map: to.map,
            alloc: to.alloc,
            dst,
            coords,
            bar: to.bar,
            pred: Some(pred),
        });
        Ok(())
    }

    /// Box `b = tid` of a stage of `tile` (valid for `b` below the count returned): column
    /// block `b`, all rows; its destination element and coordinates from the stage's origin
    /// `(x0, y0)`.
    pub(super) fn box_of_lane(
        &mut self,
        b: Reg,
        tile: &SwizzledTile,
        stage: Reg,
        origin: [Reg; 2],
    ) -> (Reg, [Reg; 2], u32) {
        let i32t = ScalarType::I32;
        let len = self.i32c(tile.len() as i64);
        let stage_at = self.set(i32t, Expr::Binary(BinaryOp::Mul, stage, len));
        let block_len = self.i32c((tile.rows * tile.block_cols) as i64);
        let block_at = self.set(i32t, Expr::Binary(BinaryOp::Mul, b, block_len));
        let dst = self.set(i32t, Expr::Binary(BinaryOp::Add, stage_at, block_at));
        let cols = self.i32c(tile.block_cols as i64);
        let dx = self.set(i32t, Expr::Binary(BinaryOp::Mul, b, cols));
        let x = self.set(i32t, Expr::Binary(BinaryOp::Add, origin[0], dx));
        (dst, [x, origin[1]], tile.cols / tile.block_cols)
    }

    /// `(iv - start) / step` as an i32.
    fn trip_count(&mut self, iv: Reg, start: &Poly, step: &Poly) -> Result<Reg, LowerError> {
        let iv = self.as_i32(iv);
        if start.terms.is_empty() && step == &Poly::constant(1) {
            return Ok(iv);
        }
        let s = self.poly_value(start, iv)?;
        let d = self.poly_value(step, iv)?;
        let from_start = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Sub, iv, s));
        Ok(self.set(ScalarType::I32, Expr::Binary(BinaryOp::Div, from_start, d)))
    }

    fn as_i32(&mut self, r: Reg) -> Reg {
        if self.regs[r].ty == ScalarType::I32 {
            r
        } else {
            self.set(ScalarType::I32, Expr::Cast(r))
        }
    }

    /// The value of polynomial `p` (free of atoms) in i32, with the trip count `trip`.
    pub(super) fn poly_value(&mut self, p: &Poly, trip: Reg) -> Result<Reg, LowerError> {
        let mut sum = self.i32c(0);
        for t in &p.terms {
            if t.atom.is_some() {
                return Err(self.internal("a TMA coordinate varies over the block"));
            }
            let factor =
                i64::try_from(t.factor).map_err(|_| self.internal("a TMA coordinate's factor does not fit i64"))?;
            let mut term = self.i32c(factor);
            for s in &t.symbols {
                let r = match *s {
                    Sym::Trip => trip,
                    Sym::Value(v) => {
                        let r = self.lval(v)?.regs[0];
                        self.as_i32(r)
                    }
                };
                term = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, term, r));
            }
            sum = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, sum, term));
        }
        Ok(sum)
    }

    /// Every thread waits for stage `read`'s copies (phase `ring.phase`).
    pub(crate) fn tma_wait(&mut self, ring: &TmaRing, read: Reg) {
        self.emit(Stmt::MbarrierWait {
            bar: MBarrier {
                alloc: ring.bars,
                index: read,
            },
            parity: ring.phase,
        });
    }

    /// At the end of an iteration on stage `stage` of a ring of `stages`: where it is the
    /// last, the next round's phase (the consumers' `read`, a producer's stage to fill).
    pub(crate) fn flip_phase_at_wrap(&mut self, phase: Reg, stage: Reg, stages: u32) {
        let last = self.i32c(stages as i64 - 1);
        let wrap = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, stage, last));
        let one = self.i32c(1);
        let flipped = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Xor, phase, one));
        self.emit(Stmt::Set {
            dst: phase,
            expr: Expr::Select(wrap, flipped, phase),
        });
    }

    /// After the loop (every wait done, before the barrier that frees the ring).
    pub(crate) fn tma_release(&mut self, ring: &TmaRing, stages: u32) {
        let first = self.first_thread();
        for s in 0..stages {
            let index = self.i32c(s as i64);
            self.emit(Stmt::MbarrierInval {
                bar: MBarrier {
                    alloc: ring.bars,
                    index,
                },
                pred: Some(first),
            });
        }
    }
}
