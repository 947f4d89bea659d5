//! Triton's fused attention tutorial, forward pass: fp16 Q, K, V of shape `[Z, H, N_CTX,
//! HEAD_DIM]`, causal or not, its blocks autotuned as the tutorial's `@triton.autotune`,
//! checked against an f64 reference on a sample of the queries.

use super::{timed, Outcome};
use crate::check::max_relative_error;
use crate::rng::{normal_f32s, Rng};
use half::f16;
use rutile::autotune::{Autotuner, Config, Tuned};
use rutile::seeds::{self, AttentionMeta};
use rutile::{Arg, Buffer, Device, DeviceExt, DeviceType, Result};

/// The tutorial's `sm_scale`.
pub const SM_SCALE: f32 = 0.5;

/// One attention problem: `z x h` heads of `n_ctx` positions of dimension `head_dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    pub z: usize,
    pub h: usize,
    pub n_ctx: usize,
    pub head_dim: usize,
    pub causal: bool,
}

impl Problem {
    /// Elements of each of Q, K, V and Out.
    pub fn len(&self) -> usize {
        self.z * self.h * self.n_ctx * self.head_dim
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tutorial's count: two matmuls of `2 N_CTX^2 HEAD_DIM` flops per head, half of
    /// them when causal.
    pub fn flops(&self) -> f64 {
        let per_matmul = 2.0 * (self.z * self.h) as f64 * (self.n_ctx as f64).powi(2) * self.head_dim as f64;
        let total = 2.0 * per_matmul;
        if self.causal {
            total * 0.5
        } else {
            total
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{}x{}{}",
            self.z,
            self.h,
            self.n_ctx,
            self.head_dim,
            if self.causal { " causal" } else { "" }
        )
    }
}

/// The tutorial's problem (4 x 32 heads of 1024 positions) at `head_dim`, smaller (1 x 2
/// heads of 300) on an interpreter or a software device.
pub fn tutorial_problem(dev: &dyn Device, head_dim: usize, causal: bool) -> Problem {
    let hardware = dev.properties().device_type != DeviceType::Cpu;
    let (z, h, n_ctx) = if hardware { (4, 32, 1024) } else { (1, 2, 300) };
    Problem {
        z,
        h,
        n_ctx,
        head_dim,
        causal,
    }
}

/// Q, K, V, M and Out of one problem on a device.
pub struct Tensors {
    pub q: Buffer<f16>,
    pub k: Buffer<f16>,
    pub v: Buffer<f16>,
    pub m: Buffer<f32>,
    pub out: Buffer<f16>,
}

impl Tensors {
    /// Uploads Q, K, V and allocates M and Out.
    pub fn new(dev: &dyn Device, p: &Problem, q: &[f16], k: &[f16], v: &[f16]) -> Result<Tensors> {
        Ok(Tensors {
            q: dev.upload(q)?,
            k: dev.upload(k)?,
            v: dev.upload(v)?,
            m: dev.zeros(p.z * p.h * p.n_ctx)?,
            out: dev.zeros(p.len())?,
        })
    }

    /// `_attn_fwd`'s arguments for contiguous tensors.
    pub fn args(&self, p: &Problem) -> Vec<Arg<'_>> {
        let strides = [p.h * p.n_ctx * p.head_dim, p.n_ctx * p.head_dim, p.head_dim, 1].map(|s| s as i32);
        let mut args: Vec<Arg<'_>> = vec![
            (&self.q).into(),
            (&self.k).into(),
            (&self.v).into(),
            SM_SCALE.into(),
            (&self.m).into(),
            (&self.out).into(),
        ];
        for _ in 0..4 {
            args.extend(strides.map(Arg::I32));
        }
        args.extend([p.z, p.h, p.n_ctx].map(|v| Arg::I32(v as i32)));
        args
    }
}

/// What the autotuner tries: `BLOCK_M x BLOCK_N` blocks with their warps and stages, the
/// tutorial's sizes first and smaller ones for devices with less shared memory (the
/// autotuner skips what a device cannot run), and for causal attention its two stages
/// (`SPLIT` = 1) or one masked walk (`SPLIT` = 0, half the shared memory, see
/// [`AttentionMeta::split_diagonal`]). A software device gets the smallest blocks only: it
/// compiles each large one for seconds. Through CUDA, 128 x 64 on 8 warps is also tried at
/// 128 registers a thread, so that two programs share a multiprocessor.
pub fn attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    configs(dev, causal, false)
}

