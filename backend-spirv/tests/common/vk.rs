//! A minimal Vulkan compute runner for the generated SPIR-V: host-visible buffers, one
//! descriptor set laid out as [`BindingLayout`] says, one dispatch per grid part. It runs on
//! whatever Vulkan device the loader offers, preferring a CPU one (lavapipe).

use ash::vk;
use rutile_spirv::{ScalarArg, SpirvKernel, SpirvTarget};
use std::ffi::CString;
use std::sync::{Mutex, MutexGuard};

/// One `Vk` at a time in a process: tests run on parallel threads, and NVIDIA's driver
/// hangs when instances are created and destroyed concurrently (seen on an H100).
static TURN: Mutex<()> = Mutex::new(());

pub struct Vk {
    /// Held for the life of this runner; dropped after the device and instance.
    _turn: MutexGuard<'static, ()>,
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    queue_family: u32,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// What the device supports, as the backend's target.
    pub target: SpirvTarget,
    pub name: String,
}

/// The Vulkan device for execution tests, or `None` (with a note) when there is none; with
/// `RUTILE_REQUIRE_TOOLS=1`, or `RUTILE_REQUIRE` naming `vulkan`, a missing device fails the
/// test.
pub fn device_or_skip(test: &str) -> Option<Vk> {
    match Vk::new() {
        Ok(vk) => Some(vk),
        Err(why) => {
            if std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!("RUTILE_REQUIRE_TOOLS=1 but there is no Vulkan device: {why}");
            }
            if vulkan_required() {
                panic!("RUTILE_REQUIRE: a vulkan device is required, but none opens: {why}");
            }
            eprintln!("note: {test} skipped: no Vulkan device ({why})");
            None
        }
    }
}

/// Whether `RUTILE_REQUIRE` names `vulkan`. This crate cannot use the runtime's parser
/// (`rutile::device::parse_required_backends`, which also rejects unknown names: the
/// runtime's and the examples' GPU tests fail on those); this only looks for the name.
fn vulkan_required() -> bool {
    std::env::var("RUTILE_REQUIRE").is_ok_and(|v| v.split(',').any(|name| name.trim() == "vulkan"))
}

struct Buf {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    ptr: *mut u8,
    size: usize,
}

impl Vk {
    pub fn new() -> Result<Vk, String> {
        // A test that failed while holding the turn leaves nothing shared behind.
        let turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        unsafe {
            let entry = ash::Entry::load().map_err(|e| format!("no Vulkan loader: {e}"))?;
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
            let instance = entry
                .create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)
                .map_err(|e| format!("vkCreateInstance: {e}"))?;
            let mut best = None;
            for pd in instance.enumerate_physical_devices().map_err(|e| e.to_string())? {
                let props = instance.get_physical_device_properties(pd);
                if props.api_version < vk::API_VERSION_1_2 {
                    continue;
                }
                let families = instance.get_physical_device_queue_family_properties(pd);
                let Some(qf) = families
                    .iter()
                    .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
                else {
                    continue;
                };
                let cpu = props.device_type == vk::PhysicalDeviceType::CPU;
                if best.is_none() || cpu {
                    best = Some((pd, qf as u32, props));
                }
            }
            let Some((pd, queue_family, props)) = best else {
                instance.destroy_instance(None);
                return Err("no Vulkan 1.2 device with a compute queue".into());
            };
            let name = props
                .device_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();

            let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
            let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default()
                .push_next(&mut f11)
                .push_next(&mut f12);
            instance.get_physical_device_features2(pd, &mut f2);
            let base = f2.features;
            let mut sg = vk::PhysicalDeviceSubgroupProperties::default();
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sg);
            instance.get_physical_device_properties2(pd, &mut p2);
            let target = SpirvTarget {
                subgroup_size: Some(sg.subgroup_size),
                shader_f16: f12.shader_float16 == vk::TRUE
                    && f11.storage_buffer16_bit_access == vk::TRUE
                    && f11.uniform_and_storage_buffer16_bit_access == vk::TRUE,
                shader_i64: base.shader_int64 == vk::TRUE,
                shader_i16: base.shader_int16 == vk::TRUE,
                shader_f64: base.shader_float64 == vk::TRUE,
                subgroups: sg.supported_stages.contains(vk::ShaderStageFlags::COMPUTE)
                    && sg.supported_operations.contains(vk::SubgroupFeatureFlags::SHUFFLE),
                // This harness binds the launch block as a uniform buffer; the runtime's
                // tests cover immediates.
                immediate_size: 0,
                // Lavapipe has none; cooperative-matrix modules are checked by spirv-val.
                cooperative_matrix: false,
                packed_f16: true,
                coop_load_fences: false,
                wide_products: true,
                exact_f64: true,
            };

