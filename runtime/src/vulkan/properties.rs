//! What an adapter reports about itself: limits, features and identity, in the terms a
//! kernel compiler and its launcher need.

use std::fmt;

use super::adapters::{reported, AdapterKind};

/// A cooperative-matrix (tensor-core style) configuration the adapter supports:
/// `C[m×n] = A[m×k] · B[k×n] + C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CooperativeMatrixShape {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Element type of A and B.
    pub ab_type: wgpu::CooperativeScalarType,
    /// Element type of C and the result.
    pub cr_type: wgpu::CooperativeScalarType,
    /// Whether saturating accumulation is supported.
    pub saturating: bool,
}

impl fmt::Display for CooperativeMatrixShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{}x{} {:?}->{:?}{}",
            self.m,
            self.n,
            self.k,
            self.ab_type,
            self.cr_type,
            if self.saturating { " (saturating)" } else { "" }
        )
    }
}

/// The optional device features rutile cares about, as the adapter reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgpuFeatures {
    /// 16-bit floats in shaders (`SHADER_F16`).
    pub f16: bool,
    /// 64-bit integers in shaders (`SHADER_INT64`).
    pub i64: bool,
    /// 64-bit floats in shaders (`SHADER_F64`).
    pub f64: bool,
    /// 16-bit integers in shaders (`SHADER_I16`): how rutile takes `f16` pairs out of
    /// 32-bit words without converting them.
    pub i16: bool,
    /// Subgroup (warp/wave) operations in compute shaders (`SUBGROUP`).
    pub subgroups: bool,
    /// Timestamp queries at the start and end of passes (`TIMESTAMP_QUERY`).
    pub timestamp_query: bool,
    /// Timestamps written anywhere in a command encoder (`TIMESTAMP_QUERY_INSIDE_ENCODERS`).
    pub timestamp_query_inside_encoders: bool,
    /// Timestamps written inside a pass (`TIMESTAMP_QUERY_INSIDE_PASSES`).
    pub timestamp_query_inside_passes: bool,
    /// Cooperative matrices (`EXPERIMENTAL_COOPERATIVE_MATRIX`).
    pub cooperative_matrix: bool,
    /// Immediates, Vulkan's push constants (`IMMEDIATES`).
    pub immediates: bool,
    /// SPIR-V 1.4 handed to the driver as it is (`PASSTHROUGH_SHADERS`, on a Vulkan device
    /// that accepts SPIR-V 1.4: Vulkan 1.2 or `VK_KHR_spirv_1_4`). rutile uses it for kernels
    /// with memory hints naga cannot carry (read-once loads as `Nontemporal`).
    pub spirv_passthrough: bool,
}

impl WgpuFeatures {
    pub(crate) fn from_wgpu(f: wgpu::Features) -> Self {
        use wgpu::Features as F;
        WgpuFeatures {
            f16: f.contains(F::SHADER_F16),
            i64: f.contains(F::SHADER_INT64),
            f64: f.contains(F::SHADER_F64),
            i16: f.contains(F::SHADER_I16),
            subgroups: f.contains(F::SUBGROUP),
            timestamp_query: f.contains(F::TIMESTAMP_QUERY),
            timestamp_query_inside_encoders: f.contains(F::TIMESTAMP_QUERY_INSIDE_ENCODERS),
            timestamp_query_inside_passes: f.contains(F::TIMESTAMP_QUERY_INSIDE_PASSES),
            cooperative_matrix: f.contains(F::EXPERIMENTAL_COOPERATIVE_MATRIX),
            immediates: f.contains(F::IMMEDIATES),
            // Whether the driver takes SPIR-V 1.4 is not a wgpu feature:
            // `WgpuDeviceProperties::from_adapter` asks the driver.
            spirv_passthrough: false,
        }
    }
}

