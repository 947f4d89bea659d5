//! `dot` of fp8 blocks where warpgroup MMAs cannot take them. Hopper's `wgmma` multiplies
//! fp8 operands itself (`wgmma.rs`); `mma.sync` as rutile emits it, cooperative matrices
//! and the FMA path take f16. There each fp8 operand is first converted to f16, which holds
//! every fp8 value exactly, so the products and their f32 sums are those of the fp8 values:
//! the kernel gets a `cast` to f16 before each such `dot`, and is lowered as written after
//! that. (The interpreter multiplies the fp8 values as they are, to the same products.)

use super::wgmma::wgmma_shape_of;
use crate::ir::{Inst, InstId, Kernel, Op, ValueData, ValueDef, ValueId};
use crate::target::Target;
use crate::types::{Elem, ScalarType};

/// `kernel` with f16 conversions before the `dot`s of fp8 blocks that do not run on
/// warpgroup MMAs on `target`; `None` where there are none.
pub(super) fn widen_fp8_dots(kernel: &Kernel, target: &Target) -> Option<Kernel> {
    let widened: Vec<InstId> = kernel
        .insts
        .iter()
        .filter(|(_, inst)| match inst.op {
            Op::Dot { a, .. } => {
                kernel.ty(a).scalar_type().is_some_and(ScalarType::is_fp8)
                    && wgmma_shape_of(kernel, target, inst).is_none()
            }
            _ => false,
        })
        .map(|(id, _)| id)
        .collect();
    if widened.is_empty() {
        return None;
    }
    let mut k = kernel.clone();
    for dot in widened {
        let Op::Dot { a, b, .. } = k.insts[dot].op else {
            unreachable!("the instructions chosen are dots");
        };
        let (ca, wa) = cast_to_f16(&mut k, a, dot);
        let (cb, wb) = cast_to_f16(&mut k, b, dot);
        if let Op::Dot { a, b, .. } = &mut k.insts[dot].op {
            (*a, *b) = (wa, wb);
        }
        insert_before(&mut k, dot, &[ca, cb]);
    }
    Some(k)
}

/// A new `cast` of `v` to f16 (placed by the caller), with the location of instruction
/// `at`: the instruction and its result.
fn cast_to_f16(k: &mut Kernel, v: ValueId, at: InstId) -> (InstId, ValueId) {
    let ty = k.ty(v).with_elem(Elem::Scalar(ScalarType::F16));
    let loc = k.insts[at].loc;
    let inst = k.insts.append(Inst {
        op: Op::Cast { value: v },
        results: Vec::new(),
        regions: Vec::new(),
        loc,
    });
    let result = k.values.append(ValueData {
        ty,
        def: ValueDef::Result { inst, index: 0 },
    });
    k.insts[inst].results.push(result);
    (inst, result)
}

/// Puts `new` right before instruction `at` in the region that lists it.
fn insert_before(k: &mut Kernel, at: InstId, new: &[InstId]) {
    let splice = |list: &mut Vec<InstId>| match list.iter().position(|&i| i == at) {
        Some(p) => {
            list.splice(p..p, new.iter().copied());
            true
        }
        None => false,
    };
    if splice(&mut k.body.insts) {
        return;
    }
    let owner = k
        .insts
        .iter()
        .find_map(|(id, inst)| inst.regions.iter().position(|r| r.insts.contains(&at)).map(|r| (id, r)))
        .expect("every instruction is listed by a region");
    splice(&mut k.insts[owner.0].regions[owner.1].insts);
}
