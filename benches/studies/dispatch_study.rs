//! Where the GPU time of one Vulkan dispatch goes: the same 4096 x 1024 f32 copy kernel (and
//! empty ones) timed through raw wgpu calls in several ways: pass, encoder or in-pass
//! timestamps; after a copy-engine flush, a compute flush or none; read-only or read-write
//! input; one dispatch or eight in one pass. Medians after warm-up; docs/performance.md
//! ("One Vulkan dispatch, piece by piece") reports a run on the H100.
//!
//!     cargo run --release -p rutile-benches --example dispatch_study -- [ADAPTER]
//!
//! `STUDY_REPS=N` sets the repetitions per case, 60 by default; the first sixth are warm-up.

use rutile::vulkan::wgpu;
use rutile::vulkan::{BindingLayout, KernelSource, WgpuBuffer};

const ROWS: u32 = 4096;
const COLS: u32 = 1024;

const COPY: &str = r#"
struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, a: i32, b: i32, c: i32, d: i32, }
@group(0) @binding(0) var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) var<storage, ACCESS> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> launch: Launch;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = wg.x * 256u + launch.program_offset.x;
    let a = input_ptr[row + t];
    let b = input_ptr[row + t + 128u];
    output_ptr[row + t] = a;
    output_ptr[row + t + 128u] = b;
}
"#;

const EMPTY_BOUND: &str = r#"
struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, a: i32, b: i32, c: i32, d: i32, }
@group(0) @binding(0) var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> launch: Launch;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    if launch.a == 12345 { output_ptr[t] = input_ptr[t]; }
}
"#;

const EMPTY_NONE: &str = r#"
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) t: u32) {}
"#;

/// Copies 256 MiB (16 Mi vec4) with a compute kernel: the flush without the copy engine.
const FLUSH: &str = r#"
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> src: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let base = wg.x * 1024u + t;
    for (var i = 0u; i < 4u; i++) { dst[base + i * 256u] = src[base + i * 256u]; }
}
"#;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Stamps {
    Pass,
    Encoder,
    InPass,
}

struct Kernel {
    pipeline: wgpu::ComputePipeline,
    bind_group: Option<wgpu::BindGroup>,
    groups: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let index = std::env::args().nth(1).map(|s| s.parse()).transpose()?;
    let gpu = rutile::WgpuGpu::open(index)?;
    let dev = gpu.wgpu();
    let f = dev.features();
    println!(
        "{} (timestamps inside encoders {}, inside passes {})",
        dev.properties().name,
        f.timestamp_query_inside_encoders,
        f.timestamp_query_inside_passes
    );
    let n = (ROWS * COLS) as usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let input = WgpuBuffer::from_slice(dev, &x)?;
    let output = WgpuBuffer::zeroed(dev, n * 4)?;
    let flush_bytes = (256usize << 20).min(dev.properties().max_storage_buffer_binding_size as usize);
    let flush_a = WgpuBuffer::zeroed(dev, flush_bytes)?;
    let flush_b = WgpuBuffer::zeroed(dev, flush_bytes)?;
    let mut launch = vec![0u8; 48];
    launch[0..4].copy_from_slice(&ROWS.to_le_bytes());
    let uniform = dev.raw().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 48,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    dev.queue().write_buffer(&uniform, 0, &launch);

