//! The types of block-IR values: scalars, pointers to scalars in global memory, and blocks
//! (tensors) of static shape with rank 0 to 3 and power-of-two dimensions.
//!
//! A rank-0 block is a scalar, as in Triton: `program_id` is an `i32` of shape `[]`, and the
//! same ops apply to scalars and blocks.

use std::fmt;

/// A scalar element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    /// Booleans (`i1`): results of comparisons, masks.
    Bool,
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// fp8 E4M3 (OCP's `e4m3fn`, Triton's `float8e4nv`): 4 exponent bits (bias 7), 3 mantissa
    /// bits, no infinities, largest finite 448; results saturate ([`crate::fp8`]).
    F8E4M3,
    /// fp8 E5M2 (Triton's `float8e5`): f16's exponent (bias 15) with 2 mantissa bits, largest
    /// finite 57344; finite results beyond it saturate, infinities stay ([`crate::fp8`]).
    F8E5M2,
    /// Triton's `float8e4b15`: E4M3 with f16's bias 15 (the top byte of an f16 whose top
    /// exponent bit is clear, its mantissa cut to 3 bits), largest 1.875, every pattern
    /// finite: results saturate, NaN becomes +0 ([`crate::fp8`]).
    F8E4M3B15,
    /// `e4m3fnuz` (Triton's `float8e4b8`, AMD's fp8 on MI300): bias 8, 3 mantissa bits,
    /// largest 240, one NaN (`0x80`), no infinities, no negative zero ([`crate::fp8`]).
    F8E4M3Fnuz,
    /// `e5m2fnuz` (Triton's `float8e5b16`, AMD's bf8 on MI300): bias 16, 2 mantissa bits,
    /// largest 57344, one NaN (`0x80`), no infinities, no negative zero ([`crate::fp8`]).
    F8E5M2Fnuz,
    /// IEEE 754 half precision float (binary16).
    F16,
    /// bfloat16: f32's exponent range with an 8-bit significand (7 bits stored).
    BF16,
    /// IEEE 754 single precision float (binary32).
    F32,
    /// IEEE 754 double precision float (binary64).
    F64,
}

impl ScalarType {
    /// Every scalar type, in declaration order.
    pub const ALL: [ScalarType; 18] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F8E4M3,
        ScalarType::F8E5M2,
        ScalarType::F8E4M3B15,
        ScalarType::F8E4M3Fnuz,
        ScalarType::F8E5M2Fnuz,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    /// Width in bits (1 for booleans).
    pub const fn bits(self) -> u32 {
        match self {
            ScalarType::Bool => 1,
            ScalarType::I8
            | ScalarType::U8
            | ScalarType::F8E4M3
            | ScalarType::F8E5M2
            | ScalarType::F8E4M3B15
            | ScalarType::F8E4M3Fnuz
            | ScalarType::F8E5M2Fnuz => 8,
            ScalarType::I16 | ScalarType::U16 | ScalarType::F16 | ScalarType::BF16 => 16,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 32,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 64,
        }
    }
    /// Size in memory, in bytes (booleans are stored as one byte).
    pub const fn size_bytes(self) -> usize {
        match self {
            ScalarType::Bool => 1,
            _ => (self.bits() / 8) as usize,
        }
    }
    /// Floats: the fp8 types, f16, bf16, f32 and f64.
    pub const fn is_float(self) -> bool {
        self.is_fp8()
            || matches!(
                self,
                ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
            )
    }
    /// The fp8 types: storage and matrix-operand formats that compute in f32, each result
    /// rounded once ([`crate::fp8`]).
    pub const fn is_fp8(self) -> bool {
        crate::fp8::format_of(self).is_some()
    }
    /// The two OCP fp8 formats, E4M3 and E5M2: those NVIDIA's conversions (`cvt` from
    /// sm_89) and fp8 MMAs (`wgmma`) take. The others convert by integer instructions and
    /// multiply as f16, which holds each of their values exactly.
    pub const fn is_ocp_fp8(self) -> bool {
        matches!(self, ScalarType::F8E4M3 | ScalarType::F8E5M2)
    }
    /// Signed or unsigned integers, not booleans.
    pub const fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }
    /// Signed integers: i8 to i64.
    pub const fn is_signed_int(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64
        )
    }
    /// Unsigned integers: u8 to u64.
    pub const fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64
        )
    }
    /// The boolean type, `i1`.
    pub const fn is_bool(self) -> bool {
        matches!(self, ScalarType::Bool)
    }
    /// Integers and booleans: the types of bitwise ops.
    pub const fn is_integral(self) -> bool {
        self.is_int() || self.is_bool()
    }
    /// `v` rounded once to this float type (to nearest, ties to even), as the interpreter
    /// rounds every float result; other types leave `v` as it is. (`half`'s own f64
    /// conversions drop the low mantissa bits first, which can round twice.)
    pub fn round(self, v: f64) -> f64 {
        crate::interp::tensor::round_float(self, v)
    }
    /// Whether a backend without storage types narrower than 32 bits but `f16` (SPIR-V
    /// through naga) holds this type in words: `bf16`, the fp8 types and 8- and 16-bit integers, packed in
    /// storage buffers, widened in shared memory
    /// ([`crate::target::Target::narrow_shared_in_words`]).
    pub const fn held_in_words(self) -> bool {
        self.size_bytes() < 4 && !matches!(self, ScalarType::F16 | ScalarType::Bool)
    }
    /// The name used by the printer and in error messages.
    pub const fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "i1",
            ScalarType::I8 => "i8",
            ScalarType::I16 => "i16",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::U8 => "u8",
            ScalarType::U16 => "u16",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::F8E4M3 => "f8e4m3",
            ScalarType::F8E5M2 => "f8e5m2",
            ScalarType::F8E4M3B15 => "f8e4m3b15",
            ScalarType::F8E4M3Fnuz => "f8e4m3fnuz",
            ScalarType::F8E5M2Fnuz => "f8e5m2fnuz",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }
    /// Parses a name as printed by [`ScalarType::name`] (`bool` is accepted for `i1`).
    pub const fn from_name(name: &str) -> Option<ScalarType> {
        Some(match name.as_bytes() {
            b"i1" | b"bool" => ScalarType::Bool,
            b"i8" => ScalarType::I8,
            b"i16" => ScalarType::I16,
            b"i32" => ScalarType::I32,
            b"i64" => ScalarType::I64,
            b"u8" => ScalarType::U8,
            b"u16" => ScalarType::U16,
            b"u32" => ScalarType::U32,
            b"u64" => ScalarType::U64,
            b"f8e4m3" => ScalarType::F8E4M3,
            b"f8e5m2" => ScalarType::F8E5M2,
            b"f8e4m3b15" => ScalarType::F8E4M3B15,
            b"f8e4m3fnuz" => ScalarType::F8E4M3Fnuz,
            b"f8e5m2fnuz" => ScalarType::F8E5M2Fnuz,
            b"f16" => ScalarType::F16,
            b"bf16" => ScalarType::BF16,
            b"f32" => ScalarType::F32,
            b"f64" => ScalarType::F64,
            _ => return None,
        })
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element of a block: a scalar, or a pointer to a scalar in global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// A value of the scalar type.
    Scalar(ScalarType),
    /// A pointer to an element of the scalar type in global memory (printed `*f32`);
    /// offsets added to it count elements of that type.
    Ptr(ScalarType),
}