/// What an adapter (or an opened device) reports: identity, compute limits and features.
///
/// Values the API does not report are `None`; they are never guessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgpuDeviceProperties {
    /// The driver's device name.
    pub name: String,
    /// Vendor id (PCI, or Khronos for vendors without one, e.g. 0x10005 for Mesa).
    pub vendor_id: u32,
    /// Device id.
    pub device_id: u32,
    /// Discrete, integrated, virtual, CPU or other.
    pub kind: AdapterKind,
    /// The graphics API wgpu drives it through.
    pub backend: wgpu::Backend,
    /// Driver name, when reported.
    pub driver: Option<String>,
    /// Driver version text, when reported.
    pub driver_info: Option<String>,
    /// Smallest subgroup (warp/wave) size the device may use, when the driver reports it
    /// (Vulkan needs `VK_EXT_subgroup_size_control` or 1.3; wgpu's Metal backend only has
    /// a fixed placeholder, so it counts as unreported).
    pub subgroup_min_size: Option<u32>,
    /// Largest subgroup size the device may use, when reported (see `subgroup_min_size`).
    pub subgroup_max_size: Option<u32>,
    /// Largest workgroup size in x, y and z.
    pub max_workgroup_size: [u32; 3],
    /// Largest product of the workgroup sizes.
    pub max_invocations_per_workgroup: u32,
    /// Workgroup (shared) memory per workgroup, in bytes.
    pub max_workgroup_storage_bytes: u32,
    /// Largest storage-buffer binding, in bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer, in bytes.
    pub max_buffer_size: u64,
    /// Largest uniform-buffer binding, in bytes.
    pub max_uniform_buffer_binding_size: u64,
    /// Storage buffers one compute shader may bind.
    pub max_storage_buffers_per_stage: u32,
    /// Required alignment of storage-buffer binding offsets, in bytes.
    pub min_storage_buffer_offset_alignment: u32,
    /// Largest workgroup count of one dispatch, per dimension.
    pub max_workgroups_per_dimension: u32,
    /// Bytes of immediates (push constants) a pipeline may use; 0 without the feature.
    pub max_immediate_size: u32,
    /// Multiprocessors (NVIDIA's SMs), when the driver reports them
    /// (`VK_NV_shader_sm_builtins`); `None` elsewhere.
    pub multiprocessors: Option<u32>,
    /// The most warps resident on one multiprocessor, reported with `multiprocessors`.
    pub warps_per_multiprocessor: Option<u32>,
    /// The device's memory in bytes: its largest device-local heap (Vulkan); `None` where
    /// the API does not say.
    pub device_memory_bytes: Option<u64>,
    /// Optional features.
    pub features: WgpuFeatures,
    /// The cooperative-matrix configurations the adapter lists; `None` when the adapter
    /// has no cooperative-matrix support (wgpu then lists none), an empty list when it has
    /// the feature but lists no configuration.
    pub cooperative_matrix_shapes: Option<Vec<CooperativeMatrixShape>>,
}

impl WgpuDeviceProperties {
    /// Reads the properties of an adapter.
    pub(crate) fn from_adapter(adapter: &wgpu::Adapter) -> Self {
        let shapes = adapter
            .cooperative_matrix_properties()
            .into_iter()
            .map(|p| CooperativeMatrixShape {
                m: p.m_size,
                n: p.n_size,
                k: p.k_size,
                ab_type: p.ab_type,
                cr_type: p.cr_type,
                saturating: p.saturating_accumulation,
            })
            .collect();
        let mut properties = Self::from_parts(&adapter.get_info(), &adapter.limits(), adapter.features(), shapes);
        properties.features.spirv_passthrough = adapter.features().contains(wgpu::Features::PASSTHROUGH_SHADERS)
            && super::native::accepts_spirv_1_4(adapter);
        if let Some(sm) = super::native::sm_builtins(adapter) {
            properties.multiprocessors = Some(sm.multiprocessors);
            properties.warps_per_multiprocessor = Some(sm.warps_per_multiprocessor);
        }
        properties.device_memory_bytes = super::native::device_local_memory(adapter);
        properties
    }

    pub(crate) fn from_parts(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        features: wgpu::Features,
        shapes: Vec<CooperativeMatrixShape>,
    ) -> Self {
        let features = WgpuFeatures::from_wgpu(features);
        let (subgroup_min_size, subgroup_max_size) = subgroup_sizes(info);
        WgpuDeviceProperties {
            name: info.name.clone(),
            vendor_id: info.vendor,
            device_id: info.device,
            kind: AdapterKind::from_wgpu(info.device_type),
            backend: info.backend,
            driver: reported(&info.driver),
            driver_info: reported(&info.driver_info),
            subgroup_min_size,
            subgroup_max_size,
            max_workgroup_size: [
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z,
            ],
            max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_workgroup_storage_bytes: limits.max_compute_workgroup_storage_size,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_uniform_buffer_binding_size: limits.max_uniform_buffer_binding_size,
            max_storage_buffers_per_stage: limits.max_storage_buffers_per_shader_stage,
            min_storage_buffer_offset_alignment: limits.min_storage_buffer_offset_alignment,
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_immediate_size: limits.max_immediate_size,
            multiprocessors: None,
            warps_per_multiprocessor: None,
            device_memory_bytes: None,
            cooperative_matrix_shapes: if features.cooperative_matrix || !shapes.is_empty() {
                Some(shapes)
            } else {
                None
            },
            features,
        }
    }

