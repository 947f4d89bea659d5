//! Structured control flow: `for` over a range with loop-carried values, `if`/`else` with
//! results, and `while`. Bodies are closures; the values they return are the region's
//! yields, which must keep the types of the carried values.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{Op, SourceLoc, ValueId};
use crate::types::{ScalarType, Type};

impl KernelBuilder {
    /// `for i in range(start, end, step)` with loop-carried values, as Triton's `for` loop.
    ///
    /// `body` gets the induction variable and the carried values and returns their next
    /// values; the result is the carried values after the last iteration. A negative `step`
    /// counts down, stopping before `end`. Bounds are `i32` unless one of them is `i64`.
    /// A loop unrolled while the kernel is built (Triton's `tl.static_range`) is a Rust
    /// `for` loop around the builder calls.
    #[track_caller]
    pub fn for_range<'b>(
        &'b self,
        start: impl Into<Operand<'b>>,
        end: impl Into<Operand<'b>>,
        step: impl Into<Operand<'b>>,
        init: &[Value<'b>],
        body: impl FnOnce(Value<'b>, &[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        self.for_range_in(None, start, end, step, init, body, SourceLoc::caller())
    }

    /// [`Self::for_range`] with its loads pipelined `num_stages` deep, as Triton's
    /// `for i in tl.range(start, end, step, num_stages=...)`: where the target has
    /// asynchronous copies (CUDA from sm_80), each load of the body whose address the loop
    /// can compute ahead is issued `num_stages - 1` iterations early into shared memory, so
    /// that it stays in flight through the body's barriers and stores; elsewhere the loop
    /// runs as [`Self::for_range`] does. `num_stages` runs from 1 (no copy ahead) to
    /// [`crate::ir::MAX_LOOP_STAGES`]; the builder reports others.
    ///
    /// As with Triton's, the loads of later iterations are issued before this iteration's
    /// stores: results are those of [`Self::for_range`] unless an iteration loads what an
    /// earlier one of the same loop stored (a recurrence through memory), which such a
    /// loop must not do.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn for_range_staged<'b>(
        &'b self,
        start: impl Into<Operand<'b>>,
        end: impl Into<Operand<'b>>,
        step: impl Into<Operand<'b>>,
        num_stages: u32,
        init: &[Value<'b>],
        body: impl FnOnce(Value<'b>, &[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        self.for_range_in(Some(num_stages), start, end, step, init, body, SourceLoc::caller())
    }

    #[allow(clippy::too_many_arguments)]
    fn for_range_in<'b>(
        &'b self,
        num_stages: Option<u32>,
        start: impl Into<Operand<'b>>,
        end: impl Into<Operand<'b>>,
        step: impl Into<Operand<'b>>,
        init: &[Value<'b>],
        body: impl FnOnce(Value<'b>, &[Value<'b>]) -> Vec<Value<'b>>,
        loc: SourceLoc,
    ) -> Vec<Value<'b>> {
        let init: Vec<Value<'b>> = init.iter().map(|&v| self.adopt("for", v, loc)).collect();
        let init_types: Vec<Type> = init.iter().map(|v| v.ty()).collect();
        let bounds = self.loop_bounds(start.into(), end.into(), step.into(), loc);
        let init_ids: Vec<ValueId> = init.iter().map(|v| v.id).collect();
        let failed = bounds.is_none() || self.check_operands("for", loc, &init_ids).is_err();
        let (start, end, step, iv_type) = bounds.unwrap_or_else(|| {
            let p = self.poison(Type::scalar(ScalarType::I32)).id;
            (p, p, p, Type::scalar(ScalarType::I32))
        });
        let inst = self.append_shell(
            Op::For {
                start,
                end,
                step,
                init: init_ids.clone(),
                num_stages,
            },
            loc,
        );
        let mut arg_types = vec![iv_type];
        arg_types.extend(&init_types);
        let args = self.open_region(inst, 0, &arg_types);
        let yields = body(args[0], &args[1..]);
        self.finish_region("for", &yields, &init_types, "loop-carried value", loc);
        self.close_region(inst);
        let results = self.set_results(inst, &init_types);
        if failed {
            return results.iter().map(|v| self.poison(v.ty())).collect();
        }
        results
    }

    /// `for i in range(start, end, step)` without carried values.
    #[track_caller]
    pub fn for_each<'b>(
        &'b self,
        start: impl Into<Operand<'b>>,
        end: impl Into<Operand<'b>>,
        step: impl Into<Operand<'b>>,
        body: impl FnOnce(Value<'b>),
    ) {
        self.for_range(start, end, step, &[], |i, _| {
            body(i);
            vec![]
        });
    }

