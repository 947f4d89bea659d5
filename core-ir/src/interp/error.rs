//! The interpreter's errors: bad launches (arguments, grid) and faults while a program runs.

use crate::ir::SourceLoc;
use crate::types::ScalarType;
use std::fmt;

/// Why a launch could not run, or where and why a program stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InterpError {
    /// The launch passed the wrong number of arguments.
    #[error("kernel `{kernel}` takes {expected} arguments, got {got}")]
    ArgumentCount { kernel: String, expected: usize, got: usize },
    /// An argument does not fit its parameter.
    #[error("argument {index} (`{name}`): expected {expected}, got {got}")]
    BadArgument { index: usize, name: String, expected: String, got: String },
    /// Some axis of the grid is zero.
    #[error("grid ({}, {}, {}) is empty: every axis must be at least 1", grid[0], grid[1], grid[2])]
    EmptyGrid { grid: [u32; 3] },
    /// A host buffer was read or built as the wrong element type or size.
    #[error("host buffer: {message}")]
    Buffer { message: String },
    /// A program faulted at an instruction.
    #[error("{op} at {loc}, program ({}, {}, {}): {message}", program[0], program[1], program[2])]
    Fault {
        kind: FaultKind,
        /// The op's name, as [`crate::Op::name`].
        op: &'static str,
        /// Where the kernel's author created the instruction.
        loc: SourceLoc,
        /// The program id of the faulting program.
        program: [u32; 3],
        message: String,
    },
}

impl InterpError {
    pub(crate) fn buffer_type(requested: ScalarType, held: ScalarType) -> InterpError {
        InterpError::Buffer { message: format!("read as {requested}, but it holds {held}") }
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
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::OutOfBounds => "out of bounds",
            FaultKind::ZeroStep => "zero step",
            FaultKind::InvalidIr => "invalid IR",
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
        Fault { kind: FaultKind::InvalidIr, message: message.into() }
    }
}

/// Shorthand for a [`FaultKind::InvalidIr`] fault with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::interp::error::Fault::invalid(format!($($arg)*))
    };
}
pub(crate) use invalid;
