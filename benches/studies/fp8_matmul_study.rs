//! The matmul tutorial's fp8 run on every GPU backend: `C = A @ B` with E5M2 (the
//! tutorial's) and E4M3 operands, B column-major as the tutorial passes it (`b.T`), f32
//! accumulation and an f16 output, beside the same kernel on f16 operands and cuBLAS's f16
//! matmul, timed in one run at M = N = K (4096 unless `STUDY_N` says otherwise). Each
//! kernel is autotuned over the tutorial's configurations and checked against the product
//! of the same operands in f64 before it is timed.
//!
//!     cargo run --release -p rutile-benches --example fp8_matmul_study
//!
//! On Hopper the fp8 `dot` runs on fp8 warpgroup MMAs (twice f16's peak rate); elsewhere on
//! the operands' f16 conversions. E4M3 runs again with its sums promoted into f32 every 128
//! elements of K (`max_num_imprecise_acc`, `STUDY_LIMIT` to change it): the price of f32
//! accuracy over a long K on Hopper.

use half::f16;
use rutile::autotune::{Autotuner, Config};
use rutile::seeds::{self, MatmulMeta};
use rutile::{Backend, Device, DeviceExt, Element, ScalarType, F8E4M3, F8E5M2};
use rutile_examples::bench::{do_bench, study_setting, CacheFlush, StudyGpu};
use rutile_examples::rng::Rng;
use rutile_examples::tutorials::{fp8_matmul_configs_for, matmul_configs_for};

/// The meta-parameters of configuration `c` for `input` operands, their sums promoted every
/// `limit` elements of K where given.
fn meta(c: &Config, input: ScalarType, limit: Option<u32>) -> rutile::Result<MatmulMeta> {
    let block = |name| c.value(name).map(|v| v as u32);
    let mut meta = MatmulMeta::fp16(block("BLOCK_M")?, block("BLOCK_N")?, block("BLOCK_K")?);
    meta.group_m = block("GROUP_M")?;
    meta.input = input;
    meta.output = ScalarType::F16;
    meta.max_num_imprecise_acc = limit;
    Ok(meta)
}

/// The tutorial's kernel on `input` operands (`a`, `b` as f64 values of that type; B
/// stored column-major), autotuned, checked on its first `rows` rows, then timed: TFLOPS.
#[allow(clippy::too_many_arguments)]
fn rutile_tflops<T: Element>(
    dev: &dyn Device,
    flush: &CacheFlush,
    n: usize,
    a: &[f64],
    b: &[f64],
    want: &[f64],
    rows: usize,
    limit: Option<u32>,
    convert: impl Fn(f64) -> T,
) -> rutile::Result<(f64, String)> {
    let input = T::TYPE;
    let ah: Vec<T> = a.iter().map(|&v| convert(v)).collect();
    // Column-major B: element (k, j) at j * n + k.
    let mut bt = vec![0.0; n * n];
    for k in 0..n {
        for j in 0..n {
            bt[j * n + k] = b[k * n + j];
        }
    }
    let bh: Vec<T> = bt.iter().map(|&v| convert(v)).collect();
    let (ab, bb, cb) = (dev.upload(&ah)?, dev.upload(&bh)?, dev.zeros::<f16>(n * n)?);
    let ints = [n, n, n, n, 1, 1, n, n, 1].map(|v| rutile::Arg::I32(v as i32));
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(ints);
    let mut configs = if input.is_fp8() {
        fp8_matmul_configs_for(dev)
    } else {
        matmul_configs_for(dev)
    };
    // (A limit above the dot's K does not build.)
    if let Some(l) = limit {
        configs.retain(|c| c.value("BLOCK_K").is_ok_and(|k| k >= l as i64));
    }
    let name = match limit {
        Some(l) => format!("fp8_study_{}_promoted_{l}", input.name()),
        None => format!("fp8_study_{}", input.name()),
    };
    let tuner = Autotuner::new(&name, configs)?;
    let build = |c: &Config| Ok(seeds::matmul(&meta(c, input, limit)?)?);
    let grid = |c: &Config| Ok([seeds::matmul_grid(&meta(c, input, limit)?, n as u32, n as u32), 1, 1]);
    let tuned = tuner.tuned(dev, &format!("{n},{n},{n},colmajor_b"), &build, &grid, &args)?;
    dev.launch(&tuned.kernel, &tuned.launch, &args)?;
    let got: Vec<f64> = dev.download(&cb)?[..rows * n].iter().map(|v| v.to_f64()).collect();
    let err = rutile_examples::check::relative_frobenius(&got, want);
    if err.is_nan() || err > 2e-3 {
        return Err(rutile::Error::Argument {
            kernel: tuned.kernel.name.clone(),
            message: format!("{input}: relative error {err:.2e} against the f64 product"),
        });
    }
    let s = do_bench(dev, Some(flush), 5, 30, &mut || {
        dev.launch(&tuned.kernel, &tuned.launch, &args)
    })?;
    let flops = 2.0 * (n as f64).powi(3);
    Ok((flops / (s.median_ms * 1e-3) / 1e12, tuned.choice.config.to_string()))
}

