//! What compiling costs a user on the host, for each seed kernel: block IR to PTX (lowering
//! for an H100, sm_90 with `mma.sync` and `cp.async`, then PTX emission) and block IR to
//! SPIR-V (lowering for a GPU of 32-wide subgroups, the naga module, its SPIR-V words);
//! and the compile cache's hit path, which every launch pays to find its compiled kernel
//! (argument checks, Triton's specialization, the lookup), on the interpreter and on each
//! GPU present. Target: under 2 ms for each compile. No GPU is needed for the compiles.
//!
//! ```sh
//! cargo bench -p rutile-benches --bench compile
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rutile::{seeds, Device, DeviceExt, Kernel, LaunchConfig, ScalarType};
use rutile_ir::target::{Specialization, Target};
use rutile_spirv::SpirvTarget;
use std::time::Duration;

/// A seed kernel with the launch options it is compiled for.
struct Seed {
    name: &'static str,
    kernel: Kernel,
    num_warps: u32,
    num_stages: u32,
}

fn seeds() -> Vec<Seed> {
    let matmul = |bm, bn, bk| seeds::matmul(&seeds::MatmulMeta::fp16(bm, bn, bk)).unwrap();
    vec![
        Seed {
            name: "vector_add",
            kernel: seeds::vector_add(ScalarType::F32, 1024).unwrap(),
            num_warps: 4,
            num_stages: 1,
        },
        Seed {
            name: "softmax_1024",
            kernel: seeds::softmax(1024).unwrap(),
            num_warps: 4,
            num_stages: 1,
        },
        Seed {
            name: "softmax_persistent_4096",
            kernel: seeds::softmax_persistent(4096).unwrap(),
            num_warps: 16,
            num_stages: 1,
        },
        Seed {
            name: "matmul_64x64x32",
            kernel: matmul(64, 64, 32),
            num_warps: 4,
            num_stages: 3,
        },
        // The tutorial's configuration the autotuner picks most often on an H100.
        Seed {
            name: "matmul_128x128x32",
            kernel: matmul(128, 128, 32),
            num_warps: 8,
            num_stages: 4,
        },
    ]
}

/// The target the CUDA backend lowers for on an H100.
fn h100(num_warps: u32, num_stages: u32) -> Target {
    Target {
        native_float_minmax: true,
        mma_sync: true,
        wgmma: true,
        async_copy: true,
        num_stages,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

/// A Vulkan GPU of 32-wide subgroups with shuffles, as NVIDIA's driver reports.
fn vulkan_gpu(num_warps: u32) -> Target {
    Target::vulkan(32, num_warps, 48 * 1024)
}

fn compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
    let ptx_target = rutile_ptx::PtxTarget::from_compute_capability(9, 0);
    for seed in seeds() {
        let spec = Specialization::all(seed.kernel.params.len());
        let target = h100(seed.num_warps, seed.num_stages);
        group.bench_function(BenchmarkId::new("ptx", seed.name), |b| {
            b.iter(|| {
                let t = rutile_ir::lower::lower(&seed.kernel, &target, &spec).unwrap();
                rutile_ptx::emit(&t, &ptx_target).unwrap()
            })
        });
        // The CUDA-core matmul of 128 x 128 blocks is not what a Vulkan device is given.
        if seed.name == "matmul_128x128x32" {
            continue;
        }
        let target = vulkan_gpu(seed.num_warps);
        group.bench_function(BenchmarkId::new("spirv", seed.name), |b| {
            b.iter(|| {
                let t = rutile_ir::lower::lower(&seed.kernel, &target, &spec).unwrap();
                rutile_spirv::emit(&t, &SpirvTarget::full(32))
                    .unwrap()
                    .spirv_words()
                    .unwrap()
            })
        });
    }
    group.finish();
}

/// The compile cache's hit path on `dev`: what a launch of the softmax (4096 x 1024)
/// pays before the driver is called.
fn cache_hit(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile_cache_hit");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
    let mut devices: Vec<std::sync::Arc<dyn Device>> = vec![std::sync::Arc::new(rutile::CpuDevice::new())];
    devices.extend(rutile_examples::gpus::open_gpus());
    let (rows, cols) = (4096usize, 1024usize);
    let kernel = seeds::softmax(1024).unwrap();
    let config = LaunchConfig::grid1(rows as u32).num_warps(4);
    for dev in devices {
        let dev = dev.as_ref();
        let setup = || -> rutile::Result<_> { Ok((dev.zeros::<f32>(rows * cols)?, dev.zeros::<f32>(rows * cols)?)) };
        let (x, y) = match setup() {
            Ok(buffers) => buffers,
            Err(e) => {
                eprintln!("compile_cache_hit/{}: skipped: {e}", dev.id());
                continue;
            }
        };
        let args = rutile_examples::tutorials::softmax_args(&y, &x, rows, cols);
        if let Err(e) = dev.compile_for(&kernel, &config, &args) {
            eprintln!(
                "compile_cache_hit/{}: skipped: compiling the softmax failed: {e}",
                dev.id()
            );
            continue;
        }
        group.bench_function(BenchmarkId::new("softmax", dev.id()), |b| {
            b.iter(|| dev.compile_for(&kernel, &config, &args).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, compile, cache_hit);
criterion_main!(benches);
