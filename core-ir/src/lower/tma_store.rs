//! Stores through the tensor memory accelerator (sm_90): a store of a warpgroup MMA's
//! result that is a box of a tensor (`tma_box.rs`) goes to shared memory in the layout a
//! TMA box has there, and from there to global memory by one `cp.async.bulk.tensor` per
//! 128-byte column block, issued by one thread:
//!
//! ```text
//! barrier                       (a store issued before has read the buffer: see below)
//! each thread:   its elements -> staging tile (swizzled as the box), fence.proxy.async
//! barrier
//! first thread:  a TMA store per column block, commit, wait until they have read the tile
//! ```
//!
//! Against the exchange it replaces (registers to shared memory, a barrier, shared memory
//! to the coalesced layout's registers, a barrier, 16-byte global stores), the threads no
//! longer read the tile back nor issue global stores: the copy engine moves it, and the
//! ragged edge is its clipping of the box to the tensor, not masks. Only the first thread
//! waits for the copy to read the tile; the others go on (in a persistent or warp-specialized
//! schedule, to the next tile's main loop). The barrier before the staging writes orders
//! them after that wait of the previous store, wherever this store is in a loop of tiles.
//! The global writes complete by the end of the program; the stored tensor must not be
//! read or written by anything else in the kernel, which is checked.

use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Inst, Op, ValueDef, ValueId};
use crate::layout::SwizzledTile;
use crate::thread::{Expr, Memory, SharedAlloc, Stmt};
use crate::types::ScalarType;
use std::collections::HashSet;

/// At most this many boxes (column blocks) a store, all issued by one thread.
const MAX_BOXES: u32 = 8;

