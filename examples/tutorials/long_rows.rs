//! Softmax and layer norm for rows that do not fit one block (over 64 KiB: Triton's
//! persistent softmax tutorial fails from 32768 f32 columns on with `OutOfResources`): one
//! program per row walks it in blocks, gathering its statistics online; softmax rows up to
//! 128 KiB are instead held in the registers of one large program, and longer ones, where
//! the device has thread-block clusters, in the registers of the programs of a cluster. The
//! softmax and layer norm tutorials' host code picks these kernels by itself for such rows
//! ([`softmax_launch`], [`layer_norm_long_launch`]); the functions here run those
//! tutorials at such sizes.

use super::{Outcome, SoftmaxForm};
use rutile::seeds::{self, LayerNormMeta, LongRowMeta, SoftmaxOptions};
use rutile::{Device, DeviceExt, Kernel, LaunchConfig, Result, ScalarType};

/// The widest f32 row the softmax's host code holds in registers, one block of
/// [`REGISTER_ROW_WARPS`] warps (Triton's tutorial runs out of resources here): 32
/// elements a thread, 64 registers on sm_80 and sm_90, none spilled. Read once where the
/// long-row kernel reads it twice, it ran at 99.5% of the copy ceiling on an H100 at 8192 x
/// 32768 through CUDA (the long-row kernel: 70%) and at 75.5% through Vulkan (67.6%)
/// (`docs/performance.md`).
pub const REGISTER_ROW_MAX: usize = 32768;

/// The warps of a program holding a row of up to [`REGISTER_ROW_MAX`] columns: 32 and 16
/// measured alike through CUDA, 32 ahead through Vulkan (75.5% of the ceiling against
/// 67.5%); 8 would need 181 registers a thread.
pub const REGISTER_ROW_WARPS: u32 = 32;

/// The softmax's kernel and launch for `rows` rows of `cols` f32 columns over 64 KiB (its
/// host code's choice for such rows) on `dev`, with `args` (the softmax's, which a grid of
/// resident clusters is compiled for): rows up to [`REGISTER_ROW_MAX`] columns as one block
/// held in registers; longer ones, where the device has thread-block clusters big enough,
/// shared by the programs of a cluster, each holding its share in registers: where it also
/// has asynchronous copies, clusters that walk rows with the next row's shares copied
/// ahead ([`cluster_walk_for`], [`softmax_cluster_rows_launch_on`]), else a cluster a row
/// ([`cluster_for`], [`softmax_cluster_launch_on`]); elsewhere walked by the long-row
/// kernel ([`softmax_long_launch`]). Triton's `/` (within 2 ulp), as the autotuned
/// one-block softmax.
pub fn softmax_launch(
    dev: &dyn Device,
    rows: usize,
    cols: usize,
    args: &[rutile::Arg<'_>],
) -> Result<(Kernel, LaunchConfig)> {
    if cols > REGISTER_ROW_MAX {
        let props = dev.properties();
        let max = props.max_cluster();
        if let Some(shape) = cluster_walk_for(cols, max).filter(|_| props.async_copies()) {
            return softmax_cluster_rows_launch_on(dev, rows, cols, shape, CLUSTER_WALK_STAGES, args);
        }
        return match cluster_for(cols, max) {
            Some(shape) => softmax_cluster_launch_on(rows, cols, shape),
            None => softmax_long_launch(rows),
        };
    }
    let kernel = seeds::softmax_with(seeds::softmax_block(cols as u32), division_as_triton())?;
    Ok((kernel, LaunchConfig::grid1(rows as u32).num_warps(REGISTER_ROW_WARPS)))
}

/// The columns a program of a cluster that walks rows holds: 64 a thread on 16 warps, one
/// program a multiprocessor (its registers and the one stage its next share is copied
/// into). On an H200 (`docs/performance.md`, "Clusters walking rows") the fastest walk of
/// the sweep at 65536 to 262144 columns (2 to 8 programs: 87.3%, 81.6%, 77.9% of the copy
/// ceiling, where the clusters of a row ran 86.9%, 81.1%, 70.5%); with the exponentials as
/// `exp2` ("The clusters' exponentials") 92.4%, 90.0%, 86.4%.
pub const CLUSTER_WALK_SHARE: usize = 32768;

/// The stages of the clusters' walk: the next row's shares in flight (3 measured no
/// faster than 2 and take twice the shared memory).
pub const CLUSTER_WALK_STAGES: u32 = 2;

/// How a cluster of at most `max_cluster` programs that walks rows shares a softmax row of
/// `cols` columns: as many programs as [`CLUSTER_WALK_SHARE`]s fit the row (2 at least),
/// 64 columns a thread. `None` where the device has no clusters or the row is longer than
/// its largest cluster holds.
pub fn cluster_walk_for(cols: usize, max_cluster: u32) -> Option<ClusterShape> {
    cluster_shape(cols, max_cluster, CLUSTER_WALK_SHARE, 64, CLUSTER_WALK_SHARE)
}

/// How the programs of a thread-block cluster share a row (the cluster softmax's launch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterShape {
    /// Programs a row.
    pub cluster: u32,
    pub num_warps: u32,
}