    /// The vendor's name for known vendor ids, `None` for others.
    pub fn vendor_name(&self) -> Option<&'static str> {
        vendor_name(self.vendor_id)
    }

    /// The largest storage buffer this device can bind whole, in bytes: the smaller of
    /// the binding limit and the buffer limit.
    pub fn max_storage_buffer_bytes(&self) -> u64 {
        self.max_storage_buffer_binding_size.min(self.max_buffer_size)
    }
}

/// wgpu reports `MINIMUM_SUBGROUP_MIN_SIZE..=MAXIMUM_SUBGROUP_MAX_SIZE` (4..=128) when the
/// Vulkan driver lacks subgroup-size control, and fixed numbers on Metal: neither is a
/// measurement, so both are `None` here.
fn subgroup_sizes(info: &wgpu::AdapterInfo) -> (Option<u32>, Option<u32>) {
    let placeholder = info.subgroup_min_size == wgpu::MINIMUM_SUBGROUP_MIN_SIZE
        && info.subgroup_max_size == wgpu::MAXIMUM_SUBGROUP_MAX_SIZE;
    let reported_by_api = matches!(info.backend, wgpu::Backend::Vulkan | wgpu::Backend::Dx12);
    if placeholder || !reported_by_api || info.subgroup_min_size == 0 {
        (None, None)
    } else {
        (Some(info.subgroup_min_size), Some(info.subgroup_max_size))
    }
}

/// Names of the GPU vendors rutile knows by id: PCI ids, and Khronos ids for the
/// vendors without one.
pub fn vendor_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0x10de => "NVIDIA",
        0x1002 | 0x1022 => "AMD",
        0x8086 => "Intel",
        0x106b => "Apple",
        0x13b5 => "ARM",
        0x5143 => "Qualcomm",
        0x1010 => "Imagination",
        0x1414 => "Microsoft",
        0x1ae0 => "Google",
        0x10005 => "Mesa",
        _ => return None,
    })
}

