//! One attention configuration, or several, each checked on its own against the CPU
//! reference on one device: how the blocks that compute wrong results through NVIDIA's
//! Vulkan driver on cooperative matrices were told apart (docs/performance.md, "Buffers
//! that share bytes inside a loop"). Each argument is one check,
//!
//!     BLOCK_M,BLOCK_N,SPLIT,ROTATE,num_warps,num_stages,head_dim,n_ctx,causal
//!
//! (`causal` 0 or 1), on 1 x 3 heads:
//!
//!     cargo run --release -p rutile-benches --example attention_config_check -- 64,64,1,1,4,3,64,1024,1
//!
//! `RUTILE_DEVICE` picks the device (`vulkan:0`, `cuda:0`); the lowering's own switches
//! (`RUTILE_COOP_SCALE=0`, `RUTILE_VULKAN_READ_ONLY=0` or `=Q,K` and the others the README
//! lists) apply as to any launch. A check that fails is run again on the same inputs, and
//! its output compared with every query's reference: which heads and 16-row strips are
//! wrong, in which 16-column groups, and whether a second launch gives the same bits. The
//! exit status is 1 when a check fails.

use half::f16;
use rutile::autotune::{Autotuner, Config, Tuned};
use rutile::{Device, DeviceExt};
use rutile_examples::tutorials::attention::{self, Problem, Tensors};
use std::error::Error;

/// A check parsed from its argument.
fn parse(arg: &str) -> Result<(Config, Problem), Box<dyn Error>> {
    let v: Vec<i64> = arg.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let [bm, bn, split, rotate, warps, stages, head_dim, n_ctx, causal] = v[..] else {
        return Err(format!("`{arg}`: expected nine comma-separated integers (see the usage)").into());
    };
    let config = Config::new(&[("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", split), ("ROTATE", rotate)])
        .num_warps(warps as u32)
        .num_stages(stages as u32);
    let p = Problem {
        z: 1,
        h: 3,
        n_ctx: n_ctx as usize,
        head_dim: head_dim as usize,
        causal: causal != 0,
    };
    Ok((config, p))
}

fn main() -> Result<(), Box<dyn Error>> {
    let checks = std::env::args()
        .skip(1)
        .map(|a| parse(&a))
        .collect::<Result<Vec<_>, _>>()?;
    if checks.is_empty() {
        return Err("no configuration given (see the usage at the top of the source)".into());
    }
    let dev = rutile::default_device()?;
    println!("device: {}", dev.id());
    let mut failed = 0;
    for (config, p) in checks {
        match attention::attention_with(dev.as_ref(), p, 7, vec![config.clone()]) {
            Ok(o) => {
                failed += !o.passed() as usize;
                println!(
                    "{} {p}: error {:.2e} ({config})",
                    if o.passed() { "ok  " } else { "WRONG" },
                    o.error
                );
                if !o.passed() {
                    for line in where_wrong(dev.as_ref(), p, &config)? {
                        println!("      {line}");
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!("ERROR {p}: {e} ({config})");
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Where `config`'s output on `p` is wrong: one line per head and 16-row strip whose
/// output or `M` is off its reference by more than the tutorial's tolerance, naming the
/// 16-column groups that are, then whether a second launch gave the same bits.
fn where_wrong(dev: &dyn Device, p: Problem, config: &Config) -> Result<Vec<String>, Box<dyn Error>> {
    const TOLERANCE: f64 = 4e-3;
    let [q, k, v] = attention::inputs(&p, 7);
    let t = Tensors::new(dev, &p, &q, &k, &v)?;
    let args = t.args(&p);
    let tuner = Autotuner::new("attention_config_check", vec![config.clone()])?;
    let Tuned { kernel, launch, .. } = attention::tuned_attention(dev, &tuner, &p, &args)?;
    dev.launch(&kernel, &launch, &args)?;
    let (out, m) = (dev.download(&t.out)?, dev.download(&t.m)?);
    let rows: Vec<usize> = (0..p.n_ctx).collect();
    let (want_out, want_m) = attention::reference_rows(&q, &k, &v, &p, &rows);
    let d = p.head_dim;
    let mut lines = Vec::new();
    for head in 0..p.z * p.h {
        for strip in (0..p.n_ctx).step_by(16) {
            let (mut out_err, mut m_err, mut groups) = (0.0f64, 0.0f64, Vec::new());
            for i in strip..(strip + 16).min(p.n_ctx) {
                let at = head * p.n_ctx + i;
                m_err = m_err.max((m[at] as f64 - want_m[at]).abs());
                for c in 0..d {
                    let e = (out[at * d + c].to_f64() - want_out[at * d + c]).abs();
                    out_err = out_err.max(e);
                    if e > TOLERANCE && !groups.contains(&(c / 16)) {
                        groups.push(c / 16);
                    }
                }
            }
            if out_err > TOLERANCE || m_err > TOLERANCE {
                groups.sort_unstable();
                let cols: Vec<String> = groups.iter().map(|g| format!("{}..{}", g * 16, g * 16 + 16)).collect();
                lines.push(format!(
                    "head {head} rows {strip}..{}: output off by {out_err:.2e} in columns [{}], M off by {m_err:.2e}",
                    (strip + 16).min(p.n_ctx),
                    cols.join(" ")
                ));
            }
        }
    }
    dev.launch(&kernel, &launch, &args)?;
    let again: Vec<f16> = dev.download(&t.out)?;
    let same = again.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits());
    lines.push(format!(
        "a second launch gave {} output",
        if same { "the same" } else { "a different" }
    ));
    Ok(lines)
}
