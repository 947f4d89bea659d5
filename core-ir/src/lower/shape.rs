//! Ops that make blocks or move their elements: constants, `arange`, splat, broadcast,
//! `expand_dims`, reshape and permute.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{Inst, Op, ValueId};
use crate::layout::Layout;
use crate::thread::Reg;
use crate::types::{Elem, Shape, MAX_RANK};

impl Lowerer<'_> {
    pub(crate) fn shape_op(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let result = inst.results[0];
        let ty = self.k.ty(result);
        let shape = ty.shape;
        let layout = self.default_layout(shape);
        let n = layout.map(shape).len;
        match &inst.op {
            Op::Constant { value } => {
                let s = ty.scalar_type().ok_or_else(|| self.internal("pointer constant"))?;
                let r = self.konst(s, *value);
                Ok(LVal {
                    layout,
                    regs: vec![r; n],
                    ptr: None,
                })
            }
            Op::Arange { start, .. } => {
                let map = layout.map(shape);
                let mut regs = Vec::with_capacity(n);
                for i in 0..n {
                    let c = self.coord(&map, i, 0);
                    regs.push(self.arange_element(c, *start as i64));
                }
                Ok(LVal {
                    layout,
                    regs,
                    ptr: None,
                })
            }
            Op::Splat { value } => {
                let src = self.lval(*value)?;
                Ok(LVal {
                    layout,
                    regs: vec![src.regs[0]; n],
                    ptr: src.ptr,
                })
            }
            Op::Broadcast { value } => {
                // The operand in the result's blocked layout (with its own shape) holds, in
                // each thread, the elements whose broadcast dimensions are 0. An anchored
                // operand in a blocked layout lends it to the result.
                let src_shape = self.k.ty(*value).shape;
                let src = self.lval(*value)?;
                let layout = if self.anchored[value.index()] && src.layout.sliced == 0 && !src_shape.is_scalar() {
                    src.layout
                } else {
                    layout
                };
                let regs = self.ensure(*value, layout.unsliced())?;
                Ok(LVal {
                    layout,
                    regs: broadcast_registers(&regs, src_shape, layout, shape),
                    ptr: src.ptr,
                })
            }
            Op::ExpandDims { value, axis } => {
                let src = self.lval(*value)?;
                let src_shape = self.k.ty(*value).shape;
                if src_shape.is_scalar() {
                    return Ok(LVal {
                        layout,
                        regs: vec![src.regs[0]; n],
                        ptr: src.ptr,
                    });
                }
                // Free when the operand is a slice along the new axis: un-slice it.
                let b = src.layout.blocked;
                let unsliced = |l: &Layout| (0..b.rank as usize).filter(|d| l.sliced & (1 << d) == 0).count();
                for d in 0..b.rank as usize {
                    if src.layout.sliced & (1 << d) != 0 {
                        let candidate = src.layout.unslice(d);
                        let before = (0..d).filter(|e| candidate.sliced & (1 << e) == 0).count();
                        if before == *axis as usize && unsliced(&candidate) == shape.rank() {
                            return Ok(LVal {
                                layout: candidate,
                                regs: src.regs,
                                ptr: src.ptr,
                            });
                        }
                    }
                }
                // Free too when the new dimension only ever becomes a few elements (`join`
                // widens it to 2): each thread holds all of it, beside the operand's own.
                if let Some(own) = self.with_thread_dimension(*value, src.layout, src_shape, *axis as usize, result) {
                    return Ok(LVal {
                        layout: own,
                        regs: src.regs,
                        ptr: src.ptr,
                    });
                }
                // Otherwise move the operand into the slice of the result's layout.
                let want = layout.slice(*axis as usize);
                let regs = self.ensure(*value, want)?;
                Ok(LVal {
                    layout,
                    regs,
                    ptr: src.ptr,
                })
            }
            Op::Reshape { value } | Op::Permute { value, .. } => {
                let src = self.lval(*value)?;
                let src_shape = self.k.ty(*value).shape;
                if let Op::Permute { perm, .. } = &inst.op {
                    if let Some(layout) = self.permute_in_threads(&src, src_shape, perm) {
                        return Ok(LVal {
                            layout,
                            regs: src.regs,
                            ptr: src.ptr,
                        });
                    }
                }
                if matches!(inst.op, Op::Reshape { .. }) {
                    if let Some((layout, regs)) = self.reshape_in_threads(&src, src_shape, shape) {
                        return Ok(LVal {
                            layout,
                            regs,
                            ptr: src.ptr,
                        });
                    }
                }
                let elem_ty = match self.k.ty(*value).elem {
                    Elem::Scalar(s) => s,
                    Elem::Ptr(_) => self.regs[src.regs[0]].ty,
                };
                let perm = match &inst.op {
                    Op::Permute { perm, .. } => Some(perm.as_slice()),
                    _ => None,
                };
                let regs = if src_shape.is_scalar() {
                    vec![src.regs[0]; n]
                } else {
                    self.convert(&src, elem_ty, src_shape, layout, shape, perm)?
                };
                Ok(LVal {
                    layout,
                    regs,
                    ptr: src.ptr,
                })
            }
            op => Err(self.internal(format!("`{}` is not a shape op", op.name()))),
        }
    }
}

