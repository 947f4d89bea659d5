//! Triton's layer norm tutorial: the fused forward pass and the backward pass (input
//! gradient, and the weight and bias gradients reduced in two stages under locks) on fp16,
//! checked against an f64 reference.

use super::{timed, Outcome};
use crate::check::max_relative_error;
use crate::rng::{normal_f32s, Rng};
use half::f16;
use rutile::seeds::{self, LayerNormBackwardMeta, LayerNormMeta};
use rutile::{Arg, Buffer, Device, DeviceExt, LaunchConfig, Result, ScalarType};

/// The tutorial's `eps`.
pub const EPS: f32 = 1e-5;

/// The tutorial's blocks of the final sum of the weight and bias gradients.
const DWDB_BLOCK: (u32, u32) = (32, 128);

/// The forward pass's inputs and outputs on a device: an `m x n` fp16 matrix `x`, the fp16
/// weight and bias of `n`, and the outputs `y`, per-row `mean` and `rstd` (f32).
pub struct Forward {
    pub x: Buffer<f16>,
    pub y: Buffer<f16>,
    pub w: Buffer<f16>,
    pub b: Buffer<f16>,
    pub mean: Buffer<f32>,
    pub rstd: Buffer<f32>,
    pub m: usize,
    pub n: usize,
}

impl Forward {
    /// Uploads `x`, `w`, `b` and allocates the outputs.
    pub fn new(dev: &dyn Device, x: &[f16], w: &[f16], b: &[f16], m: usize, n: usize) -> Result<Forward> {
        Ok(Forward {
            x: dev.upload(x)?,
            y: dev.zeros(m * n)?,
            w: dev.upload(w)?,
            b: dev.upload(b)?,
            mean: dev.zeros(m)?,
            rstd: dev.zeros(m)?,
            m,
            n,
        })
    }

    /// The arguments of `kernel`, one of the forward kernels: `_layer_norm_fwd_fused`'s,
    /// and the number of rows after them where the kernel declares it (`M`: the kernels
    /// whose programs walk several rows, [`row_walk_launch`], or hold several,
    /// [`row_block_launch`]).
    pub fn args_for(&self, kernel: &rutile::Kernel) -> Vec<Arg<'_>> {
        let mut args = self.args();
        if kernel.params.iter().any(|p| p.name == "M") {
            args.push((self.m as i32).into());
        }
        args
    }

    /// `_layer_norm_fwd_fused`'s arguments.
    pub fn args(&self) -> Vec<Arg<'_>> {
        let n = self.n as i32;
        vec![
            (&self.x).into(),
            (&self.y).into(),
            (&self.w).into(),
            (&self.b).into(),
            (&self.mean).into(),
            (&self.rstd).into(),
            n.into(),
            n.into(),
            EPS.into(),
        ]
    }
}

/// The widest block the one-block forward kernel takes here: at 32768 columns (32 warps,
/// 32 elements a thread) it spills about 1 KB a thread on sm_90, where the long-row kernel
/// holds 16 elements a thread in registers.
const ONE_BLOCK_MAX: u32 = 16384;

