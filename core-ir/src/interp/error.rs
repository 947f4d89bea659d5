//! The interpreter's errors: bad launches (arguments, grid) and faults while a program runs.

use crate::ir::SourceLoc;
use crate::types::ScalarType;
use std::fmt;

/// Why a launch could not run, or where and why a program stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InterpError {
    /// The launch passed the wrong number of arguments.
    #[error("kernel `{kernel}` takes {expected} arguments, got {got}")]
    ArgumentCount {
        /// The kernel's name.
        kernel: String,
        /// Its number of parameters.
        expected: usize,
        /// The number of arguments passed.
        got: usize,
    },
    /// An argument does not fit its parameter.
    #[error("argument {index} (`{name}`): expected {expected}, got {got}")]
    BadArgument {
        /// The parameter's position, from 0.
        index: usize,
        /// The parameter's name.
        name: String,
        /// What the parameter takes, in words (`"a pointer to a buffer of f32"`).
        expected: String,
        /// What was passed, in words (`"integer 3"`).
        got: String,
    },
    /// The kernel is not valid block IR (its public fields were edited after building):
    /// what the verifier found.
    #[error("not valid IR: {0}")]
    Invalid(#[from] crate::error::BuildError),
    /// Some axis of the grid is zero.
    #[error("grid ({}, {}, {}) is empty: every axis must be at least 1", grid[0], grid[1], grid[2])]
    EmptyGrid {
        /// The grid, in programs along axes 0, 1 and 2.
        grid: [u32; 3],
    },
    /// The cluster size of [`crate::interp::run_clustered`], or of a per-thread kernel in
    /// the SIMT simulator, is 0 or above [`crate::interp::MAX_CLUSTER`].
    #[error(
        "a cluster of {cluster} programs: expected 1 to {} programs a cluster",
        super::MAX_CLUSTER
    )]
    ClusterSize {
        /// The cluster size asked for, in programs.
        cluster: u32,
    },
    /// Grid axis 0 does not split into whole clusters.
    #[error(
        "grid ({}, {}, {}) does not split into clusters of {cluster} programs: expected axis 0 to be a multiple of {cluster}, got {}",
        grid[0], grid[1], grid[2], grid[0]
    )]
    GridNotClustered {
        /// The grid, in programs along axes 0, 1 and 2.
        grid: [u32; 3],
        /// The cluster size, in programs.
        cluster: u32,
    },
    /// The programs of a cluster did not reach `cluster_reduce` equally often: one finished
    /// after `reductions` cluster reductions while another waits at the next one, at `loc`.
    #[error(
        "cluster_reduce at {loc}: program {} of the cluster of programs {} finished after {reductions} cluster reductions while program {} waits at reduction {}",
        pid(finished), cluster_programs(*first, *size), pid(waiting), reductions + 1
    )]
    ClusterReduceMismatch {
        /// Where the waiting program called `cluster_reduce`.
        loc: SourceLoc,
        /// The first program of the cluster and the cluster's size.
        first: [u32; 3],
        /// The cluster's size, in programs along axis 0.
        size: u32,
        /// The program that finished (the first of the cluster that did).
        finished: [u32; 3],
        /// The program that waits (the first of the cluster that does).
        waiting: [u32; 3],
        /// The reductions the cluster completed before.
        reductions: u64,
    },
    /// The programs of a cluster of a per-thread kernel did not pass `Stmt::ClusterBarrier`
    /// equally often, in the SIMT simulator ([`crate::interp::simt`]): one ended after
    /// `barriers` cluster barriers while another waits at the next one, which on a GPU never
    /// completes.
    #[error(
        "{}the cluster of programs {}: program {} ended after {barriers} cluster barriers while program {} waits at cluster barrier {} (a GPU would hang there)",
        lowered_from(context), cluster_programs(*first, *size), pid(ended), pid(waiting), barriers + 1
    )]
    ClusterBarrierMismatch {
        /// The last comment before the waiting program's cluster barrier: the block op it
        /// was lowered from.
        context: String,
        /// The first program of the cluster and the cluster's size.
        first: [u32; 3],
        /// The cluster's size, in programs along axis 0.
        size: u32,
        /// The program that ended (the first of the cluster that did).
        ended: [u32; 3],
        /// The program that waits (the first of the cluster that does).
        waiting: [u32; 3],
        /// The cluster barriers the cluster passed together before.
        barriers: u64,
    },
    /// A host buffer was read or built as the wrong element type or size.
    #[error("host buffer: {message}")]
    Buffer {
        /// What was asked of the buffer and what it holds.
        message: String,
    },
    /// A program faulted at an instruction.
    #[error("{op} at {loc}, program ({}, {}, {}): {message}", program[0], program[1], program[2])]
    Fault {
        /// What went wrong.
        kind: FaultKind,
        /// The op's name, as [`crate::Op::name`].
        op: &'static str,
        /// Where the kernel's author created the instruction.
        loc: SourceLoc,
        /// The program id of the faulting program.
        program: [u32; 3],
        /// The details: which element, which values, ...
        message: String,
    },
    /// A thread of a per-thread kernel faulted in the SIMT simulator ([`crate::interp::simt`]).
    #[error("{}program ({}, {}, {}){}: {message}", at(stmt, context), program[0], program[1], program[2], on_thread(*thread))]
    ThreadFault {
        /// What went wrong.
        kind: FaultKind,
        /// The faulting statement, as the per-thread IR printer writes it (its first line).
        stmt: String,
        /// The last comment before the statement: the block op it was lowered from.
        context: String,
        /// The program id of the faulting program.
        program: [u32; 3],
        /// The first faulting thread, when the fault is one thread's.
        thread: Option<u32>,
        /// The details: which element, register or lanes, which values, ...
        message: String,
    },
}