impl Lowerer<'_> {
    /// A reshape that merges two adjacent dimensions of which each thread holds the inner
    /// one whole (`join`'s and `interleave`'s new dimension, see
    /// [`Lowerer::with_thread_dimension`]), or splits one whose run in each thread is a
    /// multiple of the new inner dimension (a row's neighbouring pairs, to `split` them),
    /// done in registers: the result takes the source's layout with the two merged (a
    /// thread's run along the outer one times the inner one's length) or split (the run
    /// divided, the inner dimension held whole), in which every thread holds the elements
    /// it held, in another register order. Checked element by element for every thread;
    /// `None` where the reshape is not such a merge or split or the layouts do not place
    /// alike, and then it goes through shared memory.
    fn reshape_in_threads(&self, src: &LVal, src_shape: Shape, dst_shape: Shape) -> Option<(Layout, Vec<Reg>)> {
        let l = src.layout;
        let (s, d) = (src_shape.dims(), dst_shape.dims());
        if l.sliced != 0 || l.rows.is_some() {
            return None;
        }
        let dst = if s.len() == d.len() + 1 {
            merged_layout(l, s, d)?
        } else if d.len() == s.len() + 1 {
            split_layout(l, s, d)?
        } else {
            return None;
        };
        let (sm, dm) = (l.map(src_shape), dst.map(dst_shape));
        if sm.len != dm.len {
            return None;
        }
        // Row-major positions: a reshape keeps them.
        let linear =
            |dims: &[u32], c: [u32; MAX_RANK]| dims.iter().zip(c).fold(0u64, |acc, (&n, x)| acc * n as u64 + x as u64);
        let (warp_size, warps) = (self.target.warp_size, self.target.num_warps);
        let held: std::collections::HashMap<u64, usize> = (0..sm.len)
            .map(|i| sm.element(0, 0, i).map(|c| (linear(s, c), i)))
            .collect::<Option<_>>()?;
        let perm: Vec<usize> = (0..dm.len)
            .map(|j| dm.element(0, 0, j).and_then(|c| held.get(&linear(d, c)).copied()))
            .collect::<Option<_>>()?;
        let alike = (0..warps).all(|w| {
            (0..warp_size).all(|lane| {
                perm.iter()
                    .enumerate()
                    .all(|(j, &i)| match (dm.element(lane, w, j), sm.element(lane, w, i)) {
                        (Some(a), Some(b)) => linear(d, a) == linear(s, b),
                        _ => false,
                    })
            })
        });
        alike.then(|| (dst, perm.iter().map(|&i| src.regs[i]).collect()))
    }
}

/// Layout `l` of a block of dims `s` with dimensions `m` and `m + 1` merged into the `d`
/// of the reshape, where each thread holds dimension `m + 1` whole; `None` where the
/// reshape is not such a merge.
fn merged_layout(l: Layout, s: &[u32], d: &[u32]) -> Option<Layout> {
    // The merged pair (m, m + 1): the dimensions before and after it unchanged.
    let m = (0..d.len()).find(|&i| d[i] != s[i]).unwrap_or(d.len() - 1);
    let inner = m + 1;
    if d[m] != s[m] * s[inner] || d[inner..] != s[inner + 1..] {
        return None;
    }
    let b = l.blocked;
    if b.threads_per_warp[inner] != 1 || b.warps_per_cta[inner] != 1 {
        return None;
    }
    let mut nb = b;
    nb.rank = b.rank - 1;
    let drop = |a: &[u32; MAX_RANK]| {
        let mut out = [1; MAX_RANK];
        for (k, &v) in a.iter().enumerate().take(b.rank as usize) {
            if k != inner {
                out[k - usize::from(k > inner)] = v;
            }
        }
        out
    };
    nb.size_per_thread = drop(&b.size_per_thread);
    nb.size_per_thread[m] = b.size_per_thread[m] * s[inner];
    nb.threads_per_warp = drop(&b.threads_per_warp);
    nb.warps_per_cta = drop(&b.warps_per_cta);
    let order: Vec<u8> = b.order[..b.rank as usize]
        .iter()
        .filter(|&&o| o as usize != inner)
        .map(|&o| o - u8::from(o as usize > inner))
        .collect();
    nb.order = [0; MAX_RANK];
    nb.order[..order.len()].copy_from_slice(&order);
    Some(Layout::blocked(nb))
}

