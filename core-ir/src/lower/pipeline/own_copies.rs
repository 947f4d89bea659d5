//! Own copies (`mod.rs`): the loads that feed no `dot` in a loop that asks for a
//! pipeline, each thread copying the elements it would have loaded into slots of its own
//! in the ring and reading them back into the load's layout where the body loads them.

use super::{PipelineState, PipelinedLoad};
use crate::ir::{BinaryOp, Inst, InstId, Op};
use crate::layout::Layout;
use crate::lower::mma::SharedOperand;
use crate::lower::{LVal, LowerError, Lowerer};
use crate::thread::{Expr, Reg, Stmt};
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// Load `id` as an own copy (`mod.rs`), if it can be one: it feeds no `dot` and
    /// each of its accesses moves 4, 8 or 16 bytes (what `cp.async` copies). Masked-off
    /// elements are copied as zeros; a load whose `other` is not zero gets it where its
    /// mask is off when read back.
    pub(super) fn own_copy(&self, id: InstId) -> Option<PipelinedLoad> {
        let inst = &self.k.insts[id];
        let Op::Load { ptr, mask, .. } = inst.op else {
            return None;
        };
        let value = *inst.results.first()?;
        let ty = self.k.ty(value);
        // (Numbers: booleans live in registers as predicates, not as the bytes copied.)
        let elem = ty.scalar_type().filter(|&e| e != ScalarType::Bool)?;
        let feeds_dot = self
            .k
            .insts
            .iter()
            .any(|(_, i)| matches!(i.op, Op::Dot { a, b, .. } if a == value || b == value));
        if feeds_dot {
            return None;
        }
        let mut layout = self.load_layout(ptr);
        if layout.sliced != 0 {
            return None;
        }
        let mut width = self.access_width(&layout, ty.shape, ptr, mask) as u32;
        let size = elem.size_bytes() as u32;
        if width * size < 4 {
            // A small block spread thinner than 4 bytes a thread (a row of scale bytes):
            // copied 4 bytes a thread where the pointer allows, some threads then copying
            // what others do, into their own slots.
            let fastest = layout.blocked.order[0] as usize;
            let run = 4 / size;
            if self.proven_width(ptr, mask, fastest) < run || ty.shape.dims()[fastest] < run {
                return None;
            }
            let b = layout.blocked;
            layout = Layout::blocked(crate::layout::Blocked::with_run(
                ty.shape.dims(),
                &b.order[..b.rank as usize],
                run,
                self.target.warp_size,
                self.target.num_warps,
            ));
            width = self.access_width(&layout, ty.shape, ptr, mask) as u32;
        }
        if !matches!(width * size, 4 | 8 | 16) {
            return None;
        }
        let threads = self.target.num_warps * self.target.warp_size;
        let slots = layout.map(ty.shape).len as u32 * threads;
        Some(PipelinedLoad {
            inst: id,
            value,
            layout,
            width,
            operand: SharedOperand {
                alloc: 0,
                tile: crate::layout::SwizzledTile {
                    rows: 1,
                    cols: slots,
                    vec: width,
                    per_phase: 1,
                    max_phase: 1,
                    block_cols: slots,
                    align: 16,
                },
                contiguous: 0,
                stage: None,
            },
            wgmma: false,
            tma: None,
            own: true,
            invariant: false,
        })
    }

    /// The slots of one stage of an own copy of `len` elements a thread in vectors of
    /// `width` (`mod.rs`): vector `v` of thread `t` at `(v * threads + t) * width`,
    /// computed once, in the prologue.
    pub(super) fn own_slots(&mut self, len: u32, width: u32) -> Vec<Reg> {
        let threads = (self.target.num_warps * self.target.warp_size) as i64;
        let tid = self.program_thread_id();
        let w = self.i32c(width as i64);
        let first = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Mul, tid, w));
        (0..len / width)
            .map(|v| {
                let offset = self.i32c(v as i64 * threads * width as i64);
                self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, first, offset))
            })
            .collect()
    }

    /// Where this iteration's own copies are read back (from stage `read`, or the one
    /// stage of an invariant copy), when their loads are lowered ([`Self::read_own_copy`]).
    pub(super) fn point_own_copies(&mut self, state: &PipelineState) {
        for (load, (operand, index)) in state.plan.loads.iter().zip(&state.buffers) {
            if !load.own {
                continue;
            }
            let base = self.stage_base(load, operand, state.read);
            let read = OwnRead {
                alloc: operand.alloc,
                base,
                index: index.clone(),
                width: load.width,
                layout: load.layout,
            };
            self.own_copies.insert(load.value, read);
        }
    }

    /// Load `inst`, if it is an own copy, read back from its slots into its layout: the
    /// value the load stands for. (Where the program loads it, not at the top of the
    /// iteration: read there, a value used late in the body, as the layer norm's weights,
    /// would hold registers through all of it.)
    pub(crate) fn read_own_copy(&mut self, inst: &Inst) -> Result<(), LowerError> {
        let Some(&value) = inst.results.first() else {
            return Ok(());
        };
        let Some(read) = self.own_copies.get(&value).cloned() else {
            return Ok(());
        };
        let elem = self.k.ty(value).scalar_type().expect("a pipelined load gives numbers");
        let mut regs = Vec::new();
        for &at in &read.index {
            let dsts: Vec<Reg> = (0..read.width).map(|_| self.new_reg(elem)).collect();
            let index = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Add, at, read.base));
            self.emit(Stmt::Load {
                dsts: dsts.clone(),
                mem: crate::thread::Memory::Shared { alloc: read.alloc },
                index,
                pred: None,
                cache: crate::ir::CacheModifier::Default,
            });
            regs.extend(dsts);
        }
        // The copies filled zeros where the mask is off; the load gives `other` there.
        if let Op::Load {
            mask: Some(mask),
            other: Some(other),
            ..
        } = inst.op
        {
            if !self.is_zero(other) {
                let (mask, other) = (self.ensure(mask, read.layout)?, self.ensure(other, read.layout)?);
                for (i, r) in regs.iter_mut().enumerate() {
                    *r = self.set(elem, Expr::Select(mask[i], *r, other[i]));
                }
            }
        }
        self.set_lval(
            value,
            LVal {
                layout: read.layout,
                regs,
                ptr: None,
            },
        );
        Ok(())
    }
}

/// Where an own copy's load reads its value back from (see [`Lowerer::read_own_copy`]):
/// its slots in `alloc`, at `base` plus each vector's `index`.
#[derive(Clone)]
pub(crate) struct OwnRead {
    alloc: u32,
    base: Reg,
    index: Vec<Reg>,
    width: u32,
    layout: Layout,
}