impl Lowerer<'_> {
    /// Lowers `store` through the tensor memory accelerator where the target has it and the
    /// store qualifies (module comment); `false`, having emitted nothing, where not.
    pub(crate) fn tma_store(&mut self, inst: &Inst) -> Result<bool, LowerError> {
        let Op::Store { ptr, value, .. } = inst.op else {
            return Ok(false);
        };
        if !self.target.tma || !self.target.tma_store || !self.target.wgmma {
            return Ok(false);
        }
        let Some(tile) = self.tma_store_tile(inst, value) else {
            return Ok(false);
        };
        let Some(region_box) = self.tma_store_box(inst, 1) else {
            return Ok(false);
        };
        if !self.only_access_to(region_box.param, inst, ptr) {
            return Ok(false);
        }
        let src = self.lval(value)?;
        let elem = self.k.elem_scalar(value);
        let map = src.layout.map(self.k.ty(value).shape);
        let Some(Staging { writes, thread_chunks }) = staging_writes(&src.layout, &map, &tile) else {
            return Ok(false);
        };

        let map_index = self.tensor_map_for(&region_box, &tile, elem.size_bytes() as u32);
        let staging = self.shared.len() as u32;
        self.shared.push(SharedAlloc {
            align: tile.align,
            ..SharedAlloc::new(elem, tile.len())
        });

        // The thread's part of every index: `row_base * block_cols + col_base % vec`, plus
        // the swizzled chunk `(c ^ col_base / vec ^ row_base % 8) * vec` for each chunk `c`
        // its registers use (`c` and the thread's chunk have no bit in common, so their sum
        // is their XOR), computed here rather than in the prologue so that nothing lives
        // across the loop.
        self.emit(Stmt::Barrier);
        let i32t = ScalarType::I32;
        let row_base = self.coord(&map, 0, 0);
        let col_base = self.coord(&map, 0, 1);
        let bc = self.i32c(tile.block_cols as i64);
        let line = self.set(i32t, Expr::Binary(BinaryOp::Mul, row_base, bc));
        let seven = self.i32c(tile.max_phase as i64 - 1);
        let row_phase = self.set(i32t, Expr::Binary(BinaryOp::And, row_base, seven));
        let (thread_at, phase) = if thread_chunks {
            let low = self.i32c(tile.vec as i64 - 1);
            let within = self.set(i32t, Expr::Binary(BinaryOp::And, col_base, low));
            let shift = self.i32c(tile.vec.trailing_zeros() as i64);
            let chunk = self.set(i32t, Expr::Binary(BinaryOp::Shr, col_base, shift));
            (
                self.set(i32t, Expr::Binary(BinaryOp::Add, line, within)),
                self.set(i32t, Expr::Binary(BinaryOp::Xor, row_phase, chunk)),
            )
        } else {
            (self.set(i32t, Expr::Binary(BinaryOp::Add, line, col_base)), row_phase)
        };
        let mut chunk_at = std::collections::HashMap::new();
        for w in &writes {
            if let std::collections::hash_map::Entry::Vacant(e) = chunk_at.entry(w.chunk) {
                let c = self.i32c(w.chunk as i64);
                let x = self.set(i32t, Expr::Binary(BinaryOp::Xor, phase, c));
                let v = self.i32c(tile.vec as i64);
                let x = self.set(i32t, Expr::Binary(BinaryOp::Mul, x, v));
                e.insert(self.set(i32t, Expr::Binary(BinaryOp::Add, thread_at, x)));
            }
        }
        for w in &writes {
            let k = self.i32c(w.constant as i64);
            let index = self.set(i32t, Expr::Binary(BinaryOp::Add, chunk_at[&w.chunk], k));
            self.emit(Stmt::Store {
                values: src.regs[w.first..w.first + w.width].to_vec(),
                mem: Memory::Shared { alloc: staging },
                index,
                pred: None,
            });
        }
        self.emit(Stmt::FenceProxyAsync);
        self.emit(Stmt::Barrier);

        // The first thread copies each column block of the tile to its box.
        self.order_global_access(region_box.param, true);
        let zero = self.i32c(0);
        let x0 = self.poly_value(&region_box.origin[0], zero)?;
        let y0 = self.poly_value(&region_box.origin[1], zero)?;
        let outer_at = region_box
            .outer
            .iter()
            .map(|(_, index)| self.poly_value(index, zero))
            .collect::<Result<Vec<_>, _>>()?;
        let tid = self.program_thread_id();
        let first = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, tid, zero));
        for b in 0..tile.cols / tile.block_cols {
            let src_at = self.i32c((b * tile.rows * tile.block_cols) as i64);
            let dx = self.i32c((b * tile.block_cols) as i64);
            let x = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, x0, dx));
            self.emit(Stmt::TmaStore {
                map: map_index,
                alloc: staging,
                src: src_at,
                coords: [vec![x, y0], outer_at.clone()].concat(),
                pred: Some(first),
            });
        }
        self.emit(Stmt::BulkCommit { pred: Some(first) });
        self.emit(Stmt::BulkWaitRead {
            alloc: staging,
            pred: Some(first),
        });
        Ok(true)
    }

    /// The staging tile for storing `value` by boxes: a 2-D tile of 16- or 32-bit elements
    /// that a warpgroup MMA's accumulator layout holds (the epilogue of a `dot`), with rows
    /// of whole 128-byte column blocks, stored by a statement of the kernel's top level.
    fn tma_store_tile(&self, inst: &Inst, value: ValueId) -> Option<SwizzledTile> {
        let top_level = self
            .k
            .body
            .insts
            .iter()
            .any(|&id| std::ptr::eq(&self.k.insts[id], inst));
        let v = self.values[value.index()].as_ref()?;
        let shape = self.k.ty(value).shape;
        if !top_level || shape.rank() != 2 || v.layout.map(shape).rows().is_none() {
            return None;
        }
        let [rows, cols] = [shape.dims()[0], shape.dims()[1]];
        let elem = self.k.elem_scalar(value).size_bytes() as u32;
        if !matches!(elem, 2 | 4) || rows > 256 || (cols * elem) % 128 != 0 {
            return None;
        }
        let tile = SwizzledTile::for_wgmma(rows, cols, elem)?;
        (tile.block_cols * elem == 128 && tile.cols / tile.block_cols <= MAX_BOXES).then_some(tile)
    }

    /// Whether `store` (through `ptr`) is the kernel's only memory access that reaches
    /// pointer parameter `param`, every other one provably reaching another parameter.
    fn only_access_to(&self, param: u32, store: &Inst, ptr: ValueId) -> bool {
        self.k.insts.iter().all(|(_, i)| {
            let other = match i.op {
                Op::Load { ptr, .. } | Op::Store { ptr, .. } | Op::Atomic { ptr, .. } | Op::AtomicCas { ptr, .. } => {
                    ptr
                }
                _ => return true,
            };
            std::ptr::eq(i, store) && other == ptr
                || self
                    .reachable_params(other, &mut HashSet::new())
                    .is_some_and(|ps| !ps.contains(&param))
        })
    }

    /// The pointer parameters pointer `v` can be an element of: followed back through
    /// pointer arithmetic, block reshaping and `for` loops' carried values (their initial
    /// and yielded values); `None` where it comes from anything else.
    fn reachable_params(&self, v: ValueId, seen: &mut HashSet<ValueId>) -> Option<HashSet<u32>> {
        if !seen.insert(v) {
            return Some(HashSet::new());
        }
        let k = self.k;
        match k.values[v].def {
            ValueDef::Param(i) => Some(HashSet::from([i])),
            ValueDef::RegionArg { inst, region: 0, index } if index > 0 => {
                let Op::For { ref init, .. } = k.insts[inst].op else {
                    return None;
                };
                let region = &k.insts[inst].regions[0];
                let yielded = match region.insts.last().map(|&i| &k.insts[i].op) {
                    Some(Op::Yield { values }) => *values.get(index as usize - 1)?,
                    _ => return None,
                };
                let mut ps = self.reachable_params(*init.get(index as usize - 1)?, seen)?;
                ps.extend(self.reachable_params(yielded, seen)?);
                Some(ps)
            }
            ValueDef::RegionArg { .. } => None,
            ValueDef::Result { inst, index } => match k.insts[inst].op {
                Op::AddPtr { ptr, .. }
                | Op::Splat { value: ptr }
                | Op::Broadcast { value: ptr }
                | Op::ExpandDims { value: ptr, .. }
                | Op::Reshape { value: ptr, .. }
                | Op::Permute { value: ptr, .. } => self.reachable_params(ptr, seen),
                Op::For { .. } => {
                    let arg = k.insts[inst].regions[0].args[index as usize + 1];
                    self.reachable_params(arg, seen)
                }
                _ => None,
            },
        }
    }
}

