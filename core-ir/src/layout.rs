//! Distributed layouts: how the elements of a block are spread over the threads of a
//! program, as Triton's blocked and slice layouts.
//!
//! A [`Blocked`] layout tiles the block with `size_per_thread × threads_per_warp ×
//! warps_per_cta` elements per dimension; a block larger than the tile wraps (each thread
//! holds several pieces), a smaller one is replicated (several threads hold the same
//! element). A [`Layout`] is a blocked layout with some dimensions *sliced* away: the result
//! of a reduction along them, and the input of `expand_dims`. Rank-0 values are uniform:
//! every thread holds them.
//!
//! A thread's registers for a value are enumerated with `order[0]` (the fastest dimension)
//! varying fastest, so the elements one thread holds along the fastest dimension are
//! consecutive registers — the ones a vector load fills. The coordinate of register `i` in
//! dimension `d` is `thread_base(d) + offset(i, d)`: a run-time part that depends only on
//! the thread and a compile-time part that depends only on the register.

use crate::types::{Shape, MAX_RANK};

/// A blocked layout of rank 0 to 3. `order` lists dimensions from fastest to slowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blocked {
    /// The number of dimensions, 0 to [`MAX_RANK`]; the entries of the arrays from `rank`
    /// on are unused.
    pub rank: u8,
    /// Consecutive elements one thread holds along each dimension (a power of two), before
    /// the layout wraps; Triton's `sizePerThread`.
    pub size_per_thread: [u32; MAX_RANK],
    /// Lanes of a warp along each dimension: powers of two whose product is the warp size
    /// (at rank 1 and above). Triton's `threadsPerWarp`.
    pub threads_per_warp: [u32; MAX_RANK],
    /// Warps of a program along each dimension: powers of two whose product is the number
    /// of warps (at rank 1 and above). Triton's `warpsPerCTA`.
    pub warps_per_cta: [u32; MAX_RANK],
    /// The dimensions from fastest to slowest: a thread's registers, a warp's lanes and a
    /// program's warps are numbered along `order[0]` first. Triton's `order`.
    pub order: [u8; MAX_RANK],
}

/// A blocked layout with the dimensions in `sliced` (a bit mask over the blocked layout's
/// dimensions) removed from the value, and optionally the rows (blocked dimension 0) in the
/// order a warpgroup MMA's accumulator holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The blocked layout of the full-rank value this one is a slice of (of the value
    /// itself when nothing is sliced).
    pub blocked: Blocked,
    /// A bit mask over the blocked dimensions: bit `d` set means blocked dimension `d` is
    /// not a dimension of the value. The value's rank is `blocked.rank` minus the bits set.
    pub sliced: u8,
    /// Where set, the register that the blocked layout puts at row `r` holds row
    /// `rows.row(r)` instead (a layout of Hopper's `wgmma` accumulator: see
    /// [`WarpgroupRows`]). Applies to values whose dimension 0 has exactly
    /// `rows.block_rows()` elements; others are laid out as the blocked layout says.
    pub rows: Option<WarpgroupRows>,
}

impl Blocked {
    /// Triton's default layout for a block of `shape` whose fastest dimension (the last)
    /// moves `vec` elements per thread at once, over `num_warps` warps of `warp_size`.
    pub fn default_for(shape: &[u32], vec: u32, warp_size: u32, num_warps: u32) -> Blocked {
        let mut order = [0u8; MAX_RANK];
        for (k, o) in order.iter_mut().enumerate().take(shape.len()) {
            *o = (shape.len() - 1 - k) as u8;
        }
        Blocked::with_order(shape, &order[..shape.len()], vec, warp_size, num_warps)
    }

    /// The blocked layout of a block of `shape` whose dimension `order[0]` is the fastest
    /// (a thread holds `vec` consecutive elements along it, and the lanes of a warp follow
    /// it), as Triton's coalescing pass builds for a memory access whose pointer is
    /// contiguous along `order[0]`. `order` lists every dimension once, fastest first.
    pub fn with_order(shape: &[u32], order: &[u8], vec: u32, warp_size: u32, num_warps: u32) -> Blocked {
        let Some(&fastest) = order.first() else {
            return Blocked::with_run(shape, order, 1, warp_size, num_warps);
        };
        // No more per thread than the block has for each thread, so that small blocks
        // spread over the threads rather than replicate.
        let numel: u32 = shape.iter().product();
        let per_thread = (numel / (warp_size * num_warps)).max(1);
        let run = vec.min(shape[fastest as usize]).min(per_thread);
        Blocked::with_run(shape, order, run, warp_size, num_warps)
    }

