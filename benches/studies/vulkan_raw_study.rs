//! One Vulkan dispatch with nothing between the kernel and the driver: is the extra fixed
//! cost of a Vulkan dispatch on NVIDIA's driver (docs/performance.md, "One Vulkan dispatch,
//! piece by piece") wgpu's or the driver's?
//!
//!     cargo run --release -p rutile-benches --example vulkan_raw_study -- [--on-wgpu] FILE.wgsl...
//!
//! Each file (entry point `softmax_kernel`, bindings as in `benches/softmax-wgsl`: output,
//! input, launch uniform) is translated to SPIR-V by naga and run through plain Vulkan calls
//! (ash): its own instance and device with no robustness features, device-local buffers, one
//! command buffer per timed launch holding a 256 MiB copy that empties the L2 (as the
//! benchmark's flush) and the dispatch of a 4096 x 1024 f32 softmax between two timestamps,
//! submitted and waited for alone, in six arrangements of the flush, the timestamps and
//! barriers (see `Way`), median of 50 after 10 warm-up launches. An empty kernel
//! with the same bindings is timed too. Each result is checked: against the input for files
//! whose name holds `copy`, against a CPU softmax otherwise. `--on-wgpu` uses wgpu's device,
//! queue and buffers (made by rutile) instead, recording only the command buffers here.
//! `wgsl_variants` times the same files through wgpu, for comparison in the same run.

use ash::vk;
use rutile::vulkan::naga;
use rutile_examples::check::{max_abs_error, softmax_reference};
use rutile_examples::rng::{normal_f32s, Rng};
use std::ffi::CStr;

const ROWS: usize = 4096;
const COLS: usize = 1024;
const FLUSH_BYTES: u64 = 256 << 20;
const DATA_BYTES: u64 = (ROWS * COLS * 4) as u64;
const ENTRY: &CStr = c"softmax_kernel";

/// An empty kernel with the variants' bindings: the fixed cost of one dispatch.
const EMPTY: &str = "
struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, a: i32, b: i32, c: i32, d: i32, }
@group(0) @binding(0) var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> launch: Launch;
@compute @workgroup_size(128)
fn softmax_kernel() {}
";

type Error = Box<dyn std::error::Error>;

/// Where the flush and the timestamps go relative to the dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    /// Flush, timestamp, dispatch, timestamp in one command buffer: the timestamps at the
    /// bottom of the pipe wait for everything before them, as wgpu's pass timestamps.
    AsWgpu,
    /// wgpu's barrier before a dispatch whose buffers the last one wrote, recorded between
    /// the flush and the first timestamp.
    BarrierBefore,
    /// The same barrier between the first timestamp and the dispatch, where wgpu records it
    /// (inside the pass, after the pass's first timestamp).
    BarrierInside,
    /// The flush in a submission of its own, waited for: the GPU idles before the dispatch.
    FlushWaited,
    /// The flush in a submission of its own, not waited for.
    FlushSubmitted,
    /// No flush: the inputs may be in L2 from the last launch.
    NoFlush,
    /// As `AsWgpu`, with a query pool created for each launch (as rutile's timing makes a
    /// query set for each).
    FreshQueries,
    /// As `AsWgpu`, with a launch uniform buffer (its own memory, written by a copy before
    /// the flush) and a descriptor set created for each launch (as rutile's dispatch makes
    /// a uniform buffer and a bind group for each).
    FreshUniform,
}

const WAYS: [Way; 8] = [
    Way::AsWgpu,
    Way::BarrierBefore,
    Way::BarrierInside,
    Way::FlushWaited,
    Way::FlushSubmitted,
    Way::NoFlush,
    Way::FreshQueries,
    Way::FreshUniform,
];

fn main() -> Result<(), Error> {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    let on_wgpu = files.first().is_some_and(|a| a == "--on-wgpu");
    if on_wgpu {
        files.remove(0);
    }
    if files.is_empty() {
        return Err("usage: vulkan_raw_study [--on-wgpu] FILE.wgsl...".into());
    }
    let mut kernels = vec![("empty".to_string(), EMPTY.to_string())];
    for f in &files {
        let name = std::path::Path::new(f)
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        kernels.push((name, std::fs::read_to_string(f)?));
    }
    if on_wgpu {
        let gpu = rutile::WgpuGpu::open(None)?;
        study(&kernels, Some(gpu.wgpu()))
    } else {
        study(&kernels, None)
    }
}

