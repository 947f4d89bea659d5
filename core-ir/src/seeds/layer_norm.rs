//! Layer normalization, as Triton's layer norm tutorial: the fused forward pass, the
//! backward pass of the input gradient with the weight and bias gradients reduced in two
//! stages (partial sums per group of rows, accumulated under a lock built on `atomic_cas`,
//! then summed over the groups), and the host heuristics that pick their meta-parameters.

use crate::{BuildError, Kernel, KernelBuilder, ScalarType, Value};

/// The meta-parameters of the layer norm kernels (the tutorial's `BLOCK_SIZE` and the
/// element type of `x`, `w`, `b`, `y` and the gradients; means and reciprocal standard
/// deviations are f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerNormMeta {
    /// Columns one iteration of the forward pass covers, and the whole row in the backward
    /// pass (a power of two).
    pub block_size: u32,
    /// f16 (the tutorial's) or f32.
    pub dtype: ScalarType,
}

impl LayerNormMeta {
    /// The tutorial's host heuristic: one block of the next power of two holds the row, up
    /// to 64 KiB of elements. `None` when a row of `n` elements is longer (the tutorial
    /// raises "This layer norm doesn't support feature dim >= 64KB."; such rows go to the
    /// long-row kernels, [`super::layer_norm_long`]).
    pub fn for_row(n: u32, dtype: ScalarType) -> Option<LayerNormMeta> {
        let max_fused = 65536 / dtype.size_bytes() as u32;
        let block_size = n.max(1).checked_next_power_of_two()?.min(max_fused);
        (n <= block_size).then_some(LayerNormMeta { block_size, dtype })
    }

    /// The tutorial's `num_warps` (a warp per 256 columns, 1 to 8), and from 8192 columns
    /// on a warp per 512 (up to 32): each thread then holds 16 elements of each block the
    /// passes load, where 8 warps, the tutorial's most, spill registers at 16384 columns
    /// (and hold one program of 8 warps a multiprocessor at 8192).
    pub fn num_warps(&self) -> u32 {
        (self.block_size / 256).clamp(1, 8).max((self.block_size / 512).min(32))
    }
}

/// The tutorial's `GROUP_SIZE_M` for rows of `n` columns: how many partial sums of the
/// weight and bias gradients the backward pass keeps (more for short rows, whose programs
/// are quick and would otherwise wait on the same lock).
pub fn layer_norm_group_size_m(n: u32) -> u32 {
    match n {
        n if n <= 1024 => 256,
        n if n <= 4096 => 128,
        n if n <= 8192 => 96,
        _ => 64,
    }
}

/// The forward pass's parameters, declared alike by the one-block and the long-row kernels
/// (so that the host code launches either with the same arguments): `X, Y, W, B`
/// (`dtype`), `Mean, Rstd` (f32), `stride, N` (i32), `eps` (f32); `x_ptr` and `y_ptr` at
/// the program's row.
#[derive(Clone, Copy)]
pub(super) struct ForwardRow<'b> {
    pub x_ptr: Value<'b>,
    pub y_ptr: Value<'b>,
    pub w_ptr: Value<'b>,
    pub b_ptr: Value<'b>,
    pub mean_ptr: Value<'b>,
    pub rstd_ptr: Value<'b>,
    pub n: Value<'b>,
    pub eps: Value<'b>,
    pub row: Value<'b>,
    /// The element type of `X`, `Y`, `W`, `B`.
    pub dtype: ScalarType,
    /// The weight and bias (f32) at the columns the output is stored at, where a kernel
    /// loaded them once for all its rows; `None`: loaded where the output is stored.
    pub params: Option<(Value<'b>, Value<'b>)>,
}

/// The forward pass's parameters before a row is chosen: [`ForwardRow`]'s, with `X` and
/// `Y` at the matrix's first row, and the rows' `stride`.
#[derive(Clone, Copy)]
pub(super) struct ForwardArgs<'b> {
    x_ptr: Value<'b>,
    y_ptr: Value<'b>,
    w_ptr: Value<'b>,
    b_ptr: Value<'b>,
    mean_ptr: Value<'b>,
    rstd_ptr: Value<'b>,
    stride: Value<'b>,
    n: Value<'b>,
    eps: Value<'b>,
    dtype: ScalarType,
}

