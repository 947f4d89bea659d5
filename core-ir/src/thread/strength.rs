//! Integer division and remainder by a constant power of two, as shifts and masks.
//!
//! `ptxas` expands `div.s32` and `rem.s32` into its general sequence (a reciprocal
//! estimate and two corrections, about 18 instructions) even when the divisor is an
//! immediate: the compilers that usually feed it (NVVM) reduce such divisions before it
//! sees them. The lowering divides by constants in its own index arithmetic, a pipelined
//! loop's trip count `(iv - start) / step` in every iteration of attention's walk among
//! them, and kernels do too (`offs // BLOCK`, `offs % N`). This pass rewrites each `Set` in
//! a loop of a `/`, `%` or `cdiv` of 32- or 64-bit integers whose divisor is a constant
//! power of two into shifts and masks that give the same result for every dividend (truncating toward
//! zero, the remainder taking the dividend's sign), as C and the IR define them.
//!
//! A register is a constant when only `Set`s write it, each of a literal or of `+ - *` (or
//! a copy) of constants set before it in program order, all giving the same value: the
//! lowering sets some constants once on each side of a warp-specialized kernel. Such a
//! register holds that value wherever it is read, in a kernel whose reads follow a write
//! (as the lowering's do).

use std::collections::HashMap;

use super::{writes, Expr, Reg, RegData, Stmt, ThreadKernel};
use crate::arena::Arena;
use crate::ir::{BinaryOp, Literal};
use crate::types::ScalarType;

/// Rewrites the divisions of `k` by constant powers of two (module comment).
pub fn reduce_constant_divisions(k: &mut ThreadKernel) {
    let constants = constant_integers(k);
    let mut cx = Rewriter {
        regs: &mut k.regs,
        constants,
        made: HashMap::new(),
        prologue: Vec::new(),
    };
    rewrite(&mut k.body, &mut cx, false);
    // The shift amounts and masks, set once at the top of the body, where the backends
    // take such registers as literals.
    let prologue = std::mem::take(&mut cx.prologue);
    k.body.splice(0..0, prologue);
}

/// The integer registers of `k` that hold one value wherever they are read (module
/// comment), normalized to their type (sign- or zero-extended from its width). Also what
/// `halves.rs` knows a shift's amount by.
pub(super) fn constant_integers(k: &ThreadKernel) -> Vec<Option<i64>> {
    let n = k.regs.len();
    let mut value = vec![Value::Unset; n];
    k.walk(&mut |s| {
        if !matches!(s, Stmt::Set { .. }) {
            writes(s, &mut |r| value[r.index()] = Value::Varying);
        }
    });
    // In program order, each `Set` from the values set before it; then again from the
    // values found, until no register's changes: a register read before a later `Set`
    // gave it another value is no constant.
    let mut first = true;
    loop {
        let mut changed = false;
        k.walk(&mut |s| {
            let Stmt::Set { dst, expr } = s else { return };
            let i = dst.index();
            let v = evaluate(k, expr, k.reg_type(*dst), &value);
            let next = match (value[i], v) {
                (Value::Unset, Some(v)) if first => Value::Const(v),
                (Value::Const(a), Some(b)) if a == b => Value::Const(a),
                _ => Value::Varying,
            };
            changed |= next != value[i];
            value[i] = next;
        });
        if !changed && !first {
            break;
        }
        first = false;
    }
    value
        .into_iter()
        .map(|v| match v {
            Value::Const(v) => Some(v),
            _ => None,
        })
        .collect()
}

/// What [`constant_integers`] knows of a register.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    /// No `Set` of it seen yet.
    Unset,
    Const(i64),
    Varying,
}

/// The value `expr` gives a register of type `ty`, where it is a constant.
fn evaluate(k: &ThreadKernel, expr: &Expr, ty: ScalarType, value: &[Value]) -> Option<i64> {
    if !foldable(ty) {
        return None;
    }
    let of = |r: &Reg| match value[r.index()] {
        Value::Const(v) if k.reg_type(*r) == ty => Some(v),
        _ => None,
    };
    match expr {
        Expr::Const(Literal::Int(v)) => Some(normalize(*v, ty)),
        Expr::Copy(a) => of(a),
        Expr::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), a, b) => {
            let (a, b) = (of(a)?, of(b)?);
            let v = match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                _ => a.wrapping_mul(b),
            };
            Some(normalize(v, ty))
        }
        _ => None,
    }
}

fn foldable(ty: ScalarType) -> bool {
    matches!(
        ty,
        ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64
    )
}

/// `v` wrapped to `ty`'s width and extended back as `Literal::Int` holds it.
fn normalize(v: i64, ty: ScalarType) -> i64 {
    match ty {
        ScalarType::I32 => v as i32 as i64,
        ScalarType::U32 => v as u32 as i64,
        _ => v,
    }
}

