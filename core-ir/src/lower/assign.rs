//! Layout assignment: which layout each block value gets, as Triton's coalescing pass and
//! its layout propagation.
//!
//! - **Global accesses are the anchors.** Each load, store and atomic gets the blocked
//!   layout its own pointer asks for: the dimension along which the pointer is most
//!   contiguous (the axis analysis says) is the fastest, a thread holds as many consecutive
//!   elements along it as are proven adjacent and aligned (16 bytes at most), and the lanes
//!   of a warp follow it, so that a warp's access covers whole cache lines. A pointer
//!   contiguous along no dimension (a gather) asks for nothing: a load then takes the
//!   default layout and a store the layout its value already has.
//! - **Other ops follow their operands.** An element-wise op takes the layout of its
//!   operands that carry data from memory or from other threads ("anchored" values);
//!   where two such layouts meet, the one more operands already have. Index arithmetic
//!   (`arange`, constants, splats and element-wise ops on them) anchors nothing: it is
//!   recomputed in whatever layout its user needs (`Lowerer::rematerialize`).
//! - **Conversions are placed where a value changes layout** (`Lowerer::ensure`): a store
//!   whose value was loaded contiguous along another axis converts it through shared memory
//!   (`convert.rs`), once.
//!
//! Accesses of one shape whose pointers share their fastest dimension share one vector
//! width (the narrowest proven among them), so that values loaded through one pointer and
//! combined with values loaded through another meet in the same layout.

use super::Lowerer;
use crate::ir::{Op, ValueId};
use crate::layout::{Blocked, Layout};
use crate::types::{Shape, MAX_RANK};
use std::collections::HashMap;

/// The dimension order of an access, fastest first (only the first `rank` entries count).
pub(crate) type Order = [u8; MAX_RANK];

