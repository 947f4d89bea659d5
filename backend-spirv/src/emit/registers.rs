//! Registers: a function variable `r{index}` per register (each `Set` a store, each use a
//! load), except those set exactly once, at the top level, unpredicated and before any use
//! (`Scan::value_reg`), which are plain named expressions; and the temporary variables
//! other translations need.

use super::*;

impl Cx<'_> {
    fn local_ptr(&mut self, r: Reg) -> H {
        if let Some(p) = self.local[r.index()] {
            return p;
        }
        let t = self.k.reg_type(r);
        let ty = self.scalar_ty(t);
        // Zero-initialized, so that a register read before any write is deterministic.
        let init = self.e(Expression::Literal(zero_literal(t)));
        let var = self.f.local_variables.append(
            LocalVariable {
                name: Some(format!("r{}", r.index())),
                ty,
                init: Some(init),
            },
            SPAN,
        );
        let p = self.e(Expression::LocalVariable(var));
        self.local[r.index()] = Some(p);
        p
    }

    pub(super) fn read(&mut self, r: Reg) -> H {
        if let Some(v) = self.value[r.index()] {
            return v;
        }
        let p = self.local_ptr(r);
        self.load(p)
    }

    pub(super) fn write(&mut self, r: Reg, v: H) {
        if self.value_reg[r.index()] {
            if !self.f.expressions[v].needs_pre_emit() && !self.f.named_expressions.contains_key(&v) {
                self.f.named_expressions.insert(v, format!("r{}", r.index()));
            }
            self.value[r.index()] = Some(v);
        } else {
            let pointer = self.local_ptr(r);
            self.stmt(Statement::Store { pointer, value: v });
        }
    }

    pub(super) fn new_temp(&mut self, t: ScalarType, prefix: &str) -> H {
        let ty = self.scalar_ty(t);
        self.temps += 1;
        let var = self.f.local_variables.append(
            LocalVariable {
                name: Some(format!("{prefix}{}", self.temps)),
                ty,
                init: None,
            },
            SPAN,
        );
        self.e(Expression::LocalVariable(var))
    }
}
