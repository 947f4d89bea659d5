//! Typing of the ops that work along an axis with data from the whole block: scans and
//! reductions with a combine region, `gather`, `sort` and `histogram`.

use crate::ir::{Op, ValueId};
use crate::types::{Elem, ScalarType, Shape, Type};

/// The result types of `scan`, `reduce` (with a combine), `gather`, `sort` and `histogram`;
/// `None` for other ops.
pub(super) fn infer(op: &Op, operand: &dyn Fn(ValueId) -> Type) -> Option<Result<Vec<Type>, String>> {
    Some(match op {
        Op::Scan { values, axis, .. } => combine_operands(values, *axis, operand).map(|t| t.to_vec()),
        Op::ReduceCombine { values, axis } => combine_operands(values, *axis, operand).and_then(|types| {
            types
                .iter()
                .map(|t| {
                    let shape = t.shape.remove_axis(*axis as usize).expect("axis checked");
                    Ok(t.with_shape(shape))
                })
                .collect()
        }),
        Op::Gather { src, index, axis } => gather(operand(*src), operand(*index), *axis).map(|t| vec![t]),
        Op::Sort { value, axis, .. } => {
            let v = operand(*value);
            block_of_numbers(v, "sort", *axis).map(|_| vec![v])
        }
        Op::Histogram { value, num_bins } => histogram(operand(*value), *num_bins).map(|t| vec![t]),
        Op::ClusterReduceCombine { values } => cluster_operands(values, operand),
        _ => return None,
    })
}

/// The operands of a cluster reduction with a combine: one or more scalar 32- or 64-bit
/// numbers, each a value a program passes to the other programs of its cluster.
fn cluster_operands(values: &[ValueId], operand: &dyn Fn(ValueId) -> Type) -> Result<Vec<Type>, String> {
    if values.is_empty() {
        return Err("needs at least one operand".into());
    }
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let t = operand(v);
            match t.elem {
                Elem::Scalar(s) if t.shape.rank() == 0 && (s.is_int() || s.is_float()) && s.bits() >= 32 => Ok(t),
                _ => Err(format!(
                    "operand {i}: combines one number a program, a scalar of 32 or 64 bits, got {t}"
                )),
            }
        })
        .collect()
}

/// The combine region's argument types for operands `values`: `[a..., b...]`, scalars.
pub fn combine_arg_types(values: &[Type]) -> Vec<Type> {
    let scalars: Vec<Type> = values
        .iter()
        .map(|t| Type::scalar(t.scalar_type().unwrap_or(ScalarType::I32)))
        .collect();
    [scalars.clone(), scalars].concat()
}

/// The types a combine region yields for operands `values`.
pub fn combine_yield_types(values: &[Type]) -> Vec<Type> {
    values
        .iter()
        .map(|t| Type::scalar(t.scalar_type().unwrap_or(ScalarType::I32)))
        .collect()
}

/// Checks the operands of a scan or combine reduction: one or more blocks of numbers (not
/// booleans) of one shape, with `axis` in range.
fn combine_operands(values: &[ValueId], axis: u8, operand: &dyn Fn(ValueId) -> Type) -> Result<Vec<Type>, String> {
    let Some(&first) = values.first() else {
        return Err("needs at least one operand".into());
    };
    let types: Vec<Type> = values.iter().map(|&v| operand(v)).collect();
    let shape = operand(first).shape;
    for (i, t) in types.iter().enumerate() {
        block_of_numbers(*t, "the combine's operands", axis).map_err(|e| format!("operand {i}: {e}"))?;
        if t.shape != shape {
            return Err(format!(
                "operand {i} has shape {}, operand 0 has {shape}; they must be equal",
                t.shape
            ));
        }
    }
    Ok(types)
}

/// Checks that `t` is a block of numbers (not booleans, not pointers) with `axis` in range.
fn block_of_numbers(t: Type, what: &str, axis: u8) -> Result<ScalarType, String> {
    let Some(s) = t.scalar_type() else {
        return Err(format!("{what} must be numbers, got pointers ({t})"));
    };
    if s.is_bool() {
        return Err(format!(
            "{what} cannot be booleans ({t}); cast them to an integer type first"
        ));
    }
    if t.shape.rank() == 0 {
        return Err(format!("{what} must be a block, got the scalar {t}"));
    }
    if axis as usize >= t.shape.rank() {
        return Err(format!("axis {axis} is out of range for {t} (rank {})", t.shape.rank()));
    }
    Ok(s)
}

fn gather(src: Type, index: Type, axis: u8) -> Result<Type, String> {
    let s = block_of_numbers(src, "gather's source", axis)?;
    match index.scalar_type() {
        Some(i) if i.is_int() => {}
        _ => return Err(format!("the index must be a block of integers, got {index}")),
    }
    if index.shape.rank() != src.shape.rank() {
        return Err(format!(
            "the index must have the source's rank {}, got {index} for source {src}",
            src.shape.rank()
        ));
    }
    for d in 0..src.shape.rank() {
        if d != axis as usize && index.shape.dims()[d] != src.shape.dims()[d] {
            return Err(format!(
                "the index's dimension {d} must equal the source's ({}) off the gather axis {axis}, got {index} for source {src}",
                src.shape.dims()[d]
            ));
        }
    }
    Ok(Type::block(Elem::Scalar(s), index.shape))
}

fn histogram(value: Type, num_bins: u32) -> Result<Type, String> {
    match value.scalar_type() {
        Some(s) if s.is_int() => {}
        _ => return Err(format!("needs a block of integers, got {value}")),
    }
    if value.shape.rank() != 1 {
        return Err(format!("needs a 1-D block, got {value}"));
    }
    if !num_bins.is_power_of_two() {
        return Err(format!("the number of bins must be a power of two, got {num_bins}"));
    }
    let shape = Shape::new(&[num_bins]).expect("rank 1");
    super::check_block_shape(shape)?;
    Ok(Type::block(Elem::Scalar(ScalarType::I32), shape))
}

/// Checks one instruction of a combine region, given the types of its operands and
/// results: only element-wise ops and constants, on scalars (every device runs the combine
/// on the elements a thread holds, one at a time).
pub fn check_combine_inst(op: &Op, operands: &[Type], results: &[Type]) -> Result<(), String> {
    let element_wise = matches!(
        op,
        Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Compare { .. }
            | Op::Select { .. }
            | Op::Fma { .. }
            | Op::BytePerm { .. }
            | Op::Rounded { .. }
            | Op::Cast { .. }
            | Op::Bitcast { .. }
            | Op::Constant { .. }
            | Op::Yield { .. }
    );
    if !element_wise {
        return Err(format!(
            "a combine may hold only element-wise ops on scalars, not `{}`",
            op.name()
        ));
    }
    if let Some(t) = operands.iter().find(|t| !t.is_scalar()) {
        return Err(format!("a combine works on scalars, but uses the block {t}"));
    }
    if let Some(t) = results.iter().find(|t| !t.is_scalar()) {
        return Err(format!(
            "a combine works on scalars, but `{}` makes a block ({t})",
            op.name()
        ));
    }
    Ok(())
}
