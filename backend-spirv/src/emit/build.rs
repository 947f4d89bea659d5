//! Building blocks of the translation: types, expressions appended in `Emit` ranges,
//! statements and nested blocks, literals, and the operations that fold on literals.

use super::*;

impl Cx<'_> {
    pub(super) fn ty(&mut self, inner: TypeInner) -> Handle<Type> {
        self.module.types.insert(Type { name: None, inner }, SPAN)
    }

    pub(super) fn scalar_ty(&mut self, t: ScalarType) -> Handle<Type> {
        self.ty(TypeInner::Scalar(naga_scalar(t)))
    }

    /// Appends an expression, inside the pending `Emit` range unless it needs none.
    pub(super) fn e(&mut self, e: Expression) -> H {
        if e.needs_pre_emit() {
            self.flush();
        } else if self.emit_start.is_none() {
            self.emit_start = Some(self.f.expressions.len());
        }
        self.f.expressions.append(e, SPAN)
    }

    /// Closes the pending `Emit` range.
    pub(super) fn flush(&mut self) {
        if let Some(start) = self.emit_start.take() {
            let range = self.f.expressions.range_from(start);
            self.block.push(Statement::Emit(range), SPAN);
        }
    }

    /// An expression that a following statement defines (atomic and subgroup results).
    pub(super) fn result(&mut self, e: Expression) -> H {
        self.flush();
        self.f.expressions.append(e, SPAN)
    }

    pub(super) fn stmt(&mut self, s: Statement) {
        self.flush();
        self.block.push(s, SPAN);
    }

    /// A loop around `body`, left only by the `break` statements `body` holds.
    pub(super) fn loop_until_break(&mut self, body: Block) {
        self.stmt(Statement::Loop {
            body,
            continuing: Block::new(),
            break_if: None,
        });
    }

    /// Builds a nested block with `f`.
    pub(super) fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        self.flush();
        let outer = std::mem::take(&mut self.block);
        let r = f(self);
        self.flush();
        let inner = std::mem::replace(&mut self.block, outer);
        r.map(|_| inner)
    }

    pub(super) fn lit(&mut self, l: naga::Literal) -> H {
        self.e(Expression::Literal(l))
    }

    /// A literal, where a non-finite float becomes a bit pattern converted at run time.
    pub(super) fn any_lit(&mut self, l: naga::Literal) -> H {
        match l {
            naga::Literal::F32(v) if !v.is_finite() => self.float_lit(ScalarType::F32, v as f64),
            naga::Literal::F64(v) if !v.is_finite() => self.float_lit(ScalarType::F64, v),
            l => self.lit(l),
        }
    }

    pub(super) fn u32c(&mut self, v: u32) -> H {
        self.lit(naga::Literal::U32(v))
    }

    pub(super) fn int_lit(&mut self, t: ScalarType, v: i64) -> H {
        self.lit(match t {
            ScalarType::Bool => naga::Literal::Bool(v != 0),
            ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => naga::Literal::I32(v as i32),
            ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => naga::Literal::U32(v as u32),
            ScalarType::I64 => naga::Literal::I64(v),
            ScalarType::U64 => naga::Literal::U64(v as u64),
            ScalarType::F16 => naga::Literal::F16(half::f16::from_f64(t.round(v as f64))),
            ScalarType::F32 => naga::Literal::F32(v as f32),
            ScalarType::BF16
            | ScalarType::F8E4M3
            | ScalarType::F8E5M2
            | ScalarType::F8E4M3B15
            | ScalarType::F8E4M3Fnuz
            | ScalarType::F8E5M2Fnuz => naga::Literal::F32(t.round(v as f64) as f32),
            ScalarType::F64 => naga::Literal::F64(v as f64),
        })
    }

    /// A float constant of type `t`; infinities and NaNs (which naga literals cannot hold) are
    /// bit patterns converted at run time.
    pub(super) fn float_lit(&mut self, t: ScalarType, v: f64) -> H {
        let l = match t {
            // Rounded once (`ScalarType::round`), then exact in `half`'s and f32's types.
            ScalarType::F16 => {
                let h = half::f16::from_f64(t.round(v));
                h.is_finite().then_some(naga::Literal::F16(h))
            }
            ScalarType::F32 => (v as f32).is_finite().then_some(naga::Literal::F32(v as f32)),
            ScalarType::BF16
            | ScalarType::F8E4M3
            | ScalarType::F8E5M2
            | ScalarType::F8E4M3B15
            | ScalarType::F8E4M3Fnuz
            | ScalarType::F8E5M2Fnuz => {
                let b = t.round(v) as f32;
                b.is_finite().then_some(naga::Literal::F32(b))
            }
            ScalarType::F64 => v.is_finite().then_some(naga::Literal::F64(v)),
            other => unreachable!("{other} float literal"),
        };
        if let Some(l) = l {
            return self.lit(l);
        }
        let bits = self.u32c((v as f32).to_bits());
        let x = self.as_(bits, ScalarKind::Float, None);
        if t == ScalarType::F32 || held_in_f32(t) {
            x
        } else {
            self.as_(x, ScalarKind::Float, Some(t.size_bytes() as u8))
        }
    }

    pub(super) fn zero(&mut self, t: ScalarType) -> H {
        self.int_lit(t, 0)
    }

    pub(super) fn literal_of(&self, h: H) -> Option<naga::Literal> {
        match self.f.expressions[h] {
            Expression::Literal(l) => Some(l),
            _ => None,
        }
    }

    // Operations on literals only are folded here: naga's WGSL reader evaluates them and
    // rejects what overflows (e.g. `i32(-2147483648) / -1i`), where the IR wraps.

    pub(super) fn bin(&mut self, op: Bo, left: H, right: H) -> H {
        if let (Some(a), Some(b)) = (self.literal_of(left), self.literal_of(right)) {
            if let Some(l) = fold_binary(op, a, b) {
                return self.any_lit(l);
            }
        }
        self.e(Expression::Binary { op, left, right })
    }

    /// Knuth's two-sum: `s = a + b` and its exact rounding error `e` (six additions, the
    /// operands in no particular order of magnitude; exact where each rounds once).
    pub(super) fn two_sum(&mut self, a: H, b: H) -> (H, H) {
        let s = self.bin(Bo::Add, a, b);
        let bb = self.bin(Bo::Subtract, s, a);
        let aa = self.bin(Bo::Subtract, s, bb);
        let da = self.bin(Bo::Subtract, a, aa);
        let db = self.bin(Bo::Subtract, b, bb);
        let e = self.bin(Bo::Add, da, db);
        (s, e)
    }

    pub(super) fn un(&mut self, op: Uo, expr: H) -> H {
        if let Some(a) = self.literal_of(expr) {
            if let Some(l) = fold_unary(op, a) {
                return self.lit(l);
            }
        }
        self.e(Expression::Unary { op, expr })
    }

    pub(super) fn select(&mut self, condition: H, accept: H, reject: H) -> H {
        if let Some(naga::Literal::Bool(c)) = self.literal_of(condition) {
            return if c { accept } else { reject };
        }
        self.e(Expression::Select {
            condition,
            accept,
            reject,
        })
    }

    pub(super) fn math(&mut self, fun: Mf, args: &[H]) -> H {
        use naga::Literal as L;
        if let [a] = *args {
            match (fun, self.literal_of(a)) {
                (Mf::Abs, Some(L::I32(v))) => return self.lit(L::I32(v.wrapping_abs())),
                (Mf::Abs, Some(L::I64(v))) => return self.lit(L::I64(v.wrapping_abs())),
                (Mf::Abs, Some(L::F32(v))) => return self.lit(L::F32(v.abs())),
                (Mf::Abs, Some(L::F64(v))) => return self.lit(L::F64(v.abs())),
                _ => {}
            }
        }
        self.e(Expression::Math {
            fun,
            arg: args[0],
            arg1: args.get(1).copied(),
            arg2: args.get(2).copied(),
            arg3: None,
        })
    }

    pub(super) fn as_(&mut self, expr: H, kind: ScalarKind, convert: Option<u8>) -> H {
        if let Expression::Literal(l) = self.f.expressions[expr] {
            if let Some(folded) = fold_as(l, kind, convert) {
                return self.lit(folded);
            }
        }
        self.e(Expression::As { expr, kind, convert })
    }

    pub(super) fn load(&mut self, pointer: H) -> H {
        self.e(Expression::Load { pointer })
    }

    pub(super) fn index(&mut self, base: H, index: u32) -> H {
        self.e(Expression::AccessIndex { base, index })
    }
}