/// Layout `l` of a block of dims `s` with dimension `m` split into dimensions `m` and
/// `m + 1` of the `d` of the reshape, the new inner one held whole by each thread (its run
/// along `m` a multiple of it), next in the order; `None` where the reshape is not such a
/// split.
fn split_layout(l: Layout, s: &[u32], d: &[u32]) -> Option<Layout> {
    let m = (0..s.len()).find(|&i| d[i] != s[i]).unwrap_or(s.len() - 1);
    let (inner, c) = (m + 1, d[m + 1]);
    if s[m] != d[m] * c || s[m + 1..] != d[inner + 1..] {
        return None;
    }
    let b = l.blocked;
    if b.size_per_thread[m] % c != 0 {
        return None;
    }
    let mut nb = b;
    nb.rank = b.rank + 1;
    let insert = |a: &[u32; MAX_RANK], inner_value: u32| {
        let mut out = [1; MAX_RANK];
        for k in 0..nb.rank as usize {
            out[k] = match k.cmp(&inner) {
                std::cmp::Ordering::Less => a[k],
                std::cmp::Ordering::Equal => inner_value,
                std::cmp::Ordering::Greater => a[k - 1],
            };
        }
        out
    };
    nb.size_per_thread = insert(&b.size_per_thread, c);
    nb.size_per_thread[m] = b.size_per_thread[m] / c;
    nb.threads_per_warp = insert(&b.threads_per_warp, 1);
    nb.warps_per_cta = insert(&b.warps_per_cta, 1);
    // The new dimension runs fastest within the one it came from.
    let mut order = Vec::with_capacity(nb.rank as usize);
    for &o in &b.order[..b.rank as usize] {
        let o = o as usize;
        if o == m {
            order.push(inner as u8);
        }
        order.push((o + usize::from(o > m)) as u8);
    }
    nb.order = [0; MAX_RANK];
    nb.order[..order.len()].copy_from_slice(&order);
    Some(Layout::blocked(nb))
}

impl Lowerer<'_> {
    /// A permute done by renaming the dimensions of the source's layout (as Triton's
    /// `trans` is a layout change): every thread keeps its registers, each now standing for
    /// the permuted element. Users that need another layout convert it where they use it,
    /// and those that do not (a gather, which stores its source to shared memory in any
    /// layout; a `dot`, which stages its operands) move nothing. Checked element by
    /// element for every thread; `None` where the source is not in a plain blocked layout
    /// or the layouts do not place alike.
    fn permute_in_threads(&self, src: &LVal, src_shape: Shape, perm: &[u8]) -> Option<Layout> {
        let l = src.layout;
        let rank = src_shape.rank();
        if l.sliced != 0 || l.rows.is_some() || rank == 0 || perm.len() != rank {
            return None;
        }
        let b = l.blocked;
        let mut nb = b;
        let mut inverse = [0u8; MAX_RANK];
        for (d, &p) in perm.iter().enumerate() {
            let p = p as usize;
            nb.size_per_thread[d] = b.size_per_thread[p];
            nb.threads_per_warp[d] = b.threads_per_warp[p];
            nb.warps_per_cta[d] = b.warps_per_cta[p];
            inverse[p] = d as u8;
        }
        for k in 0..rank {
            nb.order[k] = inverse[b.order[k] as usize];
        }
        let dst = Layout::blocked(nb);
        let dims: Vec<u32> = perm.iter().map(|&p| src_shape.dims()[p as usize]).collect();
        let (sm, dm) = (l.map(src_shape), dst.map(Shape::new(&dims)?));
        if sm.len != dm.len {
            return None;
        }
        let (warp_size, warps) = (self.target.warp_size, self.target.num_warps);
        let alike = (0..warps).all(|w| {
            (0..warp_size).all(|lane| {
                (0..sm.len).all(|i| match (dm.element(lane, w, i), sm.element(lane, w, i)) {
                    (Some(a), Some(c)) => (0..rank).all(|d| a[d] == c[perm[d] as usize]),
                    (None, None) => true,
                    _ => false,
                })
            })
        });
        alike.then_some(dst)
    }
}

