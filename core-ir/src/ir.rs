//! The block IR: a kernel is a list of parameters and a region of instructions in SSA form.
//!
//! Values and instructions live in arenas ([`crate::arena`]); regions (the bodies of `for`,
//! `if` and `while`) hold instruction handles in order and end with a [`Op::Yield`] when they
//! produce values. All broadcasting and type promotion is explicit here: the builder inserts
//! `splat`/`broadcast`/`cast` so that every op sees operands of exactly the types it needs.

use crate::arena::{Arena, Handle};
use crate::types::{ScalarType, Type, MAX_RANK};
use std::fmt;

/// A value of the kernel (an SSA name).
pub type ValueId = Handle<ValueData>;
/// An instruction of the kernel.
pub type InstId = Handle<Inst>;

/// Where the kernel author's code created an instruction (from `#[track_caller]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    /// The source file, as [`std::panic::Location::file`] names it (`<kernel>` or
    /// `<unknown>` where no source location exists).
    pub file: &'static str,
    /// The line in `file`, counted from 1 (0 where no source location exists).
    pub line: u32,
    /// The column in the line, counted from 1 (0 where no source location exists).
    pub column: u32,
}

impl SourceLoc {
    /// The location of the caller of the current `#[track_caller]` function.
    #[track_caller]
    pub fn caller() -> SourceLoc {
        let l = std::panic::Location::caller();
        SourceLoc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A kernel parameter: a pointer to global memory or a scalar.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Param {
    /// The parameter's name: not empty, and unique among the kernel's parameters
    /// ([`Kernel::param`] looks parameters up by it).
    pub name: String,
    /// A scalar type or a pointer type, always of rank 0.
    pub ty: Type,
    /// The value that stands for the parameter in the body.
    pub value: ValueId,
}

/// What defines a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueDef {
    /// The `index`-th kernel parameter.
    Param(u32),
    /// The `index`-th result of an instruction.
    Result {
        /// The instruction, an index into [`Kernel::insts`].
        inst: InstId,
        /// The position of the value in the instruction's [`Inst::results`].
        index: u32,
    },
    /// The `index`-th argument of region `region` of an instruction (loop variables).
    RegionArg {
        /// The instruction that owns the region, an index into [`Kernel::insts`].
        inst: InstId,
        /// The position of the region in the instruction's [`Inst::regions`].
        region: u32,
        /// The position of the value in the region's [`Region::args`].
        index: u32,
    },
}

/// A value: its type and definition.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct ValueData {
    /// The value's type: a scalar, a pointer or a block of either.
    pub ty: Type,
    /// Where the value is defined: a parameter, an instruction's result or a region's
    /// argument.
    pub def: ValueDef,
}

/// An instruction: an op, the values it defines, its nested regions and where it came from.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Inst {
    /// The operation and its operands.
    pub op: Op,
    /// The values the instruction defines, in order, each defined by [`ValueDef::Result`]
    /// of this instruction; `store`, `yield`, `device_assert` and `device_print` define
    /// none.
    pub results: Vec<ValueId>,
    /// The nested regions: the body of `for`, the then and else branches of `if`, the
    /// condition and body of `while`, the combine of `scan`, `reduce` with a combine and
    /// `cluster_reduce` with a combine; empty for every other op.
    pub regions: Vec<Region>,
    /// Where the kernel author's code created the instruction.
    pub loc: SourceLoc,
}

/// A straight-line list of instructions with arguments (loop variables); the last
/// instruction is a [`Op::Yield`] in regions that produce values.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct Region {
    /// The region's arguments, each defined by [`ValueDef::RegionArg`]: a `for` body's
    /// induction variable and carried values, a `while` region's carried values, a combine's
    /// `[a..., b...]`; none for `if` branches and the kernel body.
    pub args: Vec<ValueId>,
    /// The instructions in the order they run, as indices into [`Kernel::insts`].
    pub insts: Vec<InstId>,
}

/// The deepest pipeline a `for` loop may ask for (`Op::For::num_stages`).
pub const MAX_LOOP_STAGES: u32 = 8;

/// How a load uses the caches, as Triton's `cache_modifier`: a hint that never changes
/// what is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CacheModifier {
    /// The device's default policy.
    #[default]
    Default,
    /// The data is read once: cache it with evict-first priority, so that it does not push
    /// out data that will be used again (nor dirty lines that would have to be written
    /// back early). PTX `ld.global.cs`; SPIR-V's `Nontemporal` memory operand on every load
    /// of a buffer that is only loaded this way (naga cannot express it: rutile-spirv adds it
    /// to the SPIR-V 1.4 it hands the driver directly where the device takes that, and
    /// drops it elsewhere). A load that a loop's `num_stages` pipelines (into asynchronous
    /// copies or prefetch registers) drops it too, as Triton's asynchronous copies drop
    /// `.cs`: the layer norm's row walk with an evict-first L2 policy on its copies
    /// (`cp.async ... .L2::cache_hint`) ran 1 to 7 points of the copy ceiling slower on an
    /// H200 (`docs/performance.md`, "What did not help: the row's copies marked read once").
    Streaming,
}

impl CacheModifier {
    /// The name in printed IR (`cs`, as PTX and Triton spell it), `None` for the default.
    pub fn name(self) -> Option<&'static str> {
        match self {
            CacheModifier::Default => None,
            CacheModifier::Streaming => Some("cs"),
        }
    }
}

/// How `dot` multiplies f32 operands, as Triton's `input_precision`.
///
/// f16 and bf16 operands are multiplied exactly whatever the precision (their products are
/// exact in f32, and they use the tensor cores where a target has them); the precision
/// matters for f32 operands only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotPrecision {
    /// Full f32 products: one fused multiply-add per `k` (the CUDA cores).
    #[default]
    Ieee,
    /// Each f32 operand is first rounded to tf32 (a 10-bit mantissa, f32's exponent range;
    /// round to nearest, ties away from zero, as PTX's `cvt.rna.tf32.f32`), so that NVIDIA's
    /// tensor cores can multiply it (`mma.sync.m16n8k8` with tf32 inputs, from sm_80). The
    /// products of tf32 values are exact in f32; only the accumulation order differs between
    /// devices. f32 operands only.
    Tf32,
    /// f32 products to about f32's precision on tensor cores (Triton's `tf32x3`): each
    /// operand split into its tf32 rounding `big` and the tf32 rounding of the rest
    /// `small`, and `a·b` taken as `big_a·small_b + small_a·big_b + big_a·big_b` (three tf32
    /// MMAs; `small_a·small_b`, below 2^-21 of the product, left out), each product within
    /// about 2^-21 of the exact one where tf32's 2^-11. Where no tensor core multiplies tf32
    /// (no `mma.sync`, a tile it cannot take, Vulkan) the `dot` is the IEEE one, which is
    /// more accurate still; so is the interpreter's. An infinite operand on the tensor cores
    /// meets both parts of the other operand, whose signs may differ: its products may be
    /// NaN where the IEEE ones are infinite (Triton's split makes every infinity NaN). f32
    /// operands only.
    Tf32x3,
}

