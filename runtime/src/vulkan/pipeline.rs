//! Compute pipelines from naga IR, SPIR-V or WGSL, with rutile's standard binding layout,
//! and a cache of them keyed by the caller.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use super::device::{lock, WgpuDevice};
use super::error::WgpuError;

/// The bindings of a rutile kernel, all in bind group 0: `storage_buffers` read-write
/// storage buffers at bindings `0..storage_buffers` (the pointer parameters, in order),
/// then the launch data (launch information and scalar parameters) as [`LaunchData`] says:
/// nothing, a uniform buffer at binding `storage_buffers`, or immediates.
///
/// Every kernel with the same shape shares one bind-group layout and pipeline layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BindingLayout {
    /// Number of storage buffers, bindings `0..storage_buffers`.
    pub storage_buffers: u32,
    /// Where the launch data goes.
    pub launch: LaunchData,
}

/// Where a pipeline reads its launch data (the bytes given to [`WgpuDevice::dispatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchData {
    /// The pipeline reads none.
    None,
    /// A uniform buffer after the storage buffers, created for each dispatch.
    Uniform,
    /// Immediates (Vulkan push constants) of this many bytes, a multiple of 4, set with
    /// each dispatch. Needs the device's `IMMEDIATES` feature and at most its
    /// `max_immediate_size` bytes.
    Immediates(u32),
}

impl BindingLayout {
    /// `storage_buffers` storage buffers, then a uniform buffer if `uniform`.
    pub fn new(storage_buffers: u32, uniform: bool) -> Self {
        BindingLayout {
            storage_buffers,
            launch: if uniform { LaunchData::Uniform } else { LaunchData::None },
        }
    }

    /// `storage_buffers` storage buffers and `bytes` of immediates.
    pub fn with_immediates(storage_buffers: u32, bytes: u32) -> Self {
        BindingLayout {
            storage_buffers,
            launch: LaunchData::Immediates(bytes),
        }
    }

    /// The uniform buffer's binding number, if there is one.
    pub fn uniform_binding(&self) -> Option<u32> {
        (self.launch == LaunchData::Uniform).then_some(self.storage_buffers)
    }

    /// Bytes of immediates the pipeline layout declares.
    pub fn immediate_size(&self) -> u32 {
        match self.launch {
            LaunchData::Immediates(bytes) => bytes,
            _ => 0,
        }
    }

    fn entries(&self) -> Vec<wgpu::BindGroupLayoutEntry> {
        let buffer = |binding, ty| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries: Vec<_> = (0..self.storage_buffers)
            .map(|b| buffer(b, wgpu::BufferBindingType::Storage { read_only: false }))
            .collect();
        if let Some(b) = self.uniform_binding() {
            entries.push(buffer(b, wgpu::BufferBindingType::Uniform));
        }
        entries
    }
}

/// The wgpu layout objects of one [`BindingLayout`].
#[derive(Debug, Clone)]
pub(crate) struct LayoutObjects {
    pub(crate) bind_group_layout: wgpu::BindGroupLayout,
    pub(crate) pipeline_layout: wgpu::PipelineLayout,
}

/// Where a kernel's code comes from.
#[derive(Debug, Clone)]
pub enum KernelSource<'a> {
    /// A naga module, as rutile's SPIR-V backend produces it (wgpu validates it again).
    Naga(Box<wgpu::naga::Module>),
    /// SPIR-V words.
    SpirV(Cow<'a, [u32]>),
    /// WGSL text.
    Wgsl(Cow<'a, str>),
    /// SPIR-V words handed to the driver as they are, unchecked by wgpu (for what a naga
    /// module cannot carry, such as `Nontemporal` loads), with the naga module they were
    /// written from (which says the bindings' sizes). Only for
    /// [`WgpuDevice::create_pipeline_trusted`], on a device with
    /// [`WgpuFeatures::spirv_passthrough`](super::WgpuFeatures::spirv_passthrough).
    SpirVPassthrough {
        /// The SPIR-V words the driver compiles.
        words: Cow<'a, [u32]>,
        /// The naga module the words were written from: the entry point and its workgroup
        /// size, and the smallest buffer each binding accepts, are read from it.
        module: Box<wgpu::naga::Module>,
    },
}

impl KernelSource<'_> {
    fn kind(&self) -> &'static str {
        match self {
            KernelSource::Naga(_) => "naga",
            KernelSource::SpirV(_) => "SPIR-V",
            KernelSource::Wgsl(_) => "WGSL",
            KernelSource::SpirVPassthrough { .. } => "SPIR-V (passed through)",
        }
    }
}

/// A compute pipeline and the layout of its bindings.
///
/// Cloning is cheap and shares the pipeline.
#[derive(Debug, Clone)]
pub struct WgpuPipeline {
    pub(crate) device: WgpuDevice,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) bind_group_layout: wgpu::BindGroupLayout,
    pub(crate) layout: BindingLayout,
    /// The smallest buffer each binding accepts, by binding number, where known.
    pub(crate) min_binding_sizes: Vec<Option<u64>>,
    entry_point: String,
}

