//! The simulator's tensor-memory-accelerator stores (`Stmt::TmaStore`, `Stmt::BulkCommit`,
//! `Stmt::BulkWaitRead`).
//!
//! A store is modelled at its earliest: when it is issued, its box is read from shared
//! memory (each element as a read by the issuing thread, so an element that another thread
//! wrote with no barrier since, or that nobody wrote, is a fault) and the elements inside
//! the tensor map's view are written to global memory. Until a `BulkWaitRead` of the
//! issuing thread covers it, the hardware may still be reading the source: any write to
//! those shared elements before then is a fault, and so is a program that ends with such a
//! store never waited for (its shared memory would be released under the copy).

use super::{fault, Access, Sim, SimFault};
use crate::interp::error::{FaultKind, InterpError};
use crate::interp::memory;
use crate::interp::tensor::Pointer;
use crate::thread::{Memory as Space, Reg};

/// One issued store whose source a wait has not covered yet.
#[derive(Clone, Debug)]
struct PendingRead {
    /// The issuing thread.
    thread: usize,
    alloc: u32,
    /// The shared elements it reads, sorted.
    elements: Vec<i64>,
    /// Whether a `BulkCommit` of its thread has closed its group.
    committed: bool,
}

#[derive(Default)]
pub(super) struct BulkReads {
    pending: Vec<PendingRead>,
}

impl Sim<'_> {
    /// `Stmt::TmaStore`: checks each active thread's box, then copies it.
    pub(super) fn tma_store(
        &mut self,
        map: u32,
        alloc: u32,
        src: Reg,
        coords: &[Reg],
        pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        let Some((active, view)) = self.tma_begin(map, alloc, pred, "a TMA store")? else {
            return Ok(());
        };
        let from = self.k.shared[alloc as usize];
        let (m, param, elem, eb) = (view.m, view.param, view.elem, view.eb);
        let repeat = 8 * m.swizzle as i64;
        let srcs = self.read(src, Some(&active))?.ints()?.to_vec();
        let corners: Vec<Vec<i64>> = coords
            .iter()
            .map(|&c| Ok(self.read(c, Some(&active))?.ints()?.to_vec()))
            .collect::<Result<_, SimFault>>()?;
        let (cx, cy) = (&corners[0], &corners[1]);
        let [bw, bh] = m.box_dims.map(|d| d as i64);
        for t in (0..self.threads).filter(|&t| active[t]) {
            let start = srcs[t].wrapping_mul(eb);
            if start % repeat != 0 || (from.align as i64) % repeat != 0 {
                let message = format!(
                    "a TMA store from byte {start} of shared{alloc} (on a {}-byte boundary), not where its {}-byte swizzle repeats",
                    from.align, m.swizzle
                );
                return Err(fault(FaultKind::Misaligned, t, message));
            }
            if (cx[t] * eb) % 16 != 0 {
                let message = format!(
                    "a TMA store's box starts at column {}, not on a 16-byte boundary",
                    cx[t]
                );
                return Err(fault(FaultKind::Misaligned, t, message));
            }
            let (mut shared_at, mut global_at) = (Vec::new(), Vec::new());
            let mut elements = Vec::with_capacity((bw * bh) as usize);
            for by in 0..bh {
                for bx in 0..bw {
                    let at = self.box_shared_element(alloc, &view, srcs[t], (bx, by), t)?;
                    self.touch(Space::Shared { alloc }, at, t, Access::Read)?;
                    elements.push(at);
                    let mut at_xy = vec![cx[t] + bx, cy[t] + by];
                    at_xy.extend(corners[2..].iter().map(|c| c[t]));
                    let Some(offset) = self.map_element(map, &view, &at_xy, t, "a TMA store ... writes")? else {
                        continue;
                    };
                    self.touch(Space::Global { param }, offset, t, Access::Write { same: false })?;
                    shared_at.push(Pointer {
                        param: alloc,
                        offset: at,
                    });
                    global_at.push(Pointer { param, offset });
                }
            }
            let data = memory::load(&self.shared, elem, &shared_at, None, None)?;
            memory::store(&mut self.global, elem, &global_at, None, &data)?;
            elements.sort_unstable();
            self.bulk_reads.pending.push(PendingRead {
                thread: t,
                alloc,
                elements,
                committed: false,
            });
        }
        Ok(())
    }

    /// `Stmt::BulkCommit`: closes the active threads' stores into a group.
    pub(super) fn bulk_commit(&mut self, pred: Option<Reg>) -> Result<(), SimFault> {
        let active = self.active(pred)?;
        for p in &mut self.bulk_reads.pending {
            if active.get(p.thread) == Some(&true) {
                p.committed = true;
            }
        }
        Ok(())
    }

    /// `Stmt::BulkWaitRead`: the active threads' committed stores have read their sources.
    pub(super) fn bulk_wait_read(&mut self, alloc: u32, pred: Option<Reg>) -> Result<(), SimFault> {
        let active = self.active(pred)?;
        if let Some(p) = self
            .bulk_reads
            .pending
            .iter()
            .find(|p| active.get(p.thread) == Some(&true) && !p.committed)
        {
            let message = format!(
                "a wait for the reads of TMA stores from shared{} that no `BulkCommit` has closed into a group",
                p.alloc
            );
            return Err(fault(FaultKind::InvalidIr, p.thread, message));
        }
        self.bulk_reads.pending.retain(|p| active.get(p.thread) != Some(&true));
        self.use_shared(alloc);
        Ok(())
    }

    /// Faults a write by thread `t` to element `e` of shared buffer `alloc` that a TMA store
    /// may still be reading.
    pub(super) fn bulk_read_guard(&self, alloc: u32, e: i64, t: usize) -> Result<(), SimFault> {
        let reading = self
            .bulk_reads
            .pending
            .iter()
            .find(|p| p.alloc == alloc && p.elements.binary_search(&e).is_ok());
        match reading {
            None => Ok(()),
            Some(p) => {
                let message = format!(
                    "element {e} of shared{alloc} is written while a TMA store issued by thread {} may still read it (no `BulkWaitRead` since)",
                    p.thread
                );
                Err(fault(FaultKind::MissingBarrier, t, message))
            }
        }
    }

    /// At the end of a program: every store's reads must have been waited for.
    pub(super) fn check_bulk_reads_done(&mut self) -> Result<(), InterpError> {
        let Some(p) = self.bulk_reads.pending.first() else {
            return Ok(());
        };
        let error = InterpError::ThreadFault {
            kind: FaultKind::InvalidIr,
            stmt: String::new(),
            context: String::new(),
            program: self.pid,
            thread: Some(p.thread as u32),
            message: format!(
                "the program ends while a TMA store from shared{} may still read it: no `BulkWaitRead` after it",
                p.alloc
            ),
        };
        self.bulk_reads.pending.clear();
        Err(error)
    }
}
