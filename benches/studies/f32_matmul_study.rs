//! `C = A @ B` on f32 operands and output at Triton's three input precisions, on every GPU
//! backend, beside cuBLAS's f16 matmul in the same run: `ieee` (full f32 products, the CUDA
//! cores), `tf32` (the operands rounded to tf32, one tensor-core MMA per product) and
//! `tf32x3` (each operand split into its tf32 rounding and the rest, three MMAs: products
//! within about 2^-21 of f32's). At M = N = K (4096 unless `STUDY_N` says otherwise), each
//! autotuned over the matmul tutorial's configurations, its first rows checked against the
//! f64 product (the relative Frobenius error is printed: tf32's is about 2.5e-4, tf32x3's
//! and ieee's f32 accumulation's) before it is timed.
//!
//!     cargo run --release -p rutile-benches --example f32_matmul_study
//!
//! `STUDY_PRECISIONS` (a comma-separated list of `ieee`, `tf32`, `tf32x3`) times only those.
//!
//! `benches/triton_baseline.py --only f32_matmul` times Triton's tutorial kernel at the same
//! precisions, and torch's f32 matmul with and without TF32, for the comparison.

use rutile::autotune::{Autotuner, Config};
use rutile::seeds::{self, MatmulMeta};
use rutile::{Device, DeviceExt, DotPrecision, ScalarType};
use rutile_examples::bench::{do_bench, study_setting, CacheFlush, StudyGpu};
use rutile_examples::rng::Rng;
use rutile_examples::tutorials::matmul_configs_for;

/// The meta-parameters of configuration `c` at input precision `precision`.
fn meta(c: &Config, precision: DotPrecision) -> rutile::Result<MatmulMeta> {
    let block = |name| c.value(name).map(|v| v as u32);
    let mut meta = MatmulMeta::fp16(block("BLOCK_M")?, block("BLOCK_N")?, block("BLOCK_K")?);
    meta.group_m = block("GROUP_M")?;
    meta.input = ScalarType::F32;
    meta.output = ScalarType::F32;
    meta.input_precision = precision;
    Ok(meta)
}

/// The tutorial's kernel at `precision` on `a` and `b` (row-major), autotuned, its first
/// `rows` rows checked against `want`: TFLOPS, the error and the configuration.
fn rutile_tflops(
    dev: &dyn Device,
    flush: &CacheFlush,
    n: usize,
    (a, b): (&[f32], &[f32]),
    want: &[f64],
    rows: usize,
    precision: DotPrecision,
) -> rutile::Result<(f64, f64, String)> {
    let (ab, bb, cb) = (dev.upload(a)?, dev.upload(b)?, dev.zeros::<f32>(n * n)?);
    let ints = [n, n, n, n, 1, n, 1, n, 1].map(|v| rutile::Arg::I32(v as i32));
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(ints);
    let name = format!("f32_study_{}", precision.name().unwrap_or("ieee"));
    let tuner = Autotuner::new(&name, matmul_configs_for(dev))?;
    let build = |c: &Config| Ok(seeds::matmul(&meta(c, precision)?)?);
    let grid = |c: &Config| Ok([seeds::matmul_grid(&meta(c, precision)?, n as u32, n as u32), 1, 1]);
    let tuned = tuner.tuned(dev, &format!("{n},{n},{n}"), &build, &grid, &args)?;
    dev.launch(&tuned.kernel, &tuned.launch, &args)?;
    let got: Vec<f64> = dev.download(&cb)?[..rows * n].iter().map(|&v| v as f64).collect();
    let err = rutile_examples::check::relative_frobenius(&got, want);
    // tf32's operand rounding: about 2.5e-4; the others: f32's accumulation.
    let bound = if precision == DotPrecision::Tf32 { 1e-3 } else { 2e-5 };
    if err.is_nan() || err > bound {
        return Err(rutile::Error::Argument {
            kernel: tuned.kernel.name.clone(),
            message: format!("{precision:?}: relative error {err:.2e} against the f64 product"),
        });
    }
    let s = do_bench(dev, Some(flush), 5, 30, &mut || {
        dev.launch(&tuned.kernel, &tuned.launch, &args)
    })?;
    let flops = 2.0 * (n as f64).powi(3);
    Ok((
        flops / (s.median_ms * 1e-3) / 1e12,
        err,
        tuned.choice.config.to_string(),
    ))
}

fn main() -> rutile::Result<()> {
    let n: usize = study_setting("STUDY_N").unwrap_or(4096);
    let rows = 16;
    let only: Option<String> = study_setting("STUDY_PRECISIONS");
    let devices = rutile_examples::gpus::hardware_gpus();
    if devices.is_empty() {
        println!("no GPU: nothing to time");
        return Ok(());
    }
    let mut rng = Rng::new(6);
    let a = rng.f32s(n * n, -1.0, 1.0);
    let b = rng.f32s(n * n, -1.0, 1.0);
    let (a64, b64): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|&v| v as f64).collect(),
        b.iter().map(|&v| v as f64).collect(),
    );
    let want = rutile_examples::check::matmul_reference_of(&a64[..rows * n], &b64, (rows, n, n), false);
    println!(
        "C = A @ B at {n}^3, f32 operands and output; TFLOPS (median of 30), relative error of the first {rows} rows"
    );
    for dev in &devices {
        let gpu = StudyGpu::open(dev, n)?;
        let (dev, flush, cublas) = (gpu.device(), &gpu.flush, gpu.cublas_f16);
        let mut line = gpu.line();
        for precision in [DotPrecision::Ieee, DotPrecision::Tf32, DotPrecision::Tf32x3] {
            let name = precision.name().unwrap_or("ieee");
            if !only
                .as_ref()
                .is_none_or(|names| names.split(',').any(|n| n.trim() == name))
            {
                continue;
            }
            match rutile_tflops(dev, flush, n, (&a, &b), &want, rows, precision) {
                Ok((t, err, config)) => {
                    let of = cublas
                        .map(|c| format!(", {:.1}% of cuBLAS f16", 100.0 * t / c))
                        .unwrap_or_default();
                    line += &format!("; {name} {t:.1}{of}, error {err:.1e} [{config}]");
                }
                Err(e) => line += &format!("; {name}: {e}"),
            }
        }
        println!("{line}");
    }
    Ok(())
}
