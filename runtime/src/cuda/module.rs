//! Loading PTX into a device through the driver's JIT, keeping its logs.

use std::ffi::{c_void, CString};
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::result::DriverError;
use cudarc::driver::{sys, CudaContext};

use super::context::{CudaDevice, Health};
use super::error::{describe, CudaError, DriverResultExt};
use super::function::CudaFunction;
use super::properties::CudaDeviceProperties;

/// Size of each JIT log buffer. ptxas stops writing at the end; 64 KiB holds hundreds of
/// error lines.
const LOG_BYTES: usize = 64 * 1024;

/// A PTX module loaded (JIT-compiled) on a device.
#[derive(Debug, Clone)]
pub struct CudaModule {
    inner: Arc<ModuleHandle>,
}

/// Owns the driver's module handle; unloads it when the last module or function handle goes
/// (unless the context was lost: then the context's reset frees it).
#[derive(Debug)]
pub(crate) struct ModuleHandle {
    pub(crate) cu_module: sys::CUmodule,
    /// Dropped by hand: leaked once the context is lost (see `context`).
    pub(crate) ctx: ManuallyDrop<Arc<CudaContext>>,
    pub(crate) health: Arc<Health>,
    pub(crate) props: Arc<CudaDeviceProperties>,
    pub(crate) driver_version: u32,
    info_log: String,
}

// SAFETY: a CUmodule is a driver handle usable from any thread once its context is current;
// every use binds the context first.
unsafe impl Send for ModuleHandle {}
// SAFETY: as above; the handle is never mutated after creation.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        if self.health.is_lost() {
            return;
        }
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: the handle came from cuModuleLoadDataEx and is unloaded exactly once.
        let unloaded = unsafe { sys::cuModuleUnload(self.cu_module) }.result();
        self.ctx.record_err(unloaded);
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.ctx) };
    }
}

impl ModuleHandle {
    /// Makes the module's context current; [`CudaError::ContextLost`] once it is lost,
    /// without calling the driver.
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.health.check()?;
        self.health.note(self.ctx.bind_to_thread().call("cuCtxSetCurrent"))
    }
}

impl CudaDevice {
    /// JIT-compiles `ptx` for this device and loads it.
    ///
    /// On a JIT failure the error is [`CudaError::JitFailed`] holding ptxas's error log
    /// (with line numbers). On success the info log (register and spill counts of every
    /// kernel) is kept and available from [`CudaModule::jit_log`].
    pub fn load_ptx(&self, ptx: &str) -> Result<CudaModule, CudaError> {
        let image = CString::new(ptx).map_err(|e| CudaError::InvalidArgument {
            what: format!("the PTX text contains a NUL byte at offset {}", e.nul_position()),
        })?;
        self.bind()?;
        let mut info_log = vec![0u8; LOG_BYTES];
        let mut error_log = vec![0u8; LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_LOG_VERBOSE,
        ];
        // Option values are passed by value in pointer-sized slots, as the driver API says.
        let mut values: [*mut c_void; 5] = [
            info_log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG_BYTES),
            error_log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG_BYTES),
            std::ptr::without_provenance_mut(1),
        ];
        let mut cu_module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX; the option and value arrays have the same
        // length and the log buffers outlive the call and hold LOG_BYTES bytes each.
        let status = unsafe {
            sys::cuModuleLoadDataEx(
                &mut cu_module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let info_log = log_text(&info_log);
        if let Err(e) = status.result() {
            if super::error::is_sticky(e.0) {
                return self.health().note(Err(CudaError::driver("cuModuleLoadDataEx", e)));
            }
            let mut log = log_text(&error_log);
            if log.is_empty() {
                log = if info_log.is_empty() {
                    "(the driver wrote no log)".to_string()
                } else {
                    info_log
                };
            }
            return Err(CudaError::JitFailed { code: describe(e), log });
        }
        Ok(CudaModule {
            inner: Arc::new(ModuleHandle {
                cu_module,
                ctx: ManuallyDrop::new(self.ctx().clone()),
                health: self.health().clone(),
                props: self.shared_properties().clone(),
                driver_version: self.properties().driver_version,
                info_log,
            }),
        })
    }
}

impl CudaModule {
    /// Looks up the kernel (`.entry`) called `name` and reads its attributes. The driver
    /// has no call for the number of parameters before CUDA 13.2, so their sizes are read
    /// until it reports no more: one call past the last parameter fails, which
    /// compute-sanitizer reports as an API error. Where the count is known, use
    /// [`function_with_params`](Self::function_with_params).
    pub fn function(&self, name: &str) -> Result<CudaFunction, CudaError> {
        self.lookup(name, None)
    }

    /// [`function`](Self::function) of a kernel known to have `params` parameters: only
    /// those are asked for (a kernel with another count fails its launches' size checks).
    pub fn function_with_params(&self, name: &str, params: usize) -> Result<CudaFunction, CudaError> {
        self.lookup(name, Some(params))
    }

    fn lookup(&self, name: &str, params: Option<usize>) -> Result<CudaFunction, CudaError> {
        let c_name = CString::new(name).map_err(|_| CudaError::InvalidArgument {
            what: format!("kernel name {name:?} contains a NUL byte"),
        })?;
        self.inner.bind()?;
        let mut cu_function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let status = unsafe { sys::cuModuleGetFunction(&mut cu_function, self.inner.cu_module, c_name.as_ptr()) };
        match status {
            sys::CUresult::CUDA_SUCCESS => {}
            sys::CUresult::CUDA_ERROR_NOT_FOUND => return Err(CudaError::FunctionNotFound { name: name.to_string() }),
            other => {
                return self
                    .inner
                    .health
                    .note(Err(CudaError::driver("cuModuleGetFunction", DriverError(other))))
            }
        }
        CudaFunction::new(self.inner.clone(), cu_function, name.to_string(), params)
    }

    /// The JIT's info log of this module (ptxas `info` lines: registers, spills, shared
    /// memory and stack of each kernel). Empty when the driver took the machine code from
    /// its JIT cache instead of compiling (set `CUDA_CACHE_DISABLE=1` to always compile);
    /// [`CudaFunction::info`] has the same figures either way.
    pub fn jit_log(&self) -> &str {
        &self.inner.info_log
    }
}

/// The text of a NUL-terminated log buffer, trimmed.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_stops_at_nul_and_trims() {
        let mut buf = b"ptxas error : bad\n".to_vec();
        buf.extend_from_slice(&[0, b'x', b'y']);
        assert_eq!(log_text(&buf), "ptxas error : bad");
        assert_eq!(log_text(&[0u8; 8]), "");
        assert_eq!(log_text(b"no nul"), "no nul");
    }
}
