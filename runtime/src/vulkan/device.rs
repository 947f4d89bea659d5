//! Opening a wgpu device: the adapter, its device and queue, and the error handling that
//! turns wgpu's validation errors into `Result`s.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::adapters::{instance, pick_best, raw_adapters, AdapterSummary};
use super::batch::Batch;
use super::error::WgpuError;
use super::pipeline::{BindingLayout, LayoutObjects};
use super::properties::{WgpuDeviceProperties, WgpuFeatures};

/// The optional features a device is opened with, when the adapter has them. Cooperative
/// matrices are experimental in wgpu and only enabled on request
/// ([`WgpuDevice::open_with_cooperative_matrix`]).
pub(crate) const WANTED_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SHADER_INT64)
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_I16)
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::IMMEDIATES)
    .union(wgpu::Features::PASSTHROUGH_SHADERS);

/// One wgpu device, ready for work: its adapter, device, queue and properties.
///
/// Cloning is cheap and shares the device. Work is submitted to the one queue in the
/// order it is issued. wgpu's default reaction to an error outside an error scope is a
/// panic; this handle replaces it with a handler that keeps the error, and the next call
/// of this layer on the device returns it. Once the device is lost (a driver failure, a
/// reset, or [`wgpu::Device::destroy`]), every call of this layer on it returns
/// [`WgpuError::DeviceLost`].
#[derive(Clone)]
pub struct WgpuDevice {
    inner: Arc<Inner>,
}

struct Inner {
    index: usize,
    device: wgpu::Device,
    queue: wgpu::Queue,
    props: WgpuDeviceProperties,
    features: WgpuFeatures,
    /// Opened with `VK_KHR_pipeline_executable_properties` (see `statistics`).
    pipeline_statistics: bool,
    /// Errors raised outside an error scope, oldest first.
    uncaptured: Arc<Mutex<Vec<WgpuError>>>,
    /// Why the device was lost, once wgpu has said so.
    lost: Arc<Mutex<Option<String>>>,
    /// One bind-group layout and pipeline layout per binding shape.
    layouts: Mutex<HashMap<BindingLayout, LayoutObjects>>,
    /// Work recorded but not yet submitted.
    batch: Mutex<Batch>,
    /// Bytes of the live [`super::WgpuBuffer`]s of this device.
    live_bytes: Arc<AtomicU64>,
}

impl fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("index", &self.inner.index)
            .field("name", &self.inner.props.name)
            .field("backend", &self.inner.props.backend)
            .finish_non_exhaustive()
    }
}

impl WgpuDevice {
    /// Opens adapter `adapter_index` (an index of [`super::adapters`]), or the best
    /// adapter ([`super::best_adapter`]) when `None`, with the adapter's full limits and
    /// every feature of [`WgpuFeatures`] it has except cooperative matrices.
    ///
    /// Returns [`WgpuError::NoAdapter`] or [`WgpuError::AdapterNotFound`] (never panics)
    /// when there is no such adapter.
    pub fn open(adapter_index: Option<usize>) -> Result<Self, WgpuError> {
        Self::open_impl(adapter_index, false)
    }

