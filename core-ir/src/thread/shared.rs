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
//!
//! Inside a loop, which the top level sees as one statement, transient buffers share bytes
//! too where the loop's body keeps them apart by barriers ([`LoopHomes`]): the operand a
//! `dot` reads and the layout exchanges of one step need not each have their own.
//!
//! Which buffers may share at all is the kernel's [`SharedReuse`]: any (PTX lays shared
//! memory out as one block), those of one element type (SPIR-V declares one workgroup array
//! per type, `ThreadKernel::shared_arrays`), or none.

use super::{Stmt, ThreadKernel};
use crate::target::SharedReuse;

/// Where each shared buffer lies: in which array, and at which byte of it. Under
/// `SameType` there is an array per element type (in the order of their types' first
/// buffers); otherwise one, for all buffers.
pub(super) struct Placement {
    /// Per buffer, its array.
    pub array: Vec<usize>,
    /// Per buffer, its first byte in its array.
    pub at: Vec<u32>,
    /// Per array: its element type (its first buffer's), its bytes and its coarsest boundary.
    pub arrays: Vec<(crate::ScalarType, u32, u32)>,
}

/// The buffers placed first fit in their order, each on its own boundary, past every
/// buffer of its array it may not share bytes with (with `reuse` `Never`, one after the
/// other).
pub(super) fn placement(k: &ThreadKernel, reuse: SharedReuse) -> Placement {
    let spans = spans(k);
    let ranges = live_ranges(k, &spans);
    let barriers: Vec<usize> = spans.iter().filter(|s| s.barrier).map(|s| s.range.0).collect();
    let loops = (reuse != SharedReuse::Never).then(|| LoopHomes::of(k));
    // Whether `a` and `b` may share bytes.
    let apart = |a: usize, b: usize| {
        let top = match (ranges[a], ranges[b]) {
            (None, _) | (_, None) => true,
            (Some((a0, a1)), Some((b0, b1))) => {
                let (first, second) = if a1 < b0 {
                    ((a0, a1), (b0, b1))
                } else {
                    ((b0, b1), (a0, a1))
                };
                first.1 < second.0 && barriers.iter().any(|&p| first.1 < p && p < second.0)
            }
        };
        match reuse {
            SharedReuse::Never => false,
            SharedReuse::SameType if k.shared[a].elem != k.shared[b].elem => false,
            _ => top || loops.as_ref().is_some_and(|l| l.apart(a, b)),
        }
    };
    let mut p = Placement {
        array: Vec::with_capacity(k.shared.len()),
        at: Vec::with_capacity(k.shared.len()),
        arrays: Vec::new(),
    };
    for (i, a) in k.shared.iter().enumerate() {
        let array = match p
            .arrays
            .iter()
            .position(|x| reuse != SharedReuse::SameType || x.0 == a.elem)
        {
            Some(x) => x,
            None => {
                p.arrays.push((a.elem, 0, 1));
                p.arrays.len() - 1
            }
        };
        let align = a.align.max(1);
        let mut at = 0u32;
        // Past every buffer of its array it may not share bytes with, until none overlaps.
        loop {
            let clash = (0..i)
                .filter(|&j| p.array[j] == array && !apart(i, j))
                .map(|j| (p.at[j], k.shared[j].bytes()))
                .find(|&(o, len)| at < o.saturating_add(len) && o < at.saturating_add(a.bytes()));
            match clash {
                Some((o, len)) => at = o.saturating_add(len).div_ceil(align).saturating_mul(align),
                None => break,
            }
        }
        p.array.push(array);
        p.at.push(at);
        let x = &mut p.arrays[array];
        x.1 = x.1.max(at.saturating_add(a.bytes()));
        x.2 = x.2.max(align);
    }
    p
}

/// The byte offset of each shared buffer from the (aligned) start of shared memory: its
/// place in its array ([`placement`]), the arrays one after the other, each on the coarsest
/// boundary of its buffers.
pub(super) fn offsets(k: &ThreadKernel, reuse: SharedReuse) -> Vec<u32> {
    let p = placement(k, reuse);
    let mut start = Vec::with_capacity(p.arrays.len());
    let mut end = 0u32;
    for &(_, bytes, align) in &p.arrays {
        let s = end.div_ceil(align).saturating_mul(align);
        start.push(s);
        end = s.saturating_add(bytes);
    }
    p.array
        .iter()
        .zip(&p.at)
        .map(|(&a, &at)| start[a].saturating_add(at))
        .collect()
}