impl<'b> ForwardArgs<'b> {
    /// Declares the parameters in [`ForwardRow`]'s order.
    pub(super) fn declare(k: &'b KernelBuilder, dtype: ScalarType) -> ForwardArgs<'b> {
        ForwardArgs {
            x_ptr: k.arg_ptr("X", dtype),
            y_ptr: k.arg_ptr("Y", dtype),
            w_ptr: k.arg_ptr("W", dtype),
            b_ptr: k.arg_ptr("B", dtype),
            mean_ptr: k.arg_ptr("Mean", ScalarType::F32),
            rstd_ptr: k.arg_ptr("Rstd", ScalarType::F32),
            stride: k.arg_i32("stride"),
            n: k.arg_i32("N"),
            eps: k.arg_scalar("eps", ScalarType::F32),
            dtype,
        }
    }

    /// The parameters at row `row`.
    pub(super) fn at(&self, row: Value<'b>) -> ForwardRow<'b> {
        ForwardRow {
            x_ptr: self.x_ptr + row * self.stride,
            y_ptr: self.y_ptr + row * self.stride,
            w_ptr: self.w_ptr,
            b_ptr: self.b_ptr,
            mean_ptr: self.mean_ptr,
            rstd_ptr: self.rstd_ptr,
            n: self.n,
            eps: self.eps,
            row,
            dtype: self.dtype,
            params: None,
        }
    }

    /// The weight and bias at `cols` where `mask` holds (zero elsewhere), as f32: what
    /// [`ForwardRow::params`] holds for a kernel that loads them once for all its rows.
    pub(super) fn params(&self, k: &'b KernelBuilder, cols: Value<'b>, mask: Value<'b>) -> (Value<'b>, Value<'b>) {
        let load = |ptr: Value<'b>| k.load_masked(ptr + cols, mask, 0.0).to(ScalarType::F32);
        (load(self.w_ptr), load(self.b_ptr))
    }
}

impl<'b> ForwardRow<'b> {
    pub(super) fn declare(k: &'b KernelBuilder, dtype: ScalarType) -> ForwardRow<'b> {
        Self::declare_shared(k, dtype, 1)
    }

    /// [`Self::declare`] for rows shared by `cluster` consecutive programs: the row is
    /// `program_id(0) / cluster`.
    pub(super) fn declare_shared(k: &'b KernelBuilder, dtype: ScalarType, cluster: u32) -> ForwardRow<'b> {
        let args = ForwardArgs::declare(k, dtype);
        let row = match cluster {
            1 => k.program_id(0),
            c => k.program_id(0) / c as i32,
        };
        args.at(row)
    }

    /// `rstd = 1 / sqrt(var + eps)` of the row, stored with its `mean`; returns `rstd`.
    pub(super) fn store_stats(&self, k: &'b KernelBuilder, mean: Value<'b>, var: Value<'b>) -> Value<'b> {
        let rstd = self.rstd(var);
        k.store(self.mean_ptr + self.row, mean);
        k.store(self.rstd_ptr + self.row, rstd);
        rstd
    }

    /// `1 / sqrt(var + eps)`.
    pub(super) fn rstd(&self, var: Value<'b>) -> Value<'b> {
        rstd(var, self.eps)
    }

    /// Stores `y = (x - mean) * rstd * w + b` at columns `cols` of the row where `mask`
    /// holds, `x` (f32) being the row's elements there, given by `x` after `w` and `b` are
    /// loaded (the walking kernels load the row's block last).
    pub(super) fn store_output(
        &self,
        k: &'b KernelBuilder,
        cols: Value<'b>,
        mask: Value<'b>,
        x: impl FnOnce() -> Value<'b>,
        (mean, rstd): (Value<'b>, Value<'b>),
    ) {
        self.store_normalized(k, cols, mask, |w, b| (x() - mean) * rstd * w + b);
    }

    /// [`Self::store_output`] of the row's `centered` elements (`x - mean` where `mask`
    /// holds), computed once for the variance and used again here, where `ptxas` would
    /// otherwise compute `x - mean` twice (32 subtractions a thread and row at 8192
    /// columns on 8 warps): `y = centered * rstd * w + b`, the same values bit for bit.
    pub(super) fn store_centered(
        &self,
        k: &'b KernelBuilder,
        cols: Value<'b>,
        mask: Value<'b>,
        centered: Value<'b>,
        rstd: Value<'b>,
    ) {
        self.store_normalized(k, cols, mask, |w, b| centered * rstd * w + b);
    }

    /// Loads the weight and bias at `cols` (unless the row holds them, [`Self::params`]),
    /// then stores `y(w, b)` (in that order, so that a kernel's `x` is loaded after them
    /// where `y` loads it). Held or loaded, `y` is the same bit for bit: the held ones are
    /// the loaded ones converted to f32, as the arithmetic converts the loaded ones.
    fn store_normalized(
        &self,
        k: &'b KernelBuilder,
        cols: Value<'b>,
        mask: Value<'b>,
        y: impl FnOnce(Value<'b>, Value<'b>) -> Value<'b>,
    ) {
        let (w, b) = self.params.unwrap_or_else(|| {
            (
                k.load_masked(self.w_ptr + cols, mask, 0.0),
                k.load_masked(self.b_ptr + cols, mask, 0.0),
            )
        });
        let y = y(w, b);
        k.store_masked(self.y_ptr + cols, y.to(self.dtype), mask);
    }
}

/// `1 / sqrt(var + eps)`: a row's reciprocal standard deviation.
fn rstd<'b>(var: Value<'b>, eps: Value<'b>) -> Value<'b> {
    1.0f32 / (var + eps).sqrt()
}

/// `_layer_norm_fwd_fused`: `y = (x - mean) * rstd * w + b` for each row of an `M x N`
/// matrix, one row per program, storing each row's mean and `rstd = 1 / sqrt(var + eps)`.
/// The row is walked in blocks of `block_size` three times (mean, variance, output), so any
/// `N` works. Parameters: `X, Y, W, B` (`dtype`), `Mean, Rstd` (f32), `stride, N` (i32),
/// `eps` (f32). Grid: `M`.
pub fn layer_norm_forward(meta: &LayerNormMeta) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    Kernel::build("_layer_norm_fwd_fused", |k| {
        let row = ForwardRow::declare(k, dtype);
        let (x_ptr, n) = (row.x_ptr, row.n);
        let zeros = k.zeros(&[block_size], ScalarType::F32);
        // Mean.
        let sums = k.for_range(0, n, block, &[zeros], |off, acc| {
            let cols = off + k.arange(0, block);
            let a = k.load_masked(x_ptr + cols, cols.lt(n), 0.0).to(ScalarType::F32);
            vec![acc[0] + a]
        });
        let mean = sums[0].sum(0) / n;
        // Variance.
        let squares = k.for_range(0, n, block, &[zeros], |off, acc| {
            let cols = off + k.arange(0, block);
            let x = k.load_masked(x_ptr + cols, cols.lt(n), 0.0).to(ScalarType::F32);
            let x = k.where_(cols.lt(n), x - mean, 0.0);
            vec![acc[0] + x * x]
        });
        let rstd = row.store_stats(k, mean, squares[0].sum(0) / n);
        // Normalize and apply the linear transformation.
        k.for_each(0, n, block, |off| {
            let cols = off + k.arange(0, block);
            let mask = cols.lt(n);
            let x = || k.load_masked(x_ptr + cols, mask, 0.0).to(ScalarType::F32);
            row.store_output(k, cols, mask, x, (mean, rstd));
        });
    })
}

/// The forward pass for rows that fit one block (`N <= meta.block_size`): the row is loaded
/// once and held in registers while its mean and variance are two block reductions, where
/// [`layer_norm_forward`] walks it three times (its second and third walks read the row
/// again, from the cache at best). Same parameters, grid and outputs, and the same results
/// bit for bit (each of the tutorial's walks runs once on such a row and adds its block to
/// zeros). `N` over the block is refused by a `device_assert` where the kernel runs in the
/// interpreter; the host code ([`LayerNormMeta::for_row`]) never launches it so.
pub fn layer_norm_forward_row(meta: &LayerNormMeta) -> Result<Kernel, BuildError> {
    held_row_kernel("_layer_norm_fwd_row", meta, RowStats::TwoReductions)
}

/// [`layer_norm_forward_row`] with the row's statistics in one exchange between its warps
/// instead of two: the sums of `d = x - K` and of `d^2`, `K` the row's first element, are
/// one block reduction of `join(d, d * d)` (each thread holds both), and then
/// `mean = K + S1 / N`, `var = max(S2 / N - (S1 / N)^2, 0)`. The one-pass kernel reduces
/// the row for its mean and then, the mean known, for the squares about it: two reductions
/// one after the other, each a round trip through shared memory between two barriers. The
/// shift keeps the cancellation in `S2 / N - (S1 / N)^2` to the row's spread about `K`, not
/// about zero; the results are the reference's within rounding, not the tutorial's bit for
/// bit. Same parameters, grid and outputs as [`layer_norm_forward_row`].
pub fn layer_norm_forward_row_one_exchange(meta: &LayerNormMeta) -> Result<Kernel, BuildError> {
    held_row_kernel("_layer_norm_fwd_row_x1", meta, RowStats::OneExchange)
}

/// How a kernel that holds its row computes the row's mean and variance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowStats {
    /// The mean, then the squares about it: two block reductions, bit for bit the
    /// tutorial's results ([`layer_norm_forward_row`]).
    TwoReductions,
    /// Shifted sums and squares in one block reduction
    /// ([`layer_norm_forward_row_one_exchange`]).
    OneExchange,
}

/// Where a kernel whose programs walk rows ([`layer_norm_forward_rows`]) takes the weight
/// and bias from for each row's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowParams {
    /// Loaded (from the cache) and converted to f32 again for each row, as the held-row
    /// kernel of a program a row does: no registers held across rows.
    Reloaded,
    /// Loaded and converted once, before the walk, and held in registers across its rows
    /// (one f32 each of a thread's elements, twice): each row's output saves the loads and
    /// the conversions (64 of 546 instructions a warp at 8192 columns on 8 warps).
    Held,
}

/// A held row's mean and variance, and its elements less the mean (zero where masked)
/// where the statistics computed them.
struct RowMoments<'b> {
    mean: Value<'b>,
    var: Value<'b>,
    centered: Option<Value<'b>>,
}

impl<'b> RowMoments<'b> {
    /// Stores the row's statistics and its output ([`ForwardRow::store_stats`],
    /// [`ForwardRow::store_output`]), from the centered elements where they were computed.
    fn store(self, k: &'b KernelBuilder, row: &ForwardRow<'b>, cols: Value<'b>, mask: Value<'b>, x: Value<'b>) {
        let rstd = row.store_stats(k, self.mean, self.var);
        match self.centered {
            Some(centered) => row.store_centered(k, cols, mask, centered, rstd),
            None => row.store_output(k, cols, mask, || x, (self.mean, rstd)),
        }
    }
}

impl RowStats {
    /// The mean and variance of a row of `n` elements held as `x` (f32, zero where `mask`
    /// is off), the row starting at `x_ptr`, and its centered elements where these
    /// statistics form them.
    fn of<'b>(
        self,
        k: &'b KernelBuilder,
        n: Value<'b>,
        x_ptr: Value<'b>,
        x: Value<'b>,
        mask: Value<'b>,
    ) -> RowMoments<'b> {
        match self {
            RowStats::TwoReductions => {
                let mean = x.sum(0) / n;
                let centered = k.where_(mask, x - mean, 0.0);
                RowMoments {
                    mean,
                    var: (centered * centered).sum(0) / n,
                    centered: Some(centered),
                }
            }
            RowStats::OneExchange => {
                // The row's first element again, as one scalar (in the line of its first loads).
                let shift = k.load_masked(x_ptr, n.gt(0), 0.0).to(ScalarType::F32);
                let d = k.where_(mask, x - shift, 0.0);
                let (s1, s2) = k.split(k.join(d, d * d).sum(0));
                let m1 = s1 / n;
                RowMoments {
                    mean: shift + m1,
                    var: (s2 / n - m1 * m1).maximum(0.0f32),
                    centered: None,
                }
            }
        }
    }
}

