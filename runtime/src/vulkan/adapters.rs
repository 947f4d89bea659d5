//! Finding the GPUs (and software rasterisers) that wgpu can drive.

use std::fmt;

use super::error::WgpuError;

/// The backends rutile asks wgpu for: Vulkan, plus Metal on Apple platforms and DX12 on
/// Windows (only the ones compiled in are actually tried; on Linux that is Vulkan alone).
pub(crate) const BACKENDS: wgpu::Backends = wgpu::Backends::VULKAN
    .union(wgpu::Backends::METAL)
    .union(wgpu::Backends::DX12);

/// The kind of device behind an adapter, from the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdapterKind {
    /// A discrete GPU with its own memory.
    Discrete,
    /// A GPU sharing memory with the CPU.
    Integrated,
    /// A virtualised or hosted GPU.
    Virtual,
    /// A software implementation on the CPU (Mesa's lavapipe/llvmpipe, SwiftShader, WARP).
    Cpu,
    /// The driver did not say.
    Other,
}

impl AdapterKind {
    pub(crate) fn from_wgpu(t: wgpu::DeviceType) -> Self {
        match t {
            wgpu::DeviceType::DiscreteGpu => AdapterKind::Discrete,
            wgpu::DeviceType::IntegratedGpu => AdapterKind::Integrated,
            wgpu::DeviceType::VirtualGpu => AdapterKind::Virtual,
            wgpu::DeviceType::Cpu => AdapterKind::Cpu,
            wgpu::DeviceType::Other => AdapterKind::Other,
        }
    }

    /// Preference when no adapter is named: lower is better. Discrete, integrated,
    /// virtual, CPU, then anything else.
    fn rank(self) -> u8 {
        match self {
            AdapterKind::Discrete => 0,
            AdapterKind::Integrated => 1,
            AdapterKind::Virtual => 2,
            AdapterKind::Cpu => 3,
            AdapterKind::Other => 4,
        }
    }
}

impl fmt::Display for AdapterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdapterKind::Discrete => "discrete GPU",
            AdapterKind::Integrated => "integrated GPU",
            AdapterKind::Virtual => "virtual GPU",
            AdapterKind::Cpu => "CPU (software)",
            AdapterKind::Other => "other",
        })
    }
}

/// One adapter as wgpu enumerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// Position in [`adapters`]' list; what [`super::WgpuDevice::open`] takes.
    pub index: usize,
    /// The driver's device name, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// Vendor id (a PCI vendor id, or a Khronos vendor id such as 0x10005 for Mesa).
    pub vendor_id: u32,
    /// Device id (PCI device id on most drivers; 0 for software ones).
    pub device_id: u32,
    /// Discrete, integrated, virtual, CPU or other.
    pub kind: AdapterKind,
    /// The graphics API wgpu drives it through.
    pub backend: wgpu::Backend,
    /// Driver name, e.g. `llvmpipe`; `None` when the driver does not report one.
    pub driver: Option<String>,
    /// Driver version text, e.g. `Mesa 22.3.6 (LLVM 15.0.6)`; `None` when not reported.
    pub driver_info: Option<String>,
}

impl AdapterSummary {
    pub(crate) fn from_info(index: usize, info: &wgpu::AdapterInfo) -> Self {
        AdapterSummary {
            index,
            name: info.name.clone(),
            vendor_id: info.vendor,
            device_id: info.device,
            kind: AdapterKind::from_wgpu(info.device_type),
            backend: info.backend,
            driver: reported(&info.driver),
            driver_info: reported(&info.driver_info),
        }
    }
}

/// wgpu fills driver strings it could not read with `""` or `"?"`.
pub(crate) fn reported(s: &str) -> Option<String> {
    match s.trim() {
        "" | "?" => None,
        s => Some(s.to_string()),
    }
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} ({}, {:?}, vendor 0x{:04x}, device 0x{:04x}",
            self.index, self.name, self.kind, self.backend, self.vendor_id, self.device_id
        )?;
        match (&self.driver, &self.driver_info) {
            (Some(d), Some(i)) => write!(f, ", driver {d}: {i})"),
            (Some(d), None) => write!(f, ", driver {d})"),
            (None, Some(i)) => write!(f, ", driver {i})"),
            (None, None) => write!(f, ")"),
        }
    }
}

/// The process's wgpu instance over rutile's backends, made once: drivers are not all safe
/// with instances created and destroyed concurrently (NVIDIA's Vulkan driver corrupted its
/// heap when tests on several threads each made their own). Instance flags (validation,
/// debug info) follow wgpu's build-configuration defaults and its `WGPU_*` variables, and
/// `RUTILE_VALIDATION=1` adds the Khronos validation layer with rutile's messenger
/// (`validation`).
pub(crate) fn instance() -> wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = BACKENDS;
            desc.flags = super::validation::instance_flags(wgpu::InstanceFlags::from_build_config().with_env());
            let instance = wgpu::Instance::new(desc);
            super::validation::attach(&instance);
            instance
        })
        .clone()
}

/// The raw adapters, in wgpu's enumeration order (the order of [`adapters`]).
pub(crate) fn raw_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance.enumerate_adapters(BACKENDS))
}

/// Every adapter wgpu can open here. Empty (not an error) when there is none.
pub fn adapters() -> Vec<AdapterSummary> {
    let instance = instance();
    raw_adapters(&instance)
        .iter()
        .enumerate()
        .map(|(i, a)| AdapterSummary::from_info(i, &a.get_info()))
        .collect()
}

/// The adapter to use when none is named: the first discrete GPU, else the first
/// integrated one, then virtual, then CPU (software) adapters, then any other.
pub fn best_adapter() -> Result<AdapterSummary, WgpuError> {
    pick_best(&adapters()).cloned().ok_or(WgpuError::NoAdapter)
}

pub(crate) fn pick_best(adapters: &[AdapterSummary]) -> Option<&AdapterSummary> {
    // `min_by_key` keeps the first of equals, so enumeration order breaks ties.
    adapters.iter().min_by_key(|a| a.kind.rank())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(index: usize, kind: AdapterKind) -> AdapterSummary {
        AdapterSummary {
            index,
            name: format!("adapter {index}"),
            vendor_id: 0x10005,
            device_id: 0,
            kind,
            backend: wgpu::Backend::Vulkan,
            driver: Some("llvmpipe".into()),
            driver_info: None,
        }
    }

    #[test]
    fn best_prefers_discrete_then_integrated_then_virtual_then_cpu() {
        use AdapterKind::*;
        let list = vec![
            summary(0, Cpu),
            summary(1, Other),
            summary(2, Virtual),
            summary(3, Integrated),
            summary(4, Discrete),
            summary(5, Discrete),
        ];
        assert_eq!(pick_best(&list).unwrap().index, 4);
        assert_eq!(pick_best(&list[..4]).unwrap().index, 3);
        assert_eq!(pick_best(&list[..3]).unwrap().index, 2);
        assert_eq!(pick_best(&list[..2]).unwrap().index, 0);
        assert_eq!(pick_best(&list[1..2]).unwrap().index, 1);
        assert!(pick_best(&[]).is_none());
    }

    #[test]
    fn unreported_driver_strings_are_none() {
        assert_eq!(reported("?"), None);
        assert_eq!(reported(" "), None);
        assert_eq!(reported("llvmpipe").as_deref(), Some("llvmpipe"));
        let s = summary(0, AdapterKind::Cpu).to_string();
        assert!(
            s.contains("CPU") && s.contains("0x10005") && s.contains("llvmpipe"),
            "{s}"
        );
    }
}
