//! Opening a CUDA device: its context, its stream and its properties; and what happens
//! when the context is lost.
//!
//! A fault in a kernel (an illegal address, say) is a "sticky" error: the device's primary
//! context, which every handle of the process on that device shares, fails every later
//! call. The process can go on with a new context only after the old one is reset
//! (`cuDevicePrimaryCtxReset`), which frees everything made in it. So the handles opened on
//! one context share a [`Health`]: the first sticky error any of them sees marks it lost,
//! and from then on they fail at once with that error, without calling the driver, and
//! their objects are leaked rather than freed when dropped (the driver objects are freed
//! by the reset, and a handle freed afterwards could name an object of the new context).
//! [`CudaDevice::open`] resets a lost context before it retains the device's primary
//! context again.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext, CudaStream};

use super::availability::probe;
use super::error::{CudaError, DriverResultExt};
use super::properties::CudaDeviceProperties;

/// One CUDA device, ready for work: its primary context, one stream that all work of this
/// handle goes to (so work runs in the order it was issued), and its properties.
///
/// Cloning is cheap and shares the context and the stream. Once the context is lost (a
/// fault in a kernel), every call on this handle, its clones, and the buffers, modules and
/// timers made from them fails with [`CudaError::ContextLost`]; open the device again.
#[derive(Debug, Clone)]
pub struct CudaDevice {
    // Dropped by hand: leaked once the context is lost (see the module's documentation).
    ctx: ManuallyDrop<Arc<CudaContext>>,
    stream: ManuallyDrop<Arc<CudaStream>>,
    props: Arc<CudaDeviceProperties>,
    health: Arc<Health>,
    /// Bytes of the live buffers allocated through this handle and its clones.
    live_bytes: Arc<AtomicU64>,
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.health.is_lost() {
            return;
        }
        // SAFETY: dropped once, here; the fields are not used after.
        unsafe {
            ManuallyDrop::drop(&mut self.stream);
            ManuallyDrop::drop(&mut self.ctx);
        }
    }
}

/// Whether one primary context is still usable, shared by every handle opened on it.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// The first sticky error seen in the context.
    lost: Mutex<Option<CudaError>>,
}

impl Health {
    /// True once a sticky error was seen.
    pub(crate) fn is_lost(&self) -> bool {
        self.lock().is_some()
    }

    /// The first sticky error, once the context is lost: what every later call returns.
    pub(crate) fn check(&self) -> Result<(), CudaError> {
        match self.lock().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Passes `result` on; a sticky error marks the context lost first.
    pub(crate) fn note<T>(&self, result: Result<T, CudaError>) -> Result<T, CudaError> {
        if let Err(e) = &result {
            if e.is_lost() {
                self.lock().get_or_insert_with(|| e.clone());
            }
        }
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CudaError>> {
        self.lost.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The health of the primary context of each device ordinal this process opened, current
/// generation only. Locked while a device opens, so that a lost context is reset once.
static PRIMARY: Mutex<Vec<(usize, Arc<Health>)>> = Mutex::new(Vec::new());

/// The health shared by handles opened on `ordinal`'s primary context now: after a loss,
/// the context is reset and a new health begins.
fn current_health(ordinal: usize) -> Result<Arc<Health>, CudaError> {
    let mut primary = PRIMARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let position = primary.iter().position(|(o, _)| *o == ordinal);
    if let Some(i) = position {
        if !primary[i].1.is_lost() {
            return Ok(primary[i].1.clone());
        }
        // Every allocation, module and stream of the lost context goes; its handles were
        // told (they share the lost health), so none of them calls the driver again.
        let device = result::device::get(ordinal as i32).call("cuDeviceGet")?;
        // SAFETY: resets the primary context of a valid device; nothing of the old context
        // is used after this (see above).
        unsafe { sys::cuDevicePrimaryCtxReset_v2(device) }
            .result()
            .call("cuDevicePrimaryCtxReset")?;
        // No thread should name the reset context as its current one; the new context is
        // made current by whoever uses it next. The result is of no interest: there may
        // have been none.
        // SAFETY: unbinding the calling thread's context is always allowed.
        let _ = unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
        primary.remove(i);
    }
    let health = Arc::new(Health::default());
    primary.push((ordinal, health.clone()));
    Ok(health)
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
    /// properties. When a fault lost the context that earlier handles of this device were
    /// opened on, that context is reset first (freeing its memory), so the device works
    /// again; the earlier handles stay lost.
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
        let health = current_health(ordinal)?;
        let ctx = health.note(CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain"))?;
        // All work of this handle goes to one stream, which orders it; cudarc's per-buffer
        // event tracking between streams is not needed and would cost two events a buffer.
        // SAFETY: called before any stream or buffer of this context object exists.
        unsafe { ctx.disable_event_tracking() };
        let stream = health.note(ctx.new_stream().call("cuStreamCreate"))?;
        let props = CudaDeviceProperties::query(ctx.cu_device(), ordinal, info.version)?;
        Ok(CudaDevice {
            ctx: ManuallyDrop::new(ctx),
            stream: ManuallyDrop::new(stream),
            props: Arc::new(props),
            health,
            live_bytes: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Bytes of the live buffers allocated through this handle and its clones, as rutile
    /// counts them (each buffer's allocation: at least one byte). Unlike
    /// [`Self::memory_info`], it leaves out memory the driver uses for itself and that of
    /// other handles and processes.
    pub fn buffer_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    /// True once a fault lost this device's context: every call fails with
    /// [`CudaError::ContextLost`], and [`Self::open`] gives a working device again.
    pub fn is_lost(&self) -> bool {
        self.health.is_lost()
    }

    /// The device's properties, read once when it was opened.
    pub fn properties(&self) -> &CudaDeviceProperties {
        &self.props
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.props.ordinal
    }

    /// Free and total device memory in bytes, as `(free, total)`: the whole device's, used
    /// by every process and context on it.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        self.health.check()?;
        self.health.note(self.ctx.mem_get_info().call("cuMemGetInfo"))
    }

    /// Waits until all work issued on this device's stream has finished, and reports any
    /// error it raised (e.g. an illegal memory access in a kernel, which loses the
    /// context: [`CudaError::ContextLost`]).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.health.check()?;
        self.health
            .note(self.stream.synchronize().call("cuStreamSynchronize"))?;
        // Errors of calls that could not return one (frees in destructors) surface here.
        self.health
            .note(self.ctx.check_err().call("an earlier asynchronous call"))
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

    /// The count behind [`Self::buffer_bytes`], for the buffers.
    pub(crate) fn live_bytes(&self) -> &AtomicU64 {
        &self.live_bytes
    }

    /// Whether this handle's context is usable, shared with the objects made from it.
    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Makes this device's context current on the calling thread (needed before raw
    /// calls); [`CudaError::ContextLost`] once it is lost, without calling the driver.
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.health.check()?;
        self.health.note(self.ctx.bind_to_thread().call("cuCtxSetCurrent"))
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
