//! What the native Vulkan API says about an adapter that wgpu does not pass on. Read once
//! when a device opens, through wgpu's raw handles; `None` wherever the driver does not
//! say (other vendors, other backends, older drivers).

/// The multiprocessor count and the most warps resident on one, as NVIDIA's Vulkan
/// drivers report them through `VK_NV_shader_sm_builtins`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmBuiltins {
    pub multiprocessors: u32,
    pub warps_per_multiprocessor: u32,
}

#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) fn sm_builtins(adapter: &wgpu::Adapter) -> Option<SmBuiltins> {
    use ash::vk;
    // SAFETY: the raw handles are only used to read properties, while `adapter` (which
    // owns them) is borrowed.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let capabilities = hal.physical_device_capabilities();
    let instance = hal.shared_instance();
    // `vkGetPhysicalDeviceProperties2` is core from Vulkan 1.1 on: older instances or
    // devices do not have it loaded.
    if instance.instance_api_version() < vk::API_VERSION_1_1
        || capabilities.properties().api_version < vk::API_VERSION_1_1
        || !capabilities.supports_extension(ash::nv::shader_sm_builtins::NAME)
    {
        return None;
    }
    let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
    let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut sm);
    // SAFETY: a valid physical device of this instance, and a well-formed `p_next` chain.
    unsafe {
        instance
            .raw_instance()
            .get_physical_device_properties2(hal.raw_physical_device(), &mut properties)
    };
    (sm.shader_sm_count > 0 && sm.shader_warps_per_sm > 0).then_some(SmBuiltins {
        multiprocessors: sm.shader_sm_count,
        warps_per_multiprocessor: sm.shader_warps_per_sm,
    })
}

/// The device's own memory: the size of its largest device-local heap, as
/// `vkGetPhysicalDeviceMemoryProperties` reports it (a GPU's video memory; the host memory
/// a software device such as lavapipe uses). `None` off Vulkan.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) fn device_local_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    use ash::vk;
    // SAFETY: the raw handles are only used to read properties, while `adapter` is borrowed.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    // SAFETY: a valid physical device of this instance.
    let memory = unsafe {
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device())
    };
    memory
        .memory_heaps_as_slice()
        .iter()
        .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .max()
        .filter(|&size| size > 0)
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) fn device_local_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}

/// Whether the driver accepts SPIR-V 1.4 modules: a Vulkan 1.2 device, or an older one with
/// `VK_KHR_spirv_1_4`.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) fn accepts_spirv_1_4(adapter: &wgpu::Adapter) -> bool {
    use ash::vk;
    // SAFETY: the raw handles are only used to read properties, while `adapter` is borrowed.
    let Some(hal) = (unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return false;
    };
    let capabilities = hal.physical_device_capabilities();
    capabilities.properties().api_version >= vk::API_VERSION_1_2
        || capabilities.supports_extension(ash::khr::spirv_1_4::NAME)
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) fn accepts_spirv_1_4(_adapter: &wgpu::Adapter) -> bool {
    false
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) fn sm_builtins(_adapter: &wgpu::Adapter) -> Option<SmBuiltins> {
    None
}
