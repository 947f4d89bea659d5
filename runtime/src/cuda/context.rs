//! Opening a CUDA device: its context, its stream and its properties.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::availability::probe;
use super::error::{CudaError, DriverResultExt};
use super::properties::CudaDeviceProperties;

/// One CUDA device, ready for work: its primary context, one stream that all work of this
/// handle goes to (so work runs in the order it was issued), and its properties.
///
/// Cloning is cheap and shares the context and the stream.
#[derive(Debug, Clone)]
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    props: Arc<CudaDeviceProperties>,
}

impl CudaDevice {
    /// How many CUDA devices the driver sees.
    ///
    /// Returns [`CudaError::NoDriver`] when the driver cannot be loaded, and `Ok(0)` when it
    /// loads but sees no device.
    pub fn count() -> Result<usize, CudaError> {
        match probe() {
            Ok(info) => Ok(info.device_count),
            Err(CudaError::NoDevice { count: 0, .. }) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Opens device `ordinal`: retains its primary context, creates a stream and reads its
    /// properties.
    ///
    /// Returns [`CudaError::NoDriver`] or [`CudaError::NoDevice`] (never panics) when CUDA
    /// is not usable here.
    pub fn open(ordinal: usize) -> Result<Self, CudaError> {
        let info = probe().map_err(|e| match e {
            CudaError::NoDevice { count, .. } => CudaError::NoDevice { ordinal, count },
            other => other,
        })?;
        if ordinal >= info.device_count {
            return Err(CudaError::NoDevice {
                ordinal,
                count: info.device_count,
            });
        }
        let ctx = CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")?;
        // All work of this handle goes to one stream, which orders it; cudarc's per-buffer
        // event tracking between streams is not needed and would cost two events a buffer.
        // SAFETY: called before any stream or buffer of this context object exists.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().call("cuStreamCreate")?;
        let props = CudaDeviceProperties::query(ctx.cu_device(), ordinal, info.version)?;
        Ok(CudaDevice {
            ctx,
            stream,
            props: Arc::new(props),
        })
    }

    /// The device's properties, read once when it was opened.
    pub fn properties(&self) -> &CudaDeviceProperties {
        &self.props
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.props.ordinal
    }

    /// Free and total device memory in bytes, as `(free, total)`.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        self.ctx.mem_get_info().call("cuMemGetInfo")
    }

    /// Waits until all work issued on this device's stream has finished, and reports any
    /// error it raised (e.g. an illegal memory access in a kernel).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().call("cuStreamSynchronize")?;
        // Errors of calls that could not return one (frees in destructors) surface here.
        self.ctx.check_err().call("an earlier asynchronous call")
    }

    /// The cudarc context, for the other parts of this module.
    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all work of this handle goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The properties, shared with modules loaded on this device.
    pub(crate) fn shared_properties(&self) -> &Arc<CudaDeviceProperties> {
        &self.props
    }

    /// Makes this device's context current on the calling thread (needed before raw calls).
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passes everywhere: without a driver or device, `open` must return the matching
    /// error (not panic); with one, the properties must be sane.
    #[test]
    fn open_gives_device_or_clean_error() {
        match CudaDevice::open(0) {
            Ok(dev) => {
                let p = dev.properties();
                assert_eq!(p.warp_size, 32);
                assert!(p.multiprocessor_count > 0);
                assert!(p.compute_capability.0 >= 3);
                assert!(p.max_threads_per_block >= 512);
                assert!(p.shared_memory_per_block_optin >= p.shared_memory_per_block);
                assert!(p.total_memory > 0);
                assert!(!p.name.is_empty());
                let (free, total) = dev.memory_info().unwrap();
                assert!(free <= total && total > 0);
                dev.synchronize().unwrap();
                assert!(CudaDevice::count().unwrap() >= 1);
            }
            Err(e) => {
                assert!(
                    matches!(e, CudaError::NoDriver { .. } | CudaError::NoDevice { .. }),
                    "unexpected error: {e}"
                );
                assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn out_of_range_ordinal_is_an_error() {
        match CudaDevice::open(1 << 20) {
            Err(CudaError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, 1 << 20),
            Err(CudaError::NoDriver { .. }) => {}
            other => panic!("expected NoDevice or NoDriver, got {other:?}"),
        }
    }
}