/// A forward kernel that loads the row (one block) once and holds it, its mean and
/// variance from `stats`, and stores them with `rstd` and the output, as
/// [`layer_norm_forward_row`] does.
fn held_row_kernel(name: &str, meta: &LayerNormMeta, stats: RowStats) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    Kernel::build(name, |k| {
        let row = ForwardRow::declare(k, dtype);
        k.device_assert(row.n.le(block), "the row is longer than BLOCK_SIZE");
        let cols = k.arange(0, block);
        let mask = cols.lt(row.n);
        let x = k.load_masked(row.x_ptr + cols, mask, 0.0).to(ScalarType::F32);
        stats.of(k, row.n, row.x_ptr, x, mask).store(k, &row, cols, mask, x);
    })
}

/// The held-row forward pass with rows in flight while a row is reduced: each program
/// walks rows `program_id, program_id + num_programs, ...` below `M` in a loop whose loads
/// are pipelined `num_stages` deep ([`crate::KernelBuilder::for_range_staged`]), so that
/// where the target has asynchronous copies the next rows are in flight through the
/// current row's block reductions, barriers and stores, where a program of
/// [`layer_norm_forward_row`] has nothing in flight from its loads' arrival to its end.
/// Elsewhere (Vulkan) the loop loads each row when it gets to it. Launched on a grid of
/// as many programs as the device holds at once (more only add a second wave).
/// Parameters: those of [`layer_norm_forward_row`], then `M` (i32, the rows). Results bit
/// for bit those of the held-row kernel with the same statistics (`stats`).
pub fn layer_norm_forward_rows(
    meta: &LayerNormMeta,
    stats: RowStats,
    params: RowParams,
    num_stages: u32,
) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    let name = match (stats, params) {
        (RowStats::TwoReductions, RowParams::Reloaded) => "_layer_norm_fwd_rows",
        (RowStats::OneExchange, RowParams::Reloaded) => "_layer_norm_fwd_rows_x1",
        (RowStats::TwoReductions, RowParams::Held) => "_layer_norm_fwd_rows_held",
        (RowStats::OneExchange, RowParams::Held) => "_layer_norm_fwd_rows_x1_held",
    };
    Kernel::build(name, |k| {
        let args = ForwardArgs::declare(k, dtype);
        let m = k.arg_i32("M");
        k.device_assert(args.n.le(block), "the row is longer than BLOCK_SIZE");
        let cols = k.arange(0, block);
        let mask = cols.lt(args.n);
        let held = match params {
            RowParams::Held => Some(args.params(k, cols, mask)),
            RowParams::Reloaded => None,
        };
        k.for_range_staged(k.program_id(0), m, k.num_programs(0), num_stages, &[], |r, _| {
            let row = ForwardRow {
                params: held,
                ..args.at(r)
            };
            let x = k.load_masked(row.x_ptr + cols, mask, 0.0).to(ScalarType::F32);
            stats.of(k, row.n, row.x_ptr, x, mask).store(k, &row, cols, mask, x);
            vec![]
        });
    })
}

