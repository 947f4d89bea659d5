//! The pipeline through prefetch registers (`mod.rs`), for targets whose `dot`s run
//! on cooperative matrices without asynchronous copies: a later iteration's loads into a
//! set of registers (predicated, or unpredicated behind one branch), their store into the
//! iteration's stage, and the condition under which a trip's prefetches all hold (the loop
//! of unmasked trips, `control.rs`).

use super::PipelineState;
use crate::ir::{BinaryOp, CmpOp, Inst, InstId, Literal, Op, ValueId};
use crate::layout::Layout;
use crate::lower::{LVal, LowerError, Lowerer};
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;
use std::collections::HashSet;

/// One vector of a pipeline's loads into prefetch registers: `dsts` from `index` of `param`
/// where `pred` holds, else `zero` (the copies' zero fill).
pub(super) struct RegisterPrefetch {
    pub(super) dsts: Vec<Reg>,
    pub(super) param: u32,
    pub(super) index: Reg,
    pub(super) pred: Reg,
    pub(super) zero: Reg,
}

impl Lowerer<'_> {
    /// Through registers: the prefetch registers of set `set` (counted round the sets),
    /// which hold this iteration's operands, stored into stage `state.read` of each load's
    /// buffer.
    pub(super) fn store_prefetched(&mut self, state: &PipelineState, set: usize) {
        let set = &state.prefetch[set % state.prefetch.len()];
        for ((load, (operand, index)), regs) in state.plan.loads.iter().zip(&state.buffers).zip(set) {
            let len = self.i32c(operand.tile.len() as i64);
            let base = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Mul, state.read, len));
            for (g, &at) in (0..regs.len()).step_by(load.width as usize).zip(index) {
                let dst = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, base));
                self.emit(Stmt::Store {
                    values: regs[g..g + load.width as usize].to_vec(),
                    mem: crate::thread::Memory::Shared { alloc: operand.alloc },
                    index: dst,
                    pred: None,
                });
            }
        }
    }

    /// The loads of one iteration into prefetch registers. With `unmasked` (the trips that
    /// [`Lowerer::prefetch_holds`] admits) every load is unpredicated. Otherwise each under
    /// its own predicate, zeros where it fails, is what they mean; where `all_hold` (the
    /// same in every thread: `Lowerer::mask_all_true`) says that every predicate holds,
    /// they run behind one branch on it, unpredicated, and the predicated form is the
    /// branch's other side. (The branch alone did not speed the matmul up through NVIDIA's
    /// driver; the loop of unmasked trips did: `docs/performance.md`, "Masks in the K
    /// loop".)
    pub(super) fn prefetch_into_registers(
        &mut self,
        prefetches: &[RegisterPrefetch],
        all_hold: Option<Reg>,
        unmasked: bool,
    ) {
        let load = |p: &RegisterPrefetch, pred: Option<Reg>| Stmt::Load {
            dsts: p.dsts.clone(),
            mem: crate::thread::Memory::Global { param: p.param },
            index: p.index,
            pred,
            cache: crate::ir::CacheModifier::Default,
        };
        if unmasked {
            for p in prefetches {
                self.emit(load(p, None));
            }
            return;
        }
        let mut predicated = Vec::new();
        for p in prefetches {
            predicated.extend(p.dsts.iter().map(|&d| Stmt::Set {
                dst: d,
                expr: Expr::Copy(p.zero),
            }));
            predicated.push(load(p, Some(p.pred)));
        }
        match all_hold {
            Some(cond) if !prefetches.is_empty() => self.emit(Stmt::If {
                cond,
                then_body: prefetches.iter().map(|p| load(p, None)).collect(),
                else_body: predicated,
            }),
            _ => predicated.into_iter().for_each(|s| self.emit(s)),
        }
    }

    /// The condition of the loop of unmasked trips before a register pipeline's loop, and
    /// the statements computing it (its `cond_body`): every iteration the trip starting at
    /// `iv` prefetches (`unroll` of them, `ahead` iterations on) holds
    /// ([`Lowerer::prefetch_holds`]). Each of them is past the trip's own iterations, which
    /// so run too. `None` where the masks do not say when they hold.
    pub(crate) fn unmasked_trips_condition(
        &mut self,
        state: &PipelineState,
        inst: &Inst,
        iv: Reg,
        (end, step): (Reg, Reg),
        unroll: usize,
    ) -> Result<Option<(Vec<Stmt>, Reg)>, LowerError> {
        if !state.plan.registers || state.plan.ahead == 0 {
            return Ok(None);
        }
        let iv_ty = self.regs[iv].ty;
        let (cond_body, cond) = self.nested(|l| {
            let mut all = None;
            for u in 0..unroll as i64 {
                let by = l.konst(iv_ty, Literal::Int(u + state.plan.ahead as i64));
                let delta = l.set(iv_ty, Expr::Binary(BinaryOp::Mul, step, by));
                let j = l.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, delta));
                let Some(h) = l.prefetch_holds(state, inst, j, end)? else {
                    return Ok(None);
                };
                all = Some(match all {
                    None => h,
                    Some(a) => l.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, a, h)),
                });
            }
            Ok(all)
        })?;
        Ok(cond.map(|c| (cond_body, c)))
    }

    /// A boolean register, the same in every thread, true only where the register pipeline
    /// of loop `inst` may load iteration `j` unpredicated: `j < end` and every load's mask
    /// true in every element (`Lowerer::mask_all_true`). `None` where that cannot be said:
    /// not a pipeline through registers, or a mask whose scalars the slice computes from
    /// anything but the loop variable and values from outside the loop.
    ///
    /// Lowers the slice's scalar instructions for iteration `j` (the caller's statement
    /// list then computes them; the body lowers them again for its own iterations).
    pub(crate) fn prefetch_holds(
        &mut self,
        state: &PipelineState,
        inst: &Inst,
        j: Reg,
        end: Reg,
    ) -> Result<Option<Reg>, LowerError> {
        if !state.plan.registers || state.consumer.is_some() || state.tma.is_some() {
            return Ok(None);
        }
        let region = &inst.regions[0];
        let inside: HashSet<ValueId> = region
            .insts
            .iter()
            .flat_map(|&i| self.k.insts[i].results.clone())
            .collect();
        let carried: HashSet<ValueId> = region.args[1..].iter().copied().collect();
        let k = self.k;
        let scalar_slice: Vec<InstId> = state
            .plan
            .slice
            .iter()
            .copied()
            .filter(|&i| k.insts[i].results.iter().all(|&v| k.ty(v).shape.is_scalar()) && k.insts[i].regions.is_empty())
            .collect();
        for &i in &scalar_slice {
            let operands = k.insts[i].op.operands();
            if operands
                .iter()
                .any(|v| carried.contains(v) || (inside.contains(v) && !k.ty(*v).shape.is_scalar()))
            {
                return Ok(None);
            }
        }
        self.set_lval(
            region.args[0],
            LVal {
                layout: Layout::scalar(),
                regs: vec![j],
                ptr: None,
            },
        );
        for &i in &scalar_slice {
            self.inst(&k.insts[i])?;
        }
        let mut holds = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, j, end));
        for load in &state.plan.loads {
            let Op::Load { mask: Some(m), .. } = k.insts[load.inst].op else {
                continue;
            };
            let Some(c) = self.mask_all_true(m)? else {
                return Ok(None);
            };
            holds = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, holds, c));
        }
        Ok(Some(holds))
    }
}
