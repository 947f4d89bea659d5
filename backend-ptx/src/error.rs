//! Why a kernel cannot be generated.

/// An error of [`crate::emit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PtxError {
    /// The kernel fails [`rutile_ir::thread::verify`] (a bug in the lowering).
    #[error("invalid per-thread kernel: {0}")]
    InvalidKernel(String),
    /// The target is older than the generator supports, or the kernel's shape does not fit
    /// it (warp size, threads per program, shared memory, names).
    #[error("kernel `{kernel}` cannot target {target}: {reason}")]
    Target {
        kernel: String,
        target: String,
        reason: String,
    },
    /// A parameter type the PTX calling convention of this backend does not accept.
    #[error("parameter `{name}` of type {ty} is not supported by the PTX backend: {reason}")]
    Param { name: String, ty: String, reason: String },
    /// A statement with no PTX translation for this target (an op the target lacks, or one
    /// the backend does not implement yet). `statement` is the statement in the per-thread
    /// IR's text form.
    #[error("{reason} (in `{statement}`)")]
    Unsupported { statement: String, reason: String },
}
