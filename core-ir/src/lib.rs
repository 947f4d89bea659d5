//! rutile's block IR: the kernel language of rutile.
//!
//! A kernel is built by ordinary Rust code through [`KernelBuilder`] (the meta-parameters of
//! Triton's `constexpr` are plain Rust values), checked as it is built and again by
//! [`verify`], printed by [`mod@print`], and run exactly on the CPU by [`interp`].

#![warn(missing_docs)]
// Index loops over several parallel per-dimension or per-register arrays read better than
// zipped iterators in the layout and lowering code.
#![allow(clippy::needless_range_loop)]

pub mod analysis;
pub mod arena;
pub mod builder;
pub mod error;
pub mod fp8;
pub mod interp;
pub mod ir;
pub mod layout;
pub mod lower;
pub mod mathfn;
pub mod print;
pub mod seeds;
pub mod target;
#[doc(hidden)]
pub mod testing;
pub mod thread;
pub mod types;
pub mod typing;
pub mod verify;

pub use arena::{Arena, Handle};
pub use builder::{
    BlockPtr, DotScaledOptions, HintNumbers, Indices, KernelBuilder, Microscaled, MxFormat, Operand, Padding,
    TensorDescriptor, Value,
};
pub use error::{BuildError, Diagnostic};
pub use ir::{
    AtomicOp, AtomicOrder, CacheModifier, DotOptions, DotPrecision, Kernel, MemScope, MemSem, Op, ReduceOp, RoundedOp,
    Rounding,
};
pub use types::{Elem, ScalarType, Shape, Type};
