//! The verifier: checks a whole kernel — every operand defined before use and in scope,
//! every op well-typed by [`crate::typing`], regions shaped as their ops require. Kernels
//! made by the builder pass by construction; the verifier guards IR made or changed by
//! passes, and is run on every built kernel.

use crate::error::{BuildError, Diagnostic};
use crate::ir::{Inst, Kernel, Op, Region, ValueDef, ValueId, MAX_LOOP_STAGES};
use crate::types::{ScalarType, Type};

/// Checks `kernel`, returning every problem found.
pub fn verify(kernel: &Kernel) -> Result<(), BuildError> {
    let mut v = Verifier {
        kernel,
        defined: vec![false; kernel.values.len()],
        diagnostics: Vec::new(),
    };
    for (i, p) in kernel.params.iter().enumerate() {
        let ok = kernel
            .values
            .try_get(p.value)
            .is_some_and(|d| d.def == ValueDef::Param(i as u32) && d.ty == p.ty);
        if !ok || !p.ty.is_scalar() {
            v.diagnostics.push(Diagnostic {
                op: "arg".into(),
                loc: crate::ir::SourceLoc {
                    file: "<kernel>",
                    line: 0,
                    column: 0,
                },
                message: format!("parameter `{}` is malformed", p.name),
            });
        } else {
            v.defined[p.value.index()] = true;
        }
    }
    v.region(&kernel.body, &[], None);
    for h in &kernel.hints {
        let ty = kernel.values.try_get(h.value).map(|d| d.ty);
        let integer = ty.is_some_and(|t| t.scalar_type().is_some_and(|s| s.is_int()));
        let dims = ty.map_or(0, |t| t.shape.dims().len());
        let numbers_fit = h
            .per_dim
            .iter()
            .enumerate()
            .all(|(d, &n)| n >= 1 && (d < dims.max(1) || n == 1));
        if !integer || !numbers_fit {
            v.diagnostics.push(Diagnostic {
                op: h.kind.name().into(),
                loc: h.loc,
                message: format!(
                    "hint on %{} is malformed (type {ty:?}, numbers {:?})",
                    h.value.index(),
                    h.per_dim
                ),
            });
        }
    }
    if v.diagnostics.is_empty() {
        Ok(())
    } else {
        Err(BuildError {
            kernel: kernel.name.clone(),
            diagnostics: v.diagnostics,
        })
    }
}

struct Verifier<'k> {
    kernel: &'k Kernel,
    /// Values defined so far in the enclosing scopes.
    defined: Vec<bool>,
    diagnostics: Vec<Diagnostic>,
}

