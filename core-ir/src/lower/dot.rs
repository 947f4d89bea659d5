//! `dot` on the CUDA cores: each thread computes the accumulator elements it holds, one
//! multiply-add per `k`, from the operands staged in shared memory.
//!
//! This is the path every device can take (Triton's FMA dot). Both operands are staged
//! row-major in shared memory, and the loop over `k` takes up to [`UNROLL`] steps a turn:
//! each turn reads each row of A the thread holds once, as a vector of the turn's steps
//! along K, and each step reads each run of columns of B the thread holds once, as a vector
//! along N, then multiplies and adds for each register, with `fma` (floats) or a wrapping
//! multiply-add (integers). The accumulator stays in the default layout (runs along N,
//! lanes along N, so a warp's lanes read one address of A): on an H200 a layout of 4 x 4
//! runs a thread ran level with it through CUDA and 35% slower through Vulkan (whose
//! workgroup arrays are arrays of scalars), and needed the whole block converted through
//! shared memory before the store, which 48 KiB could not hold at 128 x 256
//! (docs/performance.md, "The FMA `dot`: each operand value read once"). Products of
//! f16/bf16 operands are exact in f32, and `k` runs in order, so the result is the
//! interpreter's bit for bit. On NVIDIA's tensor cores `mma.rs` lowers the same op where
//! it can, and `coop.rs` on Vulkan's cooperative matrices.
//!
//! A `dot` whose input precision is tf32 runs here where the tensor cores cannot take it (a
//! device without them, a tile they cannot tile): its operands are rounded to tf32 as they
//! are staged, exactly as the interpreter rounds them, and multiplied as above. Products of
//! tf32 values are exact in f32, so every backend computes the interpreter's products and,
//! here, its sums too; the alternative, ignoring the precision where there are no tensor
//! cores, would give results that depend on the device beyond the order of the sums.
//! A tf32x3 `dot` here is the IEEE one (`DotPrecision::Tf32x3`: the split only serves the
//! tensor cores, and full f32 products are more accurate than it).

use std::collections::HashMap;

use super::mma::fastest_dim;
use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, DotPrecision, Inst, Literal, Op, TF32_HALF_ULP, TF32_MASK};
use crate::layout::RegisterMap;
use crate::thread::{Expr, Memory, Reg, SharedAlloc, Stmt, MAX_VECTOR};
use crate::types::{Elem, ScalarType};

/// Steps of `k` a turn of the `dot`'s loop takes, at most.
const UNROLL: u32 = 4;

/// The runs of `run` consecutive elements along dimension `d` (a divisor of the thread's
/// own runs) that a thread of `map` holds: each run's compile-time offset, and `start` of
/// the register at its first element.
fn distinct_runs(map: &RegisterMap, d: usize, run: u32, start: impl Fn(usize) -> Reg) -> Vec<(u32, Reg)> {
    let mut runs: Vec<(u32, Reg)> = Vec::new();
    for i in 0..map.len {
        let o = map.offsets(i)[d];
        if o % run == 0 && !runs.iter().any(|&(seen, _)| seen == o) {
            runs.push((o, start(i)));
        }
    }
    runs
}