impl DotPrecision {
    /// The name in printed IR (Triton's spelling), `None` for the default.
    pub fn name(self) -> Option<&'static str> {
        match self {
            DotPrecision::Ieee => None,
            DotPrecision::Tf32 => Some("tf32"),
            DotPrecision::Tf32x3 => Some("tf32x3"),
        }
    }
}

/// How `dot` multiplies and adds, beyond its operands: `tl.dot`'s keyword arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotOptions {
    /// How f32 operands are multiplied (`input_precision`).
    pub input_precision: DotPrecision,
    /// For fp8 operands (`max_num_imprecise_acc`): Hopper's fp8 warpgroup MMAs add their
    /// products in an accumulator narrower than f32, so a long K loses the low bits of
    /// each product against a large running sum (7% of an element of positive products
    /// over K = 4000 on an H200). With `Some(n)`, the MMAs of every `n` elements of the
    /// dot's K (rounded up to whole MMAs of 32) start from zero and their sum is added into
    /// the f32 accumulator: the error is then that of `n` products, not of the whole K, at
    /// the cost of a second accumulator's registers and a wait for the MMAs before each
    /// addition. `n` must be at most the dot's K (the block's, as Triton checks; the kernel
    /// does not build otherwise). `None` leaves the whole K to the MMAs (Triton's default
    /// on Hopper). Every other unit, and other operand types, add in f32 already, where
    /// this changes nothing.
    pub max_num_imprecise_acc: Option<u32>,
}

/// `x` rounded to tf32, as PTX's `cvt.rna.tf32.f32`: the 13 low mantissa bits cleared,
/// rounding to nearest with ties away from zero (so a carry may reach the exponent, and
/// past the largest finite value, infinity). Infinities and NaNs stay as they are.
pub fn round_to_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    // f32 is sign and magnitude: adding half of the dropped unit to the magnitude's bits
    // rounds the magnitude half away from zero, whichever the sign.
    f32::from_bits((x.to_bits() + TF32_HALF_ULP) & TF32_MASK)
}

/// Half of tf32's last mantissa unit in f32's bits, and the bits tf32 keeps.
pub(crate) const TF32_HALF_ULP: u32 = 1 << 12;
pub(crate) const TF32_MASK: u32 = !((1 << 13) - 1);

/// A compile-time constant.
#[derive(Clone, Copy, Debug)]
pub enum Literal {
    /// A boolean (`i1`).
    Bool(bool),
    /// Any integer type; the bits are those of the value's type, sign- or zero-extended.
    Int(i64),
    /// Any float type; the value is rounded to nearest (ties to even) in the value's type.
    Float(f64),
}

/// Constants are equal when they are the same constant: floats compare by their bits, so
/// `0.0` and `-0.0` differ and a NaN literal equals itself (which lets kernels holding one
/// be found again in a compile cache).
impl PartialEq for Literal {
    fn eq(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Bool(a), Literal::Bool(b)) => a == b,
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Float(a), Literal::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Literal {}

/// Floats hash by their bits, as they compare.
impl std::hash::Hash for Literal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Literal::Bool(b) => b.hash(state),
            Literal::Int(i) => i.hash(state),
            Literal::Float(x) => x.to_bits().hash(state),
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) if x.is_nan() => write!(f, "nan"),
            Literal::Float(x) if x.is_infinite() => {
                write!(f, "{}inf", if *x < 0.0 { "-" } else { "" })
            }
            Literal::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// Element-wise ops of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Negation of a number (integers wrap: `-MIN` is `MIN`).
    Neg,
    /// Bitwise not for integers, logical not for booleans.
    Not,
    /// Absolute value of a number (signed integers wrap: `abs(MIN)` is `MIN`; unsigned ones
    /// are unchanged).
    Abs,
    /// `e^x` (floats), as `tl.exp`.
    Exp,
    /// `2^x` (floats), as `tl.exp2`.
    Exp2,
    /// Natural logarithm (floats), as `tl.log`.
    Log,
    /// Base-2 logarithm (floats), as `tl.log2`.
    Log2,
    /// Square root (floats), as `tl.sqrt`.
    Sqrt,
    /// `1 / sqrt(x)` (floats), as `tl.rsqrt`.
    Rsqrt,
    /// Sine of an angle in radians (floats), as `tl.sin`.
    Sin,
    /// Cosine of an angle in radians (floats), as `tl.cos`.
    Cos,
    /// Rounds down to an integral value, keeping the float type, as `tl.floor`.
    Floor,
    /// Rounds up to an integral value, keeping the float type, as `tl.ceil`.
    Ceil,
    /// Rounds toward zero to an integral value, keeping the float type, as
    /// `libdevice.trunc`.
    Trunc,
    /// Rounds to the nearest integral value, ties to even, keeping the float type, as
    /// `libdevice.rint` (and `nearbyint`).
    Rint,
    /// The Gauss error function (floats), as `tl.erf`.
    Erf,
    /// `1 / (1 + e^-x)` (floats), as `tl.sigmoid`.
    Sigmoid,
    /// Hyperbolic tangent (floats), as `tl.math.tanh`.
    Tanh,
    /// The number of set bits (integers, of the value's bits whatever its sign), as
    /// `libdevice.popc` and `popcll`.
    Popc,
    /// The number of zero bits above the highest set bit (integers; the type's width for
    /// 0), as `libdevice.clz` and `clzll`.
    Clz,
    /// The bits in reverse order (integers), as `libdevice.brev` and `brevll`.
    Brev,
    /// The position of the lowest set bit, counting from 1 (integers; 0 for 0), as
    /// `libdevice.ffs` and `ffsll`.
    Ffs,
}

