//! PTX generation from rutile per-thread code.
//!
//! [`emit`] translates a [`ThreadKernel`] (the shared lowering's output) into the text of a
//! PTX module with one `.visible .entry` named after the kernel, for a [`PtxTarget`]. The
//! CUDA driver JIT-compiles the text (or `ptxas` does offline).
//!
//! # Calling convention
//!
//! The entry has one parameter per kernel parameter, in order, named `{kernel}_param_{i}`:
//!
//! | parameter         | PTX          | size |
//! |-------------------|--------------|------|
//! | pointer (`*T`)    | `.param .u64` (a global address, 16-byte aligned) | 8 |
//! | `i8` / `u8`       | `.param .s8` / `.u8`   | 1 |
//! | `i16` / `u16`     | `.param .s16` / `.u16` | 2 |
//! | `f16` / `bf16`    | `.param .b16` (the bits) | 2 |
//! | `i32` `u32` `f32` | `.param .s32` `.u32` `.f32` | 4 |
//! | `i64` `u64` `f64` | `.param .s64` `.u64` `.f64` | 8 |
//! | tensor map `j`    | `.param .align 64 .b8 {kernel}_param_{n + j}[128]` | 128 |
//!
//! Boolean scalar parameters are rejected ([`PtxError::Param`]): pass an integer. Each
//! argument is passed by value with exactly its type's size. After the `n` kernel
//! parameters come the kernel's tensor maps ([`ThreadKernel::tensor_maps`], sm_90 and
//! later), each the 128 bytes of a `CUtensorMap` that `cuTensorMapEncodeTiled` wrote for
//! the launch, passed by value (CUDA's `__grid_constant__ const CUtensorMap`). The block
//! is launched with `num_warps * 32` threads along x (the entry declares `.maxntid` with
//! that count) and the grid of programs along x, y, z. Shared memory is dynamic: one
//! `.extern .shared` buffer holding all of the kernel's shared buffers, so a launch must
//! give [`dynamic_shared_bytes`] bytes of it (above 48 KiB the kernel must first be allowed
//! that much with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
//!
//! # Semantics
//!
//! Integer, float, comparison and cast semantics are documented in the `expr` and `cast`
//! modules; transcendental accuracy in `math`; memory access and atomics in `memory` and
//! `atomic`. In short: integer and IEEE-exact float arithmetic match the interpreter bit
//! for bit (`umulhi` is `mul.hi`); `exp`, `log`, `sin`, `cos`, `rsqrt`, `erf`, `sigmoid`,
//! `tanh`, `pow` use the GPU's fast approximations (a few ulp; see `math`). f64
//! transcendental functions (`pow` included) and some
//! target-dependent operations are [`PtxError::Unsupported`].

#![warn(missing_docs)]

mod atomic;
mod cast;
mod cluster;
mod control;
mod emit;
mod error;
mod expr;
mod fp8_bits;
mod math;
mod memory;
mod names;
mod pairs;
mod print;
mod shuffle;
mod target;
mod tma;
mod wgmma;

pub use emit::dynamic_shared_bytes;
pub use error::PtxError;
pub use target::PtxTarget;

use rutile_ir::thread::ThreadKernel;

/// The PTX module text of `kernel` for `target`.
///
/// Fails when the kernel does not verify, when it does not fit the target (warp size other
/// than 32, more than 1024 threads), or when a statement
/// uses an operation this backend cannot generate for the target; the error names the
/// statement.
pub fn emit(kernel: &ThreadKernel, target: &PtxTarget) -> Result<String, PtxError> {
    emit::emit(kernel, target)
}