    /// As [`with_order`](Self::with_order), with each thread holding `run` consecutive
    /// elements along the fastest dimension (at most its length) even where the threads
    /// then cover more than the block and replicate some of it: an access that must move
    /// that many elements at once (`cp.async` copies 4 bytes at least).
    pub fn with_run(shape: &[u32], order: &[u8], run: u32, warp_size: u32, num_warps: u32) -> Blocked {
        let rank = shape.len();
        let mut b = Blocked {
            rank: rank as u8,
            size_per_thread: [1; MAX_RANK],
            threads_per_warp: [1; MAX_RANK],
            warps_per_cta: [1; MAX_RANK],
            order: [0; MAX_RANK],
        };
        if rank == 0 {
            return b;
        }
        b.order[..rank].copy_from_slice(&order[..rank]);
        let fastest = b.order[0] as usize;
        b.size_per_thread[fastest] = run.min(shape[fastest]).max(1);
        // Lanes fill the fastest dimensions first; what is left replicates the fastest.
        let mut lanes = warp_size;
        for k in 0..rank {
            let d = b.order[k] as usize;
            let room = (shape[d] / b.size_per_thread[d]).max(1);
            let t = lanes.min(room);
            b.threads_per_warp[d] = t;
            lanes /= t;
        }
        b.threads_per_warp[fastest] *= lanes;
        // Warps fill the slowest dimensions first (rows of a tile to different warps).
        let mut warps = num_warps;
        for k in (0..rank).rev() {
            let d = b.order[k] as usize;
            let room = (shape[d] / (b.size_per_thread[d] * b.threads_per_warp[d])).max(1);
            let w = warps.min(room);
            b.warps_per_cta[d] = w;
            warps /= w;
        }
        b.warps_per_cta[b.order[rank - 1] as usize] *= warps;
        b
    }

    /// Elements one program's threads cover in dimension `d` before wrapping.
    pub fn tile(&self, d: usize) -> u32 {
        self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]
    }
}

impl std::fmt::Display for Layout {
    /// `blocked<spt [1, 4], tpw [2, 16], wpc [4, 1], order [1, 0]>`, with `.slice(d)` for
    /// each sliced dimension: what the per-thread IR dump shows for each block op.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.blocked;
        let r = b.rank as usize;
        if self.is_scalar() {
            return write!(f, "uniform");
        }
        write!(
            f,
            "blocked<spt {:?}, tpw {:?}, wpc {:?}, order {:?}>",
            &b.size_per_thread[..r],
            &b.threads_per_warp[..r],
            &b.warps_per_cta[..r],
            &b.order[..r]
        )?;
        if let Some(p) = self.rows {
            write!(f, ".wgmma_rows<warps {}, warpgroup_rows {}>", p.warps, p.warpgroup_rows)?;
        }
        for d in 0..r {
            if self.sliced & (1 << d) != 0 {
                write!(f, ".slice({d})")?;
            }
        }
        Ok(())
    }
}