impl Elem {
    /// The scalar type, `None` for pointers.
    pub fn scalar(self) -> Option<ScalarType> {
        match self {
            Elem::Scalar(s) => Some(s),
            Elem::Ptr(_) => None,
        }
    }
    /// Whether the element is a pointer.
    pub fn is_ptr(self) -> bool {
        matches!(self, Elem::Ptr(_))
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Scalar(s) => write!(f, "{s}"),
            Elem::Ptr(s) => write!(f, "*{s}"),
        }
    }
}

/// The largest rank of a block.
pub const MAX_RANK: usize = 3;

/// A static block shape of rank 0 (scalar) to [`MAX_RANK`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: [u32; MAX_RANK],
    rank: u8,
}

impl Shape {
    /// The shape of a scalar.
    pub const SCALAR: Shape = Shape {
        dims: [0; MAX_RANK],
        rank: 0,
    };

    /// A shape from its dimensions, or `None` when the rank is above [`MAX_RANK`].
    /// (Power-of-two sizes are checked by the ops that create blocks, where the error can
    /// name the op.)
    pub fn new(dims: &[u32]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut shape = Shape {
            dims: [0; MAX_RANK],
            rank: dims.len() as u8,
        };
        shape.dims[..dims.len()].copy_from_slice(dims);
        Some(shape)
    }
    /// The dimensions, outermost first (empty for a scalar).
    pub fn dims(&self) -> &[u32] {
        &self.dims[..self.rank as usize]
    }
    /// The number of dimensions, 0 to [`MAX_RANK`].
    pub fn rank(&self) -> usize {
        self.rank as usize
    }
    /// Whether the shape is that of a scalar (rank 0).
    pub fn is_scalar(&self) -> bool {
        self.rank == 0
    }
    /// Number of elements (1 for a scalar), saturating at `usize::MAX`: three `u32`
    /// dimensions can overflow it, and blocks that large are rejected by
    /// [`crate::typing::check_block_shape`], which needs their size to say so.
    pub fn numel(&self) -> usize {
        self.dims().iter().fold(1usize, |n, &d| n.saturating_mul(d as usize))
    }
    /// Whether every dimension is a power of two (blocks must be).
    pub fn is_pow2(&self) -> bool {
        self.dims().iter().all(|d| d.is_power_of_two())
    }
    /// Row-major strides, in elements.
    pub fn strides(&self) -> [usize; MAX_RANK] {
        let mut strides = [0; MAX_RANK];
        let mut s = 1;
        for i in (0..self.rank()).rev() {
            strides[i] = s;
            s *= self.dims[i] as usize;
        }
        strides
    }
    /// The numpy broadcast of two shapes, or `None` when they are incompatible.
    pub fn broadcast(a: Shape, b: Shape) -> Option<Shape> {
        let rank = a.rank().max(b.rank());
        let mut dims = [0u32; MAX_RANK];
        for i in 0..rank {
            // Align from the right, as numpy does.
            let da = if i + a.rank() >= rank {
                a.dims[i + a.rank() - rank]
            } else {
                1
            };
            let db = if i + b.rank() >= rank {
                b.dims[i + b.rank() - rank]
            } else {
                1
            };
            dims[i] = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            };
        }
        Shape::new(&dims[..rank])
    }
    /// The shape with `axis` removed (the result of a reduction), or `None` when `axis` is
    /// not below the rank.
    pub fn remove_axis(&self, axis: usize) -> Option<Shape> {
        if axis >= self.rank() {
            return None;
        }
        let mut dims: Vec<u32> = self.dims().to_vec();
        dims.remove(axis);
        Shape::new(&dims)
    }
    /// The shape with a 1 inserted at `axis` (`0..=rank`), or `None` when `axis` is above
    /// the rank or the rank would exceed [`MAX_RANK`].
    pub fn insert_axis(&self, axis: usize) -> Option<Shape> {
        if axis > self.rank() {
            return None;
        }
        let mut dims: Vec<u32> = self.dims().to_vec();
        dims.insert(axis, 1);
        Shape::new(&dims)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// The type of a value: an element type and a shape (rank 0 for scalars).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Type {
    /// The element type: a scalar or a pointer.
    pub elem: Elem,
    /// The shape; [`Shape::SCALAR`] for scalars and pointers that are not blocks.
    pub shape: Shape,
}