/// The forward kernel and launch the tutorial's host code picks for rows of `n` fp16
/// elements: for rows that fit one block, the one-pass kernel ([`one_pass_launch`]: the
/// row loaded once and held in registers, where the tutorial's kernel walks it three times
/// for the same results; on an H100 it measured 65–88% of the copy ceiling through CUDA
/// from 2048 to 8192 columns, the tutorial's 56–69%); longer rows (and those over 64 KiB,
/// where the tutorial raises) go to the long-row kernel, [`super::long_rows`]. Through
/// Vulkan too: since the buffers a kernel only reads are declared read-only to the driver,
/// the one-pass kernel measured 72% and 65% of the ceiling at 8192 and 16384 columns on an
/// H200, the long-row kernel at best 45% and 54% (`docs/performance.md`). Through CUDA up
/// to 8192 columns, the one-pass kernel that exchanges its statistics once
/// ([`one_exchange_launch`]): 1.1 to 2.8 points of the ceiling above the one-pass kernel
/// from 2048 to 8192 columns on an H200, 10 below it at 16384, and below it through Vulkan
/// at every width. Through CUDA on devices with asynchronous copies (sm_80 on), from 2048
/// to 16384 columns, the one-pass kernel's statistics in programs that walk rows with the
/// next rows copied into shared memory meanwhile ([`row_walk_launch`]): on an H200 8 to 21
/// points of the ceiling above the best of the others at those widths (62.8% to 89.0%),
/// up to 4096 columns with the weight and bias held across its rows (`row_walk_shape`).
/// Up to 512 columns, on either backend, several rows a program, each in one warp
/// ([`row_block_launch`], `ROW_BLOCK_MAX`).
pub fn forward_launch(dev: &dyn Device, fwd: &Forward) -> Result<(rutile::Kernel, LaunchConfig)> {
    let (m, n) = (fwd.m, fwd.n);
    let cuda = dev.properties().backend == rutile::Backend::Cuda;
    if n <= ROW_BLOCK_MAX {
        let block = n.next_power_of_two() as u32;
        let block_m = (ROW_BLOCK_ELEMENTS / block).clamp(1, 16);
        // A warp a row, but no fewer than 16 elements a thread: shorter rows share a warp.
        let warps = (block_m * block / (32 * 16)).clamp(1, block_m);
        if let Some(launch) = row_block_launch(m, n, block_m, warps)? {
            return Ok(launch);
        }
    }
    if let Some((warps, stages, params)) = row_walk_shape(n).filter(|_| dev.properties().async_copies()) {
        if let Some(launch) = row_walk_launch(dev, fwd, seeds::RowStats::TwoReductions, params, warps, stages)? {
            return Ok(launch);
        }
    }
    let launch = if cuda && n <= ONE_EXCHANGE_MAX {
        one_exchange_launch(dev, m, n)?
    } else {
        one_pass_launch(dev, m, n)?
    };
    match launch {
        Some(launch) => Ok(launch),
        None => super::long_rows::layer_norm_long_launch(dev, m, ScalarType::F16),
    }
}

/// The warps, stages and weight and bias of the row walk the CUDA host code launches for
/// rows of `n` columns, `None` where it launches another kernel: the fastest of 4, 8 and 16
/// warps, 2 and 3 stages, and the weight and bias reloaded or held across rows at each
/// width on an H200 (`docs/performance.md`, "The weight and bias held across rows" and
/// "The row walk's shapes timed again"). Held up to 4096 columns, 1.0 to 2.1 points of the
/// ceiling ahead of reloading them, and at 4096 on 3 stages 0.9 to 1.7 points ahead of 2;
/// at 8192 columns reloaded on 4 warps (106 registers, four programs a multiprocessor), 1.3
/// to 2.0 points ahead of holding them on 8 warps (on 4 they take 244 registers); at 16384
/// columns reloaded, one program of 4 warps a multiprocessor (175 registers; its 3 stages
/// of 32 KB rows leave room for one), 2.6 to 3.7 points ahead of 16 warps.
fn row_walk_shape(n: usize) -> Option<(u32, u32, seeds::RowParams)> {
    use seeds::RowParams::{Held, Reloaded};
    match n.next_power_of_two() {
        2048 => Some((4, 3, Held)),
        4096 => Some((4, 3, Held)),
        8192 => Some((4, 2, Reloaded)),
        16384 => Some((4, 3, Reloaded)),
        _ => None,
    }
}

/// The widest row the host code gives the kernel of several rows a program
/// ([`row_block_launch`], a warp a row): at 512 columns on an H200 it measured 29.0% of the
/// copy ceiling through CUDA and 21.9% through Vulkan (8 rows on 8 warps), where the
/// one-block kernels reached 25.3% and 20.0% (a copy of the same 8 MiB: 34.4% and 25.9%);
/// at 1024 columns it is no faster (`docs/performance.md`, "Several rows a program").
const ROW_BLOCK_MAX: usize = 512;

/// The elements of a program of the row-block kernel the host code launches: 8 rows of
/// 512 columns on 8 warps, 16 of 256 on 8 (at most 16 rows, at least 16 elements a
/// thread).
const ROW_BLOCK_ELEMENTS: u32 = 4096;

/// The widest row the CUDA host code gives the one-exchange kernel (see [`forward_launch`]).
const ONE_EXCHANGE_MAX: usize = 8192;

