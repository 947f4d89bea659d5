//! `dot` on NVIDIA's tensor cores where the target has `mma.sync`, the accumulator is f32 and
//! the tile is whole steps of the instruction for the program's warps: `mma.sync.m16n8k16`
//! (`Stmt::Mma`) for f16 or bf16 inputs, `mma.sync.m16n8k8` on tf32 (`Stmt::MmaTf32`) for f32
//! inputs of a `dot` whose input precision is tf32 (an IEEE f32 `dot` stays on the CUDA
//! cores, `dot.rs`). At precision tf32x3 each f32 fragment is split into its tf32 rounding
//! and the rest (`Lowerer::split_tf32`) and three `MmaTf32`s add `big·small`,
//! `small·big` and `big·big`, the small products first.
//!
//! The accumulator lives in the `mma` result layout, which is a blocked layout: a thread
//! holds 2 adjacent columns (`size_per_thread [1, 2]`), the lanes of a warp cover 8 rows by
//! 4 pairs (`threads_per_warp [8, 4]`), and the warps tile the block 2-D (`warps_per_cta
//! [wm, wn]`, chosen so that each warp's tile is as square as the block allows, which
//! minimizes the fragments it loads per step). Lane `l` of a warp then holds, for each pair
//! of row repetitions `2q, 2q + 1` and each column repetition `p`, the four elements
//! `(g, 2t)`, `(g, 2t+1)`, `(g', 2t)`, `(g', 2t+1)` of one m16n8 tile whose two 8-row
//! halves are the rows of those repetitions (`g = l / 4`, `t = l % 4`): exactly an `mma`
//! fragment, the same for both instructions. So element-wise epilogues, reductions and
//! stores work on it unchanged, and a value that must change layout goes through the
//! swizzled exchange like any other.
//!
//! The operands are read from shared memory with `ldmatrix` (4 matrices of 8 rows of 16
//! bytes per instruction), `.trans` when a 16-bit operand is stored contiguous along its
//! outer dimension (M for A, N for B) rather than along K. Storage is a [`SwizzledTile`]:
//! each 16-byte chunk of a row XORed with the row's phase, so that the 8 rows one `ldmatrix`
//! phase reads, and the 16-byte stores that fill the tile, fall in distinct banks. A row of
//! an 8x8 16-bit matrix is 4 f32 values, and lane `l` receives the 32 bits at 16-bit columns
//! `2 (l % 4)`, `+1`: f32 element `l % 4` of row `l / 4`, which is where a tf32 fragment
//! wants it. `.trans` would split f32 values, so an f32 operand stored contiguous along its
//! outer dimension is read with one 32-bit shared load per fragment element instead. The
//! tile is filled either by the `cp.async` pipeline of an enclosing loop
//! (`pipeline/copies.rs`), or here, from registers.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, DotPrecision, Inst, Literal, Op, ValueId};
use crate::layout::{Blocked, Layout, RegisterMap, SwizzledTile};
use crate::thread::{Expr, Memory, Reg, SharedAlloc, Stmt};
use crate::types::{Elem, ScalarType, Shape};
use std::collections::HashMap;

/// The shape of one `dot` on the tensor cores.
pub(crate) struct MmaPlan {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// A's element type (B's too, but for the two fp8 formats mixed on warpgroup MMAs).
    pub input: ScalarType,
    /// B's element type.
    pub input_b: ScalarType,
    pub layout: Layout,
}

impl MmaPlan {
    /// Whether the inputs are f32 multiplied as tf32 (`mma.m16n8k8`) rather than 16-bit
    /// values (`mma.m16n8k16`).
    fn tf32(&self) -> bool {
        self.input == ScalarType::F32
    }
    /// The element type of operand `which`.
    pub(crate) fn operand_type(&self, which: Operand) -> ScalarType {
        match which {
            Operand::A => self.input,
            Operand::B => self.input_b,
        }
    }
    /// The K of one `mma`: two 16-byte `ldmatrix` rows of the input.
    fn k_step(&self) -> u32 {
        k_step(self.input)
    }
}