/// The columns a program of a cluster holds where the cluster can be large enough: 64 a
/// thread on 8 warps, so that two programs share a multiprocessor and one's loads overlap
/// the other's exchange. On an H100 (`docs/performance.md`), of the clusters of 2 to 16
/// programs on 4 to 32 warps holding 32 or 64 columns a thread, it was the fastest at 65536
/// and 131072 columns (4 programs: 98.2% of the copy ceiling; 8: 93.9%) and at 262144 (16
/// programs: 85.2%), where 8 programs of 32768 columns on 16 warps ran at 84.8%.
pub const CLUSTER_SHARE: usize = 16384;

/// How a cluster of at most `max_cluster` programs shares a softmax row of `cols` columns:
/// as many programs as [`CLUSTER_SHARE`]s fit the row, each holding the next power of two
/// of its share in registers (at most [`REGISTER_ROW_MAX`]), 64 columns a thread. `None`
/// where the device has no clusters or the row is longer than its largest cluster holds.
pub fn cluster_for(cols: usize, max_cluster: u32) -> Option<ClusterShape> {
    cluster_shape(cols, max_cluster, CLUSTER_SHARE, 64, REGISTER_ROW_MAX)
}

/// `cols` split over as many programs as `share`s fit (2 to `max_cluster`), each holding the
/// next power of two of its part (at most `most`), `per_thread` elements a thread. `None`
/// where the device has no clusters or the part would be longer than `most`.
pub fn cluster_shape(
    cols: usize,
    max_cluster: u32,
    share: usize,
    per_thread: usize,
    most: usize,
) -> Option<ClusterShape> {
    if max_cluster < 2 {
        return None;
    }
    let cluster = (cols.div_ceil(share) as u32).clamp(2, max_cluster);
    let part = cols.div_ceil(cluster as usize).next_power_of_two();
    (part <= most).then(|| ClusterShape {
        cluster,
        num_warps: (part / (32 * per_thread)).clamp(1, 32) as u32,
    })
}

/// The cluster softmax's kernel and launch for `rows` rows of `cols` columns shared as
/// `shape` says: each program holds the next power of two of `cols / cluster` columns in
/// registers; the programs of a row agree on its maximum and sum through each other's
/// shared memory in one exchange (`cluster_reduce_n`), so the row is read once.
pub fn softmax_cluster_launch_on(rows: usize, cols: usize, shape: ClusterShape) -> Result<(Kernel, LaunchConfig)> {
    let ClusterShape { cluster, num_warps } = shape;
    let block = seeds::softmax_block(cols.div_ceil(cluster.max(1) as usize) as u32);
    Ok((
        seeds::softmax_cluster(block, cluster, division_as_triton())?,
        LaunchConfig::grid1(rows as u32 * cluster)
            .num_warps(num_warps)
            .cluster(cluster)
            .maxnreg(two_programs_a_multiprocessor(num_warps)),
    ))
}

