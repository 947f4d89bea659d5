//! Thread coordinates and the exchange of values through shared memory.
//!
//! Everything that depends only on the thread (its lane and warp, the coordinates of its
//! registers in a layout, whether it owns an element or holds a copy) is computed once, in
//! the kernel's prologue, and cached here.

use super::affine_index::Affine;
use super::{LVal, Lowerer};
use crate::ir::{BinaryOp, CmpOp};
use crate::layout::{Blocked, Layout, RegisterMap, WarpgroupRows};
use crate::thread::{Expr, Memory, Reg, SharedAlloc, Stmt};
use crate::types::{ScalarType, Shape, MAX_RANK};
use std::collections::HashMap;

type Full = [u32; MAX_RANK];

#[derive(Default)]
pub(crate) struct Cache {
    pub consts: HashMap<(ScalarType, u64), Reg>,
    ids: Option<(Reg, Reg, Reg)>,
    /// This program's `program_id(0)` in a block of several programs (see
    /// `block_programs`).
    pub block_program: Option<Reg>,
    /// This program's rank in its thread-block cluster (see `cluster`).
    pub cluster_rank: Option<Reg>,
    raw: HashMap<Blocked, [Option<Reg>; MAX_RANK]>,
    rows: HashMap<(Reg, WarpgroupRows), Reg>,
    coords: HashMap<(Layout, Full, usize, usize), Reg>,
    owners: HashMap<(Layout, Full), Option<Reg>>,
    linear: HashMap<(Layout, Full, [i64; MAX_RANK]), Vec<Reg>>,
    smem: HashMap<ScalarType, u32>,
    /// Integer registers known as `base + offset` (`affine_index.rs`).
    pub affine: HashMap<Reg, super::affine_index::Affine>,
    /// The values of the integer constants `konst` made.
    pub const_ints: HashMap<Reg, i64>,
    /// `base >> shift`, per base and shift.
    pub quotients: HashMap<(Reg, u32), Reg>,
    /// `base + offset`, per base and offset.
    pub sums: HashMap<(Reg, i64), Reg>,
    /// Storage indices of conversions, per register map, dimension mapping and plan.
    pub swizzled: HashMap<(Layout, Full, Vec<u8>, super::convert::Swizzle), Vec<Reg>>,
}

fn log2(x: u32) -> i64 {
    x.trailing_zeros() as i64
}

