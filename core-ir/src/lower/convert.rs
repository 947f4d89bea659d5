//! Layout conversion through shared memory: every thread writes the elements it owns, a
//! barrier, every thread reads the elements it needs, a barrier (the buffer is reused).
//!
//! The buffer holds the value contiguous along the source layout's fastest dimension, so
//! that each thread writes its run of elements there as one vector (up to 16 bytes). When
//! the destination is fastest along another dimension, its lanes read down a column of
//! that storage: with plain rows, rows a multiple of 128 bytes apart put a whole warp on
//! one bank. So the vector slots of each row are XOR-swizzled by the row's coordinate
//! along the destination's fastest dimension (as Triton's swizzled shared layouts:
//! `vec`, `per_phase`, `max_phase`): lanes that read the same column of different rows
//! read different slots, hence different banks, while the writer's vectors stay whole.
//! When both layouts are fastest along the same dimension, both sides move vectors along
//! it and rows need no swizzle.
//!
//! `reshape` keeps the row-major exchange (its two sides do not share coordinates).

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, CmpOp, Literal};
use crate::layout::{Layout, RegisterMap};
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::{ScalarType, Shape, MAX_RANK};

/// Where each element of a value lives in the exchange buffer, in source dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Swizzle {
    /// Element strides of the storage (the contiguous dimension has stride 1).
    pub strides: [i64; MAX_RANK],
    /// The contiguous dimension, and the elements of one swizzled slot along it.
    pub contiguous: u8,
    pub vec: u32,
    /// The dimension whose coordinate picks a row's phase (`None`: no swizzle), the
    /// coordinate's low bits ignored (`shift`), and the number of phases.
    pub phase_dim: Option<u8>,
    pub shift: u32,
    pub max_phase: u32,
}

/// The fastest value dimension of `layout`, and a thread's run of elements along it.
fn fastest_value_dim(layout: &Layout, map: &RegisterMap) -> Option<(usize, u32)> {
    let b = &layout.blocked;
    let blocked = (0..b.rank as usize)
        .map(|k| b.order[k] as usize)
        .find(|&d| layout.sliced & (1 << d) == 0)?;
    let vd = (0..blocked).filter(|&d| layout.sliced & (1 << d) == 0).count();
    Some((vd, map.run[blocked]))
}

/// The value dimensions of `layout` from fastest to slowest.
fn value_order(layout: &Layout) -> Vec<usize> {
    let b = &layout.blocked;
    (0..b.rank as usize)
        .map(|k| b.order[k] as usize)
        .filter(|&d| layout.sliced & (1 << d) == 0)
        .map(|d| (0..d).filter(|&e| layout.sliced & (1 << e) == 0).count())
        .collect()
}

fn log2(x: u32) -> u32 {
    x.trailing_zeros()
}

impl Swizzle {
    /// The storage of a `shape` value written from `src` and read into `dst`, whose value
    /// dimension `i` is source dimension `perm[i]`; `elem_bytes` per element.
    pub(crate) fn plan(src: &Layout, dst: &Layout, shape: Shape, perm: &[u8], elem_bytes: u32) -> Swizzle {
        let rank = shape.rank();
        let dims = shape.dims();
        let src_map = src.map(shape);
        let order = value_order(src);
        let (ds, src_run) = fastest_value_dim(src, &src_map).unwrap_or((rank - 1, 1));
        let mut strides = [0i64; MAX_RANK];
        let mut stride = 1i64;
        let mut placed = [false; MAX_RANK];
        for &d in std::iter::once(&ds)
            .chain(order.iter())
            .chain((0..rank).rev().collect::<Vec<_>>().iter())
        {
            if !placed[d] {
                placed[d] = true;
                strides[d] = stride;
                stride *= dims[d] as i64;
            }
        }
        let vec = src_run.min((16 / elem_bytes).max(1)).max(1);
        let mut plan = Swizzle {
            strides,
            contiguous: ds as u8,
            vec,
            phase_dim: None,
            shift: 0,
            max_phase: 1,
        };
        // The destination's fastest dimension, in source dimensions.
        let dst_shape_dims: Vec<u32> = perm.iter().map(|&p| dims[p as usize]).collect();
        let dst_shape = Shape::new(&dst_shape_dims).expect("a permutation of a valid shape");
        let dst_map = dst.map(dst_shape);
        let Some((dd_dst, dst_run)) = fastest_value_dim(dst, &dst_map) else {
            return plan;
        };
        let dd = perm[dd_dst] as usize;
        if dd == ds || rank < 2 {
            return plan;
        }
        // The writer's 16-byte slots stay whole, although a reader whose lanes cover only
        // part of a slot along `ds` then reaches only that part of each bank group (a
        // 64x64 f32 transpose reads with 2-way conflicts). Narrower slots would give the
        // reader every bank but split the writer's vectors: as many wavefronts in all,
        // and more instructions (measured in the simulator, `tests/coalescing.rs`).
        let vec = plan.vec;
        // Lanes of the reader step along `dd` by `dst_run`; those whose rows start less
        // than 128 bytes apart already hit different banks and may share a phase.
        let row_bytes = (dst_run as i64 * strides[dd] * elem_bytes as i64).max(1);
        let per_phase = (128 / row_bytes).max(1) as u32;
        let slots_per_row = (dims[ds] / vec).max(1);
        let slots_per_line = (128 / (vec * elem_bytes)).max(1);
        plan.phase_dim = Some(dd as u8);
        plan.shift = log2(dst_run) + log2(per_phase);
        plan.max_phase = slots_per_row.min(slots_per_line);
        if plan.max_phase <= 1 {
            plan.phase_dim = None;
        }
        plan
    }