/// Element-wise ops of two operands of the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// Addition of numbers (integers wrap).
    Add,
    /// Subtraction of numbers (integers wrap).
    Sub,
    /// Multiplication of numbers (integers wrap).
    Mul,
    /// IEEE division for floats; truncating (C-style) division for integers.
    Div,
    /// Float division within 2 ulp over the whole range, not correctly rounded: PTX
    /// `div.full.f32`, which Triton's `/` compiles to for f32 (`tl.fdiv(x, y,
    /// ieee_rounding=False)`). It needs no slow path for hard cases, so it takes fewer
    /// instructions and registers than `Div`. f64 is divided as `Div`; f16 and bf16 in f32.
    /// Floats only.
    DivFull,
    /// `fmod` for floats; C-style remainder (sign of the dividend) for integers.
    Rem,
    /// Integer division rounding up: `(a + b - 1) / b`, as `triton.cdiv`.
    CeilDiv,
    /// Bitwise and for integers, logical and for booleans.
    And,
    /// Bitwise or for integers, logical or for booleans.
    Or,
    /// Bitwise exclusive or for integers, logical exclusive or for booleans.
    Xor,
    /// Shifts; an amount at or above the width gives 0 (or the sign for `Shr` of signed).
    Shl,
    /// Arithmetic shift for signed integers, logical for unsigned.
    Shr,
    /// IEEE `minimum`/`maximum`: NaN if either operand is NaN (which NaN is open: a backend
    /// may give a canonical one), and -0.0 below +0.0. Integers compare as their type is
    /// signed or unsigned; for booleans it is `and`.
    Min,
    /// The larger operand: as [`BinaryOp::Min`] (NaN if either operand is NaN, +0.0 above
    /// -0.0); for booleans it is `or`.
    Max,
    /// `lhs` raised to the power `rhs` (floats), as C's `pow` (and `tl.math.pow`): a negative
    /// base gives a result only for an integer exponent (negative for odd ones), NaN
    /// otherwise; `pow(x, ±0)` and `pow(1, y)` are 1 even for a NaN operand.
    Pow,
    /// The high half of the double-width product of the operands' bits read as unsigned
    /// integers, as `tl.umulhi`: for 32-bit operands `(a as u64 * b as u64) >> 32`. 32- and
    /// 64-bit integers only (signed ones are read as their unsigned bits).
    UMulHi,
}

/// Float arithmetic whose rounding direction is chosen ([`Op::Rounded`]), as CUDA's
/// libdevice gives it (`add_rd`, `mul_ru`, `div_rz`, `sqrt_rn`, `fma_ru`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoundedOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `1 / a`.
    Rcp,
    /// `sqrt(a)`.
    Sqrt,
    /// `a * b + c`, rounded once.
    Fma,
    /// The operand converted to the result's type: libdevice's `double2float_rd`,
    /// `int2float_ru`, `ll2double_rz`, ... (an integer of 32 or 64 bits or an f64 to f32;
    /// a 64-bit integer to f64), the conversions that can be inexact.
    Convert,
}

/// The direction in which an [`Op::Rounded`] result is rounded to its type: the four
/// rounding modes of IEEE 754 (PTX's `.rn`, `.rz`, `.rm`, `.rp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// To the nearest value, ties to the even one (`_rn`).
    NearestEven,
    /// Toward zero (`_rz`).
    TowardZero,
    /// Toward negative infinity (`_rd`).
    Down,
    /// Toward positive infinity (`_ru`).
    Up,
}

impl RoundedOp {
    /// Every op whose result has its operands' type, in the order of their names' table
    /// ([`RoundedOp::Convert`] comes after them).
    pub const ALL: [RoundedOp; 7] = [
        RoundedOp::Add,
        RoundedOp::Sub,
        RoundedOp::Mul,
        RoundedOp::Div,
        RoundedOp::Rcp,
        RoundedOp::Sqrt,
        RoundedOp::Fma,
    ];

    /// How many operands the op takes.
    pub fn arity(self) -> usize {
        match self {
            RoundedOp::Rcp | RoundedOp::Sqrt | RoundedOp::Convert => 1,
            RoundedOp::Add | RoundedOp::Sub | RoundedOp::Mul | RoundedOp::Div => 2,
            RoundedOp::Fma => 3,
        }
    }

    /// Whether [`RoundedOp::Convert`] takes `from` to `to`: the conversions that can be
    /// inexact, as libdevice has them, and f32 or f64 to f16 or bf16 (Triton's
    /// `fp_downcast_rounding`).
    pub fn converts(from: ScalarType, to: ScalarType) -> bool {
        use ScalarType::*;
        matches!(
            (from, to),
            (I32 | U32 | I64 | U64 | F64, F32) | (I64 | U64, F64) | (F32 | F64, F16 | BF16)
        )
    }

    /// The op's name with its rounding, as libdevice names it (`add_rd`, `fma_rn`, ...).
    pub fn name(self, rounding: Rounding) -> &'static str {
        const NAMES: [[&str; 4]; 8] = [
            ["add_rn", "add_rz", "add_rd", "add_ru"],
            ["sub_rn", "sub_rz", "sub_rd", "sub_ru"],
            ["mul_rn", "mul_rz", "mul_rd", "mul_ru"],
            ["div_rn", "div_rz", "div_rd", "div_ru"],
            ["rcp_rn", "rcp_rz", "rcp_rd", "rcp_ru"],
            ["sqrt_rn", "sqrt_rz", "sqrt_rd", "sqrt_ru"],
            ["fma_rn", "fma_rz", "fma_rd", "fma_ru"],
            ["convert_rn", "convert_rz", "convert_rd", "convert_ru"],
        ];
        NAMES[self as usize][rounding as usize]
    }
}

impl Rounding {
    /// Every rounding direction.
    pub const ALL: [Rounding; 4] = [
        Rounding::NearestEven,
        Rounding::TowardZero,
        Rounding::Down,
        Rounding::Up,
    ];

    /// The suffix of libdevice's names and PTX's modifier without its dot (`rn`, `rz`,
    /// `rd`, `ru`).
    pub fn suffix(self) -> &'static str {
        match self {
            Rounding::NearestEven => "rn",
            Rounding::TowardZero => "rz",
            Rounding::Down => "rd",
            Rounding::Up => "ru",
        }
    }
}

/// Comparisons; results are booleans. Ordered for floats (false when either is NaN) except
/// `Ne`, which is true when either is NaN, as in C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `lhs == rhs`.
    Eq,
    /// `lhs != rhs`.
    Ne,
    /// `lhs < rhs`.
    Lt,
    /// `lhs <= rhs`.
    Le,
    /// `lhs > rhs`.
    Gt,
    /// `lhs >= rhs`.
    Ge,
}

