//! The error type of the CUDA driver layer.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;

/// Everything that can go wrong in the CUDA driver layer.
///
/// No function of [`crate::cuda`] panics on a missing driver, a missing device or a
/// failing driver call: each failure comes back as one of these variants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The CUDA driver library (`libcuda.so.1` / `nvcuda.dll`) could not be loaded or
    /// initialised.
    #[error(
        "CUDA driver not available: {reason}. Install the NVIDIA driver, or add the folder \
         holding libcuda.so.1 to LD_LIBRARY_PATH"
    )]
    NoDriver {
        /// What was tried and what failed.
        reason: String,
    },

    /// The driver loaded, but the requested device does not exist.
    #[error("{}", no_device_message(*ordinal, *count))]
    NoDevice {
        /// The ordinal that was asked for.
        ordinal: usize,
        /// How many CUDA devices the driver reports.
        count: usize,
    },

    /// A driver call returned an error code.
    #[error("CUDA driver call {call} failed: {code}")]
    Driver {
        /// The driver entry point, e.g. `cuMemAlloc`.
        call: &'static str,
        /// The `CUresult` name, number and description.
        code: String,
    },

    /// A driver call failed with an error that leaves the context unusable (a kernel's
    /// illegal address or instruction, a failed or timed-out launch, an uncorrectable ECC
    /// error, a device that fell off the bus): every later call in the process fails the
    /// same way, and the process must open the device anew, or restart.
    #[error(
        "CUDA driver call {call} failed with {code}: the device was lost; the CUDA context is unusable \
         and every later call on it fails"
    )]
    ContextLost {
        /// The driver entry point, e.g. `cuStreamSynchronize`.
        call: &'static str,
        /// The `CUresult` name, number and description.
        code: String,
    },

    /// The driver's PTX JIT compiler rejected a module.
    #[error("PTX JIT compilation failed with {code}; driver log:\n{log}")]
    JitFailed {
        /// The `CUresult` of `cuModuleLoadDataEx`.
        code: String,
        /// The JIT error log (ptxas messages with line numbers), or a note if it was empty.
        log: String,
    },

    /// A module does not contain a kernel of that name.
    #[error("kernel `{name}` not found in the module (check the `.entry` name in the PTX)")]
    FunctionNotFound {
        /// The requested kernel name.
        name: String,
    },

    /// A launch was refused before reaching the driver (bad grid, block or arguments).
    #[error("invalid kernel launch: {what}")]
    InvalidLaunch {
        /// Which dimension or argument is wrong, its value and the limit.
        what: String,
    },

    /// A kernel asked for more shared memory per block than the device can give.
    #[error(
        "kernel needs {requested} bytes of shared memory per block (static + dynamic), but \
         the device allows at most {limit} bytes per block even with the opt-in; reduce the \
         tile sizes or the number of pipeline stages"
    )]
    OutOfSharedMemory {
        /// Static plus dynamic shared memory, in bytes.
        requested: usize,
        /// The device's opt-in maximum per block, in bytes.
        limit: usize,
    },

    /// An allocation the device's memory cannot hold. Not sticky: the context keeps
    /// working.
    #[error(
        "out of device memory: {call} of {requested} bytes failed with {code}; the device has {total} bytes{}",
        free.map(|f| format!(", {f} of them free")).unwrap_or_default()
    )]
    OutOfMemory {
        /// The driver entry point, e.g. `cuMemAllocAsync`.
        call: &'static str,
        /// The bytes asked for.
        requested: usize,
        /// The device's memory, in bytes (`cuDeviceTotalMem`).
        total: usize,
        /// Its free memory after the failure, in bytes (`cuMemGetInfo`), where the driver
        /// said.
        free: Option<usize>,
        /// The `CUresult` name, number and description.
        code: String,
    },

    /// A host slice does not have the buffer's length.
    #[error("buffer size mismatch: the device buffer holds {expected} elements, the host slice {got}")]
    BufferSize {
        /// Elements in the device buffer.
        expected: usize,
        /// Elements in the host slice.
        got: usize,
    },

    /// An argument that can never be valid (e.g. a PTX string with a NUL byte).
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What is wrong with it.
        what: String,
    },
}

fn no_device_message(ordinal: usize, count: usize) -> String {
    if count == 0 {
        "no CUDA device found: the driver loaded but reports 0 devices (check \
         CUDA_VISIBLE_DEVICES and nvidia-smi)"
            .to_string()
    } else {
        format!(
            "CUDA device {ordinal} does not exist: the driver reports {count} device(s), \
             ordinals 0..{count}"
        )
    }
}

/// Describes a driver error code as `NAME (number): description`.
pub(crate) fn describe(err: DriverError) -> String {
    let code = err.0;
    // The error string comes from the driver; it is only asked for once the driver is
    // loaded, which is the case for every `DriverError` value.
    match err.error_string() {
        Ok(text) => format!("{code:?} ({}): {}", code as u32, text.to_string_lossy()),
        Err(_) => format!("{code:?} ({})", code as u32),
    }
}