/// What the tutorial's host code ([`attention`]) autotunes over for `p`: [`attention_configs`],
/// and through CUDA the forms measured faster for some problems, for the autotuner to pick
/// per problem (`docs/performance.md`): at head dimension 128 the same list with K and V
/// copied by TMA across heads (`LaunchConfig::tma_outer`; on an H200 4–7% faster from 2048
/// tokens, causal or not, 1–4% slower at 1024: "Head dimension 128 on an H200") and
/// [`head_128_specialized_attention_configs`] (the fastest from 2048 tokens); at head
/// dimension 64 without the causal mask, [`block_programs_attention_configs`] (the fastest
/// there from 4096 tokens, 59–64% of cuBLAS's matmul rate: "Whole key blocks") and the
/// TMA-across-heads list (the fastest at 1024 and 2048 tokens; 3–7% slower with the mask,
/// where it is left out: "Head dimension 128: the ping-pong").
pub fn host_attention_configs(dev: &dyn Device, p: &Problem) -> Vec<Config> {
    let mut configs = attention_configs(dev, p.causal);
    match p.head_dim {
        128 => {
            configs.extend(tma_heads_attention_configs(dev, p.causal));
            configs.extend(head_128_specialized_attention_configs(dev, p.causal));
        }
        64 if !p.causal => {
            configs.extend(block_programs_attention_configs(dev, p.causal));
            configs.extend(tma_heads_attention_configs(dev, p.causal));
        }
        _ => {}
    }
    configs
}

/// [`attention_configs`] with K and V copied by TMA across heads (`LaunchConfig::tma_outer`),
/// through CUDA (none elsewhere).
pub fn tma_heads_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    let configs = attention_configs(dev, causal).into_iter();
    configs.map(|c| c.tma_outer(true)).collect()
}

/// [`attention_configs`] with the walk rotated by one block (`ROTATE` = 1, see
/// [`AttentionMeta::rotate`]): FlashAttention-3's overlap of one block's `P V` with the
/// next block's softmax, for head dimension 64 (at 128 the carried `P` costs too many
/// registers). Not in the tutorial's own list until it is measured faster.
pub fn rotated_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    configs(dev, causal, true)
}

/// The rotated walk warp-specialized, through CUDA (none elsewhere): a producer warpgroup
/// copies K and V by TMA across heads (`LaunchConfig::warp_specialize`, `tma_outer`), and the
/// two consumer warpgroups of a 128-row block take turns at the tensor cores, one's softmax
/// beside the other's MMAs (FlashAttention-3's ping-pong; the lowering's `specialize`). For
/// head dimension 64; its own list until a full run measures it faster everywhere (it was
/// 2–7% faster than the tutorial's list without the causal mask, 5% slower with it at 4096
/// tokens: `docs/performance.md`). The same list causal or not (`block_n` divides
/// `block_m` in every one, so causal walks split the diagonal off too).
pub fn specialized_attention_configs(dev: &dyn Device, _causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    [(128, 128, 2), (128, 128, 3), (128, 64, 2), (128, 64, 3)]
        .into_iter()
        .map(|(bm, bn, stages)| {
            let meta = [("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", 1)];
            let config = Config::new(&meta).num_warps(8).num_stages(stages);
            config.warp_specialize(true).tma_outer(true)
        })
        .collect()
}

/// The rotated walk of 64-row programs, several a thread block sharing one producer
/// warpgroup (`LaunchConfig::programs_per_block`): FlashAttention-3's three consumer
/// warpgroups, and two, through CUDA (none elsewhere) and without the causal mask (whose
/// key blocks depend on the program, so that programs cannot share them: none then). For
/// head dimension 64; its own list, the fastest there on an H200 from 2048 tokens (three
/// programs a block: 64% of cuBLAS's matmul rate from 8192 tokens, 59–61% at 4096,
/// `docs/performance.md`, "Whole key blocks"); not in the tutorial's list, which also
/// serves causal attention, Vulkan and head dimension 128, but in what its host code tunes
/// over where it applies ([`host_attention_configs`]).
pub fn block_programs_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda || causal {
        return Vec::new();
    }
    [(2, 128, 2), (2, 128, 3), (3, 128, 2), (3, 128, 3), (3, 64, 3)]
        .into_iter()
        .map(|(programs, bn, stages)| {
            let meta = [("BLOCK_M", 64), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", 1)];
            let config = Config::new(&meta).num_warps(4).num_stages(stages);
            config
                .warp_specialize(true)
                .tma_outer(true)
                .programs_per_block(programs)
        })
        .collect()
}

