//! Softmax and layer norm for rows that do not fit one block (over 64 KiB: Triton's
//! persistent softmax tutorial fails from 32768 f32 columns on with `OutOfResources`): one
//! program per row walks it in blocks, gathering its statistics online. The softmax and
//! layer norm tutorials' host code picks these kernels by itself for such rows
//! ([`softmax_launch`], [`layer_norm_launch`]); the functions here run those tutorials at
//! such sizes.

use super::{Outcome, SoftmaxForm};
use rutile::seeds::{self, LayerNormMeta, LongRowMeta, SoftmaxOptions};
use rutile::{Device, Kernel, LaunchConfig, Result, ScalarType};

/// The long-row softmax kernel and launch for `rows` rows: Triton's `/` (within 2 ulp), as
/// the autotuned one-block softmax, and plain loads, so that the second walk over a row
/// finds the blocks the first left in the cache.
pub fn softmax_launch(rows: usize) -> Result<(Kernel, LaunchConfig)> {
    let meta = LongRowMeta::default();
    let options = SoftmaxOptions {
        ieee_rounding: false,
        ..SoftmaxOptions::default()
    };
    Ok((
        seeds::softmax_long(meta.block_size, options)?,
        LaunchConfig::grid1(rows as u32).num_warps(meta.num_warps),
    ))
}

/// The long-row layer norm kernel and launch for `m` rows of `dtype`: blocks of 4096
/// columns on 16 warps, which measured fastest of 1 to 16 warps on an H100 at 32768 to
/// 262144 fp16 columns through both backends (`docs/performance.md`; 8, the long-row
/// softmax's, lost 3 to 21 points).
pub fn layer_norm_launch(m: usize, dtype: ScalarType) -> Result<(Kernel, LaunchConfig)> {
    let meta = LongRowMeta {
        num_warps: 16,
        ..LongRowMeta::default()
    };
    let kernel = seeds::layer_norm_long(&LayerNormMeta {
        block_size: meta.block_size,
        dtype,
    })?;
    Ok((kernel, LaunchConfig::grid1(m as u32).num_warps(meta.num_warps)))
}

/// The softmax tutorial on `rows x cols` with rows over 64 KiB, which its host code sends
/// to the long-row kernel; an error for rows that fit one block.
pub fn softmax(dev: &dyn Device, rows: usize, cols: usize, seed: u64) -> Result<Outcome> {
    long_rows_only("softmax_kernel_long_rows", cols, ScalarType::F32)?;
    let mut outcome = super::softmax(dev, rows, cols, SoftmaxForm::Simple, seed)?;
    outcome.tutorial = "softmax (long rows)".into();
    Ok(outcome)
}

/// The layer norm tutorial (forward pass) on `m x n` fp16 with rows over 64 KiB, which its
/// host code sends to the long-row kernel; an error for rows that fit one block.
pub fn layer_norm(dev: &dyn Device, m: usize, n: usize, seed: u64) -> Result<Outcome> {
    long_rows_only("_layer_norm_fwd_long_rows", n, ScalarType::F16)?;
    let mut outcome = super::layer_norm::layer_norm(dev, m, n, seed)?;
    outcome.tutorial = "layer norm (long rows)".into();
    Ok(outcome)
}

fn long_rows_only(kernel: &str, n: usize, elem: ScalarType) -> Result<()> {
    if seeds::fits_one_block(n as u32, elem) {
        return Err(rutile::Error::Argument {
            kernel: kernel.into(),
            message: format!(
                "rows of {n} {elem} elements fit one block (at most {} bytes): the one-block kernel runs them",
                seeds::ONE_BLOCK_BYTES
            ),
        });
    }
    Ok(())
}
