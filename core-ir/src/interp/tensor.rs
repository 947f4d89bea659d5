//! Block values: a type and a flat row-major array of elements in one of four host
//! representations, and the rules that keep each representation exact for its IR type.
//!
//! - Integers are `i64`, normalized after every op to the type's width: sign-extended for
//!   signed types, zero-extended for unsigned ones (`u64` keeps its bit pattern, and ops that
//!   care about signedness reinterpret it as `u64`).
//! - Floats are `f64` holding a value of the element type exactly: every op rounds its result
//!   to the element type (round to nearest even).
//! - Booleans are `bool`; pointers are a parameter index and an element offset.

use super::error::{invalid, Fault};
use crate::types::{Elem, ScalarType, Type};
use half::{bf16, f16};

/// A pointer into global memory: the kernel parameter it derives from (which names its
/// buffer) and an element offset from the start of that buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub param: u32,
    pub offset: i64,
}

/// The elements of a block, row-major.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Data {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Float(Vec<f64>),
    Ptr(Vec<Pointer>),
}

impl Data {
    // Used by the invariant checks of debug builds.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub fn len(&self) -> usize {
        match self {
            Data::Bool(v) => v.len(),
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
            Data::Ptr(v) => v.len(),
        }
    }

    /// The representation's name, for messages.
    // Used by the invariant checks of debug builds.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Bool(_) => "booleans",
            Data::Int(_) => "integers",
            Data::Float(_) => "floats",
            Data::Ptr(_) => "pointers",
        }
    }

    /// `n` copies of the single element of a scalar.
    pub fn splat(&self, n: usize) -> Data {
        fn rep<T: Copy>(v: &[T], n: usize) -> Vec<T> {
            vec![v[0]; n]
        }
        match self {
            Data::Bool(v) => Data::Bool(rep(v, n)),
            Data::Int(v) => Data::Int(rep(v, n)),
            Data::Float(v) => Data::Float(rep(v, n)),
            Data::Ptr(v) => Data::Ptr(rep(v, n)),
        }
    }

    /// The elements at `indices`, in order.
    pub fn gather(&self, indices: &[usize]) -> Data {
        fn pick<T: Copy>(v: &[T], indices: &[usize]) -> Vec<T> {
            indices.iter().map(|&i| v[i]).collect()
        }
        match self {
            Data::Bool(v) => Data::Bool(pick(v, indices)),
            Data::Int(v) => Data::Int(pick(v, indices)),
            Data::Float(v) => Data::Float(pick(v, indices)),
            Data::Ptr(v) => Data::Ptr(pick(v, indices)),
        }
    }
}

/// A block value (a scalar is a block of rank 0 and one element).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    pub ty: Type,
    pub data: Data,
}

impl Tensor {
    /// Checks that the representation and length fit the type.
    // Used by the invariant checks of debug builds.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub fn check(&self) -> Result<(), Fault> {
        let (ty, data) = (self.ty, &self.data);
        let ok = match (data, ty.elem) {
            (Data::Ptr(_), Elem::Ptr(_)) => true,
            (Data::Bool(_), Elem::Scalar(s)) => s.is_bool(),
            (Data::Int(_), Elem::Scalar(s)) => s.is_int(),
            (Data::Float(_), Elem::Scalar(s)) => s.is_float(),
            _ => false,
        };
        if !ok {
            return Err(invalid!("{} cannot hold a value of type {ty}", data.kind()));
        }
        if data.len() != ty.shape.numel() {
            return Err(invalid!(
                "{} elements cannot have type {ty} ({} elements)",
                data.len(),
                ty.shape.numel()
            ));
        }
        Ok(())
    }

    /// The scalar element type; pointers are an error naming `what`.
    pub fn scalar_type(&self, what: &str) -> Result<ScalarType, Fault> {
        self.ty
            .scalar_type()
            .ok_or_else(|| invalid!("{what} cannot be a pointer ({})", self.ty))
    }

    pub fn bools(&self) -> Result<&[bool], Fault> {
        match &self.data {
            Data::Bool(v) => Ok(v),
            _ => Err(invalid!("expected booleans, got {}", self.ty)),
        }
    }
    pub fn ints(&self) -> Result<&[i64], Fault> {
        match &self.data {
            Data::Int(v) => Ok(v),
            _ => Err(invalid!("expected integers, got {}", self.ty)),
        }
    }
    pub fn floats(&self) -> Result<&[f64], Fault> {
        match &self.data {
            Data::Float(v) => Ok(v),
            _ => Err(invalid!("expected floats, got {}", self.ty)),
        }
    }
    pub fn ptrs(&self) -> Result<&[Pointer], Fault> {
        match &self.data {
            Data::Ptr(v) => Ok(v),
            _ => Err(invalid!("expected pointers, got {}", self.ty)),
        }
    }

    /// The value of a boolean scalar.
    pub fn scalar_bool(&self, what: &str) -> Result<bool, Fault> {
        match (&self.data, self.ty.is_scalar()) {
            (Data::Bool(v), true) => Ok(v[0]),
            _ => Err(invalid!("{what} must be an i1 scalar, got {}", self.ty)),
        }
    }
}