    let make = |src: &str, bufs: &[&wgpu::Buffer], with_uniform: bool, groups: u32| -> Kernel {
        // SAFETY: every access is in bounds for the buffers bound below; like rutile's
        // generated code, these kernels run without wgpu's bounds checks.
        let module = unsafe {
            dev.raw().create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor {
                    label: None,
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                },
                wgpu::ShaderRuntimeChecks::unchecked(),
            )
        };
        let pipeline = dev.raw().create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let mut entries: Vec<wgpu::BindGroupEntry> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        if with_uniform {
            entries.push(wgpu::BindGroupEntry {
                binding: bufs.len() as u32,
                resource: uniform.as_entire_binding(),
            });
        }
        let bind_group = (!entries.is_empty()).then(|| {
            dev.raw().create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            })
        });
        Kernel {
            pipeline,
            bind_group,
            groups,
        }
    };
    let io = [output.raw(), input.raw()];
    let copy_rw = make(&COPY.replace("ACCESS", "read_write"), &io, true, ROWS);
    let copy_ro = make(&COPY.replace("ACCESS", "read"), &io, true, ROWS);
    let empty_bound = make(EMPTY_BOUND, &io, true, 1);
    let empty_none = make(EMPTY_NONE, &[], false, 1);
    let flush_kernel = make(
        FLUSH,
        &[flush_b.raw(), flush_a.raw()],
        false,
        (flush_bytes / 16 / 1024) as u32,
    );

    let queries = dev.raw().create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolved = dev.raw().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = dev.raw().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let period = dev.queue().get_timestamp_period() as f64;
    let wait = || {
        dev.raw().poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    };

    #[derive(Clone, Copy, PartialEq)]
    enum Flush {
        None,
        CopyEngine,
        Compute,
    }
    let flush = |how: Flush| {
        let mut enc = dev.raw().create_command_encoder(&Default::default());
        match how {
            Flush::None => return,
            Flush::CopyEngine => enc.copy_buffer_to_buffer(flush_a.raw(), 0, flush_b.raw(), 0, flush_bytes as u64),
            Flush::Compute => {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&flush_kernel.pipeline);
                pass.set_bind_group(0, flush_kernel.bind_group.as_ref(), &[]);
                pass.dispatch_workgroups(flush_kernel.groups, 1, 1);
            }
        }
        dev.queue().submit([enc.finish()]);
        wait();
    };
    // One timed submission: `count` dispatches of `k`, stamped as `stamps` says.
    let time = |k: &Kernel, stamps: Stamps, count: u32, write_uniform: bool| -> f64 {
        if write_uniform {
            dev.queue().write_buffer(&uniform, 0, &launch);
        }
        let mut enc = dev.raw().create_command_encoder(&Default::default());
        if stamps == Stamps::Encoder {
            enc.write_timestamp(&queries, 0);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: (stamps == Stamps::Pass).then_some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&k.pipeline);
            if let Some(bg) = &k.bind_group {
                pass.set_bind_group(0, bg, &[]);
            }
            if stamps == Stamps::InPass {
                pass.write_timestamp(&queries, 0);
            }
            for _ in 0..count {
                pass.dispatch_workgroups(k.groups, 1, 1);
            }
            if stamps == Stamps::InPass {
                pass.write_timestamp(&queries, 1);
            }
        }
        if stamps == Stamps::Encoder {
            enc.write_timestamp(&queries, 1);
        }
        enc.resolve_query_set(&queries, 0..2, &resolved, 0);
        enc.copy_buffer_to_buffer(&resolved, 0, &staging, 0, 16);
        dev.queue().submit([enc.finish()]);
        staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        wait();
        let ticks: Vec<u64> = {
            let view = staging.slice(..).get_mapped_range().expect("mapped");
            view.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        staging.unmap();
        (ticks[1] - ticks[0]) as f64 * period * 1e-3
    };
    let median = |mut t: Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(60);
    let run = |name: &str, k: &Kernel, stamps: Stamps, how: Flush, count: u32, write_uniform: bool| {
        if (stamps == Stamps::Encoder && !f.timestamp_query_inside_encoders)
            || (stamps == Stamps::InPass && !f.timestamp_query_inside_passes)
        {
            println!("{name:<44} {stamps:?}: not supported");
            return;
        }
        let mut t = Vec::new();
        for rep in 0..reps {
            flush(how);
            let us = time(k, stamps, count, write_uniform);
            if rep >= reps / 6 {
                t.push(us);
            }
        }
        let us = median(t) / count as f64;
        let gbs = (ROWS * COLS * 8) as f64 / (us * 1e-6) / 1e9;
        println!("{name:<44} {stamps:?} x{count}: {us:.2} us  ({gbs:.0} GB/s for the copy)");
    };
    for _ in 0..2 {
        use Flush::*;
        use Stamps::*;
        run("copy, CE flush", &copy_rw, Pass, CopyEngine, 1, false);
        run("copy, CE flush, uniform rewritten", &copy_rw, Pass, CopyEngine, 1, true);
        run("copy, CE flush", &copy_rw, Encoder, CopyEngine, 1, false);
        run("copy, CE flush", &copy_rw, InPass, CopyEngine, 1, false);
        run("copy, compute flush", &copy_rw, Pass, Compute, 1, false);
        run("copy, no flush", &copy_rw, Pass, None, 1, false);
        run("copy, no flush", &copy_rw, Pass, None, 8, false);
        run("copy read-only input, CE flush", &copy_ro, Pass, CopyEngine, 1, false);
        run("copy read-only input, no flush", &copy_ro, Pass, None, 8, false);
        run(
            "empty with bindings, CE flush",
            &empty_bound,
            Pass,
            CopyEngine,
            1,
            false,
        );
        run("empty with bindings, no flush", &empty_bound, Pass, None, 1, false);
        run("empty with bindings, no flush", &empty_bound, InPass, None, 1, false);
        run("empty with bindings, no flush", &empty_bound, Pass, None, 8, false);
        run("empty no bindings, no flush", &empty_none, Pass, None, 1, false);
        run("empty no bindings, no flush", &empty_none, Pass, None, 8, false);
        run("empty no bindings, CE flush", &empty_none, Pass, CopyEngine, 1, false);
    }
    // rutile's own path for comparison.
    // SAFETY: as above.
    let pipeline = unsafe {
        dev.create_pipeline_trusted(
            KernelSource::Wgsl(
                COPY.replace("ACCESS", "read_write")
                    .replace("fn main", "fn softmax_kernel")
                    .into(),
            ),
            "softmax_kernel",
            BindingLayout::new(2, true),
        )
    };
    match pipeline {
        Ok(p) => {
            let mut t = Vec::new();
            for rep in 0..reps {
                flush(Flush::CopyEngine);
                let ms = dev
                    .dispatch_timed(&p, &[&output, &input], Some(&launch), [ROWS, 1, 1])?
                    .unwrap_or(f64::NAN);
                if rep >= reps / 6 {
                    t.push(ms * 1e3);
                }
            }
            println!("{:<44} {:.2} us", "copy through rutile's dispatch_timed", median(t));
        }
        Err(e) => println!("rutile pipeline: {e}"),
    }
    let got: Vec<f32> = output.read_as()?;
    println!("copy correct: {}", got == x);
    Ok(())
}
