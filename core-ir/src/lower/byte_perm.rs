//! `byte_perm`: one instruction where the target has it (PTX's `prmt`), else the bytes
//! picked by shifts and masks (SPIR-V has no byte permute). What the kernel fixes is used:
//! a selector nibble known when the kernel is built (a constant, or bits masked off by an
//! `and` with one) picks its byte without comparisons, a byte picked from a constant word
//! is a constant, and a zero byte costs nothing, so that a lookup in a constant table
//! (`dot_scaled`'s fp4 magnitudes, `x & 0x77` selecting two bytes) computes only the bytes
//! it can use.

use super::Lowerer;
use crate::ir::{BinaryOp, CmpOp, Literal, Op, ValueDef, ValueId};
use crate::thread::{Expr, Reg};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// The register `byte_perm(x, y, selector)` of 32-bit integer type `ty`, `values` the
    /// block IR's values of the three registers.
    pub(crate) fn byte_perm(&mut self, ty: ScalarType, [x, y, selector]: [Reg; 3], values: [ValueId; 3]) -> Reg {
        if self.target.byte_perm {
            return self.set(ty, Expr::BytePerm(x, y, selector));
        }
        let [x_word, y_word, known] = values.map(|v| known_int(self.k, v));
        let zeros = known_zero_bits(self.k, values[2]);
        let int = |this: &mut Self, v: i64| this.konst(ty, Literal::Int(v));
        let mut result: Option<Reg> = None;
        let mut constant = 0i64;
        for n in 0..4i64 {
            // The nibble's three bits where the kernel fixes them.
            let pick = known
                .map(|s| (s >> (4 * n)) & 7)
                .or(((zeros >> (4 * n)) & 7 == 7).then_some(0));
            let byte = match pick {
                Some(p) => {
                    let (source, word) = if p < 4 { (x, x_word) } else { (y, y_word) };
                    if let Some(w) = word {
                        constant |= ((w >> (8 * (p & 3))) & 0xFF) << (8 * n);
                        continue;
                    }
                    let (amount, mask) = (int(self, (p & 3) * 8), int(self, 0xFF));
                    let shifted = self.set(ty, Expr::Binary(BinaryOp::Shr, source, amount));
                    self.set(ty, Expr::Binary(BinaryOp::And, shifted, mask))
                }
                // (Arithmetic shifts of i32 are masked to the byte: signedness cannot show.)
                None => {
                    let (four_n, seven, four, three, mask) = (
                        int(self, 4 * n),
                        int(self, 7),
                        int(self, 4),
                        int(self, 3),
                        int(self, 0xFF),
                    );
                    let nibble = self.set(ty, Expr::Binary(BinaryOp::Shr, selector, four_n));
                    let pick = self.set(ty, Expr::Binary(BinaryOp::And, nibble, seven));
                    let low = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, pick, four));
                    let source = self.set(ty, Expr::Select(low, x, y));
                    let within = self.set(ty, Expr::Binary(BinaryOp::And, pick, three));
                    // (Bits: the byte's index times 8.)
                    let amount = self.set(ty, Expr::Binary(BinaryOp::Shl, within, three));
                    let shifted = self.set(ty, Expr::Binary(BinaryOp::Shr, source, amount));
                    self.set(ty, Expr::Binary(BinaryOp::And, shifted, mask))
                }
            };
            let placed = if n == 0 {
                byte
            } else {
                let amount = int(self, 8 * n);
                self.set(ty, Expr::Binary(BinaryOp::Shl, byte, amount))
            };
            result = Some(match result {
                None => placed,
                Some(r) => self.set(ty, Expr::Binary(BinaryOp::Or, r, placed)),
            });
        }
        // (The constant bytes as the type holds them: an i32 with its top bit set is negative.)
        let constant = if ty == ScalarType::I32 {
            constant as u32 as i32 as i64
        } else {
            constant
        };
        match result {
            None => int(self, constant),
            Some(r) if constant == 0 => r,
            Some(r) => {
                let c = int(self, constant);
                self.set(ty, Expr::Binary(BinaryOp::Or, r, c))
            }
        }
    }
}

/// The definition of `v` seen through splats, shape ops and bitcasts between the 32-bit
/// integer types (`byte_perm` takes either), which keep every element's bits.
fn underlying(k: &crate::ir::Kernel, v: ValueId) -> Option<&Op> {
    let ValueDef::Result { inst, .. } = k.values[v].def else {
        return None;
    };
    match k.insts[inst].op {
        Op::Splat { value }
        | Op::Broadcast { value }
        | Op::ExpandDims { value, .. }
        | Op::Reshape { value }
        | Op::Bitcast { value } => underlying(k, value),
        ref op => Some(op),
    }
}

/// `v`'s bits where it is an integer constant of the kernel.
fn known_int(k: &crate::ir::Kernel, v: ValueId) -> Option<i64> {
    match underlying(k, v)? {
        Op::Constant { value: Literal::Int(s) } => Some(*s),
        _ => None,
    }
}

/// The bits of `v` known to be zero: those of a constant, and of an `and` those either side
/// has.
fn known_zero_bits(k: &crate::ir::Kernel, v: ValueId) -> i64 {
    match underlying(k, v) {
        Some(Op::Constant { value: Literal::Int(s) }) => !s,
        Some(Op::Binary {
            op: BinaryOp::And,
            lhs,
            rhs,
        }) => known_zero_bits(k, *lhs) | known_zero_bits(k, *rhs),
        _ => 0,
    }
}
