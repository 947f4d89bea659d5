//! 16-bit values taken from a half of a 32-bit word: the `Set`s in a statement list that
//! reinterpret as a 16-bit float the low 16 bits of a 32-bit integer, `bitcast(w as u16)`,
//! or its high 16 bits, `bitcast((x >> 16) as u16)` (`dot_scaled` makes both values of an
//! fp4 byte in one word, as the matrix instructions take them, `builder/dot_scaled.rs`). A
//! backend may read the half of the word directly (PTX's `mov.b32 {lo, hi}, word`, which
//! `ptxas` keeps as the word's register) where the statements as written truncate,
//! shift and mask it, and repack the two halves for a paired instruction. An analysis only:
//! the statements stay as they are.
//!
//! Only halves whose word cannot change before the reinterpretation are taken: the cast
//! (and the shift) in the same statement list, with nothing but `Set`s and comments from
//! there to the reinterpretation, none of which writes the word.

use super::{Expr, Reg, Stmt, ThreadKernel};
use crate::ir::BinaryOp;
use crate::types::ScalarType;
use std::collections::HashMap;

/// The word and half a reinterpreting `Set` reads ([`word_halves`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordHalf {
    /// The 32-bit integer register holding both halves.
    pub word: Reg,
    /// Whether the value is the word's high half (bits 16 to 31) rather than its low one.
    pub high: bool,
}

/// For each statement of `list` of `k` (module comment): the word half it reinterprets,
/// if it is such a `Set`. A list without a 16-bit float reinterpretation is passed over at
/// once.
pub fn word_halves(k: &ThreadKernel, list: &[Stmt]) -> Vec<Option<WordHalf>> {
    let mut halves = vec![None; list.len()];
    let is_word = |r: Reg| {
        let t = k.reg_type(r);
        t.is_int() && t.bits() == 32
    };
    let reinterprets = |s: &Stmt| match s {
        Stmt::Set {
            dst,
            expr: Expr::Bitcast(c),
        } => {
            let (d, c) = (k.reg_type(*dst), k.reg_type(*c));
            matches!(d, ScalarType::F16 | ScalarType::BF16) && matches!(c, ScalarType::U16 | ScalarType::I16)
        }
        _ => false,
    };
    if !list.iter().any(reinterprets) {
        return halves;
    }
    // The registers holding 16 wherever they are read (constants are often set once at
    // the kernel's top, outside the list).
    let constants = super::strength::constant_integers(k);
    let is_sixteen = |r: Reg| constants[r.index()] == Some(16);
    // What each register was last set to in the current straight-line stretch.
    let mut defs: HashMap<Reg, &Expr> = HashMap::new();
    for (i, s) in list.iter().enumerate() {
        match s {
            Stmt::Comment(_) => {}
            Stmt::Set { dst, expr } => {
                if reinterprets(s) {
                    let Expr::Bitcast(c) = expr else { unreachable!() };
                    halves[i] = half_of(&defs, *c, &is_word, &is_sixteen);
                }
                // Whatever read `dst` as it was no longer reads what it holds.
                defs.retain(|_, e| !super::operands(e).contains(dst));
                defs.insert(*dst, expr);
            }
            _ => defs.clear(),
        }
    }
    halves
}

/// The word half that the 16-bit integer `c` holds, from the definitions `defs` of the
/// stretch: `c = w as u16` with a 32-bit `w`; the high half where `w = x >> 16`.
fn half_of(
    defs: &HashMap<Reg, &Expr>,
    c: Reg,
    is_word: &impl Fn(Reg) -> bool,
    is_sixteen: &impl Fn(Reg) -> bool,
) -> Option<WordHalf> {
    let Some(Expr::Cast(w)) = defs.get(&c) else {
        return None;
    };
    if !is_word(*w) {
        return None;
    }
    match defs.get(w) {
        Some(Expr::Binary(BinaryOp::Shr, x, amount)) if is_word(*x) && is_sixteen(*amount) => {
            Some(WordHalf { word: *x, high: true })
        }
        _ => Some(WordHalf { word: *w, high: false }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::ThreadKernelBuilder;
    use crate::types::ScalarType::{BF16, F16, I32, U16};

    /// Checks the halves `word_halves` finds in the body `f` builds from a 32-bit `w`
    /// against those `f` returns, statement by statement after `w`'s.
    fn check(f: impl FnOnce(&mut ThreadKernelBuilder, Reg) -> Vec<Option<WordHalf>>) {
        let mut k = ThreadKernelBuilder::new("halves", 1, 32);
        let w = k.int(I32, 0x1234_5678);
        let want = f(&mut k, w);
        let k = k.finish_unverified();
        assert_eq!(word_halves(&k, &k.body)[1..], want[..]);
    }

    #[test]
    fn low_and_high_halves_are_found() {
        check(|k, w| {
            let lo = k.set(U16, Expr::Cast(w));
            k.set(BF16, Expr::Bitcast(lo));
            let sixteen = k.int(I32, 16);
            let shifted = k.bin(BinaryOp::Shr, w, sixteen);
            let hi = k.set(U16, Expr::Cast(shifted));
            k.set(F16, Expr::Bitcast(hi));
            let half = |high| Some(WordHalf { word: w, high });
            vec![None, half(false), None, None, None, half(true)]
        });
    }

    fn low_half(word: Reg) -> Option<WordHalf> {
        Some(WordHalf { word, high: false })
    }

    #[test]
    fn a_word_written_between_them_is_not_read() {
        // The word changed after the cast: the cast's value is no longer its half.
        check(|k, w| {
            let lo = k.set(U16, Expr::Cast(w));
            k.assign(w, Expr::Binary(BinaryOp::Add, w, w));
            k.set(BF16, Expr::Bitcast(lo));
            vec![None; 3]
        });
        // The shifted word changed after the shift: the shift's value is its low half.
        check(|k, w| {
            let sixteen = k.int(I32, 16);
            let shifted = k.bin(BinaryOp::Shr, w, sixteen);
            k.assign(w, Expr::Binary(BinaryOp::Add, w, w));
            let hi = k.set(U16, Expr::Cast(shifted));
            k.set(BF16, Expr::Bitcast(hi));
            vec![None, None, None, None, low_half(shifted)]
        });
        // Another statement between them: not straight-line.
        check(|k, w| {
            let lo = k.set(U16, Expr::Cast(w));
            let c = k.boolean(true);
            k.if_(c, |_| {}, |_| {});
            k.set(BF16, Expr::Bitcast(lo));
            vec![None; 4]
        });
        // A shift by another amount: a low half of the shifted word.
        check(|k, w| {
            let eight = k.int(I32, 8);
            let shifted = k.bin(BinaryOp::Shr, w, eight);
            let c = k.set(U16, Expr::Cast(shifted));
            k.set(BF16, Expr::Bitcast(c));
            vec![None, None, None, low_half(shifted)]
        });
    }
}
