//! The simulator's warp-level matrix loads (`Stmt::LdMatrix`) and asynchronous copies
//! (`Stmt::AsyncCopy`, `AsyncCommit`, `AsyncWait`).
//!
//! Asynchronous copies are modelled at their latest: a copy is checked (alignment, bounds,
//! races on its destination) when it starts, but moves its data only when an `AsyncWait`
//! completes its group. So a kernel that reads a copy's destination before waiting for it
//! reads the old contents (and its results are wrong), and one that waits but has no
//! barrier before another warp reads the data is reported as a missing barrier. All the
//! threads of a program commit and wait together (control flow is uniform), so groups are
//! kept per program, not per thread.

use super::{fault, Access, SharedAccess, Sim, SimFault};
use crate::interp::error::FaultKind;
use crate::interp::memory;
use crate::interp::tensor::{Data, Pointer};
use crate::thread::{Memory as Space, Reg};
use crate::types::ScalarType;

/// One `Stmt::AsyncCopy` as started: per thread, where from and where to.
#[derive(Clone, Debug)]
pub(super) struct PendingCopy {
    alloc: u32,
    param: u32,
    elem: ScalarType,
    len: usize,
    /// Per thread: shared and global element offsets of the first element.
    dst: Vec<i64>,
    src: Vec<i64>,
    /// Per thread: whether it reads global memory (elsewhere it writes zeros).
    reads: Vec<bool>,
}

/// The copies started and not yet complete.
#[derive(Clone, Debug, Default)]
pub(super) struct AsyncCopies {
    /// Started since the last commit.
    open: Vec<PendingCopy>,
    /// Committed groups, oldest first.
    groups: std::collections::VecDeque<Vec<PendingCopy>>,
}

impl Sim<'_> {
    /// `Stmt::LdMatrix` in every warp (see its documentation for who gives and gets what).
    pub(super) fn ldmatrix(&mut self, dsts: &[Reg], alloc: u32, index: Reg, trans: bool) -> Result<(), SimFault> {
        self.serial += 1;
        let matrices = dsts.len() / 2;
        // The lanes that give a row address: the first 8 per matrix in every warp.
        let active: Vec<bool> = (0..self.threads).map(|t| t % 32 < 8 * matrices).collect();
        let m = Space::Shared { alloc };
        let (offsets, elem) = self.addresses(m, index, 8, &active)?;
        self.count_banks(SharedAccess::Load, &offsets, elem, 8, &active);
        // Every row read, as one 8-element access of the lane that gives it.
        let mut rows = vec![vec![0u64; 8]; self.threads];
        for t in (0..self.threads).filter(|&t| active[t]) {
            let ptrs: Vec<Pointer> = (0..8)
                .map(|k| Pointer {
                    param: alloc,
                    offset: offsets[t] + k,
                })
                .collect();
            for p in &ptrs {
                self.touch(m, p.offset, t, Access::Read)?;
            }
            let data = memory::load(&self.shared, elem, &ptrs, None, None)?;
            let Data::Float(v) = data else {
                return Err(fault(FaultKind::InvalidIr, t, "ldmatrix of a non-float buffer".into()));
            };
            rows[t] = v.iter().map(|x| x.to_bits()).collect();
        }
        let mut out = vec![vec![0.0f64; self.threads]; dsts.len()];
        for t in 0..self.threads {
            let (warp, l) = (t / 32 * 32, t % 32);
            for j in 0..matrices {
                for h in 0..2 {
                    // (row, column) of the element within matrix `j`.
                    let (r, c) = if trans {
                        (2 * (l % 4) + h, l / 4)
                    } else {
                        (l / 4, 2 * (l % 4) + h)
                    };
                    out[2 * j + h][t] = f64::from_bits(rows[warp + 8 * j + r][c]);
                }
            }
        }
        let all = vec![true; self.threads];
        for (&d, v) in dsts.iter().zip(out) {
            self.write_where(d, &Data::Float(v), &all)?;
        }
        Ok(())
    }

    /// `Stmt::AsyncCopy`: checks the copy and records it in the open group.
    pub(super) fn async_copy(
        &mut self,
        alloc: u32,
        dst: Reg,
        param: u32,
        src: Reg,
        len: u32,
        pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        self.serial += 1;
        let len = len as usize;
        let all = vec![true; self.threads];
        let reads = self.active(pred)?;
        let to = Space::Shared { alloc };
        let (dst, elem) = self.addresses(to, dst, len, &all)?;
        self.count_banks(SharedAccess::Store, &dst, elem, len, &all);
        let (src, _) = self.addresses(Space::Global { param }, src, len, &reads)?;
        // Writes its destination from now on: no other warp may touch it before a barrier.
        for (t, &o) in dst.iter().enumerate() {
            for k in 0..len as i64 {
                self.touch(to, o + k, t, Access::Write { same: false })?;
            }
        }
        self.copies.open.push(PendingCopy {
            alloc,
            param,
            elem,
            len,
            dst,
            src,
            reads,
        });
        Ok(())
    }

    /// `Stmt::AsyncCommit`.
    pub(super) fn async_commit(&mut self) {
        let group = std::mem::take(&mut self.copies.open);
        self.copies.groups.push_back(group);
    }

    /// `Stmt::AsyncWait`: completes the oldest groups until at most `pending` remain.
    pub(super) fn async_wait(&mut self, pending: u32) -> Result<(), SimFault> {
        while self.copies.groups.len() > pending as usize {
            let group = self.copies.groups.pop_front().expect("a group");
            for copy in group {
                self.complete(&copy)?;
            }
        }
        Ok(())
    }

    /// Moves one copy's data: global elements where it reads, zeros elsewhere.
    fn complete(&mut self, c: &PendingCopy) -> Result<(), SimFault> {
        self.serial += 1;
        let (from, to) = (Space::Global { param: c.param }, Space::Shared { alloc: c.alloc });
        for k in 0..c.len as i64 {
            let src: Vec<Pointer> = c
                .src
                .iter()
                .map(|&o| Pointer {
                    param: c.param,
                    offset: o + k,
                })
                .collect();
            for t in (0..self.threads).filter(|&t| c.reads[t]) {
                self.touch(from, src[t].offset, t, Access::Read)?;
            }
            // Threads that do not read get zeros.
            let data = memory::load(&self.global, c.elem, &src, Some(&c.reads), None)?;
            let dst: Vec<Pointer> = c
                .dst
                .iter()
                .map(|&o| Pointer {
                    param: c.alloc,
                    offset: o + k,
                })
                .collect();
            memory::store(&mut self.shared, c.elem, &dst, None, &data)?;
            for (t, p) in dst.iter().enumerate() {
                self.touch(to, p.offset, t, Access::Write { same: false })?;
            }
        }
        Ok(())
    }
}