/// Reductions along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum of numbers (integers wrap). The order in which floats are added is not
    /// specified, so a float sum may round differently between devices.
    Sum,
    /// NaN-propagating, as `maximum` (a NaN, not necessarily one of the inputs).
    Max,
    /// NaN-propagating, as `minimum` (a NaN, not necessarily one of the inputs).
    Min,
    /// Index (i32) of the first maximum along the axis; NaN counts as the largest value.
    ArgMax,
    /// Index (i32) of the first minimum along the axis; NaN counts as the smallest value.
    ArgMin,
}

/// Read-modify-write atomics on global memory. Each returns the old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Adds the value (integers wrap), as `tl.atomic_add`.
    Add,
    /// Stores the larger of the old value and the value, as `tl.atomic_max` (floats: NaN if
    /// either is NaN, as [`BinaryOp::Max`]).
    Max,
    /// Stores the smaller of the old value and the value, as `tl.atomic_min` (floats: NaN if
    /// either is NaN, as [`BinaryOp::Min`]).
    Min,
    /// Stores the value, as `tl.atomic_xchg`.
    Xchg,
    /// Bitwise and with the value (integers), as `tl.atomic_and`.
    And,
    /// Bitwise or with the value (integers), as `tl.atomic_or`.
    Or,
    /// Bitwise exclusive or with the value (integers), as `tl.atomic_xor`.
    Xor,
}

/// The memory ordering of an atomic, as the `sem` of `tl.atomic_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemSem {
    /// Atomic, ordering nothing else.
    Relaxed,
    /// Later accesses of the issuing thread stay after it.
    Acquire,
    /// Earlier accesses of every thread of the program stay before it (the lowering puts a
    /// barrier first where a store of the program may be pending).
    Release,
    /// Both: Triton's default.
    #[default]
    AcqRel,
}

/// Which threads an atomic is atomic with, as the `scope` of `tl.atomic_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemScope {
    /// The threads of one program (a CUDA block, a Vulkan workgroup).
    Cta,
    /// Every thread of the device: Triton's default.
    #[default]
    Gpu,
    /// Every thread of the system, host included. Through Vulkan, the device's (naga's
    /// atomics are device-scoped; rutile's buffers are device memory).
    Sys,
}

/// The `sem` and `scope` of an atomic; the default is Triton's, acquire-release at device
/// scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicOrder {
    /// The memory ordering.
    pub sem: MemSem,
    /// The threads it is atomic with.
    pub scope: MemScope,
}

impl AtomicOrder {
    /// `sem` at `scope`.
    pub fn new(sem: MemSem, scope: MemScope) -> AtomicOrder {
        AtomicOrder { sem, scope }
    }
    /// Relaxed at device scope: enough for counters and histograms, whose atomics order
    /// nothing else.
    pub fn relaxed() -> AtomicOrder {
        AtomicOrder::new(MemSem::Relaxed, MemScope::Gpu)
    }
    /// Whether the atomic publishes earlier accesses (release or acquire-release).
    pub fn releases(self) -> bool {
        matches!(self.sem, MemSem::Release | MemSem::AcqRel)
    }
    /// The names as Triton spells them (`"acq_rel"`, `"gpu"`).
    pub fn names(self) -> (&'static str, &'static str) {
        let sem = match self.sem {
            MemSem::Relaxed => "relaxed",
            MemSem::Acquire => "acquire",
            MemSem::Release => "release",
            MemSem::AcqRel => "acq_rel",
        };
        let scope = match self.scope {
            MemScope::Cta => "cta",
            MemScope::Gpu => "gpu",
            MemScope::Sys => "sys",
        };
        (sem, scope)
    }
}

