//! f64 arithmetic rounded as the IR rounds it: `NoContraction` on every f64 add, subtract,
//! multiply, divide and negation, added to the SPIR-V words naga writes (its IR has no
//! place for the decoration).
//!
//! Without it a Vulkan driver may contract and rearrange float arithmetic, and NVIDIA's
//! does: inside the f64 `sigmoid` it rewrote the exponential's reduction
//! `(x - k·ln2_hi) - k·ln2_lo` as `x - k·(ln2_hi + ln2_lo)`, folding the two parts of ln 2
//! into one f64 (18 ulp on an H200), and in the f64 `pow` it dropped rounding errors that
//! two-part sums carry (50 ulp where `|y·log2 x|` is 457). The f64 functions that the
//! builder writes out (`rutile_ir`'s `f64_math`, `f64_trig`, `f64_erf`, `f64_pow`) rely on
//! each operation rounding once, as it does in the interpreter and through PTX (`add.rn`
//! and the like, which `ptxas` neither contracts nor rearranges). f32 and narrower
//! arithmetic keeps the driver's freedom, which fast kernels use (fused multiply-adds), and
//! which the conformance matrix's bounds allow for.

use crate::hints::read_back;
use crate::SpirvError;
use rspirv::binary::Assemble;
use rspirv::dr::Operand;
use rspirv::spirv::{Decoration, Op};
use std::collections::HashSet;

/// The arithmetic a driver could contract or rearrange.
const ARITHMETIC: [Op; 7] = [
    Op::FAdd,
    Op::FSub,
    Op::FMul,
    Op::FDiv,
    Op::FNegate,
    Op::VectorTimesScalar,
    Op::Dot,
];

/// Whether naga's `module` has f64 values (scalars or vectors).
pub(crate) fn computes_in_f64(module: &naga::Module) -> bool {
    module.types.iter().any(|(_, t)| match t.inner {
        naga::TypeInner::Scalar(s) | naga::TypeInner::Vector { scalar: s, .. } => {
            s.kind == naga::ScalarKind::Float && s.width == 8
        }
        _ => false,
    })
}

/// `words` with every f64 (scalar or vector) [`ARITHMETIC`] result decorated
/// `NoContraction`.
pub(crate) fn mark_no_contraction(words: &[u32]) -> Result<Vec<u32>, SpirvError> {
    let mut module = read_back(words)?;
    let mut f64_types = HashSet::new();
    for i in &module.types_global_values {
        let id = i.result_id;
        match (i.class.opcode, i.operands.first()) {
            (Op::TypeFloat, Some(Operand::LiteralBit32(64))) => f64_types.extend(id),
            (Op::TypeVector, Some(Operand::IdRef(c))) if f64_types.contains(c) => f64_types.extend(id),
            _ => {}
        }
    }
    let targets: Vec<u32> = module
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().flat_map(|b| b.instructions.iter()))
        .filter(|i| ARITHMETIC.contains(&i.class.opcode))
        .filter(|i| i.result_type.is_some_and(|t| f64_types.contains(&t)))
        .filter_map(|i| i.result_id)
        .collect();
    for id in targets {
        module.annotations.push(rspirv::dr::Instruction::new(
            Op::Decorate,
            None,
            None,
            vec![Operand::IdRef(id), Operand::Decoration(Decoration::NoContraction)],
        ));
    }
    Ok(module.assemble())
}
