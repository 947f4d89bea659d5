//! The matmul tutorial's figure: TFLOPS of the fp16 matmul (f32 accumulation, fp16 out)
//! over M = N = K, autotuned per size as the tutorial does, against cuBLAS
//! (`cublasGemmEx` on the same GPU, a line of gaps that says why where it is not installed
//! or the device is not a CUDA GPU).

use super::{Scope, Sweep, SweepDevice};
use crate::rng::Rng;
use crate::tutorials::{matmul_configs_for, tuned_matmul};
use half::f16;
use rutile::autotune::Autotuner;
use rutile::bench::{Benchmark, ProviderError, Timing};
use rutile::cublas::Cublas;
use rutile::{seeds, Backend, CudaGpu, Device, DeviceExt, Result};

pub fn sweep() -> Sweep {
    Sweep {
        name: "matmul-performance",
        benchmark,
        lines,
    }
}

/// The seed's sizes, 128 to 4096 in steps of 128.
fn benchmark(scope: Scope) -> Benchmark<'static> {
    let dims: Vec<usize> = match scope {
        Scope::Small => vec![64, 128],
        Scope::Short => vec![512, 1024, 2048, 4096],
        Scope::Full => (1..33).map(|i| 128 * i).collect(),
    };
    Benchmark::new("matmul-performance", "M = N = K", dims.into_iter().map(|n| n as f64))
        .title("matmul, fp16 inputs, f32 accumulation, M = N = K")
        .tflops(|n| 2.0 * n * n * n)
}

/// Random fp16 inputs in [-1, 1] and an output, `n x n` each, the same on every device.
fn operands(dev: &dyn Device, n: usize) -> Result<[rutile::Buffer<f16>; 3]> {
    let mut rng = Rng::new(3);
    let mut half = |len| -> Vec<f16> { rng.f32s(len, -1.0, 1.0).into_iter().map(f16::from_f32).collect() };
    Ok([
        dev.upload(&half(n * n))?,
        dev.upload(&half(n * n))?,
        dev.zeros::<f16>(n * n)?,
    ])
}

fn lines<'a>(bench: &mut Benchmark<'a>, sd: &'a SweepDevice<'a>, _: Scope) -> Result<()> {
    let dev = sd.dev;
    let largest = bench.x_values().iter().copied().fold(0.0, f64::max) as usize;
    let [a, b, c] = operands(dev, largest)?;
    // Choices are remembered in the autotuner's cache file, as the tutorial's are.
    let tuner = Autotuner::new("matmul", matmul_configs_for(dev))?;
    bench.add_line(sd.line("rutile"), move |n| {
        let n = n as usize;
        let mut args = vec![(&a).into(), (&b).into(), (&c).into()];
        args.extend(seeds::matmul_row_major_args(n, n, n).map(rutile::Arg::I32));
        let tuned = tuned_matmul(dev, &tuner, (n, n, n), false, &args)?;
        Ok(sd
            .timing
            .stats(dev, &mut || dev.launch(&tuned.kernel, &tuned.launch, &args))?)
    });
    match cublas_on(dev, largest, &sd.timing) {
        Ok(line) => {
            bench.add_line(sd.line("cuBLAS"), line);
        }
        Err(reason) if sd.alone || dev.properties().backend == Backend::Cuda => {
            let reason = reason.to_string();
            bench.add_line(sd.line("cuBLAS"), move |_| Err(reason.clone().into()));
        }
        // Another backend among several devices: the CUDA device of the same GPU has the line.
        Err(_) => {}
    }
    Ok(())
}

/// The cuBLAS line of `dev`: on a CUDA GPU, cuBLAS on a driver-level device of the same
/// GPU and context (cuBLAS needs one), on inputs like rutile's, timed by its events as
/// rutile's launches are.
fn cublas_on(
    dev: &dyn Device,
    largest: usize,
    timing: &Timing,
) -> std::result::Result<impl FnMut(f64) -> std::result::Result<rutile::bench::Stats, ProviderError>, ProviderError> {
    if dev.properties().backend != Backend::Cuda {
        return Err(format!("cuBLAS runs on CUDA devices, not on {}", dev.id()).into());
    }
    let ordinal: usize = dev
        .id()
        .strip_prefix("cuda:")
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| format!("`{}` is not a CUDA device id", dev.id()))?;
    let gpu = CudaGpu::open(ordinal)?;
    let cublas = Cublas::new(&gpu).map_err(|e| match e {
        rutile::Error::Device { message, .. } => message,
        e => e.to_string(),
    })?;
    eprintln!("measuring {} on {}", cublas.library(), gpu.id());
    let [a, b, c] = operands(&gpu, largest)?;
    // Timed as `timing` times rutile's launches, with buffers of the driver-level device.
    let timing = Timing {
        flush: match timing.flush {
            Some(_) => Some(rutile::bench::CacheFlush::new(&gpu, rutile::bench::FlushMode::Copy)?),
            None => None,
        },
        warmup: timing.warmup,
        reps: timing.reps,
    };
    Ok(move |n: f64| {
        let n = n as usize;
        Ok(timing.stats(&gpu, &mut || cublas.matmul(&a, &b, &c, (n, n, n)))?)
    })
}
