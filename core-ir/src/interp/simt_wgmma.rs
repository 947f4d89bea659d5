//! The simulator's warpgroup matrix multiply-adds (`Stmt::Wgmma`, `WgmmaCommit`,
//! `WgmmaWait`, `WgmmaFence`, `FenceProxyAsync`).
//!
//! A `wgmma` reads its operands from shared memory through the canonical layouts of its
//! descriptors, modelled from the PTX ISA's definition alone (address, leading and stride
//! byte offsets, swizzle on the address bits), so a lowering that stores a tile one way and
//! describes it another gives wrong products here as it would on the GPU. The operands are
//! read when it is issued (after the barrier that publishes them); its results land in the
//! accumulator registers only at the `WgmmaWait` that covers its group, so reading them
//! earlier reads the old values. The hardware may read the operands at any time until that
//! wait, so a write to one of them before it faults, as does a TMA copy issued into one (a
//! warp-specialized kernel's stage handed back to the producer while an MMA still reads
//! it). All threads of a program issue, commit and wait together
//! (control flow is uniform), so groups are kept per program.

use super::{fault, Access, Sim, SimFault};
use crate::interp::error::FaultKind;
use crate::interp::memory;
use crate::interp::tensor::{Data, Pointer};
use crate::thread::{MatrixMajor, Memory as Space, Reg, SmemMatrix, WgmmaA};

/// One issued `wgmma`: the accumulator registers and the values they get at its wait, and
/// the registers and shared elements it reads its operands from, which nothing may write
/// before that wait.
#[derive(Clone, Debug)]
pub(super) struct PendingWgmma {
    acc: Vec<Reg>,
    values: Vec<Vec<f64>>,
    a: Vec<Reg>,
    shared: Vec<(u32, i64)>,
}

/// The wgmmas issued and not yet waited for.
#[derive(Clone, Debug, Default)]
pub(super) struct Wgmmas {
    open: Vec<PendingWgmma>,
    groups: std::collections::VecDeque<Vec<PendingWgmma>>,
    /// The shared elements (buffer, element) their operands read, each with how many of
    /// them read it: the hardware may read them at any time until the wait.
    reading: std::collections::HashMap<(u32, i64), u32>,
}

impl Wgmmas {
    /// The value the newest issued, not yet waited-for wgmma gives register `r`, if any.
    fn latest(&self, r: Reg) -> Option<Vec<f64>> {
        let issued = self.groups.iter().flatten().chain(&self.open);
        issued
            .filter_map(|w| w.acc.iter().position(|&a| a == r).map(|i| w.values[i].clone()))
            .next_back()
    }

    /// Whether an issued, not yet waited-for wgmma reads A from register `r`.
    fn reads(&self, r: Reg) -> bool {
        self.groups.iter().flatten().chain(&self.open).any(|w| w.a.contains(&r))
    }

    /// Whether an issued, not yet waited-for wgmma reads element `e` of shared buffer
    /// `alloc`.
    pub(super) fn reads_shared(&self, alloc: u32, e: i64) -> bool {
        self.reading.contains_key(&(alloc, e))
    }
}

/// The byte offset from a matrix's start of element `(i, k)` (row `i` of A, column `i` of
/// B; `k` along K) of `eb` bytes in its canonical layout, before the swizzle (MN-major
/// matrices are of 16-bit elements: fp8 ones are K-major).
fn canonical_offset(m: &SmemMatrix, i: u32, k: u32, eb: u32) -> u32 {
    let s = m.swizzle;
    match m.major {
        MatrixMajor::K => (i / 8) * m.sbo + (i % 8) * s + eb * k,
        MatrixMajor::MN => {
            let c = s / 2;
            (i / c) * m.lbo + (k / 8) * m.sbo + (k % 8) * s + 2 * (i % c)
        }
    }
}

/// The swizzle of the descriptor's mode on a byte address (from a 1024-byte boundary):
/// 16-byte chunk bits XORed with the bits from 7 up, as many as the row has chunks.
fn swizzle(addr: u32, swizzle_bytes: u32) -> u32 {
    let mask = swizzle_bytes / 16 - 1;
    addr ^ (((addr >> 7) & mask) << 4)
}