/// Times `kernels` on a device of its own, or with `wgpu`'s device, queue and buffers
/// (made by rutile as for any kernel) and only the recording done here.
fn study(kernels: &[(String, String)], wgpu: Option<&rutile::vulkan::WgpuDevice>) -> Result<(), Error> {
    // SAFETY: every Vulkan call below gets handles made from this instance and device, in
    // the order the specification asks (created before use, destroyed only at exit), and
    // the queue is used from this thread alone, waited for idle after each submission.
    unsafe {
        // Kept alive while their raw handles are in use.
        let mut _own: Option<(ash::Entry, ash::Instance)> = None;
        let mut wgpu_buffers = Vec::new();
        let (device, queue, family, tick_ns, memory) = match wgpu {
            Some(w) => {
                let hal = w
                    .raw()
                    .as_hal::<rutile::vulkan::wgpu::hal::api::Vulkan>()
                    .ok_or("not a Vulkan device")?;
                let instance = hal.shared_instance().raw_instance();
                let physical = hal.raw_physical_device();
                let props = instance.get_physical_device_properties(physical);
                let queue = w
                    .queue()
                    .as_hal::<rutile::vulkan::wgpu::hal::api::Vulkan>()
                    .ok_or("not a Vulkan queue")?
                    .as_raw();
                println!("{} through wgpu's device and buffers", w.properties().name);
                (
                    hal.raw_device().clone(),
                    queue,
                    hal.queue_family_index(),
                    f64::from(props.limits.timestamp_period),
                    instance.get_physical_device_memory_properties(physical),
                )
            }
            None => {
                let entry = ash::Entry::load()?;
                let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
                let instance =
                    entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)?;
                let physical = instance
                    .enumerate_physical_devices()?
                    .into_iter()
                    .max_by_key(|&p| {
                        let props = instance.get_physical_device_properties(p);
                        (
                            props.vendor_id == 0x10de,
                            props.device_type == vk::PhysicalDeviceType::DISCRETE_GPU,
                        )
                    })
                    .ok_or("no Vulkan device")?;
                let props = instance.get_physical_device_properties(physical);
                let name = CStr::from_ptr(props.device_name.as_ptr()).to_string_lossy();
                println!("{name} (driver version {:#x}), its own device", props.driver_version);
                let family = instance
                    .get_physical_device_queue_family_properties(physical)
                    .iter()
                    .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE) && q.timestamp_valid_bits > 0)
                    .ok_or("no compute queue with timestamps")? as u32;
                let queue_info = [vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(family)
                    .queue_priorities(&[1.0])];
                let device = instance.create_device(
                    physical,
                    &vk::DeviceCreateInfo::default().queue_create_infos(&queue_info),
                    None,
                )?;
                let queue = device.get_device_queue(family, 0);
                let memory = instance.get_physical_device_memory_properties(physical);
                let tick_ns = f64::from(props.limits.timestamp_period);
                _own = Some((entry, instance));
                (device, queue, family, tick_ns, memory)
            }
        };
        let alloc = Alloc {
            device: &device,
            memory,
        };

        let storage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        // The buffers the kernel and the flush use: wgpu's, or bound to memory of their own.
        let mut big = |bytes: u64| -> Result<(vk::Buffer, vk::DeviceMemory), Error> {
            match wgpu {
                Some(w) => {
                    let b = rutile::vulkan::WgpuBuffer::zeroed(w, bytes as usize)?;
                    let raw = b
                        .raw()
                        .as_hal::<rutile::vulkan::wgpu::hal::api::Vulkan>()
                        .ok_or("not a Vulkan buffer")?
                        .raw_handle();
                    wgpu_buffers.push(b);
                    Ok((raw, vk::DeviceMemory::null()))
                }
                None => alloc.buffer(bytes, storage, local),
            }
        };
        // wgpu buffers are storage buffers: no larger than the device binds (on the H100,
        // 256 MiB fits).
        let flush_bytes = wgpu.map_or(FLUSH_BYTES, |w| {
            FLUSH_BYTES.min(w.properties().max_storage_buffer_binding_size)
        });
        let flush_src = big(flush_bytes)?;
        let flush_dst = big(flush_bytes)?;
        let input = big(DATA_BYTES)?;
        let output = big(DATA_BYTES)?;
        if let Some(w) = wgpu {
            w.synchronize()?;
        }
        let uniform = alloc.buffer(
            48,
            vk::BufferUsageFlags::UNIFORM_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
            local,
        )?;
        let staging = alloc.buffer(
            DATA_BYTES,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            host,
        )?;
        let mapped = device.map_memory(staging.1, 0, DATA_BYTES, vk::MemoryMapFlags::empty())? as *mut f32;
        let staged = std::slice::from_raw_parts_mut(mapped, ROWS * COLS);

        let pool = device.create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(family)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )?;
        // Two command buffers: the flush may go in a submission of its own.
        let cmds = device.allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(2),
        )?;
        let submit = |slot: usize, record: &dyn Fn(vk::CommandBuffer), wait: bool| -> Result<(), Error> {
            let cmd = cmds[slot];
            device.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())?;
            device.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )?;
            record(cmd);
            device.end_command_buffer(cmd)?;
            let one = [cmd];
            device.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&one)],
                vk::Fence::null(),
            )?;
            if wait {
                device.queue_wait_idle(queue)?;
            }
            Ok(())
        };
        let run = |record: &dyn Fn(vk::CommandBuffer)| submit(0, record, true);
        let copy = |cmd, src: vk::Buffer, dst: vk::Buffer, size| {
            device.cmd_copy_buffer(
                cmd,
                src,
                dst,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size,
                }],
            );
        };
        // The barrier wgpu records before a dispatch that reads and writes buffers the
        // last dispatch also wrote (wgpu-hal's `transition_buffers` for storage read-write
        // to storage read-write): every shader stage to every shader stage, one buffer
        // barrier per buffer.
        let wgpu_barrier = |cmd| {
            let shaders = vk::PipelineStageFlags::VERTEX_SHADER
                | vk::PipelineStageFlags::FRAGMENT_SHADER
                | vk::PipelineStageFlags::COMPUTE_SHADER;
            let rw = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE;
            let barriers = [output.0, input.0].map(|buffer| {
                vk::BufferMemoryBarrier::default()
                    .buffer(buffer)
                    .size(vk::WHOLE_SIZE)
                    .src_access_mask(rw)
                    .dst_access_mask(rw)
            });
            device.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::TOP_OF_PIPE | shaders,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE | shaders,
                vk::DependencyFlags::empty(),
                &[],
                &barriers,
                &[],
            );
        };

        // Inputs: random rows, and the launch block as rutile lays it out (grid, program
        // offset, row strides, rows, columns), both through the staging buffer.
        let x = normal_f32s(&mut Rng::new(5), ROWS * COLS);
        let expected = softmax_reference(&x, ROWS, COLS);
        staged.copy_from_slice(&x);
        run(&|c| copy(c, staging.0, input.0, DATA_BYTES))?;
        let mut block = [0u32; 12];
        for (at, v) in [(0, ROWS), (1, 1), (2, 1), (7, COLS), (8, COLS), (9, ROWS), (10, COLS)] {
            block[at] = v as u32;
        }
        staged[..12].copy_from_slice(&block.map(f32::from_bits));
        run(&|c| copy(c, staging.0, uniform.0, 48))?;

        // One descriptor set for every kernel: output, input, launch uniform.
        let binding = |i, ty| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i)
                .descriptor_type(ty)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        };
        let bindings = [
            binding(0, vk::DescriptorType::STORAGE_BUFFER),
            binding(1, vk::DescriptorType::STORAGE_BUFFER),
            binding(2, vk::DescriptorType::UNIFORM_BUFFER),
        ];
        let set_layout = device
            .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)?;
        let set_layouts = [set_layout];
        let layout =
            device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts), None)?;
        let sizes = [
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: 4,
            },
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::UNIFORM_BUFFER,
                descriptor_count: 2,
            },
        ];
        let descriptor_pool = device.create_descriptor_pool(
            &vk::DescriptorPoolCreateInfo::default()
                .flags(vk::DescriptorPoolCreateFlags::FREE_DESCRIPTOR_SET)
                .max_sets(2)
                .pool_sizes(&sizes),
            None,
        )?;
        let make_set = |uniform: vk::Buffer| -> Result<vk::DescriptorSet, Error> {
            let set = device.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(descriptor_pool)
                    .set_layouts(&set_layouts),
            )?[0];
            let infos = [output.0, input.0, uniform].map(|b| {
                [vk::DescriptorBufferInfo {
                    buffer: b,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }]
            });
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(i, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(i as u32)
                        .descriptor_type(bindings[i].descriptor_type)
                        .buffer_info(info)
                })
                .collect();
            device.update_descriptor_sets(&writes, &[]);
            Ok(set)
        };
        let set = make_set(uniform.0)?;
        let make_queries = || {
            device.create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2),
                None,
            )
        };
        let fixed_queries = make_queries()?;

        println!("µs per dispatch, median of 50 (GB/s for the 32 MB the softmax moves)");
        for (name, wgsl) in kernels {
            println!("{name}");
            let words = spirv(wgsl).map_err(|e| format!("{name}: {e}"))?;
            let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(ENTRY);
            let pipeline = device
                .create_compute_pipelines(
                    vk::PipelineCache::null(),
                    &[vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)],
                    None,
                )
                .map_err(|(_, e)| e)?[0];
            let mut line = String::new();
            for way in WAYS {
                let mut times = Vec::new();
                for rep in 0..60 {
                    let flush = |c| copy(c, flush_src.0, flush_dst.0, flush_bytes);
                    match way {
                        Way::FlushWaited => submit(1, &flush, true)?,
                        Way::FlushSubmitted => submit(1, &flush, false)?,
                        _ => {}
                    }
                    let queries = if way == Way::FreshQueries {
                        make_queries()?
                    } else {
                        fixed_queries
                    };
                    let fresh_uniform = if way == Way::FreshUniform {
                        let buffer = alloc.buffer(
                            48,
                            vk::BufferUsageFlags::UNIFORM_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
                            local,
                        )?;
                        staged[..12].copy_from_slice(&block.map(f32::from_bits));
                        Some((buffer, make_set(buffer.0)?))
                    } else {
                        None
                    };
                    let set = fresh_uniform.map_or(set, |(_, s)| s);
                    run(&|c| {
                        if let Some(((buffer, _), _)) = fresh_uniform {
                            copy(c, staging.0, buffer, 48);
                        }
                        if !matches!(way, Way::FlushWaited | Way::FlushSubmitted | Way::NoFlush) {
                            flush(c);
                        }
                        if way == Way::BarrierBefore {
                            wgpu_barrier(c);
                        }
                        device.cmd_reset_query_pool(c, queries, 0, 2);
                        device.cmd_write_timestamp(c, vk::PipelineStageFlags::BOTTOM_OF_PIPE, queries, 0);
                        if way == Way::BarrierInside {
                            wgpu_barrier(c);
                        }
                        device.cmd_bind_pipeline(c, vk::PipelineBindPoint::COMPUTE, pipeline);
                        device.cmd_bind_descriptor_sets(c, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
                        device.cmd_dispatch(c, ROWS as u32, 1, 1);
                        device.cmd_write_timestamp(c, vk::PipelineStageFlags::BOTTOM_OF_PIPE, queries, 1);
                    })?;
                    let mut ticks = [0u64; 2];
                    device.get_query_pool_results(
                        queries,
                        0,
                        &mut ticks,
                        vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
                    )?;
                    if rep >= 10 {
                        times.push(ticks[1].wrapping_sub(ticks[0]) as f64 * tick_ns * 1e-3);
                    }
                    if way == Way::FreshQueries {
                        device.destroy_query_pool(queries, None);
                    }
                    if let Some(((buffer, memory), set)) = fresh_uniform {
                        device.free_descriptor_sets(descriptor_pool, &[set])?;
                        device.destroy_buffer(buffer, None);
                        device.free_memory(memory, None);
                    }
                }
                times.sort_by(f64::total_cmp);
                let us = times[times.len() / 2];
                line += &format!(
                    "  {:<15} {us:6.2} µs ({:4.0} GB/s)\n",
                    format!("{way:?}"),
                    2.0 * DATA_BYTES as f64 / (us * 1e-6) / 1e9
                );
            }
            // The result of the last launch, then a clean output for the next kernel.
            run(&|c| copy(c, output.0, staging.0, DATA_BYTES))?;
            let err = if name == "empty" {
                0.0
            } else if name.contains("copy") {
                max_abs_error(staged.iter().map(|&v| v as f64), x.iter().map(|&v| v as f64))
            } else {
                max_abs_error(staged.iter().map(|&v| v as f64), expected.iter().copied())
            };
            print!("{line}");
            println!("  max abs error {err:.1e}");
            run(&|c| device.cmd_fill_buffer(c, output.0, 0, vk::WHOLE_SIZE, 0))?;
        }
        Ok(())
    }
}