/// The operation of an instruction, with its operands.
#[derive(Clone, Debug, PartialEq, Hash)]
pub enum Op {
    /// The program's index along grid axis 0, 1 or 2 (i32 scalar).
    ProgramId {
        /// The grid axis: 0, 1 or 2.
        axis: u8,
    },
    /// The grid's size along axis 0, 1 or 2 (i32 scalar).
    NumPrograms {
        /// The grid axis: 0, 1 or 2.
        axis: u8,
    },
    /// A constant of the result type (a block constant is the literal in every element).
    Constant {
        /// The constant: [`Literal::Bool`] for `i1`, [`Literal::Int`] for integer types
        /// (within the type's range), [`Literal::Float`] for float types.
        value: Literal,
    },
    /// `[start, start + 1, ..., end - 1]` as an i32 block; `end - start` is a power of two.
    Arange {
        /// The first element.
        start: i32,
        /// One past the last element; greater than `start`.
        end: i32,
    },
    /// A scalar repeated into a block of the result's shape.
    Splat {
        /// The scalar (rank 0), of the result's element type.
        value: ValueId,
    },
    /// A block of the same rank whose size-1 dimensions are repeated to the result's shape.
    Broadcast {
        /// The block, of the result's element type and rank; each of its dimensions is 1 or
        /// the result's.
        value: ValueId,
    },
    /// A size-1 dimension inserted at `axis`.
    ExpandDims {
        /// The scalar or block to extend, of rank below
        /// [`MAX_RANK`].
        value: ValueId,
        /// Where the new dimension goes, `0..=rank` of `value`: dimension `axis` of the
        /// result has size 1, and `value`'s dimensions from `axis` on follow it.
        axis: u8,
    },
    /// The same elements, row-major, in the result's shape.
    Reshape {
        /// The block, of the result's element type and number of elements.
        value: ValueId,
    },
    /// Dimensions reordered: result dimension `i` is input dimension `perm[i]`.
    Permute {
        /// The block to permute.
        value: ValueId,
        /// A permutation of `0..rank` of `value`, as `tl.permute`'s `dims`.
        perm: Vec<u8>,
    },
    /// An element-wise op of one operand; the result has the operand's type.
    Unary {
        /// The operation.
        op: UnaryOp,
        /// The operand: numbers (floats only where [`UnaryOp::float_only`] says so), or
        /// integers or booleans for [`UnaryOp::Not`].
        value: ValueId,
    },
    /// An element-wise op of two operands of one type; the result has that type.
    Binary {
        /// The operation.
        op: BinaryOp,
        /// The left operand: numbers or booleans, as the op allows (not pointers).
        lhs: ValueId,
        /// The right operand, of `lhs`'s type (for shifts: the shift amount).
        rhs: ValueId,
    },
    /// An element-wise comparison of two operands of one type; the result is a boolean (`i1`)
    /// block of their shape.
    Compare {
        /// The comparison.
        op: CmpOp,
        /// The left operand: numbers, booleans or pointers (pointers into one parameter's
        /// buffer, compared by their offsets; pointers into two parameters are refused by the
        /// interpreter and the lowering, since two parameters may be bound to one buffer).
        lhs: ValueId,
        /// The right operand, of `lhs`'s type.
        rhs: ValueId,
    },
    /// `cond ? on_true : on_false`, element-wise (`triton.language.where`).
    Select {
        /// The condition: a boolean (`i1`) block of the operands' shape.
        cond: ValueId,
        /// The element where `cond` holds.
        on_true: ValueId,
        /// The element where `cond` does not hold; of `on_true`'s type.
        on_false: ValueId,
    },
    /// `a * b + c` with a single rounding (floats only).
    Fma {
        /// The first factor.
        a: ValueId,
        /// The second factor, of `a`'s type.
        b: ValueId,
        /// The addend, of `a`'s type.
        c: ValueId,
    },
    /// Four bytes picked from the eight of `x` (bytes 0 to 3, lowest first) and `y` (4 to
    /// 7): byte `n` of the result is byte `(selector >> 4n) & 7` (CUDA's `__byte_perm`,
    /// PTX's `prmt` in its default mode with each nibble's sign-replicating bit clear).
    BytePerm {
        /// The low four bytes: a 32-bit integer (`i32` or `u32`).
        x: ValueId,
        /// The high four bytes, of `x`'s type.
        y: ValueId,
        /// The selector, of `x`'s type: four nibbles, the low three bits of each counting.
        selector: ValueId,
    },
    /// Float arithmetic rounded once, in the chosen direction (libdevice's `add_rd`,
    /// `div_ru`, `fma_rz`, ...): the exact result of `op` on the operands, rounded to their
    /// type as `rounding` says. Plain `add`, `mul` and `fma` may be contracted or computed
    /// otherwise where a backend allows it; these are not.
    Rounded {
        /// The operation.
        op: RoundedOp,
        /// The direction of the rounding.
        rounding: Rounding,
        /// [`RoundedOp::arity`] operands of one float type (f32 or f64) and shape, the
        /// result's; for [`RoundedOp::Convert`], an i32, u32, i64, u64 or f64 block
        /// converted to an f32 result, a 64-bit integer one to f64, or an f32 or f64 one to
        /// f16 or bf16 ([`RoundedOp::converts`]).
        args: Vec<ValueId>,
    },
    /// Numeric conversion to the result's element type: floats round to nearest even, float
    /// to integer truncates toward zero and saturates (NaN gives 0), integers wrap.
    Cast {
        /// The numbers or booleans to convert (not pointers), of the result's shape.
        value: ValueId,
    },
    /// Reinterprets the bits as the result's element type (same width).
    Bitcast {
        /// The numbers or booleans to reinterpret (not pointers), of the result's shape and
        /// element width.
        value: ValueId,
    },
    /// Pointer plus an element offset (not bytes), as Triton's `ptr + offsets`.
    AddPtr {
        /// The pointer or block of pointers; the result has its type.
        ptr: ValueId,
        /// The offset in elements of the pointee type: integers of `ptr`'s shape.
        offset: ValueId,
    },
    /// Reads the elements at `ptr` where `mask` holds; `other` elsewhere (0 when absent).
    Load {
        /// The pointer or block of pointers to read; the result has its shape and its
        /// pointee type.
        ptr: ValueId,
        /// Which elements are read: booleans (`i1`) of `ptr`'s shape, as `tl.load`'s `mask`;
        /// `None` reads every element. Elements whose mask is false are never touched, so
        /// their pointers may point anywhere.
        mask: Option<ValueId>,
        /// The result where `mask` is false, of the result's type, as `tl.load`'s `other`;
        /// `None` gives 0 there.
        other: Option<ValueId>,
        /// How the load uses the caches, as `tl.load`'s `cache_modifier`.
        cache: CacheModifier,
    },
    /// Writes `value` at `ptr` where `mask` holds.
    Store {
        /// The pointer or block of pointers to write.
        ptr: ValueId,
        /// The elements to write: of `ptr`'s shape and pointee type.
        value: ValueId,
        /// Which elements are written: booleans (`i1`) of `ptr`'s shape, as `tl.store`'s
        /// `mask`; `None` writes every element.
        mask: Option<ValueId>,
    },
    /// Reduces along `axis`, removing it from the shape.
    Reduce {
        /// The reduction; [`ReduceOp::ArgMax`] and [`ReduceOp::ArgMin`] give i32 indices,
        /// the others the operand's element type.
        op: ReduceOp,
        /// The block to reduce: numbers, or booleans for every reduction but
        /// [`ReduceOp::Sum`].
        value: ValueId,
        /// The dimension reduced, below `value`'s rank.
        axis: u8,
    },
    /// Matrix product `a @ b + acc` of `[M, K]` and `[K, N]` blocks into an `[M, N]`
    /// accumulator: f16, bf16 or f32 inputs (both of one type) with an f32 accumulator, or
    /// f64 inputs with an f64 accumulator. `precision` says how f32 inputs are multiplied
    /// ([`DotPrecision::Tf32`] for f32 inputs only).
    Dot {
        /// The `[M, K]` left operand.
        a: ValueId,
        /// The `[K, N]` right operand, of `a`'s element type.
        b: ValueId,
        /// The `[M, N]` accumulator the product is added to; the result has its type. Every
        /// one of `M`, `N` and `K` is at least [`MIN_DOT_DIM`](crate::typing::MIN_DOT_DIM).
        acc: ValueId,
        /// How f32 operands are multiplied, as `tl.dot`'s `input_precision`.
        precision: DotPrecision,
        /// fp8 operands: how many elements of K Hopper's fp8 MMAs may add in their own
        /// accumulator (narrower than f32) before the sum is added into the f32 one, as
        /// `tl.dot`'s `max_num_imprecise_acc`; see [`DotOptions`].
        max_num_imprecise_acc: Option<u32>,
    },
    /// Atomic read-modify-write where `mask` holds; returns the old values (0 elsewhere).
    Atomic {
        /// The operation; the bitwise ones need an integer pointee.
        op: AtomicOp,
        /// The pointer or block of pointers to update. The pointee has 32 or 64 bits, or is
        /// f16 for [`AtomicOp::Add`].
        ptr: ValueId,
        /// The operand of the update: of `ptr`'s shape and pointee type.
        value: ValueId,
        /// Which elements are updated: booleans (`i1`) of `ptr`'s shape; `None` updates every
        /// element.
        mask: Option<ValueId>,
        /// The memory ordering and scope.
        order: AtomicOrder,
    },
    /// Compare-and-swap: where `*ptr == cmp`, stores `value`; returns the old values.
    AtomicCas {
        /// The pointer or block of pointers to update; the pointee has 32 or 64 bits.
        ptr: ValueId,
        /// The value each element is compared with (floats bit for bit): of `ptr`'s shape
        /// and pointee type.
        cmp: ValueId,
        /// The value stored where the element equals `cmp`: of `ptr`'s shape and pointee
        /// type.
        value: ValueId,
        /// Which elements take part: booleans (`i1`) of `ptr`'s shape; `None` for every
        /// element.
        mask: Option<ValueId>,
        /// The memory ordering and scope.
        order: AtomicOrder,
    },
    /// `for i in (start..end).step_by(step)` (negative steps count down, stopping before
    /// `end`). `start`, `end` and `step` are scalars of one integer type, which is also the
    /// type of `i`; a zero step is invalid (the interpreter reports it). Region 0 has arguments
    /// `[i, carried...]` and yields the next carried values; the results are the final
    /// carried values.
    For {
        /// The induction variable's first value: an integer scalar.
        start: ValueId,
        /// The bound the induction variable stops before: a scalar of `start`'s type.
        end: ValueId,
        /// What is added to the induction variable each iteration: a nonzero scalar of
        /// `start`'s type.
        step: ValueId,
        /// The carried values' initial values (the results when the loop runs no iteration).
        init: Vec<ValueId>,
        /// How many iterations deep the body's loads are pipelined, as `tl.range`'s
        /// `num_stages`: `None` follows the launch (`dot` operands only, `num_stages` of the
        /// launch), `Some(s)` makes every load of the body that can be an asynchronous
        /// copy one, `s - 1` iterations ahead, on targets that have them (a hint: results
        /// are the same either way, unless an iteration loads what an earlier one stored,
        /// which a loop that asks must not do; `lower::pipeline`).
        num_stages: Option<u32>,
    },
    /// Region 0 (then) or region 1 (else) runs; each yields the results.
    If {
        /// Which region runs: a boolean (`i1`) scalar, true for region 0.
        cond: ValueId,
    },
    /// Region 0 (the condition) has arguments `[carried...]` and yields one boolean scalar;
    /// while it is true, region 1 (the body) runs and yields the next carried values. Region 1
    /// has its own arguments, of the carried types, which take the same values as region 0's
    /// for that iteration. The results are the carried values when the condition fails.
    While {
        /// The carried values' initial values, the arguments of the first condition.
        init: Vec<ValueId>,
    },
    // ---- scans, combine reductions, gather, sort, histogram ----
    /// Inclusive scan of `values` (one or more blocks of one shape, scanned together as
    /// tuples) along `axis`, as Triton's `associative_scan`. Region 0 is the combine: its
    /// arguments are `[a..., b...]` (scalars of the operands' element types, `a` the earlier
    /// part along the scan's direction) and it yields the combined tuple. It may hold only
    /// element-wise ops on scalars and must be associative. Result `k` has operand `k`'s
    /// type; element `i` along the axis is `x[0] ⊕ x[1] ⊕ ... ⊕ x[i]`, or with `reverse`
    /// `x[n-1] ⊕ x[n-2] ⊕ ... ⊕ x[i]` (Triton's flip, scan, flip). How the combines are
    /// grouped is open (devices scan in a tree), so floats may round differently.
    Scan {
        /// The operands: one or more blocks of numbers (not booleans) of one shape.
        values: Vec<ValueId>,
        /// The dimension scanned, below the operands' rank.
        axis: u8,
        /// Whether the scan runs from the last element along the axis to the first.
        reverse: bool,
    },
    /// Reduces `values` along `axis` (removing it) with the combine of region 0, as Triton's
    /// `reduce` with a `combine_fn`; the region is as for [`Op::Scan`]. The result is
    /// `x[0] ⊕ x[1] ⊕ ... ⊕ x[n-1]`, grouped as the device chooses.
    ReduceCombine {
        /// The operands: one or more blocks of numbers (not booleans) of one shape.
        values: Vec<ValueId>,
        /// The dimension reduced, below the operands' rank.
        axis: u8,
    },
    /// `src` picked along `axis` by `index` (an integer block of `src`'s rank, whose other
    /// dimensions equal `src`'s), as `tl.gather`: the result has `index`'s shape and
    /// `src`'s element type, `out[.., i, ..] = src[.., index[.., i, ..], ..]`. An index
    /// outside `[0, src.shape[axis])` is an error in the interpreter and gives 0 on devices.
    Gather {
        /// The block elements are picked from: numbers (not booleans).
        src: ValueId,
        /// Element indices along `axis` of `src`: integers of `src`'s rank, whose dimensions
        /// other than `axis` equal `src`'s.
        index: ValueId,
        /// The dimension along which `index` picks, below `src`'s rank.
        axis: u8,
    },
    /// `value` sorted along `axis`, ascending (descending with `descending`), as `tl.sort`:
    /// a bitonic network of compare-and-swaps. A pair is swapped only when one element is
    /// strictly below the other, so NaNs stay where the network leaves them (the
    /// interpreter runs the same network, so every device agrees with it).
    Sort {
        /// The block to sort: numbers (not booleans).
        value: ValueId,
        /// The dimension sorted along, below `value`'s rank.
        axis: u8,
        /// Whether the order is descending rather than ascending.
        descending: bool,
    },
    /// The number of elements of the 1-D integer block `value` equal to each of
    /// `0..num_bins`, as `tl.histogram`: an i32 block of `num_bins` elements (a power of
    /// two). Values outside `[0, num_bins)` are not counted.
    Histogram {
        /// The values counted: a 1-D block of integers.
        value: ValueId,
        /// The number of bins, and of the result's elements: a power of two.
        num_bins: u32,
    },
    /// Combines the scalar number `value` (`Sum`, `Max` or `Min`) over the programs of this
    /// program's cluster: the consecutive programs along grid axis 0 that a launch groups
    /// with `LaunchConfig::cluster` (CUDA's thread-block clusters, sm_90 on, whose shared
    /// memory is where the values meet). Every program of a cluster must reach it equally
    /// often, as a barrier. Without a cluster (size 1, the default) it is `value`. Values
    /// combine in rank order; float sums may differ in the last place between backends (the
    /// interpreter adds in f64 and rounds once, GPUs add in the value's type).
    ClusterReduce {
        /// The combination: [`ReduceOp::Sum`], [`ReduceOp::Max`] or [`ReduceOp::Min`].
        op: ReduceOp,
        /// This program's contribution: a scalar 32- or 64-bit number; the result has its
        /// type.
        value: ValueId,
    },
    /// Combines the tuple of scalar numbers `values` over the programs of this program's
    /// cluster with the combine of region 0 (as for [`Op::ReduceCombine`]), in one exchange:
    /// every program gets `x_0 ⊕ x_1 ⊕ ... ⊕ x_{n-1}`, the tuples of the programs combined
    /// from rank 0 up, left to right, so every program computes the same result, and the
    /// combine need not be commutative. How programs that split a row agree on several
    /// statistics that depend on each other (the softmax's maximum and its sum relative to
    /// it) without a round trip through the cluster for each. Otherwise as
    /// [`Op::ClusterReduce`].
    ClusterReduceCombine {
        /// This program's tuple: one or more scalar 32- or 64-bit numbers; result `k` has
        /// the type of operand `k`.
        values: Vec<ValueId>,
    },
    // ---- end of scans, combine reductions, gather, sort, histogram ----
    /// Ends a region, giving its values to the enclosing op.
    Yield {
        /// The values the region gives, in order: a loop body's next carried values, an
        /// `if` branch's results, a `while` condition's boolean scalar, a combine's tuple.
        values: Vec<ValueId>,
    },
    /// `tl.device_assert`: every element of `cond` (i1, any shape) must hold, or the
    /// program stops with `message`. Checked where the kernel runs in the interpreter (the
    /// CPU device and the bounds-checked mode); compiled out of GPU code, as Triton does
    /// without its debug flag.
    Assert {
        /// The condition: booleans (`i1`) of any shape.
        cond: ValueId,
        /// The text of the error when an element of `cond` is false, as
        /// `tl.device_assert`'s `msg`.
        message: String,
    },
    /// `tl.device_print`: a line per element of `values` (numbers, all of one shape):
    /// `pid (x, y, z) idx (i, j) prefix: v0, v1`. Printed by the interpreter (the CPU device
    /// and the bounds-checked mode), on CUDA (`vprintf`) and on Vulkan (a print buffer the
    /// runtime reads back).
    Print {
        /// The text before the values on each line, as `tl.device_print`'s `prefix`.
        prefix: String,
        /// The values printed: numbers or booleans (not pointers), all of one shape; each
        /// line shows one element of each.
        values: Vec<ValueId>,
    },
}

