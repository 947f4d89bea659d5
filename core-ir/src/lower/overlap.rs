//! Two groups of warpgroup MMAs of one loop step issued together: where a step waits for a
//! group at once (`wgmma.wait_group 0` after its commit) but nothing reads or writes that
//! group's registers before the step's next group is issued, the wait moves past the next
//! group's commit, where the next group's own wait (`wait_group 1` when it stays in flight)
//! retires the first. The rotated attention walk is the case: `Q K_jᵀ`, then block `j - 1`'s
//! `P V`, which needs nothing of `Q K_jᵀ`; both now run back to back on the tensor cores
//! while the step goes on to its softmax as soon as the scores are done (FlashAttention-3's
//! intra-warpgroup overlap; `benches/cuda/attention_hand.cu`'s `intra` forms). Warpgroups
//! taking turns (`specialize`) then hold their turn only while they issue.

use super::Lowerer;
use crate::thread::{operands, Reg, Stmt, WgmmaA};
use std::collections::HashSet;

impl Lowerer<'_> {
    /// The statements of one loop step, from `from` in the open list (module comment).
    pub(crate) fn overlap_wgmma_groups(&mut self, from: usize) {
        let list = self.body.last_mut().expect("an open statement list");
        let step = &list[from..];
        let commit = |s: &Stmt| matches!(s, Stmt::WgmmaCommit);
        let Some(c1) = step.iter().position(commit) else {
            return;
        };
        if !matches!(step.get(c1 + 1), Some(Stmt::WgmmaWait { pending: 0 })) {
            return;
        }
        let Some(c2) = step[c1 + 2..].iter().position(commit).map(|c| c + c1 + 2) else {
            return;
        };
        let Some(f1) = step[..c1].iter().rposition(|s| matches!(s, Stmt::WgmmaFence)) else {
            return;
        };
        // The registers the first group's MMAs write or read.
        let mut first: HashSet<Reg> = HashSet::new();
        for s in &step[f1..c1] {
            if let Stmt::Wgmma { acc, a, .. } = s {
                first.extend(acc.iter().copied());
                if let WgmmaA::Registers(r) = a {
                    first.extend(r.iter().copied());
                }
            }
        }
        let apart = |r: &Reg| !first.contains(r);
        let independent = step[c1 + 2..c2].iter().all(|s| match s {
            Stmt::Set { dst, expr } => apart(dst) && operands(expr).iter().all(apart),
            Stmt::Wgmma { acc, a, .. } => {
                acc.iter().all(apart)
                    && match a {
                        WgmmaA::Registers(r) => r.iter().all(apart),
                        WgmmaA::Shared(_) => true,
                    }
            }
            Stmt::Comment(_) | Stmt::WgmmaFence => true,
            _ => false,
        });
        if !independent {
            return;
        }
        let retired_after = matches!(step.get(c2 + 1), Some(Stmt::WgmmaWait { pending: 0 | 1 }));
        list.remove(from + c1 + 1);
        if !retired_after {
            list.insert(from + c2, Stmt::WgmmaWait { pending: 1 });
        }
    }
}