impl Type {
    /// A scalar of type `s` (rank 0).
    pub const fn scalar(s: ScalarType) -> Type {
        Type {
            elem: Elem::Scalar(s),
            shape: Shape::SCALAR,
        }
    }
    /// A single pointer (rank 0) to elements of type `s`.
    pub const fn ptr(s: ScalarType) -> Type {
        Type {
            elem: Elem::Ptr(s),
            shape: Shape::SCALAR,
        }
    }
    /// A block of `elem` of shape `shape` (a scalar when `shape` has rank 0).
    pub const fn block(elem: Elem, shape: Shape) -> Type {
        Type { elem, shape }
    }
    /// The same element type with another shape.
    pub const fn with_shape(self, shape: Shape) -> Type {
        Type { elem: self.elem, shape }
    }
    /// The same shape with another element type.
    pub const fn with_elem(self, elem: Elem) -> Type {
        Type {
            elem,
            shape: self.shape,
        }
    }
    /// Whether the type has rank 0 (a scalar or a single pointer).
    pub fn is_scalar(&self) -> bool {
        self.shape.is_scalar()
    }
    /// The scalar element type, `None` for pointers.
    pub fn scalar_type(&self) -> Option<ScalarType> {
        self.elem.scalar()
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shape.is_scalar() {
            write!(f, "{}", self.elem)
        } else {
            write!(f, "<")?;
            for d in self.shape.dims() {
                write!(f, "{d}x")?;
            }
            write!(f, "{}>", self.elem)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_axis_checks_the_axis_and_the_rank() {
        let s = Shape::new(&[4, 8]).unwrap();
        assert_eq!(s.insert_axis(0), Shape::new(&[1, 4, 8]));
        assert_eq!(s.insert_axis(1), Shape::new(&[4, 1, 8]));
        assert_eq!(s.insert_axis(2), Shape::new(&[4, 8, 1]));
        assert_eq!(s.insert_axis(3), None);
        assert_eq!(s.insert_axis(usize::MAX), None);
        assert_eq!(Shape::new(&[2, 2, 2]).unwrap().insert_axis(0), None);
        assert_eq!(Shape::SCALAR.insert_axis(0), Shape::new(&[1]));
        assert_eq!(Shape::SCALAR.insert_axis(1), None);
    }

    #[test]
    fn remove_axis_checks_the_axis() {
        let s = Shape::new(&[2, 4, 8]).unwrap();
        assert_eq!(s.remove_axis(0), Shape::new(&[4, 8]));
        assert_eq!(s.remove_axis(1), Shape::new(&[2, 8]));
        assert_eq!(s.remove_axis(2), Shape::new(&[2, 4]));
        assert_eq!(s.remove_axis(3), None);
        assert_eq!(Shape::SCALAR.remove_axis(0), None);
        assert_eq!(Shape::new(&[16]).unwrap().remove_axis(0), Some(Shape::SCALAR));
    }
}