/// The K of one `mma` on `input`: 16 for 16-bit inputs, 8 for tf32, 32 for fp8.
fn k_step(input: ScalarType) -> u32 {
    32 / input.size_bytes() as u32
}

/// A `dot` operand in shared memory, as the tensor cores read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedOperand {
    pub alloc: u32,
    pub tile: SwizzledTile,
    /// The operand dimension that runs along the tile's rows (contiguous in memory).
    pub contiguous: usize,
    /// The element offset in `alloc` of the stage to read, when the buffer has several.
    pub stage: Option<Reg>,
}

impl SharedOperand {
    /// The tile storing a `shape` operand of `elem` contiguous along dimension `contiguous`.
    pub fn tile_for(shape: [u32; 2], contiguous: usize, elem: ScalarType) -> SwizzledTile {
        SwizzledTile::new(shape[1 - contiguous], shape[contiguous], elem.size_bytes() as u32)
    }
}

impl Lowerer<'_> {
    /// How `dot` `inst` runs on the tensor cores, or `None` when it cannot (then it runs on
    /// the CUDA cores).
    pub(crate) fn mma_plan(&self, inst: &Inst) -> Option<MmaPlan> {
        // (The shared memory the operands need is checked with the kernel's total.)
        let Op::Dot {
            a, b, acc, precision, ..
        } = inst.op
        else {
            return None;
        };
        let (ta, tb, tc) = (self.k.ty(a), self.k.ty(b), self.k.ty(acc));
        let (Elem::Scalar(input), Elem::Scalar(acc_ty)) = (ta.elem, tc.elem) else {
            return None;
        };
        let takes = match input {
            ScalarType::F16 | ScalarType::BF16 => true,
            ScalarType::F32 => matches!(precision, DotPrecision::Tf32 | DotPrecision::Tf32x3),
            // fp8 on warpgroup MMAs only (elsewhere `fp8_dot.rs` widened it to f16).
            _ if input.is_fp8() => self.wgmma_shape(inst).is_some(),
            _ => false,
        };
        if !self.target.mma_sync || self.target.warp_size != 32 || !takes || acc_ty != ScalarType::F32 {
            return None;
        }
        let ([m, k], n) = (ta.shape.dims().try_into().ok()?, tb.shape.dims()[1]);
        if k % k_step(input) != 0 {
            return None;
        }
        // On warpgroup MMAs every warp runs along M (see `wgmma.rs`).
        let (wm, wn) = if self.wgmma_shape(inst).is_some() {
            (self.target.num_warps, 1)
        } else {
            warp_grid(m, n, self.target.num_warps)?
        };
        let mut layout = Layout::blocked(Blocked {
            rank: 2,
            size_per_thread: [1, 2, 1],
            threads_per_warp: [8, 4, 1],
            warps_per_cta: [wm, wn, 1],
            order: [1, 0, 0],
        });
        // On warpgroup MMAs, in the order their accumulator holds the rows.
        layout.rows = self.wgmma_shape(inst).map(|s| s.rows());
        let input_b = tb.scalar_type()?;
        Some(MmaPlan {
            m,
            n,
            k,
            input,
            input_b,
            layout,
        })
    }

    /// The layout `dot` `inst` gives its result in, when it runs on the tensor cores: what a
    /// loop carrying its accumulator should carry it in.
    pub(crate) fn mma_accumulator_layout(&self, inst: &Inst) -> Option<Layout> {
        self.mma_plan(inst).map(|p| p.layout)
    }

    /// `dot` on the tensor cores, or `None` when it cannot run there.
    pub(crate) fn dot_mma(&mut self, inst: &Inst) -> Result<Option<LVal>, LowerError> {
        let Some(plan) = self.mma_plan(inst) else {
            return Ok(None);
        };
        let Op::Dot {
            a, b, acc, precision, ..
        } = inst.op
        else {
            return Err(self.internal("not a dot"));
        };
        let (tf32, k_step) = (plan.tf32(), plan.k_step());
        let split = precision == DotPrecision::Tf32x3;
        let MmaPlan {
            m, n, k, input, layout, ..
        } = plan;

        // The operands in shared memory: filled by the loop's pipeline, or stored here.
        let (sa, a_here) = self.shared_operand(inst, a, Operand::A, input)?;
        let (sb, b_here) = self.shared_operand(inst, b, Operand::B, input)?;
        if a_here || b_here {
            self.emit(Stmt::Barrier);
        }

        // The accumulator, copied so that `acc` itself is untouched. tf32x3's MMAs sum from
        // zero instead, added into `acc` at the end: the tensor cores' additions are not
        // rounded to nearest, and over three MMAs a k-step their error would grow with the
        // whole K (2.9e-5 relative at K = 4096 on an H200, f32's being 1.1e-6); so it grows
        // with one dot's K only, the rest being f32 additions.
        let shape = Shape::new(&[m, n]).expect("the dot's result shape");
        let init = self.ensure(acc, layout)?;
        let out: Vec<Reg> = if split {
            init.iter()
                .map(|_| self.set(ScalarType::F32, Expr::Const(Literal::Float(0.0))))
                .collect()
        } else {
            init.iter().map(|&r| self.set(ScalarType::F32, Expr::Copy(r))).collect()
        };
        let map = layout.map(shape);
        let reg = |jr: u32, jc: u32| map.join([jr, jc, 0]);
        let (mtiles, ntiles) = (map.count[0] / 2, map.count[1] / 2);

        let mut a_reader = FragmentReader::new(self, &map, sa, Operand::A)?;
        let mut b_reader = FragmentReader::new(self, &map, sb, Operand::B)?;

        // Per k-step: B's fragments of the warp's columns (two n8 tiles per `ldmatrix`), then
        // A's one m16 tile at a time, each used at once by its row of `mma`s, so that only
        // one A fragment is live. A fragment is 8 (A) or 4 (B) 16-bit values, or half as
        // many f32 ones.
        let per_b = if tf32 { 2 } else { 4 };
        for kk in 0..k / k_step {
            let mut b_frags: Vec<Fragment> = Vec::with_capacity(ntiles as usize);
            let mut p = 0;
            while p < ntiles {
                let pair = ntiles - p >= 2;
                let regs = b_reader.read(self, p, kk, pair, input)?;
                b_frags.extend(regs.chunks(per_b).map(|f| self.fragment(f, split)));
                p += if pair { 2 } else { 1 };
            }
            for q in 0..mtiles {
                let read = a_reader.read(self, q, kk, true, input)?;
                let af = self.fragment(&read, split);
                for (p, bf) in b_frags.iter().enumerate() {
                    let p = p as u32;
                    let d = [
                        out[reg(2 * q, 2 * p)],
                        out[reg(2 * q, 2 * p + 1)],
                        out[reg(2 * q + 1, 2 * p)],
                        out[reg(2 * q + 1, 2 * p + 1)],
                    ];
                    // tf32x3: the small products first, then the big one.
                    let products = match (&af.small, &bf.small) {
                        (Some(sa), Some(sb)) => vec![(&af.big, sb), (sa, &bf.big), (&af.big, &bf.big)],
                        _ => vec![(&af.big, &bf.big)],
                    };
                    for (x, y) in products {
                        let Some(mma) = mma_stmt(d, x, y) else {
                            return Err(self.internal("mma fragments of the wrong size"));
                        };
                        self.emit(mma);
                    }
                }
            }
        }
        if a_here || b_here {
            // The buffers may be written again (the next iteration of an enclosing loop).
            self.emit(Stmt::Barrier);
        }
        let out = if split {
            init.iter()
                .zip(&out)
                .map(|(&i, &o)| self.set(ScalarType::F32, Expr::Binary(BinaryOp::Add, i, o)))
                .collect()
        } else {
            out
        };
        Ok(Some(LVal {
            layout,
            regs: out,
            ptr: None,
        }))
    }

    /// Operand `v` (`which` of `dot` `inst`) in shared memory: where the enclosing loop's
    /// pipeline put it, or where it was stored before the loop (`hoist`), or stored there now (then the second value is true and a barrier
    /// must follow).
    pub(crate) fn shared_operand(
        &mut self,
        inst: &Inst,
        v: ValueId,
        which: Operand,
        ty: ScalarType,
    ) -> Result<(SharedOperand, bool), LowerError> {
        self.shared_operand_in_turn(inst, v, which, ty, None)
    }

    /// As [`shared_operand`](Self::shared_operand); where `phase` is given (a register
    /// holding 0 or 1, which the `dot` flips each time it runs), an operand stored here goes
    /// into one of two tiles in turn: a `dot` whose warpgroup MMAs stay in flight across the
    /// loop's back edge still reads the other one while the next iteration stores.
    pub(crate) fn shared_operand_in_turn(
        &mut self,
        inst: &Inst,
        v: ValueId,
        which: Operand,
        ty: ScalarType,
        phase: Option<Reg>,
    ) -> Result<(SharedOperand, bool), LowerError> {
        if let Some(s) = self.pipelined_operand(v) {
            return Ok((s, false));
        }
        if let Some(s) = self.hoisted_operand(inst.results.first().copied(), which) {
            return Ok((s, false));
        }
        let lval = self.lval(v)?;
        let shape = self.k.ty(v).shape;
        let dims = [shape.dims()[0], shape.dims()[1]];
        let layout = lval.layout;
        let map = layout.map(shape);
        let fastest = fastest_dim(layout);
        let Some((tile, contiguous)) = super::wgmma::operand_tile(self.wgmma_shape(inst), which, dims, fastest, ty)
        else {
            return Err(self.internal("no shared tile for a dot operand"));
        };
        let tiles = if phase.is_some() { 2 } else { 1 };
        let alloc = self.operand_alloc(SharedAlloc {
            align: tile.align,
            ..SharedAlloc::new(ty, tiles * tile.len())
        });
        let stage = phase.map(|p| {
            let len = self.i32c(tile.len() as i64);
            self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, p, len))
        });
        let operand = SharedOperand {
            alloc,
            tile,
            contiguous,
            stage,
        };
        self.store_operand(&lval.regs, layout, &map, &operand);
        Ok((operand, true))
    }

    /// Stores the registers `regs` of a `dot` operand (in `layout`, whose register map is
    /// `map`) into its shared tile, each element once, by its owner: in vectors as wide as
    /// the registers' runs and the tile allow where the registers run along the tile's
    /// contiguous dimension, element by element where they run along the other.
    pub(crate) fn store_operand(&mut self, regs: &[Reg], layout: Layout, map: &RegisterMap, operand: &SharedOperand) {
        let mut w = 1u32;
        if layout.sliced == 0 && operand.contiguous == fastest_dim(layout) {
            let run = map.run[layout.blocked_dim(operand.contiguous)];
            w = run.min(operand.tile.vec).max(1);
            while run % w != 0 {
                w /= 2;
            }
        }
        let mut index = self.operand_store_indices(map, layout, operand, w);
        if let Some(stage) = operand.stage {
            for at in &mut index {
                *at = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, *at, stage));
            }
        }
        let own = self.owner(map);
        for (g, &at) in (0..regs.len()).step_by(w as usize).zip(&index) {
            self.emit(Stmt::Store {
                values: regs[g..g + w as usize].to_vec(),
                mem: Memory::Shared { alloc: operand.alloc },
                index: at,
                pred: own,
            });
        }
    }

    /// For each group of `w` registers of a value in `map` (consecutive along the operand's
    /// contiguous dimension), the index in `operand`'s tile of its first element (stage
    /// offset not included), computed once in the prologue.
    pub(crate) fn operand_store_indices(
        &mut self,
        map: &RegisterMap,
        layout: Layout,
        operand: &SharedOperand,
        w: u32,
    ) -> Vec<Reg> {
        let (rd, cd) = (
            layout.blocked_dim(1 - operand.contiguous),
            layout.blocked_dim(operand.contiguous),
        );
        (0..map.len)
            .step_by(w as usize)
            .map(|i| {
                let row = self.coord(map, i, rd);
                let col = self.coord(map, i, cd);
                self.swizzled_index(operand.tile, row, col)
            })
            .collect()
    }

    /// `tile.offset(row, col)` of registers, in the prologue.
    pub(crate) fn swizzled_index(&mut self, tile: SwizzledTile, row: Reg, col: Reg) -> Reg {
        let i32t = ScalarType::I32;
        let bin = |l: &mut Self, op: BinaryOp, x: Reg, c: i64| {
            let c = l.i32c(c);
            l.pset(i32t, Expr::Binary(op, x, c))
        };
        let add = |l: &mut Self, x: Reg, y: Reg| l.pset(i32t, Expr::Binary(BinaryOp::Add, x, y));
        // The column block, when rows are split into blocks of 128 bytes.
        let (col, block) = if tile.block_cols == tile.cols {
            (col, None)
        } else {
            let bc = tile.block_cols;
            let block = bin(self, BinaryOp::Shr, col, bc.trailing_zeros() as i64);
            let block = bin(self, BinaryOp::Mul, block, (tile.rows * bc) as i64);
            (bin(self, BinaryOp::And, col, bc as i64 - 1), Some(block))
        };
        let line = bin(self, BinaryOp::Mul, row, tile.block_cols as i64);
        let line = match block {
            Some(b) => add(self, line, b),
            None => line,
        };
        let within = if tile.max_phase > 1 {
            let phase = bin(self, BinaryOp::Shr, row, tile.per_phase.trailing_zeros() as i64);
            let phase = bin(self, BinaryOp::And, phase, tile.max_phase as i64 - 1);
            let phase = bin(self, BinaryOp::Shl, phase, tile.vec.trailing_zeros() as i64);
            self.pset(i32t, Expr::Binary(BinaryOp::Xor, col, phase))
        } else {
            col
        };
        self.pset(i32t, Expr::Binary(BinaryOp::Add, line, within))
    }
}

