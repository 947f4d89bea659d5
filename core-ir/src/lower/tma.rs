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
//! as the descriptors read it; for an A operand, whose 8-row groups the tile reorders to line
//! the accumulator up with the blocked layout (`WarpgroupRows`), TMA would need a box per
//! 8-row group, which costs more than it saves: the hand-written study
//! (`benches/cuda/wgmma_tma_hand.cu`, form `tma_rows8`) measured an A tile fetched in 8-row
//! boxes (16 a stage) at 64% of cuBLAS where one box gives 83% (and `cp.async` 82%). So
//! such a tile keeps `cp.async`; B's column blocks (at most 4 boxes) take TMA.
//! Stages start on 1024-byte boundaries and every box on a multiple of its swizzle's repeat,
//! so the address-bit swizzle of the copy and of the descriptor agree.

use super::pipeline::PipelinedLoad;
use super::tma_box::{Poly, Sym, TmaBox};
use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Literal};
use crate::layout::SwizzledTile;
use crate::layout::WarpgroupRows;
use crate::thread::{Expr, LaunchValue, MBarrier, Reg, SharedAlloc, Special, Stmt, TensorMap};
use crate::types::ScalarType;

/// How one pipelined load is fetched by boxes.
#[derive(Clone, Debug)]
pub(crate) struct TmaLoad {
    pub region_box: TmaBox,
    /// Bytes one stage of this load receives.
    pub bytes: u32,
    /// For an A tile whose 8-row groups are reordered (`WarpgroupRows`): the extra
    /// dimensions, `(extent, rows)` innermost first, of the map whose one box (per column
    /// block) gathers the 8-row groups in their stored order.
    pub reordered: Option<Vec<(u32, u32)>>,
}

/// The tensor maps of one load: the one it reads through, and for a reordered A tile the
/// 2-D map of 8-row boxes it falls back to where its box would reach rows past the view.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadMaps {
    main: u32,
    edge: Option<u32>,
}

/// The mbarriers of a pipeline's TMA copies, and the phase this iteration waits for.
pub(crate) struct TmaRing {
    /// A shared buffer of one u64 mbarrier per stage.
    pub bars: u32,
    /// The parity of the phase of the stage being read (flips each time the ring wraps).
    pub phase: Reg,
    /// Per pipelined load: its tensor maps, where it goes through TMA.
    pub maps: Vec<Option<LoadMaps>>,
    /// Bytes one stage receives through TMA, all loads together.
    pub bytes: u32,
}

/// At most one warp issues a stage's boxes, a lane each.
const MAX_BOXES: u32 = 32;