    /// The storage index of the element at `coords` (source dimensions), for checking
    /// plans on the host; the lowering emits the same arithmetic per thread.
    #[cfg(test)]
    fn index(&self, coords: &[u32]) -> i64 {
        let ds = self.contiguous as usize;
        let mut idx = 0i64;
        for (d, &c) in coords.iter().enumerate() {
            let c = if d == ds { self.swizzled(c, coords) } else { c };
            idx += c as i64 * self.strides[d];
        }
        idx
    }

    #[cfg(test)]
    fn swizzled(&self, c: u32, coords: &[u32]) -> u32 {
        match self.phase_dim {
            None => c,
            Some(pd) => {
                let phase = (coords[pd as usize] >> self.shift) & (self.max_phase - 1);
                (((c / self.vec) ^ phase) * self.vec) | (c % self.vec)
            }
        }
    }
}

impl Lowerer<'_> {
    /// Moves a value into another layout (and shape, for `reshape`, or dimension order, for
    /// `permute`: result dimension `i` is source dimension `perm[i]`) through shared memory.
    pub(crate) fn convert(
        &mut self,
        src: &LVal,
        ty: ScalarType,
        src_shape: Shape,
        dst: Layout,
        dst_shape: Shape,
        perm: Option<&[u8]>,
    ) -> Result<Vec<Reg>, LowerError> {
        let identity: Vec<u8> = (0..src_shape.rank() as u8).collect();
        let reshape = perm.is_none() && src_shape != dst_shape;
        if reshape || src_shape.is_scalar() {
            return self.convert_row_major(src, ty, src_shape, dst, dst_shape);
        }
        let perm = perm.unwrap_or(&identity);
        let stored = if ty == ScalarType::Bool { ScalarType::I32 } else { ty };
        let plan = Swizzle::plan(&src.layout, &dst, src_shape, perm, stored.size_bytes() as u32);
        let buf = self.shared_buffer(stored, src_shape.numel() as u32);

        // Write: each owned run of `vec` elements along the contiguous dimension at once.
        let src_map = src.layout.map(src_shape);
        let identity_dims: Vec<u8> = identity.clone();
        let write_at = self.swizzled_indices(&src_map, &src.layout, &identity_dims, &plan);
        let own = self.owner(&src_map);
        let wvec = self.vector_run(&src.layout, &src_map, &identity_dims, &plan);
        let mut values: Vec<Reg> = src.regs.clone();
        if ty == ScalarType::Bool {
            values = values.iter().map(|&r| self.set(stored, Expr::Cast(r))).collect();
        }
        for g in (0..values.len()).step_by(wvec) {
            self.emit(Stmt::Store {
                values: values[g..g + wvec].to_vec(),
                mem: Memory::Shared { alloc: buf },
                index: write_at[g],
                pred: own,
            });
        }
        self.emit(Stmt::Barrier);

        // Read: in the destination's runs along the contiguous dimension where it has them.
        let dst_map = dst.map(dst_shape);
        let read_at = self.swizzled_indices(&dst_map, &dst, perm, &plan);
        let rvec = self.vector_run(&dst, &dst_map, perm, &plan);
        let mut out = Vec::with_capacity(dst_map.len);
        for g in (0..dst_map.len).step_by(rvec) {
            self.read_exchanged(buf, ty, read_at[g], rvec, &mut out);
        }
        self.emit(Stmt::Barrier);
        Ok(out)
    }

    /// Reads `width` consecutive elements of exchange buffer `buf` at `index` into new
    /// registers appended to `out`; booleans (stored as `i32`) become booleans again.
    fn read_exchanged(&mut self, buf: u32, ty: ScalarType, index: Reg, width: usize, out: &mut Vec<Reg>) {
        let stored = if ty == ScalarType::Bool { ScalarType::I32 } else { ty };
        for r in self.load_shared(buf, stored, index, width) {
            out.push(if ty == ScalarType::Bool {
                let zero = self.konst(stored, Literal::Int(0));
                self.set(ScalarType::Bool, Expr::Compare(CmpOp::Ne, r, zero))
            } else {
                r
            });
        }
    }

    /// `width` consecutive elements of shared buffer `buf` (of `ty`) from `index` (a multiple
    /// of `width`), in new registers: one vector load.
    pub(crate) fn load_shared(&mut self, buf: u32, ty: ScalarType, index: Reg, width: usize) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..width).map(|_| self.new_reg(ty)).collect();
        self.emit(Stmt::Load {
            dsts: dsts.clone(),
            mem: Memory::Shared { alloc: buf },
            index,
            pred: None,
            cache: CacheModifier::Default,
        });
        dsts
    }

    /// How many consecutive registers of `map` (value dimension `i` being source dimension
    /// `dims[i]`) lie consecutively in the storage of `plan`: the thread's run along the
    /// contiguous dimension, within one swizzled slot, and a whole multiple of it.
    fn vector_run(&self, layout: &Layout, map: &RegisterMap, dims: &[u8], plan: &Swizzle) -> usize {
        let Some((vd, run)) = fastest_value_dim(layout, map) else {
            return 1;
        };
        if dims[vd] != plan.contiguous {
            return 1;
        }
        let mut w = run.min(plan.vec).max(1);
        while run % w != 0 || plan.vec % w != 0 {
            w /= 2;
        }
        w as usize
    }

    /// For each register of `map` (value dimension `i` being source dimension `dims[i]`),
    /// its storage index under `plan`, computed once per thread in the prologue.
    fn swizzled_indices(&mut self, map: &RegisterMap, layout: &Layout, dims: &[u8], plan: &Swizzle) -> Vec<Reg> {
        let key = (map.layout, map.full, dims.to_vec(), *plan);
        if let Some(v) = self.cache.swizzled.get(&key) {
            return v.clone();
        }
        let i32t = ScalarType::I32;
        let rank = dims.len();
        let mut out = Vec::with_capacity(map.len);
        for i in 0..map.len {
            // Coordinates in source dimensions.
            let mut coords = [None; MAX_RANK];
            for (vd, &sd) in dims.iter().enumerate().take(rank) {
                coords[sd as usize] = Some(self.coord(map, i, layout.blocked_dim(vd)));
            }
            let mut acc: Option<Reg> = None;
            for (d, c) in coords.iter().enumerate().take(rank) {
                let Some(mut c) = *c else { continue };
                if d == plan.contiguous as usize {
                    if let Some(pd) = plan.phase_dim {
                        let row = coords[pd as usize].expect("every source dimension has a coordinate");
                        c = self.swizzle_coord(c, row, plan);
                    }
                }
                let term = match plan.strides[d] {
                    0 => continue,
                    1 => c,
                    s => {
                        let s = self.i32c(s);
                        self.pset(i32t, Expr::Binary(BinaryOp::Mul, c, s))
                    }
                };
                acc = Some(match acc {
                    None => term,
                    Some(a) => self.pset(i32t, Expr::Binary(BinaryOp::Add, a, term)),
                });
            }
            out.push(acc.unwrap_or_else(|| self.i32c(0)));
        }
        self.cache.swizzled.insert(key, out.clone());
        out
    }

    /// `((c / vec) ^ ((row >> shift) & (max_phase - 1))) * vec + c % vec`, in the prologue.
    fn swizzle_coord(&mut self, c: Reg, row: Reg, plan: &Swizzle) -> Reg {
        let i32t = ScalarType::I32;
        let shifted = if plan.shift == 0 {
            row
        } else {
            let s = self.i32c(plan.shift as i64);
            self.pset(i32t, Expr::Binary(BinaryOp::Shr, row, s))
        };
        let m = self.i32c((plan.max_phase - 1) as i64);
        let phase = self.pset(i32t, Expr::Binary(BinaryOp::And, shifted, m));
        // The phase moves whole slots: XOR it in above the slot's low bits.
        let bits = self.i32c(log2(plan.vec) as i64);
        let moved = if plan.vec == 1 {
            phase
        } else {
            self.pset(i32t, Expr::Binary(BinaryOp::Shl, phase, bits))
        };
        self.pset(i32t, Expr::Binary(BinaryOp::Xor, c, moved))
    }

    /// The row-major exchange: every element at its row-major index on both sides (what
    /// `reshape` means).
    fn convert_row_major(
        &mut self,
        src: &LVal,
        ty: ScalarType,
        src_shape: Shape,
        dst: Layout,
        dst_shape: Shape,
    ) -> Result<Vec<Reg>, LowerError> {
        let stored = if ty == ScalarType::Bool { ScalarType::I32 } else { ty };
        let buf = self.shared_buffer(stored, src_shape.numel() as u32);
        self.store_shared(src, src_shape, buf, (ty == ScalarType::Bool).then_some(stored));
        self.emit(Stmt::Barrier);
        let dst_map = dst.map(dst_shape);
        let strides = Self::value_strides(&dst, dst_shape);
        let dst_idx = self.linear(&dst_map, strides);
        let mut out = Vec::with_capacity(dst_map.len);
        for &idx in &dst_idx {
            self.read_exchanged(buf, ty, idx, 1, &mut out);
        }
        self.emit(Stmt::Barrier);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Blocked;

    fn layout(shape: &[u32], order: &[u8], vec: u32, warps: u32) -> Layout {
        Layout::blocked(Blocked::with_order(shape, order, vec, 32, warps))
    }

    /// A conversion to plan: shape, source order, destination order, element bytes.
    type Case = (&'static [u32], &'static [u8], &'static [u8], u32);

    /// Every plan places each element at its own index within the buffer.
    #[test]
    fn plans_are_bijections() {
        let cases: &[Case] = &[
            (&[64, 64], &[1, 0], &[0, 1], 4),
            (&[64, 64], &[1, 0], &[1, 0], 4),
            (&[32, 128], &[1, 0], &[0, 1], 2),
            (&[16, 8], &[1, 0], &[0, 1], 1),
            (&[8, 16, 32], &[2, 1, 0], &[0, 1, 2], 2),
            (&[8, 16, 32], &[2, 1, 0], &[1, 2, 0], 2),
        ];
        for &(shape, so, dor, eb) in cases {
            let s = Shape::new(shape).unwrap();
            let (src, dst) = (layout(shape, so, 16 / eb, 4), layout(shape, dor, 16 / eb, 4));
            let ident: Vec<u8> = (0..shape.len() as u8).collect();
            let plan = Swizzle::plan(&src, &dst, s, &ident, eb);
            let mut seen = vec![false; s.numel()];
            for e in 0..s.numel() {
                let mut c = [0u32; MAX_RANK];
                let mut r = e;
                for d in (0..shape.len()).rev() {
                    c[d] = (r % shape[d] as usize) as u32;
                    r /= shape[d] as usize;
                }
                let i = plan.index(&c[..shape.len()]) as usize;
                assert!(i < seen.len() && !seen[i], "{shape:?} {so:?}->{dor:?}: {c:?} at {i}");
                seen[i] = true;
            }
        }
    }

    /// A transpose's conversion swizzles its rows by the reader's row, past the reader's
    /// run, within one 128-byte line of slots.
    #[test]
    fn transposed_reads_are_swizzled() {
        let shape = Shape::new(&[64, 64]).unwrap();
        let (src, dst) = (layout(&[64, 64], &[1, 0], 4, 4), layout(&[64, 64], &[0, 1], 4, 4));
        let plan = Swizzle::plan(&src, &dst, shape, &[0, 1], 4);
        assert_eq!((plan.contiguous, plan.vec), (1, 4));
        assert_eq!((plan.phase_dim, plan.shift, plan.max_phase), (Some(0), 2, 8));
        let same = Swizzle::plan(&src, &src, shape, &[0, 1], 4);
        assert_eq!(same.phase_dim, None, "no swizzle when both sides run along rows");
    }
}