struct Rewriter<'a> {
    regs: &'a mut Arena<RegData>,
    constants: Vec<Option<i64>>,
    /// The constants this pass set, by type and value.
    made: HashMap<(ScalarType, i64), Reg>,
    prologue: Vec<Stmt>,
}

impl Rewriter<'_> {
    fn reg(&mut self, ty: ScalarType) -> Reg {
        self.regs.append(RegData { ty })
    }

    fn konst(&mut self, ty: ScalarType, v: i64) -> Reg {
        let v = normalize(v, ty);
        if let Some(&r) = self.made.get(&(ty, v)) {
            return r;
        }
        let r = self.reg(ty);
        self.prologue.push(Stmt::Set {
            dst: r,
            expr: Expr::Const(Literal::Int(v)),
        });
        self.made.insert((ty, v), r);
        r
    }

    /// The statements that replace `s`, if it divides by a constant power of two.
    fn reduce(&mut self, s: &Stmt) -> Option<Vec<Stmt>> {
        let Stmt::Set {
            dst,
            expr: Expr::Binary(op @ (BinaryOp::Div | BinaryOp::Rem | BinaryOp::CeilDiv), a, b),
        } = s
        else {
            return None;
        };
        let ty = self.regs[*dst].ty;
        if !foldable(ty) || self.regs[*a].ty != ty || self.regs[*b].ty != ty {
            return None;
        }
        let c = self.constants.get(b.index()).copied().flatten()?;
        let width = ty.bits();
        let c = if width == 32 { c as u32 as u64 } else { c as u64 };
        // A negative divisor's bits are no power of two of its type's positive range.
        if !c.is_power_of_two() || (ty.is_signed_int() && c >> (width - 1) != 0) {
            return None;
        }
        let shift = c.trailing_zeros() as i64;
        let mut out = Vec::new();
        let mut set = |cx: &mut Self, expr: Expr| {
            let r = cx.reg(ty);
            out.push(Stmt::Set { dst: r, expr });
            r
        };
        // `cdiv(a, c)` is `(a + c - 1) / c`, wrapping as the backends add.
        let a = match op {
            BinaryOp::CeilDiv => {
                let up = self.konst(ty, (c as i64).wrapping_sub(1));
                set(self, Expr::Binary(BinaryOp::Add, *a, up))
            }
            _ => *a,
        };
        let rem = *op == BinaryOp::Rem;
        let expr = if c == 1 {
            if rem {
                Expr::Const(Literal::Int(0))
            } else {
                Expr::Copy(a)
            }
        } else if !ty.is_signed_int() {
            if rem {
                Expr::Binary(BinaryOp::And, a, self.konst(ty, (c as i64).wrapping_sub(1)))
            } else {
                Expr::Binary(BinaryOp::Shr, a, self.konst(ty, shift))
            }
        } else {
            // A negative dividend is biased by c - 1 so that the arithmetic shift, which
            // rounds down, truncates toward zero: `(a + ((a >> w-1) & (c-1))) >> k`.
            let (top, low) = (
                self.konst(ty, width as i64 - 1),
                self.konst(ty, (c as i64).wrapping_sub(1)),
            );
            let sign = set(self, Expr::Binary(BinaryOp::Shr, a, top));
            let bias = set(self, Expr::Binary(BinaryOp::And, sign, low));
            let biased = set(self, Expr::Binary(BinaryOp::Add, a, bias));
            if rem {
                let multiple = self.konst(ty, (c as i64).wrapping_neg());
                let down = set(self, Expr::Binary(BinaryOp::And, biased, multiple));
                Expr::Binary(BinaryOp::Sub, a, down)
            } else {
                Expr::Binary(BinaryOp::Shr, biased, self.konst(ty, shift))
            }
        };
        out.push(Stmt::Set { dst: *dst, expr });
        Some(out)
    }
}

/// Rewrites the divisions of `list` and of the lists nested in it, those in a loop only
/// (`in_loop`: whether `list` is in one): a division outside loops runs once a program,
/// and there `ptxas` allocates registers around the shorter code no better (a tf32 matmul
/// configuration spilled 4 bytes with its grid's `cdiv`s rewritten).
fn rewrite(list: &mut Vec<Stmt>, cx: &mut Rewriter, in_loop: bool) {
    for mut s in std::mem::take(list) {
        match &mut s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                rewrite(then_body, cx, in_loop);
                rewrite(else_body, cx, in_loop);
            }
            Stmt::While { cond_body, body, .. } => {
                rewrite(cond_body, cx, true);
                rewrite(body, cx, true);
            }
            Stmt::Specialized { producer, consumer } => {
                rewrite(producer, cx, in_loop);
                rewrite(consumer, cx, in_loop);
            }
            _ => {}
        }
        match in_loop.then(|| cx.reduce(&s)).flatten() {
            Some(replacement) => list.extend(replacement),
            None => list.push(s),
        }
    }
}