impl WgpuPipeline {
    /// The binding layout the pipeline was created with.
    pub fn layout(&self) -> BindingLayout {
        self.layout
    }

    /// The entry point's name.
    pub fn entry_point(&self) -> &str {
        &self.entry_point
    }

    /// The device the pipeline belongs to.
    pub fn device(&self) -> &WgpuDevice {
        &self.device
    }

    /// The wgpu pipeline, for work this layer does not cover.
    pub fn raw(&self) -> &wgpu::ComputePipeline {
        &self.pipeline
    }
}

impl WgpuDevice {
    /// Compiles `source` and creates a compute pipeline for its entry point `entry_point`
    /// with the bindings `layout`.
    ///
    /// A shader that does not parse or validate, an unknown entry point, or bindings
    /// that do not match `layout` give [`WgpuError::Validation`] with wgpu's message.
    pub fn create_pipeline(
        &self,
        source: KernelSource<'_>,
        entry_point: &str,
        layout: BindingLayout,
    ) -> Result<WgpuPipeline, WgpuError> {
        // SAFETY: checked mode: wgpu adds bounds checks and loop bounds.
        unsafe { self.create_pipeline_with(source, entry_point, layout, false) }
    }

    /// Like [`Self::create_pipeline`], for code whose memory accesses are in bounds by
    /// construction and whose loops end (rutile's compiled kernels, whose accesses are
    /// guarded by the masks their author wrote, as in CUDA): wgpu adds no bounds checks, loop
    /// counters or division checks, and does not zero workgroup memory.
    ///
    /// # Safety
    /// An out-of-bounds access of such a shader is undefined behaviour on the GPU, as in
    /// CUDA: it may read or corrupt other buffers of the device.
    pub unsafe fn create_pipeline_trusted(
        &self,
        source: KernelSource<'_>,
        entry_point: &str,
        layout: BindingLayout,
    ) -> Result<WgpuPipeline, WgpuError> {
        // SAFETY: the caller vouches for the shader.
        unsafe { self.create_pipeline_with(source, entry_point, layout, true) }
    }

    /// # Safety
    /// With `trusted`, see [`Self::create_pipeline_trusted`].
    unsafe fn create_pipeline_with(
        &self,
        source: KernelSource<'_>,
        entry_point: &str,
        layout: BindingLayout,
        trusted: bool,
    ) -> Result<WgpuPipeline, WgpuError> {
        let layouts = self.layout_objects(layout)?;
        let what = format!("creating the compute pipeline `{entry_point}` from {}", source.kind());
        let (source, passthrough) = match source {
            KernelSource::Naga(module) => (wgpu::ShaderSource::Naga(Cow::Owned(*module)), None),
            KernelSource::SpirV(words) => (wgpu::ShaderSource::SpirV(words), None),
            KernelSource::Wgsl(text) => (wgpu::ShaderSource::Wgsl(text), None),
            KernelSource::SpirVPassthrough { words, module } => {
                if !trusted {
                    return Err(WgpuError::InvalidArgument {
                        what: format!(
                            "`{entry_point}`: SPIR-V passed through is not checked by wgpu: \
                             create its pipeline with `create_pipeline_trusted`"
                        ),
                    });
                }
                if !self.features().spirv_passthrough {
                    return Err(WgpuError::MissingFeature {
                        feature: "PASSTHROUGH_SHADERS (with SPIR-V 1.4)",
                    });
                }
                // wgpu knows a passed-through module's entry points only from this list.
                let Some(entry) = module.entry_points.iter().find(|e| e.name == entry_point) else {
                    return Err(WgpuError::InvalidArgument {
                        what: format!("the module passed through has no entry point `{entry_point}`"),
                    });
                };
                let entry = wgpu::PassthroughShaderEntryPoint {
                    name: Cow::Owned(entry.name.clone()),
                    workgroup_size: entry.workgroup_size.into(),
                };
                (wgpu::ShaderSource::Naga(Cow::Owned(*module)), Some((words, entry)))
            }
        };
        let min_binding_sizes = super::reflect::min_binding_sizes(&source);
        let pipeline = self.scoped(&what, || {
            let module = if let Some((words, entry)) = passthrough {
                let desc = wgpu::ShaderModuleDescriptorPassthrough {
                    label: Some(entry_point),
                    entry_points: vec![entry].into(),
                    spirv: Some(words),
                    ..Default::default()
                };
                // SAFETY: only on the trusted path (checked above): the caller vouches for the
                // shader, and the words were written from a module naga validated.
                unsafe { self.raw().create_shader_module_passthrough(desc) }
            } else {
                let desc = wgpu::ShaderModuleDescriptor {
                    label: Some(entry_point),
                    source,
                };
                if trusted {
                    // SAFETY: the caller of `create_pipeline_trusted` vouches for the shader.
                    unsafe {
                        self.raw()
                            .create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
                    }
                } else {
                    self.raw().create_shader_module(desc)
                }
            };
            self.raw().create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry_point),
                layout: Some(&layouts.pipeline_layout),
                module: &module,
                entry_point: Some(entry_point),
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: !trusted,
                    ..wgpu::PipelineCompilationOptions::default()
                },
                cache: None,
            })
        })?;
        Ok(WgpuPipeline {
            device: self.clone(),
            pipeline,
            bind_group_layout: layouts.bind_group_layout,
            layout,
            min_binding_sizes,
            entry_point: entry_point.to_string(),
        })
    }

    /// The shared layout objects for `layout`, created on first use.
    pub(crate) fn layout_objects(&self, layout: BindingLayout) -> Result<LayoutObjects, WgpuError> {
        let limit = self.properties().max_storage_buffers_per_stage;
        if layout.storage_buffers > limit {
            return Err(WgpuError::InvalidArgument {
                what: format!(
                    "{} storage buffers exceed the device's limit of {limit} per shader stage",
                    layout.storage_buffers
                ),
            });
        }
        let immediates = layout.immediate_size();
        let room = if self.features().immediates {
            self.properties().max_immediate_size
        } else {
            0
        };
        if immediates > room || immediates % 4 != 0 {
            return Err(WgpuError::InvalidArgument {
                what: format!("{immediates} bytes of immediates: the device allows a multiple of 4 up to {room}"),
            });
        }
        if let Some(objects) = self.layouts().get(&layout) {
            return Ok(objects.clone());
        }
        let objects = self.scoped("creating a bind group layout", || {
            let entries = layout.entries();
            let bind_group_layout = self.raw().create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("rutile kernel bindings"),
                entries: &entries,
            });
            let pipeline_layout = self.raw().create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("rutile kernel layout"),
                bind_group_layouts: &[Some(&bind_group_layout)],
                immediate_size: immediates,
            });
            LayoutObjects {
                bind_group_layout,
                pipeline_layout,
            }
        })?;
        // Another thread may have raced us here; either copy is equivalent, keep the first.
        Ok(self.layouts().entry(layout).or_insert(objects).clone())
    }
}

