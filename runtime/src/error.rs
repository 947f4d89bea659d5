//! The runtime's error type: every way a kernel can fail to build, compile or run.

use rutile_ir::interp::InterpError;
use rutile_ir::lower::LowerError;
use rutile_ir::BuildError;
use rutile_ir::ScalarType;

/// Errors of the rutile runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel is malformed (builder or verifier).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The kernel cannot be lowered for this device (unsupported op, too much shared memory).
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// The interpreter stopped on a fault (an out-of-bounds access, say).
    #[error(transparent)]
    Interp(#[from] InterpError),
    /// The bounds-checked debug mode ([`crate::LaunchConfig::check_bounds`]) found a fault
    /// in the interpreter; the launch did not reach the device.
    #[error(
        "kernel `{kernel}`: the bounds-checked run in the interpreter faulted, so it was not launched on \
         {device}: {source}"
    )]
    BoundsCheck {
        kernel: String,
        /// The device it would have run on, as [`crate::Device::id`].
        device: String,
        /// Boxed: the interpreter's error is large, and every `Result` of the runtime
        /// carries an `Error`.
        source: Box<InterpError>,
    },
    /// The CUDA driver reported an error (a lost context is [`Error::DeviceLost`]).
    #[error(transparent)]
    Cuda(crate::cuda::CudaError),
    /// A code generator could not translate the kernel for this device.
    #[error("{backend} code generation for kernel `{kernel}` failed: {message}")]
    Codegen {
        backend: &'static str,
        kernel: String,
        message: String,
    },
    /// The launch's arguments do not match the kernel's parameters.
    #[error("kernel `{kernel}`: {message}")]
    Argument { kernel: String, message: String },
    /// The launch configuration is invalid for the kernel or the device.
    #[error("kernel `{kernel}`: invalid launch: {message}")]
    Launch { kernel: String, message: String },
    /// A buffer was used with the wrong element type, length or device.
    #[error("buffer: {0}")]
    Buffer(String),
    /// The autotuner could not pick a configuration (none given, or none ran).
    #[error("autotuning `{name}`: {message}")]
    Autotune { name: String, message: String },
    /// No device of the requested kind is present.
    #[error("no device: {0}")]
    NoDevice(String),
    /// The device was lost (a fault that leaves the CUDA context unusable, a driver reset,
    /// a destroyed wgpu device): its buffers and compiled kernels can no longer be used, and
    /// every later operation on it fails the same way. A wgpu device opens again; after a
    /// CUDA fault, NVIDIA's driver (580, on an H100) refuses a new context in the same
    /// process too (opening it again is this error), so the process must restart.
    #[error("the {backend} device was lost ({reason}); its buffers and compiled kernels can no longer be used: {}", lost_advice(.backend))]
    DeviceLost { backend: &'static str, reason: String },
    /// A device operation failed (wgpu and other APIs).
    #[error("{backend}: {message}")]
    Device { backend: &'static str, message: String },
    /// A buffer larger than the device can give: more than its memory holds, or more than
    /// the largest buffer its API allows. Nothing was allocated, and the device keeps
    /// working.
    #[error(
        "{device}: cannot allocate {} for {len} elements of {elem}: {reason}",
        bytes_text(*requested)
    )]
    OutOfMemory {
        /// The device, as [`crate::Device::id`].
        device: String,
        elem: ScalarType,
        len: usize,
        /// The bytes asked for.
        requested: u64,
        /// Why: the device's memory (total and free, where its API says) or its limit on
        /// one buffer, and the API's own error.
        reason: String,
    },
    /// An environment variable of rutile's is malformed, or asks for what is not there
    /// (`RUTILE_REQUIRE` naming a backend that has no device that opens).
    #[error("{variable}: {message}")]
    Environment { variable: &'static str, message: String },
}

/// `n` bytes as `N bytes`, with the size in MiB or GiB after it where that is shorter to
/// read (`85045870592 bytes (79.2 GiB)`).
pub(crate) fn bytes_text(n: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if n >= GIB {
        format!("{n} bytes ({:.1} GiB)", n as f64 / GIB as f64)
    } else if n >= MIB {
        format!("{n} bytes ({:.1} MiB)", n as f64 / MIB as f64)
    } else {
        format!("{n} bytes")
    }
}

impl From<crate::cuda::CudaError> for Error {
    fn from(e: crate::cuda::CudaError) -> Self {
        match e {
            crate::cuda::CudaError::ContextLost { call, code } => Error::DeviceLost {
                backend: "cuda",
                reason: format!("{call} failed with {code}, which leaves the CUDA context unusable"),
            },
            e => Error::Cuda(e),
        }
    }
}

/// What to do about a lost device of `backend`.
fn lost_advice(backend: &str) -> &'static str {
    match backend {
        "cuda" => {
            "open the device again (after a fault on the device, the CUDA driver may refuse until the process restarts)"
        }
        _ => "open the device again",
    }
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::CudaError;
    use crate::vulkan::WgpuError;

    /// A lost CUDA context and a lost wgpu device read the same to the user.
    #[test]
    fn lost_devices_are_device_lost() {
        let e = Error::from(CudaError::ContextLost {
            call: "cuStreamSynchronize",
            code: "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered".into(),
        });
        assert!(matches!(e, Error::DeviceLost { backend: "cuda", .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "the cuda device was lost (cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700): an \
             illegal memory access was encountered, which leaves the CUDA context unusable); its buffers and \
             compiled kernels can no longer be used: open the device again (after a fault on the device, \
             the CUDA driver may refuse until the process restarts)"
        );
        let e = Error::from(WgpuError::DeviceLost {
            reason: "it was destroyed".into(),
        });
        assert_eq!(
            e.to_string(),
            "the wgpu device was lost (it was destroyed); its buffers and compiled kernels can no longer be \
             used: open the device again"
        );
        let e = Error::from(CudaError::InvalidLaunch { what: "x".into() });
        assert!(matches!(e, Error::Cuda(_)), "{e:?}");
    }
}
