//! The simulator's cooperative matrices (`Stmt::CoopLoad`, `CoopStore`, `CoopMulAdd`,
//! `CoopMul`, `CoopZero`).
//!
//! The device does not say which lane holds which element of a cooperative matrix, so they
//! are modelled as what they are to a program: one whole matrix per warp, loaded, multiplied
//! and stored by the warp as a unit. A load or store reads its `index` in every lane and
//! faults unless the warp agrees on it; its elements are then accessed as the warp's first
//! lane (bounds and uninitialized reads), recorded for races as a lane of its own, one for
//! loads and one for stores: which invocation holds an element is the device's choice, so
//! passing elements between cooperative accesses and the warp's own needs a barrier, as
//! between threads. A multiply-add sums in f32 with `k` ascending, the interpreter's `dot`
//! order, so a lowering on cooperative matrices gives the interpreter's results bit for bit
//! and any wrong stride, offset or tile shows as a wrong value.

use super::{fault, Access, Sim, SimFault};
use crate::interp::error::FaultKind;
use crate::interp::memory;
use crate::interp::tensor::{Data, Pointer};
use crate::thread::{CoopMatrix, CoopReg, Memory as Space, Reg};

/// The lanes cooperative loads and stores are recorded as (`Sim::lane_bits`), beyond a
/// subgroup of 32's: so that a store then a load of the same elements by one subgroup, or
/// either beside its invocations' own accesses, is an exchange that needs a barrier.
const LOAD_LANE: usize = 62;
const STORE_LANE: usize = 63;

/// Each cooperative matrix's value in each warp (row-major), `None` until written.
pub(super) type CoopValues = Vec<Vec<Option<Vec<f64>>>>;