impl Layout {
    /// The layout of rank-0 values: every thread holds the value.
    pub fn scalar() -> Layout {
        Layout::blocked(Blocked::default_for(&[], 1, 1, 1))
    }
    /// Whether every blocked dimension is sliced away: the layout of rank-0 values, which
    /// every thread holds.
    pub fn is_scalar(&self) -> bool {
        self.blocked.rank as u32 == self.sliced.count_ones()
    }
    /// A blocked layout, nothing sliced.
    pub fn blocked(b: Blocked) -> Layout {
        Layout {
            blocked: b,
            sliced: 0,
            rows: None,
        }
    }
    /// The same layout with blocked dimension `d` sliced away (and with it the row order,
    /// when `d` is the rows).
    pub fn slice(&self, d: usize) -> Layout {
        Layout {
            blocked: self.blocked,
            sliced: self.sliced | (1 << d),
            rows: if d == 0 { None } else { self.rows },
        }
    }
    /// The same layout with nothing sliced: the layout of a value of full rank that holds,
    /// in each thread, what this one holds (a broadcast's operand, `expand_dims`' result).
    pub fn unsliced(&self) -> Layout {
        Layout {
            blocked: self.blocked,
            sliced: 0,
            rows: self.rows,
        }
    }
    /// The same layout with blocked dimension `d` no longer sliced.
    pub fn unslice(&self, d: usize) -> Layout {
        Layout {
            sliced: self.sliced & !(1 << d),
            ..*self
        }
    }
    /// The blocked dimension of value dimension `vd`.
    pub fn blocked_dim(&self, vd: usize) -> usize {
        (0..self.blocked.rank as usize)
            .filter(|d| self.sliced & (1 << d) == 0)
            .nth(vd)
            .expect("value dimension in range")
    }
    /// The shape in the blocked layout's dimensions: the value's shape with 1 at sliced ones.
    pub fn full_shape(&self, shape: Shape) -> [u32; MAX_RANK] {
        let mut full = [1; MAX_RANK];
        let mut vd = 0;
        for (d, f) in full.iter_mut().enumerate().take(self.blocked.rank as usize) {
            if self.sliced & (1 << d) == 0 {
                *f = shape.dims()[vd];
                vd += 1;
            }
        }
        full
    }
    /// The register map of a value of `shape` in this layout.
    pub fn map(&self, shape: Shape) -> RegisterMap {
        RegisterMap::new(*self, shape)
    }
}

/// How a value of one shape in one layout sits in each thread's registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterMap {
    /// The layout the value is in.
    pub layout: Layout,
    /// The shape in the blocked dimensions (1 at sliced ones).
    pub full: [u32; MAX_RANK],
    /// Registers per thread along each blocked dimension.
    pub count: [u32; MAX_RANK],
    /// Consecutive elements a thread holds along each dimension: `min(size_per_thread, full)`.
    pub run: [u32; MAX_RANK],
    /// Registers per thread in all.
    pub len: usize,
    /// The row order, where the layout has one and it applies to this shape.
    rows: Option<WarpgroupRows>,
}

impl RegisterMap {
    fn new(layout: Layout, shape: Shape) -> RegisterMap {
        let b = layout.blocked;
        let full = layout.full_shape(shape);
        let mut count = [1; MAX_RANK];
        let mut run = [1; MAX_RANK];
        for d in 0..b.rank as usize {
            run[d] = b.size_per_thread[d].min(full[d]);
            count[d] = if full[d] >= b.tile(d) {
                full[d] / b.tile(d) * b.size_per_thread[d]
            } else {
                run[d]
            };
        }
        let len = count.iter().take(b.rank as usize).map(|&c| c as usize).product();
        let rows = layout
            .rows
            .filter(|p| layout.sliced & 1 == 0 && b.rank > 0 && full[0] == p.block_rows() && full[0] % b.tile(0) == 0);
        RegisterMap {
            layout,
            full,
            count,
            run,
            len,
            rows,
        }
    }

    fn rank(&self) -> usize {
        self.layout.blocked.rank as usize
    }

    /// The per-dimension register indices of register `i`.
    pub fn split(&self, mut i: usize) -> [u32; MAX_RANK] {
        let mut j = [0; MAX_RANK];
        for k in 0..self.rank() {
            let d = self.layout.blocked.order[k] as usize;
            j[d] = (i % self.count[d] as usize) as u32;
            i /= self.count[d] as usize;
        }
        j
    }

    /// The register with per-dimension indices `j`.
    pub fn join(&self, j: [u32; MAX_RANK]) -> usize {
        let mut i = 0;
        for k in (0..self.rank()).rev() {
            let d = self.layout.blocked.order[k] as usize;
            i = i * self.count[d] as usize + j[d] as usize;
        }
        i
    }

    /// The compile-time part of register `i`'s coordinates, in blocked dimensions.
    pub fn offsets(&self, i: usize) -> [u32; MAX_RANK] {
        let j = self.split(i);
        let mut o = [0; MAX_RANK];
        for d in 0..self.rank() {
            let (rep, s) = (j[d] / self.run[d], j[d] % self.run[d]);
            o[d] = rep * self.layout.blocked.tile(d) + s;
        }
        if let Some(p) = self.rows {
            o[0] = p.row(o[0]);
        }
        o
    }