/// The 128-row ping-pong of [`specialized_attention_configs`] at head dimension 128,
/// through CUDA (none elsewhere): a producer warpgroup copies K and V by TMA across heads,
/// two consumer warpgroups take turns at the tensor cores, the walk rotated or in the
/// tutorial's order. On an H200 the fastest form from 2048 tokens (68–76% of cuBLAS's
/// matmul rate, `docs/performance.md`, "Head dimension 128: the ping-pong"), slower at
/// 1024; in what the host code tunes over ([`host_attention_configs`]). Two 64-row
/// programs a block sharing a producer ran 8–17% slower than it at every length, and three
/// do not fit (each consumer's accumulator and scores take 128 of the 160 registers three
/// consumers get): no list.
pub fn head_128_specialized_attention_configs(dev: &dyn Device, _causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    [
        (128, 128, 2, 1),
        (128, 128, 2, 0),
        (128, 64, 2, 1),
        (128, 64, 3, 1),
        (128, 64, 2, 0),
        (128, 64, 3, 0),
    ]
    .into_iter()
    .map(|(bm, bn, stages, rotate)| {
        let meta = [("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", rotate)];
        let config = Config::new(&meta).num_warps(8).num_stages(stages);
        config.warp_specialize(true).tma_outer(true)
    })
    .collect()
}

/// Causal attention's lists ([`attention_configs`], and through CUDA
/// [`tma_heads_attention_configs`] and [`head_128_specialized_attention_configs`]) with the
/// programs started longest first (`LONGEST_FIRST` = 1, [`AttentionMeta::longest_first`]):
/// the grid's last programs, which set its tail, are then the shortest walks. None without
/// the causal mask, where every walk is as long. Not yet measured: a line of the benchmark
/// (`_longest_first`), in no list the host code tunes over.
pub fn longest_first_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if !causal {
        return Vec::new();
    }
    let mut configs = attention_configs(dev, causal);
    configs.extend(tma_heads_attention_configs(dev, causal));
    configs.extend(head_128_specialized_attention_configs(dev, causal));
    for c in &mut configs {
        c.meta.push(("LONGEST_FIRST".into(), 1));
    }
    configs
}

/// [`block_programs_attention_configs`] on a persistent grid (`LaunchConfig::persistent`):
/// a thread block a multiprocessor, whose producer copies the next block of programs' `K`
/// and `V` while its consumers finish the last one (normalize and store `O`). Meant to
/// hide a block's start and end, it measured slower at every length on an H200
/// (`docs/performance.md`, "Persistent blocks of programs"): a line of the benchmark, in
/// no list the host code tunes over.
pub fn persistent_block_programs_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    block_programs_attention_configs(dev, causal)
        .into_iter()
        .map(|c| c.persistent(true))
        .collect()
}

fn configs(dev: &dyn Device, causal: bool, rotate: bool) -> Vec<Config> {
    let software = dev.properties().device_type == DeviceType::Cpu;
    let cuda = dev.properties().backend == rutile::Backend::Cuda;
    let blocks: &[(i64, i64, u32, u32)] = if software {
        &[(16, 16, 4, 1)]
    } else {
        &[
            (128, 64, 8, 2),
            // Wider key blocks and a deeper ring, which fit once `P` no longer takes shared
            // memory (it feeds `P V` from registers on warpgroup MMAs).
            (128, 128, 8, 2),
            (128, 128, 8, 3),
            (128, 64, 8, 4),
            (128, 64, 8, 3),
            (128, 32, 8, 3),
            // One warpgroup a program with wide key blocks: a program holds half the
            // registers of 128 x 128 on 8 warps, so that two or three share a
            // multiprocessor and one's softmax runs beside another's matrix products (the
            // overlap FlashAttention-3 builds by hand).
            (64, 128, 4, 2),
            (64, 128, 4, 3),
            (64, 64, 4, 3),
            (64, 32, 4, 3),
            (32, 32, 4, 2),
            (16, 16, 4, 1),
        ]
    };
    let splits: &[i64] = if causal { &[1, 0] } else { &[1] };
    let mut configs = Vec::new();
    for &split in splits {
        for &(bm, bn, warps, stages) in blocks {
            if causal && split == 1 && bm % bn != 0 {
                // The diagonal is walked apart in whole key blocks: such a block is for the
                // one masked walk only (the builder refuses it here).
                continue;
            }
            let meta = [
                ("BLOCK_M", bm),
                ("BLOCK_N", bn),
                ("SPLIT", split),
                ("ROTATE", rotate as i64),
            ];
            let meta = if rotate { &meta[..] } else { &meta[..3] };
            let config = Config::new(meta).num_warps(warps).num_stages(stages);
            // Through CUDA, 128 x 64 on 8 warps also at 128 registers a thread (`maxnreg`):
            // `ptxas` then spills nothing at head dimension 64 (162 registers unbounded),
            // and two programs share a multiprocessor instead of one, one's softmax beside
            // the other's matrix products. On an H200 it ran 5% faster than every other
            // configuration from 4096 tokens on, causal or not (`docs/performance.md`).
            let capped =
                (cuda && (bm, bn, warps) == (128, 64, 8) && stages <= 3).then(|| config.clone().maxnreg(Some(128)));
            configs.extend(std::iter::once(config).chain(capped));
        }
    }
    configs
}