/// The held-row forward pass on `block_m` rows a program, as one `[block_m, block_size]`
/// block reduced along its columns (as [`super::softmax_rows`] holds rows). The lowering
/// gives a block's rows to its warps first (`Blocked::with_order`: warps fill the slowest
/// dimension first), so with `num_warps` at most `block_m` each row lies in one warp, and
/// its mean and variance are shuffles within the warp: no exchange through shared memory
/// and no barrier, where the one-pass kernel meets its warps at four barriers a row (a
/// barrier waits for the memory accesses before it, so a program's next loads cannot start
/// before its warps meet). With fewer warps than rows a warp holds several rows, their
/// loads issued together. Rows past `M` are masked. Parameters: those of
/// [`layer_norm_forward_row`], then `M` (i32, the rows). Grid: `cdiv(M, block_m)`. The
/// results are the reference's within rounding (a row's sums are taken in another order
/// than the one-pass kernel's).
pub fn layer_norm_forward_row_block(meta: &LayerNormMeta, block_m: u32) -> Result<Kernel, BuildError> {
    let LayerNormMeta { block_size, dtype } = *meta;
    let block = block_size as i32;
    Kernel::build("_layer_norm_fwd_row_block", |k| {
        let args = ForwardArgs::declare(k, dtype);
        let m = k.arg_i32("M");
        k.device_assert(args.n.le(block), "the row is longer than BLOCK_SIZE");
        let rows = k.program_id(0) * block_m as i32 + k.arange(0, block_m as i32);
        let row_mask = rows.lt(m);
        let cols = k.arange(0, block);
        let col_mask = cols.lt(args.n);
        let (rows2, cols2) = (rows.expand_dims(1), cols.expand_dims(0));
        let mask = rows2.lt(m) & col_mask.expand_dims(0);
        let offsets = rows2 * args.stride + cols2;
        let x = k.load_masked(args.x_ptr + offsets, mask, 0.0).to(ScalarType::F32);
        let mean = x.sum(1) / args.n;
        let centered = k.where_(mask, x - mean.expand_dims(1), 0.0);
        let var = (centered * centered).sum(1) / args.n;
        let rstd = rstd(var, args.eps);
        k.store_masked(args.mean_ptr + rows, mean, row_mask);
        k.store_masked(args.rstd_ptr + rows, rstd, row_mask);
        // The weight and bias through pointers of the block's shape (each row's warp loads
        // them, from the cache after the first): loaded as one row, they would take a
        // layout of their own and move into the rows' through shared memory.
        let shape = [block_m, block_size];
        let (w, b) = args.params(
            k,
            cols2.broadcast_to(&shape),
            col_mask.expand_dims(0).broadcast_to(&shape),
        );
        let y = centered * rstd.expand_dims(1) * w + b;
        k.store_masked(args.y_ptr + offsets, y.to(dtype), mask);
    })
}

