//! The host cost of one launch of a small kernel (the vector add seed on 4096 f32: four
//! programs of 128 threads) through rutile, on CUDA and on each Vulkan adapter, against a
//! plain cudarc launch (`cuLaunchKernel`) of the same PTX with the same arguments: what
//! rutile adds to the driver's launch (argument checks, specialization, the compile
//! cache's lookup, buffer extents). Target: under 1 µs more than the plain launch.
//! `rutile` is `DeviceExt::launch`, which finds the kernel in the compile cache at every
//! call; `launcher` is a `Launcher`, bound to the kernel once, which skips that lookup and
//! keeps every check.
//!
//! ```sh
//! cargo bench -p rutile-benches --bench launch
//! ```
//!
//! Launches are timed on the host in batches of 256, the device synchronized between
//! batches outside the timing, so that the queue never fills. A backend with no device
//! that opens is skipped with a message saying why.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cudarc::driver::{result, sys, CudaContext};
use rutile::{seeds, CudaGpu, Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

const N: usize = 4096;
const BLOCK: u32 = 1024;
const BATCH: u64 = 256;

/// Times `iters` calls of `launch`, in batches of [`BATCH`] with `sync` between them.
fn timed(iters: u64, launch: &mut dyn FnMut(), sync: &mut dyn FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let batch = left.min(BATCH);
        let start = Instant::now();
        for _ in 0..batch {
            launch();
        }
        total += start.elapsed();
        sync();
        left -= batch;
    }
    total
}

fn group(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group("launch");
    group.sample_size(30);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group
}

/// Launches of the vector add on `dev` through rutile.
fn rutile_launches(c: &mut Criterion, dev: &dyn Device, name: &str) -> rutile::Result<()> {
    let kernel = seeds::vector_add(ScalarType::F32, BLOCK)?;
    let (x, y, z) = (dev.zeros::<f32>(N)?, dev.zeros::<f32>(N)?, dev.zeros::<f32>(N)?);
    let config = LaunchConfig::grid1((N as u32).div_ceil(BLOCK));
    let args = [(&x).into(), (&y).into(), (&z).into(), (N as i32).into()];
    dev.launch(&kernel, &config, &args)?;
    dev.synchronize()?;
    let mut g = group(c);
    g.bench_function(BenchmarkId::new("rutile", name), |b| {
        b.iter_custom(|iters| {
            timed(iters, &mut || dev.launch(&kernel, &config, &args).unwrap(), &mut || {
                dev.synchronize().unwrap()
            })
        })
    });
    let launcher = dev.launcher(&kernel, &config)?;
    g.bench_function(BenchmarkId::new("launcher", name), |b| {
        b.iter_custom(|iters| {
            timed(iters, &mut || launcher.launch(&args).unwrap(), &mut || {
                dev.synchronize().unwrap()
            })
        })
    });
    g.finish();
    Ok(())
}

/// The PTX rutile compiles the vector add to on `gpu`, its entry point and threads per
/// program.
fn rutile_ptx(gpu: &CudaGpu) -> rutile::Result<(String, String, u32)> {
    let kernel = seeds::vector_add(ScalarType::F32, BLOCK)?;
    let (x, y, z) = (gpu.zeros::<f32>(N)?, gpu.zeros::<f32>(N)?, gpu.zeros::<f32>(N)?);
    let config = LaunchConfig::grid1((N as u32).div_ceil(BLOCK));
    let compiled = gpu.compile_for(
        &kernel,
        &config,
        &[(&x).into(), (&y).into(), (&z).into(), (N as i32).into()],
    )?;
    let ptx = compiled.code.clone().unwrap_or_default();
    let entry = ptx
        .lines()
        .find_map(|l| l.trim().strip_prefix(".visible .entry "))
        .and_then(|l| l.split('(').next())
        .unwrap_or(&kernel.name)
        .trim()
        .to_string();
    Ok((ptx, entry, compiled.metadata.threads))
}

/// The same launch with nothing between the caller and `cuLaunchKernel` but cudarc.
fn plain_cudarc_launches(c: &mut Criterion, ptx: &str, entry: &str, threads: u32) -> Result<(), String> {
    let ctx = CudaContext::new(0).map_err(|e| e.to_string())?;
    ctx.bind_to_thread().map_err(|e| e.to_string())?;
    let stream = ctx.new_stream().map_err(|e| e.to_string())?;
    let image = CString::new(ptx).map_err(|e| e.to_string())?;
    let name = CString::new(entry).map_err(|e| e.to_string())?;
    // SAFETY: the context is bound to this thread; the image is NUL-terminated PTX.
    let (module, function) = unsafe {
        let module = result::module::load_data(image.as_ptr() as *const c_void).map_err(|e| e.to_string())?;
        (
            module,
            result::module::get_function(module, name).map_err(|e| e.to_string())?,
        )
    };
    // SAFETY: plain allocations on the bound context, freed below.
    let mut buffers: Vec<sys::CUdeviceptr> = (0..3)
        .map(|_| unsafe { result::malloc_sync(N * 4) })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut n = N as i32;
    let mut params: Vec<*mut c_void> = buffers
        .iter_mut()
        .map(|b| b as *mut sys::CUdeviceptr as *mut c_void)
        .chain([&mut n as *mut i32 as *mut c_void])
        .collect();
    let grid = ((N as u32).div_ceil(BLOCK), 1, 1);
    let mut g = group(c);
    g.bench_function(BenchmarkId::new("cudarc", "cuda:0"), |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                // SAFETY: the parameters point at live values of the kernel's parameter
                // types (three device pointers of N f32, an i32), in order.
                &mut || unsafe {
                    result::launch_kernel(function, grid, (threads, 1, 1), 0, stream.cu_stream(), &mut params).unwrap()
                },
                &mut || stream.synchronize().unwrap(),
            )
        })
    });
    g.finish();
    stream.synchronize().map_err(|e| e.to_string())?;
    // SAFETY: nothing uses the buffers or the module any more.
    unsafe {
        for b in buffers {
            let _ = result::free_sync(b);
        }
        let _ = sys::cuModuleUnload(module);
    }
    Ok(())
}

fn launch(c: &mut Criterion) {
    match CudaGpu::open(0) {
        Ok(gpu) => {
            if let Err(e) = rutile_launches(c, &gpu, "cuda:0") {
                eprintln!("launch/rutile/cuda:0: failed: {e}");
            }
            match rutile_ptx(&gpu) {
                Ok((ptx, entry, threads)) => {
                    if let Err(e) = plain_cudarc_launches(c, &ptx, &entry, threads) {
                        eprintln!("launch/cudarc/cuda:0: failed: {e}");
                    }
                }
                Err(e) => eprintln!("launch/cudarc/cuda:0: skipped: compiling the PTX failed: {e}"),
            }
        }
        Err(e) => eprintln!("launch/cuda: skipped: no CUDA device opens ({e})"),
    }
    let vulkan: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id.starts_with("vulkan:"))
        .collect();
    if vulkan.is_empty() {
        eprintln!("launch/vulkan: skipped: no Vulkan adapter found");
    }
    for listing in vulkan {
        match listing.device {
            Ok(dev) => {
                let software = dev.properties().device_type == DeviceType::Cpu;
                let name = format!("{}{}", dev.id(), if software { " (software)" } else { "" });
                if let Err(e) = rutile_launches(c, dev.as_ref(), &name) {
                    eprintln!("launch/rutile/{name}: failed: {e}");
                }
            }
            Err(e) => eprintln!("launch/{}: skipped: it does not open ({e})", listing.id),
        }
    }
}

criterion_group!(benches, launch);
criterion_main!(benches);
