//! `dot` on NVIDIA's tensor cores: `mma.sync.m16n8k16` (`Stmt::Mma`) where the target has
//! it, the inputs are f16 or bf16 and the accumulator f32, and the tile is whole m16n8k16
//! steps for the program's warps.
//!
//! The accumulator lives in the `mma` result layout, which is a blocked layout: a thread
//! holds 2 adjacent columns (`size_per_thread [1, 2]`), the lanes of a warp cover 8 rows by
//! 4 pairs (`threads_per_warp [8, 4]`), warps go along N first. Lane `l` of a warp then
//! holds, for each pair of row repetitions `2q, 2q + 1` and each column repetition `p`, the
//! four elements `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)` of one m16n8 tile
//! (`g = l / 4`, `t = l % 4`, rows counted within the tile): exactly an `mma` fragment. So
//! element-wise epilogues, reductions and stores work on it unchanged, and a value that must
//! change layout goes through the swizzled exchange like any other.
//!
//! The operands are staged in shared memory contiguous along the axis their own layout
//! runs along (so along K for a column-major B), each line padded by 16 bytes, in 16-byte
//! stores; each warp reads its fragments from there: pairs of adjacent `k` as 2-element
//! loads where the storage runs along K, single elements otherwise. The padding moves each
//! line 4 banks along, so that the 8 lines one fragment read touches fall in different
//! banks (lines of 64 or 128 bytes otherwise share them).
//! `ldmatrix`, swizzled operand layouts and a `cp.async` pipeline are the next steps
//! (docs/performance.md measures what this form reaches).

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, Inst, Literal, Op};
use crate::layout::{Blocked, Layout};
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::{Elem, ScalarType, Shape};

/// The shape of one `dot` on the tensor cores.
struct MmaPlan {
    m: u32,
    n: u32,
    k: u32,
    input: ScalarType,
    layout: Layout,
}

