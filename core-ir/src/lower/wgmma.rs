//! `dot` on Hopper's warpgroup MMA (`wgmma.mma_async`, `Stmt::Wgmma`) where the target has
//! it: f16 or bf16 inputs, an f32 accumulator, warps in whole warpgroups of 4 and a tile of
//! whole m64 steps per warpgroup. The operands are read from shared memory through matrix
//! descriptors, so no thread loads fragments: the instruction that `mma.sync` needs most of
//! the issue slots for (`ldmatrix`) is gone, and the MMAs of a warpgroup run while its
//! threads issue the next copies.
//!
//! The accumulator is in the warpgroup MMA's own layout: `mma.sync`'s blocked layout with
//! every warp along M (`warps_per_cta [num_warps, 1]`, see `mma.rs`), whose lane `l` holds
//! the columns `2 (l % 4)`, `+1` of each n8 block as a wgmma fragment does, with its rows
//! permuted ([`WarpgroupRows`], `Layout::rows`) so that warp `w % 4` of warpgroup `w / 4`
//! holds rows `16 (w % 4) .. + 16` of each of its warpgroup's m64 steps. So both operands are
//! stored in shared memory in order (a tile TMA can fill in one box), and the epilogue,
//! reductions and stores see an ordinary layout whose coordinates say where each register
//! is (a store converts it once, as it would the blocked one).
//!
//! Tiles are [`SwizzledTile::for_wgmma`]: A stored K-major (rows along K, whatever its
//! layout in registers or memory; a column-major A is staged from registers), B K-major or
//! N-major as it comes (`imm-trans-b`), rows of at most 128 bytes swizzled as the
//! descriptor's mode, buffers on 1024-byte boundaries.
//!
//! fp8 operands (E4M3, E5M2: `k32` MMAs at twice f16's rate) are read K-major only, as the
//! instruction takes them: B too (a B whose memory runs along N is staged from registers
//! into a K-major tile), and A from shared memory. A `dot` of fp8 blocks that cannot run
//! here multiplies their f16 conversions (`fp8_dot.rs`).
//!
//! fp8 MMAs add into an accumulator narrower than f32. Where the `dot` limits how much of K
//! they may add there (`DotOptions::max_num_imprecise_acc`, [`promotion_steps`]), the MMAs
//! of each run of that many K steps write a second set of registers, from zero, which are
//! then waited for and added into the f32 accumulator: Triton's partial accumulator.

use super::mma::{Operand, SharedOperand};
use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, Inst, Kernel, Op, ValueId};
use crate::layout::{Layout, RegisterMap, SwizzledTile, WarpgroupRows};
use crate::target::Target;
use crate::thread::{Expr, MatrixMajor, Reg, SmemMatrix, Stmt, WgmmaA};
use crate::types::{Elem, ScalarType, Shape};

/// How one `dot` splits over warpgroups.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WgmmaShape {
    m: u32,
    n: u32,
    k: u32,
    warps: u32,
}

impl WgmmaShape {
    fn warpgroups(&self) -> u32 {
        self.warps / 4
    }
    /// Rows of the block each warpgroup owns.
    fn warpgroup_rows(&self) -> u32 {
        self.m / self.warpgroups()
    }
    /// The accumulator's row order (see the module comment).
    pub(crate) fn rows(&self) -> WarpgroupRows {
        WarpgroupRows {
            warps: self.warps,
            warpgroup_rows: self.warpgroup_rows(),
        }
    }
    /// The shared tile of operand `which` of dims `dims` whose memory layout is contiguous
    /// along `contiguous` (B only: A is always stored K-major, and fp8 B too): the tile and
    /// the dimension its rows run along.
    pub(crate) fn tile(&self, which: Operand, contiguous: usize, elem_bytes: u32) -> Option<(SwizzledTile, usize)> {
        match which {
            Operand::A => Some((SwizzledTile::for_wgmma(self.m, self.k, elem_bytes)?, 1)),
            Operand::B if contiguous == 1 && elem_bytes > 1 => {
                Some((SwizzledTile::for_wgmma(self.k, self.n, elem_bytes)?, 1))
            }
            Operand::B => Some((SwizzledTile::for_wgmma(self.n, self.k, elem_bytes)?, 0)),
        }
    }
}

