//! What the driver's compiler says of a compiled kernel, through
//! `VK_KHR_pipeline_executable_properties`: its register count, which the persistent
//! tutorial's occupancy needs and wgpu does not report.
//!
//! The extension must be enabled when the device is created, which wgpu does not do:
//! `open::open_device` opens the device through wgpu-hal with it added. The statistics exist
//! only for pipelines created with `CAPTURE_STATISTICS`, which wgpu's pipelines are not, so
//! [`register_count`] compiles the kernel's SPIR-V once more through raw Vulkan calls, with
//! a layout of the same shape, reads the count and destroys that pipeline. Everything here
//! is best effort: `None` wherever the driver does not say.

use super::pipeline::{BindingLayout, LaunchData};

/// Registers per invocation of the compute entry point `entry` of the SPIR-V `words`
/// compiled by `device`'s driver, for bindings shaped as `layout`. `None` where the device
/// was not opened with the extension (`open::open_device`) or the driver reports no
/// register statistic. With `report`, everything the driver says of the kernel is also
/// written to that file ([`write_report`]).
///
/// # Safety
/// `words` must be valid SPIR-V whose interface matches `layout` (rutile's own kernels).
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) unsafe fn register_count(
    device: &wgpu::Device,
    words: &[u32],
    entry: &str,
    layout: BindingLayout,
    report: Option<&std::path::Path>,
) -> Option<u32> {
    use ash::{khr, vk};
    // SAFETY: the raw device is only used while `device` is borrowed, for objects created
    // and destroyed here.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
    if !hal
        .enabled_device_extensions()
        .contains(&khr::pipeline_executable_properties::NAME)
    {
        return None;
    }
    let raw = hal.raw_device();
    let statistics = khr::pipeline_executable_properties::Device::new(hal.shared_instance().raw_instance(), raw);
    let entry = std::ffi::CString::new(entry).ok()?;

    let mut bindings: Vec<_> = (0..layout.storage_buffers)
        .map(|b| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect();
    if let Some(b) = layout.uniform_binding() {
        bindings.push(
            vk::DescriptorSetLayoutBinding::default()
                .binding(b)
                .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        );
    }
    let push_constants = match layout.launch {
        LaunchData::Immediates(size) if size > 0 => vec![vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(size)],
        _ => Vec::new(),
    };

    // Every object made here is destroyed before returning, whatever fails.
    let mut set_layout = vk::DescriptorSetLayout::null();
    let mut pipeline_layout = vk::PipelineLayout::null();
    let mut module = vk::ShaderModule::null();
    let mut pipeline = vk::Pipeline::null();
    // SAFETY: valid create infos on a live device; each handle is destroyed below.
    let count = unsafe {
        (|| -> Option<u32> {
            set_layout = raw
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .ok()?;
            let set_layouts = [set_layout];
            pipeline_layout = raw
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&set_layouts)
                        .push_constant_ranges(&push_constants),
                    None,
                )
                .ok()?;
            module = raw
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
                .ok()?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&entry);
            let mut flags = vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR;
            if report.is_some() {
                flags |= vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR;
            }
            let info = vk::ComputePipelineCreateInfo::default()
                .flags(flags)
                .stage(stage)
                .layout(pipeline_layout);
            pipeline = *raw
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
                .ok()?
                .first()?;
            let executables = statistics
                .get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline))
                .ok()?;
            let index = executables
                .iter()
                .position(|e| e.stages.contains(vk::ShaderStageFlags::COMPUTE))?;
            let executable = vk::PipelineExecutableInfoKHR::default()
                .pipeline(pipeline)
                .executable_index(index as u32);
            let stats = statistics.get_pipeline_executable_statistics(&executable).ok()?;
            if let Some(path) = report {
                write_report(&statistics, &executable, &stats, path);
            }
            stats.iter().find_map(register_statistic)
        })()
    };
    // SAFETY: null handles are ignored by the destroy calls; the others were made above and
    // are not in use (the pipeline was never bound).
    unsafe {
        raw.destroy_pipeline(pipeline, None);
        raw.destroy_shader_module(module, None);
        raw.destroy_pipeline_layout(pipeline_layout, None);
        raw.destroy_descriptor_set_layout(set_layout, None);
    }
    count
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) unsafe fn register_count(
    _device: &wgpu::Device,
    _words: &[u32],
    _entry: &str,
    _layout: BindingLayout,
    _report: Option<&std::path::Path>,
) -> Option<u32> {
    None
}

