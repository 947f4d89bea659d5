//! The translation of a per-thread kernel into a naga module.
//!
//! Every register is a function variable `r{index}` (each `Set` a store, each use a load),
//! except registers set exactly once, at the top level of the body, unpredicated and before
//! any use: those are plain named expressions. Launch values (thread and program ids, grid
//! size) and scalar parameters are read once at the top of the entry point.

use crate::{erf, BindingLayout, SpirvError, SpirvKernel, SpirvTarget};
use naga::{
    AddressSpace, AtomicFunction, BinaryOperator as Bo, Binding, Block, BuiltIn, EntryPoint, Expression, Function,
    FunctionArgument, GatherMode, GlobalVariable, Handle, LocalVariable, MathFunction as Mf, Module, ResourceBinding,
    Scalar, ScalarKind, Span, Statement, StructMember, Type, TypeInner, UnaryOperator as Uo,
};
use rutile_ir::ir::{AtomicOp, BinaryOp, CmpOp, Literal, UnaryOp};
use rutile_ir::thread::{product_pairs, Expr, Memory, ProductRole, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use rutile_ir::ScalarType;

type H = Handle<Expression>;
type R<T> = Result<T, SpirvError>;
const SPAN: Span = Span::UNDEFINED;

mod atomic;
mod bf16;
mod build;
mod coop;
mod expr;
mod extra_math;
mod f64_rounding;
mod fmod;
mod fold;
mod fp8;
mod launch;
mod memory;
mod packed;
mod print;
mod registers;
mod rounded;
mod scan;
mod setup;
mod statement;
mod sub_word;

use fold::*;
use memory::*;
use scan::*;
use sub_word::sub_word;

/// Translates `kernel` for `target` and validates the result.
pub fn emit(kernel: &ThreadKernel, target: &SpirvTarget) -> Result<SpirvKernel, SpirvError> {
    rutile_ir::thread::verify(kernel).map_err(|message| SpirvError::InvalidKernel {
        kernel: kernel.name.clone(),
        message,
    })?;
    if kernel.cluster > 1 {
        return Err(unsupported(
            kernel,
            "thread-block clusters",
            format!(
                "Vulkan has no clusters, the kernel was lowered for clusters of {} programs",
                kernel.cluster
            ),
        ));
    }
    let scan = Scan::new(kernel, target)?;
    let layout = BindingLayout::new(kernel, &scan.atomic, scan.prints, target);
    let mut cx = Cx::new(kernel, &scan, &layout, target);
    cx.preamble(&scan);
    cx.stmts(&kernel.body)?;
    cx.flush();
    let prints = std::mem::take(&mut cx.prints);
    let entry_point = entry_name(&kernel.name);
    let module = cx.finish(&entry_point);

    let mut caps = naga::valid::Capabilities::empty();
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16, target.shader_f16);
    caps.set(naga::valid::Capabilities::SHADER_INT64, target.shader_i64);
    caps.set(naga::valid::Capabilities::SHADER_INT16, target.shader_i16);
    caps.set(naga::valid::Capabilities::FLOAT64, target.shader_f64);
    caps.set(naga::valid::Capabilities::SUBGROUP, target.subgroups);
    caps.set(naga::valid::Capabilities::COOPERATIVE_MATRIX, scan.coop);
    caps.set(
        naga::valid::Capabilities::SUBGROUP_BARRIER,
        scan.coop && target.subgroups && target.coop_load_fences,
    );
    // `pack2x16float` / `unpack2x16float` of the `f16` buffers held as words (core in
    // Vulkan: GLSL.std.450's PackHalf2x16 and UnpackHalf2x16).
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32, target.packed_f16);
    caps.set(
        naga::valid::Capabilities::IMMEDIATES,
        layout.launch == crate::LaunchPlace::Immediates,
    );
    let info = match naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module) {
        Ok(info) => info,
        Err(e) => {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(": ");
                message.push_str(&s.to_string());
                source = s.source();
            }
            for (_, label) in e.spans() {
                message.push_str(&format!(" [{label}]"));
            }
            return Err(SpirvError::Validation {
                kernel: kernel.name.clone(),
                message,
                module_dump: format!("{module:#?}"),
            });
        }
    };
    let exact_f64 = target.exact_f64 && crate::exact_f64::computes_in_f64(&module);
    Ok(SpirvKernel {
        exact_f64,
        module,
        info,
        entry_point,
        streaming_bindings: crate::hints::streaming_bindings(kernel, &layout),
        coherent_bindings: crate::hints::coherent_bindings(kernel, &layout),
        read_only_bindings: crate::hints::read_only_bindings(kernel, &layout),
        coop_products: crate::hints::has_coop_products(kernel),
        cooperative_matrices: !kernel.coop.is_empty(),
        bindings: layout,
        prints,
    })
}