impl Sim<'_> {
    /// `Stmt::Wgmma` in every warpgroup.
    pub(super) fn wgmma(
        &mut self,
        acc: &[Reg],
        a: &WgmmaA,
        b: &SmemMatrix,
        n: u32,
        accumulate: bool,
    ) -> Result<(), SimFault> {
        self.serial += 1;
        let n = n as usize;
        // wgmmas chain through their accumulators: one issued after another on the same
        // registers adds to its result, landed or not. Without `accumulate` nothing is read.
        let cv: Vec<Vec<f64>> = acc
            .iter()
            .map(|&r| match self.wgmmas.latest(r) {
                _ if !accumulate => Ok(vec![0.0; self.threads]),
                Some(v) => Ok(v),
                None => self.float_column(r),
            })
            .collect::<Result<_, _>>()?;
        // A in registers: each thread's 8 values, read when the wgmma is issued.
        let a_regs: Option<Vec<Vec<f64>>> = match a {
            WgmmaA::Shared(_) => None,
            WgmmaA::Registers(r) => Some(r.iter().map(|&x| self.float_column(x)).collect::<Result<_, _>>()?),
        };
        let mut out = vec![vec![0.0f64; self.threads]; acc.len()];
        let mut shared = Vec::new();
        // One MMA reads 32 bytes of K: 16 f16 or bf16 values, 32 fp8 ones.
        let kn = 32 / self.k.shared[b.alloc as usize].elem.size_bytes();
        for wg in 0..self.threads / 128 {
            let first = wg * 128;
            let am = match (a, &a_regs) {
                (WgmmaA::Shared(m), _) => self.wgmma_operand(m, first, 64, true, &mut shared)?,
                (WgmmaA::Registers(_), Some(v)) => registers_operand(v, first),
                _ => unreachable!("registers read above"),
            };
            let bm = self.wgmma_operand(b, first, n as u32, false, &mut shared)?;
            for w in 0..4 {
                for l in 0..32 {
                    let t = first + 32 * w + l;
                    for (x, column) in out.iter_mut().enumerate() {
                        let (j, h, e) = (x / 4, (x / 2) % 2, x % 2);
                        let (r, c) = (16 * w + 8 * h + l / 4, 8 * j + 2 * (l % 4) + e);
                        let sum: f64 = cv[x][t] + (0..kn).map(|k| am[r][k] * bm[k][c]).sum::<f64>();
                        column[t] = sum as f32 as f64;
                    }
                }
            }
        }
        shared.sort_unstable();
        shared.dedup();
        for &e in &shared {
            *self.wgmmas.reading.entry(e).or_insert(0) += 1;
        }
        self.wgmmas.open.push(PendingWgmma {
            acc: acc.to_vec(),
            values: out,
            a: match a {
                WgmmaA::Shared(_) => Vec::new(),
                WgmmaA::Registers(r) => r.to_vec(),
            },
            shared,
        });
        Ok(())
    }

    /// Faults a write to register `r` while a wgmma not yet waited for reads A from it: the
    /// hardware reads such registers at any time until the wait.
    pub(super) fn wgmma_a_guard(&self, r: Reg) -> Result<(), SimFault> {
        if self.wgmmas.reads(r) {
            let message = format!(
                "r{} is written while a wgmma that reads A from it is not yet waited for",
                r.index()
            );
            return Err(fault(FaultKind::MissingBarrier, 0, message));
        }
        Ok(())
    }

    /// Faults a write by thread `t` to element `e` of shared buffer `alloc` while a wgmma
    /// not yet waited for reads it: the hardware reads its operands at any time until the
    /// wait.
    pub(super) fn wgmma_read_guard(&self, alloc: u32, e: i64, t: usize) -> Result<(), SimFault> {
        if self.wgmmas.reads_shared(alloc, e) {
            let message =
                format!("element {e} of shared{alloc} is written while a wgmma that reads it is not yet waited for");
            return Err(fault(FaultKind::MissingBarrier, t, message));
        }
        Ok(())
    }

    /// Operand `m` of the warpgroup whose first thread is `first`, as a matrix: A (64 x K,
    /// `rows_along_i` with `i` the row) or B (K x `n`, indexed `[k][i]`), K 16 (32 for fp8);
    /// the elements it reads go to `read`.
    fn wgmma_operand(
        &mut self,
        m: &SmemMatrix,
        first: usize,
        extent: u32,
        is_a: bool,
        read: &mut Vec<(u32, i64)>,
    ) -> Result<Vec<Vec<f64>>, SimFault> {
        let space = Space::Shared { alloc: m.alloc };
        let idx = self.read(m.index, None)?.ints()?.to_vec();
        let base = idx[first];
        if let Some(t) = (first..first + 128).find(|&t| idx[t] != base) {
            return Err(fault(
                FaultKind::InvalidIr,
                t,
                format!(
                    "a wgmma operand's start differs within a warpgroup: element {} here, {base} in thread {first}",
                    idx[t]
                ),
            ));
        }
        let start = base + i64::from(m.offset);
        let elem = self.k.shared[m.alloc as usize].elem;
        let eb = elem.size_bytes() as i64;
        let start_byte = start * eb;
        if start_byte % 16 != 0 {
            return Err(fault(
                FaultKind::Misaligned,
                first,
                format!("a wgmma operand starts at byte {start_byte}, not a multiple of 16"),
            ));
        }
        let kn = 32 / eb as usize;
        let mut ptrs = Vec::new();
        for i in 0..extent {
            for k in 0..kn as u32 {
                let byte = start_byte as u32 + canonical_offset(m, i, k, eb as u32);
                let at = swizzle(byte, m.swizzle) as i64 / eb;
                ptrs.push(Pointer {
                    param: m.alloc,
                    offset: at,
                });
            }
        }
        read.extend(ptrs.iter().map(|p| (m.alloc, p.offset)));
        for p in &ptrs {
            self.shared.locate(*p).map_err(|f| SimFault {
                kind: f.kind,
                thread: Some(first),
                message: format!("a wgmma operand: {}", f.message),
            })?;
            self.touch(space, p.offset, first, Access::Read)?;
        }
        let Data::Float(v) = memory::load(&self.shared, elem, &ptrs, None, None)? else {
            return Err(fault(FaultKind::InvalidIr, first, "wgmma of a non-float buffer".into()));
        };
        // v[kn i + k]
        Ok(if is_a {
            (0..extent as usize).map(|i| v[kn * i..kn * i + kn].to_vec()).collect()
        } else {
            (0..kn)
                .map(|k| (0..extent as usize).map(|i| v[kn * i + k]).collect())
                .collect()
        })
    }

    /// `Stmt::WgmmaCommit`.
    pub(super) fn wgmma_commit(&mut self) {
        let group = std::mem::take(&mut self.wgmmas.open);
        self.wgmmas.groups.push_back(group);
    }

    /// `Stmt::WgmmaWait`: the oldest groups' results land until at most `pending` remain.
    pub(super) fn wgmma_wait(&mut self, pending: u32) -> Result<(), SimFault> {
        while self.wgmmas.groups.len() > pending as usize {
            let group = self.wgmmas.groups.pop_front().expect("a group");
            let all = vec![true; self.threads];
            for w in group {
                for (&r, v) in w.acc.iter().zip(w.values) {
                    self.write_where(r, &Data::Float(v), &all)?;
                }
                for e in &w.shared {
                    if let Some(n) = self.wgmmas.reading.get_mut(e) {
                        *n -= 1;
                        if *n == 0 {
                            self.wgmmas.reading.remove(e);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The 64 x 16 A operand a warpgroup (first thread `first`) holds in registers, from each
/// register's column of values (`thread::WgmmaA::Registers` gives the positions).
fn registers_operand(regs: &[Vec<f64>], first: usize) -> Vec<Vec<f64>> {
    let mut a = vec![vec![0.0; 16]; 64];
    for (r, row) in a.iter_mut().enumerate() {
        let (w, g, h) = (r / 16, r % 8, (r % 16) / 8);
        for (k, v) in row.iter_mut().enumerate() {
            let (half, kk) = (k / 8, k % 8);
            let t = first + 32 * w + 4 * g + kk / 2;
            *v = regs[2 * (2 * half + h) + kk % 2][t];
        }
    }
    a
}