/// Writes what the driver says of a compiled kernel (every statistic, and the internal
/// representations it offers, such as its machine code) to `path`: part of `RUTILE_DUMP`,
/// for tuning. Best effort: a failure to write is reported on stderr and the launch goes on.
///
/// # Safety
/// `executable` must name a live pipeline created with
/// `CAPTURE_INTERNAL_REPRESENTATIONS_KHR` on `statistics`' device.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
unsafe fn write_report(
    statistics: &ash::khr::pipeline_executable_properties::Device,
    executable: &ash::vk::PipelineExecutableInfoKHR<'_>,
    stats: &[ash::vk::PipelineExecutableStatisticKHR<'_>],
    path: &std::path::Path,
) {
    use ash::vk;
    use std::fmt::Write as _;
    let mut text = String::new();
    for s in stats {
        let name = s.name_as_c_str().map(|c| c.to_string_lossy()).unwrap_or_default();
        // SAFETY: the union member read is the one `format` names.
        let value = unsafe {
            match s.format {
                vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                _ => s.value.f64.to_string(),
            }
        };
        let _ = writeln!(text, "{name}: {value}");
    }
    // The representations' sizes first, then their bytes (the two-call idiom).
    // SAFETY: `executable` names a live pipeline captured with internal representations.
    let mut reps =
        unsafe { statistics.get_pipeline_executable_internal_representations(executable) }.unwrap_or_default();
    let mut buffers: Vec<Vec<u8>> = reps.iter().map(|r| vec![0u8; r.data_size]).collect();
    for (r, b) in reps.iter_mut().zip(&mut buffers) {
        r.p_data = b.as_mut_ptr().cast();
    }
    let mut count = reps.len() as u32;
    // SAFETY: `reps` holds `count` structures, each pointing at a buffer of its `data_size`.
    let filled = unsafe {
        (statistics.fp().get_pipeline_executable_internal_representations_khr)(
            statistics.device(),
            executable,
            &mut count,
            reps.as_mut_ptr(),
        )
    };
    if filled == vk::Result::SUCCESS {
        for (r, b) in reps.iter().zip(&buffers) {
            let name = r.name_as_c_str().map(|c| c.to_string_lossy()).unwrap_or_default();
            let body = if r.is_text != 0 {
                String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap_or_default()).into_owned()
            } else {
                format!("({} bytes of binary data)", b.len())
            };
            let _ = write!(text, "\n== {name}\n{body}\n");
        }
    }
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("rutile: cannot write {}: {e}", path.display());
    }
}

/// The value of a statistic that counts registers (drivers name it differently: "Register
/// Count", "Registers", "VGPRs"...), when it is an integer.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
fn register_statistic(s: &ash::vk::PipelineExecutableStatisticKHR<'_>) -> Option<u32> {
    use ash::vk;
    let name = s.name_as_c_str().ok()?.to_string_lossy().to_ascii_lowercase();
    if !name.contains("register") || name.contains("spill") {
        return None;
    }
    // SAFETY: the union member read is the one `format` names.
    let value = unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64,
            vk::PipelineExecutableStatisticFormatKHR::INT64 => u64::try_from(s.value.i64).ok()?,
            _ => return None,
        }
    };
    u32::try_from(value).ok().filter(|&v| v > 0)
}
