//! Why a kernel cannot be generated.

/// An error of [`crate::emit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PtxError {
    /// The kernel fails [`rutile_ir::thread::verify`] (a bug in the lowering).
    #[error("invalid per-thread kernel: {0}")]
    InvalidKernel(String),
    /// The target is older than the generator supports, or the kernel's shape does not fit
    /// it (warp size, threads per program, name, cluster, register limit).
    #[error("kernel `{kernel}` cannot target {target}: {reason}")]
    Target {
        /// The kernel's name.
        kernel: String,
        /// The target, as [`PtxTarget`](crate::PtxTarget) displays it (`sm_90 (PTX 8.0)`).
        target: String,
        /// What does not fit.
        reason: String,
    },
    /// A parameter type the PTX calling convention of this backend does not accept.
    #[error("parameter `{name}` of type {ty} is not supported by the PTX backend: {reason}")]
    Param {
        /// The parameter's name.
        name: String,
        /// Its type, as the IR prints it.
        ty: String,
        /// Why it is refused, and what to pass instead.
        reason: String,
    },
    /// A statement with no PTX translation for this target (an op the target lacks, or one
    /// the backend does not implement yet). `statement` is the statement in the per-thread
    /// IR's text form.
    #[error("{reason} (in `{statement}`)")]
    Unsupported {
        /// The statement, as the per-thread IR's printer writes it (its first line).
        statement: String,
        /// What it needs that the target or the backend lacks.
        reason: String,
    },
}
