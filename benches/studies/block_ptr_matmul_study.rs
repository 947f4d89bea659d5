//! What block pointers cost: the matmul tutorial's kernel written with block pointers
//! (`seeds::matmul_block_ptr`: edges masked on both dimensions) beside the plain kernel
//! (`seeds::matmul`: rows and columns wrapped, only K masked), on every GPU present, with
//! the same configurations. Each kernel is first checked against an f64 reference on a
//! ragged 1000 x 1000 x 1000 problem, then timed at 4096³ fp16 (and cuBLAS through CUDA).
//!
//!     cargo run --release -p rutile-benches --example block_ptr_matmul_study
//!
//! `STUDY_REPS=N` sets the timed runs per kernel (30 by default); `STUDY_SIZE=S` times at
//! S³ instead (and checks at S³ up to 1000).

use half::f16;
use rutile::bench::{do_bench, CacheFlush, FlushMode};
use rutile::cublas::Cublas;
use rutile::seeds::{self, MatmulMeta};
use rutile::{Arg, Backend, CudaGpu, Device, DeviceExt, Kernel, LaunchConfig};
use rutile_examples::rng::Rng;

/// `(BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)` timed through each backend.
const CONFIGS: [(u32, u32, u32, u32, u32); 3] = [(128, 256, 64, 3, 8), (128, 128, 32, 4, 4), (64, 64, 32, 3, 4)];

/// The two kernels of `meta`: plain and with block pointers.
fn kernels(meta: &MatmulMeta) -> rutile::Result<[(&'static str, Kernel); 2]> {
    Ok([
        ("plain", seeds::matmul(meta)?),
        ("block pointers", seeds::matmul_block_ptr(meta)?),
    ])
}

fn f16s(rng: &mut Rng, n: usize) -> Vec<f16> {
    rng.f32s(n, -1.0, 1.0).into_iter().map(f16::from_f32).collect()
}

/// The relative error of `kernel` launched as `config` on an `s x s x s` problem, over
/// rows 0..4 and the last, against an f64 reference.
fn error(
    dev: &dyn Device,
    kernel: &Kernel,
    meta: &MatmulMeta,
    (warps, stages): (u32, u32),
    s: usize,
) -> rutile::Result<f64> {
    let mut rng = Rng::new(5);
    let (a, b) = (f16s(&mut rng, s * s), f16s(&mut rng, s * s));
    let (ab, bb) = (dev.upload(&a)?, dev.upload(&b)?);
    let cb = dev.upload(&vec![f16::NAN; s * s])?;
    let mut args: Vec<Arg> = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(seeds::matmul_row_major_args(s, s, s).map(Arg::I32));
    let config = LaunchConfig::grid1(seeds::matmul_grid(meta, s as u32, s as u32))
        .num_warps(warps)
        .num_stages(stages);
    dev.launch(kernel, &config, &args)?;
    let c = dev.download(&cb)?;
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for r in (0..4).chain([s - 1]) {
        for col in 0..s {
            let want: f64 = (0..s).map(|i| a[r * s + i].to_f64() * b[i * s + col].to_f64()).sum();
            let got = c[r * s + col].to_f64();
            diff += (got - want).powi(2);
            norm += want * want;
        }
    }
    Ok((diff / norm).sqrt())
}

fn main() -> rutile::Result<()> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(30);
    let s_env: Option<usize> = rutile_examples::bench::study_setting("STUDY_SIZE");
    let (size, check) = match s_env {
        Some(s) => (s, s.min(1000)),
        None => (4096usize, 1000),
    };
    let tflops = |ms: f64| 2.0 * (size as f64).powi(3) / ms / 1e9;
    for opened in rutile_examples::gpus::open_gpus() {
        // Through CUDA, the driver-level device, which cuBLAS needs (and times on its stream).
        let cuda = opened.properties().backend == Backend::Cuda;
        let (dev, cublas): (std::sync::Arc<dyn Device>, _) = match opened.id().strip_prefix("cuda:") {
            Some(ordinal) if cuda => {
                let gpu = CudaGpu::open(ordinal.parse().unwrap_or(0))?;
                let cublas = Cublas::new(&gpu)?;
                (std::sync::Arc::new(gpu), Some(cublas))
            }
            _ => (opened.clone(), None),
        };
        let dev = dev.as_ref();
        println!("\n{} ({})", dev.id(), dev.properties().name);
        // (A software device's buffers cannot hold the flush; its times are no study's.)
        let software = dev.properties().device_type == rutile::DeviceType::Cpu;
        let flush = if software {
            None
        } else {
            Some(CacheFlush::new(dev, FlushMode::Copy)?)
        };
        let mut rng = Rng::new(7);
        let (a, b) = (
            dev.upload(&f16s(&mut rng, size * size))?,
            dev.upload(&f16s(&mut rng, size * size))?,
        );
        let c = dev.zeros::<f16>(size * size)?;
        let mut args: Vec<Arg> = vec![(&a).into(), (&b).into(), (&c).into()];
        args.extend(seeds::matmul_row_major_args(size, size, size).map(Arg::I32));
        if let Some(cublas) = &cublas {
            let t = do_bench(dev, flush.as_ref(), 3, reps, &mut || {
                cublas.matmul(&a, &b, &c, (size, size, size))
            })?;
            println!("cuBLAS {size}³: {:.1} TFLOPS", tflops(t.median_ms));
        }
        println!("config (M x N x K, stages, warps) | kernel | error at {check}³ | TFLOPS at {size}³");
        for (bm, bn, bk, stages, warps) in CONFIGS {
            let meta = MatmulMeta::fp16(bm, bn, bk);
            for (name, kernel) in kernels(&meta)? {
                let label = format!("{bm}x{bn}x{bk}, s{stages}, w{warps} | {name}");
                let err = match error(dev, &kernel, &meta, (warps, stages), check) {
                    Ok(e) => e,
                    Err(e) => {
                        println!("{label} | not run: {e}");
                        continue;
                    }
                };
                if err.is_nan() || err >= 1e-2 {
                    println!("{label} | WRONG: relative error {err:.2e}");
                    continue;
                }
                let config = LaunchConfig::grid1(seeds::matmul_grid(&meta, size as u32, size as u32))
                    .num_warps(warps)
                    .num_stages(stages);
                let t = do_bench(dev, flush.as_ref(), 3, reps, &mut || {
                    dev.launch(&kernel, &config, &args)
                })?;
                println!("{label} | {err:.1e} | {:.1}", tflops(t.median_ms));
            }
        }
    }
    Ok(())
}
