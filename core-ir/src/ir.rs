//! The block IR: a kernel is a list of parameters and a region of instructions in SSA form.
//!
//! Values and instructions live in arenas ([`crate::arena`]); regions (the bodies of `for`,
//! `if` and `while`) hold instruction handles in order and end with a [`Op::Yield`] when they
//! produce values. All broadcasting and type promotion is explicit here: the builder inserts
//! `splat`/`broadcast`/`cast` so that every op sees operands of exactly the types it needs.

use crate::arena::{Arena, Handle};
use crate::types::{ScalarType, Type};
use std::fmt;

/// A value of the kernel (an SSA name).
pub type ValueId = Handle<ValueData>;
/// An instruction of the kernel.
pub type InstId = Handle<Inst>;

/// Where the kernel author's code created an instruction (from `#[track_caller]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    pub file: &'static str,
    pub line: u32,
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
    Result { inst: InstId, index: u32 },
    /// The `index`-th argument of region `region` of an instruction (loop variables).
    RegionArg { inst: InstId, region: u32, index: u32 },
}

/// A value: its type and definition.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

/// An instruction: an op, the values it defines, its nested regions and where it came from.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Inst {
    pub op: Op,
    pub results: Vec<ValueId>,
    pub regions: Vec<Region>,
    pub loc: SourceLoc,
}

/// A straight-line list of instructions with arguments (loop variables); the last
/// instruction is a [`Op::Yield`] in regions that produce values.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct Region {
    pub args: Vec<ValueId>,
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
}

impl DotPrecision {
    /// The name in printed IR (Triton's spelling), `None` for the default.
    pub fn name(self) -> Option<&'static str> {
        match self {
            DotPrecision::Ieee => None,
            DotPrecision::Tf32 => Some("tf32"),
        }
    }
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
    Bool(bool),
    /// Any integer type; the bits are those of the value's type, sign- or zero-extended.
    Int(i64),
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
    Neg,
    /// Bitwise not for integers, logical not for booleans.
    Not,
    Abs,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Floor,
    Ceil,
    Erf,
    Sigmoid,
    /// Hyperbolic tangent (floats), as `tl.math.tanh`.
    Tanh,
}

/// Element-wise ops of two operands of the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
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
    And,
    Or,
    Xor,
    /// Shifts; an amount at or above the width gives 0 (or the sign for `Shr` of signed).
    Shl,
    /// Arithmetic shift for signed integers, logical for unsigned.
    Shr,
    /// IEEE `minimum`/`maximum`: NaN if either operand is NaN (which NaN is open: a backend
    /// may give a canonical one), and -0.0 below +0.0.
    Min,
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

/// Comparisons; results are booleans. Ordered for floats (false when either is NaN) except
/// `Ne`, which is true when either is NaN, as in C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// NaN-propagating, as `maximum` (a NaN, not necessarily one of the inputs).
    Max,
    Min,
    /// Index (i32) of the first maximum along the axis; NaN counts as the largest value.
    ArgMax,
    /// Index (i32) of the first minimum along the axis; NaN counts as the smallest value.
    ArgMin,
}

/// Read-modify-write atomics on global memory. Each returns the old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    Xchg,
    And,
    Or,
    Xor,
}