/// The kernel's meta-parameters for configuration `c` on problem `p`: specialized to a
/// length that is a multiple of the key blocks where it is one (no ragged walk, see
/// [`AttentionMeta::whole_key_blocks`]), as Triton specializes on divisibility.
fn meta(c: &Config, p: &Problem) -> Result<AttentionMeta> {
    let block_n = c.value("BLOCK_N")? as u32;
    Ok(AttentionMeta {
        split_diagonal: c.value("SPLIT")? != 0,
        rotate: c.value("ROTATE").is_ok_and(|r| r != 0),
        whole_key_blocks: p.n_ctx.is_multiple_of(block_n as usize),
        longest_first: c.value("LONGEST_FIRST").is_ok_and(|l| l != 0),
        ..AttentionMeta::fp16(c.value("BLOCK_M")? as u32, block_n, p.head_dim as u32, p.causal)
    })
}

/// The forward kernel for `p`, autotuned by `tuner` with the problem as the key.
pub fn tuned_attention(dev: &dyn Device, tuner: &Autotuner, p: &Problem, args: &[Arg<'_>]) -> Result<Tuned> {
    let build = |c: &Config| Ok(seeds::attention_forward(&meta(c, p)?)?);
    let grid = |c: &Config| Ok(meta(c, p)?.grid(p.z as u32, p.h as u32, p.n_ctx as u32));
    tuner.tuned(dev, &p.to_string(), &build, &grid, args)
}

/// Random Q, K, V as the tutorial's (normal, standard deviation 0.5; `normal_f32s`'s is
/// 0.98).
pub fn inputs(p: &Problem, seed: u64) -> [Vec<f16>; 3] {
    let mut rng = Rng::new(seed);
    [0; 3].map(|_| {
        normal_f32s(&mut rng, p.len())
            .into_iter()
            .map(|v| f16::from_f32(0.5 * v / 0.98))
            .collect()
    })
}

/// The fused attention forward pass on `p` with random inputs: autotuned over
/// [`host_attention_configs`], timed, and its output and `M` checked against
/// [`reference_rows`] on a sample of the queries (every one up to 512 positions; beyond,
/// every 61st and the last 17 of each head).
pub fn attention(dev: &dyn Device, p: Problem, seed: u64) -> Result<Outcome> {
    attention_with(dev, p, seed, host_attention_configs(dev, &p))
}

/// [`attention`] autotuned over `configs` (as [`attention_configs`] or
/// [`rotated_attention_configs`] gives them).
pub fn attention_with(dev: &dyn Device, p: Problem, seed: u64, configs: Vec<Config>) -> Result<Outcome> {
    let [q, k, v] = inputs(&p, seed);
    let t = Tensors::new(dev, &p, &q, &k, &v)?;
    let args = t.args(&p);
    let tuner = Autotuner::new("attention_fwd", configs)?;
    let Tuned { choice, kernel, launch } = tuned_attention(dev, &tuner, &p, &args)?;
    let time_ms = timed(dev, &kernel, &launch, &args)?;
    let out = dev.download(&t.out)?;
    let m = dev.download(&t.m)?;
    let rows: Vec<usize> = if p.n_ctx <= 512 {
        (0..p.n_ctx).collect()
    } else {
        (0..p.n_ctx).step_by(61).chain(p.n_ctx - 17..p.n_ctx).collect()
    };
    let (want_out, want_m) = reference_rows(&q, &k, &v, &p, &rows);
    let d = p.head_dim;
    let heads = p.z * p.h;
    let got_out = (0..heads).flat_map(|hd| {
        let out = &out;
        rows.iter()
            .flat_map(move |&i| (0..d).map(move |c| out[(hd * p.n_ctx + i) * d + c].to_f64()))
    });
    let got_m = (0..heads).flat_map(|hd| rows.iter().map(|&i| m[hd * p.n_ctx + i] as f64).collect::<Vec<_>>());
    // Outputs are averages of values of magnitude about 1: absolute errors. P is rounded
    // to fp16 before P V, as in the tutorial, and so is the output.
    let error = max_relative_error(got_out, &want_out, 1.0)
        .0
        .max(max_relative_error(got_m, &want_m, 1.0).0);
    let tflops = p.flops() / (time_ms * 1e-3) / 1e12;
    Ok(Outcome {
        tutorial: "attention forward".into(),
        size: p.to_string(),
        device: dev.id(),
        error,
        tolerance: 4e-3,
        time_ms,
        detail: Some(format!(
            "{tflops:.1} TFLOPS; autotuned{}: {}",
            if choice.from_file { " (cached)" } else { "" },
            choice.config
        )),
    })
}

/// The error of `t`'s output and `M` on a problem whose heads all repeat one head's inputs
/// (`tile`, as the benchmark builds its large problems), checked on a sample of the queries
/// (every 61st and the last 17) of the first and the last head against [`reference_rows`];
/// bounded by 4e-3 where the kernel is right. Heads that are all alike cannot show a kernel
/// reading another head's inputs: [`attention`], with inputs of their own for each head,
/// does.
pub fn tiled_error(dev: &dyn Device, t: &Tensors, p: &Problem, tile: &[Vec<f16>; 3]) -> Result<f64> {
    let rows: Vec<usize> = (0..p.n_ctx)
        .step_by(61)
        .chain(p.n_ctx.saturating_sub(17)..p.n_ctx)
        .collect();
    let one = Problem { z: 1, h: 1, ..*p };
    let (want_out, want_m) = reference_rows(&tile[0], &tile[1], &tile[2], &one, &rows);
    let (out, m) = (dev.download(&t.out)?, dev.download(&t.m)?);
    let d = p.head_dim;
    let mut error = 0.0f64;
    for head in [0, p.z * p.h - 1] {
        let got_out = rows
            .iter()
            .flat_map(|&i| (0..d).map(move |c| (head * p.n_ctx + i) * d + c))
            .map(|at| out[at].to_f64());
        let got_m = rows.iter().map(|&i| m[head * p.n_ctx + i] as f64);
        error = error
            .max(max_relative_error(got_out, &want_out, 1.0).0)
            .max(max_relative_error(got_m, &want_m, 1.0).0);
    }
    Ok(error)
}

/// For the queries `rows` of every head (heads in order, then `rows`), in f64: the output
/// `softmax(q K^T sm_scale) V` (row-major, `head_dim` each) and `M`, the log-sum-exp of the
/// scaled scores in base 2.
pub fn reference_rows(q: &[f16], k: &[f16], v: &[f16], p: &Problem, rows: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let (n, d) = (p.n_ctx, p.head_dim);
    let at = |x: &[f16], head: usize, i: usize, c: usize| x[(head * n + i) * d + c].to_f64();
    let mut out = Vec::with_capacity(p.z * p.h * rows.len() * d);
    let mut lse = Vec::with_capacity(p.z * p.h * rows.len());
    for head in 0..p.z * p.h {
        for &i in rows {
            let keys = if p.causal { i + 1 } else { n };
            let scores: Vec<f64> = (0..keys)
                .map(|j| (0..d).map(|c| at(q, head, i, c) * at(k, head, j, c)).sum::<f64>() * SM_SCALE as f64)
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = weights.iter().sum();
            for c in 0..d {
                out.push((0..keys).map(|j| weights[j] * at(v, head, j, c)).sum::<f64>() / sum);
            }
            lse.push((max + sum.ln()) * std::f64::consts::LOG2_E);
        }
    }
    (out, lse)
}