    /// Like [`WgpuDevice::open`], and also enables wgpu's experimental
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` feature; [`WgpuError::MissingFeature`] when the
    /// adapter does not have it.
    ///
    /// # Safety
    ///
    /// wgpu's experimental features may have bugs that cause undefined behaviour when they
    /// are used incorrectly (see `wgpu::ExperimentalFeatures::enabled`). The caller accepts
    /// that for the shaders it runs on this device.
    pub unsafe fn open_with_cooperative_matrix(adapter_index: Option<usize>) -> Result<Self, WgpuError> {
        Self::open_impl(adapter_index, true)
    }

    fn open_impl(adapter_index: Option<usize>, cooperative_matrix: bool) -> Result<Self, WgpuError> {
        let instance = instance();
        // Asked to validate, never run unvalidated.
        super::validation::check_available()?;
        let adapters = raw_adapters(&instance);
        if adapters.is_empty() {
            return Err(WgpuError::NoAdapter);
        }
        let index = match adapter_index {
            Some(i) if i < adapters.len() => i,
            Some(i) => {
                return Err(WgpuError::AdapterNotFound {
                    index: i,
                    count: adapters.len(),
                })
            }
            None => {
                let summaries: Vec<_> = adapters
                    .iter()
                    .enumerate()
                    .map(|(i, a)| AdapterSummary::from_info(i, &a.get_info()))
                    .collect();
                pick_best(&summaries).ok_or(WgpuError::NoAdapter)?.index
            }
        };
        let adapter = &adapters[index];
        let props = WgpuDeviceProperties::from_adapter(adapter);
        let mut required = adapter.features() & WANTED_FEATURES;
        let mut experimental = wgpu::ExperimentalFeatures::disabled();
        if cooperative_matrix {
            if !props.features.cooperative_matrix {
                return Err(WgpuError::MissingFeature {
                    feature: "EXPERIMENTAL_COOPERATIVE_MATRIX",
                });
            }
            required |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: the caller of `open_with_cooperative_matrix` accepted wgpu's terms.
            experimental = unsafe { wgpu::ExperimentalFeatures::enabled() };
        }
        let mut limits = adapter.limits();
        if !required.contains(wgpu::Features::IMMEDIATES) {
            // A non-zero immediate size needs the feature.
            limits.max_immediate_size = 0;
        }
        let desc = wgpu::DeviceDescriptor {
            label: Some("rutile"),
            required_features: required,
            required_limits: limits,
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // With subgroup operations on 16- and 64-bit types and the driver's pipeline
        // statistics (for register counts) where the adapter has them, else the usual way.
        let opened = match super::open::open_device(adapter, &desc) {
            Some(opened) => opened.map(|o| (o.device, o.queue, o.pipeline_statistics)),
            None => pollster::block_on(adapter.request_device(&desc)).map(|(d, q)| (d, q, false)),
        };
        let (device, queue, pipeline_statistics) = opened.map_err(|e| WgpuError::RequestDevice {
            message: super::error::with_sources(&e),
        })?;
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let error = WgpuError::from_wgpu(&error);
            match sink.lock() {
                Ok(mut list) => list.push(error),
                Err(poisoned) => poisoned.into_inner().push(error),
            }
        }));
        // wgpu calls this when the driver loses the device, or on the first poll after
        // `destroy`; from then on the device's objects are invalid.
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            let reason = match reason {
                wgpu::DeviceLostReason::Destroyed => "it was destroyed".to_string(),
                wgpu::DeviceLostReason::Unknown if message.is_empty() => "the driver gave no reason".to_string(),
                wgpu::DeviceLostReason::Unknown => message,
            };
            lock(&lost_sink).get_or_insert(reason);
        });
        // What the layer said of the raw calls that read the adapter's properties and of
        // the device's creation.
        super::validation::take_error("opening the device")?;
        let mut features = WgpuFeatures::from_wgpu(device.features());
        features.spirv_passthrough =
            device.features().contains(wgpu::Features::PASSTHROUGH_SHADERS) && props.features.spirv_passthrough;
        Ok(WgpuDevice {
            inner: Arc::new(Inner {
                index,
                device,
                queue,
                props,
                features,
                pipeline_statistics,
                uncaptured,
                lost,
                layouts: Mutex::new(HashMap::new()),
                batch: Mutex::new(Batch::default()),
                live_bytes: Arc::new(AtomicU64::new(0)),
            }),
        })
    }

    /// What the adapter reports: identity, limits (all of which the device was opened
    /// with) and the features the adapter has.
    pub fn properties(&self) -> &WgpuDeviceProperties {
        &self.inner.props
    }

    /// The features enabled on this device (a subset of [`Self::properties`]' features).
    pub fn features(&self) -> &WgpuFeatures {
        &self.inner.features
    }

    /// Whether the driver reports compiled pipelines' statistics to rutile
    /// (`VK_KHR_pipeline_executable_properties`, enabled when the device opened).
    pub fn has_pipeline_statistics(&self) -> bool {
        self.inner.pipeline_statistics
    }

    /// Registers per invocation of the compute entry point `entry` of the SPIR-V `words`
    /// as this device's driver compiles it, for bindings shaped as `layout`; `None` where
    /// the driver does not say ([`Self::has_pipeline_statistics`]). With `report`, every
    /// statistic the driver gives and the internal representations it offers (machine code
    /// on some drivers; NVIDIA's offers none) are written to that file as text.
    ///
    /// # Safety
    /// `words` must be valid SPIR-V whose bindings are those `layout` describes.
    pub unsafe fn register_count(
        &self,
        words: &[u32],
        entry: &str,
        layout: super::BindingLayout,
        report: Option<&std::path::Path>,
    ) -> Option<u32> {
        if !self.has_pipeline_statistics() {
            return None;
        }
        // SAFETY: passed on from the caller.
        let count = unsafe { super::statistics::register_count(self.raw(), words, entry, layout, report) };
        // The layer's errors about these raw calls come back with the next call of this
        // layer; say now what they were about.
        super::validation::attribute_pending("reading a kernel's register count through raw Vulkan calls");
        count
    }

    /// Bytes of this device's live storage buffers ([`super::WgpuBuffer`]), as rutile
    /// counts them (allocations, padding included).
    pub fn buffer_bytes(&self) -> u64 {
        self.inner.live_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of the live allocations of wgpu's memory allocator on this device: rutile's
    /// buffers and wgpu's own (staging, uniform and query buffers), as wgpu counts them.
    /// `None` where the backend gives no report (Vulkan does). Buffers dropped while work
    /// that uses them is queued are freed once it finishes: synchronize first.
    pub fn allocated_bytes(&self) -> Option<u64> {
        self.inner
            .device
            .generate_allocator_report()
            .map(|report| report.total_allocated_bytes)
    }

    pub(crate) fn live_bytes(&self) -> &Arc<AtomicU64> {
        &self.inner.live_bytes
    }

    /// The adapter's index in [`super::adapters`]' list.
    pub fn adapter_index(&self) -> usize {
        self.inner.index
    }

    /// The wgpu device, for work this layer does not cover.
    pub fn raw(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The device's queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// True when `other` is a handle of the same device.
    pub fn same_device(&self, other: &WgpuDevice) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Waits until all work submitted to the queue has finished, and reports any error
    /// wgpu raised outside an error scope since the last call of this layer.
    pub fn synchronize(&self) -> Result<(), WgpuError> {
        self.wait()?;
        self.take_uncaptured()
    }

    /// [`WgpuError::DeviceLost`] once the device is lost.
    pub fn check_lost(&self) -> Result<(), WgpuError> {
        match lock(&self.inner.lost).as_ref() {
            Some(reason) => Err(WgpuError::DeviceLost { reason: reason.clone() }),
            None => Ok(()),
        }
    }

    /// Loses the device as a driver failure would, for testing what follows: destroys it
    /// and waits for it, which makes wgpu report the loss.
    #[doc(hidden)]
    pub fn simulate_loss(&self) {
        self.inner.device.destroy();
        // wgpu reports the loss at the first poll that finds the queue empty; the poll's
        // own result is of no interest here.
        let _ = self.inner.device.poll(wgpu::PollType::wait_indefinitely());
    }

    /// Submits the recorded work, then blocks until the queue is idle and mapping
    /// callbacks have run.
    pub(crate) fn wait(&self) -> Result<(), WgpuError> {
        self.check_lost()?;
        self.flush()?;
        let polled = self.inner.device.poll(wgpu::PollType::wait_indefinitely());
        // The poll is where wgpu reports a loss.
        self.check_lost()?;
        polled.map(|_| ()).map_err(|e| WgpuError::Internal {
            message: format!("waiting for the device failed: {e}"),
        })
    }

    /// Runs `f` inside out-of-memory, internal and validation error scopes and turns the
    /// first error caught (validation first) into an `Err` naming `what`. On a lost device
    /// `f` does not run.
    pub(crate) fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T, WgpuError> {
        self.check_lost()?;
        let device = &self.inner.device;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        // Scopes are popped in reverse order of pushing, as wgpu requires.
        let validation = pollster::block_on(validation.pop());
        let internal = pollster::block_on(internal.pop());
        let oom = pollster::block_on(oom.pop());
        if let Some(error) = validation.or(internal).or(oom) {
            // On a lost device every object is invalid; the loss is the error to report.
            // A destroyed device's loss is reported at the next poll.
            let _ = device.poll(wgpu::PollType::Poll);
            self.check_lost()?;
            return Err(with_context(WgpuError::from_wgpu(&error), what));
        }
        // What the validation layer said of the Vulkan calls `f` made.
        super::validation::take_error(what)?;
        self.take_uncaptured()?;
        Ok(value)
    }

    /// Returns (and forgets) the oldest error raised outside an error scope, if any, then
    /// the oldest error of the validation layer's (with `RUTILE_VALIDATION=1`).
    pub(crate) fn take_uncaptured(&self) -> Result<(), WgpuError> {
        self.check_lost()?;
        {
            let mut list = lock(&self.inner.uncaptured);
            if !list.is_empty() {
                let first = list.remove(0);
                list.clear();
                return Err(first);
            }
        }
        super::validation::take_error("work submitted earlier, or a call outside rutile")
    }

    pub(crate) fn batch(&self) -> &Mutex<Batch> {
        &self.inner.batch
    }

    pub(crate) fn layouts(&self) -> MutexGuard<'_, HashMap<BindingLayout, LayoutObjects>> {
        lock(&self.inner.layouts)
    }
}

/// Locks a mutex, recovering the data if a thread panicked while holding it (the data
/// here stays consistent: each update is a single insert or push).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn with_context(error: WgpuError, what: &str) -> WgpuError {
    let add = |message: String| format!("{what}: {message}");
    match error {
        WgpuError::Validation { message } => WgpuError::Validation { message: add(message) },
        WgpuError::Internal { message } => WgpuError::Internal { message: add(message) },
        WgpuError::OutOfMemory { message } => WgpuError::OutOfMemory { message: add(message) },
        other => other,
    }
}
