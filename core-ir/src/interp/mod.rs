//! The exact CPU interpreter: runs a [`Kernel`] over a grid of programs on host buffers.
//!
//! It is the reference the GPU backends are tested against, so it follows the op semantics
//! documented in [`crate::ir`] exactly, computes block-at-a-time (each op runs a tight loop
//! over a whole block), and reports every out-of-bounds access with the op, the kernel
//! author's source location and the program id.
//!
//! ```text
//! let mut buffers = [HostBuffer::from_slice(&x), HostBuffer::zeros(ScalarType::F32, n)];
//! let args = [ArgValue::Ptr { buffer: 0, offset: 0 }, ArgValue::Ptr { buffer: 1, offset: 0 },
//!             ArgValue::Int(n as i64)];
//! interp::run(&kernel, [n.div_ceil(1024) as u32, 1, 1], &args, &mut buffers)?;
//! let y: Vec<f32> = buffers[1].to_vec()?;
//! ```
//!
//! Programs run one after another, axis 0 fastest, so atomics and racing stores resolve in
//! that order. [`run_clustered`] groups them into clusters for `cluster_reduce`, whose
//! programs take turns in a fixed order (the `cluster` module says how and why). Where the
//! IR leaves a result unspecified (integer division by zero, say), the interpreter picks
//! one value and documents it in the module that computes it: `elementwise` for math,
//! casts and bitcasts, `shape_ops` for reductions, `dot` for matrix products, `memory` for
//! loads, stores and atomics.
//!
//! Floats are held as f64 and rounded to their element type after every op, so f16, bf16
//! and f32 arithmetic is correctly rounded; one exception: signaling NaNs are quieted when
//! loaded (their payload is otherwise kept). Bitcasts and stores keep every bit of a NaN.

mod buffer;
mod cluster;
mod debug_ops;
mod dot;
mod elementwise;
mod error;
mod eval;
mod hints;
mod memory;
mod rounding;
mod scan;
mod shape_ops;
pub mod simt;
pub(crate) mod tensor;
#[cfg(test)]
mod tests;

pub use buffer::{Element, HostBuffer};
pub use debug_ops::{capture_prints, print_captured, print_line, print_value, PrintValue};
pub use error::{FaultKind, InterpError};
pub(crate) use scan::bitonic_steps;

use crate::ir::Kernel;
use crate::types::{Elem, Type};
use memory::Memory;
use tensor::{int_fits, round_float, Data, Pointer, Tensor};

/// A kernel argument: a pointer into one of the launch's buffers, or a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    /// The element at index `offset` of `buffers[buffer]`.
    Ptr {
        /// An index into the launch's `buffers`, whose element type is the pointee type.
        buffer: usize,
        /// An element index (not bytes), at most the buffer's length.
        offset: usize,
    },
    /// For integer parameters; it must lie in the type's range (`u64` up to `i64::MAX`).
    Int(i64),
    /// For float parameters; rounded to the type (to nearest even).
    Float(f64),
    /// For `i1` parameters.
    Bool(bool),
}

impl ArgValue {
    fn describe(&self, buffers: &[HostBuffer]) -> String {
        match *self {
            ArgValue::Ptr { buffer, offset } => match buffers.get(buffer) {
                Some(b) => {
                    format!(
                        "a pointer to element {offset} of buffer {buffer} ({}, {} elements)",
                        b.elem(),
                        b.len()
                    )
                }
                None => format!("a pointer to buffer {buffer}"),
            },
            ArgValue::Int(i) => format!("integer {i}"),
            ArgValue::Float(x) => format!("float {x}"),
            ArgValue::Bool(b) => format!("boolean {b}"),
        }
    }
}

/// The most programs a cluster of [`run_clustered`] may have (CUDA's largest cluster,
/// non-portable on sm_90).
pub const MAX_CLUSTER: u32 = crate::lower::MAX_CLUSTER;