/// "`stmt` (lowered from context), " with what is known.
fn at(stmt: &str, context: &str) -> String {
    match (stmt.is_empty(), context.is_empty()) {
        (true, _) => String::new(),
        (false, true) => format!("`{stmt}`, "),
        (false, false) => format!("`{stmt}` (lowered from {context}), "),
    }
}

/// "`cluster_barrier` (lowered from context) in ", or "in " without a context.
fn lowered_from(context: &str) -> String {
    match context.is_empty() {
        true => "`cluster_barrier` in ".to_string(),
        false => format!("`cluster_barrier` (lowered from {context}) in "),
    }
}

/// "(x, y, z)".
pub(crate) fn pid(p: &[u32; 3]) -> String {
    format!("({}, {}, {})", p[0], p[1], p[2])
}

/// "(4..=7, y, z)": the programs of the cluster of `size` starting at `first`.
fn cluster_programs(first: [u32; 3], size: u32) -> String {
    format!(
        "({}..={}, {}, {})",
        first[0],
        first[0] + size.saturating_sub(1),
        first[1],
        first[2]
    )
}

fn on_thread(thread: Option<u32>) -> String {
    thread.map(|t| format!(", thread {t}")).unwrap_or_default()
}

impl InterpError {
    pub(crate) fn buffer_type(requested: ScalarType, held: ScalarType) -> InterpError {
        InterpError::Buffer {
            message: format!("read as {requested}, but it holds {held}"),
        }
    }
}

/// The kinds of [`InterpError::Fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// A load, store or atomic touched an element outside its buffer.
    OutOfBounds,
    /// A `for` loop with a step of zero.
    ZeroStep,
    /// The IR is not well formed (operand types, shapes, use before definition, ...): a bug in
    /// whatever built the kernel, which the verifier would also reject.
    InvalidIr,
    /// A vector access of `n` elements at an element index that is not a multiple of `n`
    /// (GPUs fault on it). Per-thread IR only.
    Misaligned,
    /// Threads of one store wrote different values to one element: the result would depend
    /// on the hardware's order. Per-thread IR only.
    RacingStores,
    /// An access by one thread to an element of shared or global memory that another thread,
    /// of its warp or another, wrote (or read, for a write) since the last barrier.
    /// Per-thread IR only.
    MissingBarrier,
    /// A register read before any statement wrote it. Per-thread IR only.
    UndefinedRegister,
    /// A read of shared memory that the program has not written. Per-thread IR only.
    Uninitialized,
    /// An `if` or `while` condition that differs between the threads of a program.
    /// Per-thread IR only.
    DivergentControlFlow,
    /// A `device_assert` whose condition failed.
    AssertionFailed,
    /// A value broke its author's hint (`multiple_of`, `max_contiguous`, `max_constancy`),
    /// which compiled kernels trust.
    BrokenHint,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::OutOfBounds => "out of bounds",
            FaultKind::AssertionFailed => "assertion failed",
            FaultKind::BrokenHint => "broken hint",
            FaultKind::ZeroStep => "zero step",
            FaultKind::InvalidIr => "invalid IR",
            FaultKind::Misaligned => "misaligned vector access",
            FaultKind::RacingStores => "racing stores",
            FaultKind::MissingBarrier => "missing barrier",
            FaultKind::UndefinedRegister => "undefined register",
            FaultKind::Uninitialized => "uninitialized shared memory",
            FaultKind::DivergentControlFlow => "divergent control flow",
        })
    }
}

/// A fault without its location; [`crate::interp::eval`] adds the op, location and program.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fault {
    pub kind: FaultKind,
    pub message: String,
}

impl Fault {
    pub fn invalid(message: impl Into<String>) -> Fault {
        Fault {
            kind: FaultKind::InvalidIr,
            message: message.into(),
        }
    }
}

/// Shorthand for a [`FaultKind::InvalidIr`] fault with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::interp::error::Fault::invalid(format!($($arg)*))
    };
}
pub(crate) use invalid;
