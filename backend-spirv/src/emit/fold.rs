//! Constant folding of operations on naga literals only, with the IR's semantics: naga's
//! WGSL reader evaluates such operations itself and rejects what overflows (e.g.
//! `i32(-2147483648) / -1i`), where the IR wraps.

use super::*;

/// `op` on two literals with the IR's (wrapping) semantics (floats may come out non-finite).
pub(super) fn fold_binary(op: Bo, a: naga::Literal, b: naga::Literal) -> Option<naga::Literal> {
    use naga::Literal as L;
    macro_rules! int {
        ($x:expr, $y:expr, $v:path) => {
            match op {
                Bo::Add => Some($v($x.wrapping_add($y))),
                Bo::Subtract => Some($v($x.wrapping_sub($y))),
                Bo::Multiply => Some($v($x.wrapping_mul($y))),
                Bo::Divide if $y != 0 => Some($v($x.wrapping_div($y))),
                Bo::Modulo if $y != 0 => Some($v($x.wrapping_rem($y))),
                Bo::And => Some($v($x & $y)),
                Bo::InclusiveOr => Some($v($x | $y)),
                Bo::ExclusiveOr => Some($v($x ^ $y)),
                Bo::Equal => Some(L::Bool($x == $y)),
                Bo::NotEqual => Some(L::Bool($x != $y)),
                Bo::Less => Some(L::Bool($x < $y)),
                Bo::LessEqual => Some(L::Bool($x <= $y)),
                Bo::Greater => Some(L::Bool($x > $y)),
                Bo::GreaterEqual => Some(L::Bool($x >= $y)),
                _ => None,
            }
        };
    }
    macro_rules! float {
        ($x:expr, $y:expr, $v:path) => {
            match op {
                Bo::Add => Some($v($x + $y)),
                Bo::Subtract => Some($v($x - $y)),
                Bo::Multiply => Some($v($x * $y)),
                Bo::Divide => Some($v($x / $y)),
                // Rust's float `%` is C's exact `fmod`, the IR's `rem`.
                Bo::Modulo => Some($v($x % $y)),
                Bo::Equal => Some(L::Bool($x == $y)),
                Bo::Less => Some(L::Bool($x < $y)),
                Bo::LessEqual => Some(L::Bool($x <= $y)),
                Bo::Greater => Some(L::Bool($x > $y)),
                Bo::GreaterEqual => Some(L::Bool($x >= $y)),
                _ => None,
            }
        };
    }
    let shift = |amount: u32, width: u32| (amount < width).then_some(amount);
    match (a, b) {
        (L::I32(x), L::I32(y)) => int!(x, y, L::I32),
        (L::U32(x), L::U32(y)) => int!(x, y, L::U32),
        (L::I64(x), L::I64(y)) => int!(x, y, L::I64),
        (L::U64(x), L::U64(y)) => int!(x, y, L::U64),
        (L::F32(x), L::F32(y)) => float!(x, y, L::F32),
        (L::F64(x), L::F64(y)) => float!(x, y, L::F64),
        (L::Bool(x), L::Bool(y)) => match op {
            Bo::LogicalAnd => Some(L::Bool(x && y)),
            Bo::LogicalOr => Some(L::Bool(x || y)),
            Bo::Equal => Some(L::Bool(x == y)),
            Bo::NotEqual => Some(L::Bool(x != y)),
            _ => None,
        },
        (x, L::U32(n)) if matches!(op, Bo::ShiftLeft | Bo::ShiftRight) => {
            let left = op == Bo::ShiftLeft;
            match x {
                L::I32(v) => shift(n, 32).map(|n| L::I32(if left { v << n } else { v >> n })),
                L::U32(v) => shift(n, 32).map(|n| L::U32(if left { v << n } else { v >> n })),
                L::I64(v) => shift(n, 64).map(|n| L::I64(if left { v << n } else { v >> n })),
                L::U64(v) => shift(n, 64).map(|n| L::U64(if left { v << n } else { v >> n })),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `op` on a literal, where the result is a literal.
pub(super) fn fold_unary(op: Uo, a: naga::Literal) -> Option<naga::Literal> {
    use naga::Literal as L;
    match (op, a) {
        (Uo::Negate, L::I32(v)) => Some(L::I32(v.wrapping_neg())),
        (Uo::Negate, L::I64(v)) => Some(L::I64(v.wrapping_neg())),
        (Uo::Negate, L::F32(v)) => Some(L::F32(-v)),
        (Uo::Negate, L::F64(v)) => Some(L::F64(-v)),
        (Uo::Negate, L::F16(v)) => Some(L::F16(-v)),
        (Uo::LogicalNot, L::Bool(v)) => Some(L::Bool(!v)),
        (Uo::BitwiseNot, L::I32(v)) => Some(L::I32(!v)),
        (Uo::BitwiseNot, L::U32(v)) => Some(L::U32(!v)),
        (Uo::BitwiseNot, L::I64(v)) => Some(L::I64(!v)),
        (Uo::BitwiseNot, L::U64(v)) => Some(L::U64(!v)),
        _ => None,
    }
}

/// A conversion of a literal, done now (naga's WGSL reader cannot evaluate some of them, e.g.
/// `f32(0lf)`). `None` where the result is no literal (a non-finite float) or the case is
/// not one this backend makes.
pub(super) fn fold_as(l: naga::Literal, kind: ScalarKind, convert: Option<u8>) -> Option<naga::Literal> {
    use naga::Literal as L;
    let finite32 = |x: f32| x.is_finite().then_some(L::F32(x));
    let finite64 = |x: f64| x.is_finite().then_some(L::F64(x));
    match convert {
        None => match (l, kind) {
            (L::I32(v), ScalarKind::Uint) => Some(L::U32(v as u32)),
            (L::I32(v), ScalarKind::Float) => finite32(f32::from_bits(v as u32)),
            (L::U32(v), ScalarKind::Sint) => Some(L::I32(v as i32)),
            (L::U32(v), ScalarKind::Float) => finite32(f32::from_bits(v)),
            (L::F32(v), ScalarKind::Uint) => Some(L::U32(v.to_bits())),
            (L::F32(v), ScalarKind::Sint) => Some(L::I32(v.to_bits() as i32)),
            (L::I64(v), ScalarKind::Uint) => Some(L::U64(v as u64)),
            (L::I64(v), ScalarKind::Float) => finite64(f64::from_bits(v as u64)),
            (L::U64(v), ScalarKind::Sint) => Some(L::I64(v as i64)),
            (L::U64(v), ScalarKind::Float) => finite64(f64::from_bits(v)),
            (L::F64(v), ScalarKind::Uint) => Some(L::U64(v.to_bits())),
            (L::F64(v), ScalarKind::Sint) => Some(L::I64(v.to_bits() as i64)),
            _ => None,
        },
        Some(w) => {
            let float = match l {
                L::F16(h) => Some(h.to_f64()),
                L::F32(x) => Some(x as f64),
                L::F64(x) => Some(x),
                _ => None,
            };
            let int: Option<i128> = match l {
                L::I32(v) => Some(v as i128),
                L::U32(v) => Some(v as i128),
                L::I64(v) => Some(v as i128),
                L::U64(v) => Some(v as i128),
                _ => None,
            };
            match (kind, w) {
                (ScalarKind::Float, 2) => {
                    let h = match (float, int) {
                        // Rounded once (`ScalarType::round`); `half`'s f64 conversion
                        // drops low bits first.
                        (Some(x), _) => half::f16::from_f64(ScalarType::F16.round(x)),
                        (_, Some(i)) => half::f16::from_f64(ScalarType::F16.round(i as f64)),
                        _ => return None,
                    };
                    h.is_finite().then_some(L::F16(h))
                }
                (ScalarKind::Float, 4) => match (float, int) {
                    (Some(x), _) => finite32(x as f32),
                    (_, Some(i)) => finite32(i as f32),
                    _ => None,
                },
                (ScalarKind::Float, 8) => match (float, int) {
                    (Some(x), _) => finite64(x),
                    (_, Some(i)) => finite64(i as f64),
                    _ => None,
                },
                // Rust's float-to-integer `as` saturates and maps NaN to 0, as the IR does.
                (ScalarKind::Sint, 4) => Some(L::I32(float.map_or_else(|| int.unwrap_or(0) as i32, |x| x as i32))),
                (ScalarKind::Uint, 4) => Some(L::U32(float.map_or_else(|| int.unwrap_or(0) as u32, |x| x as u32))),
                (ScalarKind::Sint, 8) => Some(L::I64(float.map_or_else(|| int.unwrap_or(0) as i64, |x| x as i64))),
                (ScalarKind::Uint, 8) => Some(L::U64(float.map_or_else(|| int.unwrap_or(0) as u64, |x| x as u64))),
                _ => None,
            }
            .filter(|_| float.is_some() || int.is_some())
        }
    }
}

pub(super) fn zero_literal(t: ScalarType) -> naga::Literal {
    match t {
        ScalarType::Bool => naga::Literal::Bool(false),
        ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => naga::Literal::I32(0),
        ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => naga::Literal::U32(0),
        ScalarType::I64 => naga::Literal::I64(0),
        ScalarType::U64 => naga::Literal::U64(0),
        ScalarType::F16 => naga::Literal::F16(half::f16::ZERO),
        ScalarType::F32
        | ScalarType::BF16
        | ScalarType::F8E4M3
        | ScalarType::F8E5M2
        | ScalarType::F8E4M3B15
        | ScalarType::F8E4M3Fnuz
        | ScalarType::F8E5M2Fnuz => naga::Literal::F32(0.0),
        ScalarType::F64 => naga::Literal::F64(0.0),
    }
}