impl Op {
    /// The op's name in the printer and in error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::ProgramId { .. } => "program_id",
            Op::NumPrograms { .. } => "num_programs",
            Op::Constant { .. } => "constant",
            Op::Arange { .. } => "arange",
            Op::Splat { .. } => "splat",
            Op::Broadcast { .. } => "broadcast",
            Op::ExpandDims { .. } => "expand_dims",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Unary { op, .. } => op.name(),
            Op::Binary { op, .. } => op.name(),
            Op::Compare { op, .. } => op.name(),
            Op::Select { .. } => "where",
            Op::Fma { .. } => "fma",
            Op::BytePerm { .. } => "byte_perm",
            Op::Rounded { op, rounding, .. } => op.name(*rounding),
            Op::Cast { .. } => "cast",
            Op::Bitcast { .. } => "bitcast",
            Op::AddPtr { .. } => "addptr",
            Op::Load { .. } => "load",
            Op::Store { .. } => "store",
            Op::Reduce { op, .. } => op.name(),
            Op::Dot { .. } => "dot",
            Op::Atomic { op, .. } => op.name(),
            Op::AtomicCas { .. } => "atomic_cas",
            Op::For { .. } => "for",
            Op::If { .. } => "if",
            Op::While { .. } => "while",
            Op::Scan { .. } => "scan",
            Op::ReduceCombine { .. } => "reduce",
            Op::Gather { .. } => "gather",
            Op::Sort { .. } => "sort",
            Op::Histogram { .. } => "histogram",
            Op::ClusterReduce { .. } | Op::ClusterReduceCombine { .. } => "cluster_reduce",
            Op::Yield { .. } => "yield",
            Op::Assert { .. } => "device_assert",
            Op::Print { .. } => "device_print",
        }
    }

    /// The operands, in order (optional ones only when present).
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            Op::ProgramId { .. } | Op::NumPrograms { .. } | Op::Constant { .. } => vec![],
            Op::Arange { .. } => vec![],
            Op::Splat { value }
            | Op::Broadcast { value }
            | Op::ExpandDims { value, .. }
            | Op::Reshape { value }
            | Op::Permute { value, .. }
            | Op::Unary { value, .. }
            | Op::Cast { value }
            | Op::Bitcast { value }
            | Op::Reduce { value, .. } => vec![*value],
            Op::Binary { lhs, rhs, .. } | Op::Compare { lhs, rhs, .. } => vec![*lhs, *rhs],
            Op::Select {
                cond,
                on_true,
                on_false,
            } => vec![*cond, *on_true, *on_false],
            Op::Fma { a, b, c } => vec![*a, *b, *c],
            Op::BytePerm { x, y, selector } => vec![*x, *y, *selector],
            Op::Rounded { args, .. } => args.clone(),
            Op::AddPtr { ptr, offset } => vec![*ptr, *offset],
            Op::Load { ptr, mask, other, .. } => {
                let mut v = vec![*ptr];
                v.extend(mask.iter().chain(other.iter()).copied());
                v
            }
            Op::Store { ptr, value, mask } => {
                let mut v = vec![*ptr, *value];
                v.extend(mask.iter().copied());
                v
            }
            Op::Dot { a, b, acc, .. } => vec![*a, *b, *acc],
            Op::Atomic { ptr, value, mask, .. } => {
                let mut v = vec![*ptr, *value];
                v.extend(mask.iter().copied());
                v
            }
            Op::AtomicCas {
                ptr, cmp, value, mask, ..
            } => {
                let mut v = vec![*ptr, *cmp, *value];
                v.extend(mask.iter().copied());
                v
            }
            Op::For {
                start, end, step, init, ..
            } => {
                let mut v = vec![*start, *end, *step];
                v.extend(init.iter().copied());
                v
            }
            Op::If { cond } => vec![*cond],
            Op::While { init } => init.clone(),
            Op::Scan { values, .. } | Op::ReduceCombine { values, .. } | Op::ClusterReduceCombine { values } => {
                values.clone()
            }
            Op::Gather { src, index, .. } => vec![*src, *index],
            Op::Sort { value, .. } | Op::Histogram { value, .. } | Op::ClusterReduce { value, .. } => vec![*value],
            Op::Yield { values } => values.clone(),
            Op::Assert { cond, .. } => vec![*cond],
            Op::Print { values, .. } => values.clone(),
        }
    }

    /// Whether the op writes memory or has other effects that dead-code elimination must keep.
    pub fn has_side_effects(&self) -> bool {
        matches!(
            self,
            Op::Store { .. }
                | Op::Atomic { .. }
                | Op::AtomicCas { .. }
                | Op::Yield { .. }
                | Op::Assert { .. }
                | Op::Print { .. }
        )
    }
}