/// The entry point's name: the kernel's, with characters outside `[A-Za-z0-9_]` replaced,
/// and `k_` in front where it would not be a WGSL identifier (so that the WGSL has the same
/// entry point name as the SPIR-V).
fn entry_name(name: &str) -> String {
    let mut s = sanitize(name);
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_digit())
        || s.starts_with("__")
        || naga::keywords::wgsl::RESERVED.contains(&s.as_str())
    {
        s.insert_str(0, "k_");
    }
    s
}

/// `name` with every character but ASCII letters, digits and `_` as `_`: what WGSL and
/// SPIR-V debug names take.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

/// The error refusing `s` if it is one of the statements the lowering makes only for PTX
/// targets (what it is, and how to lower instead), `None` for every other: NVIDIA's matrix,
/// TMA and bulk-copy instructions, warp specialization, thread-block clusters. Both the
/// module's first walk (`scan`) and the emission ask it, so the two refuse alike.
fn nvidia_only(k: &ThreadKernel, s: &Stmt) -> Option<SpirvError> {
    let (what, detail) = match s {
        Stmt::Mma { .. }
        | Stmt::MmaTf32 { .. }
        | Stmt::LdMatrix { .. }
        | Stmt::AsyncCopy { .. }
        | Stmt::AsyncCommit
        | Stmt::AsyncWait { .. }
        | Stmt::Wgmma { .. }
        | Stmt::FenceProxyAsync
        | Stmt::WgmmaFence
        | Stmt::WgmmaCommit
        | Stmt::WgmmaWait { .. }
        | Stmt::MbarrierInit { .. }
        | Stmt::MbarrierArriveExpectTx { .. }
        | Stmt::MbarrierWait { .. }
        | Stmt::MbarrierInval { .. }
        | Stmt::TmaLoad { .. }
        | Stmt::TmaStore { .. }
        | Stmt::BulkCommit { .. }
        | Stmt::BulkWaitRead { .. } => (
            "NVIDIA's matrix and asynchronous-copy instructions (mma, wgmma, ldmatrix, cp.async, TMA, mbarriers)",
            "lower the kernel for a Vulkan target (`Target::vulkan`), whose `dot` and copies need none of them",
        ),
        Stmt::MbarrierArrive { .. }
        | Stmt::Specialized { .. }
        | Stmt::NamedBarrier { .. }
        | Stmt::Turn { .. }
        | Stmt::SetMaxRegisters { .. } => ("warp specialization", "lower without `warp_specialize` for SPIR-V"),
        Stmt::ClusterStore { .. } | Stmt::ClusterBarrier | Stmt::ClusterArrive | Stmt::ClusterWait => (
            "thread-block clusters",
            "Vulkan has no clusters: launch with a cluster of 1 program",
        ),
        _ => return None,
    };
    Some(unsupported(k, what, detail.into()))
}

fn unsupported(k: &ThreadKernel, what: &'static str, detail: String) -> SpirvError {
    SpirvError::Unsupported {
        kernel: k.name.clone(),
        what,
        detail,
    }
}

fn invalid(k: &ThreadKernel, message: String) -> SpirvError {
    SpirvError::InvalidKernel {
        kernel: k.name.clone(),
        message,
    }
}

