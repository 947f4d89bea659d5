use crate::{BuildError, CacheModifier, Kernel, ScalarType::F32, Value};

/// How the softmax kernels load their rows and divide by the row sums. The default is the
/// tutorial's kernel as rutile compiles it: plain loads, correctly rounded division. A
/// [`CacheModifier`] converts into options with that modifier and the default division.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxOptions {
    /// The input loads' cache modifier (Triton's `cache_modifier`): each row is read once,
    /// so [`CacheModifier::Streaming`] keeps it from evicting other data from the L2.
    pub cache: CacheModifier,
    /// `false`: divide as Triton's `/` compiles for f32 (`fdiv(.., false)`, within 2 ulp),
    /// which on NVIDIA GPUs needs fewer registers than the correctly rounded division, so
    /// that more programs fit on a multiprocessor.
    pub ieee_rounding: bool,
}

impl Default for SoftmaxOptions {
    fn default() -> Self {
        SoftmaxOptions {
            cache: CacheModifier::Default,
            ieee_rounding: true,
        }
    }
}

impl From<CacheModifier> for SoftmaxOptions {
    fn from(cache: CacheModifier) -> Self {
        SoftmaxOptions {
            cache,
            ..SoftmaxOptions::default()
        }
    }
}

/// The smallest power of two at least `n_cols` (the block that holds one row).
pub fn softmax_block(n_cols: u32) -> u32 {
    n_cols.max(1).next_power_of_two()
}

/// The tutorial's heuristic for the number of warps of one row's program.
pub fn softmax_num_warps(block: u32) -> u32 {
    match block {
        b if b >= 4096 => 16,
        b if b >= 2048 => 8,
        _ => 4,
    }
}

/// Row-wise softmax of an `n_rows x n_cols` f32 matrix, one row per program, as the fused
/// softmax tutorial. Parameters: `output_ptr, input_ptr` (pointers), `input_row_stride,
/// output_row_stride, n_rows, n_cols` (i32). `block` is at least `n_cols`. Grid: `n_rows`.
pub fn softmax(block: u32) -> Result<Kernel, BuildError> {
    softmax_with(block, CacheModifier::Default)
}

/// [`softmax`] with `options` (a [`CacheModifier`] or [`SoftmaxOptions`]).
pub fn softmax_with(block: u32, options: impl Into<SoftmaxOptions>) -> Result<Kernel, BuildError> {
    let o = options.into();
    Kernel::build("softmax_kernel", |k| {
        let Params {
            out,
            inp,
            in_stride,
            out_stride,
            n_cols,
            ..
        } = params(k);
        let row = k.program_id(0);
        let cols = k.arange(0, block as i32);
        let mask = cols.lt(n_cols);
        let x = k.load_masked_with(inp + row * in_stride + cols, mask, f32::NEG_INFINITY, o.cache);
        let y = row_softmax(x, o.ieee_rounding);
        k.store_masked(out + row * out_stride + cols, y, mask);
    })
}

/// [`softmax_with`] for rows too long for one program: `cluster` programs share each row,
/// `block` columns each (the programs of a row form one thread-block cluster), and agree
/// on the row's maximum and sum in one exchange (`cluster_reduce_n`), so that the row is read once and
/// held on chip, spread over the cluster's multiprocessors, where a single program would
/// walk it twice. Parameters as [`softmax`]; `block * cluster` is at least `n_cols`.
/// Grid: `n_rows * cluster` programs, launched in clusters of `cluster`.
pub fn softmax_cluster(block: u32, cluster: u32, options: impl Into<SoftmaxOptions>) -> Result<Kernel, BuildError> {
    let o = options.into();
    Kernel::build("softmax_cluster_kernel", |k| {
        let p = params(k);
        let pid = k.program_id(0);
        let share = ClusterShare::of(k, pid % cluster as i32, block, p.n_cols);
        share.softmax_row(k, &p, pid / cluster as i32, o);
    })
}