/// The one-pass forward kernel ([`seeds::layer_norm_forward_row`]) and its launch for rows
/// of `n` fp16 elements that fit one block (up to `ONE_BLOCK_MAX` columns), `None` for
/// longer rows. `num_warps`: through CUDA 32 elements a thread up to 8 warps, and 64 on
/// 8 warps from 16384 columns, with at most 128 registers a thread (`maxnreg`) so that two
/// programs share a multiprocessor; through Vulkan 16 elements a thread, from 4 to 16
/// warps (on an H200 through NVIDIA's driver the fastest of 1..32 warps at every width from
/// 512 to 16384 columns). Measured over 1..32 warps at M = 4096
/// (`docs/performance.md`): these pick the fastest or come within 3 points of it.
/// At 16384 columns through CUDA the row is 32 KB and `ptxas` gives 8 warps 202 registers
/// a thread (4 warps 255 and spills): one program a multiprocessor, so one row in flight,
/// which measured 61–68% of the copy ceiling; capped at 128 registers (136 bytes of spill
/// traffic) two rows are in flight, 86%. At 32 elements a thread (2048 to 8192 columns) the kernel
/// holds 80 registers, none spilled (sm_90), and several programs share a multiprocessor.
pub fn one_pass_launch(dev: &dyn Device, m: usize, n: usize) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    one_block_launch(dev, m, n, seeds::layer_norm_forward_row)
}

/// [`one_pass_launch`] with the one-pass kernel that exchanges its row's statistics once
/// ([`seeds::layer_norm_forward_row_one_exchange`]: shifted sums, one block reduction where
/// the one-pass kernel has two). The host code launches it through CUDA up to 8192
/// columns ([`forward_launch`]); the benchmark's layer norm sweep times both kernels.
pub fn one_exchange_launch(dev: &dyn Device, m: usize, n: usize) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    one_block_launch(dev, m, n, seeds::layer_norm_forward_row_one_exchange)
}

/// A one-block forward kernel from `build`, launched as [`one_pass_launch`] says.
fn one_block_launch(
    dev: &dyn Device,
    m: usize,
    n: usize,
    build: impl Fn(&LayerNormMeta) -> std::result::Result<rutile::Kernel, rutile::ir::BuildError>,
) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    let Some(meta) = LayerNormMeta::for_row(n as u32, ScalarType::F16).filter(|m| m.block_size <= ONE_BLOCK_MAX) else {
        return Ok(None);
    };
    let (warps, maxnreg) = match dev.properties().backend {
        rutile::Backend::Cuda if meta.block_size >= 16384 => (8, Some(ONE_PASS_WIDE_MAXNREG)),
        rutile::Backend::Cuda => ((meta.block_size / 1024).clamp(1, 8), None),
        _ => ((meta.block_size / 512).clamp(4, 16), None),
    };
    Ok(Some((
        build(&meta)?,
        LaunchConfig::grid1(m as u32).num_warps(warps).maxnreg(maxnreg),
    )))
}

/// Whether `kernel` is one whose programs walk rows strided by the grid (it reads the
/// number of programs), so that any grid covers every row.
pub fn walks_rows(kernel: &rutile::Kernel) -> bool {
    kernel
        .insts
        .iter()
        .any(|(_, inst)| matches!(inst.op, rutile::ir::Op::NumPrograms { .. }))
}

/// The forward kernel of `block_m` rows a program ([`seeds::layer_norm_forward_row_block`])
/// and its launch on `num_warps` (each row in one warp where `num_warps <= block_m`) for
/// `m` rows of `n` fp16 elements, `None` for rows longer than one block.
pub fn row_block_launch(
    m: usize,
    n: usize,
    block_m: u32,
    num_warps: u32,
) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    let Some(meta) = LayerNormMeta::for_row(n as u32, ScalarType::F16).filter(|m| m.block_size <= ONE_BLOCK_MAX) else {
        return Ok(None);
    };
    Ok(Some((
        seeds::layer_norm_forward_row_block(&meta, block_m)?,
        LaunchConfig::grid1((m as u32).div_ceil(block_m)).num_warps(num_warps),
    )))
}