/// The registers of an operand fragment: as read, or (tf32x3) their tf32 roundings and
/// the tf32-representable rest.
struct Fragment {
    big: Vec<Reg>,
    small: Option<Vec<Reg>>,
}

impl Lowerer<'_> {
    /// Fragment `regs`, split for tf32x3 where `split`.
    fn fragment(&mut self, regs: &[Reg], split: bool) -> Fragment {
        if !split {
            return Fragment {
                big: regs.to_vec(),
                small: None,
            };
        }
        let (big, small) = regs.iter().map(|&r| self.split_tf32(r)).unzip();
        Fragment {
            big,
            small: Some(small),
        }
    }
}

/// `d += a b` for fragments of 16-bit values (8 of A, 4 of B: `m16n8k16`) or of f32 ones
/// multiplied as tf32 (4 and 2: `m16n8k8`).
fn mma_stmt(d: [Reg; 4], a: &[Reg], b: &[Reg]) -> Option<Stmt> {
    Some(match (a.len(), b.len()) {
        (8, 4) => Stmt::Mma {
            d,
            a: a.try_into().ok()?,
            b: b.try_into().ok()?,
            c: d,
        },
        (4, 2) => Stmt::MmaTf32 {
            d,
            a: a.try_into().ok()?,
            b: b.try_into().ok()?,
            c: d,
        },
        _ => return None,
    })
}