/// [`softmax_cluster`] whose clusters walk rows: cluster `c` of `C` (the grid's
/// `program_id(0) / cluster` and `num_programs(0) / cluster`) takes rows `c, c + C, ...`
/// below `n_rows`, in a loop pipelined `num_stages` deep
/// ([`crate::KernelBuilder::for_range_staged`]), so that where the target has asynchronous
/// copies each program's share of the next rows is in flight through this row's exchange
/// and stores, where a program of [`softmax_cluster`] has nothing in flight from its loads'
/// arrival to its end. Launched on as many clusters as the device holds at once (more only
/// add a second wave). Parameters as [`softmax`]; `block * cluster` is at least `n_cols`.
/// Grid: a multiple of `cluster` programs, launched in clusters of `cluster`. Results bit
/// for bit those of [`softmax_cluster`].
pub fn softmax_cluster_rows(
    block: u32,
    cluster: u32,
    num_stages: u32,
    options: impl Into<SoftmaxOptions>,
) -> Result<Kernel, BuildError> {
    let o = options.into();
    Kernel::build("softmax_cluster_rows_kernel", |k| {
        let p = params(k);
        let pid = k.program_id(0);
        let c = cluster as i32;
        let share = ClusterShare::of(k, pid % c, block, p.n_cols);
        k.for_range_staged(pid / c, p.n_rows, k.num_programs(0) / c, num_stages, &[], |row, _| {
            share.softmax_row(k, &p, row, o);
            vec![]
        });
    })
}

/// A program's share of a row that the programs of a cluster share: `block` columns from
/// `rank * block`, masked to the row's `n_cols`.
struct ClusterShare<'b> {
    cols: Value<'b>,
    mask: Value<'b>,
}

