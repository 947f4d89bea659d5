//! The error type of the CUDA driver layer.

use cudarc::driver::result::DriverError;

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

impl CudaError {
    /// Wraps a failed driver call.
    pub(crate) fn driver(call: &'static str, err: DriverError) -> Self {
        CudaError::Driver {
            call,
            code: describe(err),
        }
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
}
