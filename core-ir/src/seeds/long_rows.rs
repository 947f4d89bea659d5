//! Softmax and layer norm for rows that do not fit one block (Triton's softmax tutorials
//! hold the row in one block of the next power of two, which runs out of registers and
//! shared memory from 32768 f32 columns on). One program per row walks the row in blocks
//! twice: once to gather its statistics online (a running maximum and sum for softmax,
//! Welford's mean and sum of squared deviations for layer norm), held per lane of the block
//! so that the loop needs no reduction, and once to write the output. The second walk goes
//! from the row's end back to its start, so that it begins with the blocks the first walk
//! read last, which the cache still holds; its loads are the row's last reads, marked
//! read-once ([`CacheModifier::Streaming`]) so that they leave the cache to the first walks
//! of other rows. Both walks are pipelined [`WALK_STAGES`] deep
//! ([`KernelBuilder::for_range_staged`]): where the target has asynchronous copies, the
//! blocks a walk reads next are copied into shared memory while it works on the current
//! one.

use super::layer_norm::ForwardRow;
use super::{LayerNormMeta, SoftmaxOptions};
use crate::{BuildError, CacheModifier, Kernel, KernelBuilder, ScalarType, Value};

/// How deep the walks' loads are pipelined (their loops' `num_stages`).
pub const WALK_STAGES: u32 = 3;

/// The most bytes of a row the one-block kernels hold (the layer norm tutorial's 64 KiB:
/// 16384 f32 columns, 32768 f16 ones); longer rows go to the kernels here.
pub const ONE_BLOCK_BYTES: u32 = 65536;

/// Whether a row of `n` elements of `elem` fits the one-block kernels
/// ([`ONE_BLOCK_BYTES`]).
pub fn fits_one_block(n: u32, elem: ScalarType) -> bool {
    n.max(1)
        .checked_next_power_of_two()
        .is_some_and(|block| block as u64 * elem.size_bytes() as u64 <= ONE_BLOCK_BYTES as u64)
}

/// The block a long-row kernel walks its row in, and the warps of its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LongRowMeta {
    /// Columns per iteration (a power of two).
    pub block_size: u32,
    /// Warps per program, the launch's `num_warps`.
    pub num_warps: u32,
}

impl Default for LongRowMeta {
    /// 4096 columns on 8 warps: 16 elements a thread, two running statistics each.
    fn default() -> Self {
        LongRowMeta {
            block_size: 4096,
            num_warps: 8,
        }
    }
}

/// The last block's first column, where the second walk starts: `(cdiv(n, block) - 1) *
/// block` (negative for an empty row, so that the walk does nothing).
fn last_block<'b>(k: &'b KernelBuilder, n: Value<'b>, block: i32) -> Value<'b> {
    (k.cdiv(n, block) - 1) * block
}

/// Row-wise softmax of an `n_rows x n_cols` f32 matrix for rows of any length, one row per
/// program walking it in blocks of `block_size`: first a running maximum and sum per lane
/// (`m' = max(m, x)`, `s' = s e^(m - m') + e^(x - m')`), combined at the end of the row,
/// then the output. Same parameters and grid as [`super::softmax`]; `options` as there
/// (`options.cache` is the first walk's: the second walk's loads are read-once).
pub fn softmax_long(block_size: u32, options: impl Into<SoftmaxOptions>) -> Result<Kernel, BuildError> {
    let o = options.into();
    let block = block_size as i32;
    Kernel::build("softmax_kernel_long_rows", |k| {
        let out = k.arg_ptr("output_ptr", ScalarType::F32);
        let inp = k.arg_ptr("input_ptr", ScalarType::F32);
        let in_stride = k.arg_i32("input_row_stride");
        let out_stride = k.arg_i32("output_row_stride");
        let _n_rows = k.arg_i32("n_rows");
        let n_cols = k.arg_i32("n_cols");

        let row = k.program_id(0);
        let in_row = inp + row * in_stride;
        let out_row = out + row * out_stride;
        // The lowest finite float rather than -inf, so that `m - m'` is never `-inf - -inf`
        // in lanes that have seen only masked columns; their sums stay 0.
        let lowest = k.full(&[block_size], f32::MIN, ScalarType::F32);
        let zeros = k.zeros(&[block_size], ScalarType::F32);
        let stats = k.for_range_staged(0, n_cols, block, WALK_STAGES, &[lowest, zeros], |off, carried| {
            let (m, s) = (carried[0], carried[1]);
            let cols = off + k.arange(0, block);
            let x = k.load_masked_with(in_row + cols, cols.lt(n_cols), f32::NEG_INFINITY, o.cache);
            let m_new = m.maximum(x);
            let s = s * (m - m_new).exp() + (x - m_new).exp();
            vec![m_new, s]
        });
        let (m, s) = (stats[0], stats[1]);
        let row_max = m.max(0);
        let denominator = (s * (m - row_max).exp()).sum(0);
        k.for_range_staged(last_block(k, n_cols, block), -1, -block, WALK_STAGES, &[], |off, _| {
            let cols = off + k.arange(0, block);
            let mask = cols.lt(n_cols);
            let x = k.load_masked_with(in_row + cols, mask, f32::NEG_INFINITY, CacheModifier::Streaming);
            let y = (x - row_max).exp().fdiv(denominator, o.ieee_rounding);
            k.store_masked(out_row + cols, y, mask);
            vec![]
        });
    })
}

