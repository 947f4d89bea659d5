//! `exp2` of f32 on the FMA units: a polynomial instead of the special-function unit, for
//! the share of a thread's registers that [`Target::exp2_on_fma`] asks for.
//!
//! Why: the special-function unit runs 16 `ex2` a cycle on a multiprocessor, the FMA units
//! 128 operations. Attention at head dimension 64 takes one `exp2` per score for 256 MMA
//! FLOPs, which is about what a Hopper multiprocessor's tensor cores do in the time its
//! special-function unit takes for one `ex2`: the softmax is as long as the MMAs. Moving some
//! `exp2`s onto the FMA units (FlashAttention-4's trick) shortens it, at about a dozen
//! instructions each. Measured on an H200, every share made attention slower (the
//! special-function unit does not bound it there), so the target asks for none by default.
//!
//! How: `x` clamped to `[-126.5, 128]`; `r`, `floor(x)` or at an integer `x - 1`, as
//! `round(x - 0.5)` by adding and subtracting `1.5 * 2^23` (the f32 sum rounds to an integer,
//! whose low bits are `r`); `f = x - r` in `[0, 1]`; `2^f` by a degree-5 polynomial with
//! constant term 1 (relative error under 1e-7 on that interval, within 3e-7 of `2^x` with
//! the f32 roundings); times `2^r`, made by putting `r + 127` into an f32's exponent field.
//! Where `2^x` is below the normal range that field is 0 and the result 0, as a
//! flush-to-zero `ex2` gives; at `x >= 128` it is all ones, `2^128 = inf`; NaN stays NaN
//! (the IR's `max` keeps it, and it reaches the product through `f`).
//!
//! [`Target::exp2_on_fma`]: crate::target::Target::exp2_on_fma

use super::Lowerer;
use crate::ir::{BinaryOp, Literal};
use crate::thread::{Expr, Reg};
use crate::types::ScalarType;

/// `2^f - 1 = f * (c1 + f * (c2 + ...))` on `[0, 1]`, fitted for relative error
/// (iteratively reweighted least squares towards the minimax; largest error 8.3e-8).
const COEFFICIENTS: [f64; 5] = [0.693151312, 0.24016445, 0.0557999129, 0.00901703062, 0.00186712994];

/// `1.5 * 2^23`: an f32 sum with it is rounded to an integer, kept in the low mantissa bits.
const ROUNDER: f64 = 12582912.0;

impl Lowerer<'_> {
    /// Whether register `i` of an f32 `exp2` result is computed by [`Self::exp2_polynomial`]:
    /// the first `exp2_on_fma` of every eight.
    pub(crate) fn exp2_on_fma(&self, i: usize) -> bool {
        (i % 8) < self.target.exp2_on_fma as usize
    }

    /// `2^x` for the f32 register `x` on the FMA and integer units (see the module's notes).
    pub(crate) fn exp2_polynomial(&mut self, x: Reg) -> Reg {
        let f32c = |l: &mut Self, v: f64| l.konst(ScalarType::F32, Literal::Float(v));
        let (lo, hi, rounder) = (f32c(self, -126.5), f32c(self, 128.0), f32c(self, ROUNDER));
        let half = f32c(self, 0.5);
        let x = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Max, x, lo));
        let x = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Min, x, hi));
        let below = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Sub, x, half));
        let t = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Add, below, rounder));
        let r = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Sub, t, rounder));
        let f = self.set(ScalarType::F32, Expr::Binary(BinaryOp::Sub, x, r));
        // Horner from the highest coefficient: q = c1 + f (c2 + f (c3 + ...)).
        let mut q = f32c(self, COEFFICIENTS[4]);
        for &c in COEFFICIENTS[..4].iter().rev() {
            let c = f32c(self, c);
            q = self.set(ScalarType::F32, Expr::Fma(f, q, c));
        }
        let one = f32c(self, 1.0);
        let p = self.set(ScalarType::F32, Expr::Fma(f, q, one));
        // 2^r: t's low bits are r (two's complement, -127 <= r <= 128), so t << 23 is r in
        // the exponent field's place; adding 1.0's bits biases it by 127.
        let bits = self.set(ScalarType::U32, Expr::Bitcast(t));
        let shift = self.konst(ScalarType::U32, Literal::Int(23));
        let exponent = self.set(ScalarType::U32, Expr::Binary(BinaryOp::Shl, bits, shift));
        let bias = self.konst(ScalarType::U32, Literal::Int(0x3f80_0000));
        let scale_bits = self.set(ScalarType::U32, Expr::Binary(BinaryOp::Add, exponent, bias));
        let scale = self.set(ScalarType::F32, Expr::Bitcast(scale_bits));
        self.set(ScalarType::F32, Expr::Binary(BinaryOp::Mul, p, scale))
    }
}