impl Lowerer<'_> {
    /// How `dot` `inst` runs on warpgroup MMAs, or `None` when it does not.
    pub(crate) fn wgmma_shape(&self, inst: &Inst) -> Option<WgmmaShape> {
        wgmma_shape_of(self.k, self.target, inst)
    }

    /// How many K steps of `dot` `inst` its fp8 MMAs add before their sum is added into the
    /// f32 accumulator ([`promotion_steps`]), where it runs on warpgroup MMAs.
    pub(crate) fn wgmma_promotion(&self, inst: &Inst) -> Option<u32> {
        promotion_steps(self.k, inst, &self.wgmma_shape(inst)?)
    }

    /// `dot` on warpgroup MMAs, or `None` when it does not run there.
    pub(crate) fn dot_wgmma(&mut self, inst: &Inst) -> Result<Option<LVal>, LowerError> {
        let Some(shape) = self.wgmma_shape(inst) else {
            return Ok(None);
        };
        let Some(plan) = self.mma_plan(inst) else {
            return Err(self.internal("a wgmma dot without an mma layout"));
        };
        let Op::Dot { a, b, acc, .. } = inst.op else {
            return Err(self.internal("not a dot"));
        };
        let input = plan.input;
        let layout = plan.layout;
        // Left in flight across the loop's back edge (`Lowerer::wgmma_in_flight`), an operand
        // stored here alternates between two tiles: the next iteration stores into the one
        // these MMAs do not read.
        let in_flight_here = self
            .wgmma_in_flight
            .is_some_and(|(result, _)| inst.results.first() == Some(&result));
        let phase = in_flight_here.then(|| self.staging_phase(inst.results[0]));
        // (fp8's A fragments pack four values a register: A is read from shared memory.)
        let a_regs = self.register_a(a, layout, shape).filter(|_| !input.is_fp8());
        let (sa, a_here) = match a_regs {
            Some(_) => (None, false),
            None => {
                let (s, here) = self.shared_operand_in_turn(inst, a, Operand::A, input, phase)?;
                (Some(s), here)
            }
        };
        let (sb, b_here) = self.shared_operand_in_turn(inst, b, Operand::B, plan.operand_type(Operand::B), phase)?;
        if a_here || b_here {
            self.emit(Stmt::FenceProxyAsync);
            self.emit(Stmt::Barrier);
        }

        let (m, n) = (shape.m, shape.n);
        let map = layout.map(Shape::new(&[m, n]).expect("the dot's result shape"));
        let reps = shape.warpgroup_rows() / 64;
        if map.count[0] != 2 * reps || map.count[1] != n / 4 {
            return Err(self.internal("the wgmma accumulator does not match its blocked layout"));
        }
        // A zero accumulator is not set: the first k16 step overwrites it (`scale-d` off), as
        // Triton's first wgmma does. (ptxas folded the zeroing moves before, so it measured no
        // faster; it keeps attention's `Q Kᵀ` from asking for them each step. It may give -0
        // where adding to +0 gives +0.)
        let zero_acc = self.is_zero(acc)
            && self
                .wgmma_in_flight
                .is_none_or(|(r, _)| inst.results.first() != Some(&r));
        let init = if zero_acc {
            (0..map.len).map(|_| self.new_reg(ScalarType::F32)).collect()
        } else {
            self.ensure(acc, layout)?
        };
        // In flight across the loop's back edge (`Lowerer::wgmma_in_flight`, `pipeline/in_flight.rs`), the MMAs
        // update the carried registers in place (the loop's yield then copies nothing; an
        // accumulator computed from them is moved in first); otherwise `acc` stays
        // untouched. (A dot that promotes its sums waits for its own MMAs: `in_flight.rs`
        // never leaves one in flight.)
        let carried = match self.wgmma_in_flight {
            Some((result, carried)) if inst.results.first() == Some(&result) => {
                Some(self.lval(carried)?.regs).filter(|regs| regs.len() == init.len())
            }
            _ => None,
        };
        let in_flight = carried.is_some();
        let out: Vec<Reg> = match carried {
            Some(regs) => {
                for (&dst, &src) in regs.iter().zip(&init) {
                    if dst != src {
                        self.emit(Stmt::Set {
                            dst,
                            expr: Expr::Copy(src),
                        });
                    }
                }
                regs
            }
            None if zero_acc => init,
            None => init.iter().map(|&r| self.set(ScalarType::F32, Expr::Copy(r))).collect(),
        };

        // Where each warpgroup's rows of A start (in shared memory).
        let i32t = ScalarType::I32;
        let a_base = match sa {
            Some(sa) => {
                let wg = self.warpgroup_id();
                let a_rows = self.i32c((shape.warpgroup_rows() * sa.tile.block_cols) as i64);
                let a_wg = self.pset(i32t, Expr::Binary(BinaryOp::Mul, wg, a_rows));
                Some(match sa.stage {
                    Some(s) => self.set(i32t, Expr::Binary(BinaryOp::Add, a_wg, s)),
                    None => a_wg,
                })
            }
            None => None,
        };
        let eb = input.size_bytes() as u32;
        // One MMA reads 32 bytes of K: 16 f16 or bf16 values, 32 fp8 ones.
        let k_step = 32 / eb;

        // The partial accumulator of a promoting dot, and whether step `ks` writes it (the
        // first run of a dot on a zero accumulator writes the accumulator itself).
        let promote = promotion_steps(self.k, inst, &shape);
        let into_partial = |ks: u32| promote.is_some_and(|p| !(zero_acc && ks < p));
        let partial: Vec<Reg> = match promote {
            Some(_) => (0..out.len()).map(|_| self.new_reg(ScalarType::F32)).collect(),
            None => Vec::new(),
        };
        let steps = shape.k / k_step;
        let mut issued = false;
        self.emit(Stmt::WgmmaFence);
        for ks in 0..steps {
            let kk = ks * k_step;
            let b_matrix = {
                let t = sb.tile;
                let row_bytes = t.block_row_bytes(eb);
                let (offset, major, lbo) = if sb.contiguous == 1 {
                    // N-major: K runs down the rows of every column block.
                    (kk * t.block_cols, MatrixMajor::MN, t.rows * row_bytes)
                } else {
                    let (block, within) = (kk / t.block_cols, kk % t.block_cols);
                    (block * t.rows * t.block_cols + within, MatrixMajor::K, 16)
                };
                SmemMatrix {
                    alloc: sb.alloc,
                    index: self.base_reg(sb.stage),
                    offset,
                    major,
                    swizzle: row_bytes,
                    lbo,
                    sbo: 8 * row_bytes,
                }
            };
            for i in 0..reps {
                let a_operand = match (&a_regs, sa) {
                    // Columns `kk..kk + 16` of row repetitions `2i` and `2i + 1`, in the
                    // order `WgmmaA::Registers` lists them.
                    (Some((regs, a_map)), _) => {
                        WgmmaA::Registers(std::array::from_fn(|x| regs[fragment(a_map, i, kk / 2 + x as u32)]))
                    }
                    (None, Some(sa)) => {
                        let t = sa.tile;
                        let (block, within) = (kk / t.block_cols, kk % t.block_cols);
                        let offset = block * t.rows * t.block_cols + 64 * i * t.block_cols + within;
                        let row_bytes = t.block_row_bytes(eb);
                        WgmmaA::Shared(SmemMatrix {
                            alloc: sa.alloc,
                            index: self.base_reg(a_base),
                            offset,
                            major: MatrixMajor::K,
                            swizzle: row_bytes,
                            lbo: 16,
                            sbo: 8 * row_bytes,
                        })
                    }
                    (None, None) => return Err(self.internal("a wgmma A operand nowhere")),
                };
                let (dst, accumulate) = match promote {
                    Some(p) if into_partial(ks) => (&partial, ks % p > 0),
                    _ => (&out, ks > 0 || !zero_acc),
                };
                let regs: Vec<Reg> = (0..n / 2).map(|x| dst[fragment(&map, i, x)]).collect();
                self.emit(Stmt::Wgmma {
                    acc: regs,
                    a: a_operand,
                    b: b_matrix,
                    n,
                    accumulate,
                });
            }
            issued = true;
            let Some(p) = promote else { continue };
            let run_ends = (ks + 1) % p == 0 || ks + 1 == steps;
            if run_ends && into_partial(ks) {
                // The run's sum, added in f32 once its MMAs are done; the MMAs after it
                // write the partial registers again, so they wait for the additions.
                self.emit(Stmt::WgmmaCommit);
                self.emit(Stmt::WgmmaWait { pending: 0 });
                for (&o, &q) in out.iter().zip(&partial) {
                    self.emit(Stmt::Set {
                        dst: o,
                        expr: Expr::Binary(BinaryOp::Add, o, q),
                    });
                }
                issued = false;
                if ks + 1 < steps {
                    self.emit(Stmt::WgmmaFence);
                }
            }
        }
        if issued {
            self.emit(Stmt::WgmmaCommit);
            self.emit(Stmt::WgmmaWait {
                pending: u32::from(in_flight),
            });
        }
        if a_here || b_here {
            // The buffers may be written again (the next iteration of an enclosing loop).
            // Left in flight, the next iteration writes the other tiles, which the MMAs
            // waited for just above (`wait_group 1`) read: this barrier tells every
            // warpgroup that all of them are done with those.
            self.emit(Stmt::Barrier);
            if let Some(p) = phase {
                let one = self.i32c(1);
                self.emit(Stmt::Set {
                    dst: p,
                    expr: Expr::Binary(BinaryOp::Xor, p, one),
                });
            }
        }
        Ok(Some(LVal {
            layout,
            regs: out,
            ptr: None,
        }))
    }

    /// Where A of a `dot` on warpgroup MMAs can be read from registers: when its value is
    /// already in the accumulator layout (the result of another such `dot`, converted
    /// element-wise, as attention's probabilities `P`), whose registers hold exactly the
    /// positions `wgmma` reads A from (`WgmmaA::Registers`); then it need not go through
    /// shared memory. Its registers and their map.
    pub(super) fn register_a(&self, a: ValueId, layout: Layout, shape: WgmmaShape) -> Option<(Vec<Reg>, RegisterMap)> {
        let lval = self.values[a.index()].as_ref()?;
        if lval.layout != layout || self.pipelined_operand(a).is_some() {
            return None;
        }
        let map = layout.map(self.k.ty(a).shape);
        let reps = shape.warpgroup_rows() / 64;
        (map.count[0] == 2 * reps && map.count[1] == shape.k / 4 && lval.regs.len() == map.len)
            .then(|| (lval.regs.clone(), map))
    }

    /// The register of an operand's stage base, or 0 for a buffer of one stage.
    /// The register that says which of its two tiles the `dot` whose result is `result`
    /// stores its operands into this time (see [`Lowerer::shared_operand_in_turn`]): 0 at
    /// the start of the kernel, flipped by the `dot` each time it runs; one for every
    /// lowering of the `dot` (an unrolled body's copies alternate with each other).
    fn staging_phase(&mut self, result: ValueId) -> Reg {
        if let Some(&p) = self.staging_phases.get(&result) {
            return p;
        }
        let zero = self.i32c(0);
        let p = self.new_reg(ScalarType::I32);
        self.prologue.push(Stmt::Set {
            dst: p,
            expr: Expr::Copy(zero),
        });
        self.staging_phases.insert(result, p);
        p
    }

    fn base_reg(&mut self, base: Option<Reg>) -> Reg {
        match base {
            Some(b) => b,
            None => self.i32c(0),
        }
    }
}