fn naga_scalar(t: ScalarType) -> Scalar {
    match t {
        ScalarType::Bool => Scalar::BOOL,
        ScalarType::I32 => Scalar::I32,
        ScalarType::U32 => Scalar::U32,
        ScalarType::I64 => Scalar::I64,
        ScalarType::U64 => Scalar::U64,
        ScalarType::F16 => Scalar::F16,
        ScalarType::F32 => Scalar::F32,
        ScalarType::F64 => Scalar::F64,
        // Held sign- or zero-extended in 32 bits.
        ScalarType::I8 | ScalarType::I16 => Scalar::I32,
        ScalarType::U8 | ScalarType::U16 => Scalar::U32,
        // An f32 holding a bf16 or fp8 value (`bf16.rs`, `fp8.rs`).
        ScalarType::BF16
        | ScalarType::F8E4M3
        | ScalarType::F8E5M2
        | ScalarType::F8E4M3B15
        | ScalarType::F8E4M3Fnuz
        | ScalarType::F8E5M2Fnuz => Scalar::F32,
    }
}

/// Whether registers of `t` are `f32` holding its values, rounded after each op: `bf16` and
/// the fp8 types, which naga lacks.
fn held_in_f32(t: ScalarType) -> bool {
    t == ScalarType::BF16 || t.is_fp8()
}

/// One kernel's translation in progress: the module and entry-point function being built,
/// and what the kernel's registers, buffers and launch values became there. Its methods are
/// in this module's files, one concern each.
struct Cx<'a> {
    k: &'a ThreadKernel,
    module: Module,
    f: Function,
    block: Block,
    emit_start: Option<usize>,
    value_reg: Vec<bool>,
    local: Vec<Option<H>>,
    value: Vec<Option<H>>,
    /// Per cooperative matrix: its function variable, once used.
    coop: Vec<Option<H>>,
    /// Per parameter: its storage buffer (pointers).
    buffers: Vec<Option<Buffer>>,
    /// Per parameter: its value, read at the top (scalars in use).
    param_value: Vec<Option<H>>,
    /// Per shared buffer, its workgroup array and the index there of its first element.
    shared: Vec<(H, u32)>,
    /// The launch block (uniform buffer or immediates).
    launch: H,
    /// Uniform struct member of each scalar parameter.
    member: Vec<u32>,
    local_index: H,
    workgroup_id: H,
    subgroup: Option<(H, H)>,
    thread_id: Option<H>,
    program_id: [Option<H>; 3],
    num_programs: [Option<H>; 3],
    temps: u32,
    /// What a barrier orders: workgroup memory, and in kernels with global atomics storage
    /// buffers too (see [`setup::publishing_atomics`]).
    barrier: naga::Barrier,
    /// Whether 64-bit integers are available (`umulhi` of 32-bit values is then one wide
    /// multiply).
    int64: bool,
    /// Whether f64 is available (`bf16`'s `fma` is then computed there: `bf16.rs`).
    float64: bool,
    /// Whether the words the driver gets mark f64 arithmetic `NoContraction`
    /// (`SpirvTarget::exact_f64`): directed rounding needs each f64 operation rounded once.
    exact_f64: bool,
    /// Both halves of a 32-bit product from one 64-bit multiply (`SpirvTarget::wide_products`).
    wide_products: bool,
    /// 16-bit integers: `f16` pairs of packed words by bit operations (`packed.rs`).
    int16: bool,
    /// Stores of part of a word gather the word from neighbouring lanes (`sub_word.rs`).
    combine_words: bool,
    /// The print buffer (an `array<atomic<u32>>`), where the kernel prints (`print.rs`).
    print: Option<H>,
    /// The print sites emitted so far, in record order.
    prints: Vec<crate::PrintSite>,
    /// A subgroup barrier before every cooperative-matrix load
    /// ([`crate::SpirvTarget::coop_load_fences`]).
    coop_load_fences: bool,
}
