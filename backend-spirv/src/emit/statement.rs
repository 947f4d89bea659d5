//! Statements: the per-thread IR's statements as naga's, predicated ones inside an `if`,
//! `while` loops as `loop`s left by a `break`, and the `umulhi` and `*` pairs of one
//! 64-bit product.

use super::*;

impl Cx<'_> {
    pub(super) fn stmts(&mut self, stmts: &[Stmt]) -> R<()> {
        // `umulhi(a, b)` and `a * b` of the same 32-bit registers from one 64-bit product
        // where the device has 64-bit integers (`rutile_ir::thread::product_pairs`).
        let pairs = (self.int64 && self.wide_products).then(|| product_pairs(self.k, stmts));
        let mut products = Vec::new();
        for (i, s) in stmts.iter().enumerate() {
            match pairs.as_ref().and_then(|p| p[i]) {
                Some(role) => self.product_pair(s, role, &mut products),
                None => self.statement(s)?,
            }
        }
        Ok(())
    }

    /// Statement `s` of a product pair: the pair's first computes the 64-bit product of its
    /// operands (a new slot of `products`), and each takes its own half of it.
    fn product_pair(&mut self, s: &Stmt, role: ProductRole, products: &mut Vec<H>) {
        let Stmt::Set { dst, .. } = s else {
            unreachable!("a product pair is of `Set`s")
        };
        let (slot, high) = match role {
            ProductRole::First { slot, a, b, high } => {
                let (x, y) = (self.read(a), self.read(b));
                let product = self.wide_product(self.k.reg_type(a), x, y);
                debug_assert_eq!(products.len(), slot);
                products.push(product);
                (slot, high)
            }
            ProductRole::Second { slot, high } => (slot, high),
        };
        let half = self.product_half(self.k.reg_type(*dst), products[slot], high);
        self.write(*dst, half);
    }

    /// Runs `f` where `pred` holds (always when `None`).
    pub(super) fn predicated(&mut self, pred: Option<Reg>, f: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
        match pred {
            None => f(self),
            Some(p) => {
                let condition = self.read(p);
                let accept = self.nested(f)?;
                self.stmt(Statement::If {
                    condition,
                    accept,
                    reject: Block::new(),
                });
                Ok(())
            }
        }
    }

    fn statement(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Set { dst, expr } => {
                let v = self.expr(self.k.reg_type(*dst), expr)?;
                self.write(*dst, v);
            }
            // The cache modifier is a hint naga cannot express (SPIR-V's `Nontemporal`
            // memory operand): `crate::hints` adds it to the words naga writes.
            Stmt::Load {
                dsts, mem, index, pred, ..
            } => self.predicated(*pred, |cx| {
                let base = cx.index_u32(*index);
                if cx.holding(*mem) == Holding::PackedF16 {
                    cx.load_packed(*mem, base, dsts);
                    return Ok(());
                }
                if matches!(cx.holding(*mem), Holding::Words(_) | Holding::AtomicWords) {
                    cx.load_words(*mem, base, dsts);
                    return Ok(());
                }
                if cx.holding(*mem) == Holding::Vec4 && dsts.len() % 4 == 0 {
                    // Whole vectors (the index is aligned: see `Stmt::Load`).
                    for (c, chunk) in dsts.chunks(4).enumerate() {
                        let p = cx.vector_at(*mem, base, c as u32);
                        let v = cx.load(p);
                        for (j, &d) in chunk.iter().enumerate() {
                            let x = cx.index(v, j as u32);
                            cx.write(d, x);
                        }
                    }
                    return Ok(());
                }
                for (i, &d) in dsts.iter().enumerate() {
                    let p = cx.element(*mem, base, i as u32);
                    let mut v = cx.load(p);
                    if cx.holding(*mem) == Holding::AtomicF32Bits {
                        v = cx.as_(v, ScalarKind::Float, None);
                    }
                    cx.write(d, v);
                }
                Ok(())
            })?,
            Stmt::Store {
                values,
                mem,
                index,
                pred,
            } if self.combine_words
                && self.holding(*mem) == Holding::AtomicWords
                && !self.covers_words(*mem, values.len()) =>
            {
                self.store_part_combined(*mem, *index, values, *pred)?
            }
            Stmt::Store {
                values,
                mem,
                index,
                pred,
            } => self.predicated(*pred, |cx| {
                let base = cx.index_u32(*index);
                if cx.holding(*mem) == Holding::PackedF16 {
                    cx.store_packed(*mem, base, values);
                    return Ok(());
                }
                if matches!(cx.holding(*mem), Holding::Words(_) | Holding::AtomicWords) {
                    cx.store_words(*mem, base, values);
                    return Ok(());
                }
                if cx.holding(*mem) == Holding::Vec4 && values.len() % 4 == 0 {
                    for (c, chunk) in values.chunks(4).enumerate() {
                        let components: Vec<H> = chunk.iter().map(|&r| cx.read(r)).collect();
                        let ty = cx.buffer(*mem).elem_ty;
                        let value = cx.e(Expression::Compose { ty, components });
                        let pointer = cx.vector_at(*mem, base, c as u32);
                        cx.stmt(Statement::Store { pointer, value });
                    }
                    return Ok(());
                }
                for (i, &r) in values.iter().enumerate() {
                    let mut value = cx.read(r);
                    if cx.holding(*mem) == Holding::AtomicF32Bits {
                        value = cx.as_(value, ScalarKind::Uint, None);
                    }
                    let pointer = cx.element(*mem, base, i as u32);
                    cx.stmt(Statement::Store { pointer, value });
                }
                Ok(())
            })?,
            Stmt::Atomic {
                dst,
                op,
                param,
                index,
                value,
                pred,
                ..
            } => self.predicated(*pred, |cx| cx.atomic(*dst, *op, *param, *index, *value))?,
            Stmt::AtomicCas {
                dst,
                param,
                index,
                cmp,
                value,
                pred,
                ..
            } => self.predicated(*pred, |cx| cx.atomic_cas(*dst, *param, *index, *cmp, *value))?,
            Stmt::CoopLoad { .. }
            | Stmt::CoopStore { .. }
            | Stmt::CoopMulAdd { .. }
            | Stmt::CoopMul { .. }
            | Stmt::CoopZero { .. } => self.coop_stmt(s),
            Stmt::Barrier => self.stmt(Statement::ControlBarrier(self.barrier)),
            Stmt::Print {
                prefix,
                coords,
                values,
                pred,
                program,
            } => self.print(prefix, coords, values, *pred, *program)?,
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let condition = self.read(*cond);
                let accept = self.nested(|cx| cx.stmts(then_body))?;
                let reject = self.nested(|cx| cx.stmts(else_body))?;
                self.stmt(Statement::If {
                    condition,
                    accept,
                    reject,
                });
            }
            Stmt::While { cond_body, cond, body } => {
                let body = self.nested(|cx| {
                    cx.stmts(cond_body)?;
                    let condition = cx.read(*cond);
                    let mut reject = Block::new();
                    reject.push(Statement::Break, SPAN);
                    cx.stmt(Statement::If {
                        condition,
                        accept: Block::new(),
                        reject,
                    });
                    cx.stmts(body)
                })?;
                self.loop_until_break(body);
            }
            Stmt::Comment(_) => {}
            // What the lowering makes only for PTX targets (`scan` refuses it first).
            other => {
                return Err(nvidia_only(self.k, other)
                    .unwrap_or_else(|| invalid(self.k, format!("a statement SPIR-V has no form for: {other:?}"))))
            }
        }
        Ok(())
    }
}
