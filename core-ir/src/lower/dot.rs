//! `dot` on the CUDA cores: each thread computes the accumulator elements it holds, one
//! multiply-add per `k`, from the operands staged in shared memory.
//!
//! This is the path every device can take (Triton's FMA dot): the operands go to shared
//! memory in whatever layout they have, then a loop over `k` reads `a[m, k]` and `b[k, n]`
//! for each held `(m, n)` and accumulates with `fma` (floats) or a wrapping multiply-add
//! (integers). Products of f16/bf16 operands are exact in f32, and `k` runs in order, so
//! the result is the interpreter's bit for bit. On NVIDIA's tensor cores `mma.rs` lowers
//! the same op where it can, and `coop.rs` on Vulkan's cooperative matrices.
//!
//! A `dot` whose input precision is tf32 runs here where the tensor cores cannot take it (a
//! device without them, a tile they cannot tile): its operands are rounded to tf32 as they
//! are staged, exactly as the interpreter rounds them, and multiplied as above. Products of
//! tf32 values are exact in f32, so every backend computes the interpreter's products and,
//! here, its sums too; the alternative, ignoring the precision where there are no tensor
//! cores, would give results that depend on the device beyond the order of the sums.
//! A tf32x3 `dot` here is the IEEE one (`DotPrecision::Tf32x3`: the split only serves the
//! tensor cores, and full f32 products are more accurate than it).

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, CmpOp, DotPrecision, Inst, Literal, Op, TF32_HALF_ULP, TF32_MASK};
use crate::thread::{Expr, Memory, Reg, SharedAlloc, Stmt};
use crate::types::{Elem, ScalarType};

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
        let [m, k] = ta.shape.dims()[..] else {
            return Err(self.unsupported(inst, format!("operands must be 2-D, got {ta}")));
        };
        let floats = acc_ty.is_float();

        // Stage both operands in shared memory of their own, row-major (B's rows `pitch`
        // elements apart, see `stage_b`).
        let a_buf = self.stage(a, in_ty, m * k, tf32)?;
        let (b_buf, pitch) = self.stage_b(b, in_ty, tf32)?;
        self.emit(Stmt::Barrier);

        // The accumulator, in the result's layout, copied so that `acc` itself is untouched.
        let layout = self.default_layout(tc.shape);
        let init = self.ensure(acc, layout)?;
        let out: Vec<Reg> = init.iter().map(|&r| self.set(acc_ty, Expr::Copy(r))).collect();
        let map = layout.map(tc.shape);
        let (row_dim, col_dim) = (layout.blocked_dim(0), layout.blocked_dim(1));
        let k_reg = self.konst(ScalarType::I32, Literal::Int(k as i64));
        let n_reg = self.konst(ScalarType::I32, Literal::Int(pitch as i64));
        let rows: Vec<Reg> = (0..out.len())
            .map(|i| {
                let row = self.coord(&map, i, row_dim);
                self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Mul, row, k_reg))
            })
            .collect();
        let cols: Vec<Reg> = (0..out.len()).map(|i| self.coord(&map, i, col_dim)).collect();

        // for kk in 0..k { out[i] += a[row_i * k + kk] * b[kk * n + col_i] }
        self.counted_loop(k_reg, |l, kk| {
            let b_row = l.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, kk, n_reg));
            for (i, &o) in out.iter().enumerate() {
                let ia = l.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, rows[i], kk));
                let ib = l.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, b_row, cols[i]));
                let x = l.read_shared(a_buf, in_ty, ia, acc_ty);
                let y = l.read_shared(b_buf, in_ty, ib, acc_ty);
                let expr = if floats {
                    Expr::Fma(x, y, o)
                } else {
                    let p = l.set(acc_ty, Expr::Binary(BinaryOp::Mul, x, y));
                    Expr::Binary(BinaryOp::Add, o, p)
                };
                l.emit(Stmt::Set { dst: o, expr });
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

    /// A shared buffer of its own holding 2-D operand `b` row-major, each element once, by
    /// its owner; and the distance of its rows. The loop reads B along its rows (lanes at
    /// consecutive columns); a column-major B, whose layout runs down the columns (K), is
    /// written a column at a time, so its rows are padded by 4 bytes to put the rows that
    /// one store instruction touches in different banks (unpadded rows of 64 or 128 bytes
    /// share them: a column-major B ran 25% slower than a row-major one through Vulkan).
    fn stage_b(&mut self, b: crate::ir::ValueId, ty: ScalarType, tf32: bool) -> Result<(u32, u32), LowerError> {
        let lval = self.operand_lval(b, tf32)?;
        let shape = self.k.ty(b).shape;
        let [k, n] = [shape.dims()[0], shape.dims()[1]];
        let layout = lval.layout;
        let down_columns = layout.sliced == 0 && layout.blocked.order[0] as usize == layout.blocked_dim(0);
        let pitch = if down_columns {
            n + (4 / ty.size_bytes() as u32).max(1)
        } else {
            n
        };
        let buf = self.operand_alloc(SharedAlloc::transient(ty, k * pitch));
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

    /// A shared buffer of its own holding `v` (`len` elements of `ty`, rounded to tf32 when
    /// `tf32`) row-major; each element is stored once, by its owner.
    fn stage(&mut self, v: crate::ir::ValueId, ty: ScalarType, len: u32, tf32: bool) -> Result<u32, LowerError> {
        let lval = self.operand_lval(v, tf32)?;
        let buf = self.operand_alloc(SharedAlloc::transient(ty, len));
        self.store_shared(&lval, self.k.ty(v).shape, buf, None);
        Ok(buf)
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

    /// Element `index` of shared buffer `buf` (of `ty`), converted to `to`.
    fn read_shared(&mut self, buf: u32, ty: ScalarType, index: Reg, to: ScalarType) -> Reg {
        let r = self.new_reg(ty);
        self.emit(Stmt::Load {
            dsts: vec![r],
            mem: Memory::Shared { alloc: buf },
            index,
            pred: None,
            cache: CacheModifier::Default,
        });
        if ty == to {
            r
        } else {
            self.set(to, Expr::Cast(r))
        }
    }
}