impl<'b> ClusterShare<'b> {
    fn of(k: &'b crate::KernelBuilder, rank: Value<'b>, block: u32, n_cols: Value<'b>) -> ClusterShare<'b> {
        let cols = rank * block as i32 + k.arange(0, block as i32);
        ClusterShare {
            cols,
            mask: cols.lt(n_cols),
        }
    }

    /// Loads this share of row `row`, agrees with the cluster's other programs on the row's
    /// maximum and sum, and stores the share's softmax.
    fn softmax_row(&self, k: &'b crate::KernelBuilder, p: &Params<'b>, row: Value<'b>, o: SoftmaxOptions) {
        let (cols, mask) = (self.cols, self.mask);
        let x = k.load_masked_with(p.inp + row * p.in_stride + cols, mask, f32::NEG_INFINITY, o.cache);
        // The share's own maximum, exponentials and sum first, while the other programs
        // may still be loading; then the pair (maximum, sum relative to it) crosses the
        // cluster in one exchange, combined as the online softmax combines blocks. (The
        // maximum is kept finite so that a share past the row's end gives zeros, not
        // `-inf - -inf`.) Each exponential (the share's, the combine's, the final scale) as
        // `exp2` of `(x - max)·log2 e`, as the attention tutorial writes its own: a multiply
        // and one `ex2.approx.ftz` through CUDA, where `exp` takes ten instructions to correct
        // the product's rounding, and where 64 a thread stand between a program's loads and
        // its stores that is 5 to 8 points of the copy ceiling from 65536 columns on an H200
        // (`docs/performance.md`, "The clusters' exponentials"). The subtraction's and the
        // product's roundings cost about `2·|x - max|·2^-24` relative (1.2e-6 at
        // `x - max = -10`).
        let exp = |v: Value<'b>| (v * std::f32::consts::LOG2_E).exp2();
        let local_max = x.max(0).maximum(k.scalar(f32::MIN, F32));
        let num = exp(x - local_max);
        let stats = k.cluster_reduce_n(&[local_max, num.sum(0)], |_, a, b| {
            let m = a[0].maximum(b[0]);
            vec![m, a[1] * exp(a[0] - m) + b[1] * exp(b[0] - m)]
        });
        let (row_max, total) = (stats[0], stats[1]);
        let y = num * exp(local_max - row_max).fdiv(total, o.ieee_rounding);
        k.store_masked(p.out + row * p.out_stride + cols, y, mask);
    }
}

/// The pieces [`softmax_chunked`] splits a row of `n_cols` into: at most four (see
/// [`softmax_chunks_at_most`]), so that fewer than `max(128, block / 16)` columns past the
/// row are masked off (with one block of the next power of two, nearly half may be).
pub fn softmax_chunks(n_cols: u32) -> Vec<u32> {
    softmax_chunks_at_most(n_cols, 4)
}

/// At most `pieces` powers of two (at least one), largest first, summing to `n_cols`
/// rounded up to a multiple of `max(128, softmax_block / 2^pieces)`. Fewer pieces mask off
/// more of the row's last piece but hold fewer separate blocks (registers, reductions).
pub fn softmax_chunks_at_most(n_cols: u32, pieces: u32) -> Vec<u32> {
    let block = softmax_block(n_cols);
    let grain = block.checked_shr(pieces.max(1)).unwrap_or(0).max(128).min(block);
    let padded = n_cols.max(1).div_ceil(grain) * grain;
    (0..32)
        .rev()
        .map(|b| 1u32 << b)
        .filter(|&bit| padded & bit != 0)
        .collect()
}

/// Row-wise softmax with the row held as several power-of-two blocks (`chunks`, see
/// [`softmax_chunks`]) instead of one block of the next power of two: at N = 1152 the one
/// block is 2048 wide and nearly half masked, which costs registers and bytes in flight;
/// the pieces 1024 + 128 hold only the row. Same parameters and grid as [`softmax`].
/// Every piece is a power of two (an error otherwise, as for `arange`); columns past their
/// sum are not computed. `options`: a [`CacheModifier`] or [`SoftmaxOptions`].
#[track_caller]
pub fn softmax_chunked(chunks: &[u32], options: impl Into<SoftmaxOptions>) -> Result<Kernel, BuildError> {
    let o = options.into();
    if chunks.is_empty() {
        return Err(BuildError {
            kernel: "softmax_kernel_chunked".into(),
            diagnostics: vec![crate::error::Diagnostic {
                op: "softmax_chunked".into(),
                loc: crate::ir::SourceLoc::caller(),
                message: "needs at least one piece of the row, got none".into(),
            }],
        });
    }
    Kernel::build("softmax_kernel_chunked", |k| {
        let Params {
            out,
            inp,
            in_stride,
            out_stride,
            n_cols,
            ..
        } = params(k);
        let row = k.program_id(0);
        let mut start = 0i32;
        let mut pieces = Vec::new();
        for &c in chunks {
            let cols = k.arange(start, start.saturating_add_unsigned(c));
            start = start.saturating_add_unsigned(c);
            let mask = cols.lt(n_cols);
            let x = k.load_masked_with(inp + row * in_stride + cols, mask, f32::NEG_INFINITY, o.cache);
            pieces.push((cols, mask, x));
        }
        // `chunks` is not empty: both folds have a first element.
        let Some(row_max) = pieces.iter().map(|p| p.2.max(0)).reduce(|a, b| a.maximum(b)) else {
            return;
        };
        let nums: Vec<_> = pieces.iter().map(|p| (p.2 - row_max).exp()).collect();
        let Some(denominator) = nums.iter().map(|n| n.sum(0)).reduce(|a, b| a + b) else {
            return;
        };
        for ((cols, mask, _), num) in pieces.iter().zip(nums) {
            k.store_masked(
                out + row * out_stride + *cols,
                num.fdiv(denominator, o.ieee_rounding),
                *mask,
            );
        }
    })
}

/// Row-wise softmax of `block_m` rows per program: a `[block_m, block_n]` block reduced
/// along its columns (`block_n` at least `n_cols`). For short rows, one program per row
/// leaves each program too little work to hide its fixed costs; several rows per program
/// amortize them. Same parameters as [`softmax`]; grid: `cdiv(n_rows, block_m)`.
pub fn softmax_rows(block_m: u32, block_n: u32) -> Result<Kernel, BuildError> {
    softmax_rows_with(block_m, block_n, CacheModifier::Default)
}

/// [`softmax_rows`] with `options` (a [`CacheModifier`] or [`SoftmaxOptions`]).
pub fn softmax_rows_with(block_m: u32, block_n: u32, options: impl Into<SoftmaxOptions>) -> Result<Kernel, BuildError> {
    let o = options.into();
    Kernel::build("softmax_kernel_rows", |k| {
        let Params {
            out,
            inp,
            in_stride,
            out_stride,
            n_rows,
            n_cols,
        } = params(k);
        let rows = (k.program_id(0) * block_m as i32 + k.arange(0, block_m as i32)).expand_dims(1);
        let cols = k.arange(0, block_n as i32).expand_dims(0);
        let mask = rows.lt(n_rows) & cols.lt(n_cols);
        let x = k.load_masked_with(inp + rows * in_stride + cols, mask, f32::NEG_INFINITY, o.cache);
        let z = x - x.reduce_with(crate::ir::ReduceOp::Max, 1, true);
        let num = z.exp();
        let y = num.fdiv(num.reduce_with(crate::ir::ReduceOp::Sum, 1, true), o.ieee_rounding);
        k.store_masked(out + rows * out_stride + cols, y, mask);
    })
}

/// The persistent form: each program loops over rows `pid, pid + num_programs, ...`, as
/// the persistent softmax tutorial (launch `NUM_SM x occupancy` programs). Same parameters
/// as [`softmax`]. The loop is pipelined as the tutorial's `tl.range(..., num_stages=2)`:
/// see [`softmax_persistent_staged`].
pub fn softmax_persistent(block: u32) -> Result<Kernel, BuildError> {
    softmax_persistent_staged(block, 2)
}

/// The persistent form with the tutorial's `num_stages`, written as the tutorial writes
/// it: each row loaded where the loop reduces it, the loop over rows pipelined
/// `num_stages` deep (`tl.range(row_start, n_rows, row_step, num_stages=num_stages)`,
/// [`crate::KernelBuilder::for_range_staged`]). Where the target has asynchronous copies
/// (CUDA from sm_80) the next rows are copied into shared memory while the current one is
/// reduced, and stay in flight through the reductions' barriers; elsewhere, and with 1
/// stage, each row is loaded when the loop gets to it.
pub fn softmax_persistent_staged(block: u32, num_stages: u32) -> Result<Kernel, BuildError> {
    softmax_persistent_with(block, num_stages, CacheModifier::Default)
}

/// [`softmax_persistent_staged`] with `options` (a [`CacheModifier`] or
/// [`SoftmaxOptions`]). `num_stages` is 1 to [`crate::ir::MAX_LOOP_STAGES`] (0 is taken as
/// 1); the builder reports others.
pub fn softmax_persistent_with(
    block: u32,
    num_stages: u32,
    options: impl Into<SoftmaxOptions>,
) -> Result<Kernel, BuildError> {
    let o = options.into();
    Kernel::build("softmax_kernel_persistent", |k| {
        let Params {
            out,
            inp,
            in_stride,
            out_stride,
            n_rows,
            n_cols,
        } = params(k);
        let cols = k.arange(0, block as i32);
        let mask = cols.lt(n_cols);
        let (row_start, row_step) = (k.program_id(0), k.num_programs(0));
        k.for_range_staged(row_start, n_rows, row_step, num_stages.max(1), &[], |row, _| {
            let x = k.load_masked_with(inp + row * in_stride + cols, mask, f32::NEG_INFINITY, o.cache);
            let y = row_softmax(x, o.ieee_rounding);
            k.store_masked(out + row * out_stride + cols, y, mask);
            vec![]
        });
    })
}

/// The softmax of a row `x` (along axis 0): `exp(x - max)` over its sum, the division
/// correctly rounded where `ieee_rounding` says (see [`SoftmaxOptions`]).
fn row_softmax(x: Value<'_>, ieee_rounding: bool) -> Value<'_> {
    let num = (x - x.max(0)).exp();
    num.fdiv(num.sum(0), ieee_rounding)
}

/// The parameters of every softmax form, in order.
struct Params<'b> {
    out: Value<'b>,
    inp: Value<'b>,
    in_stride: Value<'b>,
    out_stride: Value<'b>,
    n_rows: Value<'b>,
    n_cols: Value<'b>,
}

#[track_caller]
fn params(k: &crate::KernelBuilder) -> Params<'_> {
    Params {
        out: k.arg_ptr("output_ptr", F32),
        inp: k.arg_ptr("input_ptr", F32),
        in_stride: k.arg_i32("input_row_stride"),
        out_stride: k.arg_i32("output_row_stride"),
        n_rows: k.arg_i32("n_rows"),
        n_cols: k.arg_i32("n_cols"),
    }
}
