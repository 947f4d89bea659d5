//! Finding out, without panicking, whether a CUDA driver and device are usable.
//!
//! cudarc loads `libcuda` lazily and panics when the library or one of its symbols is
//! missing. Every entry point of [`crate::cuda`] goes through [`probe`] first, which
//! checks that the library can be opened before any cudarc call touches it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use cudarc::driver::{result, sys};

use super::error::CudaError;

/// What the driver reported at initialisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaDriverInfo {
    /// The driver's CUDA API version as `major * 1000 + minor * 10` (13000 for CUDA 13.0).
    pub version: u32,
    /// How many CUDA devices the driver sees.
    pub device_count: usize,
}

impl CudaDriverInfo {
    /// The driver's CUDA version as `(major, minor)`.
    pub fn version_major_minor(&self) -> (u32, u32) {
        (self.version / 1000, (self.version % 1000) / 10)
    }
}

/// Loads and initialises the CUDA driver once per process and reports what it found.
///
/// Returns [`CudaError::NoDriver`] when `libcuda` cannot be loaded or `cuInit` fails, and
/// [`CudaError::NoDevice`] when the driver works but sees no device. The result is cached.
pub fn probe() -> Result<CudaDriverInfo, CudaError> {
    static PROBE: OnceLock<Result<CudaDriverInfo, CudaError>> = OnceLock::new();
    PROBE.get_or_init(probe_uncached).clone()
}

/// True when the driver loads and sees at least one device.
pub fn is_available() -> bool {
    probe().is_ok()
}

fn probe_uncached() -> Result<CudaDriverInfo, CudaError> {
    // SAFETY: `is_culib_present` only tries `dlopen` on the candidate library names.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudaError::NoDriver {
            reason: "the driver library (libcuda.so.1 / libcuda.so / nvcuda.dll) could not \
                     be loaded"
                .to_string(),
        });
    }
    // The library is present, so cudarc's loader will not panic; a library that lacks one
    // of these basic symbols would still make it panic, which the guard turns into an error.
    let initialised = catch_unwind(AssertUnwindSafe(|| -> Result<CudaDriverInfo, CudaError> {
        if let Err(e) = result::init() {
            return Err(init_error(e));
        }
        let mut version = 0;
        // SAFETY: plain out-parameter call after a successful cuInit.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(|e| CudaError::driver("cuDriverGetVersion", e))?;
        let count = result::device::get_count().map_err(|e| CudaError::driver("cuDeviceGetCount", e))?;
        Ok(CudaDriverInfo {
            version: version.max(0) as u32,
            device_count: count.max(0) as usize,
        })
    }));
    let info = match initialised {
        Ok(r) => r?,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown failure".to_string());
            return Err(CudaError::NoDriver {
                reason: format!("the driver library loaded but is unusable: {what}"),
            });
        }
    };
    if info.device_count == 0 {
        return Err(CudaError::NoDevice { ordinal: 0, count: 0 });
    }
    Ok(info)
}

/// Maps a failing `cuInit` to the error a user can act on.
fn init_error(e: result::DriverError) -> CudaError {
    use sys::CUresult as R;
    match e.0 {
        R::CUDA_ERROR_NO_DEVICE => CudaError::NoDevice { ordinal: 0, count: 0 },
        R::CUDA_ERROR_STUB_LIBRARY => CudaError::NoDriver {
            reason: "the libcuda found is the toolkit's link stub, not a driver; put the real \
                     driver's folder first in LD_LIBRARY_PATH"
                .to_string(),
        },
        R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | R::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => CudaError::NoDriver {
            reason: format!(
                "the user-mode driver does not match the kernel driver: {}",
                super::error::describe(e)
            ),
        },
        _ => CudaError::NoDriver {
            reason: format!("cuInit failed: {}", super::error::describe(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_is_consistent() {
        match probe() {
            Ok(info) => {
                assert!(info.device_count > 0);
                assert!(info.version >= 11000, "driver version {}", info.version);
                assert!(is_available());
            }
            Err(e) => {
                assert!(e.is_unavailable(), "unexpected error: {e}");
                assert!(!is_available());
            }
        }
        // Cached: a second call gives the same answer.
        assert_eq!(probe(), probe());
    }

    #[test]
    fn version_split() {
        let info = CudaDriverInfo {
            version: 12080,
            device_count: 1,
        };
        assert_eq!(info.version_major_minor(), (12, 8));
        let info = CudaDriverInfo {
            version: 13000,
            device_count: 1,
        };
        assert_eq!(info.version_major_minor(), (13, 0));
    }
}
