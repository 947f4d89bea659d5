//! Choosing a device: the best one present, or the one `RUTILE_DEVICE` names.
//!
//! Order: a CUDA GPU; else the best wgpu adapter (discrete, integrated, virtual, then a
//! software one such as lavapipe); else the CPU interpreter. `RUTILE_DEVICE=cuda:0`,
//! `vulkan:1` (a wgpu adapter index, as `list_devices` shows) or `cpu` overrides it.

use crate::backends::cpu::CpuDevice;
use crate::backends::cuda::CudaGpu;
use crate::backends::vulkan::WgpuGpu;
use crate::device::Device;
use crate::error::{Error, Result};
use std::sync::Arc;

/// The environment variable that picks a device.
pub const DEVICE_ENV: &str = "RUTILE_DEVICE";

/// The best device present, or the one `RUTILE_DEVICE` names (an error if that one cannot
/// be opened: asking for a device and silently getting another would hide problems).
pub fn default_device() -> Result<Arc<dyn Device>> {
    if let Ok(name) = std::env::var(DEVICE_ENV) {
        if !name.trim().is_empty() {
            return open_device(name.trim());
        }
    }
    if let Ok(gpu) = CudaGpu::open(0) {
        return Ok(Arc::new(gpu));
    }
    if let Ok(gpu) = WgpuGpu::open(None) {
        return Ok(Arc::new(gpu));
    }
    Ok(Arc::new(CpuDevice::new()))
}

/// Opens a device by name: `cuda`, `cuda:N`, `vulkan`, `vulkan:N` (`wgpu` is a synonym) or
/// `cpu`.
pub fn open_device(name: &str) -> Result<Arc<dyn Device>> {
    let (kind, index) = match name.split_once(':') {
        Some((k, i)) => {
            let i: usize = i
                .parse()
                .map_err(|_| Error::NoDevice(format!("`{name}`: the index after `:` must be a number")))?;
            (k, Some(i))
        }
        None => (name, None),
    };
    match kind {
        "cpu" | "interp" | "interpreter" => Ok(Arc::new(CpuDevice::new())),
        "cuda" => Ok(Arc::new(CudaGpu::open(index.unwrap_or(0))?)),
        "vulkan" | "wgpu" => Ok(Arc::new(WgpuGpu::open(index)?)),
        _ => Err(Error::NoDevice(format!(
            "unknown device `{name}`; use cuda[:N], vulkan[:N] or cpu"
        ))),
    }
}

/// One device found by [`list_devices`].
pub struct DeviceListing {
    /// The name to give `RUTILE_DEVICE`.
    pub id: String,
    /// The opened device, or why it could not be opened.
    pub device: Result<Arc<dyn Device>>,
}

/// Every device present: each CUDA GPU, each wgpu adapter, and the interpreter.
pub fn list_devices() -> Vec<DeviceListing> {
    let mut out = Vec::new();
    for i in 0..CudaGpu::count() {
        out.push(DeviceListing {
            id: format!("cuda:{i}"),
            device: CudaGpu::open(i).map(|d| Arc::new(d) as Arc<dyn Device>),
        });
    }
    for a in crate::vulkan::adapters() {
        out.push(DeviceListing {
            id: format!("vulkan:{}", a.index),
            device: WgpuGpu::open(Some(a.index)).map(|d| Arc::new(d) as Arc<dyn Device>),
        });
    }
    out.push(DeviceListing {
        id: "cpu".into(),
        device: Ok(Arc::new(CpuDevice::new())),
    });
    out
}
