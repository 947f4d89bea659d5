//! Scans and reductions with a combine region, and `sort`: data-parallel networks over
//! the axis, run through shared memory.
//!
//! The value is written to shared memory (row-major, each element once, by its owner), and
//! every thread then updates the elements it holds, step by step: a Hillis-Steele scan
//! (`log2 n` steps, element `i` combining with element `i - 2^s`, or `i + 2^s` reversed)
//! or a bitonic sorting network (element `i` against `i ^ j`). Each step reads one half of
//! a double buffer and writes the other, so one barrier per step suffices. Every thread
//! runs the same straight-line code (no divergence), and elements a thread holds twice
//! (small blocks) are computed twice, alike. A combine reduction is the scan's last
//! element along the axis. Backends see only shared loads and stores, barriers and scalar
//! arithmetic: nothing here is backend-specific.
//!
//! This takes `O(n log n)` combines for a scan instead of the `O(n)` of a scan within
//! threads and warps first (Triton's `ScanOpToLLVM`); it is the simple, general form.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, CmpOp, Inst, Literal, Op, Region, ValueId};
use crate::layout::{Layout, RegisterMap};
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::{ScalarType, Shape};

/// Where one operand lives in shared memory: its buffer and the element where its first
/// half of the double buffer starts.
#[derive(Clone, Copy)]
struct Slot {
    alloc: u32,
    base: u32,
}

/// A block value spread over shared memory, double-buffered: the layout, its register
/// map, each register's row-major element index, the owner predicate, and the slots.
struct Staged {
    layout: Layout,
    map: RegisterMap,
    numel: u32,
    lin: Vec<Reg>,
    own: Option<Reg>,
    slots: Vec<Slot>,
}