impl Lowerer<'_> {
    /// How `dot` `inst` runs on the tensor cores, or `None` when it cannot (then it runs on
    /// the CUDA cores).
    fn mma_plan(&self, inst: &Inst) -> Option<MmaPlan> {
        // (The shared memory the operands need is checked with the kernel's total.)
        let Op::Dot { a, b, acc } = inst.op else { return None };
        let (ta, tb, tc) = (self.k.ty(a), self.k.ty(b), self.k.ty(acc));
        let (Elem::Scalar(input), Elem::Scalar(acc_ty)) = (ta.elem, tc.elem) else {
            return None;
        };
        if !self.target.mma_sync
            || self.target.warp_size != 32
            || !matches!(input, ScalarType::F16 | ScalarType::BF16)
            || acc_ty != ScalarType::F32
        {
            return None;
        }
        let ([m, k], n) = (ta.shape.dims().try_into().ok()?, tb.shape.dims()[1]);
        let warps = self.target.num_warps;
        let wn = warps.min(n / 8).max(1);
        let wm = warps / wn;
        if m % (16 * wm) != 0 || n % (8 * wn) != 0 || k % 16 != 0 || wm * wn != warps {
            return None;
        }
        let layout = Layout::blocked(Blocked {
            rank: 2,
            size_per_thread: [1, 2, 1],
            threads_per_warp: [8, 4, 1],
            warps_per_cta: [wm, wn, 1],
            order: [1, 0, 0],
        });
        Some(MmaPlan { m, n, k, input, layout })
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
        let Op::Dot { a, b, acc } = inst.op else {
            return Err(self.internal("not a dot"));
        };
        let MmaPlan { m, n, k, input, layout } = plan;
        let i32t = ScalarType::I32;

        // Each operand stored along its own contiguous axis, rows padded (module comment).
        let (a_buf, sa) = self.stage_operand(a, input)?;
        let (b_buf, sb) = self.stage_operand(b, input)?;
        self.emit(Stmt::Barrier);

        // The accumulator, copied so that `acc` itself is untouched.
        let shape = Shape::new(&[m, n]).expect("the dot's result shape");
        let init = self.ensure(acc, layout)?;
        let out: Vec<Reg> = init.iter().map(|&r| self.set(ScalarType::F32, Expr::Copy(r))).collect();
        let map = layout.map(shape);
        let reg = |jr: u32, jc: u32| map.join([jr, jc, 0]);
        let (mtiles, ntiles) = (map.count[0] / 2, map.count[1] / 2);

        // Per thread: `2t` and `g`, the rows of each m16 tile, the B column of each n8 tile.
        let (_, lane, _) = self.thread_ids();
        let (three, one, two) = (self.i32c(3), self.i32c(1), self.i32c(2));
        let t = self.pset(i32t, Expr::Binary(BinaryOp::And, lane, three));
        let t2 = self.pset(i32t, Expr::Binary(BinaryOp::Shl, t, one));
        let g = self.pset(i32t, Expr::Binary(BinaryOp::Shr, lane, two));
        // `x * s0 + y * s1` in the prologue.
        let at = |l: &mut Self, x: Reg, y: Reg, [s0, s1]: [u32; 2]| -> Reg {
            let (c0, c1) = (l.i32c(s0 as i64), l.i32c(s1 as i64));
            let x = l.pset(i32t, Expr::Binary(BinaryOp::Mul, x, c0));
            let y = l.pset(i32t, Expr::Binary(BinaryOp::Mul, y, c1));
            l.pset(i32t, Expr::Binary(BinaryOp::Add, x, y))
        };
        // A: rows `g` and `g + 8` of each m16 tile (the rows of its accumulator registers),
        // column `2t`.
        let mut a_rows = Vec::new();
        for q in 0..mtiles {
            let r0 = self.coord(&map, reg(2 * q, 0), 0);
            let r1 = self.coord(&map, reg(2 * q + 1, 0), 0);
            a_rows.push([at(self, r0, t2, sa), at(self, r1, t2, sa)]);
        }
        // B: row `2t`, column `n0 + g` where `n0 = col(2t) - 2t` starts the n8 tile.
        let mut b_cols = Vec::new();
        for p in 0..ntiles {
            let col = self.coord(&map, reg(0, 2 * p), 1);
            let n0 = self.pset(i32t, Expr::Binary(BinaryOp::Sub, col, t2));
            let c = self.pset(i32t, Expr::Binary(BinaryOp::Add, n0, g));
            b_cols.push(at(self, t2, c, sb));
        }

        // Per k-step: B's fragments of the warp's columns, then A's one m16 tile at a time,
        // each used at once by its row of `mma`s, so that only one A fragment is live.
        for kk in 0..k / 16 {
            let mut b_frags = Vec::with_capacity(ntiles as usize);
            for &base in &b_cols {
                let mut frag = Vec::with_capacity(4);
                for dk in [0, 8] {
                    let index = self.offset(base, ((kk * 16 + dk) * sb[0]) as i64);
                    frag.extend(self.read_pair(b_buf, input, index, sb[0]));
                }
                b_frags.push(frag);
            }
            for (q, rows) in a_rows.iter().enumerate() {
                let mut af = Vec::with_capacity(8);
                // (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..).
                for (hk, h) in [(0, 0), (0, 1), (8, 0), (8, 1)] {
                    let index = self.offset(rows[h], ((kk * 16 + hk) * sa[1]) as i64);
                    af.extend(self.read_pair(a_buf, input, index, sa[1]));
                }
                let a: [Reg; 8] = af.try_into().expect("8 A registers");
                for (p, bf) in b_frags.iter().enumerate() {
                    let (q, p) = (q as u32, p as u32);
                    let d = [
                        out[reg(2 * q, 2 * p)],
                        out[reg(2 * q, 2 * p + 1)],
                        out[reg(2 * q + 1, 2 * p)],
                        out[reg(2 * q + 1, 2 * p + 1)],
                    ];
                    let b: [Reg; 4] = bf.clone().try_into().expect("4 B registers");
                    self.emit(Stmt::Mma { d, a, b, c: d });
                }
            }
        }
        // The buffers may be written again (the next iteration of an enclosing loop).
        self.emit(Stmt::Barrier);
        Ok(Some(LVal {
            layout,
            regs: out,
            ptr: None,
        }))
    }

    /// A shared buffer of its own holding 2-D operand `v` contiguous along the axis its
    /// layout runs along (so that each thread stores its run as one vector of up to 16
    /// bytes), the other axis's lines padded by 16 bytes; and the element strides of the
    /// operand's two dimensions there. Each element is stored once, by its owner.
    fn stage_operand(&mut self, v: crate::ir::ValueId, ty: ScalarType) -> Result<(u32, [u32; 2]), LowerError> {
        let lval = self.lval(v)?;
        let shape = self.k.ty(v).shape;
        let [rows, cols] = [shape.dims()[0], shape.dims()[1]];
        let layout = lval.layout;
        let map = layout.map(shape);
        let blocked = [layout.blocked_dim(0), layout.blocked_dim(1)];
        let fastest = if layout.sliced == 0 && layout.blocked.order[0] as usize == blocked[0] {
            0
        } else {
            1
        };
        let pad = 16 / ty.size_bytes() as u32;
        let (strides, len) = if fastest == 1 {
            ([cols + pad, 1], rows * (cols + pad))
        } else {
            ([1, rows + pad], cols * (rows + pad))
        };
        let buf = self.shared.len() as u32;
        self.shared.push(crate::thread::SharedAlloc { elem: ty, len });
        let mut placed = [0i64; crate::types::MAX_RANK];
        placed[blocked[0]] = strides[0] as i64;
        placed[blocked[1]] = strides[1] as i64;
        let index = self.linear(&map, placed);
        let own = self.owner(&map);
        let mut w = 1u32;
        if layout.sliced == 0 {
            let run = map.run[blocked[fastest]];
            let pitch = strides[1 - fastest];
            w = run.min(16 / ty.size_bytes() as u32).max(1);
            while run % w != 0 || pitch % w != 0 {
                w /= 2;
            }
        }
        for g in (0..lval.regs.len()).step_by(w as usize) {
            self.emit(Stmt::Store {
                values: lval.regs[g..g + w as usize].to_vec(),
                mem: Memory::Shared { alloc: buf },
                index: index[g],
                pred: own,
            });
        }
        Ok((buf, strides))
    }

    /// `base + delta` (in the body; `base` itself when `delta` is 0).
    fn offset(&mut self, base: Reg, delta: i64) -> Reg {
        if delta == 0 {
            return base;
        }
        let d = self.konst(ScalarType::I32, Literal::Int(delta));
        self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, base, d))
    }

    /// Two elements of shared buffer `buf`, at `index` and `index + stride`: one 2-element
    /// access when they are adjacent, two otherwise.
    fn read_pair(&mut self, buf: u32, ty: ScalarType, index: Reg, stride: u32) -> Vec<Reg> {
        let load = |l: &mut Self, index: Reg, width: usize| -> Vec<Reg> {
            let dsts: Vec<Reg> = (0..width).map(|_| l.new_reg(ty)).collect();
            l.emit(Stmt::Load {
                dsts: dsts.clone(),
                mem: Memory::Shared { alloc: buf },
                index,
                pred: None,
                cache: CacheModifier::Default,
            });
            dsts
        };
        if stride == 1 {
            return load(self, index, 2);
        }
        let second = self.offset(index, stride as i64);
        let mut out = load(self, index, 1);
        out.extend(load(self, second, 1));
        out
    }
}