/// How `dot` `inst` of `k` runs on warpgroup MMAs on `target`, or `None` when it does not:
/// f16, bf16 or fp8 operands of one type, an f32 accumulator, whole warpgroups, a tile of
/// whole m64 steps per warpgroup, K a multiple of what one MMA reads.
pub(crate) fn wgmma_shape_of(k: &Kernel, target: &Target, inst: &Inst) -> Option<WgmmaShape> {
    let Op::Dot { a, b, acc, .. } = inst.op else {
        return None;
    };
    // (The accumulator layout is `mma.sync`'s, which `mma_plan` gives: every GPU with
    // `wgmma` has `mma.sync`.)
    if !target.wgmma || !target.mma_sync || target.warp_size != 32 {
        return None;
    }
    let (ta, tb, tc) = (k.ty(a), k.ty(b), k.ty(acc));
    let (Elem::Scalar(input), Elem::Scalar(ScalarType::F32)) = (ta.elem, tc.elem) else {
        return None;
    };
    // (fp8 only in the two formats the MMAs take; `fp8_dot.rs` widens the others.)
    if !matches!(input, ScalarType::F16 | ScalarType::BF16) && !input.is_ocp_fp8() {
        return None;
    }
    // (Typing holds B to A's type, but for the fp8 formats, which mix.)
    if tb.scalar_type() != Some(input) && !(input.is_ocp_fp8() && tb.scalar_type().is_some_and(ScalarType::is_ocp_fp8))
    {
        return None;
    }
    let eb = input.size_bytes() as u32;
    let ([m, kd], n) = (ta.shape.dims().try_into().ok()?, tb.shape.dims()[1]);
    let warps = target.num_warps;
    if warps % 4 != 0
        || !warps.is_power_of_two()
        || m % (16 * warps) != 0
        || n % 8 != 0
        || n > 256
        || kd % (32 / eb) != 0
    {
        return None;
    }
    let shape = WgmmaShape { m, n, k: kd, warps };
    // Both layouts of B must be possible, so that the choice does not depend on it (fp8's
    // B is K-major either way).
    shape.tile(Operand::A, 1, eb)?;
    shape.tile(Operand::B, 0, eb)?;
    shape.tile(Operand::B, 1, eb)?;
    Some(shape)
}

