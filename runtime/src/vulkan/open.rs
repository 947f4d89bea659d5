//! Opening a Vulkan device through wgpu-hal, with what rutile's kernels and tools need and
//! wgpu does not enable:
//!
//! - `shaderSubgroupExtendedTypes` (Vulkan 1.2, or `VK_KHR_shader_subgroup_extended_types`):
//!   subgroup operations on 8-, 16- and 64-bit values, which the lowering's shuffles use
//!   for f16, i64 and f64 reductions. Without it such a kernel breaks the Vulkan
//!   specification (`VUID-RuntimeSpirv-None-06275`, reported by the validation layer) even
//!   where the driver runs it.
//! - `VK_KHR_pipeline_executable_properties`, for the register counts of `statistics`.

/// A device opened by [`open_device`], and which of the extras it has.
pub(crate) struct Opened {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// `VK_KHR_pipeline_executable_properties` is enabled.
    pub pipeline_statistics: bool,
}

/// Opens `adapter` as `desc` asks, with the extras of this module that the adapter has.
/// `None` when it has none of them (or is not a Vulkan adapter): open the device the usual
/// way.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) fn open_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Option<Result<Opened, wgpu::RequestDeviceError>> {
    use ash::{khr, vk};
    let (open, pipeline_statistics) = {
        // SAFETY: the hal adapter is only used to read features and open a device, while
        // `adapter` is borrowed.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let capabilities = hal.physical_device_capabilities();
        let api = capabilities.properties().api_version;
        let instance = hal.shared_instance();
        // Both extras are read and enabled through Vulkan 1.1's feature chains.
        if api < vk::API_VERSION_1_1 || instance.instance_api_version() < vk::API_VERSION_1_1 {
            return None;
        }
        let statistics = capabilities.supports_extension(khr::pipeline_executable_properties::NAME);
        let extended_types_extension = api < vk::API_VERSION_1_2;
        let extended_types = if extended_types_extension
            && !capabilities.supports_extension(khr::shader_subgroup_extended_types::NAME)
        {
            false
        } else {
            let mut supported = vk::PhysicalDeviceShaderSubgroupExtendedTypesFeatures::default();
            let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut supported);
            // SAFETY: a valid physical device of this instance, and a well-formed chain.
            unsafe {
                instance
                    .raw_instance()
                    .get_physical_device_features2(hal.raw_physical_device(), &mut features)
            };
            supported.shader_subgroup_extended_types == vk::TRUE
        };
        if !statistics && !extended_types {
            return None;
        }
        let mut statistics_feature =
            vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
        let mut extended_types_feature =
            vk::PhysicalDeviceShaderSubgroupExtendedTypesFeatures::default().shader_subgroup_extended_types(true);
        let (statistics_ref, extended_types_ref) = (&mut statistics_feature, &mut extended_types_feature);
        let callback: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
            if statistics {
                args.extensions.push(khr::pipeline_executable_properties::NAME);
                *args.create_info = args.create_info.push_next(statistics_ref);
            }
            if extended_types {
                if extended_types_extension {
                    args.extensions.push(khr::shader_subgroup_extended_types::NAME);
                }
                *args.create_info = args.create_info.push_next(extended_types_ref);
            }
        });
        // SAFETY: the callback only adds extensions the adapter supports and their
        // features (wgpu-hal chains neither structure itself), as wgpu-hal's contract
        // allows; the features and limits are those of `desc`.
        let open = unsafe {
            hal.open_with_callback(
                desc.required_features,
                &desc.required_limits,
                &desc.memory_hints,
                Some(callback),
            )
        };
        (open, statistics)
    };
    let open = match open {
        Ok(open) => open,
        // Let wgpu open it the usual way, and report what fails then.
        Err(_) => return None,
    };
    // SAFETY: `open` was opened from this adapter with the features and limits of `desc`.
    let opened = unsafe { adapter.create_device_from_hal(open, desc) };
    Some(opened.map(|(device, queue)| Opened {
        device,
        queue,
        pipeline_statistics,
    }))
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) fn open_device(
    _adapter: &wgpu::Adapter,
    _desc: &wgpu::DeviceDescriptor<'_>,
) -> Option<Result<Opened, wgpu::RequestDeviceError>> {
    None
}