/// Whether a driver error is "sticky": the CUDA documentation says the context cannot be
/// used any more after it (the process is in an inconsistent state and further calls return
/// the same error), as opposed to an error of the one call.
pub(crate) fn is_sticky(code: CUresult) -> bool {
    use CUresult as R;
    matches!(
        code,
        R::CUDA_ERROR_ILLEGAL_ADDRESS
            | R::CUDA_ERROR_LAUNCH_FAILED
            | R::CUDA_ERROR_LAUNCH_TIMEOUT
            | R::CUDA_ERROR_HARDWARE_STACK_ERROR
            | R::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | R::CUDA_ERROR_MISALIGNED_ADDRESS
            | R::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | R::CUDA_ERROR_INVALID_PC
            | R::CUDA_ERROR_ASSERT
            | R::CUDA_ERROR_ECC_UNCORRECTABLE
            | R::CUDA_ERROR_NVLINK_UNCORRECTABLE
            | R::CUDA_ERROR_DEVICE_UNAVAILABLE
            | R::CUDA_ERROR_CONTEXT_IS_DESTROYED
            | R::CUDA_ERROR_EXTERNAL_DEVICE
    )
}

impl CudaError {
    /// Wraps a failed driver call.
    pub(crate) fn driver(call: &'static str, err: DriverError) -> Self {
        Self::from_code(call, err.0, describe(err))
    }

    /// The error of `call` failing with `code`, described as `description` (by
    /// [`describe`]): [`CudaError::ContextLost`] for sticky errors, else
    /// [`CudaError::Driver`].
    pub(crate) fn from_code(call: &'static str, code: CUresult, description: String) -> Self {
        if is_sticky(code) {
            CudaError::ContextLost {
                call,
                code: description,
            }
        } else {
            CudaError::Driver {
                call,
                code: description,
            }
        }
    }

    /// True for [`CudaError::ContextLost`]: the device must be opened again.
    pub fn is_lost(&self) -> bool {
        matches!(self, CudaError::ContextLost { .. })
    }

    /// True for the errors that mean "no usable CUDA here" rather than a bug:
    /// [`CudaError::NoDriver`] and [`CudaError::NoDevice`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, CudaError::NoDriver { .. } | CudaError::NoDevice { .. })
    }
}

/// Adds the driver entry point's name to a cudarc result.
pub(crate) trait DriverResultExt<T> {
    /// Maps the error to [`CudaError::Driver`] naming `call`.
    fn call(self, call: &'static str) -> Result<T, CudaError>;
}

impl<T> DriverResultExt<T> for Result<T, DriverError> {
    fn call(self, call: &'static str) -> Result<T, CudaError> {
        self.map_err(|e| CudaError::driver(call, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let e = CudaError::NoDevice { ordinal: 3, count: 2 };
        assert!(e.to_string().contains("device 3"), "{e}");
        assert!(e.to_string().contains("2 device"), "{e}");
        let e = CudaError::NoDevice { ordinal: 0, count: 0 };
        assert!(e.to_string().contains("0 devices"), "{e}");
        let e = CudaError::OutOfSharedMemory {
            requested: 300_000,
            limit: 232_448,
        };
        assert!(
            e.to_string().contains("300000") && e.to_string().contains("232448"),
            "{e}"
        );
        let e = CudaError::BufferSize { expected: 4, got: 5 };
        assert!(
            e.to_string().contains("4 elements") && e.to_string().contains("5"),
            "{e}"
        );
        assert!(CudaError::NoDriver { reason: "x".into() }.is_unavailable());
        assert!(!CudaError::InvalidLaunch { what: "x".into() }.is_unavailable());
    }

    /// Sticky errors (the context is unusable) say that the device was lost; others name
    /// the failed call only. No driver is needed: the description is given.
    #[test]
    fn sticky_errors_are_a_lost_device() {
        use CUresult as R;
        for code in [
            R::CUDA_ERROR_ILLEGAL_ADDRESS,
            R::CUDA_ERROR_LAUNCH_FAILED,
            R::CUDA_ERROR_DEVICE_UNAVAILABLE,
            R::CUDA_ERROR_MISALIGNED_ADDRESS,
            R::CUDA_ERROR_ECC_UNCORRECTABLE,
        ] {
            let e = CudaError::from_code("cuStreamSynchronize", code, format!("{code:?} ({})", code as u32));
            assert!(e.is_lost(), "{e}");
            let text = e.to_string();
            assert!(
                text.contains("cuStreamSynchronize")
                    && text.contains(&format!("{code:?}"))
                    && text.contains("the device was lost; the CUDA context is unusable"),
                "{text}"
            );
        }
        for code in [R::CUDA_ERROR_OUT_OF_MEMORY, R::CUDA_ERROR_INVALID_VALUE] {
            let e = CudaError::from_code("cuMemAlloc", code, format!("{code:?}"));
            assert!(!e.is_lost(), "{e}");
            assert_eq!(e.to_string(), format!("CUDA driver call cuMemAlloc failed: {code:?}"));
        }
    }
}