/// Runs every program of the grid, in order (axis 0 fastest), on the CPU.
///
/// `args` has one value per kernel parameter; pointer arguments name an element of
/// `buffers`, whose element type must be the pointee type. Stores and atomics write
/// `buffers`. A fault stops the launch with the buffers as the faulting program left them.
/// A kernel that is not valid IR (edited after building) is [`InterpError::Invalid`].
///
/// Programs are not grouped into clusters: `cluster_reduce` gives its own value. This is
/// [`run_clustered`] with clusters of one program.
pub fn run(kernel: &Kernel, grid: [u32; 3], args: &[ArgValue], buffers: &mut [HostBuffer]) -> Result<(), InterpError> {
    run_clustered(kernel, grid, 1, args, buffers)
}

/// [`run`] with the programs grouped into clusters of `cluster` programs, as a launch with
/// thread-block clusters groups them: the `cluster` consecutive programs along grid axis 0
/// `x = c * cluster .. (c + 1) * cluster` (with the same `y` and `z`) form cluster `c`, and
/// `cluster_reduce` combines a number (`cluster_reduce_n` a tuple) over the programs of a
/// cluster.
///
/// Clusters run one after another in program order (axis 0 fastest). With clusters of one
/// program the programs run one after another exactly as [`run`] says. In larger clusters,
/// the programs of a cluster take turns in a fixed order: program 0 of the cluster (its
/// first) runs until its first `cluster_reduce` or its end, then program 1 does, and so
/// on; when all of them wait at a reduction it completes, and they go on in the same order
/// to the next. Atomics and racing stores resolve in that order, so a launch's result is
/// deterministic. Every program of a cluster must reach `cluster_reduce` equally often,
/// like a barrier: its `k`-th call returns the combination of the values all programs of
/// the cluster passed at their `k`-th call (a float sum adds them in program order).
///
/// Errors, besides [`run`]'s: [`InterpError::ClusterSize`] for a cluster of 0 or more than
/// [`MAX_CLUSTER`] programs; [`InterpError::GridNotClustered`] when `grid[0]` is not a
/// multiple of `cluster`; [`InterpError::ClusterReduceMismatch`] when a program of a
/// cluster finished while another waits at a `cluster_reduce`; and an invalid-IR fault when
/// the programs of a cluster pass values of different types to one reduction (or ask for
/// different combinations). Any error stops the whole launch (the other programs of the
/// cluster end where they wait), with the buffers as the programs left them.
pub fn run_clustered(
    kernel: &Kernel,
    grid: [u32; 3],
    cluster: u32,
    args: &[ArgValue],
    buffers: &mut [HostBuffer],
) -> Result<(), InterpError> {
    // A built kernel is valid; one edited afterwards is checked before any program runs
    // (cheap next to interpreting it).
    crate::verify::verify(kernel)?;
    launch(kernel, grid, cluster, args, buffers)
}

/// [`run`] without the verifier: the interpreter's own checks still turn invalid IR into
/// [`FaultKind::InvalidIr`] faults where they meet it. For tests of those checks, and of
/// what the interpreter runs beyond the typing rules (integer dots).
#[cfg(test)]
pub(crate) fn run_unverified(
    kernel: &Kernel,
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &mut [HostBuffer],
) -> Result<(), InterpError> {
    launch(kernel, grid, 1, args, buffers)
}

/// [`run_clustered`] without the verifier.
fn launch(
    kernel: &Kernel,
    grid: [u32; 3],
    cluster: u32,
    args: &[ArgValue],
    buffers: &mut [HostBuffer],
) -> Result<(), InterpError> {
    if grid.contains(&0) {
        return Err(InterpError::EmptyGrid { grid });
    }
    if cluster == 0 || cluster > MAX_CLUSTER {
        return Err(InterpError::ClusterSize { cluster });
    }
    if grid[0] % cluster != 0 {
        return Err(InterpError::GridNotClustered { grid, cluster });
    }
    if args.len() != kernel.params.len() {
        return Err(InterpError::ArgumentCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    let declared: Vec<(&str, Type)> = kernel.params.iter().map(|p| (p.name.as_str(), p.ty)).collect();
    let (params, param_buffer) = bind_args(&declared, args, buffers)?;
    // The hints are checked under the specialization the runtime would compile these
    // arguments with, once for every program of the launch.
    let hints = hints::HintChecks::new(kernel, &crate::testing::runtime_spec(args)).map(std::sync::Arc::new);
    let param_names = kernel.params.iter().map(|p| p.name.as_str()).collect();
    let bound = BoundArgs {
        params,
        param_buffer,
        param_names,
        hints,
    };
    if cluster > 1 {
        return cluster::run(kernel, grid, cluster, buffers, bound);
    }
    let mem = Memory {
        buffers: buffers.into(),
        param_buffer: bound.param_buffer,
        param_names: bound.param_names,
    };
    let mut program = eval::Program::new(kernel, grid, mem, bound.params, bound.hints);
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                program.run([x, y, z])?;
            }
        }
    }
    Ok(())
}