    /// The register holding the element at compile-time offsets `o` (as from
    /// [`offsets`](Self::offsets)) — the inverse of `offsets`.
    pub fn register_at(&self, mut o: [u32; MAX_RANK]) -> usize {
        if let Some(p) = self.rows {
            o[0] = p.blocked_row(o[0]);
        }
        let mut j = [0; MAX_RANK];
        for d in 0..self.rank() {
            let tile = self.layout.blocked.tile(d);
            j[d] = (o[d] / tile) * self.run[d] + o[d] % tile;
        }
        self.join(j)
    }

    /// The row order of dimension 0, where it applies: the thread part of a row is then
    /// `rows.row(base)` of the blocked layout's base (see [`WarpgroupRows::row`]).
    pub fn rows(&self) -> Option<WarpgroupRows> {
        self.rows
    }

    /// Whether dimension `d` is replicated: fewer elements than the tile covers.
    pub fn replicated(&self, d: usize) -> bool {
        self.full[d] < self.layout.blocked.tile(d)
    }

    /// The mask applied to a thread's base coordinate in dimension `d`:
    /// `base = ((warp_d * threads_per_warp_d + lane_d) * size_per_thread_d) & mask`.
    pub fn base_mask(&self, d: usize) -> u32 {
        self.full[d].min(self.layout.blocked.tile(d)) - 1
    }

    /// Distinct lanes along dimension `d` (lanes beyond hold copies).
    pub fn distinct_lanes(&self, d: usize) -> u32 {
        let b = self.layout.blocked;
        (self.full[d] / self.run[d]).clamp(1, b.threads_per_warp[d])
    }

    /// The value coordinates (sliced dimensions left out) of the element that register `i`
    /// of thread (`lane`, `warp`) holds: the lowering's `coord` for known thread ids.
    /// `None` for a layout with a warpgroup row order, which this does not model.
    pub fn element(&self, lane: u32, warp: u32, i: usize) -> Option<[u32; MAX_RANK]> {
        if self.rows.is_some() || self.layout.rows.is_some() {
            return None;
        }
        let b = self.layout.blocked;
        let off = self.offsets(i);
        let (mut lshift, mut wshift) = (0, 0);
        let mut blocked = [0; MAX_RANK];
        for k in 0..self.rank() {
            let d = b.order[k] as usize;
            let (tpw, wpc) = (b.threads_per_warp[d], b.warps_per_cta[d]);
            let lane_d = (lane >> lshift) & (tpw - 1);
            let warp_d = (warp >> wshift) & (wpc - 1);
            lshift += tpw.trailing_zeros();
            wshift += wpc.trailing_zeros();
            let mut base = (warp_d * tpw + lane_d) * b.size_per_thread[d];
            if self.replicated(d) {
                base &= self.base_mask(d);
            }
            blocked[d] = base + off[d];
        }
        let mut value = [0; MAX_RANK];
        let mut vd = 0;
        for (d, &c) in blocked.iter().enumerate().take(self.rank()) {
            if self.layout.sliced & (1 << d) == 0 {
                value[vd] = c;
                vd += 1;
            }
        }
        Some(value)
    }

    /// Whether `other` (of the same shape) puts every element in the same register of the
    /// same thread, for `warp_size` x `num_warps` threads: two layouts that differ in form
    /// (a slice of a larger one and a plain one, say) may place a value alike, and then
    /// moving it from one to the other is no work at all.
    pub fn places_alike(&self, other: &RegisterMap, warp_size: u32, num_warps: u32) -> bool {
        if self.len != other.len {
            return false;
        }
        (0..num_warps).all(|warp| {
            (0..warp_size).all(|lane| {
                (0..self.len).all(|i| match (self.element(lane, warp, i), other.element(lane, warp, i)) {
                    (Some(a), Some(b)) => a == b,
                    _ => false,
                })
            })
        })
    }

