//! Errors of kernel construction and verification.

use crate::ir::SourceLoc;
use std::fmt;

/// One problem in a kernel: the op, where the kernel author wrote it, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The op's name as in `triton.language` (`load`, `add`, `for`, ...).
    pub op: String,
    /// Where the kernel author's code created the op (`<kernel>:0:0` for a malformed
    /// parameter that the verifier finds).
    pub loc: SourceLoc,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` at {}: {}", self.op, self.loc, self.message)
    }
}

/// The errors that kept a kernel from being built (or that the verifier found), in the
/// order they were made. Ops that only failed because an operand had failed are not listed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct BuildError {
    /// The name of the kernel.
    pub kernel: String,
    /// The problems, at least one, in the order they were found.
    pub diagnostics: Vec<Diagnostic>,
}

impl BuildError {
    /// The first diagnostic (there is always at least one).
    pub fn first(&self) -> &Diagnostic {
        &self.diagnostics[0]
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.diagnostics.len();
        write!(
            f,
            "kernel `{}`: {} error{}",
            self.kernel,
            n,
            if n == 1 { "" } else { "s" }
        )?;
        for d in &self.diagnostics {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}