impl Lowerer<'_> {
    pub(crate) fn dot(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        if let Some(on_warpgroups) = self.dot_wgmma(inst)? {
            return Ok(on_warpgroups);
        }
        if let Some(on_tensor_cores) = self.dot_mma(inst)? {
            return Ok(on_tensor_cores);
        }
        let Op::Dot {
            a, b, acc, precision, ..
        } = inst.op
        else {
            return Err(self.internal("not a dot"));
        };
        let tf32 = precision == DotPrecision::Tf32;
        let (ta, tc) = (self.k.ty(a), self.k.ty(acc));
        let (Elem::Scalar(in_ty), Elem::Scalar(acc_ty)) = (ta.elem, tc.elem) else {
            return Err(self.internal("dot of pointers"));
        };
        let [_, k] = ta.shape.dims()[..] else {
            return Err(self.unsupported(inst, format!("operands must be 2-D, got {ta}")));
        };
        let floats = acc_ty.is_float();

        // The accumulator, in the result's layout, copied so that `acc` itself is untouched.
        let layout = self.default_layout(tc.shape);
        let init = self.ensure(acc, layout)?;
        let out: Vec<Reg> = init.iter().map(|&r| self.set(acc_ty, Expr::Copy(r))).collect();
        let map = layout.map(tc.shape);

        // The loop over `k` takes `unroll` steps a turn (where K allows): A's rows are read
        // along K, a vector of the turn's steps a row, and the next steps' loads can issue
        // while this step's multiply-adds run.
        let unroll = (1..=UNROLL).rev().find(|u| k % u == 0).unwrap_or(1);

        // Stage both operands row-major in shared memory of their own (B's rows `b_pitch`
        // elements apart, see `stage_b`).
        let a_buf = self.operand_alloc(SharedAlloc::transient(in_ty, ta.shape.numel() as u32));
        let a_lval = self.operand_lval(a, tf32)?;
        self.store_shared(&a_lval, ta.shape, a_buf, None);
        let (b_buf, b_pitch) = self.stage_b(b, in_ty, tf32, map.run[1])?;
        self.emit(Stmt::Barrier);

        // Where each row of A the thread holds starts (`row * k`), and each run of columns
        // of B.
        let mut row_strides = [0i64; crate::types::MAX_RANK];
        row_strides[layout.blocked_dim(0)] = k as i64;
        let row_starts = self.linear(&map, row_strides);
        let rows = distinct_runs(&map, 0, 1, |i| row_starts[i]);
        let col_starts: Vec<Reg> = (0..map.len)
            .map(|i| self.coord(&map, i, layout.blocked_dim(1)))
            .collect();
        let cols = distinct_runs(&map, 1, map.run[1], |i| col_starts[i]);
        let steps = self.i32c((k / unroll) as i64);
        let unroll_reg = self.i32c(unroll as i64);
        let b_step = self.i32c((unroll * b_pitch) as i64);

        // for each turn of `unroll` steps from kk: a[row, kk..kk + unroll] for each row the
        // thread holds (one vector), then for each step b[kk + u, cols] for each run of its
        // columns (one vector) and out[i] += a[row_i, kk + u] * b[kk + u, col_i].
        self.counted_loop(steps, |l, step| {
            let kk = l.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, step, unroll_reg));
            let b_base = l.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, step, b_step));
            // (By row offset, then step.)
            let a_vals = l.read_runs((a_buf, in_ty), kk, &rows, unroll, acc_ty, |r, u| r * unroll + u);
            for u in 0..unroll {
                let b_at = l.offset(b_base, u * b_pitch);
                let b_vals = l.read_runs((b_buf, in_ty), b_at, &cols, map.run[1], acc_ty, |c, j| c + j);
                for (i, &o) in out.iter().enumerate() {
                    let [r, c, ..] = map.offsets(i);
                    let (x, y) = (a_vals[&(r * unroll + u)], b_vals[&c]);
                    let expr = if floats {
                        Expr::Fma(x, y, o)
                    } else {
                        let p = l.set(acc_ty, Expr::Binary(BinaryOp::Mul, x, y));
                        Expr::Binary(BinaryOp::Add, o, p)
                    };
                    l.emit(Stmt::Set { dst: o, expr });
                }
            }
            Ok(())
        })?;
        // The buffers may be written again (the next iteration of an enclosing loop).
        self.emit(Stmt::Barrier);
        Ok(LVal {
            layout,
            regs: out,
            ptr: None,
        })
    }

    /// `base + offset` (`base` itself where `offset` is 0).
    fn offset(&mut self, base: Reg, offset: u32) -> Reg {
        if offset == 0 {
            return base;
        }
        let o = self.i32c(offset as i64);
        self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, base, o))
    }

    /// Reads `runs` (of `run` elements each, from element `at` plus the run's start) of
    /// shared buffer `buf` (of `ty`), one vector load a run, converted to `to`: element `j`
    /// of the run at compile-time offset `o` under `key(o, j)`.
    fn read_runs(
        &mut self,
        (buf, ty): (u32, ScalarType),
        at: Reg,
        runs: &[(u32, Reg)],
        run: u32,
        to: ScalarType,
        key: impl Fn(u32, u32) -> u32,
    ) -> HashMap<u32, Reg> {
        let mut vals = HashMap::new();
        // (A run longer than a vector is read a vector at a time, each aligned as the run.)
        let width = run.min(MAX_VECTOR as u32);
        for &(offset, coord) in runs {
            let start = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, coord));
            for part in (0..run).step_by(width as usize) {
                let index = self.offset(start, part);
                let dsts = self.load_shared(buf, ty, index, width as usize);
                for (j, r) in dsts.into_iter().enumerate() {
                    let v = if ty == to { r } else { self.set(to, Expr::Cast(r)) };
                    vals.insert(key(offset, part + j as u32), v);
                }
            }
        }
        vals
    }

    /// A shared buffer of its own holding 2-D operand `b` (K x N) row-major, each element
    /// once, by its owner; and the distance of its rows, a multiple of `run` (the columns the
    /// loop reads as one vector). A column-major B, whose layout runs down the columns (K),
    /// is written a column at a time, so its rows are padded by `run` elements (or 4 bytes,
    /// whichever is more) to spread the rows one store instruction touches over the banks
    /// (unpadded rows of 64 or 128 bytes share them: a column-major B ran 25% slower than a
    /// row-major one through Vulkan).
    fn stage_b(
        &mut self,
        b: crate::ir::ValueId,
        ty: ScalarType,
        tf32: bool,
        run: u32,
    ) -> Result<(u32, u32), LowerError> {
        let lval = self.operand_lval(b, tf32)?;
        let shape = self.k.ty(b).shape;
        let [k, n] = [shape.dims()[0], shape.dims()[1]];
        let pad = run.max(4 / ty.size_bytes() as u32).next_multiple_of(run);
        let pitch = if fastest_dim(lval.layout) == 0 { n + pad } else { n };
        let buf = self.operand_alloc(SharedAlloc::transient(ty, k * pitch));
        let layout = lval.layout;
        let map = layout.map(shape);
        let mut strides = [0i64; crate::types::MAX_RANK];
        strides[layout.blocked_dim(0)] = pitch as i64;
        strides[layout.blocked_dim(1)] = 1;
        let index = self.linear(&map, strides);
        let own = self.owner(&map);
        for (i, &r) in lval.regs.iter().enumerate() {
            self.emit(Stmt::Store {
                values: vec![r],
                mem: Memory::Shared { alloc: buf },
                index: index[i],
                pred: own,
            });
        }
        Ok((buf, pitch))
    }

    /// Operand `v`'s registers, rounded to tf32 when `tf32`.
    fn operand_lval(&mut self, v: crate::ir::ValueId, tf32: bool) -> Result<LVal, LowerError> {
        let lval = self.lval(v)?;
        if !tf32 {
            return Ok(lval);
        }
        let regs = lval.regs.iter().map(|&r| self.round_to_tf32(r)).collect();
        Ok(LVal { regs, ..lval })
    }

    /// f32 register `x` rounded to tf32, as `ir::round_to_tf32` (PTX's `cvt.rna.tf32.f32`),
    /// in integer arithmetic every backend has: half a tf32 unit added to the bits, the
    /// dropped bits cleared; infinities and NaNs kept.
    fn round_to_tf32(&mut self, x: Reg) -> Reg {
        self.round_to_tf32_where_finite(x).0
    }

    /// f32 register `x` split for tf32x3 (`DotPrecision::Tf32x3`): its tf32 rounding, and
    /// the rest `x - big`, exact in f32 (0 where `x` is infinite or NaN, which `big` keeps:
    /// an infinity then gives infinite products, not the NaN of `inf - inf`, where the other
    /// operand's two parts have one sign).
    pub(crate) fn split_tf32(&mut self, x: Reg) -> (Reg, Reg) {
        let (big, finite) = self.round_to_tf32_where_finite(x);
        let rest = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Sub, x, big));
        let zero = self.konst(ScalarType::F32, Literal::Float(0.0));
        let small = self.set(ScalarType::F32, Expr::Select(finite, rest, zero));
        (big, small)
    }

    /// [`round_to_tf32`](Self::round_to_tf32)'s result, and whether `x` is finite.
    fn round_to_tf32_where_finite(&mut self, x: Reg) -> (Reg, Reg) {
        let u32t = ScalarType::U32;
        let bits = self.set(u32t, Expr::Bitcast(x));
        let half = self.konst(u32t, Literal::Int(TF32_HALF_ULP as i64));
        let mask = self.konst(u32t, Literal::Int(TF32_MASK as i64));
        let up = self.set(u32t, Expr::Binary(BinaryOp::Add, bits, half));
        let kept = self.set(u32t, Expr::Binary(BinaryOp::And, up, mask));
        let rounded = self.set(ScalarType::F32, Expr::Bitcast(kept));
        let exponent = self.konst(u32t, Literal::Int(0x7f80_0000));
        let e = self.set(u32t, Expr::Binary(BinaryOp::And, bits, exponent));
        let finite = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Ne, e, exponent));
        (self.set(ScalarType::F32, Expr::Select(finite, rounded, x)), finite)
    }
}