/// The held-row forward kernel whose programs walk rows in a loop pipelined `num_stages`
/// deep ([`seeds::layer_norm_forward_rows`]: through CUDA the next rows are copied into
/// shared memory while the current one is reduced; statistics as `stats` says, the weight
/// and bias as `params`) for the rows of `fwd` where they fit one block (up to
/// `ONE_BLOCK_MAX` columns; `None` past it), on `num_warps`, on a grid of as many programs
/// as the device holds at once ([`persistent_config`]).
pub fn row_walk_launch(
    dev: &dyn Device,
    fwd: &Forward,
    stats: seeds::RowStats,
    params: seeds::RowParams,
    num_warps: u32,
    num_stages: u32,
) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    let Some(meta) = LayerNormMeta::for_row(fwd.n as u32, ScalarType::F16).filter(|m| m.block_size <= ONE_BLOCK_MAX)
    else {
        return Ok(None);
    };
    let kernel = seeds::layer_norm_forward_rows(&meta, stats, params, num_stages)?;
    let config = LaunchConfig::grid1(fwd.m as u32).num_warps(num_warps);
    let config = persistent_config(dev, &kernel, config, fwd)?;
    Ok(Some((kernel, config)))
}

/// `config` for `kernel`, one of the forward kernels on the rows of `fwd`: unchanged for a
/// kernel of a program a row; for one whose programs walk rows, the grid of as many
/// programs as the device holds at once with `config`'s warps and registers
/// (`rutile::occupancy::persistent_grid`: never more programs than rows, and the rows
/// shared evenly where a multiprocessor holds at most two programs).
pub fn persistent_config(
    dev: &dyn Device,
    kernel: &rutile::Kernel,
    config: LaunchConfig,
    fwd: &Forward,
) -> Result<LaunchConfig> {
    if !walks_rows(kernel) {
        return Ok(config);
    }
    dev.resident_grid(kernel, config, &fwd.args_for(kernel), fwd.m as u32)
}

/// The register limit of the one-pass kernel's 8 warps at 16384 columns through CUDA: two
/// programs of 256 threads in a multiprocessor's 64K registers.
pub const ONE_PASS_WIDE_MAXNREG: u32 = 128;

/// The tutorial's own forward kernel (three walks over the row) for rows that fit one
/// block, as [`forward_launch`] would launch it; `None` for longer rows.
pub fn tutorial_forward_launch(m: usize, n: usize) -> Result<Option<(rutile::Kernel, LaunchConfig)>> {
    match LayerNormMeta::for_row(n as u32, ScalarType::F16) {
        Some(meta) if meta.block_size <= ONE_BLOCK_MAX => Ok(Some((
            seeds::layer_norm_forward(&meta)?,
            LaunchConfig::grid1(m as u32).num_warps(meta.num_warps()),
        ))),
        _ => Ok(None),
    }
}

/// Layer norm of an `m x n` fp16 matrix: the forward pass (timed) and, for rows that fit
/// one block, the backward pass, each output checked against an f64 reference; the
/// error is the largest over `y`, `mean`, `rstd`, `dx`, `dw` and `db`.
pub fn layer_norm(dev: &dyn Device, m: usize, n: usize, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    // As the tutorial: x, w and b (`forward_inputs`), then dy = 0.1 randn.
    let (x, w, b) = forward_inputs(&mut rng, m, n);
    let dy = half(normal_f32s(&mut rng, m * n).iter().map(|v| 0.1 * v).collect());

    let fwd = Forward::new(dev, &x, &w, &b, m, n)?;
    let (kernel, config) = forward_launch(dev, &fwd)?;
    let time_ms = timed(dev, &kernel, &config, &fwd.args_for(&kernel))?;
    let (x64, w64, b64, dy64) = (to_f64(&x), to_f64(&w), to_f64(&b), to_f64(&dy));
    let want = forward_reference(&x64, &w64, &b64, m, n);
    let mut error = forward_error(dev, &fwd, &want)?;

    let mut detail = format!("{} warps, {}", config.num_warps, kernel.name);
    if LayerNormMeta::for_row(n as u32, ScalarType::F16).is_some() {
        let dyb = dev.upload(&dy)?;
        let (grads, backward_ms) = backward(dev, &fwd, &dyb)?;
        let got_dx = to_f64(&dev.download(&grads.dx)?);
        let got_dw = to_f64(&dev.download(&grads.dw)?);
        let got_db = to_f64(&dev.download(&grads.db)?);
        let (dx, dw, db) = backward_reference(&x64, &w64, &dy64, &want.mean, &want.rstd, m, n);
        error = error.max(max_relative_error(got_dx, &dx, 1.0).0);
        // The weight and bias gradients sum `m` rows, each partial sum rounded to fp16 at
        // every row of its group: relative to the size of such a sum (about sqrt(m) / 5).
        let scale = (m as f64).sqrt() / 5.0;
        error = error.max(max_relative_error(got_dw, &dw, scale).0);
        error = error.max(max_relative_error(got_db, &db, scale).0);
        detail = format!("{detail}; backward {backward_ms:.3} ms");
    } else {
        detail = format!("{detail}; no backward pass for rows over 64 KiB");
    }
    Ok(Outcome {
        tutorial: "layer norm".into(),
        size: format!("{m}x{n}"),
        device: dev.id(),
        error,
        tolerance: 1e-2,
        time_ms,
        detail: Some(detail),
    })
}