/// A new dimension that broadcasts widen to no more than this many elements is held within
/// each thread (see [`Lowerer::with_thread_dimension`]).
const THREAD_DIMENSION_MAX: u32 = 4;

impl Lowerer<'_> {
    /// For `expand_dims` of `value` (held in `layout`, of `shape`) at `axis` into `result`:
    /// the operand's layout with the new dimension inserted, one element of it per thread,
    /// slowest in the order, so that the operand's registers are the result's as they are.
    /// Only for an anchored operand in a plain blocked layout, and where every use of the
    /// result is a broadcast to at most [`THREAD_DIMENSION_MAX`] elements along `axis`
    /// (`join`, `interleave`): each thread then holds those few along with its own, where a
    /// default layout for the result would move the operand through shared memory, and a
    /// wide broadcast (an outer product) would multiply every thread's registers.
    fn with_thread_dimension(
        &self,
        value: ValueId,
        layout: Layout,
        shape: Shape,
        axis: usize,
        result: ValueId,
    ) -> Option<Layout> {
        if !self.anchored[value.index()] || layout.sliced != 0 || layout.rows.is_some() || shape.is_scalar() {
            return None;
        }
        let mut used = false;
        for (_, inst) in self.k.insts.iter() {
            if !inst.op.operands().contains(&result) {
                continue;
            }
            match inst.op {
                Op::Broadcast { .. } if self.k.ty(inst.results[0]).shape.dims()[axis] <= THREAD_DIMENSION_MAX => {
                    used = true
                }
                _ => return None,
            }
        }
        if !used {
            return None;
        }
        let b = layout.blocked;
        let rank = b.rank as usize;
        let mut nb = b;
        nb.rank = rank as u8 + 1;
        let insert = |a: &[u32; MAX_RANK]| {
            let mut out = [1; MAX_RANK];
            for d in 0..rank {
                out[d + usize::from(d >= axis)] = a[d];
            }
            out
        };
        nb.size_per_thread = insert(&b.size_per_thread);
        nb.threads_per_warp = insert(&b.threads_per_warp);
        nb.warps_per_cta = insert(&b.warps_per_cta);
        for k in 0..rank {
            let d = b.order[k] as usize;
            nb.order[k] = (d + usize::from(d >= axis)) as u8;
        }
        nb.order[rank] = axis as u8;
        let candidate = Layout::blocked(nb);
        // The registers must line up: element i of the result is element i of the operand.
        let mut dims = shape.dims().to_vec();
        dims.insert(axis, 1);
        let (src_map, map) = (layout.map(shape), candidate.map(Shape::new(&dims)?));
        let same = map.len == src_map.len
            && (0..map.len).all(|i| {
                let o = map.offsets(i);
                let mut s = [0; MAX_RANK];
                for d in 0..rank {
                    s[d] = o[d + usize::from(d >= axis)];
                }
                src_map.register_at(s) == i
            });
        same.then_some(candidate)
    }
}

/// The registers of a broadcast: `src` holds a value of `src_shape` in the blocked layout of
/// `layout` (same rank, size-1 dimensions where it is broadcast); each thread's result
/// element takes the source element with the broadcast coordinates at 0, which the same
/// thread holds.
pub(crate) fn broadcast_registers(
    src: &[crate::thread::Reg],
    src_shape: crate::types::Shape,
    layout: Layout,
    shape: crate::types::Shape,
) -> Vec<crate::thread::Reg> {
    let src_map = layout.unsliced().map(src_shape);
    let map = layout.map(shape);
    (0..map.len)
        .map(|i| {
            let mut o = map.offsets(i);
            for (d, od) in o.iter_mut().enumerate().take(shape.rank()) {
                if src_shape.dims()[d] == 1 {
                    *od = 0;
                }
            }
            src[src_map.register_at(o)]
        })
        .collect()
}
