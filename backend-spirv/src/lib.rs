//! SPIR-V and WGSL generation from rutile's per-thread IR, through a [`naga::Module`].
//!
//! ```text
//! ThreadKernel ──emit──▶ SpirvKernel { naga::Module, ModuleInfo, BindingLayout }
//!                              ├─ spirv_words()        ─▶ SPIR-V 1.3 for Vulkan
//!                              ├─ spirv_words_hinted() ─▶ SPIR-V 1.4 with memory hints
//!                              └─ wgsl()               ─▶ WGSL text (for reading)
//! ```
//!
//! [`emit()`](fn@emit) translates a [`ThreadKernel`] into one compute entry point, checks it with naga's
//! validator, and returns a [`SpirvKernel`] from which [`SpirvKernel::spirv_words`] and
//! [`SpirvKernel::wgsl`] write the two text forms. A validation failure is a bug in this crate
//! (or in the lowering that made the kernel) and comes back as [`SpirvError::Validation`] with
//! a dump of the module; a kernel that needs something the target lacks comes back as
//! [`SpirvError::Unsupported`], naming the register, parameter or statement that needs it.
//!
//! # ABI
//!
//! The runtime fills the bindings as [`BindingLayout`] describes; everything is in bind
//! group 0.
//!
//! * **Pointer parameters.** The `i`-th pointer parameter (counting pointer parameters only,
//!   in parameter order) is a read-write storage buffer at binding `i`, declared as a
//!   runtime-sized `array<T>` of its element type, tightly packed (stride = element size).
//!   A pointer addresses elements by index from the start of its binding: the runtime binds
//!   the buffer range that starts at the pointer. A parameter that the kernel uses in an
//!   atomic operation is declared `array<atomic<T>>` (`atomic<u32>` holding the bit pattern
//!   for `f32`); its memory layout is the same, and [`StorageBinding::atomic`] says so.
//!   Element types: `i32`, `u32`, `f32` always; `f16` with [`SpirvTarget::shader_f16`];
//!   `i64`/`u64` with [`SpirvTarget::shader_i64`]; `f64` with [`SpirvTarget::shader_f64`].
//!   `bf16` and 8- and 16-bit integers are packed in an `array<u32>` (two or four to a word,
//!   the first in the low bits, so the bytes are the elements' own; `vec2<u32>` or
//!   `vec4<u32>` of them where every access moves 8 or 16 bytes, the same bytes), an
//!   `array<atomic<u32>>` where some store writes part of a word (neighbouring threads may
//!   write the two halves of one word). Booleans have no storage type. In shared memory
//!   the narrow types are held widened to 32 bits.
//! * **Prints.** A kernel with `device_print`s ([`rutile_ir::thread::Stmt::Print`]) has one
//!   more storage buffer, at binding `P` = number of pointer parameters
//!   ([`BindingLayout::print`]): an `array<atomic<u32>>` whose word 0 counts the words the
//!   kernel's lines asked for (it may pass the buffer's length) and whose words from 1 on
//!   hold the lines, one record each, as far as they fit: the print site's index in
//!   [`SpirvKernel::prints`], the three program ids, the element's coordinates, then each
//!   value ([`PrintSite`] says how many words). The runtime zeroes word 0 before a launch
//!   and reads the lines after it.
//! * **Launch information and scalar parameters.** One launch block, always declared: in
//!   immediates (push constants) when the target has room for it
//!   ([`SpirvTarget::immediate_size`]) and it holds no `f16` parameter, else in a uniform
//!   buffer at binding `P` = number of pointer parameters, plus one where the kernel prints
//!   ([`BindingLayout::launch`] says which). It is a struct laid out as:
//!
//!   | offset | field | type |
//!   |-------:|-------|------|
//!   | 0  | `num_programs` | `vec3<u32>` (12 bytes, 16-aligned) |
//!   | 16 | `program_offset` | `vec3<u32>` |
//!   | 32 | first scalar parameter | its type |
//!   | …  | each further scalar parameter, in parameter order | |
//!
//!   Each scalar parameter sits at the next offset that is a multiple of its size (2 for
//!   `f16`, 4 for 32-bit types, 8 for `i64`/`u64`/`f64`); booleans are passed as a `u32`
//!   (any non-zero value is true), 8- and 16-bit integers as a sign- or zero-extended
//!   `i32`/`u32`, `bf16` as the `f32` of its value. The struct's size is rounded up to 16 bytes.
//!   [`BindingLayout::launch_bytes`] writes the whole block.
//! * **Grid.** `program_id(a) = workgroup_id[a] + program_offset[a]` and
//!   `num_programs(a) = num_programs[a]` (both as `i32`), so the runtime can cover a grid
//!   larger than the per-dimension dispatch limit (65535) with several dispatches that share
//!   `num_programs` and differ in `program_offset`.
//! * **Workgroup.** `(num_warps * warp_size, 1, 1)` invocations; `thread_id` is
//!   `local_invocation_index`, except in kernels that shuffle, where it is
//!   `subgroup_id * warp_size + subgroup_invocation_id` so that lane numbers agree with the
//!   subgroup's whatever way the device assigns invocations to subgroups (the device's
//!   subgroup size must be fixed and equal to the kernel's warp size, so every subgroup is
//!   full).
//! * **Shared memory.** Each shared buffer is a `var<workgroup>` `array<T, len>`. It is not
//!   zero-initialized by the code from [`SpirvKernel::spirv_words`].
//!
//! The SPIR-V is version 1.3 (Vulkan 1.1); [`SpirvKernel::spirv_words_hinted`] writes 1.4
//! (Vulkan 1.2) with the hints naga's IR cannot carry, added by `hints` after naga (the
//! `Nontemporal` memory operand on read-once loads, per binding). The module passes naga's
//! validation with every check on ([`naga::valid::ValidationFlags::all`]) and the
//! capabilities of the target, so a consumer that validates it again (wgpu given the module
//! or its WGSL) accepts it too. The per-thread IR's control flow is uniform across a
//! workgroup by construction; barriers may sit inside loops and branches.
//!
//! # Semantics
//!
//! The op semantics are those of `rutile_ir::ir` (and its CPU interpreter), with these
//! choices where the hardware or naga differ:
//!
//! * Registers of 8- and 16-bit integers are 32-bit integers holding the value sign- or
//!   zero-extended; results that can leave the type's range (`add`, `sub`, `mul`, `div`,
//!   `cdiv`, `shl`, `neg`, `abs`, `not`, casts, bitcasts) are wrapped back into it, and
//!   shifts use the narrow width. A bitcast between `f16` and a 16-bit integer is not
//!   supported.
//! * Integer `div` by zero gives 0 (an explicit select; WGSL/naga would give the dividend);
//!   `MIN / -1` wraps to `MIN`; `rem` by zero and `MIN % -1` give 0. `cdiv` is
//!   `(a + b - 1) / b` in wrapping arithmetic, divided as `div`.
//! * Shifts: the amount is read as unsigned; an amount at or above the width gives 0 (`shl`,
//!   unsigned `shr`) or the sign fill (signed `shr`). WGSL/SPIR-V mask or leave it undefined;
//!   the generated code masks and selects.
//! * Float `minimum`/`maximum` give NaN if either operand is NaN and order -0.0 below +0.0
//!   (selects on compares, a bit-pattern NaN test and a sign test, not the GPU's min/max).
//! * Comparisons of floats are ordered except `ne`, which is `!(a == b)` (true with a NaN).
//! * Casts: float to integer truncates, saturates at the integer type's bounds (naga's
//!   conversion clamps to the largest float below the bound; the generated code selects the
//!   exact bound) and gives 0 for NaN. Float to bool is `x != 0` (NaN is true); bool to
//!   number is 0 or 1; integers wrap (sign- or zero-extended from the source's signedness).
//! * Subnormal `f16`/`f32` values may be flushed to zero: the module does not request
//!   SPIR-V's `DenormPreserve` mode (naga cannot), and Vulkan then leaves it to the driver
//!   (NVIDIA's flushes, lavapipe's does not). `f64` subnormals are kept on the devices seen.
//!   Flushing may apply to each operand of the compares behind `minimum`/`maximum`, so
//!   with two subnormal (or zero) operands either operand's bits may come out.
//! * `exp`, `exp2`, `log`, `log2`, `sin`, `cos`, `sqrt`, `rsqrt` (`inverseSqrt`), `floor`,
//!   `ceil`, `abs`, `fma` and float `div`/`div_full` are the device's (GLSL.std.450 / SPIR-V
//!   precision, not correctly rounded). Float `rem` is C's `fmod`, exact (not `OpFRem`, which
//!   is only as precise as `x - y·trunc(x/y)`): a loop of exact subtractions, `emit/fmod.rs`.
//!   Vulkan guarantees only the bounds of its specification ("Precision and Operation of
//!   SPIR-V Instructions", tables "Precision of core SPIR-V Instructions" and "Precision of
//!   GLSL.std.450 Instructions"): `sin`/`cos` absolute error <= 2^-11 (`f32`) or 2^-7
//!   (`f16`) inside [-π, π] and nothing outside; `OpFDiv` 2.5 ulp for a divisor of
//!   magnitude in [2^-126, 2^126] (`f32`) or [2^-14, 2^14] (`f16`) and undefined precision
//!   outside (a non-zero divided by zero is still the signed infinity, but a subnormal
//!   dividend may be flushed first, giving 0/0); `exp`/`exp2` 3 + 2·|x| ulp (`f16`:
//!   1 + 2·|x|); `log`/`log2` 3 ulp, absolute 2^-21 (`f16`: 2^-7) inside [0.5, 2];
//!   `inverseSqrt` 2 ulp, `sqrt` inherited from `1 / inverseSqrt`; `fma` inherited from a
//!   multiply then an add.
//!   `sigmoid` is `1 / (1 + exp(-x))`, in `f32` for `f16`. `tanh` and `pow` are written out
//!   in `f32` for every float type as the PTX backend does (`tanh`: a series below 0.55,
//!   `1 - 2 / (exp(2|x|) + 1)` above; `pow`: `exp2(y·log2|x|)` with C's special cases
//!   selected, since GLSL's `pow` is undefined for negative bases), so their error is that
//!   of `exp`, `exp2` and `log2` above; `umulhi` is built from half-width products (no
//!   64-bit arithmetic for 32-bit operands). `erf` is a piecewise polynomial evaluated in `f32`
//!   (within about 2.5 ulp of the correctly rounded `f32` result on every input); `f16` and
//!   `f64` go through it in `f32`, so `f64` `erf` has `f32` accuracy. GLSL.std.450 has
//!   `exp`, `exp2`, `log`, `log2`, `sin` and `cos` for 16- and 32-bit floats only: for `f64`
//!   the ops are computed in `f32` and widened, so they too have `f32` accuracy and range.
//!   The builder writes every f64 transcendental (`exp`, `exp2`, `log`, `log2`, `sin`,
//!   `cos`, `erf`, `sigmoid`, `tanh`, `pow`) out in f64 ops (`rutile_ir`'s
//!   `builder/f64_*.rs`), with f64's accuracy: they reach this backend as ops only from IR
//!   built by other means.
//! * Directed rounding (`add_rd`, `div_ru`, `sqrt_rz`, `fma_rn`, ...: `Expr::Rounded`) of
//!   `f32` is computed in `f64`, exactly for sums, products and fused multiply-adds (and
//!   through the exact remainder for quotients and roots), and rounded to `f32` by exact
//!   comparisons with its two neighbours and their midpoint (`emit/rounded.rs`): correctly
//!   rounded in every direction, as through PTX. It needs `shaderFloat64` and the
//!   `NoContraction` below; `f64` directed rounding is refused (the device has nothing wider).
//! * `f64` add, subtract, multiply, divide and negate are decorated `NoContraction` in the
//!   words rutile hands the driver (`exact_f64`), so that each rounds once as in the IR:
//!   NVIDIA's driver otherwise rearranges f64 arithmetic, which the f64 functions' two-part
//!   sums do not survive. `f32` and narrower arithmetic may be contracted.
//! * Operations whose operands are all constants are folded here, with the IR's wrapping
//!   semantics (naga's WGSL reader would reject e.g. `i32::MIN / -1` as an overflow).
//! * `f32` atomic add, min and max are compare-and-swap loops on the bit pattern
//!   (min/max with the NaN-propagating `minimum`/`maximum`); `f32` exchange swaps the bits;
//!   `f32` compare-and-swap compares bit patterns (so `-0.0` and `+0.0` differ and a NaN can
//!   match). Compare-and-swap uses naga's weak exchange and retries where it failed although
//!   the value matched, which makes it the strong operation of the IR. Atomics are relaxed,
//!   at device scope, whatever the IR's `AtomicOrder` (naga has no other): what a releasing
//!   atomic publishes, the lowering's barrier before it orders; `sys` scope is the device's
//!   (rutile's buffers are device memory). 64-bit atomics are not supported.
//! * `device_print` statements write records into the print buffer (the ABI's prints), since
//!   naga has no debug printf; the runtime reads them back after the launch and prints the
//!   lines as the interpreter does.

