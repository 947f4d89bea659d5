//! Masks that hold in every element when one scalar condition does.
//!
//! A load's mask is a block of booleans, and lowered as it is, each thread tests its own
//! elements. The masks of tiled loops mostly compare an `arange`, whose range the kernel
//! states, with a scalar bound that moves with the loop: the K tail of the matmul tutorial,
//! `offs_k < K - k * BLOCK_K`. Such a mask is true in every element exactly when the end of
//! the range is within the bound: one comparison of scalars, which every thread of the
//! program computes alike. The pipeline through registers uses it (`pipeline.rs`) to load a
//! whole iteration's operands without a predicate a vector wherever it holds.

use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Literal, Op, ValueDef, ValueId};
use crate::thread::{Expr, Reg};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// A boolean register, the same in every thread of the program, that is true only
    /// where every element of `mask` is: `None` when the mask is not built, through shape
    /// ops and `&`, from comparisons of an `arange` with a scalar. `mask` and the values it
    /// is computed from must have been lowered.
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

    /// [`Lowerer::mask_all_true`] of `lhs op rhs`, one side an `arange` and the other a
    /// scalar: the comparison of the scalar with the range's end that holds for the whole
    /// range.
    fn comparison_all_true(&mut self, op: CmpOp, lhs: ValueId, rhs: ValueId) -> Result<Option<Reg>, LowerError> {
        let Some(ty) = self.k.ty(lhs).scalar_type().filter(|t| t.is_int()) else {
            return Ok(None);
        };
        // `range op scalar` for every element of the range [lo, hi]: `hi < s`, `hi <= s`,
        // `lo > s`, `lo >= s`; `scalar op range`: `s < lo`, `s <= lo`, `s > hi`, `s >= hi`.
        let (scalar, end, scalar_first) = match (static_range(self.k, lhs), static_range(self.k, rhs)) {
            (Some((lo, hi)), None) => {
                let end = if matches!(op, CmpOp::Lt | CmpOp::Le) { hi } else { lo };
                (rhs, end, false)
            }
            (None, Some((lo, hi))) => {
                let end = if matches!(op, CmpOp::Lt | CmpOp::Le) { lo } else { hi };
                (lhs, end, true)
            }
            _ => return Ok(None),
        };
        if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            return Ok(None);
        }
        let Some(s) = self.uniform_scalar(scalar) else {
            return Ok(None);
        };
        let end = self.konst(ty, Literal::Int(end));
        let (a, b) = if scalar_first { (s, end) } else { (end, s) };
        Ok(Some(self.set(ScalarType::Bool, Expr::Compare(op, a, b))))
    }

    /// The register of `v` where it is one value for the whole program: a scalar, or a
    /// splat or broadcast of one.
    fn uniform_scalar(&self, v: ValueId) -> Option<Reg> {
        if self.k.ty(v).shape.is_scalar() {
            let lval = self.values[v.index()].as_ref()?;
            return (lval.regs.len() == 1).then(|| lval.regs[0]);
        }
        let ValueDef::Result { inst, .. } = self.k.values[v].def else {
            return None;
        };
        match self.k.insts[inst].op {
            Op::Splat { value } | Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => {
                self.uniform_scalar(value)
            }
            _ => None,
        }
    }
}

/// The least and greatest element of `v` where the kernel states them: an `arange`, through
/// shape ops.
fn static_range(k: &crate::ir::Kernel, v: ValueId) -> Option<(i64, i64)> {
    let ValueDef::Result { inst, .. } = k.values[v].def else {
        return None;
    };
    match k.insts[inst].op {
        Op::Arange { start, end } => Some((start as i64, end as i64 - 1)),
        Op::Broadcast { value } | Op::ExpandDims { value, .. } | Op::Reshape { value } => static_range(k, value),
        _ => None,
    }
}
