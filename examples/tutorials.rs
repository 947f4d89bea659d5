//! The seed tutorials, run on any device and checked against CPU references.

pub mod attention;
pub mod dropout;
pub mod grouped_matmul;
pub mod layer_norm;
pub mod long_rows;
pub mod math_functions;

use crate::check::{matmul_reference, matmul_reference_of, max_relative_error, softmax_reference};
use crate::rng::Rng;
use crate::sweeps::{self, Sweep};
use half::f16;
use rutile::autotune::{Autotuner, Config, Tuned};
use rutile::seeds::{self, Activation, MatmulMeta};
use rutile::{CacheModifier, Device, DeviceExt, DeviceType, LaunchConfig, Result, ScalarType};

/// The tutorials' performance sweeps (their `perf_report`s), in the order the `tutorials`
/// example prints their tables and `figures` draws them. A tutorial with a sweep adds it
/// here.
pub fn sweeps() -> Vec<Sweep> {
    vec![
        sweeps::vector_add::sweep(),
        sweeps::softmax::sweep(),
        sweeps::matmul::sweep(),
    ]
}

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
    /// What else the run chose (the autotuner's configuration).
    pub detail: Option<String>,
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
        )?;
        match &self.detail {
            Some(d) => write!(f, "  {d}"),
            None => Ok(()),
        }
    }
}

/// Launches once to compile and warm up, then times one launch on the device.
pub(crate) fn timed(
    dev: &dyn Device,
    kernel: &rutile::Kernel,
    config: &LaunchConfig,
    args: &[rutile::Arg<'_>],
) -> Result<f64> {
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
        detail: None,
    })
}

/// How a softmax tutorial picks its kernel and launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxForm {
    /// One row per program at the tutorial's `num_warps` heuristic.
    Simple,
    /// The persistent form: `multiprocessors x occupancy` programs looping over rows.
    Persistent,
    /// One row per program, `num_warps`, the load hint and the split of the row chosen by
    /// the autotuner ([`softmax_configs`]), as the tutorial suggests doing instead of its
    /// heuristic; dividing as Triton compiles the tutorial's `/` for f32 (within 2 ulp,
    /// [`seeds::SoftmaxOptions::ieee_rounding`] off), which needs fewer registers than the
    /// correctly rounded division of the other two forms.
    Autotuned,
}

/// Fused softmax of a `rows x cols` f32 matrix in the given form, checked against a CPU
/// softmax. Rows over 64 KiB go to the long-row host code ([`long_rows::softmax_launch`]:
/// up to 128 KiB held in the registers of one 32-warp program, longer ones shared by the
/// programs of a thread-block cluster where the device has them, else walked twice)
/// whatever the form.
pub fn softmax(dev: &dyn Device, rows: usize, cols: usize, form: SoftmaxForm, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let x = crate::rng::normal_f32s(&mut rng, rows * cols);
    let block = seeds::softmax_block(cols as u32);
    let (xb, yb) = (dev.upload(&x)?, dev.zeros::<f32>(rows * cols)?);
    let args = softmax_args(&yb, &xb, rows, cols);
    let mut detail = None;
    let (kernel, config) = match form {
        _ if !seeds::fits_one_block(cols as u32, ScalarType::F32) => {
            let (kernel, config) = long_rows::softmax_launch(dev, rows, cols, &args)?;
            detail = Some(if config.cluster > 1 {
                let walk = if kernel.name == "softmax_cluster_rows_kernel" {
                    format!(", {} clusters walking the rows", config.grid[0] / config.cluster)
                } else {
                    String::new()
                };
                format!(
                    "long rows: shared by a cluster of {} programs of {} warps, held in their registers{walk}",
                    config.cluster, config.num_warps
                )
            } else if cols <= long_rows::REGISTER_ROW_MAX {
                format!(
                    "long rows: one block of {} warps holds them in registers",
                    config.num_warps
                )
            } else {
                "long rows: walked by the long-row kernel".into()
            });
            (kernel, config)
        }
        SoftmaxForm::Simple => (
            seeds::softmax(block)?,
            LaunchConfig::grid1(rows as u32).num_warps(seeds::softmax_num_warps(block)),
        ),
        SoftmaxForm::Persistent => {
            let kernel = seeds::softmax_persistent(block)?;
            let config = LaunchConfig::grid1(rows as u32).num_warps(seeds::softmax_num_warps(block));
            let config = dev.resident_grid(&kernel, config, &args, rows as u32)?;
            (kernel, config)
        }
        SoftmaxForm::Autotuned => {
            let tuner = Autotuner::new("softmax", softmax_configs(cols))?;
            let Tuned { choice, kernel, launch } = tuned_softmax(dev, &tuner, rows, cols, &args)?;
            detail = Some(format!(
                "autotuned{}: {}",
                if choice.from_file { " (cached)" } else { "" },
                choice.config
            ));
            (kernel, launch)
        }
    };
    let time_ms = timed(dev, &kernel, &config, &args)?;
    let y = dev.download(&yb)?;
    let want = softmax_reference(&x, rows, cols);
    let (error, _) = max_relative_error(y.iter().map(|&v| v as f64), &want, 1e-30);
    let name = match form {
        SoftmaxForm::Simple => "softmax",
        SoftmaxForm::Persistent => "softmax (persistent)",
        SoftmaxForm::Autotuned => "softmax (autotuned)",
    };
    Ok(Outcome {
        tutorial: name.into(),
        size: format!("{rows}x{cols}"),
        device: dev.id(),
        error,
        tolerance: 1e-5,
        time_ms,
        detail,
    })
}

