//! The wgpu device layer: adapters, devices, storage buffers, compute pipelines,
//! dispatches and timing, over Vulkan (and Metal/DX12 on their platforms).
//!
//! Kernels come as naga IR (from rutile's SPIR-V backend), SPIR-V words or WGSL, with
//! rutile's binding layout: the pointer parameters as read-write storage buffers at
//! group 0, bindings `0..n`, then the launch information and scalar parameters in
//! immediates or in one uniform buffer at binding `n` ([`BindingLayout`]).
//!
//! Nothing here panics on a machine without an adapter: [`WgpuDevice::open`] returns
//! [`WgpuError::NoAdapter`]. wgpu's validation errors, which it would otherwise turn into
//! panics, come back as [`WgpuError::Validation`] with wgpu's message. With
//! `RUTILE_VALIDATION=1` the Khronos validation layer checks every Vulkan call beneath, and
//! its errors come back as [`WgpuError::ValidationLayer`] (see [`validation_report`]).
//!
//! ```no_run
//! use rutile::vulkan::{BindingLayout, KernelSource, WgpuBuffer, WgpuDevice};
//! # fn main() -> Result<(), rutile::vulkan::WgpuError> {
//! let device = WgpuDevice::open(None)?;
//! let wgsl = "
//!     @group(0) @binding(0) var<storage, read_write> x: array<f32>;
//!     @group(0) @binding(1) var<uniform> n: vec4<u32>;
//!     @compute @workgroup_size(64)
//!     fn double(@builtin(global_invocation_id) id: vec3<u32>) {
//!         if id.x < n.x { x[id.x] = 2.0 * x[id.x]; }
//!     }";
//! let pipeline =
//!     device.create_pipeline(KernelSource::Wgsl(wgsl.into()), "double", BindingLayout::new(1, true))?;
//! let x = WgpuBuffer::from_slice(&device, &[1.0f32, 2.0, 3.0])?;
//! let n = [3u32, 0, 0, 0];
//! device.dispatch(&pipeline, &[&x], Some(bytemuck::cast_slice(&n)), [1, 1, 1])?;
//! assert_eq!(x.read_as::<f32>()?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```

mod adapters;
mod batch;
mod buffer;
mod device;
mod dispatch;
mod error;
mod native;
mod open;
mod pipeline;
mod properties;
mod reflect;
mod statistics;
mod validation;

pub use adapters::{adapters, best_adapter, AdapterKind, AdapterSummary};
pub use buffer::WgpuBuffer;
pub use device::WgpuDevice;
pub use dispatch::split_grid;
pub use error::WgpuError;
pub use pipeline::{BindingLayout, KernelSource, LaunchData, PipelineCache, WgpuPipeline};
pub use properties::{vendor_name, CooperativeMatrixShape, WgpuDeviceProperties, WgpuFeatures};
pub(crate) use validation::active as validation_active;
pub use validation::{validation_report, ValidationReport, VALIDATION_ENV};
/// The wgpu rutile runs on, for code that uses [`WgpuDevice::raw`] and the other raw
/// handles directly.
pub use wgpu;
/// The naga version wgpu takes modules of; rutile's SPIR-V backend must build its
/// modules with this same naga.
pub use wgpu::naga;
