//! `device_print`: each element is printed once, by the thread that owns it (copies held by
//! other threads stay silent), with its coordinates in the block. `device_assert` is left
//! out of lowered code (the interpreter checks it).

use super::{LowerError, Lowerer};
use crate::ir::{CmpOp, Inst, Op};
use crate::thread::{Expr, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    pub(crate) fn print(&mut self, inst: &Inst) -> Result<(), LowerError> {
        let Op::Print { prefix, values } = &inst.op else {
            return Err(self.internal(format!("`{}` is not device_print", inst.op.name())));
        };
        let Some(&first) = values.first() else {
            // Nothing to print per element: one line per program, from thread 0.
            let (tid, _, _) = self.thread_ids();
            let zero = self.i32c(0);
            let pred = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, tid, zero));
            self.emit(Stmt::Print {
                prefix: prefix.clone(),
                coords: vec![],
                values: vec![],
                pred: Some(pred),
                program: None,
            });
            return Ok(());
        };
        let shape = self.k.ty(first).shape;
        let layout = self.elementwise_layout(values, shape);
        let regs = values
            .iter()
            .map(|&v| self.ensure(v, layout))
            .collect::<Result<Vec<_>, _>>()?;
        let map = layout.map(shape);
        let pred = self.owner(&map);
        for i in 0..map.len {
            let coords = (0..shape.rank())
                .map(|vd| self.coord(&map, i, layout.blocked_dim(vd)))
                .collect();
            self.emit(Stmt::Print {
                prefix: prefix.clone(),
                coords,
                values: regs.iter().map(|r| r[i]).collect(),
                pred,
                program: None,
            });
        }
        Ok(())
    }
}