            let priorities = [1.0];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(queue_family)
                .queue_priorities(&priorities)];
            let features = vk::PhysicalDeviceFeatures::default()
                .shader_int64(target.shader_i64)
                .shader_int16(target.shader_i16)
                .shader_float64(target.shader_f64);
            let mut e11 = vk::PhysicalDeviceVulkan11Features::default()
                .storage_buffer16_bit_access(target.shader_f16)
                .uniform_and_storage_buffer16_bit_access(target.shader_f16);
            let mut e12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(target.shader_f16);
            let info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_features(&features)
                .push_next(&mut e11)
                .push_next(&mut e12);
            let device = instance
                .create_device(pd, &info, None)
                .map_err(|e| format!("vkCreateDevice: {e}"))?;
            let queue = device.get_device_queue(queue_family, 0);
            let memory = instance.get_physical_device_memory_properties(pd);
            Ok(Vk {
                _turn: turn,
                _entry: entry,
                instance,
                device,
                queue,
                queue_family,
                memory,
                target,
                name,
            })
        }
    }

    unsafe fn buffer(&self, bytes: &[u8], usage: vk::BufferUsageFlags) -> Buf {
        let size = bytes.len().max(16).div_ceil(16) * 16;
        let buffer = self
            .device
            .create_buffer(&vk::BufferCreateInfo::default().size(size as u64).usage(usage), None)
            .unwrap();
        let req = self.device.get_buffer_memory_requirements(buffer);
        let want = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let index = (0..self.memory.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && self.memory.memory_types[i as usize].property_flags.contains(want)
            })
            .expect("a host-visible coherent memory type");
        let memory = self
            .device
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(index),
                None,
            )
            .unwrap();
        self.device.bind_buffer_memory(buffer, memory, 0).unwrap();
        let ptr = self
            .device
            .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            .unwrap() as *mut u8;
        std::ptr::write_bytes(ptr, 0, size);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len());
        Buf {
            buffer,
            memory,
            ptr,
            size,
        }
    }

    unsafe fn free(&self, b: Buf) {
        self.device.unmap_memory(b.memory);
        self.device.destroy_buffer(b.buffer, None);
        self.device.free_memory(b.memory, None);
    }

    /// Runs `kernel` over `grid` programs with `buffers` (one per pointer parameter, in
    /// order; read back after the run) and the scalar arguments.
    pub fn run(&self, kernel: &SpirvKernel, buffers: &mut [Vec<u8>], scalars: &[ScalarArg], grid: [u32; 3]) {
        self.run_parts(kernel, buffers, scalars, grid, &[([0; 3], grid)]);
    }

    /// As [`Vk::run`], in several dispatches: each part is `(program_offset, programs)`.
    pub fn run_parts(
        &self,
        kernel: &SpirvKernel,
        buffers: &mut [Vec<u8>],
        scalars: &[ScalarArg],
        grid: [u32; 3],
        parts: &[([u32; 3], [u32; 3])],
    ) {
        let layout = &kernel.bindings;
        let uniform_binding = layout
            .uniform_binding()
            .expect("the harness's target has no immediates");
        assert_eq!(buffers.len(), layout.storage.len(), "one buffer per pointer parameter");
        // As the runtime hands them over: rutile's own words where the kernel needs them.
        let words = if kernel.needs_own_words() {
            kernel.spirv_words_hinted().unwrap()
        } else {
            kernel.spirv_words().unwrap()
        };
        unsafe {
            let d = &self.device;
            let storage: Vec<Buf> = buffers
                .iter()
                .map(|b| self.buffer(b, vk::BufferUsageFlags::STORAGE_BUFFER))
                .collect();
            let mut bindings: Vec<_> = layout
                .storage
                .iter()
                .map(|s| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(s.binding)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            bindings.push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(uniform_binding)
                    .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
            let set_layout = d
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .unwrap();
            let set_layouts = [set_layout];
            let pipeline_layout = d
                .create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts), None)
                .unwrap();
            let module = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
                .unwrap();
            let entry = CString::new(kernel.entry_point.clone()).unwrap();
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&entry);
            let pipeline = d
                .create_compute_pipelines(
                    vk::PipelineCache::null(),
                    &[vk::ComputePipelineCreateInfo::default()
                        .stage(stage)
                        .layout(pipeline_layout)],
                    None,
                )
                .map_err(|(_, e)| e)
                .unwrap()[0];
            let pool_sizes = [
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: storage.len().max(1) as u32,
                },
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::UNIFORM_BUFFER,
                    descriptor_count: 1,
                },
            ];
            let command_pool = d
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default().queue_family_index(self.queue_family),
                    None,
                )
                .unwrap();
            for &(offset, programs) in parts {
                let bytes = layout.launch_bytes(grid, offset, scalars).unwrap();
                let uniform = self.buffer(&bytes, vk::BufferUsageFlags::UNIFORM_BUFFER);
                let pool = d
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(1)
                            .pool_sizes(&pool_sizes),
                        None,
                    )
                    .unwrap();
                let set = d
                    .allocate_descriptor_sets(
                        &vk::DescriptorSetAllocateInfo::default()
                            .descriptor_pool(pool)
                            .set_layouts(&set_layouts),
                    )
                    .unwrap()[0];
                let infos: Vec<[vk::DescriptorBufferInfo; 1]> = storage
                    .iter()
                    .chain(std::iter::once(&uniform))
                    .map(|b| {
                        [vk::DescriptorBufferInfo {
                            buffer: b.buffer,
                            offset: 0,
                            range: vk::WHOLE_SIZE,
                        }]
                    })
                    .collect();
                let writes: Vec<_> = infos
                    .iter()
                    .enumerate()
                    .map(|(i, info)| {
                        let uniform = i == storage.len();
                        vk::WriteDescriptorSet::default()
                            .dst_set(set)
                            .dst_binding(if uniform {
                                uniform_binding
                            } else {
                                layout.storage[i].binding
                            })
                            .descriptor_type(if uniform {
                                vk::DescriptorType::UNIFORM_BUFFER
                            } else {
                                vk::DescriptorType::STORAGE_BUFFER
                            })
                            .buffer_info(info)
                    })
                    .collect();
                d.update_descriptor_sets(&writes, &[]);
                let cb = d
                    .allocate_command_buffers(
                        &vk::CommandBufferAllocateInfo::default()
                            .command_pool(command_pool)
                            .level(vk::CommandBufferLevel::PRIMARY)
                            .command_buffer_count(1),
                    )
                    .unwrap()[0];
                d.begin_command_buffer(
                    cb,
                    &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .unwrap();
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, pipeline_layout, 0, &[set], &[]);
                d.cmd_dispatch(cb, programs[0], programs[1], programs[2]);
                d.end_command_buffer(cb).unwrap();
                let cbs = [cb];
                d.queue_submit(
                    self.queue,
                    &[vk::SubmitInfo::default().command_buffers(&cbs)],
                    vk::Fence::null(),
                )
                .unwrap();
                d.queue_wait_idle(self.queue).unwrap();
                d.free_command_buffers(command_pool, &cbs);
                d.destroy_descriptor_pool(pool, None);
                self.free(uniform);
            }
            for (b, out) in storage.into_iter().zip(buffers.iter_mut()) {
                std::ptr::copy_nonoverlapping(b.ptr, out.as_mut_ptr(), out.len().min(b.size));
                self.free(b);
            }
            d.destroy_command_pool(command_pool, None);
            d.destroy_pipeline(pipeline, None);
            d.destroy_shader_module(module, None);
            d.destroy_pipeline_layout(pipeline_layout, None);
            d.destroy_descriptor_set_layout(set_layout, None);
        }
    }
}

impl Drop for Vk {
    fn drop(&mut self) {
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// Bytes of a slice of plain numbers.
pub fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    let mut out = vec![0u8; n];
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), n) };
    out
}

/// Numbers from bytes.
pub fn from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut out = vec![T::default(); n];
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), out.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    out
}
