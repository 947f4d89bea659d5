//! Loads, stores and atomics on global memory: predicated by the mask, vectorized where
//! the axis analysis proves a thread's elements adjacent and aligned, and — for stores and
//! atomics — done only by the thread that owns each element, not by the ones that hold
//! copies of it.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, Inst, Literal, Op};
use crate::layout::Layout;
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    pub(crate) fn memory(&mut self, inst: &Inst) -> Result<Option<LVal>, LowerError> {
        match &inst.op {
            Op::Load {
                ptr,
                mask,
                other,
                cache,
            } => {
                let result = inst.results[0];
                let ty = self.k.ty(result);
                let elem = ty.scalar_type().expect("verified: a load gives numbers");
                let layout = self.load_layout(*ptr);
                let (base, offsets) = self.pointer(*ptr, layout)?;
                let mask_regs = mask.map(|m| self.ensure(m, layout)).transpose()?;
                let other_regs = other.map(|o| self.ensure(o, layout)).transpose()?;
                let width = self.access_width(&layout, ty.shape, *ptr, *mask);
                let n = offsets.len();
                self.order_global_access(base, false);
                let mut out = Vec::with_capacity(n);
                for group in (0..n).step_by(width) {
                    let dsts: Vec<Reg> = (group..group + width).map(|_| self.new_reg(elem)).collect();
                    if mask.is_some() {
                        // Masked-off lanes keep `other` (0 when absent).
                        for (k, &d) in dsts.iter().enumerate() {
                            let src = match &other_regs {
                                Some(o) => Expr::Copy(o[group + k]),
                                None => Expr::Copy(self.zero(elem)),
                            };
                            self.emit(Stmt::Set { dst: d, expr: src });
                        }
                    }
                    let pred = mask_regs.as_ref().map(|m| m[group]);
                    self.emit(Stmt::Load {
                        dsts: dsts.clone(),
                        mem: Memory::Global { param: base },
                        index: offsets[group],
                        pred,
                        cache: *cache,
                    });
                    out.extend(dsts);
                }
                Ok(Some(LVal {
                    layout,
                    regs: out,
                    ptr: None,
                }))
            }
            Op::Store { ptr, value, mask } => {
                if self.tma_store(inst)? {
                    return Ok(None);
                }
                let shape = self.k.ty(*ptr).shape;
                let layout = self.plain_store_layout(*ptr, *value);
                let (base, offsets) = self.pointer(*ptr, layout)?;
                let values = self.ensure(*value, layout)?;
                let pred = self.store_predicates(layout, shape, *mask)?;
                let width = self.access_width(&layout, shape, *ptr, *mask);
                self.order_global_access(base, true);
                for group in (0..offsets.len()).step_by(width) {
                    self.emit(Stmt::Store {
                        values: values[group..group + width].to_vec(),
                        mem: Memory::Global { param: base },
                        index: offsets[group],
                        pred: pred[group],
                    });
                }
                Ok(None)
            }
            Op::Atomic {
                op,
                ptr,
                value,
                mask,
                order,
            } => {
                let (layout, base, offsets, pred, elem) = self.atomic_operands(inst, *ptr, *mask, *order)?;
                let values = self.ensure(*value, layout)?;
                let mut out = Vec::with_capacity(offsets.len());
                for i in 0..offsets.len() {
                    let dst = self.new_reg(elem);
                    let z = self.zero(elem);
                    self.emit(Stmt::Set {
                        dst,
                        expr: Expr::Copy(z),
                    });
                    self.emit(Stmt::Atomic {
                        dst,
                        op: *op,
                        param: base,
                        index: offsets[i],
                        value: values[i],
                        pred: pred[i],
                        order: *order,
                    });
                    out.push(dst);
                }
                self.atomic_results(inst, layout, out).map(Some)
            }
            Op::AtomicCas {
                ptr,
                cmp,
                value,
                mask,
                order,
            } => {
                let (layout, base, offsets, pred, elem) = self.atomic_operands(inst, *ptr, *mask, *order)?;
                let cmps = self.ensure(*cmp, layout)?;
                let values = self.ensure(*value, layout)?;
                let mut out = Vec::with_capacity(offsets.len());
                for i in 0..offsets.len() {
                    let dst = self.new_reg(elem);
                    let z = self.zero(elem);
                    self.emit(Stmt::Set {
                        dst,
                        expr: Expr::Copy(z),
                    });
                    self.emit(Stmt::AtomicCas {
                        dst,
                        param: base,
                        index: offsets[i],
                        cmp: cmps[i],
                        value: values[i],
                        pred: pred[i],
                        order: *order,
                    });
                    out.push(dst);
                }
                self.atomic_results(inst, layout, out).map(Some)
            }
            op => Err(self.internal(format!("`{}` is not a memory op", op.name()))),
        }
    }

    fn zero(&mut self, ty: ScalarType) -> Reg {
        let lit = match ty {
            ScalarType::Bool => Literal::Bool(false),
            t if t.is_float() => Literal::Float(0.0),
            _ => Literal::Int(0),
        };
        self.konst(ty, lit)
    }

    /// The base parameter and per-register element offsets of a pointer value.
    pub(super) fn pointer(&mut self, ptr: crate::ir::ValueId, layout: Layout) -> Result<(u32, Vec<Reg>), LowerError> {
        let p = self.lval(ptr)?;
        let base = p.ptr.ok_or_else(|| self.internal("pointer without a base parameter"))?;
        let offsets = self.ensure(ptr, layout)?;
        Ok((base, offsets))
    }

    /// How many consecutive registers one access moves: the thread's run along the fastest
    /// dimension, limited by what the axis analysis proves.
    pub(super) fn access_width(
        &self,
        layout: &Layout,
        shape: crate::types::Shape,
        ptr: crate::ir::ValueId,
        mask: Option<crate::ir::ValueId>,
    ) -> usize {
        if shape.is_scalar() {
            return 1;
        }
        let map = layout.map(shape);
        let fastest = layout.blocked.order[0] as usize;
        // A thread's consecutive registers run along the fastest blocked dimension, which
        // must be a value dimension (the analysis speaks of those).
        if layout.sliced != 0 {
            return 1;
        }
        let run = map.run[fastest];
        let proven = self.proven_width(ptr, mask, fastest);
        let mut w = run.min(proven).max(1);
        while run % w != 0 {
            w /= 2;
        }
        w as usize
    }

    /// Per register: the mask (if any) and ownership, combined.
    fn store_predicates(
        &mut self,
        layout: Layout,
        shape: crate::types::Shape,
        mask: Option<crate::ir::ValueId>,
    ) -> Result<Vec<Option<Reg>>, LowerError> {
        let map = layout.map(shape);
        let own = self.owner(&map);
        let masks = mask.map(|m| self.ensure(m, layout)).transpose()?;
        let mut out = Vec::with_capacity(map.len);
        for i in 0..map.len {
            out.push(match (masks.as_ref().map(|m| m[i]), own) {
                (Some(m), Some(o)) => Some(self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, m, o))),
                (m, o) => m.or(o),
            });
        }
        Ok(out)
    }

    #[allow(clippy::type_complexity)]
    fn atomic_operands(
        &mut self,
        inst: &Inst,
        ptr: crate::ir::ValueId,
        mask: Option<crate::ir::ValueId>,
        order: crate::ir::AtomicOrder,
    ) -> Result<(Layout, u32, Vec<Reg>, Vec<Option<Reg>>, ScalarType), LowerError> {
        let ty = self.k.ty(inst.results[0]);
        let value = match inst.op {
            Op::Atomic { value, .. } | Op::AtomicCas { value, .. } => value,
            _ => return Err(self.internal("not an atomic")),
        };
        let layout = self.store_layout(ptr, value);
        let (base, offsets) = self.pointer(ptr, layout)?;
        let pred = self.store_predicates(layout, ty.shape, mask)?;
        self.order_atomic(base, order.releases());
        let elem = ty.scalar_type().expect("verified: an atomic gives numbers");
        Ok((layout, base, offsets, pred, elem))
    }

    /// Atomics give the old value to the owning thread only; threads holding copies of an
    /// element get it through shared memory.
    fn atomic_results(&mut self, inst: &Inst, layout: Layout, regs: Vec<Reg>) -> Result<LVal, LowerError> {
        let ty = self.k.ty(inst.results[0]);
        let map = layout.map(ty.shape);
        let replicated = layout.is_scalar() || (0..layout.blocked.rank as usize).any(|d| map.replicated(d));
        let lval = LVal {
            layout,
            regs,
            ptr: None,
        };
        if !replicated {
            return Ok(lval);
        }
        let elem = ty.scalar_type().expect("verified: an atomic gives numbers");
        let regs = self.convert(&lval, elem, ty.shape, layout, ty.shape, None)?;
        Ok(LVal {
            layout,
            regs,
            ptr: None,
        })
    }
}
