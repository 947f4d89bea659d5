//! `gather` and `histogram` through shared memory: the source block is written there once
//! (each element by its owner), and every thread reads what its result elements need.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, CmpOp, Inst, Literal, Op, ValueId};
use crate::layout::Layout;
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::{ScalarType, MAX_RANK};
use std::collections::HashMap;

impl Lowerer<'_> {
    /// `gather`: the result takes the index's layout; each element reads the source
    /// element its index names (0 where the index is out of range).
    pub(crate) fn gather(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let Op::Gather { index, .. } = inst.op else {
            return Err(self.internal("not a gather"));
        };
        // In the layout its users hold their other operands in, where they agree on one
        // and the index can be recomputed there: then nothing is exchanged after it.
        if let Some(layout) = self.users_layout(inst.results[0]) {
            if let Some(index_regs) = self.recompute_operand(index, layout, 0)? {
                let regs = self.gather_into(inst, &index_regs, layout)?;
                return Ok(LVal {
                    layout,
                    regs,
                    ptr: None,
                });
            }
        }
        let idx_l = self.lval(index)?;
        let regs = self.gather_into(inst, &idx_l.regs, idx_l.layout)?;
        Ok(LVal {
            layout: idx_l.layout,
            regs,
            ptr: None,
        })
    }

    /// The one layout in which the element-wise users of `v` hold their other block
    /// operands, already lowered (`dot_scaled`'s product of the widened operand and its
    /// spread scale factors); `None` where a user is not element-wise, an operand is not
    /// lowered yet, or they differ.
    fn users_layout(&self, v: ValueId) -> Option<Layout> {
        let mut found: Option<Layout> = None;
        for (_, user) in self.k.insts.iter() {
            let operands = user.op.operands();
            if !operands.contains(&v) {
                continue;
            }
            if !matches!(
                user.op,
                Op::Binary { .. }
                    | Op::Compare { .. }
                    | Op::Select { .. }
                    | Op::Fma { .. }
                    | Op::BytePerm { .. }
                    | Op::Rounded { .. }
            ) {
                return None;
            }
            for o in operands.into_iter().filter(|&o| o != v) {
                if self.k.ty(o).shape.is_scalar() {
                    continue;
                }
                let layout = self.values[o.index()].as_ref()?.layout;
                if found.is_some_and(|f| f != layout) {
                    return None;
                }
                found = Some(layout);
            }
        }
        found
    }

    /// Gather `inst` again in another layout, where its index can be had there without
    /// moving it (`index_regs`, in `layout`: an index made of `arange`s, as `dot_scaled`'s
    /// spread of its scale factors is): the source goes through shared memory once more,
    /// which moves fewer elements than exchanging the result would, where the source is
    /// no larger than the result. `None` where it is larger.
    pub(crate) fn regather(
        &mut self,
        inst: &Inst,
        index_regs: &[Reg],
        layout: Layout,
    ) -> Result<Option<Vec<Reg>>, LowerError> {
        let Op::Gather { src, .. } = inst.op else {
            return Err(self.internal("not a gather"));
        };
        if self.k.ty(src).shape.numel() > self.k.ty(inst.results[0]).shape.numel() {
            return Ok(None);
        }
        self.gather_into(inst, index_regs, layout).map(Some)
    }

    /// The registers of gather `inst` in `layout`, from its index's registers there.
    fn gather_into(&mut self, inst: &Inst, index_regs: &[Reg], layout: Layout) -> Result<Vec<Reg>, LowerError> {
        let Op::Gather { src, index, axis } = inst.op else {
            return Err(self.internal("not a gather"));
        };
        let axis = axis as usize;
        let (i32t, boolt) = (ScalarType::I32, ScalarType::Bool);
        let src_l = self.lval(src)?;
        let src_shape = self.k.ty(src).shape;
        let elem = self.elem_reg_type(src, &src_l);
        let buf = self.shared_buffer(elem, src_shape.numel() as u32);
        self.store_shared(&src_l, src_shape, buf, None);
        self.emit(Stmt::Barrier);

        let idx_shape = self.k.ty(index).shape;
        let idx_ty = self.regs[index_regs[0]].ty;
        let map = layout.map(idx_shape);
        // The source's strides on the index layout's dimensions, but for the gather axis,
        // which the index's values give.
        let src_strides = src_shape.strides();
        let mut strides = [0i64; MAX_RANK];
        for vd in 0..idx_shape.rank() {
            if vd != axis {
                strides[layout.blocked_dim(vd)] = src_strides[vd] as i64;
            }
        }
        let lin = self.linear(&map, strides);
        let n = src_shape.dims()[axis] as i64;
        let lo = self.konst(idx_ty, Literal::Int(0));
        let hi = self.konst(idx_ty, Literal::Int(n));
        let zero_i = self.i32c(0);
        let axis_stride = self.i32c(src_strides[axis] as i64);
        let zero = self.konst(
            elem,
            if elem.is_float() {
                Literal::Float(0.0)
            } else {
                Literal::Int(0)
            },
        );
        let mut regs = Vec::with_capacity(map.len);
        // Registers with one index at one place read one element (the quotients and sums
        // of `affine_index.rs` give them one register each): read once.
        let mut read: HashMap<(Reg, Reg), Reg> = HashMap::new();
        for (i, &k) in index_regs.iter().enumerate() {
            if let Some(&r) = read.get(&(k, lin[i])) {
                regs.push(r);
                continue;
            }
            // Checked in the index's own type, before narrowing it to a shared-memory index.
            let ge = self.set(boolt, Expr::Compare(CmpOp::Ge, k, lo));
            let lt = self.set(boolt, Expr::Compare(CmpOp::Lt, k, hi));
            let valid = self.set(boolt, Expr::Binary(BinaryOp::And, ge, lt));
            let k32 = if idx_ty == i32t {
                k
            } else {
                self.set(i32t, Expr::Cast(k))
            };
            let k32 = self.set(i32t, Expr::Select(valid, k32, zero_i));
            let off = self.set(i32t, Expr::Binary(BinaryOp::Mul, k32, axis_stride));
            let at = self.set(i32t, Expr::Binary(BinaryOp::Add, lin[i], off));
            let r = self.new_reg(elem);
            self.emit(Stmt::Load {
                dsts: vec![r],
                mem: Memory::Shared { alloc: buf },
                index: at,
                pred: None,
                cache: CacheModifier::Default,
            });
            let r = self.set(elem, Expr::Select(valid, r, zero));
            read.insert((k, lin[i]), r);
            regs.push(r);
        }
        self.emit(Stmt::Barrier);
        Ok(regs)
    }

    /// `histogram`: each thread counts, for the bins it holds, the elements equal to them,
    /// in a loop over the elements in shared memory (the same loop in every thread).
    pub(crate) fn histogram(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let Op::Histogram { value, .. } = inst.op else {
            return Err(self.internal("not a histogram"));
        };
        let (i32t, i64t, boolt) = (ScalarType::I32, ScalarType::I64, ScalarType::Bool);
        let src = self.lval(value)?;
        let shape = self.k.ty(value).shape;
        let elem = self.elem_reg_type(value, &src);
        let n = shape.numel() as i64;
        let buf = self.shared_buffer(elem, n as u32);
        self.store_shared(&src, shape, buf, None);
        self.emit(Stmt::Barrier);

        let out_shape = self.k.ty(inst.results[0]).shape;
        let layout = self.default_layout(out_shape);
        let map = layout.map(out_shape);
        // Values compare as i64, so that no bin aliases a value of a narrower type.
        let bins: Vec<_> = (0..map.len)
            .map(|i| {
                let c = self.coord(&map, i, layout.blocked_dim(0));
                self.set(i64t, Expr::Cast(c))
            })
            .collect();
        let counts: Vec<_> = (0..map.len)
            .map(|_| {
                let r = self.new_reg(i32t);
                self.emit(Stmt::Set {
                    dst: r,
                    expr: Expr::Const(Literal::Int(0)),
                });
                r
            })
            .collect();
        let end = self.i32c(n);
        let one = self.i32c(1);
        let zero = self.i32c(0);
        self.counted_loop(end, |l, j| {
            let v = l.new_reg(elem);
            l.emit(Stmt::Load {
                dsts: vec![v],
                mem: Memory::Shared { alloc: buf },
                index: j,
                pred: None,
                cache: CacheModifier::Default,
            });
            let v = if elem == i64t { v } else { l.set(i64t, Expr::Cast(v)) };
            for (&bin, &count) in bins.iter().zip(&counts) {
                let hit = l.set(boolt, Expr::Compare(CmpOp::Eq, v, bin));
                let add = l.set(i32t, Expr::Select(hit, one, zero));
                l.emit(Stmt::Set {
                    dst: count,
                    expr: Expr::Binary(BinaryOp::Add, count, add),
                });
            }
            Ok(())
        })?;
        self.emit(Stmt::Barrier);
        Ok(LVal {
            layout,
            regs: counts,
            ptr: None,
        })
    }
}
