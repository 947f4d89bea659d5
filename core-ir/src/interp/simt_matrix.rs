//! The simulator's warp-level matrix loads (`Stmt::LdMatrix`), tf32 matrix multiply-adds
//! (`Stmt::MmaTf32`) and asynchronous copies (`Stmt::AsyncCopy`, `AsyncCommit`,
//! `AsyncWait`).
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
use crate::ir::round_to_tf32;
use crate::thread::{Memory as Space, Reg};
use crate::types::ScalarType;

/// The (row, column) of the accumulator elements lane `4g + t` holds in an m16n8 tile.
pub(super) fn accumulator_fragment(g: usize, t: usize) -> [(usize, usize); 4] {
    [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
}

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
        let m = Space::Shared { alloc };
        // A row is 16 bytes: 8 elements of 16 bits or 4 of 32, 2 or 1 registers per lane.
        let (_, _, elem) = self.space(m);
        let per_row = 16 / elem.size_bytes().max(1);
        let per_lane = per_row / 4;
        if per_lane == 0 || (trans && per_lane != 2) {
            return Err(SimFault {
                kind: FaultKind::InvalidIr,
                thread: None,
                message: format!("ldmatrix{} of {elem} elements", if trans { ".trans" } else { "" }),
            });
        }
        let matrices = dsts.len() / per_lane;
        // The lanes that give a row address: the first 8 per matrix in every warp.
        let active: Vec<bool> = (0..self.threads).map(|t| t % 32 < 8 * matrices).collect();
        let (offsets, elem) = self.addresses(m, index, per_row, &active)?;
        self.count_banks(SharedAccess::Load, &offsets, elem, per_row, &active);
        // Every row read, as one 16-byte access of the lane that gives it.
        let mut rows = vec![vec![0u64; per_row]; self.threads];
        for t in (0..self.threads).filter(|&t| active[t]) {
            let ptrs: Vec<Pointer> = (0..per_row as i64)
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
                for h in 0..per_lane {
                    // (row, column) of the element within matrix `j`.
                    let (r, c) = if trans {
                        (2 * (l % 4) + h, l / 4)
                    } else {
                        (l / 4, per_lane * (l % 4) + h)
                    };
                    out[per_lane * j + h][t] = f64::from_bits(rows[warp + 8 * j + r][c]);
                }
            }
        }
        let all = vec![true; self.threads];
        for (&d, v) in dsts.iter().zip(out) {
            self.write_where(d, &Data::Float(v), &all)?;
        }
        Ok(())
    }

    /// `Stmt::MmaTf32` in every warp: each warp's fragments gathered into matrices, the
    /// operands rounded to tf32 as the device's conversion does, multiplied exactly (f64
    /// holds every product of two tf32 values, and their sums of 8 terms to well within f32's
    /// precision) and rounded to f32 once, then scattered back.
    pub(super) fn mma_tf32(&mut self, d: &[Reg; 4], a: &[Reg; 4], b: &[Reg; 2], c: &[Reg; 4]) -> Result<(), SimFault> {
        let tf32 = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| round_to_tf32(x as f32) as f64).collect() };
        let av: Vec<Vec<f64>> = a
            .iter()
            .map(|&r| self.float_column(r).map(tf32))
            .collect::<Result<_, _>>()?;
        let bv: Vec<Vec<f64>> = b
            .iter()
            .map(|&r| self.float_column(r).map(tf32))
            .collect::<Result<_, _>>()?;
        let cv: Vec<Vec<f64>> = c.iter().map(|&r| self.float_column(r)).collect::<Result<_, _>>()?;
        let mut out = vec![vec![0.0f64; self.threads]; 4];
        for w in 0..self.threads / 32 {
            let (mut am, mut bm, mut cm) = ([[0f64; 8]; 16], [[0f64; 8]; 8], [[0f64; 8]; 16]);
            for l in 0..32 {
                let (t, g, q) = (w * 32 + l, l / 4, l % 4);
                for (i, &(r, k)) in [(g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)].iter().enumerate() {
                    am[r][k] = av[i][t];
                }
                for (i, k) in [q, q + 4].into_iter().enumerate() {
                    bm[k][g] = bv[i][t];
                }
                for (i, &(r, n)) in accumulator_fragment(g, q).iter().enumerate() {
                    cm[r][n] = cv[i][t];
                }
            }
            for l in 0..32 {
                let (t, g, q) = (w * 32 + l, l / 4, l % 4);
                for (i, &(r, n)) in accumulator_fragment(g, q).iter().enumerate() {
                    let sum: f64 = cm[r][n] + (0..8).map(|k| am[r][k] * bm[k][n]).sum::<f64>();
                    out[i][t] = sum as f32 as f64;
                }
            }
        }
        let all = vec![true; self.threads];
        for (&r, v) in d.iter().zip(out) {
            self.write_where(r, &Data::Float(v), &all)?;
        }
        Ok(())
    }

    /// Register `r` of every thread, as floats.
    pub(super) fn float_column(&self, r: Reg) -> Result<Vec<f64>, SimFault> {
        match &self.read(r, None)?.data {
            Data::Float(v) => Ok(v.clone()),
            _ => Err(SimFault {
                kind: FaultKind::InvalidIr,
                thread: None,
                message: format!("mma register r{} is not a float", r.index()),
            }),
        }
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