    /// Distinct warps along dimension `d` (warps beyond hold copies).
    pub fn distinct_warps(&self, d: usize) -> u32 {
        let b = self.layout.blocked;
        (self.full[d] / (self.run[d] * b.threads_per_warp[d])).clamp(1, b.warps_per_cta[d])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(d: &[u32]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn default_1d_vectorizes_and_wraps() {
        let b = Blocked::default_for(&[1024], 4, 32, 4);
        assert_eq!(
            (b.size_per_thread[0], b.threads_per_warp[0], b.warps_per_cta[0]),
            (4, 32, 4)
        );
        let m = Layout::blocked(b).map(shape(&[1024]));
        assert_eq!(m.len, 8);
        // Registers 0..4 are consecutive elements; register 4 starts the next tile.
        assert_eq!(
            (0..8).map(|i| m.offsets(i)[0]).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 512, 513, 514, 515]
        );
        for i in 0..8 {
            assert_eq!(m.register_at(m.offsets(i)), i);
        }
    }

    /// A 1-D layout, and the same layout with a second dimension of one element a thread
    /// sliced off, place a value alike; a layout with the threads spread otherwise does not.
    #[test]
    fn a_slice_and_a_plain_layout_place_a_value_alike() {
        let plain = Layout::blocked(Blocked::default_for(&[1024], 2, 32, 4));
        let mut b2 = plain.blocked;
        b2.rank = 2;
        (b2.size_per_thread[1], b2.threads_per_warp[1], b2.warps_per_cta[1]) = (1, 1, 1);
        b2.order[..2].copy_from_slice(&[0, 1]);
        let sliced = Layout::blocked(b2).slice(1);
        let s = shape(&[1024]);
        assert!(plain.map(s).places_alike(&sliced.map(s), 32, 4));
        // Element coordinates as the lowering computes them: thread (lane 3, warp 1)
        // holds elements 64 * 1 + 2 * 3 = 70 and 71, then 256 further.
        let m = plain.map(s);
        let held: Vec<u32> = (0..m.len).map(|i| m.element(3, 1, i).unwrap()[0]).collect();
        assert_eq!(held, [70, 71, 326, 327, 582, 583, 838, 839]);
        let other = Layout::blocked(Blocked::default_for(&[1024], 4, 32, 4));
        assert!(!plain.map(s).places_alike(&other.map(s), 32, 4));
    }

    #[test]
    fn default_2d_spreads_warps_over_rows() {
        let b = Blocked::default_for(&[64, 64], 4, 32, 4);
        assert_eq!(b.size_per_thread[..2], [1, 4]);
        assert_eq!(b.threads_per_warp[..2], [2, 16]);
        assert_eq!(b.warps_per_cta[..2], [4, 1]);
        assert_eq!(b.order[..2], [1, 0]);
        let m = Layout::blocked(b).map(shape(&[64, 64]));
        assert_eq!(m.len, 64 * 64 / 128);
    }

    #[test]
    fn small_blocks_replicate() {
        let b = Blocked::default_for(&[16], 4, 32, 4);
        assert_eq!(b.size_per_thread[0], 1, "16 elements over 128 threads: one each");
        let m = Layout::blocked(b).map(shape(&[16]));
        assert_eq!(m.len, 1);
        assert!(m.replicated(0));
        assert_eq!(m.base_mask(0), 15);
        assert_eq!(m.distinct_lanes(0), 16);
        assert_eq!(m.distinct_warps(0), 1);
    }

    /// The warpgroup MMA's rows: a permutation of the block's rows, split into a part of the
    /// thread and a part of the register, giving warp `w % 4` of warpgroup `w / 4` rows
    /// `16 (w % 4) + 8 h + g` of each m64 step.
    #[test]
    fn warpgroup_rows_permute_the_blocked_rows() {
        for (warps, warpgroup_rows) in [(4, 64), (4, 128), (8, 64), (8, 128), (8, 192), (16, 64)] {
            let p = WarpgroupRows { warps, warpgroup_rows };
            let n = p.block_rows();
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let row = p.row(r);
                assert!(row < n && !seen[row as usize], "{p:?}: row {r} -> {row}");
                seen[row as usize] = true;
                assert_eq!(p.blocked_row(row), r);
                // Thread part (below one tile of 8 rows a warp) plus register part.
                let tile = 8 * warps;
                assert_eq!(row, p.row(r % tile) + p.row(r - r % tile), "{p:?}: row {r}");
            }
            // Warp 5 (warpgroup 1, warp 1 in it), lane group 3, m64 step 0, half 1.
            if warps == 8 {
                assert_eq!(p.row(8 * (5 + warps) + 3), warpgroup_rows + 16 + 8 + 3);
            }
        }
        let b = Blocked {
            rank: 2,
            size_per_thread: [1, 2, 1],
            threads_per_warp: [8, 4, 1],
            warps_per_cta: [8, 1, 1],
            order: [1, 0, 0],
        };
        let p = WarpgroupRows {
            warps: 8,
            warpgroup_rows: 128,
        };
        let layout = Layout {
            rows: Some(p),
            ..Layout::blocked(b)
        };
        let m = layout.map(shape(&[256, 16]));
        assert_eq!(m.rows(), Some(p));
        for i in 0..m.len {
            let plain = Layout::blocked(b).map(shape(&[256, 16])).offsets(i);
            assert_eq!(m.offsets(i), [p.row(plain[0]), plain[1], 0]);
            assert_eq!(m.register_at(m.offsets(i)), i);
        }
        // Another number of rows (a broadcast's single row) is laid out as the blocked layout.
        assert_eq!(layout.map(shape(&[1, 16])).rows(), None);
        // Slicing the rows away drops the order; slicing the columns keeps it.
        assert_eq!(layout.slice(0).rows, None);
        assert_eq!(layout.slice(1).map(shape(&[256])).rows(), Some(p));
    }

