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
        /// The kernel's name.
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
        /// The code generator's output language: `PTX` or `SPIR-V`.
        backend: &'static str,
        /// The kernel's name.
        kernel: String,
        /// What the code generator could not translate, or why the device cannot run it.
        message: String,
    },
    /// The launch's arguments do not match the kernel's parameters.
    #[error("kernel `{kernel}`: {message}")]
    Argument {
        /// The kernel's name, or the operation's where no kernel of rutile's is involved
        /// (`do_bench`, `cuBLAS matmul`).
        kernel: String,
        /// Which argument is wrong, and what was expected of it.
        message: String,
    },
    /// The launch configuration is invalid for the kernel or the device.
    #[error("kernel `{kernel}`: invalid launch: {message}")]
    Launch {
        /// The kernel's name.
        kernel: String,
        /// What in the configuration is invalid (the grid, `num_warps`, the cluster, ...),
        /// and the limit it breaks.
        message: String,
    },
    /// A buffer was used with the wrong element type, length or device.
    #[error("buffer: {0}")]
    Buffer(String),
    /// The autotuner could not pick a configuration (none given, or none ran).
    #[error("autotuning `{name}`: {message}")]
    Autotune {
        /// The autotuner's name ([`crate::autotune::Autotuner::new`]); for a missing
        /// meta-parameter ([`crate::autotune::Config::value`]), the configuration's text.
        name: String,
        /// What went wrong: the configurations given are invalid (none, one listed twice,
        /// `num_warps` or `num_stages` of 0), none ran (each one's reason), or a
        /// meta-parameter is missing.
        message: String,
    },
    /// No device of the requested kind is present.
    #[error("no device: {0}")]
    NoDevice(String),
    /// The device was lost (a fault that leaves the CUDA context unusable, a driver reset,
    /// a destroyed wgpu device): its buffers and compiled kernels can no longer be used, and
    /// every later operation on it fails the same way. A wgpu device opens again; after a
    /// CUDA fault, NVIDIA's driver (580, on an H100) refuses a new context in the same
    /// process too (opening it again is this error), so the process must restart.
    #[error("the {backend} device was lost ({reason}); its buffers and compiled kernels can no longer be used: {}", lost_advice(.backend))]
    DeviceLost {
        /// The API the device was lost in: `cuda` or `wgpu`.
        backend: &'static str,
        /// What lost it: on CUDA the failing call and its error, on wgpu the reason wgpu
        /// gives.
        reason: String,
    },
    /// A device operation failed (wgpu and other APIs).
    #[error("{backend}: {message}")]
    Device {
        /// The API or library that failed: `wgpu` or `cuBLAS`.
        backend: &'static str,
        /// The failure, as the API or library reported it.
        message: String,
    },
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
        /// The element type of the buffer asked for.
        elem: ScalarType,
        /// The buffer's length asked for, in elements.
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
    Environment {
        /// The variable's name, e.g. [`crate::device::REQUIRE_ENV`].
        variable: &'static str,
        /// What is wrong with its value, or what it asked for that is missing.
        message: String,
    },
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