fn main() -> rutile::Result<()> {
    let n: usize = study_setting("STUDY_N").unwrap_or(4096);
    let rows = 16;
    let limit: u32 = study_setting("STUDY_LIMIT").unwrap_or(128);
    let devices = rutile_examples::gpus::hardware_gpus();
    if devices.is_empty() {
        println!("no GPU: nothing to time");
        return Ok(());
    }
    let mut rng = Rng::new(5);
    let raw_a = rng.f32s(n * n, -1.0, 1.0);
    let raw_b = rng.f32s(n * n, -1.0, 1.0);
    println!("C = A @ B at {n}^3, f32 accumulation, f16 output; B column-major; TFLOPS (median of 30)");
    for dev in &devices {
        let gpu = StudyGpu::open(dev, n)?;
        let (dev, flush, cublas) = (gpu.device(), &gpu.flush, gpu.cublas_f16);
        let mut line = gpu.line();
        let runs = [
            (ScalarType::F16, None),
            (ScalarType::F8E5M2, None),
            (ScalarType::F8E4M3, None),
            (ScalarType::F8E4M3, Some(limit)),
        ];
        for (input, limit) in runs {
            // (Only Hopper's fp8 MMAs add in less than f32: elsewhere the limit changes nothing.)
            if limit.is_some() && dev.properties().backend != Backend::Cuda {
                continue;
            }
            if !dev.properties().supported_types.contains(&input) {
                line += &format!(", {input}: not on this device");
                continue;
            }
            let round = |v: &f32| match input {
                ScalarType::F8E5M2 => F8E5M2::from_f32(*v).to_f64(),
                ScalarType::F8E4M3 => F8E4M3::from_f32(*v).to_f64(),
                _ => f16::from_f32(*v).to_f64(),
            };
            let (a, b): (Vec<f64>, Vec<f64>) = (raw_a.iter().map(round).collect(), raw_b.iter().map(round).collect());
            let want = rutile_examples::check::matmul_reference_of(&a[..rows * n], &b, (rows, n, n), false);
            let result = match input {
                ScalarType::F8E5M2 => rutile_tflops(dev, flush, n, &a, &b, &want, rows, limit, F8E5M2::from_f64),
                ScalarType::F8E4M3 => rutile_tflops(dev, flush, n, &a, &b, &want, rows, limit, F8E4M3::from_f64),
                _ => rutile_tflops(dev, flush, n, &a, &b, &want, rows, limit, f16::from_f64),
            };
            let input = match limit {
                Some(l) => format!("{input} (max_num_imprecise_acc={l})"),
                None => input.to_string(),
            };
            match result {
                Ok((t, config)) => {
                    let of = cublas
                        .map(|c| format!(", {:.1}% of cuBLAS", 100.0 * t / c))
                        .unwrap_or_default();
                    line += &format!(", rutile {input} {t:.1}{of} [{config}]");
                }
                Err(e) => line += &format!(", rutile {input}: {e}"),
            }
        }
        println!("{line}");
    }
    Ok(())
}