impl UnaryOp {
    /// Every unary op, in declaration order (what the backends' op tests sweep).
    pub const ALL: [UnaryOp; 22] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Trunc,
        UnaryOp::Rint,
        UnaryOp::Erf,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Popc,
        UnaryOp::Clz,
        UnaryOp::Brev,
        UnaryOp::Ffs,
    ];

    /// The op's name in printed IR and in error messages (`neg`, `exp`, ...).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Trunc => "trunc",
            UnaryOp::Rint => "rint",
            UnaryOp::Erf => "erf",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Popc => "popc",
            UnaryOp::Clz => "clz",
            UnaryOp::Brev => "brev",
            UnaryOp::Ffs => "ffs",
        }
    }
    /// Whether the op is defined for floats only (transcendental and rounding functions).
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs) && !self.bits_only()
    }
    /// Whether the op is defined on the bits of integers only (counts and reversals).
    pub fn bits_only(self) -> bool {
        matches!(self, UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs)
    }
}

impl BinaryOp {
    /// Every binary op, in declaration order (what the backends' op tests sweep).
    pub const ALL: [BinaryOp; 16] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::DivFull,
        BinaryOp::Rem,
        BinaryOp::CeilDiv,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::Pow,
        BinaryOp::UMulHi,
    ];

    /// The op's name in printed IR and in error messages (`add`, `cdiv`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::DivFull => "div_full",
            BinaryOp::Rem => "rem",
            BinaryOp::CeilDiv => "cdiv",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
            BinaryOp::Min => "minimum",
            BinaryOp::Max => "maximum",
            BinaryOp::Pow => "pow",
            BinaryOp::UMulHi => "umulhi",
        }
    }
    /// Whether the op is defined for floats only.
    pub fn float_only(self) -> bool {
        matches!(self, BinaryOp::DivFull | BinaryOp::Pow)
    }
    /// Whether the op is defined for integers and booleans only.
    pub fn integral_only(self) -> bool {
        matches!(
            self,
            BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Shl
                | BinaryOp::Shr
                | BinaryOp::CeilDiv
                | BinaryOp::UMulHi
        )
    }
}