/// The forward pass's inputs as the tutorial draws them: `x = -2.3 + 0.5 randn` (`m x n`),
/// `w` and `b` uniform in [0, 1).
fn forward_inputs(rng: &mut Rng, m: usize, n: usize) -> (Vec<f16>, Vec<f16>, Vec<f16>) {
    let x = half(normal_f32s(rng, m * n).iter().map(|v| -2.3 + 0.5 * v).collect());
    (x, half(rng.f32s(n, 0.0, 1.0)), half(rng.f32s(n, 0.0, 1.0)))
}

/// f32 values rounded to fp16.
fn half(v: Vec<f32>) -> Vec<f16> {
    v.into_iter().map(f16::from_f32).collect()
}

/// The largest error of the forward pass's outputs on the device (`y`, `mean`, `rstd`)
/// against `want`, relative to 1 (fp16 outputs of magnitude about 1; the tutorial
/// compares with atol 1e-2).
fn forward_error(dev: &dyn Device, fwd: &Forward, want: &Reference) -> Result<f64> {
    let y = to_f64(&dev.download(&fwd.y)?);
    let mean: Vec<f64> = dev.download(&fwd.mean)?.iter().map(|&v| v as f64).collect();
    let rstd: Vec<f64> = dev.download(&fwd.rstd)?.iter().map(|&v| v as f64).collect();
    Ok(max_relative_error(y, &want.y, 1.0)
        .0
        .max(max_relative_error(mean, &want.mean, 1.0).0)
        .max(max_relative_error(rstd, &want.rstd, 1.0).0))
}

/// The forward pass alone of an `m x n` fp16 matrix (inputs as [`layer_norm`] draws them),
/// by the kernel and launch `launch` gives for it, checked against the f64 reference:
/// for the forward kernels the host code does not pick on this device.
pub fn forward_only(
    dev: &dyn Device,
    m: usize,
    n: usize,
    seed: u64,
    launch: impl FnOnce(&Forward) -> Result<(rutile::Kernel, LaunchConfig)>,
) -> Result<Outcome> {
    let (x, w, b) = forward_inputs(&mut Rng::new(seed), m, n);
    let fwd = Forward::new(dev, &x, &w, &b, m, n)?;
    let (kernel, config) = launch(&fwd)?;
    let time_ms = timed(dev, &kernel, &config, &fwd.args_for(&kernel))?;
    let want = forward_reference(&to_f64(&x), &to_f64(&w), &to_f64(&b), m, n);
    Ok(Outcome {
        tutorial: "layer norm forward".into(),
        size: format!("{m}x{n}"),
        device: dev.id(),
        error: forward_error(dev, &fwd, &want)?,
        tolerance: 1e-2,
        time_ms,
        detail: Some(format!("{} warps, {}", config.num_warps, kernel.name)),
    })
}

/// The gradients the backward pass computes.
pub struct Gradients {
    pub dx: Buffer<f16>,
    pub dw: Buffer<f16>,
    pub db: Buffer<f16>,
}