/// Compiled pipelines, keyed by a number the caller chooses (e.g. a hash of the kernel,
/// its specialisation and the device). Safe to share between threads.
#[derive(Debug, Default)]
pub struct PipelineCache {
    pipelines: Mutex<HashMap<u64, WgpuPipeline>>,
}

impl PipelineCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The pipeline cached under `key`, if any.
    pub fn get(&self, key: u64) -> Option<WgpuPipeline> {
        lock(&self.pipelines).get(&key).cloned()
    }

    /// The pipeline cached under `key`, or the one `create` makes, which is then cached.
    /// An error from `create` is returned and nothing is cached. `create` runs without
    /// the cache locked; if two threads race on one key, the first insert wins.
    pub fn get_or_create(
        &self,
        key: u64,
        create: impl FnOnce() -> Result<WgpuPipeline, WgpuError>,
    ) -> Result<WgpuPipeline, WgpuError> {
        if let Some(p) = self.get(key) {
            return Ok(p);
        }
        let pipeline = create()?;
        Ok(lock(&self.pipelines).entry(key).or_insert(pipeline).clone())
    }

    /// Caches `pipeline` under `key`, returning the one it replaces.
    pub fn insert(&self, key: u64, pipeline: WgpuPipeline) -> Option<WgpuPipeline> {
        lock(&self.pipelines).insert(key, pipeline)
    }

    /// Removes the pipeline under `key`.
    pub fn remove(&self, key: u64) -> Option<WgpuPipeline> {
        lock(&self.pipelines).remove(&key)
    }

    /// Number of cached pipelines.
    pub fn len(&self) -> usize {
        lock(&self.pipelines).len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every cached pipeline.
    pub fn clear(&self) {
        lock(&self.pipelines).clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_layout_entries() {
        let l = BindingLayout::new(3, true);
        assert_eq!(l.uniform_binding(), Some(3));
        let e = l.entries();
        assert_eq!(e.len(), 4);
        for (i, entry) in e.iter().enumerate() {
            assert_eq!(entry.binding, i as u32);
        }
        assert!(matches!(
            e[0].ty,
            wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                ..
            }
        ));
        assert!(matches!(
            e[3].ty,
            wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                ..
            }
        ));
        let l = BindingLayout::new(2, false);
        assert_eq!(l.uniform_binding(), None);
        assert_eq!(l.entries().len(), 2);
        let l = BindingLayout::with_immediates(2, 48);
        assert_eq!(l.uniform_binding(), None);
        assert_eq!(l.immediate_size(), 48);
        assert_eq!(l.entries().len(), 2);
    }
}