/// Wraps an integer to the width of `s`: sign-extends signed types and zero-extends unsigned
/// ones (`u64` and `i64` keep all 64 bits).
#[inline]
pub(crate) fn wrap_int(s: ScalarType, v: i64) -> i64 {
    match s {
        ScalarType::I8 => v as i8 as i64,
        ScalarType::I16 => v as i16 as i64,
        ScalarType::I32 => v as i32 as i64,
        ScalarType::U8 => v as u8 as i64,
        ScalarType::U16 => v as u16 as i64,
        ScalarType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// Wraps every element to the width of `s`.
pub(crate) fn wrap_ints(s: ScalarType, v: &mut [i64]) {
    match s {
        ScalarType::I64 | ScalarType::U64 => {}
        ScalarType::I8 => v.iter_mut().for_each(|x| *x = *x as i8 as i64),
        ScalarType::I16 => v.iter_mut().for_each(|x| *x = *x as i16 as i64),
        ScalarType::I32 => v.iter_mut().for_each(|x| *x = *x as i32 as i64),
        ScalarType::U8 => v.iter_mut().for_each(|x| *x = *x as u8 as i64),
        ScalarType::U16 => v.iter_mut().for_each(|x| *x = *x as u16 as i64),
        ScalarType::U32 => v.iter_mut().for_each(|x| *x = *x as u32 as i64),
        _ => {}
    }
}

/// Whether `v` lies in the range of the integer type `s` (`u64` only up to `i64::MAX`).
pub(crate) fn int_fits(s: ScalarType, v: i64) -> bool {
    if s.is_unsigned_int() {
        v >= 0 && wrap_int(s, v) == v
    } else {
        wrap_int(s, v) == v
    }
}

/// `v` rounded to `s` (round to nearest even), for any float type.
#[inline]
pub(crate) fn round_float(s: ScalarType, v: f64) -> f64 {
    match s {
        ScalarType::F32 => v as f32 as f64,
        ScalarType::F16 => f16_from_f64(v).to_f64(),
        ScalarType::BF16 => bf16_from_f64(v).to_f64(),
        _ => match crate::fp8::format_of(s) {
            Some(f) => f.round(v),
            None => v,
        },
    }
}

/// Rounds every element to `s`.
pub(crate) fn round_floats(s: ScalarType, v: &mut [f64]) {
    match s {
        ScalarType::F32 => v.iter_mut().for_each(|x| *x = *x as f32 as f64),
        ScalarType::F16 => v.iter_mut().for_each(|x| *x = f16_from_f64(*x).to_f64()),
        ScalarType::BF16 => v.iter_mut().for_each(|x| *x = bf16_from_f64(*x).to_f64()),
        _ if s.is_fp8() => v.iter_mut().for_each(|x| *x = round_float(s, *x)),
        _ => {}
    }
}

/// `v` rounded to f32 with round-to-odd: truncated toward zero, with the last bit set when
/// inexact. Rounding that result to any format of at most 22 bits of precision (f16, bf16) is
/// the correctly rounded conversion of `v`; rounding f64 to f32 to f16 directly would round
/// twice, and `half`'s own f64 conversions drop the low mantissa bits.
#[inline]
fn f32_round_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if f.is_nan() || f.is_infinite() || f as f64 == v {
        // Infinity here means `v` is beyond f32's range, hence beyond f16's and bf16's.
        return f;
    }
    let bits = f.to_bits();
    if bits & 1 == 1 {
        return f;
    }
    // `f` is the even neighbour of `v`; the odd one is the next float toward `v`. Adding or
    // subtracting 1 to the sign-magnitude bits moves away from or toward zero.
    if (f as f64).abs() > v.abs() {
        f32::from_bits(bits - 1)
    } else {
        f32::from_bits(bits + 1)
    }
}

/// The correctly rounded f16 of an f64.
#[inline]
pub(crate) fn f16_from_f64(v: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(v))
}