/// The tutorial's backward pass for `dy`: `_layer_norm_bwd_dx_fused` (one row per program,
/// partial sums of `dw` and `db` per group of rows under locks), then `_layer_norm_bwd_dwdb`
/// (the sum over the groups). Returns the gradients and the device time of both launches.
pub fn backward(dev: &dyn Device, fwd: &Forward, dy: &Buffer<f16>) -> Result<(Gradients, f64)> {
    let (m, n) = (fwd.m, fwd.n);
    let Some(meta) = LayerNormMeta::for_row(n as u32, ScalarType::F16) else {
        return Err(rutile::Error::Argument {
            kernel: "_layer_norm_bwd_dx_fused".into(),
            message: format!("rows of {n} fp16 elements do not fit one block (at most 32768)"),
        });
    };
    let group_size_m = seeds::layer_norm_group_size_m(n as u32);
    let bwd = LayerNormBackwardMeta {
        group_size_m,
        block_size_n: meta.block_size,
        dtype: ScalarType::F16,
    };
    let group = group_size_m as usize;
    let locks = dev.zeros::<i32>(2 * group)?;
    let (partial_dw, partial_db) = (dev.zeros::<f16>(group * n)?, dev.zeros::<f16>(group * n)?);
    let grads = Gradients {
        dx: dev.zeros(m * n)?,
        dw: dev.zeros(n)?,
        db: dev.zeros(n)?,
    };
    let ni = n as i32;
    let dx_args: Vec<Arg<'_>> = vec![
        (&grads.dx).into(),
        dy.into(),
        (&partial_dw).into(),
        (&partial_db).into(),
        (&fwd.x).into(),
        (&fwd.w).into(),
        (&fwd.mean).into(),
        (&fwd.rstd).into(),
        (&locks).into(),
        ni.into(),
        ni.into(),
    ];
    let dx_kernel = seeds::layer_norm_backward_dx(&bwd)?;
    let dx_config = LaunchConfig::grid1(m as u32).num_warps(meta.num_warps());
    let (bm, bn) = DWDB_BLOCK;
    let dwdb_kernel = seeds::layer_norm_backward_dwdb(bm, bn, ScalarType::F16)?;
    let dwdb_config = LaunchConfig::grid1((n as u32).div_ceil(bn));
    let dwdb_args: Vec<Arg<'_>> = vec![
        (&partial_dw).into(),
        (&partial_db).into(),
        (&grads.dw).into(),
        (&grads.db).into(),
        (group.min(m) as i32).into(),
        ni.into(),
    ];
    // Each run starts from free locks and empty counts (a timed repetition reuses them).
    let mut run = || -> Result<()> {
        dev.upload_into(&locks, &vec![0; 2 * group])?;
        dev.launch(&dx_kernel, &dx_config, &dx_args)?;
        dev.launch(&dwdb_kernel, &dwdb_config, &dwdb_args)
    };
    run()?;
    let time_ms = dev.time(&mut run)?;
    Ok((grads, time_ms))
}

fn to_f64(v: &[f16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// What the forward pass computes, in f64.
pub struct Reference {
    pub y: Vec<f64>,
    pub mean: Vec<f64>,
    pub rstd: Vec<f64>,
}

/// The forward pass in f64 on the rows of `x` (`m x n`).
pub fn forward_reference(x: &[f64], w: &[f64], b: &[f64], m: usize, n: usize) -> Reference {
    let mut r = Reference {
        y: vec![0.0; m * n],
        mean: vec![0.0; m],
        rstd: vec![0.0; m],
    };
    for i in 0..m {
        let row = &x[i * n..(i + 1) * n];
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + EPS as f64).sqrt();
        for c in 0..n {
            r.y[i * n + c] = (row[c] - mean) * rstd * w[c] + b[c];
        }
        (r.mean[i], r.rstd[i]) = (mean, rstd);
    }
    r
}

/// The input, weight and bias gradients in f64, from the forward pass's `mean` and `rstd`.
pub fn backward_reference(
    x: &[f64],
    w: &[f64],
    dy: &[f64],
    mean: &[f64],
    rstd: &[f64],
    m: usize,
    n: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut dx, mut dw, mut db) = (vec![0.0; m * n], vec![0.0; n], vec![0.0; n]);
    for i in 0..m {
        let x_hat: Vec<f64> = (0..n).map(|c| (x[i * n + c] - mean[i]) * rstd[i]).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] * dy[i * n + c]).collect();
        let c1 = x_hat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        for c in 0..n {
            dx[i * n + c] = (wdy[c] - (x_hat[c] * c1 + c2)) * rstd[i];
            dw[c] += dy[i * n + c] * x_hat[c];
            db[c] += dy[i * n + c];
        }
    }
    (dx, dw, db)
}
