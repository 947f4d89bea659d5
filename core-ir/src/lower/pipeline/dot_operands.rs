//! Which loads are pipelined as operands of `dot`s on the tensor cores or on cooperative
//! matrices: their element type, their uses, their layout and access width, and the
//! shared tile a stage holds them in.

use super::PipelinedLoad;
use crate::ir::{InstId, Literal, Op, Region, ValueDef, ValueId};
use crate::lower::mma::{fastest_dim, Operand, SharedOperand};
use crate::lower::wgmma::operand_tile;
use crate::lower::Lowerer;
use crate::types::ScalarType;

impl Lowerer<'_> {
    /// Load `id` as a pipelined operand, if it can be one (`mod.rs`).
    pub(super) fn pipelinable(&self, id: InstId, region: &Region, registers: bool) -> Option<PipelinedLoad> {
        let inst = &self.k.insts[id];
        let Op::Load { ptr, mask, other, .. } = inst.op else {
            return None;
        };
        let value = inst.results[0];
        let ty = self.k.ty(value);
        let elem = ty.scalar_type()?;
        // (f32 operands reach the tensor cores only as tf32, which `mma_plan` checks below.)
        if !(matches!(elem, ScalarType::F16 | ScalarType::BF16 | ScalarType::F32) || elem.is_fp8())
            || ty.shape.rank() != 2
        {
            return None;
        }
        if other.is_some_and(|o| !self.is_zero(o)) {
            return None;
        }
        // Used only as an operand of `dot`s on the tensor cores in this body.
        // A `dot` on warpgroup MMAs reads its own tile layout, so such a load feeds only it.
        let mut uses = 0;
        let mut wgmma = None;
        for (iid, i) in self.k.insts.iter() {
            for o in i.op.operands() {
                if o != value {
                    continue;
                }
                match i.op {
                    Op::Dot { a, b, acc, .. } if acc != value && a != b && region.insts.contains(&iid) => {
                        if registers {
                            self.coop_plan(i)?;
                            uses += 1;
                            continue;
                        }
                        self.mma_plan(i)?;
                        if let Some(shape) = self.wgmma_shape(i) {
                            wgmma = Some((shape, if a == value { Operand::A } else { Operand::B }));
                        }
                        uses += 1;
                    }
                    _ => return None,
                }
            }
        }
        if uses == 0 || (wgmma.is_some() && uses > 1) {
            return None;
        }
        let layout = self.load_layout(ptr);
        let map = layout.map(ty.shape);
        if layout.sliced != 0 || (0..2).any(|d| map.replicated(d)) {
            return None;
        }
        let width = self.access_width(&layout, ty.shape, ptr, mask) as u32;
        let contiguous = fastest_dim(layout);
        let dims = [ty.shape.dims()[0], ty.shape.dims()[1]];
        let (shape, which) = match wgmma {
            Some((s, w)) => (Some(s), w),
            None => (None, Operand::A),
        };
        // (A column-major A is not copied: wgmma reads A along K, so it is staged from
        // registers.)
        let (tile, stored) = if registers {
            (crate::lower::coop::coop_tile(dims, contiguous, elem), contiguous)
        } else {
            operand_tile(shape, which, dims, contiguous, elem)?
        };
        let bytes = width * elem.size_bytes() as u32;
        // (Registers take any width the access has; `cp.async` copies 4, 8 or 16 bytes.)
        if stored != contiguous
            || !(matches!(bytes, 4 | 8 | 16) || registers)
            || width > tile.vec
            || layout.blocked.order[0] as usize != contiguous
        {
            return None;
        }
        Some(PipelinedLoad {
            inst: id,
            value,
            layout,
            width,
            operand: SharedOperand {
                alloc: 0,
                tile,
                contiguous,
                stage: None,
            },
            wgmma: shape.is_some(),
            tma: None,
            own: false,
            invariant: false,
        })
    }

    /// Whether `v` is the constant +0 (a constant, or a splat or broadcast of one): what the
    /// copies' zero fill writes. (Not -0.0: a masked-off row of -0.0 products could then
    /// give a sum of the other sign.)
    pub(crate) fn is_zero(&self, v: ValueId) -> bool {
        let ValueDef::Result { inst, .. } = self.k.values[v].def else {
            return false;
        };
        match self.k.insts[inst].op {
            Op::Constant { value } => match value {
                Literal::Float(f) => f.to_bits() == 0,
                Literal::Int(i) => i == 0,
                Literal::Bool(b) => !b,
            },
            Op::Splat { value } | Op::Broadcast { value } => self.is_zero(value),
            _ => false,
        }
    }
}
