//! `dot` on cooperative matrices (Vulkan's `VK_KHR_cooperative_matrix`) where the target
//! lists a shape that fits: f16 inputs, an f32 accumulator, a tile of whole shapes for the
//! program's warps.
//!
//! A cooperative matrix is opaque: the device does not say which lane holds which element,
//! so unlike `mma.sync`'s fragments it cannot be a layout of registers. The accumulator of
//! such a `dot` is instead a [`CoopAcc`]: each warp (subgroup) owns a `tiles_m x tiles_n`
//! grid of accumulator matrices dealt to the warps in turn (warps in a `wm x wn` grid, as
//! square as the block allows, which minimizes the operand tiles each loads per step). Its
//! only direct use is as the accumulator of the next such `dot`, which is how a `for` loop
//! carries it across the K loop without touching memory (`control.rs`); any other use
//! (activation, conversion, store, reduction, a yield into a blocked slot) first
//! materializes it in the default blocked layout through shared memory (`coop_to_blocked`),
//! and a blocked accumulator enters through shared memory the other way (`coop_from_lval`),
//! or as `CoopZero` when it is a constant zero. One more use keeps it in matrices where the
//! target allows (`Target::coop_scale`): a product with a column of per-row factors
//! broadcast along its rows (attention's rescale, `acc * alpha[:, None]`), which multiplies
//! each matrix element by element by the factors loaded as a matrix at stride 0
//! (`coop_scale_rows`), so that a loop whose `dot` accumulates into such a product of its
//! carried value still carries it in matrices.
//!
//! The operands are read from shared memory in [`coop_tile`]s (padded rows, no swizzle):
//! filled, in a `for` loop, by the pipeline of `pipeline/prefetch.rs` (Vulkan has no
//! asynchronous copy: each iteration stores the operands it loaded into registers one
//! iteration earlier into one of two stages, or the one that fits, and loads the next
//! iteration's before its multiply-adds, so that their latency hides behind them), or here,
//! from registers. Each K step of the matrix shape, a warp loads its B tiles, then one A
//! tile at a time, each used at once by its row of multiply-adds.

use super::mma::{fastest_dim, SharedOperand};
use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, CmpOp, Inst, Literal, Op, ValueId};
use crate::layout::{Layout, SwizzledTile};
use crate::target::CoopMatrixShape;
use crate::thread::{CoopMatrix, CoopReg, CoopRole, Expr, Memory, Reg, Stmt};
use crate::types::{Elem, ScalarType, Shape};

/// How an `m x n` accumulator is split into cooperative matrices over the warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopTiling {
    pub m: u32,
    pub n: u32,
    pub shape: CoopMatrixShape,
    /// Warps along M and N (warp `w` is at `(w / wn, w % wn)`).
    pub wm: u32,
    pub wn: u32,
    /// Accumulator matrices per warp along M and N.
    pub tiles_m: u32,
    pub tiles_n: u32,
}

/// An accumulator held in cooperative matrices: per warp, `tiling.tiles_m x tiles_n`
/// matrices, row-major in `tiles`; tile `(i, j)` of warp `(wi, wj)` holds rows
/// `(i * wm + wi) * shape.m ..` and columns `(j * wn + wj) * shape.n ..` (the warps'
/// matrices dealt in turn, as a blocked layout's warps repeat over a block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CoopAcc {
    pub tiling: CoopTiling,
    pub tiles: Vec<CoopReg>,
}

/// Bytes of shared memory a `dot` of tiling `t` and depth `k` needs at least: its operands
/// (f16, rows padded by 16 bytes) and the smallest exchange of its accumulator.
fn coop_shared_bytes(t: &CoopTiling, k: u32) -> u64 {
    let operands = (t.m * (k + 8) + k * (t.n + 8)) as u64 * 2;
    operands + (t.wm * t.wn * t.shape.m * t.shape.n * 4) as u64
}