#![warn(missing_docs)]

mod emit;
mod erf;
mod exact_f64;
mod hints;

use rutile_ir::thread::ThreadKernel;
use rutile_ir::ScalarType;

pub use emit::emit;
/// The naga this crate builds modules with (the runtime should use the same version).
pub use naga;

/// What the device supports (the runtime fills it from the adapter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpirvTarget {
    /// `Some(n)` when every subgroup has exactly `n` invocations (the runtime can require a
    /// size); `None` when the size varies or is unknown.
    pub subgroup_size: Option<u32>,
    /// `f16` arithmetic and storage.
    pub shader_f16: bool,
    /// `i64`/`u64` arithmetic and storage.
    pub shader_i64: bool,
    /// `i16`/`u16` arithmetic: `f16` pairs leave and enter 32-bit words by bit operations
    /// ([`SpirvTarget::packed_f16`]) rather than conversions through `f32`.
    pub shader_i16: bool,
    /// `f64` arithmetic and storage.
    pub shader_f64: bool,
    /// Subgroup operations (shuffles).
    pub subgroups: bool,
    /// Bytes of immediates (Vulkan push constants) the launch block may use; 0 for none.
    /// The launch block goes there when it fits and holds no `f16` (which naga does not
    /// allow in immediates), else into a uniform buffer. Whether immediates are faster is
    /// the driver's business: the runtime decides (see `rutile::WgpuOptions`).
    pub immediate_size: u32,
    /// Cooperative matrices (`VK_KHR_cooperative_matrix`, which wgpu exposes as
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX`): what a kernel lowered for a target with
    /// `rutile_ir::target::Target::coop_matrix` uses.
    pub cooperative_matrix: bool,
    /// `f16` storage buffers that a kernel without loops or cooperative matrices moves in
    /// 16-byte vectors alone are arrays of `vec4<u32>`, each word a pair of `f16` (by 16-bit
    /// integer bit operations with [`SpirvTarget::shader_i16`], else through `f32`, which
    /// holds every `f16` exactly): one 16-byte load or store where `vec4<f16>` takes two of
    /// 8 bytes. The same condition makes the words that hold `bf16` and 8- and 16-bit
    /// integers (always packed: naga has no narrower storage type) `vec4<u32>` or
    /// `vec2<u32>` where every access moves 16 or 8 bytes. On by default; off to measure
    /// what it is worth.
    pub packed_f16: bool,
    /// A subgroup barrier that orders workgroup memory (execution and memory scope
    /// `Subgroup`, acquire-release on workgroup memory) before every cooperative-matrix load,
    /// with [`SpirvTarget::subgroups`]. Through NVIDIA's driver on an H200 it made two
    /// attention blocks that compute one subgroup's rows wrong compute them right, for a
    /// reason not found (`docs/performance.md`, "The wrong Vulkan blocks, located"); it costs
    /// the matmul 19% and attention 7–13% there, so it is off by default.
    pub coop_load_fences: bool,
    /// Where the device has 64-bit integers, take `umulhi(a, b)` and `a * b` of the same
    /// 32-bit registers as the halves of one 64-bit product
    /// (`rutile_ir::thread::product_pairs`) rather than a 64-bit product for the high half
    /// and a 32-bit one for the low: Philox's rounds are made of such pairs. On in
    /// [`SpirvTarget::full`] and in the runtime; off to measure the difference.
    pub wide_products: bool,
    /// Mark every f64 add, subtract, multiply, divide and negation `NoContraction` in the
    /// words the driver gets (`exact_f64`), so that each rounds once, as the IR defines:
    /// the f64 functions the builder writes out depend on it. On in [`SpirvTarget::full`]
    /// and in the runtime; off to measure the difference.
    pub exact_f64: bool,
}

impl SpirvTarget {
    /// A target with every optional feature and a fixed subgroup size of `subgroup_size`.
    pub fn full(subgroup_size: u32) -> SpirvTarget {
        SpirvTarget {
            subgroup_size: Some(subgroup_size),
            shader_f16: true,
            shader_i64: true,
            shader_i16: true,
            shader_f64: true,
            subgroups: true,
            immediate_size: 0,
            cooperative_matrix: true,
            packed_f16: true,
            coop_load_fences: false,
            wide_products: true,
            exact_f64: true,
        }
    }

    /// This target with `bytes` of immediates for the launch block.
    pub fn with_immediates(self, bytes: u32) -> SpirvTarget {
        SpirvTarget {
            immediate_size: bytes,
            ..self
        }
    }
}

/// A translated kernel: the naga module with its validation info.
#[derive(Debug, Clone)]
pub struct SpirvKernel {
    /// The naga module: one compute entry point, [`SpirvKernel::entry_point`].
    pub module: naga::Module,
    /// naga's validation info for `module`, which its SPIR-V and WGSL writers take.
    pub info: naga::valid::ModuleInfo,
    /// Name of the compute entry point, the same in the SPIR-V and the WGSL: the kernel's
    /// name with characters outside `[A-Za-z0-9_]` replaced by `_`, and `k_` in front where
    /// it would not be a WGSL identifier (a leading digit or `__`, a keyword).
    pub entry_point: String,
    /// Where the kernel's parameters, launch information and print buffer go.
    pub bindings: BindingLayout,
    /// Storage-buffer bindings whose every load is read-once ([`CacheModifier::Streaming`]):
    /// [`SpirvKernel::spirv_words_hinted`] marks their loads `Nontemporal`.
    ///
    /// [`CacheModifier::Streaming`]: rutile_ir::ir::CacheModifier::Streaming
    pub streaming_bindings: Vec<u32>,
    /// Storage-buffer bindings that a kernel with global atomics both loads and stores:
    /// [`SpirvKernel::spirv_words_hinted`] declares them `Coherent`, so that what other
    /// workgroups publish through the atomics (a lock's partial sums) is not read stale
    /// from a cache. A naga module cannot say this: such a kernel must go to the driver as
    /// the hinted words.
    pub coherent_bindings: Vec<u32>,
    /// Storage-buffer bindings the kernel loads from and never writes:
    /// [`SpirvKernel::spirv_words_hinted`] declares them `NonWritable`, which rutile's
    /// read-write bindings keep out of the naga module (see the `hints` module).
    pub read_only_bindings: Vec<u32>,
    /// The kernel's `device_print` sites, in the order their records name them (see the
    /// ABI's prints); empty where it prints nothing.
    pub prints: Vec<PrintSite>,
    /// Whether the kernel multiplies cooperative matrices element by element
    /// ([`rutile_ir::thread::Stmt::CoopMul`]), which naga's IR cannot say: the module holds
    /// each such product as a subtraction, which [`SpirvKernel::spirv_words`] and
    /// [`SpirvKernel::spirv_words_hinted`] write as `OpFMul`. Such a kernel must reach the
    /// driver as those words, never as the module or its WGSL
    /// ([`SpirvKernel::needs_own_words`]).
    pub coop_products: bool,
    /// Whether the kernel uses cooperative matrices, which naga writes under the Vulkan
    /// memory model (see [`SpirvKernel::needs_own_words`]).
    pub cooperative_matrices: bool,
    /// Whether the kernel has f64 values and the target asked for exact f64 arithmetic
    /// ([`SpirvTarget::exact_f64`]): [`SpirvKernel::spirv_words_hinted`] marks its f64
    /// arithmetic `NoContraction`, which only those words carry.
    pub exact_f64: bool,
}

/// One `device_print` of a kernel: what its records in the print buffer hold after the
/// site's index and the three program ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintSite {
    /// The text the line prints before the values (the `device_print`'s prefix).
    pub prefix: String,
    /// The element's coordinates (one `i32` word each).
    pub coords: usize,
    /// The values' types: one word each (booleans 0 or 1, 8- and 16-bit integers extended,
    /// `f16` and `bf16` widened to `f32` bits), two for 64-bit types (low word first).
    pub values: Vec<ScalarType>,
}

impl PrintSite {
    /// Words of one record of this site.
    pub fn record_words(&self) -> usize {
        4 + self.coords + self.values.iter().map(|t| print_words(*t)).sum::<usize>()
    }
}

/// Words a value of type `t` takes in a print record.
pub fn print_words(t: ScalarType) -> usize {
    if t.size_bytes() == 8 {
        2
    } else {
        1
    }
}

/// Errors of [`emit()`](fn@emit) and of writing a module.
#[derive(Debug, thiserror::Error)]
pub enum SpirvError {
    /// The kernel needs a feature the target lacks, or something this backend cannot express.
    #[error("kernel `{kernel}`: {what} is not supported on this target: {detail}")]
    Unsupported {
        /// The kernel's name.
        kernel: String,
        /// What is missing, in a few words: a type (`"f16"`), a feature
        /// (`"cooperative matrices"`), an operation (`"atomic"`).
        what: &'static str,
        /// Which register, parameter, buffer or statement needs it, and why it is missing.
        detail: String,
    },
    /// The per-thread kernel is malformed (it fails `rutile_ir::thread::verify`).
    #[error("kernel `{kernel}` is malformed: {message}")]
    InvalidKernel {
        /// The kernel's name.
        kernel: String,
        /// What is wrong with it (the verifier's message).
        message: String,
    },
    /// naga rejected the generated module: a bug in this backend.
    #[error("internal error: the generated module for `{kernel}` fails validation: {message}\n{module_dump}")]
    Validation {
        /// The kernel's name.
        kernel: String,
        /// naga's validation error, with its causes and labels.
        message: String,
        /// The rejected module, in its `Debug` form.
        module_dump: String,
    },
    /// naga's SPIR-V writer failed.
    #[error("writing SPIR-V failed: {0}")]
    SpirvWriter(String),
    /// naga's WGSL writer failed.
    #[error("writing WGSL failed: {0}")]
    WgslWriter(String),
    /// [`BindingLayout::launch_bytes`] got arguments that do not match the kernel's.
    #[error("bad kernel arguments: {0}")]
    Arguments(String),
}

impl SpirvKernel {
    /// The module as SPIR-V 1.3 words (Vulkan 1.1), with debug names.
    pub fn spirv_words(&self) -> Result<Vec<u32>, SpirvError> {
        self.write_spirv((1, 3))
    }

    /// Whether [`SpirvKernel::spirv_words_hinted`] has hints to add that naga's module (and
    /// so [`SpirvKernel::spirv_words`]) lacks.
    pub fn has_memory_hints(&self) -> bool {
        !self.streaming_bindings.is_empty() || !self.coherent_bindings.is_empty() || !self.read_only_bindings.is_empty()
    }

    /// Whether the kernel must reach the driver as rutile's words rather than as the naga
    /// module: it has memory hints, products of cooperative matrices that only the words
    /// spell as such ([`SpirvKernel::coop_products`]), cooperative matrices at all (naga
    /// writes them under the Vulkan memory model without making workgroup memory available
    /// and visible at barriers, which only the words add: `hints::order_workgroup_memory`),
    /// or f64 arithmetic, which only the words mark `NoContraction`.
    pub fn needs_own_words(&self) -> bool {
        self.has_memory_hints() || self.coop_products || self.cooperative_matrices || self.exact_f64
    }

    /// The module as SPIR-V 1.4 words (Vulkan 1.2), with debug names and with the memory
    /// hints naga cannot express: the `Nontemporal` memory operand on every load through
    /// the [`SpirvKernel::streaming_bindings`], `Coherent` on the variables of the
    /// [`SpirvKernel::coherent_bindings`], `NonWritable` on those of the
    /// [`SpirvKernel::read_only_bindings`], and `NoContraction` on f64 arithmetic, so that
    /// the driver rounds each f64 operation as the IR does (see `exact_f64`). These words
    /// are rutile's alone (a consumer that rebuilds a naga module from them drops the
    /// hints): hand them to the driver as they are.
    pub fn spirv_words_hinted(&self) -> Result<Vec<u32>, SpirvError> {
        let mut words = self.write_spirv((1, 4))?;
        if !self.streaming_bindings.is_empty() {
            words = hints::mark_nontemporal(&words, &self.streaming_bindings)?;
        }
        if !self.coherent_bindings.is_empty() {
            words = hints::mark_coherent(&words, &self.coherent_bindings)?;
        }
        if !self.read_only_bindings.is_empty() {
            words = hints::mark_nonwritable(&words, &self.read_only_bindings)?;
        }
        if self.exact_f64 {
            words = exact_f64::mark_no_contraction(&words)?;
        }
        Ok(words)
    }

    fn write_spirv(&self, lang_version: (u8, u8)) -> Result<Vec<u32>, SpirvError> {
        let options = naga::back::spv::Options {
            lang_version,
            flags: naga::back::spv::WriterFlags::DEBUG,
            zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
            // Loops here come from the kernel's own `for`/`while`: no counter is added.
            force_loop_bounding: false,
            // Compute entry points have no f16 inputs or outputs; the capability would only
            // make wgpu's SPIR-V reader (naga) reject every module that uses f16.
            use_storage_input_output_16: false,
            ..Default::default()
        };
        let pipeline = naga::back::spv::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: self.entry_point.clone(),
        };
        let words = naga::back::spv::write_vec(&self.module, &self.info, &options, Some(&pipeline))
            .map_err(|e| SpirvError::SpirvWriter(e.to_string()))?;
        let words = hints::strip_workgroup_strides(&words)?;
        let words = hints::order_workgroup_memory(&words)?;
        if self.coop_products {
            return hints::coop_products(&words);
        }
        Ok(words)
    }

    /// The module as WGSL text (for reading; 64-bit types and subgroup builtins use naga's
    /// extensions of WGSL).
    pub fn wgsl(&self) -> Result<String, SpirvError> {
        let text = naga::back::wgsl::write_string(&self.module, &self.info, naga::back::wgsl::WriterFlags::empty())
            .map_err(|e| SpirvError::WgslWriter(e.to_string()))?;
        Ok(if self.coop_products {
            format!(
                "// Each subtraction of two cooperative matrices below is an element-wise product in the\n\
                 // SPIR-V words the driver gets (WGSL has no such product).\n{text}"
            )
        } else {
            text
        })
    }
}

/// Where the kernel's parameters go (see the crate docs for the ABI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingLayout {
    /// One storage buffer per pointer parameter, in parameter order; binding `i` is entry `i`.
    pub storage: Vec<StorageBinding>,
    /// Where the launch block (launch information and scalar parameters) is.
    pub launch: LaunchPlace,
    /// Size of the launch block in bytes (a multiple of 16).
    pub launch_size: u32,
    /// One slot per scalar parameter, in parameter order.
    pub scalars: Vec<ScalarSlot>,
    /// The print buffer's binding, where the kernel prints (see the ABI's prints).
    pub print: Option<u32>,
}

/// Where a kernel reads its launch block from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchPlace {
    /// A uniform buffer at this binding (= the number of storage buffers, the print buffer
    /// included).
    Uniform {
        /// The uniform buffer's binding in group 0.
        binding: u32,
    },
    /// Immediates (push constants), from offset 0.
    Immediates,
}

impl BindingLayout {
    /// The uniform buffer's binding, when the launch block is in one.
    pub fn uniform_binding(&self) -> Option<u32> {
        match self.launch {
            LaunchPlace::Uniform { binding } => Some(binding),
            LaunchPlace::Immediates => None,
        }
    }
}

/// A storage buffer binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageBinding {
    /// The binding number in group 0: the pointer parameter's position among the pointer
    /// parameters.
    pub binding: u32,
    /// Index of the parameter in the kernel's parameter list.
    pub param: u32,
    /// The parameter's name.
    pub name: String,
    /// The element type of the runtime-sized array the buffer is declared as.
    pub elem: ScalarType,
    /// Declared as an array of atomics (same memory layout).
    pub atomic: bool,
}

/// A scalar parameter's place in the launch block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalarSlot {
    /// Index of the parameter in the kernel's parameter list.
    pub param: u32,
    /// The parameter's name.
    pub name: String,
    /// The parameter's type, which the argument must have.
    pub ty: ScalarType,
    /// Byte offset in the launch block.
    pub offset: u32,
    /// Bytes written there (4 for booleans, `bf16` and 8- and 16-bit integers, passed widened
    /// to a word).
    pub size: u32,
}

/// Byte offset of `num_programs` in the launch block.
pub const NUM_PROGRAMS_OFFSET: u32 = 0;
/// Byte offset of `program_offset` in the launch block.
pub const PROGRAM_OFFSET_OFFSET: u32 = 16;
/// Byte offset of the first scalar parameter's area in the launch block.
pub const SCALARS_OFFSET: u32 = 32;

/// A scalar argument value for [`BindingLayout::launch_bytes`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarArg {
    /// For an `i1` parameter; written as a `u32`, 0 or 1.
    Bool(bool),
    /// For an `i8` parameter; written sign-extended to 4 bytes.
    I8(i8),
    /// For an `i16` parameter; written sign-extended to 4 bytes.
    I16(i16),
    /// For a `u8` parameter; written zero-extended to 4 bytes.
    U8(u8),
    /// For a `u16` parameter; written zero-extended to 4 bytes.
    U16(u16),
    /// For a `bf16` parameter; written as the `f32` of its value.
    BF16(half::bf16),
    /// For an `i32` parameter.
    I32(i32),
    /// For a `u32` parameter.
    U32(u32),
    /// For an `i64` parameter.
    I64(i64),
    /// For a `u64` parameter.
    U64(u64),
    /// For an `f16` parameter.
    F16(half::f16),
    /// For an `f32` parameter.
    F32(f32),
    /// For an `f64` parameter.
    F64(f64),
}

impl ScalarArg {
    /// The type of the parameter this argument is for.
    pub fn ty(&self) -> ScalarType {
        match self {
            ScalarArg::Bool(_) => ScalarType::Bool,
            ScalarArg::I8(_) => ScalarType::I8,
            ScalarArg::I16(_) => ScalarType::I16,
            ScalarArg::U8(_) => ScalarType::U8,
            ScalarArg::U16(_) => ScalarType::U16,
            ScalarArg::BF16(_) => ScalarType::BF16,
            ScalarArg::I32(_) => ScalarType::I32,
            ScalarArg::U32(_) => ScalarType::U32,
            ScalarArg::I64(_) => ScalarType::I64,
            ScalarArg::U64(_) => ScalarType::U64,
            ScalarArg::F16(_) => ScalarType::F16,
            ScalarArg::F32(_) => ScalarType::F32,
            ScalarArg::F64(_) => ScalarType::F64,
        }
    }
    fn bytes(&self) -> Vec<u8> {
        match *self {
            ScalarArg::Bool(b) => (b as u32).to_le_bytes().to_vec(),
            ScalarArg::I8(v) => (v as i32).to_le_bytes().to_vec(),
            ScalarArg::I16(v) => (v as i32).to_le_bytes().to_vec(),
            ScalarArg::U8(v) => (v as u32).to_le_bytes().to_vec(),
            ScalarArg::U16(v) => (v as u32).to_le_bytes().to_vec(),
            ScalarArg::BF16(v) => v.to_f32().to_le_bytes().to_vec(),
            ScalarArg::I32(v) => v.to_le_bytes().to_vec(),
            ScalarArg::U32(v) => v.to_le_bytes().to_vec(),
            ScalarArg::I64(v) => v.to_le_bytes().to_vec(),
            ScalarArg::U64(v) => v.to_le_bytes().to_vec(),
            ScalarArg::F16(v) => v.to_bits().to_le_bytes().to_vec(),
            ScalarArg::F32(v) => v.to_le_bytes().to_vec(),
            ScalarArg::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

impl BindingLayout {
    /// The layout of `kernel`'s parameters for `target`; `atomic[p]` says whether parameter
    /// `p` is used atomically.
    pub(crate) fn new(kernel: &ThreadKernel, atomic: &[bool], prints: bool, target: &SpirvTarget) -> BindingLayout {
        use rutile_ir::thread::ThreadParam;
        let mut storage = Vec::new();
        let mut scalars = Vec::new();
        let mut offset = SCALARS_OFFSET;
        for (i, p) in kernel.params.iter().enumerate() {
            match p {
                ThreadParam::Ptr { name, elem } => storage.push(StorageBinding {
                    binding: storage.len() as u32,
                    param: i as u32,
                    name: name.clone(),
                    elem: *elem,
                    atomic: atomic[i],
                }),
                ThreadParam::Scalar { name, ty } => {
                    let size = launch_size_of(*ty);
                    offset = offset.div_ceil(size) * size;
                    scalars.push(ScalarSlot {
                        param: i as u32,
                        name: name.clone(),
                        ty: *ty,
                        offset,
                        size,
                    });
                    offset += size;
                }
            }
        }
        let launch_size = offset.div_ceil(16) * 16;
        let has_f16 = scalars.iter().any(|s| s.ty == ScalarType::F16);
        let print = prints.then_some(storage.len() as u32);
        let launch = if launch_size <= target.immediate_size && !has_f16 {
            LaunchPlace::Immediates
        } else {
            LaunchPlace::Uniform {
                binding: storage.len() as u32 + prints as u32,
            }
        };
        BindingLayout {
            launch,
            launch_size,
            storage,
            scalars,
            print,
        }
    }

    /// The launch block's contents for a launch of `grid` programs (the whole grid) of which
    /// this dispatch runs those starting at `offset`, with `scalars` the scalar arguments in
    /// parameter order.
    pub fn launch_bytes(&self, grid: [u32; 3], offset: [u32; 3], scalars: &[ScalarArg]) -> Result<Vec<u8>, SpirvError> {
        if scalars.len() != self.scalars.len() {
            return Err(SpirvError::Arguments(format!(
                "{} scalar arguments for {} scalar parameters",
                scalars.len(),
                self.scalars.len()
            )));
        }
        let mut out = vec![0u8; self.launch_size as usize];
        for a in 0..3 {
            let at = (NUM_PROGRAMS_OFFSET + 4 * a as u32) as usize;
            out[at..at + 4].copy_from_slice(&grid[a].to_le_bytes());
            let at = (PROGRAM_OFFSET_OFFSET + 4 * a as u32) as usize;
            out[at..at + 4].copy_from_slice(&offset[a].to_le_bytes());
        }
        for (slot, arg) in self.scalars.iter().zip(scalars) {
            if arg.ty() != slot.ty {
                return Err(SpirvError::Arguments(format!(
                    "parameter `{}` is {}, got a {} argument",
                    slot.name,
                    slot.ty,
                    arg.ty()
                )));
            }
            let b = arg.bytes();
            let at = slot.offset as usize;
            out[at..at + b.len()].copy_from_slice(&b);
        }
        Ok(out)
    }
}

/// Bytes a scalar parameter of type `ty` takes in the launch block (also its alignment):
/// booleans, `bf16` and 8- and 16-bit integers take a word, as their registers hold them.
pub(crate) fn launch_size_of(ty: ScalarType) -> u32 {
    match ty {
        ScalarType::Bool => 4,
        t if t.held_in_words() => 4,
        t => t.size_bytes() as u32,
    }
}