impl Lowerer<'_> {
    /// The dimension order a global access through `ptr` asks for: dimensions by
    /// decreasing contiguity of the pointer, the later dimension first among equals.
    /// `None` when the pointer is contiguous along no dimension (nothing to coalesce).
    pub(crate) fn access_order(&self, ptr: ValueId) -> Option<Order> {
        let shape = self.k.ty(ptr).shape;
        let rank = shape.rank();
        if rank == 0 {
            return None;
        }
        let a = &self.axis[ptr.index()];
        let mut dims: Vec<u8> = (0..rank as u8).rev().collect();
        // A stable sort keeps the later dimension first among equal contiguities.
        dims.sort_by_key(|&d| std::cmp::Reverse(a.contiguity[d as usize]));
        if a.contiguity[dims[0] as usize] <= 1 {
            return None;
        }
        let mut order = [0; MAX_RANK];
        order[..rank].copy_from_slice(&dims);
        Some(order)
    }

    /// The default order of a shape: the last dimension fastest, as row-major memory.
    pub(crate) fn default_order(rank: usize) -> Order {
        let mut order = [0; MAX_RANK];
        for (k, o) in order.iter_mut().enumerate().take(rank) {
            *o = (rank - 1 - k) as u8;
        }
        order
    }

    /// The blocked layout of `shape` with `order`, its vector width the one chosen for
    /// accesses of that shape and order (16 bytes of 4-byte elements where none is).
    pub(crate) fn ordered_layout(&self, shape: Shape, order: Order) -> Layout {
        if shape.is_scalar() {
            return Layout::scalar();
        }
        let vec = self
            .vec_by_access
            .get(&(shape, order))
            .copied()
            .unwrap_or(self.target.max_vector_bytes / 4)
            .max(1);
        let rank = shape.rank();
        Layout::blocked(Blocked::with_order(
            shape.dims(),
            &order[..rank],
            vec,
            self.target.warp_size,
            self.target.num_warps,
        ))
    }

    /// The layout of a global access through `ptr`, or `None` when its pointer asks for
    /// none (see [`access_order`](Self::access_order)).
    pub(crate) fn access_layout(&self, ptr: ValueId) -> Option<Layout> {
        let shape = self.k.ty(ptr).shape;
        self.access_order(ptr).map(|order| self.ordered_layout(shape, order))
    }

    /// The layout of a load through `ptr`: the access's own, else the default.
    pub(crate) fn load_layout(&self, ptr: ValueId) -> Layout {
        self.access_layout(ptr)
            .unwrap_or_else(|| self.default_layout(self.k.ty(ptr).shape))
    }

    /// The layout of a store or atomic through `ptr` of `value`: the access's own, else
    /// the layout `value` already has when it is anchored, else the default.
    pub(crate) fn store_layout(&self, ptr: ValueId, value: ValueId) -> Layout {
        if let Some(l) = self.access_layout(ptr) {
            return l;
        }
        match self.values[value.index()].as_ref() {
            Some(v) if self.anchored[value.index()] && !v.layout.is_scalar() && v.layout.sliced == 0 => v.layout,
            _ => self.default_layout(self.k.ty(ptr).shape),
        }
    }

    /// The layout of a plain store through `ptr` of `value`: [`store_layout`]'s, except that
    /// a block no larger than the program's threads is stored from the layout `value`
    /// already has, sliced or not. Coalesced, such a block is one element a thread at most,
    /// so its own layout saves nothing a conversion through shared memory (a round trip
    /// between two barriers) would cost: the statistics of a block of rows (a reduction's
    /// result, held by the lanes of the warp that reduced the row) are stored by one lane
    /// of each warp, with no barrier. (Atomics keep [`store_layout`]: their results go
    /// back to every thread that holds the element.)
    ///
    /// [`store_layout`]: Self::store_layout
    pub(crate) fn plain_store_layout(&self, ptr: ValueId, value: ValueId) -> Layout {
        let shape = self.k.ty(ptr).shape;
        let threads = self.target.warp_size * self.target.num_warps;
        match self.values[value.index()].as_ref() {
            Some(v) if self.anchored[value.index()] && !v.layout.is_scalar() && shape.numel() <= threads as usize => {
                v.layout
            }
            _ => self.store_layout(ptr, value),
        }
    }

    /// The layout of an element-wise op's result: the layout most of its anchored
    /// operands have (the first among equals), else the default of its shape.
    pub(crate) fn elementwise_layout(&self, operands: &[ValueId], shape: Shape) -> Layout {
        if shape.is_scalar() {
            return Layout::scalar();
        }
        // An operand just moved out of cooperative matrices decides: it is in the default
        // layout, into which its move wrote it directly, and moving the whole block again
        // would cost what that move did (the other operands are typically broadcasts of a
        // reduction of it, which cost only their source's move).
        for &o in operands {
            if self.coop_vals.contains_key(&o) && self.k.ty(o).shape == shape {
                if let Some(l) = self.values[o.index()].as_ref() {
                    return l.layout;
                }
            }
        }
        let mut votes: Vec<(Layout, usize)> = Vec::new();
        for &o in operands {
            if !self.anchored[o.index()] || self.k.ty(o).shape != shape {
                continue;
            }
            let Some(l) = self.values[o.index()].as_ref().map(|v| v.layout) else {
                continue;
            };
            match votes.iter_mut().find(|(v, _)| *v == l) {
                Some((_, n)) => *n += 1,
                None => votes.push((l, 1)),
            }
        }
        // `max_by_key` keeps the last maximum; reversing keeps the first.
        votes
            .into_iter()
            .rev()
            .max_by_key(|&(_, n)| n)
            .map(|(l, _)| l)
            .unwrap_or_else(|| self.default_layout(shape))
    }

    /// Whether the result of `op` is anchored: it carries data from memory or from other
    /// threads, so recomputing it in another layout is not possible (or not cheap).
    pub(crate) fn anchors(&self, op: &Op) -> bool {
        match op {
            Op::Arange { .. } | Op::Constant { .. } | Op::ProgramId { .. } | Op::NumPrograms { .. } => false,
            Op::Splat { .. } => false,
            Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Compare { .. }
            | Op::Select { .. }
            | Op::Cast { .. }
            | Op::Bitcast { .. }
            | Op::Fma { .. }
            | Op::BytePerm { .. }
            | Op::Rounded { .. }
            | Op::AddPtr { .. }
            | Op::Broadcast { .. }
            | Op::ExpandDims { .. } => op.operands().iter().any(|o| self.anchored[o.index()]),
            _ => true,
        }
    }

    /// Picks, for each block shape and access order, how many elements a thread moves at
    /// once: the widest access that the axis analysis proves adjacent and aligned for
    /// every load and store of that shape and order, within the target's vector size.
    pub(crate) fn choose_vector_widths(&mut self) {
        let mut widths: HashMap<(Shape, Order), u32> = HashMap::new();
        for (_, inst) in self.k.insts.iter() {
            let (ptr, mask) = match &inst.op {
                Op::Load { ptr, mask, .. } | Op::Store { ptr, mask, .. } => (*ptr, *mask),
                _ => continue,
            };
            let shape = self.k.ty(ptr).shape;
            if shape.is_scalar() {
                continue;
            }
            let order = self.access_order(ptr).unwrap_or(Self::default_order(shape.rank()));
            let fastest = order[0] as usize;
            let w = self.proven_width(ptr, mask, fastest).min(shape.dims()[fastest]);
            let e = widths.entry((shape, order)).or_insert(w);
            *e = (*e).min(w);
        }
        self.vec_by_access = widths;
    }

    /// The vector width proven for a memory access through `ptr` masked by `mask` along
    /// value dimension `dim`.
    pub(crate) fn proven_width(&self, ptr: ValueId, mask: Option<ValueId>, dim: usize) -> u32 {
        let ty = self.k.ty(ptr);
        if ty.shape.is_scalar() {
            return 1;
        }
        let elem = self.k.elem_scalar(ptr).size_bytes() as u64;
        let a = self.axis[ptr.index()];
        // The target's widest access, within the widest vector of per-thread IR (16 bytes
        // are 16 registers of i8).
        let widest = (self.target.max_vector_bytes as u64 / elem).clamp(1, crate::thread::MAX_VECTOR as u64);
        let mut w = widest.min(a.contiguity[dim]).min(a.divisibility[dim]);
        if let Some(m) = mask {
            w = w.min(self.axis[m.index()].constancy[dim]);
        }
        w.max(1) as u32
    }
}