/// The tile a cooperative-matrix operand of `dims` is stored in, contiguous along
/// dimension `contiguous`: rows of `dims[contiguous]` elements padded by 16 bytes, not
/// swizzled. Cooperative loads take a stride (Vulkan wants it a multiple of 16 bytes) and
/// no swizzle, and read 16-byte pieces of consecutive rows (as `ldmatrix`): rows a multiple
/// of 128 bytes long would put them in the same banks, the padding in different ones. An
/// operand stored along M (A) or N (B) is read column-major.
pub(crate) fn coop_tile(dims: [u32; 2], contiguous: usize, elem: ScalarType) -> SwizzledTile {
    let bytes = elem.size_bytes() as u32;
    let pitch = dims[contiguous] + 16 / bytes;
    SwizzledTile {
        rows: dims[1 - contiguous],
        cols: pitch,
        vec: 16 / bytes,
        per_phase: 1,
        max_phase: 1,
        block_cols: pitch,
        align: 16,
    }
}

/// How far apart in `op`'s tile consecutive elements along operand dimension `d` are.
fn coop_scale(op: &SharedOperand, d: usize) -> u32 {
    if d == op.contiguous {
        1
    } else {
        op.tile.cols
    }
}

/// The coordinate along blocked dimension `d` of register `i` of `map` in thread `t` of
/// warps of `warp_size`: what `Lowerer::coord` computes at run time (`exchange.rs`).
fn static_coord(map: &crate::layout::RegisterMap, t: u32, i: usize, d: usize, warp_size: u32) -> u32 {
    let b = map.layout.blocked;
    let (lane, warp) = (t % warp_size, t / warp_size);
    let (mut lshift, mut wshift) = (0, 0);
    let mut base = 0;
    for k in 0..b.rank as usize {
        let dd = b.order[k] as usize;
        let (tpw, wpc, spt) = (b.threads_per_warp[dd], b.warps_per_cta[dd], b.size_per_thread[dd]);
        let lane_d = (lane >> lshift) & (tpw - 1);
        let warp_d = (warp >> wshift) & (wpc - 1);
        lshift += tpw.trailing_zeros();
        wshift += wpc.trailing_zeros();
        if dd == d {
            base = (warp_d * tpw + lane_d) * spt;
        }
    }
    if map.replicated(d) {
        base &= map.base_mask(d);
    }
    base + map.offsets(i)[d]
}

/// The matrix sizes naga (and so the SPIR-V backend) can express.
fn expressible(s: &CoopMatrixShape) -> bool {
    [s.m, s.n, s.k].iter().all(|&d| d == 8 || d == 16)
}

