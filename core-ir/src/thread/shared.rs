//! Where each shared buffer lives: buffers that are never in use between the same two
//! barriers share bytes (the `dot` pipeline's ring and the epilogue's layout exchange, say),
//! so that a kernel needs the shared memory of its largest phase, not of all its buffers.
//!
//! A buffer's live range is the span of the kernel's top-level statements that touch it (a
//! statement nested in a loop or branch counts as the whole top-level statement). Two
//! buffers may overlap in memory when their ranges are disjoint and a top-level barrier lies
//! between them: every thread has then finished with the first (its asynchronous copies
//! and MMAs waited for, as the lowering does before such a barrier) before any touches the
//! second. The SIMT simulator checks this of every kernel it runs.
//!
//! In a persistent kernel the statements of one tile (the tile loop's body, which ends with
//! a barrier) take the place of the top level: what one tile does last and what the next
//! does first are apart by that barrier. A buffer touched outside the tile loop is live
//! throughout.

use super::{Memory, Stmt, ThreadKernel};

/// The byte offset of each shared buffer from the (aligned) start of shared memory, first
/// fit in the order of the buffers, each on its own boundary.
/// (With `reuse` false, one after the other.)
pub(super) fn offsets(k: &ThreadKernel, reuse: bool) -> Vec<u32> {
    let ranges = live_ranges(k);
    let barriers: Vec<usize> = top_level(k)
        .0
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Stmt::Barrier))
        .map(|(i, _)| i)
        .collect();
    // Whether `a` and `b` may share bytes.
    let apart = |a: usize, b: usize| {
        reuse
            && match (ranges[a], ranges[b]) {
                (None, _) | (_, None) => true,
                (Some((a0, a1)), Some((b0, b1))) => {
                    let (first, second) = if a1 < b0 {
                        ((a0, a1), (b0, b1))
                    } else {
                        ((b0, b1), (a0, a1))
                    };
                    first.1 < second.0 && barriers.iter().any(|&p| first.1 < p && p < second.0)
                }
            }
    };
    let mut placed: Vec<(u32, u32)> = Vec::with_capacity(k.shared.len());
    for (i, a) in k.shared.iter().enumerate() {
        let align = a.align.max(1);
        let mut at = 0u32;
        // Past every buffer it may not share bytes with, until none overlaps.
        loop {
            let clash = placed
                .iter()
                .enumerate()
                .filter(|&(j, _)| !apart(i, j))
                .find(|&(_, &(o, len))| at < o.saturating_add(len) && o < at.saturating_add(a.bytes()));
            match clash {
                Some((_, &(o, len))) => at = o.saturating_add(len).div_ceil(align).saturating_mul(align),
                None => break,
            }
        }
        placed.push((at, a.bytes()));
    }
    placed.into_iter().map(|(o, _)| o).collect()
}

/// The statements whose spans are live ranges (the body, or a persistent kernel's tile),
/// and the statements around them, each of which counts as all of them.
fn top_level(k: &ThreadKernel) -> (&[Stmt], Vec<&Stmt>) {
    let last = k.body.len().wrapping_sub(1);
    match k.persistent.and(k.body.last()) {
        Some(Stmt::While { body, .. }) => {
            let at = last;
            let around = k
                .body
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != at)
                .map(|(_, s)| s)
                .collect();
            (body, around)
        }
        _ => (&k.body, Vec::new()),
    }
}

/// Per buffer, the first and last top-level statement that touches it (`None`: none does).
fn live_ranges(k: &ThreadKernel) -> Vec<Option<(usize, usize)>> {
    let mut ranges = vec![None; k.shared.len()];
    let (stmts, around) = top_level(k);
    let all = (0, stmts.len());
    let located = around.into_iter().map(|s| (all, s));
    let inside = stmts.iter().enumerate().map(|(i, s)| ((i, i), s));
    for ((first, last), s) in located.chain(inside) {
        let mut touch = |alloc: u32| {
            let r: &mut Option<(usize, usize)> = &mut ranges[alloc as usize];
            *r = Some(r.map_or((first, last), |(a, b)| (a.min(first), b.max(last))));
        };
        super::walk_stmts(std::slice::from_ref(s), &mut |s| match s {
            Stmt::Load {
                mem: Memory::Shared { alloc },
                ..
            }
            | Stmt::Store {
                mem: Memory::Shared { alloc },
                ..
            }
            | Stmt::LdMatrix { alloc, .. }
            | Stmt::CoopLoad { alloc, .. }
            | Stmt::CoopStore { alloc, .. }
            | Stmt::AsyncCopy { alloc, .. } => touch(*alloc),
            Stmt::Wgmma { a, b, .. } => {
                if let super::WgmmaA::Shared(a) = a {
                    touch(a.alloc);
                }
                touch(b.alloc);
            }
            Stmt::TmaLoad { alloc, bar, .. } => {
                touch(*alloc);
                touch(bar.alloc);
            }
            Stmt::MbarrierInit { bar, .. }
            | Stmt::MbarrierArriveExpectTx { bar, .. }
            | Stmt::MbarrierWait { bar, .. }
            | Stmt::MbarrierInval { bar, .. } => touch(bar.alloc),
            _ => {}
        });
    }
    ranges
}