/// The softmax kernels' arguments: `output, input, input row stride, output row stride,
/// rows, columns` for a contiguous `rows x cols` matrix.
pub fn softmax_args<'a>(
    out: &'a rutile::Buffer<f32>,
    inp: &'a rutile::Buffer<f32>,
    rows: usize,
    cols: usize,
) -> [rutile::Arg<'a>; 6] {
    let c = cols as i32;
    [
        out.into(),
        inp.into(),
        c.into(),
        c.into(),
        (rows as i32).into(),
        c.into(),
    ]
}

/// What the autotuner tries for the one-row-per-program softmax of `cols` columns:
/// `num_warps` 1 to 16; plain loads and read-once loads (`STREAMING` = 1: Triton's
/// `cache_modifier=".cs"`); and the row as one block of the next power of two
/// (`PIECES` = 1) or in at most 2, 3 or 4 power-of-two pieces
/// ([`seeds::softmax_chunked`]), each split that differs from the others. Which split is
/// fastest depends on the width and the GPU: on the H100 the finest split wins just past a
/// power of two and a coarser one further on, where more pieces cost more registers.
pub fn softmax_configs(cols: usize) -> Vec<Config> {
    let mut splits: Vec<(i64, Vec<u32>)> = Vec::new();
    for pieces in 1..=4 {
        let chunks = seeds::softmax_chunks_at_most(cols as u32, pieces);
        if splits.iter().all(|(_, c)| *c != chunks) {
            splits.push((pieces as i64, chunks));
        }
    }
    let mut configs = Vec::new();
    for num_warps in [1, 2, 4, 8, 16] {
        for streaming in [0, 1] {
            for (pieces, _) in &splits {
                let meta = [("STREAMING", streaming), ("PIECES", *pieces)];
                configs.push(Config::new(&meta).num_warps(num_warps));
            }
        }
    }
    configs
}