/// The meta-parameters of [`layer_norm_backward_dx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerNormBackwardMeta {
    /// Partial sums of the weight and bias gradients: row `r` adds to partial sum
    /// `r % group_size_m` ([`layer_norm_group_size_m`]).
    pub group_size_m: u32,
    /// At least `N` (a power of two): the row is one block.
    pub block_size_n: u32,
    /// The element type of `x`, `w`, the gradients and the partial sums.
    pub dtype: ScalarType,
}

/// `_layer_norm_bwd_dx_fused`: for each row (one per program), the input gradient
/// `dx = (w dy - (x_hat c1 + c2)) rstd` with `c1 = mean(x_hat w dy)`, `c2 = mean(w dy)`,
/// and the row's `dy x_hat` and `dy` added to partial sums `DW`, `DB` (`group_size_m x N`)
/// under the group's lock: `Lock` holds `group_size_m` locks then `group_size_m` counts
/// (i32, zero before the launch); the first row of a group to take its lock stores its
/// values instead of adding them. Parameters: `DX, DY, DW, DB, X, W` (`dtype`), `Mean, Rstd`
/// (f32), `Lock` (i32), `stride, N` (i32). Grid: `M`.
pub fn layer_norm_backward_dx(meta: &LayerNormBackwardMeta) -> Result<Kernel, BuildError> {
    let LayerNormBackwardMeta {
        group_size_m,
        block_size_n,
        dtype,
    } = *meta;
    let group = group_size_m as i32;
    Kernel::build("_layer_norm_bwd_dx_fused", |k| {
        let dx_ptr = k.arg_ptr("DX", dtype);
        let dy_ptr = k.arg_ptr("DY", dtype);
        let dw_ptr = k.arg_ptr("DW", dtype);
        let db_ptr = k.arg_ptr("DB", dtype);
        let x_ptr = k.arg_ptr("X", dtype);
        let w_ptr = k.arg_ptr("W", dtype);
        let mean_ptr = k.arg_ptr("Mean", ScalarType::F32);
        let rstd_ptr = k.arg_ptr("Rstd", ScalarType::F32);
        let lock_ptr = k.arg_ptr("Lock", ScalarType::I32);
        let stride = k.arg_i32("stride");
        let n = k.arg_i32("N");

        let row = k.program_id(0);
        let cols = k.arange(0, block_size_n as i32);
        let mask = cols.lt(n);
        let x_ptr = x_ptr + row * stride;
        let dy_ptr = dy_ptr + row * stride;
        let dx_ptr = dx_ptr + row * stride;
        let lock_id = row % group;
        let lock = lock_ptr + lock_id;
        let count = lock + group;
        let dw_ptr = dw_ptr + lock_id * n + cols;
        let db_ptr = db_ptr + lock_id * n + cols;

        let x = k.load_masked(x_ptr + cols, mask, 0.0).to(ScalarType::F32);
        let dy = k.load_masked(dy_ptr + cols, mask, 0.0).to(ScalarType::F32);
        let w = k.load_masked(w_ptr + cols, mask, 0.0).to(ScalarType::F32);
        let mean = k.load(mean_ptr + row);
        let rstd = k.load(rstd_ptr + row);
        let x_hat = (x - mean) * rstd;
        let wdy = w * dy;
        let x_hat = k.where_(mask, x_hat, 0.0);
        let wdy = k.where_(mask, wdy, 0.0);
        let c1 = (x_hat * wdy).sum(0) / n;
        let c2 = wdy.sum(0) / n;
        let dx = (wdy - (x_hat * c1 + c2)) * rstd;
        k.store_masked(dx_ptr + cols, dx.to(dtype), mask);

        // This row's share of the weight and bias gradients, added to its group's partial
        // sums under the group's lock.
        let partial_dw = (dy * x_hat).to(dtype);
        let partial_db = dy.to(dtype);
        k.while_loop(&[], |_| k.atomic_cas(lock, 0, 1, None).eq(1), |_| vec![]);
        let first = k.load(count).eq(0);
        let sums = k.if_else(
            first,
            || {
                k.atomic_xchg(count, 1, None);
                vec![partial_dw, partial_db]
            },
            || {
                let dw = partial_dw + k.load_masked(dw_ptr, mask, 0.0);
                let db = partial_db + k.load_masked(db_ptr, mask, 0.0);
                vec![dw, db]
            },
        );
        k.store_masked(dw_ptr, sums[0], mask);
        k.store_masked(db_ptr, sums[1], mask);
        // The lowering puts a barrier before this access of `Lock` (it follows the count's
        // load): every thread's stores of the partial sums precede the release, as the
        // tutorial's `tl.debug_barrier()` makes them.
        k.atomic_xchg(lock, 0, None);
    })
}