/// Where buffers used only inside a loop may share bytes although the loop, a single
/// top-level statement, touches both: each transient buffer (`SharedAlloc::transient`:
/// nothing it holds passes from one iteration to the next) whose every access is a plain
/// one (loads, stores, `ldmatrix`, cooperative-matrix loads and stores: done when the
/// statement is, unlike asynchronous copies, TMA, mbarriers, cluster stores or warpgroup
/// MMAs) has a home,
/// the innermost loop body holding all its accesses, and there a range of positions. Two
/// such buffers may share bytes when, in the innermost body holding both, their ranges are
/// disjoint with a barrier of that body between them and another outside both (which the
/// next iteration passes before it comes back to the first). Every thread then finishes
/// with one before any touches the other, in every iteration.
struct LoopHomes {
    homes: Vec<Option<Home>>,
    /// Each loop body's path and the positions of its barriers.
    barriers: std::collections::HashMap<Vec<usize>, Vec<usize>>,
}

/// The loop body holding all of a buffer's accesses (the indices of the `while`s from the
/// top level down; empty for the top level), and the positions there that touch it.
#[derive(Clone)]
struct Home {
    path: Vec<usize>,
    range: (usize, usize),
}

impl LoopHomes {
    fn of(k: &ThreadKernel) -> LoopHomes {
        let mut l = LoopHomes {
            homes: vec![None; k.shared.len()],
            barriers: Default::default(),
        };
        let mut eligible: Vec<bool> = k.shared.iter().map(|a| a.transient).collect();
        k.walk(&mut |s| {
            let plain = matches!(
                s,
                Stmt::Load { .. }
                    | Stmt::Store { .. }
                    | Stmt::LdMatrix { .. }
                    | Stmt::CoopLoad { .. }
                    | Stmt::CoopStore { .. }
            );
            if !plain {
                s.shared_buffers(&mut |a| eligible[a as usize] = false);
            }
            if let Stmt::Specialized { producer, consumer } = s {
                // The sides run at once: positions on them order nothing.
                for side in [producer, consumer] {
                    super::walk_stmts(side, &mut |s| s.shared_buffers(&mut |a| eligible[a as usize] = false));
                }
            }
        });
        l.visit(&k.body, &mut Vec::new());
        for (h, ok) in l.homes.iter_mut().zip(eligible) {
            if !ok {
                *h = None;
            }
        }
        l
    }

    /// Records the accesses of `stmts`, the body at `path`, descending into loops.
    fn visit(&mut self, stmts: &[Stmt], path: &mut Vec<usize>) {
        let barriers = stmts
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Stmt::Barrier))
            .map(|(i, _)| i)
            .collect();
        self.barriers.insert(path.clone(), barriers);
        for (i, s) in stmts.iter().enumerate() {
            let mut touch = |a: u32| Self::record(&mut self.homes[a as usize], path, i);
            match s {
                Stmt::While { cond_body, body, .. } => {
                    super::walk_stmts(cond_body, &mut |s| s.shared_buffers(&mut touch));
                    path.push(i);
                    self.visit(body, path);
                    path.pop();
                }
                _ => super::walk_stmts(std::slice::from_ref(s), &mut |s| s.shared_buffers(&mut touch)),
            }
        }
    }

    /// Widens `home` by an access at position `at` of the body at `path`.
    fn record(home: &mut Option<Home>, path: &[usize], at: usize) {
        let access = Home {
            path: path.to_vec(),
            range: (at, at),
        };
        *home = Some(match home.take() {
            None => access,
            Some(h) => {
                let d = common(&h.path, path);
                let (a, b) = (range_at(&h, d), range_at(&access, d));
                Home {
                    path: path[..d].to_vec(),
                    range: (a.0.min(b.0), a.1.max(b.1)),
                }
            }
        });
    }

    /// Whether buffers `a` and `b` are apart in a loop body (see [`LoopHomes`]).
    fn apart(&self, a: usize, b: usize) -> bool {
        let (Some(ha), Some(hb)) = (&self.homes[a], &self.homes[b]) else {
            return false;
        };
        let d = common(&ha.path, &hb.path);
        if d == 0 {
            // In the top level: the live ranges of `offsets` speak for it.
            return false;
        }
        let (ra, rb) = (range_at(ha, d), range_at(hb, d));
        let (first, second) = if ra.1 < rb.0 { (ra, rb) } else { (rb, ra) };
        let Some(barriers) = self.barriers.get(&ha.path[..d]) else {
            return false;
        };
        first.1 < second.0
            && barriers.iter().any(|&p| first.1 < p && p < second.0)
            && barriers.iter().any(|&p| p < first.0 || second.1 < p)
    }
}

/// How many loops two paths share.
fn common(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `h`'s range in the body `d` loops deep on its path: its own, or the position of the loop
/// that holds it there.
fn range_at(h: &Home, d: usize) -> (usize, usize) {
    match h.path.get(d) {
        Some(&i) => (i, i),
        None => h.range,
    }
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