impl Lowerer<'_> {
    /// How `dot` `inst` runs on cooperative matrices, or `None` when it cannot (a target
    /// without them or without a fitting shape, other types, a tile that does not split over
    /// the warps, or operands that alone do not fit shared memory): then it takes another
    /// path.
    pub(crate) fn coop_plan(&self, inst: &Inst) -> Option<CoopTiling> {
        let Op::Dot {
            a, b, acc, precision, ..
        } = inst.op
        else {
            return None;
        };
        if self.target.coop_matrix.is_empty() || self.target.mma_sync || precision != crate::ir::DotPrecision::Ieee {
            return None;
        }
        let (ta, tb, tc) = (self.k.ty(a), self.k.ty(b), self.k.ty(acc));
        let (Elem::Scalar(input), Elem::Scalar(acc_ty)) = (ta.elem, tc.elem) else {
            return None;
        };
        // f16 only: naga's cooperative matrices hold f16 or f32, and an f32 `dot` is IEEE.
        if input != ScalarType::F16 || acc_ty != ScalarType::F32 {
            return None;
        }
        let ([m, k], n) = (ta.shape.dims().try_into().ok()?, tb.shape.dims()[1]);
        let warps = self.target.num_warps;
        // Per fitting shape the squarest warp grid; 16x16x16 first (fewest loads per product).
        let mut best: Option<(u32, CoopTiling)> = None;
        for s in self.target.coop_matrix.iter().filter(|s| {
            s.ab == input && s.acc == acc_ty && expressible(s) && m % s.m == 0 && n % s.n == 0 && k % s.k == 0
        }) {
            let mut wm = 1;
            while wm <= warps {
                let wn = warps / wm;
                if m % (s.m * wm) == 0 && n % (s.n * wn) == 0 {
                    let (tiles_m, tiles_n) = (m / (s.m * wm), n / (s.n * wn));
                    let cost = (m / wm + n / wn) * 1024 / (s.m * s.n * s.k);
                    if best.is_none_or(|(c, _)| cost < c) {
                        let t = CoopTiling {
                            m,
                            n,
                            shape: *s,
                            wm,
                            wn,
                            tiles_m,
                            tiles_n,
                        };
                        best = Some((cost, t));
                    }
                }
                wm *= 2;
            }
        }
        let (_, t) = best?;
        // A and B, and the smallest exchange of the accumulator. (Not what else the kernel
        // holds: the decision must not change between the loop that plans the operands'
        // pipeline and the `dot`; a kernel that does not fit fails as a whole.)
        (coop_shared_bytes(&t, k) <= self.target.max_shared_bytes as u64).then_some(t)
    }

    fn coop_matrix(&mut self, role: CoopRole, rows: u32, cols: u32, elem: ScalarType) -> CoopReg {
        self.coop.push(CoopMatrix { role, rows, cols, elem });
        self.coop.len() as u32 - 1
    }

    /// Fresh accumulator matrices for `t` (not yet written).
    fn coop_acc(&mut self, t: &CoopTiling) -> CoopAcc {
        let tiles = (0..t.tiles_m * t.tiles_n)
            .map(|_| self.coop_matrix(CoopRole::Acc, t.shape.m, t.shape.n, t.shape.acc))
            .collect();
        CoopAcc { tiling: *t, tiles }
    }

    /// A zero accumulator for `t`.
    pub(crate) fn coop_zeros(&mut self, t: &CoopTiling) -> CoopAcc {
        let acc = self.coop_acc(t);
        for &c in &acc.tiles {
            self.emit(Stmt::CoopZero { dst: c });
        }
        acc
    }

    /// The warp's position in the warp grid: `(w / wn, w % wn)` (uniform in the warp).
    fn coop_warp(&mut self, t: &CoopTiling) -> (Reg, Reg) {
        let (_, _, warp) = self.thread_ids();
        let i32t = ScalarType::I32;
        let shift = self.i32c(t.wn.trailing_zeros() as i64);
        let mask = self.i32c(t.wn as i64 - 1);
        let wi = self.pset(i32t, Expr::Binary(BinaryOp::Shr, warp, shift));
        let wj = self.pset(i32t, Expr::Binary(BinaryOp::And, warp, mask));
        (wi, wj)
    }

    /// `a * sa + b * sb` in the prologue (thread-dependent only).
    fn coop_base(&mut self, a: Reg, sa: u32, b: Reg, sb: u32) -> Reg {
        let i32t = ScalarType::I32;
        let (ka, kb) = (self.i32c(sa as i64), self.i32c(sb as i64));
        let x = self.pset(i32t, Expr::Binary(BinaryOp::Mul, a, ka));
        let y = self.pset(i32t, Expr::Binary(BinaryOp::Mul, b, kb));
        self.pset(i32t, Expr::Binary(BinaryOp::Add, x, y))
    }

    /// `base + off` (in the prologue).
    fn coop_offset(&mut self, base: Reg, off: u32) -> Reg {
        if off == 0 {
            return base;
        }
        let c = self.i32c(off as i64);
        self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, base, c))
    }

    /// Whether `inst` is the only instruction of the kernel that uses `v` (then a `dot` may
    /// update `v`'s matrices in place).
    pub(crate) fn only_use(&self, v: ValueId, inst: &Inst) -> bool {
        self.use_count(v) == 1 && inst.op.operands().contains(&v)
    }

    /// How many operands of the kernel's instructions are `v`.
    pub(crate) fn use_count(&self, v: ValueId) -> usize {
        self.use_counts[v.index()]
    }

    /// Where `inst` multiplies an accumulator held in cooperative matrices by a column of
    /// per-row f32 factors broadcast along its rows (`acc * alpha[:, None]`) and the target
    /// can scale matrices in place: the accumulator and the `[m, 1]` factors.
    pub(crate) fn coop_row_scale(&self, inst: &Inst) -> Option<(ValueId, ValueId)> {
        let Op::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } = inst.op
        else {
            return None;
        };
        [(lhs, rhs), (rhs, lhs)].into_iter().find_map(|(x, s)| {
            let in_matrices = self.values[x.index()].is_none() && self.coop_vals.contains_key(&x);
            in_matrices.then_some(())?;
            Some((x, self.row_factors(s)?))
        })
    }

    /// `s`'s `[m, 1]` source where `s` is an f32 `[m, 1]` value broadcast to `[m, n]`, on a
    /// target that scales cooperative matrices in place.
    fn row_factors(&self, s: ValueId) -> Option<ValueId> {
        if !self.target.coop_scale || self.target.coop_matrix.is_empty() {
            return None;
        }
        let crate::ir::ValueDef::Result { inst, .. } = self.k.values[s].def else {
            return None;
        };
        let Op::Broadcast { value } = self.k.insts[inst].op else {
            return None;
        };
        let (from, to) = (self.k.ty(value), self.k.ty(s));
        let f32s = from.scalar_type() == Some(ScalarType::F32);
        let column = from.shape.rank() == 2 && from.shape.dims()[1] == 1 && to.shape.dims()[0] == from.shape.dims()[0];
        (f32s && column).then_some(value)
    }

    /// Whether `v` is, in `region`, the carried value `arg` or its product with a column of
    /// per-row factors that [`Self::coop_row_scale`] keeps in matrices.
    fn carried_or_scaled(&self, v: ValueId, arg: ValueId, region: &crate::ir::Region) -> bool {
        if v == arg {
            return true;
        }
        let crate::ir::ValueDef::Result { inst, .. } = self.k.values[v].def else {
            return false;
        };
        if !region.insts.contains(&inst) {
            return false;
        }
        match self.k.insts[inst].op {
            Op::Binary {
                op: BinaryOp::Mul,
                lhs,
                rhs,
            } => (lhs == arg && self.row_factors(rhs).is_some()) || (rhs == arg && self.row_factors(lhs).is_some()),
            _ => false,
        }
    }

    /// `acc` with row `r` of every matrix multiplied by element `r` of `factors` (an f32
    /// `[m, 1]` value), in place when `in_place`: the factors stored once by their owners
    /// into the exchange buffer, each warp loads its rows' as an accumulator matrix at
    /// stride 0 column-major (element `(r, c)` is factor `r`) and multiplies each of its
    /// matrices in that tile row by it. Two barriers, where moving the accumulator to
    /// registers and back takes at least four and the whole block's bytes each way.
    pub(crate) fn coop_scale_rows(
        &mut self,
        acc: &CoopAcc,
        factors: ValueId,
        in_place: bool,
    ) -> Result<CoopAcc, LowerError> {
        let t = acc.tiling;
        let s = t.shape;
        let lval = self.lval(factors)?;
        let shape = self.k.ty(factors).shape;
        let map = lval.layout.map(shape);
        let own = self.owner(&map);
        let rd = lval.layout.blocked_dim(0);
        let buf = self.shared_buffer(ScalarType::F32, t.m);
        for (i, &r) in lval.regs.iter().enumerate() {
            let row = self.coord(&map, i, rd);
            self.emit(Stmt::Store {
                values: vec![r],
                mem: Memory::Shared { alloc: buf },
                index: row,
                pred: own,
            });
        }
        self.emit(Stmt::Barrier);
        let out = if in_place { acc.clone() } else { self.coop_acc(&t) };
        let (wi, _) = self.coop_warp(&t);
        let zero = self.i32c(0);
        let base = self.coop_base(wi, s.m, zero, 0);
        let scale = self.coop_matrix(CoopRole::Acc, s.m, s.n, s.acc);
        for i in 0..t.tiles_m {
            let index = self.coop_offset(base, i * t.wm * s.m);
            self.emit(Stmt::CoopLoad {
                dst: scale,
                alloc: buf,
                index,
                stride: 0,
                row_major: false,
            });
            for j in 0..t.tiles_n {
                let at = (i * t.tiles_n + j) as usize;
                self.emit(Stmt::CoopMul {
                    d: out.tiles[at],
                    a: acc.tiles[at],
                    b: scale,
                });
            }
        }
        // (The buffer is every exchange's: the next may overwrite the factors.)
        self.emit(Stmt::Barrier);
        Ok(out)
    }

    /// `dot` on cooperative matrices, or `None` when it cannot run there.
    pub(crate) fn dot_coop(&mut self, inst: &Inst) -> Result<Option<CoopAcc>, LowerError> {
        let Some(t) = self.coop_plan(inst) else {
            return Ok(None);
        };
        let Op::Dot { a, b, acc, .. } = inst.op else {
            return Err(self.internal("not a dot"));
        };
        let k = self.k.ty(a).shape.dims()[1];
        let s = t.shape;

        // The accumulator: updated in place when this is its only use.
        let (c, in_place) = match self.coop_vals.get(&acc) {
            Some(c) if c.tiling == t => (c.clone(), self.only_use(acc, inst)),
            _ if self.is_zero(acc) => (self.coop_zeros(&t), true),
            _ => {
                let lval = self.plain_lval(acc)?;
                (self.coop_from_lval(&lval, None, &t)?, true)
            }
        };
        let d = if in_place { c.clone() } else { self.coop_acc(&t) };

        let hoisted = |l: &Self, which| l.hoisted_operand(inst.results.first().copied(), which);
        let (sa, a_here) = match hoisted(self, super::mma::Operand::A) {
            Some(s) => (s, false),
            None => self.coop_operand(a)?,
        };
        let (sb, b_here) = match hoisted(self, super::mma::Operand::B) {
            Some(s) => (s, false),
            None => self.coop_operand(b)?,
        };
        if a_here || b_here {
            self.emit(Stmt::Barrier);
        }

        let (wi, wj) = self.coop_warp(&t);
        let a_base = self.coop_warp_base(&sa, wi, 0, s.m);
        let b_base = self.coop_warp_base(&sb, wj, 1, s.n);
        let a_reg = self.coop_matrix(CoopRole::A, s.m, s.k, s.ab);
        let b_regs: Vec<CoopReg> = (0..t.tiles_n)
            .map(|_| self.coop_matrix(CoopRole::B, s.k, s.n, s.ab))
            .collect();
        for kk in 0..k / s.k {
            for (j, &br) in b_regs.iter().enumerate() {
                let index = self.coop_operand_index(&sb, b_base, kk * s.k, j as u32 * t.wn * s.n);
                self.emit(Stmt::CoopLoad {
                    dst: br,
                    alloc: sb.alloc,
                    index,
                    stride: sb.tile.cols,
                    row_major: sb.contiguous == 1,
                });
            }
            for i in 0..t.tiles_m {
                let index = self.coop_operand_index(&sa, a_base, i * t.wm * s.m, kk * s.k);
                self.emit(Stmt::CoopLoad {
                    dst: a_reg,
                    alloc: sa.alloc,
                    index,
                    stride: sa.tile.cols,
                    row_major: sa.contiguous == 1,
                });
                for (j, &br) in b_regs.iter().enumerate() {
                    let at = (i * t.tiles_n) as usize + j;
                    let from = if kk == 0 { c.tiles[at] } else { d.tiles[at] };
                    self.emit(Stmt::CoopMulAdd {
                        d: d.tiles[at],
                        a: a_reg,
                        b: br,
                        c: from,
                    });
                }
            }
        }
        if a_here || b_here {
            // The buffers may be written again (the next iteration of an enclosing loop).
            self.emit(Stmt::Barrier);
        }
        Ok(Some(d))
    }

    /// Operand `v` of a `dot` on cooperative matrices in shared memory: where the enclosing
    /// loop's pipeline put it, or stored there now (then the second value is true and a
    /// barrier must follow), in [`coop_tile`]'s orientation along its registers' fastest
    /// dimension, each element once, by its owner.
    pub(crate) fn coop_operand(&mut self, v: ValueId) -> Result<(SharedOperand, bool), LowerError> {
        if let Some(s) = self.pipelined_operand(v) {
            return Ok((s, false));
        }
        let lval = self.lval(v)?;
        let ty = self.k.ty(v);
        let elem = ty.scalar_type().ok_or_else(|| self.internal("a dot of pointers"))?;
        let dims = [ty.shape.dims()[0], ty.shape.dims()[1]];
        let layout = lval.layout;
        let contiguous = fastest_dim(layout);
        let tile = coop_tile(dims, contiguous, elem);
        let alloc = self.operand_alloc(crate::thread::SharedAlloc::transient(elem, tile.len()));
        let operand = SharedOperand {
            alloc,
            tile,
            contiguous,
            stage: None,
        };
        let map = layout.map(ty.shape);
        self.store_operand(&lval.regs, layout, &map, &operand);
        Ok((operand, true))
    }

    /// How warp coordinate `warp` (along operand dimension `warp_dim`, `step` elements per
    /// warp) places the warp's matrices in `op`'s tile: the element index of the warp's
    /// `(0, 0)`, computed once in the prologue.
    fn coop_warp_base(&mut self, op: &SharedOperand, warp: Reg, warp_dim: usize, step: u32) -> Reg {
        let zero = self.i32c(0);
        self.coop_base(warp, step * coop_scale(op, warp_dim), zero, 0)
    }

    /// The index of operand element `(r, c)` from the warp's `base`, in the stage the
    /// operand is read from this iteration.
    fn coop_operand_index(&mut self, op: &SharedOperand, base: Reg, r: u32, c: u32) -> Reg {
        let at = self.coop_offset(base, r * coop_scale(op, 0) + c * coop_scale(op, 1));
        match op.stage {
            Some(stage) => self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, stage)),
            None => at,
        }
    }

    /// How many of each warp's accumulator tiles go through shared memory at once, as
    /// `(p, q)` tile rows and columns: as many as fit what is left of it (whole rows first,
    /// so that the buffer's rows are the block's), at least one tile.
    fn coop_pass(&self, t: &CoopTiling) -> (u32, u32) {
        let used: u64 = self.shared.iter().map(|s| s.bytes() as u64).sum();
        let left = (self.target.max_shared_bytes as u64).saturating_sub(used);
        let tile = (t.wm * t.wn * t.shape.m * t.shape.n * 4) as u64;
        let divisors = |n: u32| (1..=n).rev().filter(move |d| n % d == 0);
        for p in divisors(t.tiles_m) {
            for q in divisors(t.tiles_n) {
                if (p * q) as u64 * tile <= left && (q == t.tiles_n || p == 1) {
                    return (p, q);
                }
            }
        }
        (1, 1)
    }

    /// For each element of `layout`'s registers of an `[m, n]` value, its index in the
    /// exchange buffer of `(p, q)` tiles per warp and pass, the register holding the pass
    /// that moves it, and that pass when every thread's element of the register moves in
    /// the same one (known here: then only that pass touches it, unpredicated). Element
    /// `(r, c)` is in the warp's tile `(ti, tj)`, `ti = (r / sm) / wm`, `tj = (c / sn) / wn`,
    /// of warp `(wi, wj)`, `wi = (r / sm) % wm`, `wj = (c / sn) % wn`; it moves in pass
    /// `(ti / p) (tiles_n / q) + tj / q`, at row `(wi p + ti % p) sm + r % sm` and column
    /// `(wj q + tj % q) sn + c % sn` of the buffer, whose rows are `wn q sn` long.
    fn coop_exchange_index(
        &mut self,
        layout: Layout,
        t: &CoopTiling,
        (p, q): (u32, u32),
    ) -> Vec<(Reg, Reg, Option<u32>)> {
        let shape = Shape::new(&[t.m, t.n]).expect("a 2-D accumulator");
        let map = layout.map(shape);
        let i32t = ScalarType::I32;
        let (rd, cd) = (layout.blocked_dim(0), layout.blocked_dim(1));
        let s = t.shape;
        let width = self.i32c((t.wn * q * s.n) as i64);
        let per_row = self.i32c((t.tiles_n / q) as i64);
        let pass_of = |r: u32, c: u32| ((r / s.m) / t.wm / p) * (t.tiles_n / q) + ((c / s.n) / t.wn) / q;
        let threads = self.target.threads();
        let mut splits = std::collections::HashMap::new();
        (0..map.len)
            .map(|i| {
                let r = self.coord(&map, i, rd);
                let c = self.coord(&map, i, cd);
                let (pr, row) = *splits
                    .entry((r, true))
                    .or_insert_with(|| self.coop_split(r, s.m, t.wm, p));
                let (pc, col) = *splits
                    .entry((c, false))
                    .or_insert_with(|| self.coop_split(c, s.n, t.wn, q));
                let pass = self.pset(i32t, Expr::Binary(BinaryOp::Mul, pr, per_row));
                let pass = self.pset(i32t, Expr::Binary(BinaryOp::Add, pass, pc));
                let x = self.pset(i32t, Expr::Binary(BinaryOp::Mul, row, width));
                let index = self.pset(i32t, Expr::Binary(BinaryOp::Add, x, col));
                let first = pass_of(
                    static_coord(&map, 0, i, rd, self.target.warp_size),
                    static_coord(&map, 0, i, cd, self.target.warp_size),
                );
                let uniform = (1..threads).all(|th| {
                    let ws = self.target.warp_size;
                    pass_of(static_coord(&map, th, i, rd, ws), static_coord(&map, th, i, cd, ws)) == first
                });
                (index, pass, uniform.then_some(first))
            })
            .collect()
    }

    /// For coordinate `x` along a dimension of tiles of `size` dealt to `warps` warps in
    /// turn, `p` per warp and pass: the pass along it, `ti / p`, and the position in the
    /// buffer, `(w p + ti % p) size + x % size` (`w = (x / size) % warps`, `ti = (x / size) /
    /// warps`).
    fn coop_split(&mut self, x: Reg, size: u32, warps: u32, p: u32) -> (Reg, Reg) {
        let i32t = ScalarType::I32;
        let tr = self.coop_div(x, size);
        let w = self.coop_rem(tr, warps);
        let ti = self.coop_div(tr, warps);
        let pass = self.coop_div(ti, p);
        let q = self.coop_rem(ti, p);
        let within = self.coop_rem(x, size);
        let pc = self.i32c(p as i64);
        let sz = self.i32c(size as i64);
        let y = self.pset(i32t, Expr::Binary(BinaryOp::Mul, w, pc));
        let y = self.pset(i32t, Expr::Binary(BinaryOp::Add, y, q));
        let y = self.pset(i32t, Expr::Binary(BinaryOp::Mul, y, sz));
        (pass, self.pset(i32t, Expr::Binary(BinaryOp::Add, y, within)))
    }

    /// `x / c` of a non-negative `x` (a shift for a power of two), in the prologue.
    fn coop_div(&mut self, x: Reg, c: u32) -> Reg {
        let (op, k) = if c.is_power_of_two() {
            (BinaryOp::Shr, c.trailing_zeros() as i64)
        } else {
            (BinaryOp::Div, c as i64)
        };
        if k == 0 && op == BinaryOp::Shr {
            return x;
        }
        let k = self.i32c(k);
        self.pset(ScalarType::I32, Expr::Binary(op, x, k))
    }

    /// `x % c` of a non-negative `x` (a mask for a power of two), in the prologue.
    fn coop_rem(&mut self, x: Reg, c: u32) -> Reg {
        let (op, k) = if c.is_power_of_two() {
            (BinaryOp::And, c as i64 - 1)
        } else {
            (BinaryOp::Rem, c as i64)
        };
        let k = self.i32c(k);
        self.pset(ScalarType::I32, Expr::Binary(op, x, k))
    }

    /// The warps' cooperative accesses of the exchange buffer in pass `pass`:
    /// `f(tile index, element index, stride)` for each of the warp's tiles in it.
    fn coop_exchange_tiles(
        &mut self,
        t: &CoopTiling,
        (p, q): (u32, u32),
        pass: u32,
        mut f: impl FnMut(&mut Self, usize, Reg, u32),
    ) {
        let (wi, wj) = self.coop_warp(t);
        let s = t.shape;
        let width = t.wn * q * s.n;
        let base = self.coop_base(wi, p * s.m * width, wj, q * s.n);
        let (pi, pj) = (pass / (t.tiles_n / q), pass % (t.tiles_n / q));
        for i in 0..p {
            for j in 0..q {
                let index = self.coop_offset(base, i * s.m * width + j * s.n);
                let tile = (pi * p + i) * t.tiles_n + pj * q + j;
                f(self, tile as usize, index, width);
            }
        }
    }

    /// The accumulator `acc` in the default blocked layout, through shared memory in as
    /// few passes as fit it.
    pub(crate) fn coop_to_blocked(&mut self, acc: &CoopAcc) -> Result<LVal, LowerError> {
        let t = acc.tiling;
        let shape = Shape::new(&[t.m, t.n]).expect("a 2-D accumulator");
        let layout = self.default_layout(shape);
        let pq = self.coop_pass(&t);
        let passes = (t.tiles_m / pq.0) * (t.tiles_n / pq.1);
        let buf = self.shared_buffer(ScalarType::F32, t.wm * t.wn * pq.0 * pq.1 * t.shape.m * t.shape.n);
        let at = self.coop_exchange_index(layout, &t, pq);
        // (A register that some pass may leave untouched in a thread needs a value there.)
        let out: Vec<Reg> = at
            .iter()
            .map(|&(_, _, known)| {
                if passes > 1 && known.is_none() {
                    self.set(ScalarType::F32, Expr::Const(Literal::Float(0.0)))
                } else {
                    self.new_reg(ScalarType::F32)
                }
            })
            .collect();
        for pass in 0..passes {
            self.coop_exchange_tiles(&t, pq, pass, |l, tile, index, stride| {
                l.emit(Stmt::CoopStore {
                    src: acc.tiles[tile],
                    alloc: buf,
                    index,
                    stride,
                    row_major: true,
                })
            });
            self.emit(Stmt::Barrier);
            for (&o, &(index, in_pass, known)) in out.iter().zip(&at) {
                let pred = match known {
                    _ if passes == 1 => None,
                    Some(p) if p == pass => None,
                    Some(_) => continue,
                    None => {
                        let pc = self.i32c(pass as i64);
                        Some(self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, in_pass, pc)))
                    }
                };
                self.emit(Stmt::Load {
                    dsts: vec![o],
                    mem: Memory::Shared { alloc: buf },
                    index,
                    pred,
                    cache: CacheModifier::Default,
                });
            }
            self.emit(Stmt::Barrier);
        }
        Ok(LVal {
            layout,
            regs: out,
            ptr: None,
        })
    }

    /// `lval` (an `[m, n]` f32 block in any layout) as cooperative matrices of tiling `t`,
    /// written to `into` (fresh ones when `None`).
    pub(crate) fn coop_from_lval(
        &mut self,
        lval: &LVal,
        into: Option<&CoopAcc>,
        t: &CoopTiling,
    ) -> Result<CoopAcc, LowerError> {
        let shape = Shape::new(&[t.m, t.n]).expect("a 2-D accumulator");
        let acc = match into {
            Some(a) => a.clone(),
            None => self.coop_acc(t),
        };
        let pq = self.coop_pass(t);
        let passes = (t.tiles_m / pq.0) * (t.tiles_n / pq.1);
        let buf = self.shared_buffer(ScalarType::F32, t.wm * t.wn * pq.0 * pq.1 * t.shape.m * t.shape.n);
        let at = self.coop_exchange_index(lval.layout, t, pq);
        let own = self.owner(&lval.layout.map(shape));
        for pass in 0..passes {
            for (&r, &(index, in_pass, known)) in lval.regs.iter().zip(&at) {
                let mut pred = own;
                match known {
                    _ if passes == 1 => {}
                    Some(p) if p == pass => {}
                    Some(_) => continue,
                    None => {
                        let pc = self.i32c(pass as i64);
                        let here = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, in_pass, pc));
                        pred = Some(match own {
                            Some(o) => self.pset(ScalarType::Bool, Expr::Binary(BinaryOp::And, o, here)),
                            None => here,
                        });
                    }
                }
                let v = if self.regs[r].ty == ScalarType::F32 {
                    r
                } else {
                    self.set(ScalarType::F32, Expr::Cast(r))
                };
                self.emit(Stmt::Store {
                    values: vec![v],
                    mem: Memory::Shared { alloc: buf },
                    index,
                    pred,
                });
            }
            self.emit(Stmt::Barrier);
            self.coop_exchange_tiles(t, pq, pass, |l, tile, index, stride| {
                l.emit(Stmt::CoopLoad {
                    dst: acc.tiles[tile],
                    alloc: buf,
                    index,
                    stride,
                    row_major: true,
                })
            });
            self.emit(Stmt::Barrier);
        }
        Ok(acc)
    }

    /// `v`'s registers: those it has, or, for an accumulator in cooperative matrices, the
    /// matrices moved to the default layout.
    pub(crate) fn plain_lval(&mut self, v: ValueId) -> Result<LVal, LowerError> {
        match self.coop_vals.get(&v).cloned() {
            Some(acc) if self.values[v.index()].is_none() => self.coop_to_blocked(&acc),
            _ => self.lval(v),
        }
    }

    /// For each of a `for` loop's carried values, the tiling to carry it in cooperative
    /// matrices: where a `dot` on them accumulates into it directly, or into its product
    /// with per-row factors that stays in matrices ([`Self::coop_row_scale`]).
    pub(crate) fn coop_carried(&self, init: &[ValueId], region: &crate::ir::Region) -> Vec<Option<CoopTiling>> {
        init.iter()
            .zip(&region.args[1..])
            .map(|(_, &arg)| {
                region.insts.iter().find_map(|&i| {
                    let inst = &self.k.insts[i];
                    match inst.op {
                        Op::Dot { acc, .. } if self.carried_or_scaled(acc, arg, region) => self.coop_plan(inst),
                        _ => None,
                    }
                })
            })
            .collect()
    }
}