/// The operation of an instruction, with its operands.
#[derive(Clone, Debug, PartialEq, Hash)]
pub enum Op {
    /// The program's index along grid axis 0, 1 or 2 (i32 scalar).
    ProgramId {
        axis: u8,
    },
    /// The grid's size along axis 0, 1 or 2 (i32 scalar).
    NumPrograms {
        axis: u8,
    },
    /// A constant of the result type (a block constant is the literal in every element).
    Constant {
        value: Literal,
    },
    /// `[start, start + 1, ..., end - 1]` as an i32 block; `end - start` is a power of two.
    Arange {
        start: i32,
        end: i32,
    },
    /// A scalar repeated into a block of the result's shape.
    Splat {
        value: ValueId,
    },
    /// A block of the same rank whose size-1 dimensions are repeated to the result's shape.
    Broadcast {
        value: ValueId,
    },
    /// A size-1 dimension inserted at `axis`.
    ExpandDims {
        value: ValueId,
        axis: u8,
    },
    /// The same elements, row-major, in the result's shape.
    Reshape {
        value: ValueId,
    },
    /// Dimensions reordered: result dimension `i` is input dimension `perm[i]`.
    Permute {
        value: ValueId,
        perm: Vec<u8>,
    },
    Unary {
        op: UnaryOp,
        value: ValueId,
    },
    Binary {
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    Compare {
        op: CmpOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    /// `cond ? on_true : on_false`, element-wise (`triton.language.where`).
    Select {
        cond: ValueId,
        on_true: ValueId,
        on_false: ValueId,
    },
    /// `a * b + c` with a single rounding (floats only).
    Fma {
        a: ValueId,
        b: ValueId,
        c: ValueId,
    },
    /// Numeric conversion to the result's element type: floats round to nearest even, float
    /// to integer truncates toward zero and saturates (NaN gives 0), integers wrap.
    Cast {
        value: ValueId,
    },
    /// Reinterprets the bits as the result's element type (same width).
    Bitcast {
        value: ValueId,
    },
    /// Pointer plus an element offset (not bytes), as Triton's `ptr + offsets`.
    AddPtr {
        ptr: ValueId,
        offset: ValueId,
    },
    /// Reads the elements at `ptr` where `mask` holds; `other` elsewhere (0 when absent).
    Load {
        ptr: ValueId,
        mask: Option<ValueId>,
        other: Option<ValueId>,
        cache: CacheModifier,
    },
    /// Writes `value` at `ptr` where `mask` holds.
    Store {
        ptr: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
    },
    /// Reduces along `axis`, removing it from the shape.
    Reduce {
        op: ReduceOp,
        value: ValueId,
        axis: u8,
    },
    /// Matrix product `a @ b + acc` of `[M, K]` and `[K, N]` blocks into an `[M, N]`
    /// accumulator: f16, bf16 or f32 inputs (both of one type) with an f32 accumulator, or
    /// f64 inputs with an f64 accumulator. `precision` says how f32 inputs are multiplied
    /// ([`DotPrecision::Tf32`] for f32 inputs only).
    Dot {
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        precision: DotPrecision,
    },
    /// Atomic read-modify-write where `mask` holds; returns the old values (0 elsewhere).
    Atomic {
        op: AtomicOp,
        ptr: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
    },
    /// Compare-and-swap: where `*ptr == cmp`, stores `value`; returns the old values.
    AtomicCas {
        ptr: ValueId,
        cmp: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
    },
    /// `for i in (start..end).step_by(step)` (negative steps count down, stopping before
    /// `end`). `start`, `end` and `step` are scalars of one integer type, which is also the
    /// type of `i`; a zero step is invalid (the interpreter reports it). Region 0 has arguments
    /// `[i, carried...]` and yields the next carried values; the results are the final
    /// carried values.
    For {
        start: ValueId,
        end: ValueId,
        step: ValueId,
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
        cond: ValueId,
    },
    /// Region 0 (the condition) has arguments `[carried...]` and yields one boolean scalar;
    /// while it is true, region 1 (the body) runs and yields the next carried values. Region 1
    /// has its own arguments, of the carried types, which take the same values as region 0's
    /// for that iteration. The results are the carried values when the condition fails.
    While {
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
        values: Vec<ValueId>,
        axis: u8,
        reverse: bool,
    },
    /// Reduces `values` along `axis` (removing it) with the combine of region 0, as Triton's
    /// `reduce` with a `combine_fn`; the region is as for [`Op::Scan`]. The result is
    /// `x[0] ⊕ x[1] ⊕ ... ⊕ x[n-1]`, grouped as the device chooses.
    ReduceCombine {
        values: Vec<ValueId>,
        axis: u8,
    },
    /// `src` picked along `axis` by `index` (an integer block of `src`'s rank, whose other
    /// dimensions equal `src`'s), as `tl.gather`: the result has `index`'s shape and
    /// `src`'s element type, `out[.., i, ..] = src[.., index[.., i, ..], ..]`. An index
    /// outside `[0, src.shape[axis])` is an error in the interpreter and gives 0 on devices.
    Gather {
        src: ValueId,
        index: ValueId,
        axis: u8,
    },
    /// `value` sorted along `axis`, ascending (descending with `descending`), as `tl.sort`:
    /// a bitonic network of compare-and-swaps. A pair is swapped only when one element is
    /// strictly below the other, so NaNs stay where the network leaves them (the
    /// interpreter runs the same network, so every device agrees with it).
    Sort {
        value: ValueId,
        axis: u8,
        descending: bool,
    },
    /// The number of elements of the 1-D integer block `value` equal to each of
    /// `0..num_bins`, as `tl.histogram`: an i32 block of `num_bins` elements (a power of
    /// two). Values outside `[0, num_bins)` are not counted.
    Histogram {
        value: ValueId,
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
        op: ReduceOp,
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
        values: Vec<ValueId>,
    },
    // ---- end of scans, combine reductions, gather, sort, histogram ----
    /// Ends a region, giving its values to the enclosing op.
    Yield {
        values: Vec<ValueId>,
    },
    /// `tl.device_assert`: every element of `cond` (i1, any shape) must hold, or the
    /// program stops with `message`. Checked where the kernel runs in the interpreter (the
    /// CPU device and the bounds-checked mode); compiled out of GPU code, as Triton does
    /// without its debug flag.
    Assert {
        cond: ValueId,
        message: String,
    },
    /// `tl.device_print`: a line per element of `values` (numbers, all of one shape):
    /// `pid (x, y, z) idx (i, j) prefix: v0, v1`. Printed by the interpreter (the CPU device
    /// and the bounds-checked mode), on CUDA (`vprintf`) and on Vulkan (a print buffer the
    /// runtime reads back).
    Print {
        prefix: String,
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
            Op::AtomicCas { ptr, cmp, value, mask } => {
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
            UnaryOp::Erf => "erf",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
        }
    }
    /// Whether the op is defined for floats only (transcendental and rounding functions).
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs)
    }
}

impl BinaryOp {
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
    pub name: String,
    pub params: Vec<Param>,
    pub values: Arena<ValueData>,
    pub insts: Arena<Inst>,
    pub body: Region,
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
