//! Coordinates known as `base + offset`, and their quotients by powers of two taken once.
//!
//! A register's coordinate along a dimension is the thread's base there (a multiple of the
//! elements each thread holds in a row, `size_per_thread`) plus a constant offset
//! (`exchange.rs`, `coord`). A quotient of such a coordinate by a power of two `D`
//! (`arange(0, K) / 32`: the group of 32 an element of K falls in, as `dot_scaled`'s scales
//! are spread) is then `base / D` plus a constant wherever the offset cannot carry the sum
//! past a multiple of `D`: where `D` divides the base's alignment, or the alignment
//! divides `D` and the offset's remainder by `D` stays below the alignment. So every
//! register of a thread whose coordinates fall in one group of `D` gets one register, set
//! once at the top of the kernel, where each would otherwise divide in every iteration;
//! and what reads by that quotient (a gather from shared memory) can read once for them
//! all (`gather.rs`).

use super::Lowerer;
use crate::ir::BinaryOp;
use crate::thread::{Expr, Reg};
use crate::types::ScalarType;

/// A non-negative integer register known as `base + off`, `base` a multiple of `align`
/// (a power of two) and not negative; no base is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    pub base: Option<Reg>,
    pub off: i64,
    pub align: u32,
}

impl Lowerer<'_> {
    /// Records that `r` holds `affine` (its value for every thread), unless already known.
    pub(crate) fn note_affine(&mut self, r: Reg, affine: Affine) {
        if affine.off >= 0 && affine.align.is_power_of_two() {
            self.cache.affine.entry(r).or_insert(affine);
        }
    }

    /// `c + k` for a coordinate `c` known as `base + off`, as `base + (off + k)` (one
    /// register for each pair); `None` where `c` is not known so or the sum is negative.
    pub(crate) fn affine_offset(&mut self, c: Reg, k: i64) -> Option<Reg> {
        let Affine { base, off, align } = *self.cache.affine.get(&c)?;
        let off = off.checked_add(k).filter(|&o| o >= 0)?;
        Some(match base {
            Some(b) => self.affine_sum(b, off, align),
            None => self.i32c(off),
        })
    }

    /// `c + start` for an `arange`'s coordinate `c`: `c` itself for a start of 0, a known
    /// `base + off` where `c` is one, else added as written.
    pub(crate) fn arange_element(&mut self, c: Reg, start: i64) -> Reg {
        if start == 0 {
            return c;
        }
        if let Some(r) = self.affine_offset(c, start) {
            return r;
        }
        let s = self.i32c(start);
        self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, c, s))
    }

    /// `a op b` where it is a coordinate known as `base + off` again (a sum with a
    /// constant, a quotient by a power of two: see [`Lowerer::affine_quotient`]); `None`
    /// elsewhere.
    pub(crate) fn affine_binary(&mut self, ty: ScalarType, op: BinaryOp, a: Reg, b: Reg) -> Option<Reg> {
        if ty != ScalarType::I32 {
            return None;
        }
        match op {
            BinaryOp::Add => {
                if let Some(&k) = self.cache.const_ints.get(&b) {
                    self.affine_offset(a, k)
                } else {
                    let k = *self.cache.const_ints.get(&a)?;
                    self.affine_offset(b, k)
                }
            }
            BinaryOp::Div | BinaryOp::Shr => self.affine_quotient(ty, op, a, b),
            _ => None,
        }
    }

    /// `a op b` for an integer `Div` or `Shr` of a coordinate known as `base + off` by a
    /// constant power of two, as `base / D` (once per thread) plus a constant, where that is
    /// its value (module comment); `None` elsewhere, to be computed as written.
    fn affine_quotient(&mut self, ty: ScalarType, op: BinaryOp, a: Reg, b: Reg) -> Option<Reg> {
        if ty != ScalarType::I32 || self.regs[a].ty != ScalarType::I32 {
            return None;
        }
        let Affine { base, off, align } = *self.cache.affine.get(&a)?;
        let constant = *self.cache.const_ints.get(&b)?;
        let shift = match op {
            BinaryOp::Div if constant > 0 && (constant as u64).is_power_of_two() => constant.trailing_zeros(),
            BinaryOp::Shr if (0..31).contains(&constant) => constant as u32,
            _ => return None,
        };
        let d = 1i64 << shift;
        let exact = i64::from(align) % d == 0 || (d % i64::from(align) == 0 && off % d < i64::from(align));
        if !exact {
            return None;
        }
        let q = off / d;
        let Some(base) = base else {
            return Some(self.i32c(q));
        };
        let divided = match self.cache.quotients.get(&(base, shift)) {
            Some(&r) => r,
            None => {
                let s = self.i32c(i64::from(shift));
                let r = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Shr, base, s));
                self.cache.quotients.insert((base, shift), r);
                r
            }
        };
        let align = (align >> shift).max(1);
        Some(self.affine_sum(divided, q, align))
    }

    /// `base + off` (set once, at the top of the kernel), noted as such: one register for
    /// each pair.
    pub(crate) fn affine_sum(&mut self, base: Reg, off: i64, align: u32) -> Reg {
        if off == 0 {
            self.note_affine(
                base,
                Affine {
                    base: Some(base),
                    off: 0,
                    align,
                },
            );
            return base;
        }
        if let Some(&r) = self.cache.sums.get(&(base, off)) {
            return r;
        }
        let c = self.i32c(off);
        let r = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, base, c));
        self.cache.sums.insert((base, off), r);
        self.note_affine(
            r,
            Affine {
                base: Some(base),
                off,
                align,
            },
        );
        r
    }
}