    /// `if cond { then } else { otherwise }` where both branches return values of the same
    /// types; returns them.
    #[track_caller]
    pub fn if_else<'b>(
        &'b self,
        cond: Value<'b>,
        then: impl FnOnce() -> Vec<Value<'b>>,
        otherwise: impl FnOnce() -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        let loc = SourceLoc::caller();
        let cond = self.adopt("if", cond, loc);
        let mut failed = self.check_operands("if", loc, &[cond.id]).is_err();
        if !failed && cond.ty() != Type::scalar(ScalarType::Bool) {
            self.report(
                "if",
                loc,
                format!("the condition must be an i1 scalar, got {}", cond.ty()),
            );
            failed = true;
        }
        let inst = self.append_shell(Op::If { cond: cond.id }, loc);
        self.open_region(inst, 0, &[]);
        let then_values = then();
        let types: Vec<Type> = then_values.iter().map(|v| v.ty()).collect();
        self.finish_region("if", &then_values, &types, "result", loc);
        self.close_region(inst);
        self.open_region(inst, 1, &[]);
        let else_values = otherwise();
        self.finish_region("if", &else_values, &types, "else-branch result", loc);
        self.close_region(inst);
        let results = self.set_results(inst, &types);
        if failed {
            return results.iter().map(|v| self.poison(v.ty())).collect();
        }
        results
    }

    /// `if cond { then }` without results.
    #[track_caller]
    pub fn if_then<'b>(&'b self, cond: Value<'b>, then: impl FnOnce()) {
        self.if_else(
            cond,
            || {
                then();
                vec![]
            },
            Vec::new,
        );
    }

    /// `while cond(carried) { carried = body(carried) }`; returns the final carried values.
    #[track_caller]
    pub fn while_loop<'b>(
        &'b self,
        init: &[Value<'b>],
        cond: impl FnOnce(&[Value<'b>]) -> Value<'b>,
        body: impl FnOnce(&[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        let loc = SourceLoc::caller();
        let init: Vec<Value<'b>> = init.iter().map(|&v| self.adopt("while", v, loc)).collect();
        let init_ids: Vec<ValueId> = init.iter().map(|v| v.id).collect();
        let failed = self.check_operands("while", loc, &init_ids).is_err();
        let types: Vec<Type> = init.iter().map(|v| v.ty()).collect();
        let inst = self.append_shell(Op::While { init: init_ids }, loc);
        let args = self.open_region(inst, 0, &types);
        let c = cond(&args);
        self.finish_region("while", &[c], &[Type::scalar(ScalarType::Bool)], "condition", loc);
        self.close_region(inst);
        let args = self.open_region(inst, 1, &types);
        let next = body(&args);
        self.finish_region("while", &next, &types, "loop-carried value", loc);
        self.close_region(inst);
        let results = self.set_results(inst, &types);
        if failed {
            return results.iter().map(|v| self.poison(v.ty())).collect();
        }
        results
    }

    /// Checks a region's yields against the expected types and ends it with a `yield`.
    pub(super) fn finish_region(&self, op: &str, values: &[Value<'_>], expected: &[Type], what: &str, loc: SourceLoc) {
        let values: Vec<Value<'_>> = values.iter().map(|&v| self.adopt(op, v, loc)).collect();
        let ids: Vec<ValueId> = values.iter().map(|v| v.id).collect();
        let mut ok = self.check_operands(op, loc, &ids).is_ok();
        if ok && values.len() != expected.len() {
            self.report(
                op,
                loc,
                format!("the body gives {} values, expected {}", values.len(), expected.len()),
            );
            ok = false;
        }
        if ok {
            for (i, (v, t)) in values.iter().zip(expected).enumerate() {
                if v.ty() != *t {
                    self.report(op, loc, format!("{what} {i} changes type from {t} to {}", v.ty()));
                    ok = false;
                }
            }
        }
        // Keep the region well-formed for the verifier even after an error.
        let values = if ok {
            ids
        } else {
            expected.iter().map(|&t| self.poison(t).id).collect()
        };
        self.append_shell(Op::Yield { values }, loc);
    }

    /// Converts loop bounds to one integer type: `i32`, or `i64` if any bound is.
    fn loop_bounds(
        &self,
        start: Operand<'_>,
        end: Operand<'_>,
        step: Operand<'_>,
        loc: SourceLoc,
    ) -> Option<(ValueId, ValueId, ValueId, Type)> {
        let ops = [start, end, step].map(|o| self.operand_value("for", o, loc));
        let ids: Vec<ValueId> = ops.iter().map(|v| v.id).collect();
        self.check_operands("for", loc, &ids).ok()?;
        let mut s = ScalarType::I32;
        for v in &ops {
            let t = v.ty();
            match t.scalar_type() {
                Some(x) if t.is_scalar() && x.is_int() => {
                    if x.bits() == 64 {
                        s = ScalarType::I64
                    }
                }
                _ => {
                    self.report("for", loc, format!("loop bounds must be integer scalars, got {t}"));
                    return None;
                }
            }
        }
        let [a, b, c] = ops.map(|v| self.cast_to(v, s, loc).id);
        Some((a, b, c, Type::scalar(s)))
    }
}