    #[test]
    fn slice_of_2d_layout() {
        let b = Blocked::default_for(&[64, 64], 4, 32, 4);
        let s = Layout::blocked(b).slice(1);
        assert_eq!(s.full_shape(shape(&[64])), [64, 1, 1]);
        let m = s.map(shape(&[64]));
        // Rows: 2 lanes x 4 warps cover 8 rows; 64 rows wrap 8 times.
        assert_eq!(m.len, 8);
        assert_eq!(s.blocked_dim(0), 0);
    }
}

/// A 2-D tile in shared memory, stored row by row (`cols` elements contiguous per row), with
/// Triton's XOR swizzle: the row's 16-byte chunks are permuted by `chunk ^ phase(row)`,
/// `phase(row) = (row / per_phase) % max_phase`. With `per_phase = 128 / row bytes` (at
/// least 1) and `max_phase = 8 / per_phase`, any 8 consecutive rows' chunks at one column
/// fall in 8 different 16-byte slots of the 128-byte bank window, so that `ldmatrix` (8 rows
/// of 16 bytes per phase, along or across the rows) and 16-byte stores of whole rows are
/// free of bank conflicts. For 128-byte rows this is the "128-byte swizzle" of Hopper's
/// `wgmma` descriptors and tensor-memory copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwizzledTile {
    /// Rows of the tile.
    pub rows: u32,
    /// Elements of a row.
    pub cols: u32,
    /// Elements per 16-byte chunk.
    pub vec: u32,
    /// Consecutive rows that share one phase (at least 1).
    pub per_phase: u32,
    /// The number of distinct phases (at least 1; 1 leaves the tile unswizzled): a row's
    /// chunks are permuted by `chunk ^ ((row / per_phase) % max_phase)`.
    pub max_phase: u32,
    /// Columns per column block: the tile is stored as `cols / block_cols` blocks of `rows ×
    /// block_cols`, one after the other (`cols` itself, one block, unless rows are wider than
    /// the 128 bytes a `wgmma` swizzle spans).
    pub block_cols: u32,
    /// The byte boundary a buffer of such tiles must start on: 1024 for `wgmma` operands,
    /// whose swizzle the hardware takes from address bits 7 to 9, else 16.
    pub align: u32,
}

/// The rows of Hopper's warpgroup MMA accumulator, as a permutation of a blocked layout's
/// rows. The accumulator layout of `mma.sync` with every warp along M (`spt [1, 2]`, `tpw [8,
/// 4]`, `wpc [warps, 1]`) gives warp `w` and lane `4 g + t` the rows `8 (w + warps j) + g`
/// of its repetitions `j`; a `wgmma` accumulator gives warp `w % 4` of warpgroup `w / 4` the
/// rows `16 (w % 4) + 8 h + g` of its m64 steps `i`, the warpgroup's steps following each
/// other from row `(w / 4) warpgroup_rows`. The same registers (repetition `j = 2 i + h`)
/// therefore hold row [`row`](Self::row)`(8 (w + warps j) + g)`. The map is a sum of a part
/// of the thread (`w`, `g`) and a part of the register (`j`), so a layout with it stays
/// separable: a thread's coordinate is `row(base) + row(offset)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WarpgroupRows {
    /// Warps along M (a multiple of 4, a power of two).
    pub warps: u32,
    /// Rows of the block each warpgroup owns (a multiple of 64).
    pub warpgroup_rows: u32,
}

