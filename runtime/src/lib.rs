//! rutile: write GPU kernels once in Triton's block programming model; run them on NVIDIA
//! GPUs through CUDA, on any Vulkan, Metal or DX12 GPU through wgpu, or exactly on the CPU.
//!
//! ```
//! use rutile::{seeds, Device, DeviceExt, LaunchConfig, ScalarType};
//! # fn main() -> Result<(), rutile::Error> {
//! let device = rutile::CpuDevice::new(); // or rutile::default_device()?
//! let n = 1000;
//! let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
//! let (xs, ys, out) = (device.upload(&x)?, device.upload(&x)?, device.zeros::<f32>(n)?);
//! let kernel = seeds::vector_add(ScalarType::F32, 256)?;
//! device.launch(&kernel, &LaunchConfig::grid1((n as u32).div_ceil(256)), &[(&xs).into(), (&ys).into(), (&out).into(), (n as i32).into()])?;
//! assert_eq!(device.download(&out)?[10], 20.0);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod autotune;
pub mod backends;
pub mod bench;
pub mod buffer;
mod checked;
pub mod compiled;
pub mod cublas;
pub mod cuda;
pub mod device;
mod dump;
mod error;
mod ext;
pub mod launch;
mod launcher;
pub mod occupancy;
mod progress;
mod select;
pub mod vulkan;

pub use backends::cpu::CpuDevice;
pub use backends::cuda::CudaGpu;
pub use backends::vulkan::{ReadOnlyBuffers, WgpuGpu, WgpuOptions};
pub use buffer::{Buffer, DeviceBuffer, Element};
pub use checked::CHECK_BOUNDS_ENV;
pub use compiled::{CompileOptions, CompiledKernel, KernelMetadata};
pub use device::{Backend, Device, DeviceProperties, DeviceType};
pub use error::{Error, Result};
pub use ext::DeviceExt;
pub use launch::{Arg, LaunchConfig};
pub use launcher::Launcher;
/// Host values of the fp8 element types, for buffers (`device.upload(&[F8E4M3::from_f32(1.5)])`).
pub use rutile_ir::fp8::{F8E4M3Fnuz, F8E5M2Fnuz, F8E4M3, F8E4M3B15, F8E5M2};
/// The most programs a thread-block cluster groups ([`LaunchConfig::cluster`]).
pub use rutile_ir::lower::MAX_CLUSTER;
pub use select::{default_device, list_devices, open_device, DeviceListing, DEVICE_ENV};

/// The kernel language and compiler (re-exported from `rutile-ir`).
pub use rutile_ir::{
    self as ir, seeds, AtomicOp, AtomicOrder, BlockPtr, CacheModifier, DotOptions, DotPrecision, DotScaledOptions,
    HintNumbers, Indices, Kernel, KernelBuilder, MemScope, MemSem, Microscaled, MxFormat, Operand, Padding, ReduceOp,
    RoundedOp, Rounding, ScalarType, TensorDescriptor, Value,
};

/// The README's example, compiled and run as a test.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;