/// A launch's arguments bound to the kernel's parameters, for its programs.
pub(super) struct BoundArgs<'k> {
    /// The parameters' values.
    pub params: Vec<Tensor>,
    /// Per parameter, the buffer a pointer argument names and that buffer's length.
    pub param_buffer: Vec<Option<(usize, usize)>>,
    /// The parameters' names.
    pub param_names: Vec<&'k str>,
    /// The checks of the kernel's hints, made once for the launch.
    pub hints: Option<std::sync::Arc<hints::HintChecks>>,
}

/// The parameters' values (pointers as parameter and offset) and, per parameter, the buffer a
/// pointer argument names and that buffer's length; checks each argument against its
/// parameter's `(name, type)`. The caller has checked the number of arguments.
#[allow(clippy::type_complexity)]
pub(crate) fn bind_args(
    declared: &[(&str, Type)],
    args: &[ArgValue],
    buffers: &[HostBuffer],
) -> Result<(Vec<Tensor>, Vec<Option<(usize, usize)>>), InterpError> {
    let mut params = Vec::with_capacity(args.len());
    let mut param_buffer = Vec::with_capacity(args.len());
    for (index, (param, arg)) in declared.iter().zip(args).enumerate() {
        let bad = |expected: String| InterpError::BadArgument {
            index,
            name: param.0.to_string(),
            expected,
            got: arg.describe(buffers),
        };
        let ty = param.1;
        if !ty.is_scalar() {
            return Err(bad(format!("a parameter of rank 0, but the parameter has type {ty}")));
        }
        let (data, buffer) = match (ty.elem, *arg) {
            (Elem::Ptr(s), ArgValue::Ptr { buffer, offset }) => {
                let expected = || format!("a pointer to a buffer of {s}");
                let Some(b) = buffers.get(buffer) else {
                    return Err(bad(format!("{} (there are {} buffers)", expected(), buffers.len())));
                };
                if b.elem() != s {
                    return Err(bad(expected()));
                }
                if offset > b.len() {
                    return Err(bad(format!("{}, with an offset of at most its length", expected())));
                }
                (
                    Data::Ptr(vec![Pointer {
                        param: index as u32,
                        offset: offset as i64,
                    }]),
                    Some((buffer, b.len())),
                )
            }
            (Elem::Scalar(s), ArgValue::Int(i)) if s.is_int() => {
                if !int_fits(s, i) {
                    return Err(bad(format!("an integer in the range of {s}")));
                }
                (Data::Int(vec![i]), None)
            }
            (Elem::Scalar(s), ArgValue::Float(x)) if s.is_float() => (Data::Float(vec![round_float(s, x)]), None),
            (Elem::Scalar(s), ArgValue::Bool(b)) if s.is_bool() => (Data::Bool(vec![b]), None),
            (Elem::Ptr(s), _) => return Err(bad(format!("a pointer to a buffer of {s}"))),
            (Elem::Scalar(s), _) if s.is_int() => return Err(bad(format!("an integer ({s})"))),
            (Elem::Scalar(s), _) if s.is_float() => return Err(bad(format!("a float ({s})"))),
            (Elem::Scalar(_), _) => return Err(bad("a boolean (i1)".to_string())),
        };
        params.push(Tensor { ty, data });
        param_buffer.push(buffer);
    }
    Ok((params, param_buffer))
}