/// The correctly rounded bf16 of an f64.
#[inline]
pub(crate) fn bf16_from_f64(v: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(v))
}

/// The sign, exponent and mantissa widths of f16, bf16 and f32 (`None` for other types).
fn narrow_float_layout(s: ScalarType) -> Option<(u32, u32)> {
    match s {
        ScalarType::F16 => Some((5, 10)),
        ScalarType::BF16 => Some((8, 7)),
        ScalarType::F32 => Some((8, 23)),
        _ => None,
    }
}

/// The value of the bits of an f16, bf16, f32 or f64 (`s`). A NaN keeps its payload and
/// its quiet bit in the f64 (a hardware conversion would quiet a signaling NaN), so that
/// [`float_to_bits`] gives the same bits back.
pub(crate) fn float_from_bits(s: ScalarType, bits: u64) -> f64 {
    if let Some(f) = crate::fp8::format_of(s) {
        return f.decode(bits as u8);
    }
    let Some((exp, mant)) = narrow_float_layout(s) else {
        return f64::from_bits(bits);
    };
    let exp_mask = ((1u64 << exp) - 1) << mant;
    let payload = bits & ((1u64 << mant) - 1);
    if bits & exp_mask == exp_mask && payload != 0 {
        let sign = (bits >> (exp + mant)) & 1;
        return f64::from_bits(sign << 63 | 0x7ff << 52 | payload << (52 - mant));
    }
    match s {
        ScalarType::F16 => f16::from_bits(bits as u16).to_f64(),
        ScalarType::BF16 => bf16::from_bits(bits as u16).to_f64(),
        _ => f32::from_bits(bits as u32) as f64,
    }
}

/// The bits of `v`, a value of the float type `s`; the inverse of [`float_from_bits`]. A NaN
/// keeps its sign, quiet bit and the high bits of its payload (if those are all zero, it
/// becomes the quiet NaN, as the payload must not be).
pub(crate) fn float_to_bits(s: ScalarType, v: f64) -> u64 {
    if let Some(f) = crate::fp8::format_of(s) {
        return f.encode(v) as u64;
    }
    let Some((exp, mant)) = narrow_float_layout(s) else {
        return v.to_bits();
    };
    if v.is_nan() {
        let b = v.to_bits();
        let payload = match (b & ((1u64 << 52) - 1)) >> (52 - mant) {
            0 => 1 << (mant - 1),
            p => p,
        };
        return (b >> 63) << (exp + mant) | ((1u64 << exp) - 1) << mant | payload;
    }
    match s {
        ScalarType::F16 => f16_from_f64(v).to_bits() as u64,
        ScalarType::BF16 => bf16_from_f64(v).to_bits() as u64,
        _ => (v as f32).to_bits() as u64,
    }
}

/// The nearest f64 of an integer (signed `i64`, or the bit pattern of a `u64`), with
/// round-to-odd at 53 bits so that a second rounding to a narrower float (f16, bf16) is
/// correct.
pub(crate) fn int_to_f64_round_to_odd(v: i64, unsigned: bool) -> f64 {
    let (negative, magnitude) = if unsigned {
        (false, v as u64)
    } else {
        (v < 0, v.unsigned_abs())
    };
    let significant = 64 - magnitude.leading_zeros();
    let m = if significant > 53 {
        let shift = significant - 53;
        let kept = magnitude >> shift << shift;
        if kept != magnitude {
            kept | (1 << shift)
        } else {
            kept
        }
    } else {
        magnitude
    };
    // `m` has at most 53 significant bits: the conversion is exact.
    let f = m as f64;
    if negative {
        -f
    } else {
        f
    }
}
