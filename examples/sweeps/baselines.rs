//! The alternatives rutile's kernels are measured against, as the seeds' figures measure
//! Triton's: the copy ceiling of the memory-bound kernels and the unfused softmax, both
//! written with rutile and run on the same device (cuBLAS, the matmul's, is
//! `rutile::cublas`).

use crate::bench::{copy_kernel, COPY_BLOCK};
use crate::sweeps::SweepDevice;
use rutile::bench::{ProviderError, Stats};
use rutile::seeds::{self, NaiveSoftmax};
use rutile::{Arg, Buffer, Device, DeviceExt, Error, LaunchConfig, Result};

/// The copy ceiling as a line: at each x, one launch of a copy kernel moving the bytes the
/// measured kernel moves at x (`bytes(x)`, read plus written), timed as the kernels are.
/// No kernel moving as many bytes through the same backend can be faster; its distance
/// from the line is what the kernel leaves on the table. `largest` is the most bytes of
/// any x.
pub fn copy_ceiling<'a>(
    sd: &'a SweepDevice<'a>,
    bytes: impl Fn(f64) -> f64 + 'a,
    largest: f64,
) -> Result<impl FnMut(f64) -> std::result::Result<Stats, ProviderError> + 'a> {
    // Each copied f32 is read and written: 8 bytes moved.
    let elements = |b: f64| (b / 8.0).ceil() as usize;
    let capacity = elements(largest).max(1);
    let data = crate::rng::Rng::new(7).f32s(capacity, 0.5, 1.5);
    let (src, dst) = (sd.dev.upload(&data)?, sd.dev.zeros::<f32>(capacity)?);
    let kernel = copy_kernel(0)?;
    Ok(move |x: f64| {
        let n = elements(bytes(x)).min(capacity);
        let config = LaunchConfig::grid1((n as u32).div_ceil(COPY_BLOCK).max(1));
        let args = [(&src).into(), (&dst).into(), (n as i32).into()];
        Ok(sd
            .timing
            .stats(sd.dev, &mut || sd.dev.launch(&kernel, &config, &args))?)
    })
}

/// The intermediates of the naive softmax: the row values (maxima, then sums) and one
/// matrix.
pub struct NaiveSoftmaxBuffers {
    row_values: Buffer<f32>,
    scratch: Buffer<f32>,
}

impl NaiveSoftmaxBuffers {
    /// Room for matrices of up to `rows x max_cols`.
    pub fn new(dev: &dyn Device, rows: usize, max_cols: usize) -> Result<NaiveSoftmaxBuffers> {
        Ok(NaiveSoftmaxBuffers {
            row_values: dev.zeros::<f32>(rows.max(1))?,
            scratch: dev.zeros::<f32>((rows * max_cols).max(1))?,
        })
    }
}

/// Queues the softmax tutorial's `naive_softmax` of the contiguous `rows x cols` matrix `x`
/// into `out`: `kernels` (built for `cols`) one after the other, each intermediate going
/// through memory as torch's unfused operations do.
pub fn naive_softmax(
    dev: &dyn Device,
    kernels: &NaiveSoftmax,
    buffers: &NaiveSoftmaxBuffers,
    out: &Buffer<f32>,
    x: &Buffer<f32>,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let n = rows * cols;
    // The element-wise kernels are masked by `n`, so the launch's own extent checks cannot
    // see a buffer that is too small: check here.
    let sizes = [
        ("x", x.len(), n),
        ("out", out.len(), n),
        ("scratch", buffers.scratch.len(), n),
        ("row values", buffers.row_values.len(), rows),
    ];
    if let Some((name, len, need)) = sizes.iter().find(|(_, len, need)| len < need) {
        return Err(Error::Argument {
            kernel: "naive_softmax".into(),
            message: format!("`{name}` holds {len} elements, a {rows} x {cols} softmax needs {need}"),
        });
    }
    if kernels.row_block < cols as u32 {
        return Err(Error::Argument {
            kernel: "naive_softmax".into(),
            message: format!(
                "the kernels were built for rows of at most {} columns, got {cols}",
                kernels.row_block
            ),
        });
    }
    let (rv, scratch) = (&buffers.row_values, &buffers.scratch);
    let (c, ne): (Arg, Arg) = ((cols as i32).into(), (n as i32).into());
    let per_row = LaunchConfig::grid1(rows as u32).num_warps(seeds::softmax_num_warps(kernels.row_block));
    let flat = LaunchConfig::grid1(seeds::naive_softmax_elementwise_grid(n as u32));
    // No kernel reads and writes the same buffer (a buffer bound twice in one dispatch is
    // not allowed everywhere): `out` holds `x - max`, then the result.
    dev.launch(&kernels.row_max, &per_row, &[rv.into(), x.into(), c, c])?;
    dev.launch(&kernels.subtract, &flat, &[out.into(), x.into(), rv.into(), c, ne])?;
    dev.launch(&kernels.exp, &flat, &[scratch.into(), out.into(), ne])?;
    dev.launch(&kernels.row_sum, &per_row, &[rv.into(), scratch.into(), c, c])?;
    dev.launch(&kernels.divide, &flat, &[out.into(), scratch.into(), rv.into(), c, ne])
}