impl Lowerer<'_> {
    /// The thread's index, lane and warp.
    pub(crate) fn thread_ids(&mut self) -> (Reg, Reg, Reg) {
        if let Some(ids) = self.cache.ids {
            return ids;
        }
        let i32t = ScalarType::I32;
        let tid = self.program_thread_id();
        let mask = self.i32c(self.target.warp_size as i64 - 1);
        let shift = self.i32c(log2(self.target.warp_size));
        let lane = self.pset(i32t, Expr::Binary(BinaryOp::And, tid, mask));
        let warp = self.pset(i32t, Expr::Binary(BinaryOp::Shr, tid, shift));
        self.cache.ids = Some((tid, lane, warp));
        (tid, lane, warp)
    }

    /// The thread's warpgroup in its program (4 warps of 32 threads: `tid >> 7`), in the
    /// prologue.
    pub(crate) fn warpgroup_id(&mut self) -> Reg {
        let tid = self.program_thread_id();
        let seven = self.i32c(7);
        self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Shr, tid, seven))
    }

    /// `(warp_d * threads_per_warp_d + lane_d) * size_per_thread_d` for each dimension: the
    /// first element of the thread's first piece, before wrapping to the block's size.
    /// `None` where it is always 0.
    fn raw_base(&mut self, b: Blocked) -> [Option<Reg>; MAX_RANK] {
        if let Some(r) = self.cache.raw.get(&b) {
            return *r;
        }
        let (_, lane, warp) = self.thread_ids();
        let i32t = ScalarType::I32;
        let mut out = [None; MAX_RANK];
        let (mut lshift, mut wshift) = (0, 0);
        for k in 0..b.rank as usize {
            let d = b.order[k] as usize;
            let (tpw, wpc, spt) = (b.threads_per_warp[d], b.warps_per_cta[d], b.size_per_thread[d]);
            let part = |l: &mut Self, src: Reg, shift: i64, count: u32| -> Option<Reg> {
                if count == 1 {
                    return None;
                }
                let s = l.i32c(shift);
                let m = l.i32c(count as i64 - 1);
                let shifted = if shift == 0 {
                    src
                } else {
                    l.pset(i32t, Expr::Binary(BinaryOp::Shr, src, s))
                };
                Some(l.pset(i32t, Expr::Binary(BinaryOp::And, shifted, m)))
            };
            let lane_d = part(self, lane, lshift, tpw);
            let warp_d = part(self, warp, wshift, wpc);
            lshift += log2(tpw);
            wshift += log2(wpc);
            // (warp_d * tpw + lane_d) * spt, skipping zero terms.
            let scaled_warp = warp_d.map(|w| {
                let c = self.i32c(log2(tpw));
                self.pset(i32t, Expr::Binary(BinaryOp::Shl, w, c))
            });
            let sum = match (scaled_warp, lane_d) {
                (Some(w), Some(l)) => Some(self.pset(i32t, Expr::Binary(BinaryOp::Add, w, l))),
                (w, l) => w.or(l),
            };
            out[d] = sum.map(|s| {
                if spt == 1 {
                    s
                } else {
                    let c = self.i32c(log2(spt));
                    self.pset(i32t, Expr::Binary(BinaryOp::Shl, s, c))
                }
            });
        }
        self.cache.raw.insert(b, out);
        out
    }

    /// `rows.row(base)` for a thread's blocked base row `base` (below one tile, so its
    /// repetition is 0): `(w / 4) warpgroup_rows + 16 (w % 4) + g` for `base = 8 w + g`.
    fn warpgroup_row(&mut self, base: Reg, rows: WarpgroupRows) -> Reg {
        if let Some(&r) = self.cache.rows.get(&(base, rows)) {
            return r;
        }
        let i32t = ScalarType::I32;
        let bin = |l: &mut Self, op: BinaryOp, x: Reg, c: i64| {
            let c = l.i32c(c);
            l.pset(i32t, Expr::Binary(op, x, c))
        };
        let g = bin(self, BinaryOp::And, base, 7);
        let w = bin(self, BinaryOp::Shr, base, 3);
        let quad = bin(self, BinaryOp::And, w, 3);
        let quad = bin(self, BinaryOp::Shl, quad, 4);
        let wg = bin(self, BinaryOp::Shr, w, 2);
        let wg = bin(self, BinaryOp::Mul, wg, rows.warpgroup_rows as i64);
        let sum = self.pset(i32t, Expr::Binary(BinaryOp::Add, wg, quad));
        let r = self.pset(i32t, Expr::Binary(BinaryOp::Add, sum, g));
        self.cache.rows.insert((base, rows), r);
        r
    }

    /// The register holding the coordinate of register `i` of `map` along blocked
    /// dimension `d`.
    pub(crate) fn coord(&mut self, map: &RegisterMap, i: usize, d: usize) -> Reg {
        let key = (map.layout, map.full, i, d);
        if let Some(&r) = self.cache.coords.get(&key) {
            return r;
        }
        let raw = self.raw_base(map.layout.blocked)[d];
        let off = map.offsets(i)[d] as i64;
        let rows = map.rows().filter(|_| d == 0);
        let base = raw.map(|r| {
            if let Some(p) = rows {
                self.warpgroup_row(r, p)
            } else if map.replicated(d) {
                let m = self.i32c(map.base_mask(d) as i64);
                self.pset(ScalarType::I32, Expr::Binary(BinaryOp::And, r, m))
            } else {
                r
            }
        });
        // The base is a multiple of the elements a thread holds in a row along `d` (but for
        // a warpgroup's rows), which `affine_index.rs` divides by.
        let align = if rows.is_some() {
            1
        } else {
            map.layout.blocked.size_per_thread[d]
        };
        let r = match base {
            None => {
                let r = self.i32c(off);
                self.note_affine(
                    r,
                    Affine {
                        base: None,
                        off,
                        align: 1,
                    },
                );
                r
            }
            Some(b) => self.affine_sum(b, off, align),
        };
        self.cache.coords.insert(key, r);
        r
    }

    /// A predicate true in the one thread that owns each element of `map`'s value (the
    /// others hold copies), or `None` when no element is replicated.
    pub(crate) fn owner(&mut self, map: &RegisterMap) -> Option<Reg> {
        let key = (map.layout, map.full);
        if let Some(&o) = self.cache.owners.get(&key) {
            return o;
        }
        let b = map.layout.blocked;
        let raw = self.raw_base(b);
        let mut pred: Option<Reg> = None;
        if map.layout.is_scalar() && b.rank == 0 {
            // Uniform values: thread 0 acts for the program.
            let (tid, _, _) = self.thread_ids();
            let zero = self.i32c(0);
            pred = Some(self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, tid, zero)));
        }
        for d in 0..b.rank as usize {
            let Some(r) = raw[d] else { continue };
            if !map.replicated(d) {
                continue;
            }
            let lim = self.i32c(map.full[d] as i64);
            let c = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Lt, r, lim));
            pred = Some(match pred {
                None => c,
                Some(p) => self.pset(ScalarType::Bool, Expr::Binary(BinaryOp::And, p, c)),
            });
        }
        self.cache.owners.insert(key, pred);
        pred
    }

    /// For each register of `map`, `sum_d coord_d * strides[d]` (over blocked dimensions).
    pub(crate) fn linear(&mut self, map: &RegisterMap, strides: [i64; MAX_RANK]) -> Vec<Reg> {
        let key = (map.layout, map.full, strides);
        if let Some(v) = self.cache.linear.get(&key) {
            return v.clone();
        }
        let i32t = ScalarType::I32;
        let rank = map.layout.blocked.rank as usize;
        let mut out = Vec::with_capacity(map.len);
        // Registers at one place (along every dimension with a stride) share their sums:
        // what reads by them can then read once for them all.
        let mut made: HashMap<(BinaryOp, Reg, Reg), Reg> = HashMap::new();
        let mut binary = |l: &mut Self, op: BinaryOp, a: Reg, b: Reg| {
            *made
                .entry((op, a, b))
                .or_insert_with(|| l.pset(i32t, Expr::Binary(op, a, b)))
        };
        for i in 0..map.len {
            let mut acc: Option<Reg> = None;
            for (d, &stride) in strides.iter().enumerate().take(rank) {
                if stride == 0 {
                    continue;
                }
                let c = self.coord(map, i, d);
                let term = if stride == 1 {
                    c
                } else {
                    let s = self.i32c(stride);
                    binary(self, BinaryOp::Mul, c, s)
                };
                acc = Some(match acc {
                    None => term,
                    Some(a) => binary(self, BinaryOp::Add, a, term),
                });
            }
            out.push(acc.unwrap_or_else(|| self.i32c(0)));
        }
        self.cache.linear.insert(key, out.clone());
        out
    }

    /// A shared buffer for elements of `ty` with room for `len` (one per type, reused by
    /// every exchange: each exchange ends with a barrier).
    pub(crate) fn shared_buffer(&mut self, ty: ScalarType, len: u32) -> u32 {
        if let Some(&a) = self.cache.smem.get(&ty) {
            let alloc = &mut self.shared[a as usize];
            alloc.len = alloc.len.max(len);
            return a;
        }
        let a = self.shared.len() as u32;
        // (Each exchange stores, waits at a barrier, loads: nothing passes between them.)
        self.shared.push(SharedAlloc::transient(ty, len));
        self.cache.smem.insert(ty, a);
        a
    }

    /// Row-major strides of a value's shape, placed on the layout's blocked dimensions
    /// (0 on sliced ones).
    pub(crate) fn value_strides(layout: &Layout, shape: Shape) -> [i64; MAX_RANK] {
        let row_major = shape.strides();
        let mut out = [0i64; MAX_RANK];
        for vd in 0..shape.rank() {
            out[layout.blocked_dim(vd)] = row_major[vd] as i64;
        }
        out
    }

    /// Stores every element of `src` (of shape `shape`) at its row-major index in shared
    /// buffer `buf`, once, by the thread that owns it; converted to `cast` first if given.
    /// No barrier: the caller places it.
    pub(crate) fn store_shared(&mut self, src: &LVal, shape: Shape, buf: u32, cast: Option<ScalarType>) {
        let map = src.layout.map(shape);
        let index = self.linear(&map, Self::value_strides(&src.layout, shape));
        let own = self.owner(&map);
        for (i, &r) in src.regs.iter().enumerate() {
            let v = match cast {
                Some(t) => self.set(t, Expr::Cast(r)),
                None => r,
            };
            self.emit(Stmt::Store {
                values: vec![v],
                mem: Memory::Shared { alloc: buf },
                index: index[i],
                pred: own,
            });
        }
    }
}