impl Verifier<'_> {
    fn error(&mut self, inst: &Inst, message: String) {
        self.diagnostics.push(Diagnostic {
            op: inst.op.name().into(),
            loc: inst.loc,
            message,
        });
    }

    /// Checks a region whose arguments must have `arg_types` and whose yield (if `yields`
    /// is `Some`) must have those types. Values defined inside go out of scope at the end.
    fn region(&mut self, region: &Region, arg_types: &[Type], yields: Option<(&Inst, &[Type])>) {
        let mut scope: Vec<ValueId> = Vec::new();
        for (i, &a) in region.args.iter().enumerate() {
            if arg_types.get(i).is_some_and(|t| *t == self.kernel.ty(a)) {
                self.defined[a.index()] = true;
                scope.push(a);
            }
        }
        if region.args.len() != arg_types.len() || scope.len() != arg_types.len() {
            if let Some((inst, _)) = yields {
                self.error(inst, format!("region arguments should have types {arg_types:?}"));
            }
        }
        for (pos, &id) in region.insts.iter().enumerate() {
            let Some(inst) = self.kernel.insts.try_get(id) else {
                continue;
            };
            let is_last = pos + 1 == region.insts.len();
            if let Op::Yield { values } = &inst.op {
                if !is_last {
                    self.error(inst, "a yield must end its region".into());
                }
                self.check_defined(inst);
                match yields {
                    Some((_, want)) => {
                        let got: Vec<Type> = values.iter().map(|&v| self.kernel.ty(v)).collect();
                        if got != want {
                            self.error(inst, format!("yields {got:?}, expected {want:?}"));
                        }
                    }
                    None => self.error(inst, "the kernel body cannot yield".into()),
                }
                continue;
            }
            self.check_defined(inst);
            self.inst(inst);
            for &r in &inst.results {
                self.defined[r.index()] = true;
                scope.push(r);
            }
        }
        let ends_with_yield = region
            .insts
            .last()
            .and_then(|&i| self.kernel.insts.try_get(i))
            .is_some_and(|i| matches!(i.op, Op::Yield { .. }));
        if let Some((inst, want)) = yields {
            if !ends_with_yield {
                self.error(inst, format!("a region must end with a yield of {} values", want.len()));
            }
        }
        for v in scope {
            self.defined[v.index()] = false;
        }
    }

    fn check_defined(&mut self, inst: &Inst) {
        for v in inst.op.operands() {
            if v.index() >= self.defined.len() || !self.defined[v.index()] {
                self.error(
                    inst,
                    format!("operand %{} is not defined before this use, or not in scope", v.index()),
                );
            }
        }
    }

    fn inst(&mut self, inst: &Inst) {
        let k = self.kernel;
        let results: Vec<Type> = inst.results.iter().map(|&r| k.ty(r)).collect();
        let ty = |v: ValueId| {
            k.values
                .try_get(v)
                .map(|d| d.ty)
                .unwrap_or(Type::scalar(ScalarType::Bool))
        };
        match &inst.op {
            Op::For {
                start,
                end,
                step,
                init,
                num_stages,
            } => {
                if let Some(s) = num_stages.filter(|s| !(1..=MAX_LOOP_STAGES).contains(s)) {
                    self.error(inst, format!("num_stages must be 1 to {MAX_LOOP_STAGES}, got {s}"));
                }
                let iv = ty(*start);
                let int_scalar = iv.is_scalar() && iv.scalar_type().is_some_and(|s| s.is_int());
                if !int_scalar || ty(*end) != iv || ty(*step) != iv {
                    self.error(
                        inst,
                        format!(
                            "bounds must be integer scalars of one type, got {iv}, {}, {}",
                            ty(*end),
                            ty(*step)
                        ),
                    );
                }
                let carried: Vec<Type> = init.iter().map(|&v| ty(v)).collect();
                if results != carried {
                    self.error(inst, "results must have the types of the carried values".into());
                }
                let mut args = vec![iv];
                args.extend(&carried);
                self.regions(inst, &[(&args, &carried)]);
            }
            Op::If { cond } => {
                if ty(*cond) != Type::scalar(ScalarType::Bool) {
                    self.error(inst, format!("the condition must be an i1 scalar, got {}", ty(*cond)));
                }
                self.regions(inst, &[(&[], &results), (&[], &results)]);
            }
            Op::While { init } => {
                let carried: Vec<Type> = init.iter().map(|&v| ty(v)).collect();
                if results != carried {
                    self.error(inst, "results must have the types of the carried values".into());
                }
                self.regions(
                    inst,
                    &[(&carried, &[Type::scalar(ScalarType::Bool)]), (&carried, &carried)],
                );
            }
            // ---- scans and reductions with a combine region ----
            op @ (Op::Scan { values, .. } | Op::ReduceCombine { values, .. } | Op::ClusterReduceCombine { values }) => {
                match crate::typing::infer(op, &ty, None) {
                    Ok(want) if want == results => {}
                    Ok(want) => self.error(inst, format!("results should be {want:?}, got {results:?}")),
                    Err(message) => self.error(inst, message),
                }
                let operands: Vec<Type> = values.iter().map(|&v| ty(v)).collect();
                let args = crate::typing::combine_arg_types(&operands);
                let yields = crate::typing::combine_yield_types(&operands);
                self.regions(inst, &[(&args, &yields)]);
                for region in &inst.regions {
                    for &i in &region.insts {
                        let Some(body_inst) = k.insts.try_get(i) else { continue };
                        let types: Vec<Type> = body_inst.results.iter().map(|&r| ty(r)).collect();
                        let operand_types: Vec<Type> = body_inst.op.operands().iter().map(|&v| ty(v)).collect();
                        let problem = crate::typing::check_combine_inst(&body_inst.op, &operand_types, &types).err();
                        if let Some(message) = problem {
                            self.error(body_inst, message);
                        }
                    }
                }
            }
            // ---- end of scans and reductions with a combine region ----
            op => {
                if !inst.regions.is_empty() {
                    self.error(inst, "this op has no regions".into());
                }
                let hint = results.first().copied();
                match crate::typing::infer(op, &ty, hint) {
                    Ok(want) if want == results => {}
                    Ok(want) => self.error(inst, format!("results should be {want:?}, got {results:?}")),
                    Err(message) => self.error(inst, message),
                }
            }
        }
    }

    fn regions(&mut self, inst: &Inst, shapes: &[(&[Type], &[Type])]) {
        if inst.regions.len() != shapes.len() {
            self.error(
                inst,
                format!("expects {} regions, has {}", shapes.len(), inst.regions.len()),
            );
            return;
        }
        for (region, (args, yields)) in inst.regions.iter().zip(shapes) {
            self.region(region, args, Some((inst, yields)));
        }
    }
}