impl CmpOp {
    /// Every comparison, in declaration order.
    pub const ALL: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];

    /// The op's name in printed IR and in error messages (`eq`, `lt`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }
}

impl ReduceOp {
    /// The reduction's name in printed IR and in error messages (`sum`, `argmax`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }
}

impl AtomicOp {
    /// The op's name in printed IR and in error messages (`atomic_add`, ...).
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "atomic_add",
            AtomicOp::Max => "atomic_max",
            AtomicOp::Min => "atomic_min",
            AtomicOp::Xchg => "atomic_xchg",
            AtomicOp::And => "atomic_and",
            AtomicOp::Or => "atomic_or",
            AtomicOp::Xor => "atomic_xor",
        }
    }
}

/// A kernel: its name, parameters and body, with every value and instruction in arenas.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Kernel {
    /// The kernel's name, as printed; the backends name the entry point after it.
    pub name: String,
    /// The parameters, in the order of the launch's arguments.
    pub params: Vec<Param>,
    /// Every value of the kernel (parameters, results, region arguments), indexed by
    /// [`ValueId`]; the printer numbers a value `%i` by its index.
    pub values: Arena<ValueData>,
    /// Every instruction of the kernel, those of nested regions included, indexed by
    /// [`InstId`]; the regions list them in order.
    pub insts: Arena<Inst>,
    /// The top-level region: no arguments, and no `yield`.
    pub body: Region,
    /// The author's promises about integer values (`multiple_of`, `max_contiguous`,
    /// `max_constancy`), in the order made: facts the axis analysis takes, which the
    /// interpreter checks.
    pub hints: Vec<AxisHint>,
}

/// A promise about the runs of an integer value, as Triton's `tl.multiple_of`,
/// `tl.max_contiguous` and `tl.max_constancy` make it. A value's elements form, along each
/// dimension, runs of consecutive values and runs of equal ones; the axis analysis
/// (`analysis::axis`) tracks how long they are and what divides their first elements, and
/// loads and stores vectorize by it. A hint raises what the analysis knows to what the
/// author promises; the interpreter checks the promise wherever the value is computed (a
/// broken one is a fault naming the hint), the compiled kernels trust it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AxisHint {
    /// The value the promise is about (an integer scalar or block).
    pub value: ValueId,
    /// What is promised.
    pub kind: HintKind,
    /// Per dimension, the promised number (slot 0 for a scalar; 1 where nothing is
    /// promised).
    pub per_dim: [u64; MAX_RANK],
    /// The author's call.
    pub loc: SourceLoc,
}

/// What an [`AxisHint`] promises, per dimension, with its number `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintKind {
    /// The first element of every run of consecutive values is a multiple of `n`
    /// (every element, where the runs are single elements): `tl.multiple_of`.
    MultipleOf,
    /// The elements come in runs of `n` consecutive values, each run starting at an index
    /// that is a multiple of `n` (a power of two): `tl.max_contiguous`.
    MaxContiguous,
    /// The elements come in runs of `n` equal values, each run starting at an index that
    /// is a multiple of `n` (a power of two): `tl.max_constancy`.
    MaxConstancy,
}

impl HintKind {
    /// The hint's name, as Triton spells it (`multiple_of`, ...).
    pub fn name(self) -> &'static str {
        match self {
            HintKind::MultipleOf => "multiple_of",
            HintKind::MaxContiguous => "max_contiguous",
            HintKind::MaxConstancy => "max_constancy",
        }
    }
}

impl Kernel {
    /// The type of a value.
    pub fn ty(&self, value: ValueId) -> Type {
        self.values[value].ty
    }
    /// The element scalar type of a value (the pointee for pointers).
    pub fn elem_scalar(&self, value: ValueId) -> ScalarType {
        match self.values[value].ty.elem {
            crate::types::Elem::Scalar(s) | crate::types::Elem::Ptr(s) => s,
        }
    }
    /// Looks a parameter up by name.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}
