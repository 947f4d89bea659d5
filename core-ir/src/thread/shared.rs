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
//! throughout. A warp-specialized kernel's consumers continue the top level with their
//! own side, their named barriers counting as barriers (see [`spans`]).

use super::{Stmt, ThreadKernel};

/// The byte offset of each shared buffer from the (aligned) start of shared memory, first
/// fit in the order of the buffers, each on its own boundary.
/// (With `reuse` false, one after the other.)
pub(super) fn offsets(k: &ThreadKernel, reuse: bool) -> Vec<u32> {
    let spans = spans(k);
    let ranges = live_ranges(k, &spans);
    let barriers: Vec<usize> = spans.iter().filter(|s| s.barrier).map(|s| s.range.0).collect();
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

/// A statement and the positions it counts as: its own, or a span of them.
struct Span<'k> {
    stmt: &'k Stmt,
    range: (usize, usize),
    /// Whether it is a barrier that every thread touching shared memory then waits at.
    barrier: bool,
}

/// The statements whose positions make live ranges. Usually the body's top-level
/// statements. A persistent kernel's tile (the tile loop's body) takes their place, the
/// statements around it each counting as all of it. A warp-specialized kernel that is not
/// persistent continues with its consumers' side, whose named barriers count: the
/// producer's statements count from where the sides part to the consumers' first statement
/// that waits on an mbarrier (their loop, which ends only once every copy the producer
/// made has landed; the producer does nothing after its last copy).
fn spans(k: &ThreadKernel) -> Vec<Span<'_>> {
    let Some((last, before)) = k.body.split_last() else {
        return Vec::new();
    };
    match (k.persistent, last) {
        (Some(_), Stmt::While { body, .. }) => {
            let mut out = plain(body, 0);
            let all = (0, body.len());
            out.extend(before.iter().map(|stmt| Span {
                stmt,
                range: all,
                barrier: false,
            }));
            out
        }
        (None, Stmt::Specialized { producer, consumer }) => {
            let mut out = plain(before, 0);
            let from = before.len();
            out.extend(plain(consumer, from));
            let waits = |s: &Stmt| {
                let mut w = false;
                super::walk_stmts(std::slice::from_ref(s), &mut |s| {
                    w |= matches!(s, Stmt::MbarrierWait { .. })
                });
                w
            };
            let until = consumer.iter().position(waits).unwrap_or(consumer.len());
            out.extend(producer.iter().map(|stmt| Span {
                stmt,
                range: (from, from + until),
                barrier: false,
            }));
            out
        }
        // (A persistent warp-specialized kernel: the sides' tile loops are one statement,
        // and nothing in them shares bytes.)
        _ => plain(&k.body, 0),
    }
}

/// Each of `stmts` at its own position, from `from` on.
fn plain(stmts: &[Stmt], from: usize) -> Vec<Span<'_>> {
    stmts
        .iter()
        .enumerate()
        .map(|(i, stmt)| Span {
            stmt,
            range: (from + i, from + i),
            barrier: matches!(stmt, Stmt::Barrier | Stmt::NamedBarrier { .. }),
        })
        .collect()
}

/// Per buffer, the first and last position (see [`spans`]) that touches it (`None`: none
/// does).
fn live_ranges(k: &ThreadKernel, spans: &[Span<'_>]) -> Vec<Option<(usize, usize)>> {
    let mut ranges = vec![None; k.shared.len()];
    for span in spans {
        let ((first, last), s) = (span.range, span.stmt);
        let mut touch = |alloc: u32| {
            let r: &mut Option<(usize, usize)> = &mut ranges[alloc as usize];
            *r = Some(r.map_or((first, last), |(a, b)| (a.min(first), b.max(last))));
        };
        // (A `TmaStore` reads its source until the wait: the buffer lives until then.)
        super::walk_stmts(std::slice::from_ref(s), &mut |s| s.shared_buffers(&mut touch));
    }
    // Buffers whose bytes stay theirs for the whole kernel: those another program of the
    // cluster writes (`ClusterStore`), maybe before this program gets there; and a
    // warp-specialized kernel's mbarriers, which it never invalidates.
    let end = spans.iter().map(|s| s.range.1).max().unwrap_or(0);
    k.walk(&mut |s| match s {
        Stmt::ClusterStore { alloc, .. } => ranges[*alloc as usize] = Some((0, end)),
        Stmt::MbarrierInit { bar, .. } if k.producer_warps > 0 => {
            if let Some(r) = ranges[bar.alloc as usize].as_mut() {
                *r = (0, end);
            }
        }
        _ => {}
    });
    ranges
}
