//! Triton's "libdevice" tutorial: a kernel that calls a math function CUDA's libdevice
//! provides, `asin` (`tl.extra.cuda.libdevice.asin`), element by element. rutile's `asin`
//! (`Value::asin`) is built from ops every backend has, so the same kernel runs through
//! CUDA, Vulkan and the interpreter. Checked against `f64::asin`.

use super::{timed, Outcome};
use crate::rng::Rng;
use rutile::{Device, DeviceExt, Kernel, LaunchConfig, Result, ScalarType};

/// Elements per program, as the tutorial's `BLOCK_SIZE`.
pub const BLOCK: u32 = 1024;

/// The tutorial's `asin_kernel`: `y = asin(x)` over `n` elements, masked at the end.
/// Parameters: `x_ptr, y_ptr` (f32), `n_elements` (i32). Grid: `cdiv(n, BLOCK)`.
pub fn asin_kernel() -> std::result::Result<Kernel, rutile::ir::BuildError> {
    Kernel::build("asin_kernel", |k| {
        let (x_ptr, y_ptr) = (k.arg_ptr("x_ptr", ScalarType::F32), k.arg_ptr("y_ptr", ScalarType::F32));
        let n = k.arg_i32("n_elements");
        let offsets = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i32);
        let mask = offsets.lt(n);
        let x = k.load_masked(x_ptr + offsets, mask, 0.0);
        k.store_masked(y_ptr + offsets, x.asin(), mask);
    })
}

/// The largest error the check allows, relative to the result: 8 ulp of f32 (through
/// Vulkan the device's square roots and divisions add up to 5 ulp to the function's 3).
pub const TOLERANCE: f64 = 8.0 * f32::EPSILON as f64;

/// `asin` of `n` uniform values in `[0, 1)` (the tutorial's `torch.rand`) on `dev`,
/// against `f64::asin`.
pub fn asin(dev: &dyn Device, n: usize, seed: u64) -> Result<Outcome> {
    let x = Rng::new(seed).f32s(n, 0.0, 1.0);
    let (xb, yb) = (dev.upload(&x)?, dev.zeros::<f32>(n)?);
    let args = [(&xb).into(), (&yb).into(), (n as i32).into()];
    let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK));
    let time_ms = timed(dev, &asin_kernel()?, &config, &args)?;
    let y = dev.download(&yb)?;
    let error = y
        .iter()
        .zip(&x)
        .map(|(&got, &v)| {
            let want = (v as f64).asin();
            // Relative to the result, or absolute below the smallest normal.
            (got as f64 - want).abs() / want.abs().max(f32::MIN_POSITIVE as f64)
        })
        .fold(0.0f64, |worst, e| if e.is_nan() { f64::INFINITY } else { worst.max(e) });
    Ok(Outcome {
        tutorial: "asin (libdevice)".into(),
        size: n.to_string(),
        device: dev.id(),
        error,
        tolerance: TOLERANCE,
        time_ms,
        detail: None,
    })
}