/// WGSL to SPIR-V 1.3 words with naga (the translation wgpu makes, without its bounds
/// checks: this device has no robustness features either).
fn spirv(wgsl: &str) -> Result<Vec<u32>, String> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| format!("{e:?}"))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: ENTRY.to_string_lossy().into_owned(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())
}

/// Buffers bound to memory of the first type with the wanted properties.
struct Alloc<'a> {
    device: &'a ash::Device,
    memory: vk::PhysicalDeviceMemoryProperties,
}

impl Alloc<'_> {
    unsafe fn buffer(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
        want: vk::MemoryPropertyFlags,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), Error> {
        unsafe {
            let buffer = self.device.create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size)
                    .usage(usage)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE),
                None,
            )?;
            let needs = self.device.get_buffer_memory_requirements(buffer);
            let index = (0..self.memory.memory_type_count)
                .find(|&i| {
                    needs.memory_type_bits & (1 << i) != 0
                        && self.memory.memory_types[i as usize].property_flags.contains(want)
                })
                .ok_or("no memory type for a buffer")?;
            let memory = self.device.allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(needs.size)
                    .memory_type_index(index),
                None,
            )?;
            self.device.bind_buffer_memory(buffer, memory, 0)?;
            Ok((buffer, memory))
        }
    }
}