/// How many K steps (MMAs of 32 bytes of K) of `dot` `inst` Hopper's fp8 MMAs add in their
/// own accumulator before the sum is added into the f32 one, as Triton's partial
/// accumulator: where the operands are fp8 and `max_num_imprecise_acc` is at most the dot's
/// K, that many elements rounded up to whole MMAs (at least one); `None` where the MMAs add
/// the whole K (f16 and bf16 MMAs add in f32).
pub(crate) fn promotion_steps(k: &Kernel, inst: &Inst, shape: &WgmmaShape) -> Option<u32> {
    let Op::Dot {
        a,
        max_num_imprecise_acc: Some(limit),
        ..
    } = inst.op
    else {
        return None;
    };
    let input = k.ty(a).scalar_type()?;
    let k_step = 32 / input.size_bytes() as u32;
    (input.is_fp8() && limit <= shape.k).then(|| limit.div_ceil(k_step).max(1))
}

/// The operand tile for `dot` operand `which`: the wgmma one where the dot runs there, else
/// the `ldmatrix` one; and the dimension its rows run along.
pub(crate) fn operand_tile(
    wgmma: Option<WgmmaShape>,
    which: Operand,
    dims: [u32; 2],
    contiguous: usize,
    elem: ScalarType,
) -> Option<(SwizzledTile, usize)> {
    match wgmma {
        Some(s) => s.tile(which, contiguous, elem.size_bytes() as u32),
        None => Some((SharedOperand::tile_for(dims, contiguous, elem), contiguous)),
    }
}

/// The register of `map` (the blocked accumulator layout) that holds element `x` of m64 step
/// `i` of a thread's wgmma fragment: `acc[4j + 2h + e]`, row repetition `2i + h`, column
/// `2j + e`. An A operand in registers (`WgmmaA::Registers`) is the same fragment's 16
/// columns from `kk`: its elements `x` are `kk / 2 + 0..8`.
fn fragment(map: &RegisterMap, i: u32, x: u32) -> usize {
    let (j, h, e) = (x / 4, (x / 2) % 2, x % 2);
    map.join([2 * i + h, 2 * j + e, 0])
}