/// `_layer_norm_bwd_dwdb`: sums the `M x N` partial sums `DW`, `DB` (`M` the number of
/// groups actually used, `min(group_size_m, rows)`) over their rows into `FINAL_DW`,
/// `FINAL_DB`, accumulating in f32, `block_size_n` columns per program in blocks of
/// `block_size_m` rows. Parameters: `DW, DB` (`dtype`), `FINAL_DW, FINAL_DB` (`dtype`), `M,
/// N` (i32). Grid: `cdiv(N, block_size_n)`. The tutorial uses 32 x 128 blocks.
pub fn layer_norm_backward_dwdb(block_size_m: u32, block_size_n: u32, dtype: ScalarType) -> Result<Kernel, BuildError> {
    let (bm, bn) = (block_size_m as i32, block_size_n as i32);
    Kernel::build("_layer_norm_bwd_dwdb", |k| {
        let dw_ptr = k.arg_ptr("DW", dtype);
        let db_ptr = k.arg_ptr("DB", dtype);
        let final_dw = k.arg_ptr("FINAL_DW", dtype);
        let final_db = k.arg_ptr("FINAL_DB", dtype);
        let m = k.arg_i32("M");
        let n = k.arg_i32("N");

        let pid = k.program_id(0);
        let cols = pid * bn + k.arange(0, bn);
        let zeros = k.zeros(&[block_size_m, block_size_n], ScalarType::F32);
        let sums = k.for_range(0, m, bm, &[zeros, zeros], |i, acc| {
            let rows = i + k.arange(0, bm);
            let mask = rows.expand_dims(1).lt(m) & cols.expand_dims(0).lt(n);
            let offs = rows.expand_dims(1) * n + cols.expand_dims(0);
            let dw = acc[0] + k.load_masked(dw_ptr + offs, mask, 0.0).to(ScalarType::F32);
            let db = acc[1] + k.load_masked(db_ptr + offs, mask, 0.0).to(ScalarType::F32);
            vec![dw, db]
        });
        let sum_dw = sums[0].sum(0);
        let sum_db = sums[1].sum(0);
        k.store_masked(final_dw + cols, sum_dw.to(dtype), cols.lt(n));
        k.store_masked(final_db + cols, sum_db.to(dtype), cols.lt(n));
    })
}
