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

mod forms;
pub use forms::*;

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

    /// Tensors for `p` whose heads all repeat one head of random inputs (`seed`), returned
    /// beside them for [`tiled_error`]: the large problems of the benchmark and the studies,
    /// whose values do not change the time, with a reference computed for one head only.
    pub fn tiled(dev: &dyn Device, p: &Problem, seed: u64) -> Result<(Tensors, [Vec<f16>; 3])> {
        let tile = inputs(&Problem { z: 1, h: 1, ..*p }, seed);
        let tiled = |t: &[f16]| -> Vec<f16> { t.iter().cycle().take(p.len()).copied().collect() };
        let t = Tensors::new(dev, p, &tiled(&tile[0]), &tiled(&tile[1]), &tiled(&tile[2]))?;
        Ok((t, tile))
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

/// The kernel's meta-parameters for configuration `c` on problem `p`: specialized to a
/// length that is a multiple of the key blocks where it is one (no ragged walk, see
/// [`AttentionMeta::whole_key_blocks`]), as Triton specializes on divisibility; programs
/// longest first go by groups of heads whose keys and values fill `l2_bytes`
/// ([`group_heads`]).
fn meta(c: &Config, p: &Problem, l2_bytes: Option<u64>) -> Result<AttentionMeta> {
    let block_n = c.value("BLOCK_N")? as u32;
    let longest_first = c.value("LONGEST_FIRST").is_ok_and(|l| l != 0);
    Ok(AttentionMeta {
        split_diagonal: c.value("SPLIT")? != 0,
        rotate: c.value("ROTATE").is_ok_and(|r| r != 0),
        last_values_ahead: c.value("AHEAD").is_ok_and(|r| r != 0),
        whole_key_blocks: p.n_ctx.is_multiple_of(block_n as usize),
        longest_first,
        group_heads: if longest_first { group_heads(p, l2_bytes) } else { 0 },
        ..AttentionMeta::fp16(c.value("BLOCK_M")? as u32, block_n, p.head_dim as u32, p.causal)
    })
}

/// How many heads' programs run together when they start longest first
/// ([`AttentionMeta::group_heads`]): as many as have keys and values in an L2 cache of
/// `l2_bytes` (the queries and outputs stream through once), at least one, the heads then
/// dealt into groups of equal size (so that the last group is not a small remainder whose
/// long walks start late); 0 (every head together) where they all fit or the cache's size
/// is not known.
pub fn group_heads(p: &Problem, l2_bytes: Option<u64>) -> u32 {
    let heads = (p.z * p.h) as u64;
    let per_head = (2 * p.n_ctx * p.head_dim * std::mem::size_of::<f16>()) as u64;
    match l2_bytes {
        Some(l2) if l2 / per_head.max(1) < heads => {
            let groups = heads.div_ceil((l2 / per_head.max(1)).max(1));
            heads.div_ceil(groups) as u32
        }
        _ => 0,
    }
}

/// The forward kernel for `p`, autotuned by `tuner` with the problem as the key.
pub fn tuned_attention(dev: &dyn Device, tuner: &Autotuner, p: &Problem, args: &[Arg<'_>]) -> Result<Tuned> {
    let l2 = dev.properties().l2_cache_bytes;
    let build = |c: &Config| Ok(seeds::attention_forward(&meta(c, p, l2)?)?);
    let grid = |c: &Config| Ok(meta(c, p, l2)?.grid(p.z as u32, p.h as u32, p.n_ctx as u32));
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
    let rows = sampled_rows(p.n_ctx);
    let (want_out, want_m) = reference_rows(&q, &k, &v, &p, &rows);
    let (per_out, per_m) = (rows.len() * p.head_dim, rows.len());
    let error = heads_error(dev, &t, &p, 0..p.z * p.h, &rows, |head| {
        let (o, m) = (head * per_out, head * per_m);
        (&want_out[o..o + per_out], &want_m[m..m + per_m])
    })?;
    let tflops = p.flops() / (time_ms * 1e-3) / 1e12;
    // Below 1, three significant digits: a software device's rate is thousandths of one.
    let tflops = if tflops >= 1.0 || tflops == 0.0 {
        format!("{tflops:.1}")
    } else {
        format!("{tflops:.*}", (2 - tflops.log10().floor() as i32).clamp(1, 9) as usize)
    };
    Ok(Outcome {
        tutorial: "attention forward".into(),
        size: p.to_string(),
        device: dev.id(),
        error,
        tolerance: 4e-3,
        time_ms,
        detail: Some(format!(
            "{tflops} TFLOPS; autotuned{}: {}",
            if choice.from_file { " (cached)" } else { "" },
            choice.config
        )),
    })
}

/// The error of `t`'s output and `M` on a problem whose heads all repeat one head's inputs
/// (`tile`, as [`Tensors::tiled`] builds them), on the queries [`attention`]
/// samples (every one up to 512 positions; beyond, every 61st and the last 17) of the
/// first and the last head against [`reference_rows`]; bounded by 4e-3 where the kernel is
/// right. Heads that are all alike cannot show a kernel reading another head's inputs:
/// [`attention`], with inputs of their own for each head, does.
pub fn tiled_error(dev: &dyn Device, t: &Tensors, p: &Problem, tile: &[Vec<f16>; 3]) -> Result<f64> {
    let rows = sampled_rows(p.n_ctx);
    let one = Problem { z: 1, h: 1, ..*p };
    let (want_out, want_m) = reference_rows(&tile[0], &tile[1], &tile[2], &one, &rows);
    heads_error(dev, t, p, [0, p.z * p.h - 1], &rows, |_| (&want_out[..], &want_m[..]))
}

/// The queries the checks compare: every one up to 512 positions; beyond, every 61st and
/// the last 17.
fn sampled_rows(n_ctx: usize) -> Vec<usize> {
    if n_ctx <= 512 {
        (0..n_ctx).collect()
    } else {
        (0..n_ctx).step_by(61).chain(n_ctx - 17..n_ctx).collect()
    }
}

/// The largest error of `t`'s output and `M` at the queries `rows` of each of `heads`
/// against what `want` gives for that head (its rows' outputs, `head_dim` each, and their
/// `M`). Outputs are averages of values of magnitude about 1: absolute errors. P is
/// rounded to fp16 before P V, as in the tutorial, and so is the output.
fn heads_error<'w>(
    dev: &dyn Device,
    t: &Tensors,
    p: &Problem,
    heads: impl IntoIterator<Item = usize>,
    rows: &[usize],
    want: impl Fn(usize) -> (&'w [f64], &'w [f64]),
) -> Result<f64> {
    let (out, m) = (dev.download(&t.out)?, dev.download(&t.m)?);
    let d = p.head_dim;
    let mut error = 0.0f64;
    for head in heads {
        let (want_out, want_m) = want(head);
        let got_out = rows
            .iter()
            .flat_map(|&i| (0..d).map(move |c| (head * p.n_ctx + i) * d + c))
            .map(|at| out[at].to_f64());
        let got_m = rows.iter().map(|&i| m[head * p.n_ctx + i] as f64);
        error = error
            .max(max_relative_error(got_out, want_out, 1.0).0)
            .max(max_relative_error(got_m, want_m, 1.0).0);
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