impl WarpgroupRows {
    /// Rows of the block: what dimension 0 of a value must have for the order to apply.
    pub fn block_rows(&self) -> u32 {
        self.warps / 4 * self.warpgroup_rows
    }

    /// The row held where the blocked layout puts row `blocked`.
    pub fn row(&self, blocked: u32) -> u32 {
        let (group, g) = (blocked / 8, blocked % 8);
        let (w, j) = (group % self.warps, group / self.warps);
        (w / 4) * self.warpgroup_rows + 64 * (j / 2) + 16 * (w % 4) + 8 * (j % 2) + g
    }

    /// The inverse of [`row`](Self::row).
    pub fn blocked_row(&self, row: u32) -> u32 {
        let (wg, r) = (row / self.warpgroup_rows, row % self.warpgroup_rows);
        let (i, r) = (r / 64, r % 64);
        let (wl, h, g) = (r / 16, (r / 8) % 2, r % 8);
        let (w, j) = (4 * wg + wl, 2 * i + h);
        8 * (w + self.warps * j) + g
    }
}

impl SwizzledTile {
    /// The swizzle for a `rows × cols` tile of `elem_bytes`-byte elements (powers of two).
    /// Rows shorter than one chunk are not swizzled.
    pub fn new(rows: u32, cols: u32, elem_bytes: u32) -> SwizzledTile {
        let vec = (16 / elem_bytes).max(1);
        let row_bytes = cols * elem_bytes;
        if cols < vec || !cols.is_power_of_two() {
            return SwizzledTile {
                rows,
                cols,
                vec,
                per_phase: 1,
                max_phase: 1,
                block_cols: cols,
                align: 16,
            };
        }
        let per_phase = (128 / row_bytes).max(1);
        let max_phase = (8 / per_phase).clamp(1, cols / vec);
        SwizzledTile {
            rows,
            cols,
            vec,
            per_phase,
            max_phase,
            block_cols: cols,
            align: 16,
        }
    }
    /// The tile a `wgmma` operand is read from (16-bit elements): rows of at most 128 bytes
    /// (longer ones split into column blocks of 128 bytes), swizzled as the descriptor's
    /// 32-, 64- or 128-byte mode does. `None` when the row bytes are not 32, 64 or a
    /// multiple of 128.
    pub fn for_wgmma(rows: u32, cols: u32, elem_bytes: u32) -> Option<SwizzledTile> {
        let row_bytes = cols * elem_bytes;
        let block_bytes = row_bytes.min(128);
        if !matches!(block_bytes, 32 | 64 | 128) || row_bytes % block_bytes != 0 || rows % 8 != 0 {
            return None;
        }
        let per_phase = 128 / block_bytes;
        Some(SwizzledTile {
            rows,
            cols,
            vec: 16 / elem_bytes,
            per_phase,
            max_phase: 8 / per_phase,
            block_cols: block_bytes / elem_bytes,
            align: 1024,
        })
    }
    /// The bytes of one swizzled row (of a column block).
    pub fn block_row_bytes(&self, elem_bytes: u32) -> u32 {
        self.block_cols * elem_bytes
    }
    /// Elements in the tile.
    pub fn len(&self) -> u32 {
        self.rows * self.cols
    }
    /// Whether the tile has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The element index of `(row, col)`.
    pub fn offset(&self, row: u32, col: u32) -> u32 {
        let (block, col) = (col / self.block_cols, col % self.block_cols);
        let phase = (row / self.per_phase) % self.max_phase;
        let chunk = (col / self.vec) ^ phase;
        block * self.rows * self.block_cols + row * self.block_cols + chunk * self.vec + col % self.vec
    }

    /// Rows after which the phase repeats: moving by a multiple of it moves the offset by
    /// whole rows.
    pub fn row_period(&self) -> u32 {
        self.per_phase * self.max_phase
    }
}
