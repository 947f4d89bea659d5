//! Halves of a warpgroup MMA's A operand kept packed (`Stmt::Wgmma` with
//! `WgmmaA::Registers`): a register-level choice of instructions, the thread IR unchanged.
//!
//! The A operand is eight 16-bit registers a thread, which `wgmma` reads in four packed
//! 32-bit pairs. Where a loop carries such an operand into its next iteration (attention's
//! rotated walk carries `P`), the carried values are 16-bit registers, each of which
//! `ptxas` gives a 32-bit register of its own: 64 registers for a 64 x 128 `P` where 32
//! packed pairs hold it. So a pair of registers `(lo, hi)` that is only ever read as the
//! pair `(2k, 2k + 1)` of A operands, and only ever set by two adjacent copies (`lo` then
//! `hi`, of registers or constants, as a loop's carried values are), becomes one `.b32`
//! register: each copy still sets its 16-bit register, which lives for one instruction, and
//! the pair is packed right after `hi`'s (`mov.b32 pair, {lo, hi}`); the MMAs read the
//! pair. Each 16-bit value then lives in one half of a register, as in the hand-written
//! kernel.

use rutile_ir::thread::{Expr, Reg, Stmt, ThreadKernel, WgmmaA};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The packed pairs of a kernel.
#[derive(Default)]
pub(crate) struct Pairs {
    /// Per `hi` register, its `lo`.
    by_hi: HashMap<Reg, Reg>,
    /// Per `lo` register, the pair's index (into the emitter's `pair_regs`).
    index: HashMap<Reg, usize>,
}

impl Pairs {
    /// The pairs of `k` that can be kept packed (module comment).
    pub(crate) fn of(k: &ThreadKernel) -> Pairs {
        // Candidates: the pairs of A operands, each register always in the same pair and
        // position. (In register order, so that the pairs' numbering, and so the PTX, is the
        // same on every compilation.)
        let mut partner: BTreeMap<Reg, (Reg, bool)> = BTreeMap::new();
        let mut bad: HashSet<Reg> = HashSet::new();
        k.walk(&mut |s| {
            if let Stmt::Wgmma {
                a: WgmmaA::Registers(r),
                ..
            } = s
            {
                for pair in r.chunks(2) {
                    let (lo, hi) = (pair[0], pair[1]);
                    for (reg, other, is_lo) in [(lo, hi, true), (hi, lo, false)] {
                        match partner.get(&reg) {
                            Some(&p) if p != (other, is_lo) => {
                                bad.insert(reg);
                            }
                            _ => {
                                partner.insert(reg, (other, is_lo));
                            }
                        }
                    }
                    if lo == hi {
                        bad.insert(lo);
                    }
                }
            }
        });
        // No other reads, and no definitions but `Set`s.
        k.walk(&mut |s| {
            let mut touch = |r: Reg| {
                if partner.contains_key(&r) {
                    bad.insert(r);
                }
            };
            match s {
                Stmt::Set { expr, .. } => rutile_ir::thread::operands(expr).into_iter().for_each(&mut touch),
                Stmt::Wgmma { acc, b, .. } => acc.iter().copied().chain([b.index]).for_each(&mut touch),
                Stmt::Load { dsts, .. } | Stmt::LdMatrix { dsts, .. } => {
                    rutile_ir::thread::reads(s, &mut touch);
                    dsts.iter().copied().for_each(&mut touch);
                }
                Stmt::Atomic { dst, .. } | Stmt::AtomicCas { dst, .. } => {
                    rutile_ir::thread::reads(s, &mut touch);
                    touch(*dst);
                }
                Stmt::Mma { d, .. } | Stmt::MmaTf32 { d, .. } => {
                    rutile_ir::thread::reads(s, &mut touch);
                    d.iter().copied().for_each(&mut touch);
                }
                _ => rutile_ir::thread::reads(s, &mut touch),
            }
        });
        // Every definition of `lo` immediately followed by one of `hi`, and every one of `hi`
        // immediately preceded by one of `lo`, each a copy of a register or a constant.
        let copy = |e: &Expr| matches!(e, Expr::Copy(_) | Expr::Const(_));
        rutile_ir::thread::walk_lists(&k.body, &mut |list| {
            for (i, s) in list.iter().enumerate() {
                let Stmt::Set { dst, expr } = s else { continue };
                let Some(&(other, is_lo)) = partner.get(dst) else {
                    continue;
                };
                let neighbour = if is_lo {
                    list.get(i + 1)
                } else {
                    i.checked_sub(1).map(|j| &list[j])
                };
                let paired = matches!(neighbour, Some(Stmt::Set { dst: d, expr: e }) if *d == other && copy(e));
                if !paired || !copy(expr) {
                    bad.insert(*dst);
                }
            }
        });
        let mut pairs = Pairs::default();
        for (&lo, &(hi, is_lo)) in &partner {
            if is_lo && !bad.contains(&lo) && !bad.contains(&hi) {
                pairs.index.insert(lo, pairs.by_hi.len());
                pairs.by_hi.insert(hi, lo);
            }
        }
        pairs
    }

    /// Whether `hi` is the high half of a kept pair: its `lo`.
    pub(crate) fn lo_of(&self, hi: Reg) -> Option<Reg> {
        self.by_hi.get(&hi).copied()
    }

    /// The pair `lo` begins, if kept: its index.
    pub(crate) fn pair(&self, lo: Reg) -> Option<usize> {
        self.index.get(&lo).copied()
    }

    /// The number of kept pairs.
    pub(crate) fn len(&self) -> usize {
        self.by_hi.len()
    }
}
