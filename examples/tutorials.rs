//! The seed tutorials, run on any device and checked against CPU references.

use crate::check::{matmul_reference, max_relative_error, softmax_reference};
use crate::rng::Rng;
use half::f16;
use rutile::seeds::{self, Activation, MatmulMeta};
use rutile::{Device, DeviceExt, LaunchConfig, Result, ScalarType};

/// What one tutorial run found.
pub struct Outcome {
    pub tutorial: String,
    pub size: String,
    /// The device it ran on (`cuda:0`, `vulkan:0`, `cpu`).
    pub device: String,
    /// The largest error against the reference, and the bound it must stay within.
    pub error: f64,
    pub tolerance: f64,
    /// Device time of one launch, in milliseconds.
    pub time_ms: f64,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.error <= self.tolerance
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<22} {:<16} {:<9} error {:.2e} (bound {:.0e}) {:>9.3} ms  {}",
            self.tutorial,
            self.size,
            self.device,
            self.error,
            self.tolerance,
            self.time_ms,
            if self.passed() { "ok" } else { "FAILED" }
        )
    }
}

/// Launches once to compile and warm up, then times one launch on the device.
fn timed(dev: &dyn Device, kernel: &rutile::Kernel, config: &LaunchConfig, args: &[rutile::Arg<'_>]) -> Result<f64> {
    dev.launch(kernel, config, args)?;
    dev.time(&mut || dev.launch(kernel, config, args))
}

/// Vector add of `n` f32 elements (the tutorial's 98432 by default): must be exact.
pub fn vector_add(dev: &dyn Device, n: usize, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let (x, y) = (rng.f32s(n, 0.0, 1.0), rng.f32s(n, 0.0, 1.0));
    let block = 1024;
    let kernel = seeds::vector_add(ScalarType::F32, block)?;
    let (xb, yb, zb) = (dev.upload(&x)?, dev.upload(&y)?, dev.zeros::<f32>(n)?);
    let config = LaunchConfig::grid1((n as u32).div_ceil(block));
    let args = [(&xb).into(), (&yb).into(), (&zb).into(), (n as i32).into()];
    let time_ms = timed(dev, &kernel, &config, &args)?;
    let z = dev.download(&zb)?;
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| (a + b) as f64).collect();
    let (error, _) = max_relative_error(z.iter().map(|&v| v as f64), &want, 0.0);
    Ok(Outcome {
        tutorial: "vector add".into(),
        size: format!("{n}"),
        device: dev.id(),
        error,
        tolerance: 0.0,
        time_ms,
    })
}

/// Fused softmax of a `rows x cols` f32 matrix, one row per program or persistent.
pub fn softmax(dev: &dyn Device, rows: usize, cols: usize, persistent: bool, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let x = crate::rng::normal_f32s(&mut rng, rows * cols);
    let block = seeds::softmax_block(cols as u32);
    let num_warps = seeds::softmax_num_warps(block);
    let kernel = if persistent {
        seeds::softmax_persistent(block)?
    } else {
        seeds::softmax(block)?
    };
    let (xb, yb) = (dev.upload(&x)?, dev.zeros::<f32>(rows * cols)?);
    let args = [
        (&yb).into(),
        (&xb).into(),
        (cols as i32).into(),
        (cols as i32).into(),
        (rows as i32).into(),
        (cols as i32).into(),
    ];
    let mut config = LaunchConfig::grid1(rows as u32).num_warps(num_warps);
    if persistent {
        let compiled = dev.compile_for(&kernel, &config, &args)?;
        let programs = rutile::occupancy::persistent_grid(dev.properties(), &compiled.metadata, rows as u32);
        config.grid = [programs, 1, 1];
    }
    let time_ms = timed(dev, &kernel, &config, &args)?;
    let y = dev.download(&yb)?;
    let want = softmax_reference(&x, rows, cols);
    let (error, _) = max_relative_error(y.iter().map(|&v| v as f64), &want, 1e-30);
    let name = if persistent { "softmax (persistent)" } else { "softmax" };
    Ok(Outcome {
        tutorial: name.into(),
        size: format!("{rows}x{cols}"),
        device: dev.id(),
        error,
        tolerance: 1e-5,
        time_ms,
    })
}

/// Matmul of fp16 `m x k` and `k x n` matrices into fp16, with optional leaky ReLU.
pub fn matmul(dev: &dyn Device, m: usize, n: usize, k: usize, leaky_relu: bool, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let a: Vec<f16> = rng.f32s(m * k, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = rng.f32s(k * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let mut meta = MatmulMeta::fp16(64, 64, 32);
    meta.activation = leaky_relu.then_some(Activation::LeakyRelu);
    let kernel = seeds::matmul(&meta)?;
    let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(m * n)?);
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32));
    let config = LaunchConfig::grid1(seeds::matmul_grid(&meta, m as u32, n as u32));
    let time_ms = timed(dev, &kernel, &config, &args)?;
    let c = dev.download(&cb)?;
    let want = matmul_reference(&a, &b, m, n, k, leaky_relu);
    // fp16 output: half an ulp of the result (2^-11 relative) plus f32 accumulation error,
    // relative to the magnitude of a dot product of k terms in [-1, 1] (about sqrt(k)/3).
    let scale = (k as f64).sqrt() / 3.0;
    let (error, _) = max_relative_error(c.iter().map(|v| v.to_f64()), &want, scale);
    let name = if leaky_relu { "matmul + leaky_relu" } else { "matmul" };
    Ok(Outcome {
        tutorial: name.into(),
        size: format!("{m}x{n}x{k}"),
        device: dev.id(),
        error,
        tolerance: 2e-3,
        time_ms,
    })
}