/// One store of registers into the staging tile: registers `first..first + width` (adjacent
/// along the row), at `thread part + (chunk ^ row % 8) * vec + constant`.
struct StagingWrite {
    first: usize,
    width: usize,
    chunk: u32,
    constant: u32,
}

/// How a thread's registers go into the staging tile.
struct Staging {
    writes: Vec<StagingWrite>,
    /// Whether the thread's columns reach past its first 16-byte chunk (f32 results: a
    /// warpgroup MMA thread's 2-column pieces of 4 lanes span 8 columns, two chunks), so
    /// that its own chunk enters the swizzle.
    thread_chunks: bool,
}

/// The stores that put `map`'s registers into `tile` (a 128-byte swizzled tile of column
/// blocks), with each index split into the thread's part and constants, where the layout
/// allows it: every register's row offset a multiple of the swizzle's 8 rows (so a row's
/// phase is its thread's); each register's columns, whatever the thread's place in its
/// chunk, within one 16-byte chunk; the thread's chunk and the register's sharing no bit
/// (so that the chunk is their XOR), and the thread's columns within one column block (so
/// that the block is the register's). `None` otherwise.
fn staging_writes(
    layout: &crate::layout::Layout,
    map: &crate::layout::RegisterMap,
    tile: &SwizzledTile,
) -> Option<Staging> {
    let b = layout.blocked;
    if b.rank != 2 || map.offsets(0)[..2] != [0, 0] || tile.per_phase != 1 || tile.max_phase != 8 {
        return None;
    }
    let spt = b.size_per_thread[1];
    // The thread's column base is a multiple of `spt` below `span` (powers of two all).
    let span = b.threads_per_warp[1] * b.warps_per_cta[1] * spt;
    if span > tile.block_cols || tile.vec % spt != 0 {
        return None;
    }
    // The largest place in its chunk a thread's column base takes, and the bits its chunk
    // can have.
    let last_within = span.min(tile.vec) - spt;
    let chunk_bits = span.max(tile.vec) / tile.vec - 1;
    let mut writes = Vec::new();
    let mut i = 0;
    while i < map.len {
        let o = map.offsets(i);
        let (ro, co) = (o[0], o[1]);
        let pair = i + 1 < map.len && spt % 2 == 0 && co % 2 == 0 && map.offsets(i + 1)[..2] == [ro, co + 1];
        let width = if pair { 2 } else { 1 };
        let (block, in_block) = (co / tile.block_cols, co % tile.block_cols);
        let chunk = in_block / tile.vec;
        if ro % 8 != 0 || last_within + co % tile.vec + width as u32 > tile.vec || chunk & chunk_bits != 0 {
            return None;
        }
        writes.push(StagingWrite {
            first: i,
            width,
            chunk,
            constant: block * tile.rows * tile.block_cols + ro * tile.block_cols + co % tile.vec,
        });
        i += width;
    }
    Some(Staging {
        writes,
        thread_chunks: chunk_bits != 0,
    })
}