impl Lowerer<'_> {
    /// `scan` and `reduce` with a combine region.
    pub(crate) fn combine_scan(&mut self, inst: &Inst) -> Result<Vec<LVal>, LowerError> {
        let (values, axis, reverse, reduce) = match &inst.op {
            Op::Scan { values, axis, reverse } => (values.clone(), *axis as usize, *reverse, false),
            Op::ReduceCombine { values, axis } => (values.clone(), *axis as usize, false, true),
            op => return Err(self.internal(format!("`{}` is not a scan", op.name()))),
        };
        let region = inst
            .regions
            .first()
            .ok_or_else(|| self.internal("a scan without its combine region"))?;
        let shape = self.k.ty(values[0]).shape;
        let layout = self.lval(values[0])?.layout;
        let mut cur = Vec::with_capacity(values.len());
        for &v in &values {
            cur.push(self.ensure(v, layout)?);
        }
        let n = shape.dims()[axis];
        let stride = shape.strides()[axis] as i64;
        let d = layout.blocked_dim(axis);
        let mut staged = self.stage_double_buffered(&values, layout, shape);
        let mut phase = 0;
        if n > 1 {
            self.store_phase(&staged, &cur, phase);
            self.emit(Stmt::Barrier);
        }
        let steps = n.trailing_zeros();
        for s in 0..steps {
            let dist = 1i64 << s;
            let mut next = vec![Vec::with_capacity(staged.map.len); values.len()];
            for i in 0..staged.map.len {
                let c = self.coord(&staged.map, i, d);
                let valid = if reverse {
                    let lim = self.i32c(n as i64 - dist);
                    self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, c, lim))
                } else {
                    let lim = self.i32c(dist);
                    self.set(ScalarType::Bool, Expr::Compare(CmpOp::Ge, c, lim))
                };
                let delta = self.i32c(if reverse { dist * stride } else { -dist * stride });
                let partner = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, staged.lin[i], delta));
                // An element without a partner reads itself, so that every read is in bounds.
                let at = self.set(ScalarType::I32, Expr::Select(valid, partner, staged.lin[i]));
                let own: Vec<Reg> = cur.iter().map(|regs| regs[i]).collect();
                let earlier = self.load_phase(&staged, at, phase);
                let combined = self.apply_combine(region, &earlier, &own)?;
                for (k, (&c, &o)) in combined.iter().zip(&own).enumerate() {
                    let ty = self.regs[o].ty;
                    next[k].push(self.set(ty, Expr::Select(valid, c, o)));
                }
            }
            cur = next;
            if s + 1 < steps || reduce {
                phase ^= 1;
                self.store_phase(&staged, &cur, phase);
                self.emit(Stmt::Barrier);
            }
        }
        if !reduce {
            if n > 1 {
                // No exchange may reuse the buffers before every thread has read them.
                self.emit(Stmt::Barrier);
            }
            return Ok(cur
                .into_iter()
                .map(|regs| LVal {
                    layout,
                    regs,
                    ptr: None,
                })
                .collect());
        }
        // The reduction: the scan's last element along the axis, read by every thread that
        // holds the result.
        let result_shape = shape.remove_axis(axis).expect("axis checked by the typing");
        let out_layout = layout.slice(d);
        let out_map = out_layout.map(result_shape);
        let mut strides = Self::value_strides(&layout, shape);
        strides[d] = 0;
        let base = self.linear(&out_map, strides);
        let last = self.i32c((n as i64 - 1) * stride);
        let mut results = vec![Vec::with_capacity(out_map.len); values.len()];
        if n == 1 {
            // Nothing to combine: the only element, moved into the slice layout.
            self.store_phase(&staged, &cur, phase);
            self.emit(Stmt::Barrier);
        }
        for &b in &base {
            let at = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, b, last));
            let regs = self.load_phase(&staged, at, phase);
            for (k, r) in regs.into_iter().enumerate() {
                results[k].push(r);
            }
        }
        self.emit(Stmt::Barrier);
        staged.layout = if result_shape.is_scalar() {
            Layout::scalar()
        } else {
            out_layout
        };
        Ok(results
            .into_iter()
            .map(|regs| LVal {
                layout: staged.layout,
                regs,
                ptr: None,
            })
            .collect())
    }

    /// `sort` along an axis: the bitonic network of [`crate::interp`]'s `sort`, one
    /// compare-and-swap step at a time.
    pub(crate) fn sort(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let Op::Sort {
            value,
            axis,
            descending,
        } = inst.op
        else {
            return Err(self.internal("not a sort"));
        };
        let axis = axis as usize;
        let shape = self.k.ty(value).shape;
        let layout = self.lval(value)?.layout;
        let mut cur = self.ensure(value, layout)?;
        let n = shape.dims()[axis];
        let stride = shape.strides()[axis] as i64;
        let d = layout.blocked_dim(axis);
        let staged = self.stage_double_buffered(&[value], layout, shape);
        let steps = crate::interp::bitonic_steps(n as usize);
        let (i32t, boolt) = (ScalarType::I32, ScalarType::Bool);
        let mut phase = 0;
        if !steps.is_empty() {
            self.store_phase(&staged, &[cur.clone()], phase);
            self.emit(Stmt::Barrier);
        }
        let t = self.konst(boolt, Literal::Bool(true));
        let zero = self.i32c(0);
        for (step, &(k, j)) in steps.iter().enumerate() {
            let (kc, jc) = (self.i32c(k as i64), self.i32c(j as i64));
            let mut next = Vec::with_capacity(cur.len());
            for (i, &own) in cur.iter().enumerate() {
                let c = self.coord(&staged.map, i, d);
                let pc = self.set(i32t, Expr::Binary(BinaryOp::Xor, c, jc));
                let diff = self.set(i32t, Expr::Binary(BinaryOp::Sub, pc, c));
                let s = self.i32c(stride);
                let off = self.set(i32t, Expr::Binary(BinaryOp::Mul, diff, s));
                let at = self.set(i32t, Expr::Binary(BinaryOp::Add, staged.lin[i], off));
                let partner = self.load_phase(&staged, at, phase)[0];
                let cj = self.set(i32t, Expr::Binary(BinaryOp::And, c, jc));
                let is_lo = self.set(boolt, Expr::Compare(CmpOp::Eq, cj, zero));
                let ck = self.set(i32t, Expr::Binary(BinaryOp::And, c, kc));
                let mut ascending = self.set(boolt, Expr::Compare(CmpOp::Eq, ck, zero));
                if descending {
                    ascending = self.set(boolt, Expr::Binary(BinaryOp::Xor, ascending, t));
                }
                let ty = self.regs[own].ty;
                let lo = self.set(ty, Expr::Select(is_lo, own, partner));
                let hi = self.set(ty, Expr::Select(is_lo, partner, own));
                // Swap when the pair is out of order: strictly, so that equal elements and
                // NaNs stay where they are.
                let hi_below = self.set(boolt, Expr::Compare(CmpOp::Lt, hi, lo));
                let lo_below = self.set(boolt, Expr::Compare(CmpOp::Lt, lo, hi));
                let descending_pair = self.set(boolt, Expr::Binary(BinaryOp::Xor, ascending, t));
                let up = self.set(boolt, Expr::Binary(BinaryOp::And, ascending, hi_below));
                let down = self.set(boolt, Expr::Binary(BinaryOp::And, descending_pair, lo_below));
                let swap = self.set(boolt, Expr::Binary(BinaryOp::Or, up, down));
                next.push(self.set(ty, Expr::Select(swap, partner, own)));
            }
            cur = next;
            if step + 1 < steps.len() {
                phase ^= 1;
                self.store_phase(&staged, &[cur.clone()], phase);
                self.emit(Stmt::Barrier);
            }
        }
        if !steps.is_empty() {
            self.emit(Stmt::Barrier);
        }
        Ok(LVal {
            layout,
            regs: cur,
            ptr: None,
        })
    }

    /// The combine region applied to the scalar registers `a` and `b`: its ops lowered
    /// once more, on these registers.
    pub(crate) fn apply_combine(&mut self, region: &Region, a: &[Reg], b: &[Reg]) -> Result<Vec<Reg>, LowerError> {
        for (&arg, &r) in region.args.iter().zip(a.iter().chain(b)) {
            self.set_lval(
                arg,
                LVal {
                    layout: Layout::scalar(),
                    regs: vec![r],
                    ptr: None,
                },
            );
        }
        let yields = self
            .region(region)?
            .ok_or_else(|| self.internal("a combine region without a yield"))?;
        let mut out = Vec::with_capacity(yields.len());
        for (y, &want) in yields.iter().zip(a) {
            let r = self.lval(*y)?.regs[0];
            let ty = self.regs[want].ty;
            out.push(if self.regs[r].ty == ty {
                r
            } else {
                self.set(ty, Expr::Cast(r))
            });
        }
        Ok(out)
    }

    /// Plans the shared memory of `values` (of one shape, in `layout`): two halves per
    /// operand, operands of one element type side by side in that type's buffer.
    fn stage_double_buffered(&mut self, values: &[ValueId], layout: Layout, shape: Shape) -> Staged {
        let numel = shape.numel() as u32;
        let map = layout.map(shape);
        let lin = self.linear(&map, Self::value_strides(&layout, shape));
        let own = self.owner(&map);
        let mut used: Vec<(ScalarType, u32)> = Vec::new();
        let mut slots = Vec::with_capacity(values.len());
        for &v in values {
            let ty = self.k.ty(v).scalar_type().expect("numbers, checked by the typing");
            let before = used.iter().filter(|(t, _)| *t == ty).count() as u32;
            used.push((ty, 0));
            let base = before * 2 * numel;
            let alloc = self.shared_buffer(ty, base + 2 * numel);
            slots.push(Slot { alloc, base });
        }
        Staged {
            layout,
            map,
            numel,
            lin,
            own,
            slots,
        }
    }

    /// Writes each operand's registers to half `phase` of its slot (owners only).
    fn store_phase(&mut self, staged: &Staged, regs: &[Vec<Reg>], phase: u32) {
        for (slot, regs) in staged.slots.iter().zip(regs) {
            let off = self.i32c((slot.base + phase * staged.numel) as i64);
            for (i, &r) in regs.iter().enumerate() {
                let at = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, staged.lin[i], off));
                self.emit(Stmt::Store {
                    values: vec![r],
                    mem: Memory::Shared { alloc: slot.alloc },
                    index: at,
                    pred: staged.own,
                });
            }
        }
    }

    /// Reads element `at` (row-major) of every operand from half `phase` of its slot.
    fn load_phase(&mut self, staged: &Staged, at: Reg, phase: u32) -> Vec<Reg> {
        let mut out = Vec::with_capacity(staged.slots.len());
        for slot in &staged.slots {
            let ty = self.shared[slot.alloc as usize].elem;
            let off = self.i32c((slot.base + phase * staged.numel) as i64);
            let index = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, off));
            let dst = self.new_reg(ty);
            self.emit(Stmt::Load {
                dsts: vec![dst],
                mem: Memory::Shared { alloc: slot.alloc },
                index,
                pred: None,
                cache: CacheModifier::Default,
            });
            out.push(dst);
        }
        out
    }
}