fn bytes(b: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let exact = |unit: u64, name: &str| (b % unit == 0).then(|| format!("{} {name}", b / unit));
    let approx = if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.2} MiB", b as f64 / MIB as f64)
    } else {
        format!("{:.2} KiB", b as f64 / KIB as f64)
    };
    if b < KIB {
        return format!("{b} B");
    }
    exact(GIB, "GiB")
        .or_else(|| exact(MIB, "MiB"))
        .or_else(|| exact(KIB, "KiB"))
        .unwrap_or_else(|| format!("{b} B ({approx})"))
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl fmt::Display for WgpuDeviceProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "wgpu adapter: {} ({:?}, {})", self.name, self.backend, self.kind)?;
        writeln!(
            f,
            "  vendor                 0x{:04x} ({}), device 0x{:04x}",
            self.vendor_id,
            self.vendor_name().unwrap_or("unknown vendor"),
            self.device_id
        )?;
        writeln!(
            f,
            "  driver                 {} {}",
            self.driver.as_deref().unwrap_or("not reported"),
            self.driver_info.as_deref().unwrap_or("")
        )?;
        let subgroup = match (self.subgroup_min_size, self.subgroup_max_size) {
            (Some(lo), Some(hi)) if lo == hi => format!("{lo}"),
            (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
            _ => "not reported".to_string(),
        };
        writeln!(f, "  subgroup size          {subgroup}")?;
        let [x, y, z] = self.max_workgroup_size;
        writeln!(
            f,
            "  workgroup              {x} x {y} x {z}, {} invocations",
            self.max_invocations_per_workgroup
        )?;
        writeln!(
            f,
            "  workgroup storage      {}",
            bytes(self.max_workgroup_storage_bytes as u64)
        )?;
        writeln!(
            f,
            "  storage buffers        {} per stage, binding up to {}, buffer up to {}",
            self.max_storage_buffers_per_stage,
            bytes(self.max_storage_buffer_binding_size),
            bytes(self.max_buffer_size)
        )?;
        writeln!(
            f,
            "  uniform binding        up to {}",
            bytes(self.max_uniform_buffer_binding_size)
        )?;
        let unknown = || "unknown".to_string();
        writeln!(
            f,
            "  device memory          {}",
            self.device_memory_bytes.map_or_else(unknown, bytes)
        )?;
        writeln!(
            f,
            "  multiprocessors        {} ({} warps each)",
            self.multiprocessors.map_or_else(unknown, |n| n.to_string()),
            self.warps_per_multiprocessor.map_or_else(unknown, |n| n.to_string())
        )?;
        writeln!(
            f,
            "  dispatch               {} workgroups per dimension",
            self.max_workgroups_per_dimension
        )?;
        writeln!(
            f,
            "  immediates             {}",
            if self.features.immediates {
                bytes(self.max_immediate_size as u64)
            } else {
                "no".to_string()
            }
        )?;
        let ft = &self.features;
        writeln!(
            f,
            "  shader types           f16 {}, i16 {}, i64 {}, f64 {}",
            yes_no(ft.f16),
            yes_no(ft.i16),
            yes_no(ft.i64),
            yes_no(ft.f64)
        )?;
        writeln!(f, "  subgroup operations    {}", yes_no(ft.subgroups))?;
        writeln!(
            f,
            "  timestamp queries      {} (inside encoders {}, inside passes {})",
            yes_no(ft.timestamp_query),
            yes_no(ft.timestamp_query_inside_encoders),
            yes_no(ft.timestamp_query_inside_passes)
        )?;
        let coop = match &self.cooperative_matrix_shapes {
            None => "no".to_string(),
            Some(shapes) if shapes.is_empty() => "yes, shapes unknown".to_string(),
            Some(shapes) => shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
        };
        write!(f, "  cooperative matrix     {coop}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lavapipe_like_info() -> wgpu::AdapterInfo {
        let mut info = wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan);
        info.name = "llvmpipe (LLVM 15.0.6, 256 bits)".into();
        info.vendor = 0x10005;
        info.driver = "llvmpipe".into();
        info.driver_info = "Mesa 22.3.6 (LLVM 15.0.6)".into();
        info.subgroup_min_size = 8;
        info.subgroup_max_size = 8;
        info
    }

    #[test]
    fn subgroup_placeholders_are_not_reported() {
        let mut info = lavapipe_like_info();
        assert_eq!(subgroup_sizes(&info), (Some(8), Some(8)));
        info.subgroup_min_size = wgpu::MINIMUM_SUBGROUP_MIN_SIZE;
        info.subgroup_max_size = wgpu::MAXIMUM_SUBGROUP_MAX_SIZE;
        assert_eq!(subgroup_sizes(&info), (None, None));
        let mut metal = lavapipe_like_info();
        metal.backend = wgpu::Backend::Metal;
        assert_eq!(subgroup_sizes(&metal), (None, None));
    }

    #[test]
    fn display_is_readable() {
        let features = wgpu::Features::SHADER_INT64 | wgpu::Features::TIMESTAMP_QUERY;
        let p = WgpuDeviceProperties::from_parts(&lavapipe_like_info(), &wgpu::Limits::default(), features, Vec::new());
        assert_eq!(p.vendor_name(), Some("Mesa"));
        assert_eq!(p.kind, AdapterKind::Cpu);
        assert!(p.features.i64 && !p.features.f64 && p.features.timestamp_query);
        assert_eq!(p.cooperative_matrix_shapes, None);
        let s = p.to_string();
        assert!(s.contains("llvmpipe"), "{s}");
        assert!(s.contains("0x10005 (Mesa)"), "{s}");
        assert!(s.contains("subgroup size          8"), "{s}");
        assert!(s.contains("workgroup storage      16 KiB"), "{s}");
        assert!(s.contains("f16 no, i16 no, i64 yes, f64 no"), "{s}");
        assert!(s.contains("cooperative matrix     no"), "{s}");
        assert!(s.contains("binding up to 128 MiB"), "{s}");
        assert!(s.contains("device memory          unknown"), "{s}");
        assert_eq!(p.max_storage_buffer_bytes(), 128 << 20);
        assert_eq!(bytes(i32::MAX as u64), "2147483647 B (2.00 GiB)");
        assert_eq!(bytes(1 << 31), "2 GiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn cooperative_shapes_are_listed() {
        let shape = CooperativeMatrixShape {
            m: 8,
            n: 8,
            k: 8,
            ab_type: wgpu::CooperativeScalarType::F32,
            cr_type: wgpu::CooperativeScalarType::F32,
            saturating: false,
        };
        let p = WgpuDeviceProperties::from_parts(
            &lavapipe_like_info(),
            &wgpu::Limits::default(),
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
            vec![shape],
        );
        assert_eq!(p.cooperative_matrix_shapes, Some(vec![shape]));
        assert!(p.to_string().contains("8x8x8 F32->F32"), "{p}");
        let p = WgpuDeviceProperties::from_parts(
            &lavapipe_like_info(),
            &wgpu::Limits::default(),
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
            Vec::new(),
        );
        assert!(p.to_string().contains("shapes unknown"), "{p}");
        assert_eq!(vendor_name(0x10de), Some("NVIDIA"));
        assert_eq!(vendor_name(0x1234), None);
    }
}