/// Layer norm for rows of any length: [`super::layer_norm_forward`]'s parameters, grid and
/// outputs, with the mean and variance gathered in one walk over the row by Welford's
/// method per lane (the lanes' counts differ only in the last block), combined at the end
/// of the row by Chan's formula, and the output written in a second walk.
/// `meta.block_size` is the walk's block.
pub fn layer_norm_long(meta: &LayerNormMeta) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    Kernel::build("_layer_norm_fwd_long_rows", |k| {
        let row = ForwardRow::declare(k, dtype);
        let (x_ptr, n) = (row.x_ptr, row.n);
        let zeros = k.zeros(&[block_size], ScalarType::F32);
        let stats = k.for_range_staged(0, n, block, WALK_STAGES, &[zeros, zeros], |off, carried| {
            let (mean, m2) = (carried[0], carried[1]);
            let cols = off + k.arange(0, block);
            let mask = cols.lt(n);
            let x = k.load_masked(x_ptr + cols, mask, 0.0).to(ScalarType::F32);
            // Every lane still in the row has seen one column per block so far.
            let inv_count = 1.0f32 / (off / block + 1).to(ScalarType::F32);
            let delta = x - mean;
            let mean = mean + k.where_(mask, delta * inv_count, 0.0);
            let m2 = m2 + k.where_(mask, delta * (x - mean), 0.0);
            vec![mean, m2]
        });
        let (lane_mean, lane_m2) = (stats[0], stats[1]);
        // Lane `l` saw the columns `l, l + block, ...` below `n`.
        let lanes = k.arange(0, block);
        let counts = k.cdiv((n - lanes).maximum(0), block).to(ScalarType::F32);
        let mean = (counts * lane_mean).sum(0) / n;
        let spread = lane_mean - mean;
        let rstd = row.store_stats(k, mean, (lane_m2 + counts * spread * spread).sum(0) / n);
        k.for_range_staged(last_block(k, n, block), -1, -block, WALK_STAGES, &[], |off, _| {
            let cols = off + k.arange(0, block);
            let mask = cols.lt(n);
            let x = || {
                k.load_masked_with(x_ptr + cols, mask, 0.0, CacheModifier::Streaming)
                    .to(ScalarType::F32)
            };
            row.store_output(k, cols, mask, x, (mean, rstd));
            vec![]
        });
    })
}

/// Layer norm for rows shared by the `cluster` programs of a thread-block cluster, each
/// holding `meta.block_size` columns of the row in registers: [`super::layer_norm_forward`]'s
/// parameters and outputs, each program's count, mean and squared deviations combined
/// over the cluster in one exchange (`cluster_reduce_n`, Chan's formula), so the row is
/// read once (the walking kernel reads it twice). The
/// row's first program stores its mean and `rstd`. Grid: `M * cluster` programs, launched in
/// clusters of `cluster`; `meta.block_size * cluster` is at least `N`.
pub fn layer_norm_cluster(meta: &LayerNormMeta, cluster: u32) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    Kernel::build("_layer_norm_fwd_cluster", |k| {
        let row = ForwardRow::declare_shared(k, dtype, cluster);
        let n = row.n;
        let share = k.program_id(0) % cluster as i32;
        let cols = share * block + k.arange(0, block);
        let mask = cols.lt(n);
        let x = k.load_masked(row.x_ptr + cols, mask, 0.0).to(ScalarType::F32);
        // The share's own count, mean and squared deviations from it, then the three
        // combined over the cluster by Chan's formula in one exchange.
        let count = (n - share * block).minimum(block).maximum(0).to(ScalarType::F32);
        let local_mean = x.sum(0) / count.maximum(1.0);
        let centered = k.where_(mask, x - local_mean, 0.0);
        let stats = k.cluster_reduce_n(&[count, local_mean, (centered * centered).sum(0)], |_, a, b| {
            let total = a[0] + b[0];
            let delta = b[1] - a[1];
            let weight = b[0] / total.maximum(1.0);
            vec![
                total,
                a[1] + delta * weight,
                a[2] + b[2] + delta * delta * a[0] * weight,
            ]
        });
        let mean = stats[1];
        let rstd = row.rstd(stats[2] / n);
        let first = share.eq(0);
        k.store_masked(row.mean_ptr + row.row, mean, first);
        k.store_masked(row.rstd_ptr + row.row, rstd, first);
        row.store_output(k, cols, mask, || x, (mean, rstd));
    })
}