/// [`softmax_cluster_launch_on`] with the clusters walking rows
/// ([`seeds::softmax_cluster_rows`]): each program's share of the next rows copied ahead
/// `num_stages - 1` rows (through CUDA's asynchronous copies) while this row's statistics
/// cross the cluster and its share is stored, on as many clusters as the device holds at
/// once (`DeviceExt::resident_grid`, compiled for `args`, the softmax's), under the
/// register limit that lets two programs of 8 warps share a multiprocessor, as the one-row
/// clusters. On 2 stages a share takes one stage of shared memory (the stage a thread has
/// read is refilled, `Target::refill_after_read`): 64 KB at 16384 columns, so two such
/// programs fit; 128 KB at 32768 (the host code's, on 16 warps), one.
pub fn softmax_cluster_rows_launch_on(
    dev: &dyn Device,
    rows: usize,
    cols: usize,
    shape: ClusterShape,
    num_stages: u32,
    args: &[rutile::Arg<'_>],
) -> Result<(Kernel, LaunchConfig)> {
    let ClusterShape { cluster, num_warps } = shape;
    let block = seeds::softmax_block(cols.div_ceil(cluster.max(1) as usize) as u32);
    let kernel = seeds::softmax_cluster_rows(block, cluster, num_stages, division_as_triton())?;
    let config = LaunchConfig::grid1(rows as u32 * cluster)
        .num_warps(num_warps)
        .cluster(cluster)
        .maxnreg(two_programs_a_multiprocessor(num_warps));
    let config = dev.resident_grid(&kernel, config, args, rows as u32)?;
    Ok((kernel, config))
}

/// A register limit that lets two programs of `num_warps` warps share a multiprocessor of
/// 64K registers, where it leaves a thread at least 128 (below that the cluster softmax's
/// 64 columns a thread would spill); `None` where two fit anyway. Without it `ptxas` gives
/// the 8-warp program that folds 16 programs' pairs 136 registers, one program a
/// multiprocessor; capped at 128 it takes 127 and spills nothing (sm_90).
fn two_programs_a_multiprocessor(num_warps: u32) -> Option<u32> {
    let limit = 65536 / (2 * 32 * num_warps.max(1));
    (128..255).contains(&limit).then_some(limit)
}

/// The long-row softmax kernel and launch for `rows` rows, plain loads, so that the second
/// walk over a row finds the blocks the first left in the cache; on
/// [`LONG_ROW_SOFTMAX_WARPS`] warps.
pub fn softmax_long_launch(rows: usize) -> Result<(Kernel, LaunchConfig)> {
    let meta = LongRowMeta::default();
    Ok((
        seeds::softmax_long(meta.block_size, division_as_triton())?,
        LaunchConfig::grid1(rows as u32).num_warps(LONG_ROW_SOFTMAX_WARPS),
    ))
}

/// The long-row softmax's warps: 32 (32 registers a thread), two programs a
/// multiprocessor where 8 warps (59 registers) made four, so that half as many rows are in
/// flight and the second walk over each finds more of it in the L2 cache. On an H100 at
/// 65536 to 262144 columns it ran at 73.6%, 67.7% and 65.2% of the copy ceiling through
/// CUDA against 65.8%, 63.0% and 61.7% on 8 warps, and 67.4%, 64.4% and 62.6% through
/// Vulkan against 64.5%, 62.3% and 60.9% (`docs/performance.md`).
pub const LONG_ROW_SOFTMAX_WARPS: u32 = 32;

/// Triton's f32 `/` (within 2 ulp) rather than a correctly rounded division.
fn division_as_triton() -> SoftmaxOptions {
    SoftmaxOptions {
        ieee_rounding: false,
        ..SoftmaxOptions::default()
    }
}

/// The cluster layer norm's kernel and launch for `m` rows of `n` columns shared as
/// `shape` says ([`seeds::layer_norm_cluster`]). Not the host code's pick: on an H100 it
/// ran slower than the long-row kernel at every width (67.5% of the copy ceiling against
/// 74.8% at 32768 columns, 54.8% against 60.0% at 262144, at its best shapes;
/// `docs/performance.md`), so the benchmark times it beside that one.
pub fn layer_norm_cluster_launch_on(
    m: usize,
    n: usize,
    dtype: ScalarType,
    shape: ClusterShape,
) -> Result<(Kernel, LaunchConfig)> {
    let ClusterShape { cluster, num_warps } = shape;
    let block_size = (n.div_ceil(cluster.max(1) as usize).next_power_of_two()) as u32;
    let kernel = seeds::layer_norm_cluster(&LayerNormMeta { block_size, dtype }, cluster)?;
    Ok((
        kernel,
        LaunchConfig::grid1(m as u32 * cluster)
            .num_warps(num_warps)
            .cluster(cluster),
    ))
}

/// The long-row layer norm kernel and launch for `m` rows of `dtype` on `dev`: blocks of
/// 4096 columns on 16 warps, which measured fastest of 1 to 16 warps on an H100 at 32768 to
/// 262144 fp16 columns through both backends (`docs/performance.md`; 8, the long-row
/// softmax's, lost 3 to 21 points). Through CUDA on devices with asynchronous copies, whose
/// walks copy their next blocks ahead (`seeds::WALK_STAGES`), 8 warps at 80
/// registers a thread: on an H200 the fastest of the sweep at 32768 and 65536 columns (8
/// and 4 points above 16 warps), 1.4 below it at 262144.
pub fn layer_norm_long_launch(dev: &dyn Device, m: usize, dtype: ScalarType) -> Result<(Kernel, LaunchConfig)> {
    let (num_warps, maxnreg) = if dev.properties().async_copies() {
        (8, Some(80))
    } else {
        (16, None)
    };
    let meta = LongRowMeta {
        num_warps,
        ..LongRowMeta::default()
    };
    let kernel = seeds::layer_norm_long(&LayerNormMeta {
        block_size: meta.block_size,
        dtype,
    })?;
    Ok((
        kernel,
        LaunchConfig::grid1(m as u32).num_warps(meta.num_warps).maxnreg(maxnreg),
    ))
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