impl Lowerer<'_> {
    /// How `load` goes through TMA, if the target has it and its tile and access allow.
    pub(crate) fn tma_plan(&self, loop_inst: crate::ir::InstId, load: &PipelinedLoad) -> Option<TmaLoad> {
        if !self.target.tma || !load.wgmma {
            return None;
        }
        let tile = load.operand.tile;
        let elem = self.k.ty(load.value).scalar_type()?.size_bytes() as u32;
        let swizzle = tile.block_cols * elem;
        let blocks = tile.cols / tile.block_cols;
        let reordered = match tile.rows_for {
            Some(p) => Some(reordered_rows(p, tile.rows)?),
            None => None,
        };
        // (At the edge a reordered tile takes a box per 8-row group.)
        let boxes = if reordered.is_some() {
            blocks * tile.rows / 8
        } else {
            blocks
        };
        if !matches!(swizzle, 32 | 64 | 128) || tile.rows > 256 || boxes > MAX_BOXES || tile.align < 1024 {
            return None;
        }
        let region_box = self.tma_box(loop_inst, &self.k.insts[load.inst], load.operand.contiguous)?;
        Some(TmaLoad {
            region_box,
            bytes: tile.len() * elem,
            reordered,
        })
    }

    /// Before the loop: the tensor maps and the mbarriers, initialized and published.
    pub(crate) fn tma_ring(&mut self, loads: &[PipelinedLoad], stages: u32) -> Option<TmaRing> {
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
            let tile = l.operand.tile;
            let elem = self.k.ty(l.value).scalar_type().map_or(2, |e| e.size_bytes() as u32);
            let b = &t.region_box;
            let swizzle = tile.block_cols * elem;
            let load_maps = match &t.reordered {
                None => LoadMaps {
                    main: self.push_map(TensorMap::plain(
                        b.param,
                        b.dims,
                        b.stride,
                        [tile.block_cols, tile.rows],
                        swizzle,
                    )),
                    edge: None,
                },
                Some(extra) => {
                    let mut map = TensorMap::plain(b.param, b.dims, b.stride, [tile.block_cols, 8], swizzle);
                    for (k, &e) in extra.iter().enumerate() {
                        map.extra[k] = e;
                    }
                    map.extra_rank = extra.len() as u8;
                    LoadMaps {
                        main: self.push_map(map),
                        edge: Some(self.push_map(TensorMap::plain(
                            b.param,
                            b.dims,
                            b.stride,
                            [tile.block_cols, 8],
                            swizzle,
                        ))),
                    }
                }
            };
            maps.push(Some(load_maps));
            bytes += t.bytes;
        }
        let bars = self.shared.len() as u32;
        self.shared.push(SharedAlloc::new(ScalarType::U64, stages));
        let first = self.first_thread();
        for s in 0..stages {
            let index = self.i32c(s as i64);
            self.emit(Stmt::MbarrierInit {
                bar: MBarrier { alloc: bars, index },
                count: 1,
                pred: Some(first),
            });
        }
        self.emit(Stmt::Barrier);
        let phase = self.set(ScalarType::I32, Expr::Const(Literal::Int(0)));
        Some(TmaRing {
            bars,
            phase,
            maps,
            bytes,
        })
    }

    fn push_map(&mut self, m: TensorMap) -> u32 {
        self.tensor_maps.push(m);
        self.tensor_maps.len() as u32 - 1
    }

    /// Whether this thread is thread 0 of the program.
    fn first_thread(&mut self) -> Reg {
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        let zero = self.i32c(0);
        self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, tid, zero))
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
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        for ((load, maps), &alloc) in loads.iter().zip(&ring.maps).zip(allocs) {
            let (Some(t), Some(maps)) = (&load.tma, *maps) else {
                continue;
            };
            let b = &t.region_box;
            let trip = self.trip_count(iv, &b.start, &b.step)?;
            let x0 = self.poly_value(&b.origin[0], trip)?;
            let y0 = self.poly_value(&b.origin[1], trip)?;
            let tile = load.operand.tile;
            // A reordered tile's one box reaches rows it does not check against the view:
            // it is used only where all of them are inside, 8-row boxes elsewhere.
            let inside = match maps.edge {
                Some(_) => {
                    let rows = self.i32c(tile.rows as i64);
                    let end = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, y0, rows));
                    let extent = self.launch_value(b.dims[1])?;
                    let inside = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Le, end, extent));
                    Some(self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, inside, in_range)))
                }
                None => None,
            };
            let (dst, coords, count) = self.box_of_lane(tid, &tile, stage, [x0, y0]);
            self.issue_boxes(
                maps.main,
                alloc,
                dst,
                coords,
                count,
                bar,
                tid,
                inside.unwrap_or(in_range),
            );
            if let (Some(edge), Some(inside)) = (maps.edge, inside) {
                let (dst, coords, count) = self.group_box_of_lane(tid, &tile, stage, [x0, y0]);
                let outside = self.set(ScalarType::Bool, Expr::Unary(crate::ir::UnaryOp::Not, inside));
                let at_edge = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, outside, in_range));
                self.issue_boxes(edge, alloc, dst, coords, count, bar, tid, at_edge);
            }
        }
        Ok(())
    }

    /// Lanes `0..count` copy their box of `map` where `when` holds.
    #[allow(clippy::too_many_arguments)]
    fn issue_boxes(
        &mut self,
        map: u32,
        alloc: u32,
        dst: Reg,
        coords: [Reg; 2],
        count: u32,
        bar: MBarrier,
        tid: Reg,
        when: Reg,
    ) {
        let n = self.i32c(count as i64);
        let lane_has_box = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, tid, n));
        let pred = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, lane_has_box, when));
        self.emit(Stmt::TmaLoad {
            map,
            alloc,
            dst,
            coords,
            bar,
            pred: Some(pred),
        });
    }

    /// A value a launch fixes, in an i32 register.
    fn launch_value(&mut self, v: LaunchValue) -> Result<Reg, LowerError> {
        match v {
            LaunchValue::Const(c) => Ok(self.i32c(c)),
            LaunchValue::Param(i) => {
                let r = self.lval(self.k.params[i as usize].value)?.regs[0];
                Ok(self.as_i32(r))
            }
        }
    }

    /// Box `b = tid` of a stage of a reordered `tile` in 8-row boxes (valid for `b` below the
    /// count returned): column block `b / (rows / 8)`, 8-row group `b % (rows / 8)` stored
    /// where `WarpgroupRows` puts it; its destination element and coordinates.
    fn group_box_of_lane(&mut self, b: Reg, tile: &SwizzledTile, stage: Reg, origin: [Reg; 2]) -> (Reg, [Reg; 2], u32) {
        let i32t = ScalarType::I32;
        let p = tile.rows_for.expect("a reordered tile");
        let groups = tile.rows / 8;
        let c_groups = self.i32c(groups as i64);
        let block = self.set(i32t, Expr::Binary(BinaryOp::Div, b, c_groups));
        let group = self.set(i32t, Expr::Binary(BinaryOp::Rem, b, c_groups));
        // `WarpgroupRows::stored` of the group's first row, in registers.
        let warps = self.i32c(p.warps as i64);
        let w = self.set(i32t, Expr::Binary(BinaryOp::Rem, group, warps));
        let j = self.set(i32t, Expr::Binary(BinaryOp::Div, group, warps));
        let (c2, c4, c8) = (self.i32c(2), self.i32c(4), self.i32c(8));
        let wg = self.set(i32t, Expr::Binary(BinaryOp::Div, w, c4));
        let wg_groups = self.i32c((p.warpgroup_rows / 8) as i64);
        let mut stored = self.set(i32t, Expr::Binary(BinaryOp::Mul, wg, wg_groups));
        let jh = self.set(i32t, Expr::Binary(BinaryOp::Div, j, c2));
        let jh8 = self.set(i32t, Expr::Binary(BinaryOp::Mul, jh, c8));
        let wl = self.set(i32t, Expr::Binary(BinaryOp::Rem, w, c4));
        let wl2 = self.set(i32t, Expr::Binary(BinaryOp::Mul, wl, c2));
        let jl = self.set(i32t, Expr::Binary(BinaryOp::Rem, j, c2));
        for part in [jh8, wl2, jl] {
            stored = self.set(i32t, Expr::Binary(BinaryOp::Add, stored, part));
        }
        let stored_row = self.set(i32t, Expr::Binary(BinaryOp::Mul, stored, c8));
        let len = self.i32c(tile.len() as i64);
        let stage_at = self.set(i32t, Expr::Binary(BinaryOp::Mul, stage, len));
        let block_len = self.i32c((tile.rows * tile.block_cols) as i64);
        let block_at = self.set(i32t, Expr::Binary(BinaryOp::Mul, block, block_len));
        let cols = self.i32c(tile.block_cols as i64);
        let row_at = self.set(i32t, Expr::Binary(BinaryOp::Mul, stored_row, cols));
        let at = self.set(i32t, Expr::Binary(BinaryOp::Add, stage_at, block_at));
        let dst = self.set(i32t, Expr::Binary(BinaryOp::Add, at, row_at));
        let dx = self.set(i32t, Expr::Binary(BinaryOp::Mul, block, cols));
        let x = self.set(i32t, Expr::Binary(BinaryOp::Add, origin[0], dx));
        let dy = self.set(i32t, Expr::Binary(BinaryOp::Mul, group, c8));
        let y = self.set(i32t, Expr::Binary(BinaryOp::Add, origin[1], dy));
        (dst, [x, y], groups * (tile.cols / tile.block_cols))
    }

    /// Box `b = tid` of a stage of `tile` (valid for `b` below the count returned): column
    /// block `b`, all rows; its destination element and coordinates from the stage's origin
    /// `(x0, y0)`.
    fn box_of_lane(&mut self, b: Reg, tile: &SwizzledTile, stage: Reg, origin: [Reg; 2]) -> (Reg, [Reg; 2], u32) {
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
    fn poly_value(&mut self, p: &Poly, trip: Reg) -> Result<Reg, LowerError> {
        let mut sum = self.i32c(0);
        for t in &p.terms {
            if t.atom.is_some() {
                return Err(self.internal("a TMA coordinate varies over the block"));
            }
            let mut term = self.i32c(t.factor);
            for s in &t.syms {
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

    /// At the end of an iteration whose stage `read` is the ring's last: the next phase.
    pub(crate) fn tma_advance(&mut self, ring: &TmaRing, read: Reg, stages: u32) {
        let last = self.i32c(stages as i64 - 1);
        let wrap = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, read, last));
        let one = self.i32c(1);
        let flipped = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Xor, ring.phase, one));
        self.emit(Stmt::Set {
            dst: ring.phase,
            expr: Expr::Select(wrap, flipped, ring.phase),
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

/// The extra dimensions, innermost first, `(extent, rows)`, of a map whose box of 8-row
/// groups (after its 8 rows) lands a `rows`-row tile in the order `p` stores it:
/// logical group `λ = warps j + w` (`j = 2 j2 + jl`, `w = 4 wg + wl`) is stored as group
/// `jl + 2 wl + 8 j2 + (rows / 8 / (warps / 4)) wg`, so its row `8 λ` is
/// `8 warps jl + 8 wl + 16 warps j2 + 32 wg`: dimensions `jl`, `wl`, `j2`, `wg` in that
/// order, those of extent 1 left out. `None` where more than 3 remain (the hardware's rank
/// is at most 5) or the tile does not split so.
fn reordered_rows(p: WarpgroupRows, rows: u32) -> Option<Vec<(u32, u32)>> {
    let w = p.warps;
    if w % 4 != 0 || rows % (16 * w) != 0 || p.warpgroup_rows * (w / 4) != rows {
        return None;
    }
    let j = rows / (8 * w);
    let dims: Vec<(u32, u32)> = [(2, 8 * w), (4, 8), (j / 2, 16 * w), (w / 4, 32)]
        .into_iter()
        .filter(|&(e, _)| e > 1)
        .collect();
    (dims.len() <= 3).then_some(dims)
}