impl Sim<'_> {
    fn coop_shape(&self, c: CoopReg) -> CoopMatrix {
        self.k.coop[c as usize]
    }

    /// The buffer offsets of the elements of `c` (row-major order) for each warp, in shared
    /// buffer `alloc`. A fault where the warp's index is not a multiple of 16 bytes' worth of
    /// elements, which `Stmt::CoopLoad` promises the backends (the verifier checks strides).
    fn coop_offsets(
        &self,
        c: CoopReg,
        alloc: u32,
        index: Reg,
        stride: u32,
        row_major: bool,
    ) -> Result<Vec<Vec<i64>>, SimFault> {
        let m = self.coop_shape(c);
        let bytes = self.k.shared[alloc as usize].elem.size_bytes() as i64;
        let idx = self.read(index, None)?.ints()?.to_vec();
        let mut out = Vec::new();
        for w in 0..self.threads / self.warp_size {
            let lanes = &idx[w * self.warp_size..(w + 1) * self.warp_size];
            if let Some(l) = lanes.iter().position(|&i| i != lanes[0]) {
                return Err(fault(
                    FaultKind::InvalidIr,
                    w * self.warp_size + l,
                    format!("a cooperative matrix access whose index differs within warp {w}"),
                ));
            }
            let base = lanes[0];
            if (base * bytes) % 16 != 0 {
                return Err(fault(
                    FaultKind::InvalidIr,
                    w * self.warp_size,
                    format!("a cooperative matrix access at element {base}, not on a 16-byte boundary"),
                ));
            }
            let mut offs = Vec::with_capacity((m.rows * m.cols) as usize);
            for r in 0..m.rows as i64 {
                for col in 0..m.cols as i64 {
                    offs.push(if row_major {
                        base + r * stride as i64 + col
                    } else {
                        base + col * stride as i64 + r
                    });
                }
            }
            out.push(offs);
        }
        Ok(out)
    }

    pub(super) fn coop_load(
        &mut self,
        dst: CoopReg,
        alloc: u32,
        index: Reg,
        stride: u32,
        row_major: bool,
    ) -> Result<(), SimFault> {
        self.serial += 1;
        let m = Space::Shared { alloc };
        let elem = self.k.shared[alloc as usize].elem;
        let offsets = self.coop_offsets(dst, alloc, index, stride, row_major)?;
        for (w, offs) in offsets.iter().enumerate() {
            let t = w * self.warp_size;
            let ptrs = self.coop_pointers(alloc, offs, t)?;
            let loader = self.lane_bits(t, LOAD_LANE);
            for p in &ptrs {
                self.touch_as(m, p.offset, t, loader, Access::Read)?;
            }
            let Data::Float(v) = memory::load(&self.shared, elem, &ptrs, None, None)? else {
                return Err(fault(
                    FaultKind::InvalidIr,
                    t,
                    "a cooperative matrix of non-floats".into(),
                ));
            };
            self.coop[dst as usize][w] = Some(v);
        }
        Ok(())
    }

    pub(super) fn coop_store(
        &mut self,
        src: CoopReg,
        alloc: u32,
        index: Reg,
        stride: u32,
        row_major: bool,
    ) -> Result<(), SimFault> {
        self.serial += 1;
        let m = Space::Shared { alloc };
        let elem = self.k.shared[alloc as usize].elem;
        let offsets = self.coop_offsets(src, alloc, index, stride, row_major)?;
        for (w, offs) in offsets.iter().enumerate() {
            let t = w * self.warp_size;
            let value = self.coop_value(src, w)?.clone();
            let ptrs = self.coop_pointers(alloc, offs, t)?;
            let old = memory::load(&self.shared, elem, &ptrs, None, None)?;
            let Data::Float(old) = old else {
                return Err(fault(
                    FaultKind::InvalidIr,
                    t,
                    "a cooperative matrix of non-floats".into(),
                ));
            };
            let mut seen = std::collections::HashSet::new();
            for (i, p) in ptrs.iter().enumerate() {
                if !seen.insert(p.offset) {
                    return Err(fault(
                        FaultKind::RacingStores,
                        t,
                        format!("a cooperative matrix store writes element {} twice", p.offset),
                    ));
                }
                let same = old[i].to_bits() == value[i].to_bits();
                let storer = self.lane_bits(t, STORE_LANE);
                self.touch_as(m, p.offset, t, storer, Access::Write { same })?;
            }
            memory::store(&mut self.shared, elem, &ptrs, None, &Data::Float(value))?;
        }
        Ok(())
    }

    /// The elements of shared buffer `alloc` at `offsets`, each checked to lie inside it (a
    /// fault of warp leader `t` otherwise).
    fn coop_pointers(&self, alloc: u32, offsets: &[i64], t: usize) -> Result<Vec<Pointer>, SimFault> {
        offsets
            .iter()
            .map(|&offset| {
                let p = Pointer { param: alloc, offset };
                self.shared.locate(p).map_err(|f| SimFault {
                    kind: f.kind,
                    thread: Some(t),
                    message: f.message,
                })?;
                Ok(p)
            })
            .collect()
    }

    fn coop_value(&self, c: CoopReg, w: usize) -> Result<&Vec<f64>, SimFault> {
        self.coop[c as usize][w].as_ref().ok_or_else(|| {
            fault(
                FaultKind::UndefinedRegister,
                w * self.warp_size,
                format!("c{c} is read before it is written"),
            )
        })
    }

    /// `d = a b + c` in every warp: f32 sums, `k` ascending (products of 16-bit values are
    /// exact in f32), as the interpreter's `dot`.
    pub(super) fn coop_mul_add(&mut self, d: CoopReg, a: CoopReg, b: CoopReg, c: CoopReg) -> Result<(), SimFault> {
        let (ma, mb) = (self.coop_shape(a), self.coop_shape(b));
        let (rows, k, cols) = (ma.rows as usize, ma.cols as usize, mb.cols as usize);
        for w in 0..self.threads / self.warp_size {
            let (av, bv, cv) = (self.coop_value(a, w)?, self.coop_value(b, w)?, self.coop_value(c, w)?);
            let mut out = vec![0.0f64; rows * cols];
            for r in 0..rows {
                for n in 0..cols {
                    let mut s = cv[r * cols + n] as f32;
                    for kk in 0..k {
                        s += (av[r * k + kk] as f32) * (bv[kk * cols + n] as f32);
                    }
                    out[r * cols + n] = s as f64;
                }
            }
            self.coop[d as usize][w] = Some(out);
        }
        Ok(())
    }

    /// The element-wise product, each element an f32 product (the interpreter's `*`).
    pub(super) fn coop_mul(&mut self, d: CoopReg, a: CoopReg, b: CoopReg) -> Result<(), SimFault> {
        for w in 0..self.threads / self.warp_size {
            let (av, bv) = (self.coop_value(a, w)?, self.coop_value(b, w)?);
            let out = av
                .iter()
                .zip(bv)
                .map(|(&x, &y)| ((x as f32) * (y as f32)) as f64)
                .collect();
            self.coop[d as usize][w] = Some(out);
        }
        Ok(())
    }

    pub(super) fn coop_zero(&mut self, dst: CoopReg) -> Result<(), SimFault> {
        let m = self.coop_shape(dst);
        for w in 0..self.threads / self.warp_size {
            self.coop[dst as usize][w] = Some(vec![0.0; (m.rows * m.cols) as usize]);
        }
        Ok(())
    }
}