/// The one-row-per-program softmax of `rows x cols` (arguments as [`softmax_args`]), tuned
/// over `tuner`'s configurations ([`softmax_configs`] of `cols`) for this shape on `dev`.
/// Every configuration divides as Triton's `/` (see [`SoftmaxForm::Autotuned`]): the
/// autotuner chooses among kernels that compute the same function.
pub fn tuned_softmax(
    dev: &dyn Device,
    tuner: &Autotuner,
    rows: usize,
    cols: usize,
    args: &[rutile::Arg<'_>],
) -> Result<Tuned> {
    let block = seeds::softmax_block(cols as u32);
    let build = |c: &Config| {
        let cache = if c.value("STREAMING")? != 0 {
            CacheModifier::Streaming
        } else {
            CacheModifier::Default
        };
        let cache = seeds::SoftmaxOptions {
            cache,
            ieee_rounding: false,
        };
        Ok(match c.value("PIECES")? {
            1 => seeds::softmax_with(block, cache)?,
            pieces => {
                let chunks = seeds::softmax_chunks_at_most(cols as u32, pieces.clamp(1, 32) as u32);
                seeds::softmax_chunked(&chunks, cache)?
            }
        })
    };
    let grid = |_: &Config| Ok([rows as u32, 1, 1]);
    tuner.tuned(dev, &format!("{rows},{cols}"), &build, &grid, args)
}

/// The matmul tutorial's `@triton.autotune` configurations and rutile's own
/// ([`seeds::MATMUL_CONFIGS`]): `BLOCK_M`, `BLOCK_N`, `BLOCK_K`, `GROUP_M`, with
/// `num_stages` and `num_warps`.
pub fn matmul_configs() -> Vec<Config> {
    seeds::MATMUL_CONFIGS
        .into_iter()
        .map(|(bm, bn, bk, stages, warps)| {
            let (bm, bn, bk) = (i64::from(bm), i64::from(bn), i64::from(bk));
            Config::new(&[("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk), ("GROUP_M", 8)])
                .num_stages(stages)
                .num_warps(warps)
        })
        .collect()
}

/// [`matmul_configs`] that `dev` should try. A software device compiles each of the large
/// ones for seconds (rutile's `dot` is unrolled over the block: hundreds of kilobytes of
/// SPIR-V), so there only those of at most 128 x 64 blocks are tried, as Triton's
/// `prune_configs_by` would.
///
/// On Hopper (CUDA, compute capability 9.0) the warpgroup configurations (64-wide K, 8
/// warps) are also tried with the schedules only CUDA has: the persistent grid, warp
/// specialization, and both (with at most 3 stages: the ring cannot share shared memory
/// with the epilogue, which then runs while the producer fills the next tile's stages).
/// On Vulkan devices with cooperative matrices the largest blocks are also tried on 16
/// warps and with 16-wide K steps ([`with_cooperative_shapes`]).
pub fn matmul_configs_for(dev: &dyn Device) -> Vec<Config> {
    let p = dev.properties();
    let software = p.device_type == DeviceType::Cpu;
    let hopper = p.backend == rutile::Backend::Cuda && p.compute_capability == Some((9, 0));
    let mut configs: Vec<Config> = matmul_configs()
        .into_iter()
        .filter(|c| !software || c.value("BLOCK_M").unwrap_or(0) * c.value("BLOCK_N").unwrap_or(0) <= 128 * 64)
        .collect();
    if hopper {
        configs = with_hopper_schedules(configs);
    }
    if p.backend == rutile::Backend::Vulkan && p.cooperative_matrix.is_some() {
        configs = with_cooperative_shapes(configs);
    }
    configs
}

/// `configs` and, for each of their largest blocks (256 x 128 or 128 x 256, 8 warps), the
/// same on 16 warps, and both with 16-wide K steps; each of the 32-wide ones (8 and 16
/// warps) and the 16-warp 16-wide ones also with one prefetch register set (`num_stages`
/// 2); and 128 x 256 x 16 on 16 warps with one stage (see the end of the function). On
/// cooperative matrices 16 subgroups hold 8 accumulator matrices of 16 x 16 each instead of
/// 16, and NVIDIA's Vulkan driver gives the program 128 registers a thread instead of 251 to
/// 255; 16-wide K steps halve the operand tiles, so that two stages of them fit the 48 KiB
/// of workgroup memory the driver gives. At 32-wide steps they fit once: each step then stores its operands
/// only once every warp has read the last ones (two barriers a step, `lower/pipeline/`), and
/// one set of prefetch registers leaves room in the registers (the 8-warp block at 248 a
/// thread where two sets took 255). On an H200 at 4096³ the autotuner chose 128 x 256 x 32
/// on 8 warps with one prefetch set (`docs/performance.md`).
pub fn with_cooperative_shapes(mut configs: Vec<Config>) -> Vec<Config> {
    let largest: Vec<Config> = configs
        .iter()
        .filter(|c| c.value("BLOCK_M").unwrap_or(0) * c.value("BLOCK_N").unwrap_or(0) >= 256 * 128 && c.num_warps == 8)
        .cloned()
        .collect();
    for c in largest {
        let shallow = with_block_k(&c, 16);
        // One prefetch set for the 32- and 16-wide blocks only: 64-wide ones of this size do
        // not fit their operands in 48 KiB at all (they run on FMAs, several times slower).
        let k32 = c.value("BLOCK_K").ok() == Some(32);
        let (wide, shallow_wide) = (c.clone().num_warps(16), shallow.clone().num_warps(16));
        let one_set = [
            k32.then(|| c.num_stages(2)),
            k32.then(|| wide.clone().num_stages(2)),
            Some(shallow_wide.clone().num_stages(2)),
        ];
        for extra in [wide, shallow, shallow_wide]
            .into_iter()
            .chain(one_set.into_iter().flatten())
        {
            if !configs.contains(&extra) {
                configs.push(extra);
            }
        }
    }
    // The 16-warp 128 x 256 x 16 block also with one stage: its operands loaded in the
    // iteration that stores them, none in flight at a barrier. Against the same block two
    // iterations ahead it tells whether the driver's barrier waits for loads in flight
    // (`docs/performance.md`, "Where the K loop's time goes"); the autotuner keeps it only
    // where it runs faster.
    let one_stage = Config::new(&[("BLOCK_M", 128), ("BLOCK_N", 256), ("BLOCK_K", 16), ("GROUP_M", 8)])
        .num_warps(16)
        .num_stages(1);
    if !configs.contains(&one_stage) {
        configs.push(one_stage);
    }
    configs
}

/// `c` with `BLOCK_K` set to `k`.
fn with_block_k(c: &Config, k: i64) -> Config {
    let mut c = c.clone();
    for (name, value) in c.meta.iter_mut() {
        if name == "BLOCK_K" {
            *value = k;
        }
    }
    c
}

/// `configs` and, for each warpgroup configuration among them (64-wide K, 8 warps), the
/// same with the persistent grid, with warp specialization and with both (at most 3
/// stages), each once.
pub fn with_hopper_schedules(mut configs: Vec<Config>) -> Vec<Config> {
    let warpgroup: Vec<Config> = configs
        .iter()
        .filter(|c| c.value("BLOCK_K").ok() == Some(64) && c.num_warps == 8)
        .cloned()
        .collect();
    for c in warpgroup {
        let specialized = c.clone().warp_specialize(true);
        // Persistent, at most 3 stages: the ring cannot share its bytes with the epilogue.
        let both = specialized.clone().num_stages(c.num_stages.min(3)).persistent(true);
        for scheduled in [c.persistent(true), specialized, both] {
            // (Two stage counts of one tile may make the same specialized configuration.)
            if !configs.contains(&scheduled) {
                configs.push(scheduled);
            }
        }
    }
    configs
}

/// The matmul meta-parameters of an autotuning configuration.
fn matmul_meta(c: &Config, leaky_relu: bool) -> Result<MatmulMeta> {
    let block = |name| c.value(name).map(|v| v as u32);
    let mut meta = MatmulMeta::fp16(block("BLOCK_M")?, block("BLOCK_N")?, block("BLOCK_K")?);
    meta.group_m = block("GROUP_M")?;
    meta.activation = leaky_relu.then_some(Activation::LeakyRelu);
    Ok(meta)
}

/// [`matmul_configs_for`] `dev`, and on fp8 warpgroup MMAs (CUDA, Hopper) each 8-warp
/// configuration with 64-wide K (its schedules too) also with 128-wide K: 128 bytes of K a
/// row, as 64 f16 values are, the widest swizzle (Triton's fp8 configurations take 128).
/// On an H200 at 4096³ the autotuner chose 128 x 256 x 128 (docs/performance.md, "fp8: the
/// matmul tutorial's fp8 run").
pub fn fp8_matmul_configs_for(dev: &dyn Device) -> Vec<Config> {
    let mut configs = matmul_configs_for(dev);
    if dev.properties().backend == rutile::Backend::Cuda && dev.properties().compute_capability == Some((9, 0)) {
        let wide: Vec<Config> = configs
            .iter()
            .filter(|c| c.value("BLOCK_K").ok() == Some(64) && c.num_warps == 8)
            .map(|c| with_block_k(c, 128))
            .collect();
        configs.extend(wide);
    }
    configs
}

/// The matmul tutorial's fp8 run: E5M2 operands (`a.to(float8_e5m2)`, B passed as `b.T`,
/// so column-major), f32 accumulation, an f16 output, autotuned over
/// [`fp8_matmul_configs_for`] `dev` and checked against the product of the fp8 values in
/// f64. (A device without fp8 types refuses the kernel, naming them.)
pub fn fp8_matmul(dev: &dyn Device, (m, n, k): (usize, usize, usize), seed: u64) -> Result<Outcome> {
    use rutile::F8E5M2;
    let input = ScalarType::F8E5M2;
    let mut rng = Rng::new(seed);
    let a: Vec<F8E5M2> = rng.f32s(m * k, -1.0, 1.0).into_iter().map(F8E5M2::from_f32).collect();
    // B column-major: element (p, j) at j * k + p.
    let b: Vec<F8E5M2> = rng.f32s(k * n, -1.0, 1.0).into_iter().map(F8E5M2::from_f32).collect();
    let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(m * n)?);
    let ints = [m, n, k, k, 1, 1, k, n, 1].map(|v| rutile::Arg::I32(v as i32));
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(ints);
    let meta = |c: &Config| -> Result<MatmulMeta> {
        Ok(MatmulMeta {
            input,
            ..matmul_meta(c, false)?
        })
    };
    let tuner = Autotuner::new("matmul_fp8", fp8_matmul_configs_for(dev))?;
    let build = |c: &Config| Ok(seeds::matmul(&meta(c)?)?);
    let grid = |c: &Config| Ok([seeds::matmul_grid(&meta(c)?, m as u32, n as u32), 1, 1]);
    let Tuned { choice, kernel, launch } =
        tuner.tuned(dev, &format!("{m},{n},{k},colmajor_b"), &build, &grid, &args)?;
    let time_ms = timed(dev, &kernel, &launch, &args)?;
    let c = dev.download(&cb)?;
    let a: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    // B back to row-major for the reference.
    let b: Vec<f64> = (0..k * n).map(|i| b[(i % n) * k + i / n].to_f64()).collect();
    let want = matmul_reference_of(&a, &b, (m, n, k), false);
    Ok(matmul_outcome(
        "matmul fp8 (e5m2)",
        dev,
        (m, n, k),
        &c,
        &want,
        time_ms,
        &choice,
    ))
}

/// A matmul tutorial's line: its f16 output `c` against the f64 product `want`, within
/// half an ulp of the result (2^-11 relative) plus the f32 accumulation's error, relative
/// to the magnitude of a dot product of k terms in [-1, 1] (about sqrt(k)/3).
fn matmul_outcome(
    label: &str,
    dev: &dyn Device,
    (m, n, k): (usize, usize, usize),
    c: &[f16],
    want: &[f64],
    time_ms: f64,
    choice: &rutile::autotune::Choice,
) -> Outcome {
    let scale = (k as f64).sqrt() / 3.0;
    let (error, _) = max_relative_error(c.iter().map(|v| v.to_f64()), want, scale);
    Outcome {
        tutorial: label.into(),
        size: format!("{m}x{n}x{k}"),
        device: dev.id(),
        error,
        tolerance: 2e-3,
        time_ms,
        detail: Some(format!(
            "autotuned{}: {}",
            if choice.from_file { " (cached)" } else { "" },
            choice.config
        )),
    }
}

/// How the matmul kernel addresses its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulForm {
    /// The tutorial's pointer blocks ([`seeds::matmul`]).
    Pointers,
    /// Block pointers, as Triton's block-pointer tutorial ([`seeds::matmul_block_ptr`]).
    BlockPointers,
}

/// The tutorial's matmul of `m x k` by `k x n` with `args` (see
/// [`seeds::matmul_row_major_args`]), autotuned by `tuner` over its configurations with
/// `M, N, K` as the key.
pub fn tuned_matmul(
    dev: &dyn Device,
    tuner: &Autotuner,
    shape: (usize, usize, usize),
    leaky_relu: bool,
    args: &[rutile::Arg<'_>],
) -> Result<Tuned> {
    tuned_matmul_form(dev, tuner, shape, leaky_relu, MatmulForm::Pointers, args)
}

/// [`tuned_matmul`] with the kernel of `form`.
pub fn tuned_matmul_form(
    dev: &dyn Device,
    tuner: &Autotuner,
    (m, n, k): (usize, usize, usize),
    leaky_relu: bool,
    form: MatmulForm,
    args: &[rutile::Arg<'_>],
) -> Result<Tuned> {
    let build = |c: &Config| {
        let meta = matmul_meta(c, leaky_relu)?;
        Ok(match form {
            MatmulForm::Pointers => seeds::matmul(&meta)?,
            MatmulForm::BlockPointers => seeds::matmul_block_ptr(&meta)?,
        })
    };
    let grid = |c: &Config| {
        let programs = seeds::matmul_grid(&matmul_meta(c, leaky_relu)?, m as u32, n as u32);
        Ok([programs, 1, 1])
    };
    tuner.tuned(dev, &format!("{m},{n},{k}"), &build, &grid, args)
}

/// Matmul of fp16 `m x k` and `k x n` matrices into fp16, with optional leaky ReLU,
/// autotuned over [`matmul_configs_for`] the device (the choice is kept in the autotuner's
/// cache file, see `rutile::autotune`).
pub fn matmul(dev: &dyn Device, m: usize, n: usize, k: usize, leaky_relu: bool, seed: u64) -> Result<Outcome> {
    matmul_form(dev, (m, n, k), leaky_relu, MatmulForm::Pointers, seed)
}

/// [`matmul`] with the kernel of `form`: with [`MatmulForm::BlockPointers`], Triton's
/// block-pointer tutorial (its matmul with `make_block_ptr` and `advance`, the edges
/// masked by `boundary_check`).
pub fn matmul_form(
    dev: &dyn Device,
    (m, n, k): (usize, usize, usize),
    leaky_relu: bool,
    form: MatmulForm,
    seed: u64,
) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let a: Vec<f16> = rng.f32s(m * k, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = rng.f32s(k * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(m * n)?);
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32));
    // The autotuner's cache key and the line's label.
    let (key, label) = match (form, leaky_relu) {
        (MatmulForm::Pointers, false) => ("matmul", "matmul"),
        (MatmulForm::Pointers, true) => ("matmul_leaky_relu", "matmul + leaky_relu"),
        (MatmulForm::BlockPointers, false) => ("matmul_block_ptr", "block-pointer matmul"),
        (MatmulForm::BlockPointers, true) => ("matmul_block_ptr_leaky_relu", "block-pointer matmul + leaky_relu"),
    };
    let tuner = Autotuner::new(key, matmul_configs_for(dev))?;
    let Tuned { choice, kernel, launch } = tuned_matmul_form(dev, &tuner, (m, n, k), leaky_relu, form, &args)?;
    let time_ms = timed(dev, &kernel, &launch, &args)?;
    let c = dev.download(&cb)?;
    let want = matmul_reference(&a, &b, m, n, k, leaky_relu);
    Ok(matmul_outcome(label, dev, (m, n, k), &c, &want, time_ms, &choice))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each warpgroup configuration gains its three schedules, no configuration twice (the
    /// autotuner refuses duplicates), and the others none.
    #[test]
    fn hopper_schedules_are_added_once_each() {
        let plain = matmul_configs();
        let all = with_hopper_schedules(plain.clone());
        for (i, c) in all.iter().enumerate() {
            assert!(!all[..i].contains(c), "`{c}` twice");
        }
        let warpgroup = plain
            .iter()
            .filter(|c| c.value("BLOCK_K").ok() == Some(64) && c.num_warps == 8)
            .count();
        assert!(warpgroup >= 3);
        let persistent = all.iter().filter(|c| c.persistent && !c.warp_specialize).count();
        assert_eq!(persistent, warpgroup);
        let specialized: Vec<&Config> = all.iter().filter(|c| c.warp_specialize).collect();
        assert!(specialized.iter().all(|c| c.num_warps == 8));
        assert!(specialized.iter().all(|c| c.num_stages <= 3 || !c.persistent));
        assert_eq!(specialized.iter().filter(|c| !c.persistent).count(), warpgroup);
        // (Fewer both ways: two stage counts of a tile may make one at 3 stages.)
        let both = specialized.iter().filter(|c| c.persistent).count();
        assert!((1..=warpgroup).contains(&both), "{both}");
        assert_eq!(all[..plain.len()], plain[..]);
    }

    /// The cooperative-matrix shapes keep the tutorial's list first, add no configuration
    /// twice, and include the blocks the Vulkan measurements chose (`docs/performance.md`):
    /// 128 x 256 x 32 on 8 warps with one prefetch set, 128 x 256 x 16 on 16 warps with
    /// one; one prefetch set only for the 32-wide 8-warp blocks (64-wide ones do not fit).
    #[test]
    fn cooperative_shapes_add_the_measured_blocks_once_each() {
        let plain = matmul_configs();
        let all = with_cooperative_shapes(plain.clone());
        for (i, c) in all.iter().enumerate() {
            assert!(!all[..i].contains(c), "`{c}` twice");
        }
        assert_eq!(all[..plain.len()], plain[..]);
        let block = |bm, bn, bk, warps, stages| {
            Config::new(&[("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk), ("GROUP_M", 8)])
                .num_warps(warps)
                .num_stages(stages)
        };
        for c in [
            block(128, 256, 32, 8, 2),
            block(256, 128, 32, 8, 2),
            block(128, 256, 16, 16, 2),
            block(128, 256, 16, 16, 1),
        ] {
            assert!(all.contains(&c), "`{c}` missing");
        }
        assert!(!all.contains(&block(128, 256, 64, 8, 2)));
        assert!(!all.contains(&block(128, 256, 64, 16, 2)));
    }
}