/// The warps along M and N for an `m × n` accumulator: the split whose warp tiles need the
/// fewest fragment loads per k-step (`m / wm / 16` for A, `n / wn / 16` for B), among those
/// that give every warp whole m16n8 tiles. `None` when there is none.
fn warp_grid(m: u32, n: u32, warps: u32) -> Option<(u32, u32)> {
    let mut best: Option<(u32, (u32, u32))> = None;
    let mut wm = 1;
    while wm <= warps {
        let wn = warps / wm;
        if m % (16 * wm) == 0 && n % (8 * wn) == 0 {
            let cost = m / wm + n / wn;
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, (wm, wn)));
            }
        }
        wm *= 2;
    }
    best.map(|(_, g)| g)
}

/// The blocked dimension a layout's threads hold consecutive elements along, as an operand
/// dimension (0 or 1).
pub(crate) fn fastest_dim(layout: Layout) -> usize {
    if layout.sliced == 0 && layout.blocked.order[0] as usize == layout.blocked_dim(0) {
        0
    } else {
        1
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    A,
    B,
}

/// Emits the fragment reads of one operand of one `dot`.
///
/// With `ldmatrix`, lane `l` gives the address of row `l % 8` of matrix `l / 8`. For A the
/// matrices are (rows of half `h`, k half `kh`) with `h = (l / 8) % 2`, `kh = l / 16`; for B
/// (n8 tile `e`, k half `kh`) with `kh = (l / 8) % 2`, `e = l / 16`, a k half being one
/// 16-byte row (8 16-bit values, 4 f32 ones). An address is the tile index of (outer, k)
/// coordinates: a per-lane part, computed once, plus constants per tile and k-step. Moving
/// along the tile's rows by a multiple of its phase period only adds whole rows, so one
/// per-lane base per distinct column constant suffices.
///
/// With 32-bit loads (f32 stored along the outer dimension), lane `l` reads its own
/// fragment elements: `k = t + 4 kh`, outer `g` (plus the row half's spacing for A), with
/// `g = l / 4`, `t = l % 4`. The tile's rows are then along K, and the phase of a row
/// constant that is not a multiple of the period matters: one per-lane base per (row
/// constant modulo the period, column constant).
struct FragmentReader {
    operand: SharedOperand,
    which: Operand,
    /// Whether the tile runs along the operand's outer dimension (`ldmatrix.trans`, or
    /// element loads for 32-bit values).
    trans: bool,
    /// Whether fragments are read one 32-bit element at a time rather than by `ldmatrix`.
    elements: bool,
    /// The lane's tile row and column before the constants.
    lane_row: Reg,
    lane_col: Reg,
    /// Per m16 (A) or n8 (B) tile, its outer coordinate's constant part.
    tile_outer: Vec<u32>,
    /// The distance of an m16 tile's two row halves (A).
    spacing: u32,
    /// Per-lane bases, by (row constant within the phase period, column constant).
    bases: HashMap<(u32, u32), Reg>,
    /// The same plus the stage's offset (in the body, for this `dot` only).
    staged: HashMap<(u32, u32), Reg>,
}

impl FragmentReader {
    fn new(l: &mut Lowerer<'_>, map: &RegisterMap, operand: SharedOperand, which: Operand) -> Result<Self, LowerError> {
        let i32t = ScalarType::I32;
        let kdim = if which == Operand::A { 1 } else { 0 };
        let trans = operand.contiguous != kdim;
        // `ldmatrix.trans` moves 16-bit values; it would split f32 ones.
        let elements = trans && operand.tile.vec < 8;
        let (_, lane, _) = l.thread_ids();
        let bin = |l: &mut Lowerer<'_>, op: BinaryOp, x: Reg, y: Reg| l.pset(i32t, Expr::Binary(op, x, y));
        let c = |l: &mut Lowerer<'_>, v: i64| l.i32c(v);
        let reg = |jr: u32, jc: u32| map.join([jr, jc, 0]);
        let (mtiles, ntiles) = (map.count[0] / 2, map.count[1] / 2);
        let row7 = {
            let seven = c(l, 7);
            bin(l, BinaryOp::And, lane, seven)
        };
        let bit3 = {
            let (three, one) = (c(l, 3), c(l, 1));
            let s = bin(l, BinaryOp::Shr, lane, three);
            bin(l, BinaryOp::And, s, one)
        };
        let bit4 = {
            let four = c(l, 4);
            bin(l, BinaryOp::Shr, lane, four)
        };
        let g = {
            let two = c(l, 2);
            bin(l, BinaryOp::Shr, lane, two)
        };
        let t = {
            let three = c(l, 3);
            bin(l, BinaryOp::And, lane, three)
        };
        // The warp's first outer coordinate, the spacing of what the lane's matrix bit
        // selects, and each tile's constant part.
        let (outer_base, spacing, outer_sel, k_sel, tile_outer) = match which {
            Operand::A => {
                let row = l.coord(map, reg(0, 0), 0);
                let base = bin(l, BinaryOp::Sub, row, g);
                let first = map.offsets(reg(0, 0))[0];
                let spacing = map.offsets(reg(1, 0))[0] - first;
                let tiles: Vec<u32> = (0..mtiles).map(|q| map.offsets(reg(2 * q, 0))[0] - first).collect();
                for q in 0..mtiles {
                    let s = map.offsets(reg(2 * q + 1, 0))[0] - map.offsets(reg(2 * q, 0))[0];
                    if s != spacing {
                        return Err(l.internal("mma tiles' row halves are not evenly spaced"));
                    }
                }
                (base, spacing, bit3, bit4, tiles)
            }
            Operand::B => {
                let col = l.coord(map, reg(0, 0), 1);
                let t2 = {
                    let one = c(l, 1);
                    bin(l, BinaryOp::Shl, t, one)
                };
                let base = bin(l, BinaryOp::Sub, col, t2);
                let first = map.offsets(reg(0, 0))[1];
                let tiles: Vec<u32> = (0..ntiles).map(|p| map.offsets(reg(0, 2 * p))[1] - first).collect();
                let spacing = if ntiles > 1 { tiles[1] } else { 8 };
                if tiles.windows(2).any(|w| w[1] - w[0] != spacing) {
                    return Err(l.internal("mma n8 tiles are not evenly spaced"));
                }
                (base, spacing, bit4, bit3, tiles)
            }
        };
        let (lane_row, lane_col) = if elements {
            // (k, outer) of the lane's first fragment element.
            (t, bin(l, BinaryOp::Add, outer_base, g))
        } else {
            let sp = c(l, spacing as i64);
            let sel = bin(l, BinaryOp::Mul, outer_sel, sp);
            let mut outer = bin(l, BinaryOp::Add, outer_base, sel);
            let vec = c(l, operand.tile.vec as i64);
            let mut k = bin(l, BinaryOp::Mul, k_sel, vec);
            if trans {
                k = bin(l, BinaryOp::Add, k, row7);
            } else {
                outer = bin(l, BinaryOp::Add, outer, row7);
            }
            if trans {
                (k, outer)
            } else {
                (outer, k)
            }
        };
        Ok(FragmentReader {
            operand,
            which,
            trans,
            elements,
            lane_row,
            lane_col,
            tile_outer,
            spacing,
            bases: HashMap::new(),
            staged: HashMap::new(),
        })
    }

    /// The fragment registers of tile `t` (A: m16 tile; B: n8 tile `t`, and `t + 1` when
    /// `pair`) at k-step `kk`: 8 registers (4 matrices) or 4 (2 matrices) of 16-bit values,
    /// half as many of f32 ones.
    fn read(
        &mut self,
        l: &mut Lowerer<'_>,
        t: u32,
        kk: u32,
        pair: bool,
        ty: ScalarType,
    ) -> Result<Vec<Reg>, LowerError> {
        if self.elements {
            return self.read_elements(l, t, kk, pair, ty);
        }
        let (outer_c, k_c) = (self.tile_outer[t as usize], 2 * self.operand.tile.vec * kk);
        let (row_c, col_c) = if self.trans { (k_c, outer_c) } else { (outer_c, k_c) };
        let tile = self.operand.tile;
        if row_c % tile.row_period() != 0 {
            return Err(l.internal("an ldmatrix row offset is not a multiple of the swizzle period"));
        }
        let index = self.index(l, row_c, col_c);
        let matrices = if self.which == Operand::A || pair { 4 } else { 2 };
        let per_matrix = (tile.vec / 4) as usize;
        let dsts: Vec<Reg> = (0..per_matrix * matrices).map(|_| l.new_reg(ty)).collect();
        l.emit(Stmt::LdMatrix {
            dsts: dsts.clone(),
            alloc: self.operand.alloc,
            index,
            trans: self.trans,
        });
        Ok(dsts)
    }

    /// [`read`](Self::read) one 32-bit shared load per fragment element, in the order of
    /// `Stmt::MmaTf32`'s operands: A `(g, t)`, `(g+8, t)`, `(g, t+4)`, `(g+8, t+4)` (the
    /// "+8" being the row halves' spacing); B `(t, g)`, `(t+4, g)` of each n8 tile.
    fn read_elements(
        &mut self,
        l: &mut Lowerer<'_>,
        t: u32,
        kk: u32,
        pair: bool,
        ty: ScalarType,
    ) -> Result<Vec<Reg>, LowerError> {
        let k0 = 2 * self.operand.tile.vec * kk;
        // (k, outer) constants of each element.
        let at: Vec<(u32, u32)> = match self.which {
            Operand::A => {
                let o = self.tile_outer[t as usize];
                let s = self.spacing;
                vec![(k0, o), (k0, o + s), (k0 + 4, o), (k0 + 4, o + s)]
            }
            Operand::B => {
                let tiles = if pair { t..t + 2 } else { t..t + 1 };
                tiles
                    .flat_map(|e| {
                        let o = self.tile_outer[e as usize];
                        [(k0, o), (k0 + 4, o)]
                    })
                    .collect()
            }
        };
        let mut dsts = Vec::with_capacity(at.len());
        for (row_c, col_c) in at {
            let index = self.index(l, row_c, col_c);
            let r = l.new_reg(ty);
            l.emit(Stmt::Load {
                dsts: vec![r],
                mem: Memory::Shared {
                    alloc: self.operand.alloc,
                },
                index,
                pred: None,
                cache: CacheModifier::Default,
            });
            dsts.push(r);
        }
        Ok(dsts)
    }

    /// The tile index of the lane's element at (`row_c`, `col_c`) from its first: a per-lane
    /// base made once in the prologue, plus the stage and whole rows here.
    fn index(&mut self, l: &mut Lowerer<'_>, row_c: u32, col_c: u32) -> Reg {
        let i32t = ScalarType::I32;
        let tile = self.operand.tile;
        let within = row_c % tile.row_period();
        let base = match self.bases.get(&(within, col_c)) {
            Some(&b) => b,
            None => {
                let add = |l: &mut Lowerer<'_>, r: Reg, v: u32| {
                    if v == 0 {
                        return r;
                    }
                    let cc = l.i32c(v as i64);
                    l.pset(i32t, Expr::Binary(BinaryOp::Add, r, cc))
                };
                let row = add(l, self.lane_row, within);
                let col = add(l, self.lane_col, col_c);
                let b = l.swizzled_index(tile, row, col);
                self.bases.insert((within, col_c), b);
                b
            }
        };
        let mut index = match self.operand.stage {
            Some(s) => *self
                .staged
                .entry((within, col_c))
                .or_insert_with(|| l.set(i32t, Expr::Binary(BinaryOp::Add, base, s))),
            None => base,
        };
        if row_c != within {
            let d = l.i32c(((row_c - within) * tile.cols) as i64);
            index = l.set(i32t, Expr::Binary(BinaryOp::Add, index, d));
        }
        index
    }
}
