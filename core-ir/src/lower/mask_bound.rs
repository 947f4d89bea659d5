//! Masks that hold in every element when one scalar condition does.
//!
//! A load's mask is a block of booleans, and lowered as it is, each thread tests its own
//! elements. The masks of tiled loops mostly compare an `arange`, whose range the kernel
//! states, with a scalar bound that moves with the loop: the K tail of the matmul tutorial,
//! `offs_k < K - k * BLOCK_K`, or a walk's `start_n + offs_n < N_CTX`. Such a mask is true
//! in every element exactly when the end of the range is within the bound: one comparison
//! of scalars, which every thread of the program computes alike. The pipeline through
//! registers uses it (`pipeline/prefetch.rs`, `control.rs`) to load a whole iteration's
//! operands without a predicate a vector wherever it holds.

use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Literal, Op, ValueDef, ValueId};
use crate::thread::{Expr, Reg};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// A boolean register, the same in every thread of the program, that is true only
    /// where every element of `mask` is: `None` when the mask is not built, through shape
    /// ops and `&`, from comparisons of an `arange` (or a scalar plus one) with a scalar (or a
    /// constant).
    /// The scalars it is computed from must have been lowered.
    pub(crate) fn mask_all_true(&mut self, mask: ValueId) -> Result<Option<Reg>, LowerError> {
        let ValueDef::Result { inst, .. } = self.k.values[mask].def else {
            return Ok(None);
        };
        match self.k.insts[inst].op {
            Op::Constant {
                value: Literal::Bool(true),
            } => Ok(Some(self.konst(ScalarType::Bool, Literal::Bool(true)))),
            Op::Splat { value } => self.uniform_scalar(value).map(Ok).transpose(),
            Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => self.mask_all_true(value),
            Op::Binary {
                op: BinaryOp::And,
                lhs,
                rhs,
            } => {
                let (Some(a), Some(b)) = (self.mask_all_true(lhs)?, self.mask_all_true(rhs)?) else {
                    return Ok(None);
                };
                Ok(Some(self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, a, b))))
            }
            Op::Compare { op, lhs, rhs } => self.comparison_all_true(op, lhs, rhs),
            _ => Ok(None),
        }
    }

    /// [`Lowerer::mask_all_true`] of `lhs op rhs`, one side an `arange` (plus a scalar,
    /// perhaps) and the other a scalar: the comparison of the scalar with the range's end
    /// that holds for the whole range, and that the range did not wrap.
    fn comparison_all_true(&mut self, op: CmpOp, lhs: ValueId, rhs: ValueId) -> Result<Option<Reg>, LowerError> {
        let Some(ty) = self.k.ty(lhs).scalar_type().filter(|t| t.is_int()) else {
            return Ok(None);
        };
        if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            return Ok(None);
        }
        let (span, scalar, span_first) = match (span(self.k, lhs), span(self.k, rhs)) {
            (Some(s), None) => (s, rhs, true),
            (None, Some(s)) => (s, lhs, false),
            _ => return Ok(None),
        };
        let Some(s) = self.uniform_reg(scalar) else {
            return Ok(None);
        };
        let (lo, hi) = (
            self.konst(ty, Literal::Int(span.lo)),
            self.konst(ty, Literal::Int(span.hi)),
        );
        let mut no_wrap = None;
        let (lo, hi) = match span.offset {
            None => (lo, hi),
            Some(offset) => {
                let Some(o) = self.uniform_reg(offset) else {
                    return Ok(None);
                };
                let lo = self.set(ty, Expr::Binary(BinaryOp::Add, o, lo));
                let hi = self.set(ty, Expr::Binary(BinaryOp::Add, o, hi));
                // The elements run from `lo` to `hi` unless the sum wrapped, which a range
                // far shorter than the type's span does at most once, leaving `hi < lo`.
                no_wrap = Some(self.set(ScalarType::Bool, Expr::Compare(CmpOp::Ge, hi, lo)));
                (lo, hi)
            }
        };
        // `range op scalar` for every element of [lo, hi]: `hi < s`, `hi <= s`, `lo > s`,
        // `lo >= s`; `scalar op range`: `s < lo`, `s <= lo`, `s > hi`, `s >= hi`.
        let below = matches!(op, CmpOp::Lt | CmpOp::Le);
        let cond = if span_first {
            let end = if below { hi } else { lo };
            self.set(ScalarType::Bool, Expr::Compare(op, end, s))
        } else {
            let end = if below { lo } else { hi };
            self.set(ScalarType::Bool, Expr::Compare(op, s, end))
        };
        Ok(Some(match no_wrap {
            None => cond,
            Some(w) => self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, cond, w)),
        }))
    }

    /// The register of `v` where it is one value for the whole program: a scalar, or a
    /// splat or broadcast of one ([`uniform_source`]).
    fn uniform_scalar(&self, v: ValueId) -> Option<Reg> {
        let lval = self.values[uniform_source(self.k, v)?.index()].as_ref()?;
        (lval.regs.len() == 1).then(|| lval.regs[0])
    }

    /// [`Self::uniform_scalar`], or a constant's register where `v` is a block constant
    /// (through shape ops): the literal of `offs >= 0`, or of `arange + 8`, becomes a block
    /// of one value when it meets a block, and is as uniform as a scalar.
    fn uniform_reg(&mut self, v: ValueId) -> Option<Reg> {
        if let Some(r) = self.uniform_scalar(v) {
            return Some(r);
        }
        let value = constant_literal(self.k, v)?;
        let ty = self.k.ty(v).scalar_type()?;
        Some(self.konst(ty, value))
    }
}

/// The literal of `v` where it is a constant, perhaps through shape ops and splats.
fn constant_literal(k: &crate::ir::Kernel, v: ValueId) -> Option<Literal> {
    let ValueDef::Result { inst, .. } = k.values[v].def else {
        return None;
    };
    match k.insts[inst].op {
        Op::Constant { value } => Some(value),
        Op::Splat { value } | Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => {
            constant_literal(k, value)
        }
        _ => None,
    }
}

/// The elements of a block `offset + [lo, hi]`: an `arange` through shape ops, perhaps
/// plus a scalar (the same in every element), as `start_n + arange(0, BLOCK_N)`.
struct Span {
    offset: Option<ValueId>,
    lo: i64,
    hi: i64,
}

fn span(k: &crate::ir::Kernel, v: ValueId) -> Option<Span> {
    let ValueDef::Result { inst, .. } = k.values[v].def else {
        return None;
    };
    match k.insts[inst].op {
        Op::Arange { start, end } => Some(Span {
            offset: None,
            lo: start as i64,
            hi: end as i64 - 1,
        }),
        Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => span(k, value),
        Op::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => {
            let (range, offset) = match (span(k, lhs), span(k, rhs)) {
                (Some(r), None) => (r, rhs),
                (None, Some(r)) => (r, lhs),
                _ => return None,
            };
            let uniform = uniform_source(k, offset).is_some() || constant_literal(k, offset).is_some();
            (range.offset.is_none() && uniform).then_some(Span {
                offset: Some(offset),
                ..range
            })
        }
        _ => None,
    }
}

/// The scalar that `v` is made of where it is one value for the whole block: `v` itself,
/// or the scalar under its splats and shape ops.
fn uniform_source(k: &crate::ir::Kernel, v: ValueId) -> Option<ValueId> {
    if k.ty(v).shape.is_scalar() {
        return Some(v);
    }
    let ValueDef::Result { inst, .. } = k.values[v].def else {
        return None;
    };
    match k.insts[inst].op {
        Op::Splat { value } | Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => {
            uniform_source(k, value)
        }
        _ => None,
    }
}
