//! Structured control flow. Block-level `for`/`if`/`while` run on scalars that every thread
//! computes alike, so they become the same control flow in every thread. Loop-carried
//! values and `if` results live in registers that the bodies assign at their end.

use super::coop::CoopAcc;
use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Inst, Literal, Op, ValueId};
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    pub(crate) fn control(&mut self, inst: &Inst) -> Result<Vec<LVal>, LowerError> {
        match &inst.op {
            Op::For {
                start,
                end,
                step,
                init,
                num_stages,
            } => self.for_loop(inst, (*start, *end, *step), init, *num_stages),
            Op::If { cond } => self.if_else(inst, *cond),
            Op::While { init } => self.while_loop(inst, init),
            op => Err(self.internal(format!("`{}` is not control flow", op.name()))),
        }
    }

    /// The layouts of a `for` loop's carried values: a pointer that the body loads or
    /// stores through directly (`a_ptrs` advanced each iteration) is carried in that
    /// access's layout, and an accumulator that a `dot` on the tensor cores adds to in that
    /// `dot`'s result layout, when the initial value is index arithmetic or a constant
    /// (recomputed there once, before the loop), so that no iteration converts them; other
    /// values keep the layout they come with. The accumulator is recognized by what the body
    /// yields (`dot_derived_layout`), not by what the `dot` adds to: attention rescales its
    /// accumulator before the `dot` (`acc = acc * alpha[:, None]`, then `acc = dot(p, v,
    /// acc)`), and carried in the `dot`'s layout the rescaling runs there too, where in the
    /// initial value's layout every iteration converted the whole accumulator twice.
    fn carried_layouts(&self, init: &[ValueId], region: &crate::ir::Region) -> Vec<Option<crate::layout::Layout>> {
        let accessed = |arg: ValueId| {
            region.insts.iter().any(|&i| match &self.k.insts[i].op {
                Op::Load { ptr, .. } | Op::Store { ptr, .. } | Op::Atomic { ptr, .. } | Op::AtomicCas { ptr, .. } => {
                    *ptr == arg
                }
                _ => false,
            })
        };
        // The layout the value the body yields in slot `i` takes from a `dot` on the tensor
        // cores, if it is computed from one (see `dot_derived_layout`).
        let yielded = |i: usize| {
            let Some(Op::Yield { values }) = region.insts.last().map(|&l| &self.k.insts[l].op) else {
                return None;
            };
            self.dot_derived_layout(region, *values.get(i)?, 0)
        };
        init.iter()
            .zip(&region.args[1..])
            .enumerate()
            .map(|(i, (&v, &arg))| {
                if self.anchored[v.index()] {
                    return None;
                }
                if accessed(arg) {
                    return self.access_layout(arg);
                }
                yielded(i)
            })
            .collect()
    }

    /// The layout `v`, a value of `region`'s body, has when it is a `dot`'s result on the
    /// tensor cores, an element-wise function of one, or a reduction of one (its slice):
    /// where a loop carries it in that layout, the body neither converts the `dot`'s result
    /// nor the carried value. Attention's running maximum and sum are reductions of each
    /// step's scores along their rows; carried in the scores' layout's slice they meet the
    /// scores in every step with no exchange through shared memory.
    fn dot_derived_layout(
        &self,
        region: &crate::ir::Region,
        v: ValueId,
        depth: usize,
    ) -> Option<crate::layout::Layout> {
        const MAX_DEPTH: usize = 16;
        if depth > MAX_DEPTH {
            return None;
        }
        let inst = region
            .insts
            .iter()
            .map(|&id| &self.k.insts[id])
            .find(|inst| inst.results.contains(&v))?;
        let shape = self.k.ty(v).shape;
        match &inst.op {
            // (A `dot` on cooperative matrices moves to the default layout for its uses.)
            Op::Dot { .. } => self
                .mma_accumulator_layout(inst)
                .or_else(|| self.coop_plan(inst).map(|_| self.default_layout(shape))),
            Op::Reduce { value, axis, .. } => self
                .dot_derived_layout(region, *value, depth + 1)
                .map(|l| l.slice(l.blocked_dim(*axis as usize))),
            Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Compare { .. }
            | Op::Select { .. }
            | Op::Cast { .. }
            | Op::Fma { .. }
            | Op::BytePerm { .. }
            | Op::Rounded { .. } => inst
                .op
                .operands()
                .into_iter()
                .filter(|&o| self.k.ty(o).shape == shape)
                .find_map(|o| self.dot_derived_layout(region, o, depth + 1)),
            _ => None,
        }
    }

    /// Fresh registers for carried values, initialized from `init` (in `layouts` where
    /// given).
    pub(super) fn carried_slots(
        &mut self,
        init: &[ValueId],
        layouts: &[Option<crate::layout::Layout>],
    ) -> Result<Vec<LVal>, LowerError> {
        let mut slots = Vec::with_capacity(init.len());
        for (i, &v) in init.iter().enumerate() {
            let mut l = self.lval(v)?;
            if let Some(Some(layout)) = layouts.get(i) {
                l.regs = self.ensure(v, *layout)?;
                l.layout = *layout;
            }
            let regs: Vec<Reg> = l
                .regs
                .iter()
                .map(|&r| {
                    let ty = self.regs[r].ty;
                    let s = self.new_reg(ty);
                    self.emit(Stmt::Set {
                        dst: s,
                        expr: Expr::Copy(r),
                    });
                    s
                })
                .collect();
            slots.push(LVal {
                layout: l.layout,
                regs,
                ptr: l.ptr,
            });
        }
        Ok(slots)
    }

    /// Assigns yielded values to their slots: first into temporaries, so that a yield that
    /// reads another slot sees its old value. A slot with matrices in `coop` (a `for`
    /// loop's accumulator in cooperative matrices) gets the yield's matrices: nothing to do
    /// when the `dot` updated them in place, else through shared memory.
    pub(super) fn assign_slots(
        &mut self,
        inst: &Inst,
        slots: &[LVal],
        yields: &[ValueId],
        coop: &[Option<CoopAcc>],
    ) -> Result<(), LowerError> {
        let mut staged = Vec::new();
        for (i, (slot, &y)) in slots.iter().zip(yields).enumerate() {
            let in_coop = self.values[y.index()].is_none() && self.coop_vals.contains_key(&y);
            if let Some(Some(acc)) = coop.get(i) {
                if in_coop && self.coop_vals[&y].tiles == acc.tiles {
                    continue;
                }
                let lval = self.plain_lval(y)?;
                self.coop_from_lval(&lval, Some(acc), &acc.tiling)?;
                continue;
            }
            if in_coop {
                let lval = self.plain_lval(y)?;
                self.values[y.index()] = Some(lval);
            }
            let r = self.assign_slot(inst, slot, y, &mut staged);
            if in_coop {
                self.values[y.index()] = None;
            }
            r?;
        }
        for (s, t) in staged {
            self.emit(Stmt::Set {
                dst: s,
                expr: Expr::Copy(t),
            });
        }
        Ok(())
    }

    /// Copies yield `y` to temporaries, for `slot` (see `assign_slots`).
    fn assign_slot(
        &mut self,
        inst: &Inst,
        slot: &LVal,
        y: ValueId,
        staged: &mut Vec<(Reg, Reg)>,
    ) -> Result<(), LowerError> {
        let yl = self.lval(y)?;
        if slot.ptr != yl.ptr {
            return Err(self.unsupported(
                inst,
                "a pointer carried by a loop or returned by a branch must come from the same parameter on every path",
            ));
        }
        let regs = self.ensure(y, slot.layout)?;
        for (&s, &r) in slot.regs.iter().zip(&regs) {
            // A value already in its slot (updated in place) is not copied: a copy would
            // read registers a warpgroup MMA may still be writing.
            if s == r {
                continue;
            }
            let ty = self.regs[s].ty;
            let r = if self.regs[r].ty == ty {
                r
            } else {
                self.set(ty, Expr::Cast(r))
            };
            let t = self.set(ty, Expr::Copy(r));
            staged.push((s, t));
        }
        Ok(())
    }

    fn region_yields(&mut self, inst: &Inst, region: usize) -> Result<Vec<ValueId>, LowerError> {
        Ok(self.region(&inst.regions[region])?.unwrap_or_default())
    }

    fn for_loop(
        &mut self,
        inst: &Inst,
        (start, end, step): (ValueId, ValueId, ValueId),
        init: &[ValueId],
        num_stages: Option<u32>,
    ) -> Result<Vec<LVal>, LowerError> {
        // (Taken first: a loop nested in this one's body sets its own.)
        let after = std::mem::take(&mut self.dots_after_loop);
        let iv_ty = self
            .k
            .ty(start)
            .scalar_type()
            .expect("verified: loop bounds are integers");
        let (start_r, end_r, step_r) = (
            self.lval(start)?.regs[0],
            self.lval(end)?.regs[0],
            self.lval(step)?.regs[0],
        );
        let layouts = self.carried_layouts(init, &inst.regions[0]);
        let slots = self.carried_slots(init, &layouts)?;
        // Accumulators of `dot`s on cooperative matrices stay in them across iterations.
        let mut coop = Vec::with_capacity(init.len());
        for (&v, t) in init.iter().zip(self.coop_carried(init, &inst.regions[0])) {
            coop.push(match t {
                None => None,
                Some(t) if self.is_zero(v) => Some(self.coop_zeros(&t)),
                Some(t) => {
                    let lval = self.plain_lval(v)?;
                    Some(self.coop_from_lval(&lval, None, &t)?)
                }
            });
        }
        let iv = self.new_reg(iv_ty);
        self.emit(Stmt::Set {
            dst: iv,
            expr: Expr::Copy(start_r),
        });
        let region = &inst.regions[0];
        self.enter_loop_operands();
        let mut pipeline = match self.plan_pipeline(region, step, num_stages) {
            Some(plan) if self.can_specialize(&plan) => {
                Some(self.specialize(plan, inst, init, &layouts, (start_r, end_r, step_r), &after)?)
            }
            Some(plan) => Some(self.pipeline_prologue(plan, inst, init, &layouts, (start_r, end_r, step_r))?),
            None => None,
        };
        let hoisted = self.hoist_invariant_operands(region, &after)?;
        let step_const = self.axis[step.index()].constant;
        // A register pipeline two iterations ahead runs the body twice a trip, each copy
        // with its own prefetch registers, while two iterations remain; then the last one of
        // an odd count (`PipelineState::unroll`; its step is a positive constant).
        let unroll = pipeline.as_ref().map_or(1, |p| p.unroll());
        let (cond_body, cond) = self.nested(|l| {
            let bool_t = ScalarType::Bool;
            if unroll > 1 {
                let more = l.konst(iv_ty, Literal::Int(unroll as i64 - 1));
                let ahead = l.set(iv_ty, Expr::Binary(BinaryOp::Mul, step_r, more));
                let last = l.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, ahead));
                return Ok(l.set(bool_t, Expr::Compare(CmpOp::Lt, last, end_r)));
            }
            Ok(l.before_end(iv, end_r, Some(step_r), step_const))
        })?;
        // Where the pipeline's masks say when they hold, trips whose prefetches all hold
        // come first, in a loop of their own with the prefetches unpredicated (what NVIDIA's
        // Vulkan driver makes fastest code of); the loop below takes the rest.
        let unmasked_trips = match pipeline.as_ref() {
            Some(p) => self.unmasked_trips_condition(p, inst, iv, (end_r, step_r), unroll)?,
            None => None,
        };
        // Whether the consumers of a warp-specialized loop take turns at the tensor cores.
        let mut turns = false;
        let mut iteration = |l: &mut Self, set: usize| -> Result<(), LowerError> {
            let from = l.body.last().map_or(0, Vec::len);
            if let Some(p) = pipeline.as_mut() {
                l.pipeline_iteration(p, inst, iv, (end_r, step_r), set)?;
            }
            l.set_lval(
                region.args[0],
                LVal {
                    layout: crate::layout::Layout::scalar(),
                    regs: vec![iv],
                    ptr: None,
                },
            );
            for ((slot, &arg), c) in slots.iter().zip(&region.args[1..]).zip(&coop) {
                match c {
                    Some(acc) => {
                        l.coop_vals.insert(arg, acc.clone());
                        l.values[arg.index()] = None;
                    }
                    None => l.set_lval(arg, slot.clone()),
                }
                // Carried values cannot be recomputed elsewhere: their layout anchors.
                l.anchored[arg.index()] = true;
            }
            let yields = l.region(region)?.unwrap_or_default();
            if let Some(p) = pipeline.as_ref() {
                l.flush_refill();
                l.retire_before_yield(p, region);
            }
            l.assign_slots(inst, &slots, &yields, &coop)?;
            if let Some(p) = pipeline.as_ref() {
                l.pipeline_advance(p);
            }
            let next = l.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, step_r));
            l.emit(Stmt::Set {
                dst: iv,
                expr: Expr::Copy(next),
            });
            if pipeline.is_some() {
                l.overlap_wgmma_groups(from);
            }
            if pipeline.as_ref().is_some_and(|p| p.consumer.is_some()) {
                turns |= l.take_turns(from);
            }
            Ok(())
        };
        if let Some((fast_cond_body, fast_cond)) = unmasked_trips {
            unmasked_trips_loop(self, &mut iteration, unroll, fast_cond_body, fast_cond)?;
        }
        let outer = self.enter_region();
        let (mut body, ()) = self.nested(|l| (0..unroll).try_for_each(|set| iteration(l, set)))?;
        self.close_loop_region(&outer, &mut body);
        self.emit(Stmt::While { cond_body, cond, body });
        if unroll > 1 {
            // The last iteration of an odd count, as a loop that runs at most once (the
            // trips above end with one iteration or none left): a loop, not a branch, since
            // the cooperative operations and barriers of the body must stay in control flow
            // that shader compilers see as uniform.
            debug_assert_eq!(unroll, 2);
            let (rest_cond_body, rest_cond) =
                self.nested(|l| Ok(l.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, iv, end_r))))?;
            let outer = self.enter_region();
            let (mut rest, ()) = self.nested(|l| iteration(l, 0))?;
            self.close_loop_region(&outer, &mut rest);
            self.emit(Stmt::While {
                cond_body: rest_cond_body,
                cond: rest_cond,
                body: rest,
            });
        }
        if let Some(c) = pipeline.as_ref().and_then(|p| p.consumer.as_ref()).filter(|_| turns) {
            self.close_turns(c);
        }
        match pipeline {
            Some(p) => {
                self.pipeline_epilogue(&p);
                if let Some(staged) = self.staged.take() {
                    self.staged_copies_after_loop(staged);
                }
            }
            // Every thread done reading the hoisted operands before their bytes are reused
            // (the pipeline's epilogue ends with the same barrier).
            None if !hoisted.is_empty() => self.emit(Stmt::Barrier),
            None => {}
        }
        self.forget_hoisted(&hoisted);
        self.leave_loop_operands();
        for (&v, c) in inst.results.iter().zip(coop) {
            if let Some(acc) = c {
                self.coop_vals.insert(v, acc);
            }
        }
        Ok(slots)
    }

    /// Whether loop variable `iv` is before `end` in the direction of the loop's `step`:
    /// `iv < end` for a positive constant step (`step_const`), `iv > end` for a negative
    /// one, and otherwise the comparison the sign of `step` picks at run time (`step` may
    /// be left out only where the step is a positive constant).
    pub(crate) fn before_end(&mut self, iv: Reg, end: Reg, step: Option<Reg>, step_const: Option<i64>) -> Reg {
        let bool_t = ScalarType::Bool;
        match (step_const, step) {
            (Some(s), _) if s > 0 => self.set(bool_t, Expr::Compare(CmpOp::Lt, iv, end)),
            (Some(s), _) if s < 0 => self.set(bool_t, Expr::Compare(CmpOp::Gt, iv, end)),
            (_, None) => self.set(bool_t, Expr::Compare(CmpOp::Lt, iv, end)),
            // (A zero step, which the interpreter refuses, ends the loop at once here.)
            (_, Some(step)) => {
                let zero = self.konst(self.regs[step].ty, Literal::Int(0));
                let up = self.set(bool_t, Expr::Compare(CmpOp::Gt, step, zero));
                let below = self.set(bool_t, Expr::Compare(CmpOp::Lt, iv, end));
                let above = self.set(bool_t, Expr::Compare(CmpOp::Gt, iv, end));
                self.set(bool_t, Expr::Select(up, below, above))
            }
        }
    }

    fn if_else(&mut self, inst: &Inst, cond: ValueId) -> Result<Vec<LVal>, LowerError> {
        let c = self.lval(cond)?.regs[0];
        // Result slots take the layouts of the then-branch's values, known after lowering it.
        let mut slots: Vec<LVal> = Vec::new();
        let outer = self.enter_region();
        let (then_body, ()) = self.nested(|l| {
            let yields = l.region_yields(inst, 0)?;
            for &y in &yields {
                let yl = l.plain_lval(y)?;
                let regs = yl.regs.iter().map(|&r| l.new_reg(l.regs[r].ty)).collect();
                slots.push(LVal {
                    layout: yl.layout,
                    regs,
                    ptr: yl.ptr,
                });
            }
            l.assign_slots(inst, &slots, &yields, &[])
        })?;
        let after_then = self.leave_region(&outer);
        self.enter_region();
        let (else_body, ()) = self.nested(|l| {
            let yields = l.region_yields(inst, 1)?;
            l.assign_slots(inst, &slots, &yields, &[])
        })?;
        let after_else = self.leave_region(&outer);
        self.merge_region(&after_then);
        self.merge_region(&after_else);
        self.emit(Stmt::If {
            cond: c,
            then_body,
            else_body,
        });
        Ok(slots)
    }

    fn while_loop(&mut self, inst: &Inst, init: &[ValueId]) -> Result<Vec<LVal>, LowerError> {
        let slots = self.carried_slots(init, &[])?;
        let (cond_region, body_region) = (&inst.regions[0], &inst.regions[1]);
        let outer = self.enter_region();
        let (mut cond_body, cond) = self.nested(|l| {
            for (slot, &arg) in slots.iter().zip(&cond_region.args) {
                l.set_lval(arg, slot.clone());
                l.anchored[arg.index()] = true;
            }
            let yields = l.region(cond_region)?.unwrap_or_default();
            let c = yields
                .first()
                .ok_or_else(|| l.internal("while condition yields nothing"))?;
            // Copy, so that the body cannot change the condition register it tests.
            let r = l.lval(*c)?.regs[0];
            Ok(l.set(ScalarType::Bool, Expr::Copy(r)))
        })?;
        let (body, ()) = self.nested(|l| {
            for (slot, &arg) in slots.iter().zip(&body_region.args) {
                l.set_lval(arg, slot.clone());
                l.anchored[arg.index()] = true;
            }
            let yields = l.region(body_region)?.unwrap_or_default();
            l.assign_slots(inst, &slots, &yields, &[])
        })?;
        self.close_loop_region(&outer, &mut cond_body);
        self.emit(Stmt::While { cond_body, cond, body });
        Ok(slots)
    }

    /// Ends a loop's statements (`first`: where an iteration starts): a barrier there when
    /// one iteration's global writes may meet another's accesses; what the loop leaves
    /// pending joins the state after it.
    fn close_loop_region(&mut self, outer: &super::ordering::Accesses, first: &mut Vec<Stmt>) {
        let body = self.leave_region(outer);
        if Self::loop_needs_barrier(&body) {
            first.insert(0, Stmt::Barrier);
        }
        self.merge_region(&body);
    }
}

/// The loop of a register pipeline's trips whose prefetches all hold (`fast_cond`, computed
/// by `fast_cond_body`), its prefetches unpredicated, before the loop of the other trips.
fn unmasked_trips_loop<'k>(
    l: &mut Lowerer<'k>,
    iteration: &mut impl FnMut(&mut Lowerer<'k>, usize) -> Result<(), LowerError>,
    unroll: usize,
    fast_cond_body: Vec<Stmt>,
    fast_cond: crate::thread::Reg,
) -> Result<(), LowerError> {
    let outer = l.enter_region();
    l.unmasked_prefetch = true;
    let body = l.nested(|l| (0..unroll).try_for_each(|set| iteration(l, set)));
    l.unmasked_prefetch = false;
    let (mut body, ()) = body?;
    l.close_loop_region(&outer, &mut body);
    l.emit(Stmt::While {
        cond_body: fast_cond_body,
        cond: fast_cond,
        body,
    });
    Ok(())
}
