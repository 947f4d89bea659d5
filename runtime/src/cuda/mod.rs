//! The CUDA driver layer: devices, buffers, PTX modules, launches and timing.
//!
//! The driver library is opened at run time, so this compiles and runs without CUDA: on a
//! machine without a driver or GPU every entry point returns [`CudaError::NoDriver`] or
//! [`CudaError::NoDevice`] instead of panicking.
//!
//! ```no_run
//! use rutile::cuda::{CudaBuffer, CudaDevice, LaunchConfig};
//! # fn main() -> Result<(), rutile::cuda::CudaError> {
//! # let ptx = "";
//! let device = CudaDevice::open(0)?;
//! let module = device.load_ptx(ptx)?;
//! let kernel = module.function("vec_add")?;
//! let a = CudaBuffer::from_slice(&device, &[1.0f32, 2.0])?;
//! let b = CudaBuffer::from_slice(&device, &[3.0f32, 4.0])?;
//! let c = CudaBuffer::<f32>::zeroed(&device, 2)?;
//! let config = LaunchConfig::for_elements(2, 128);
//! // SAFETY: the kernel reads `a` and `b` and writes `c`, 2 elements each.
//! unsafe { device.launch(&kernel, &config, &[a.arg(), b.arg(), c.arg(), 2u32.into()])? };
//! assert_eq!(c.download()?, vec![4.0, 6.0]);
//! # Ok(()) }
//! ```

mod availability;
mod buffer;
mod context;
mod error;
mod function;
mod launch;
mod module;
mod properties;
mod tensor_map;
mod timer;

pub use availability::{is_available, probe, CudaDriverInfo};
pub use buffer::CudaBuffer;
pub use context::CudaDevice;
pub use error::CudaError;
pub use function::{CudaFunction, CudaKernelInfo, CudaOccupancy};
pub use launch::{KernelArg, LaunchConfig};
pub use module::CudaModule;
pub use properties::CudaDeviceProperties;
pub use tensor_map::{CudaTensorMap, TensorMapElem, TiledTensorMap};
pub use timer::CudaTimer;
