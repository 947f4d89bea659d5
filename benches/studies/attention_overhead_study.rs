//! What an attention program costs besides its walk: the fused attention forward pass
//! (fp16, non-causal, 128-row programs, one thread block a multiprocessor) in the forms
//! the tutorial's host code picks at 1024 tokens and from 2048, on grids of the same number
//! of programs at 1024 to 8192 tokens (the heads fewer as the length grows). A grid of
//! `P` programs on `S` multiprocessors runs in `P / S` waves of `overhead + steps x step`,
//! `steps = N_CTX / BLOCK_N`, so a line through the time per wave against the steps gives
//! each form's time per key block and its fixed cost per program (Q's load, filling the
//! ring, normalizing and storing O, starting the block). A second line, at 1024 tokens
//! with 1 to 16 waves of programs, gives the cost per wave and what a launch adds once.
//! docs/performance.md ("What an attention program costs besides its walk") reports a run.
//!
//!     cargo run --release -p rutile-benches --example attention_overhead_study
//!
//! `STUDY_REPS=N` sets the timed runs per point (30 by default). Each kernel's output is
//! checked against the CPU reference before it is timed.

use rutile::autotune::{Autotuner, Config};
use rutile::bench::{do_bench, CacheFlush, FlushMode};
use rutile::{CudaGpu, Device, DeviceExt};
use rutile_benches::fit_line;
use rutile_examples::tutorials::attention::{self, Problem, Tensors};
use std::error::Error;

/// The forms timed: name, head dimension and configuration (the host code's picks on an
/// H200: the tutorial's list at 1024 tokens, the ping-pong from 2048 at head dimension 128;
/// the ping-pong of `specialized_attention_configs` at 64).
fn forms() -> Vec<(&'static str, usize, Config)> {
    let meta = |bn: i64, rotate: i64| [("BLOCK_M", 128), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", rotate)];
    let pingpong = |bn| {
        Config::new(&meta(bn, 1))
            .num_warps(8)
            .num_stages(2)
            .warp_specialize(true)
            .tma_outer(true)
    };
    let tutorial = Config::new(&meta(64, 0)[..3])
        .num_warps(8)
        .num_stages(2)
        .maxnreg(Some(128));
    vec![
        ("d128 ping-pong 128x128", 128, pingpong(128)),
        ("d128 tutorial 128x64 (128 registers)", 128, tutorial.clone()),
        ("d64 ping-pong 128x128", 64, pingpong(128)),
        ("d64 tutorial 128x64 (128 registers)", 64, tutorial),
    ]
}

/// The median time in ms of `config` on `p` (inputs tiled from one random head), after
/// checking its output against the CPU reference.
fn time(
    dev: &dyn Device,
    flush: &CacheFlush,
    p: &Problem,
    config: &Config,
    reps: usize,
) -> Result<f64, Box<dyn Error>> {
    let (t, tile) = Tensors::tiled(dev, p, 6)?;
    let args = t.args(p);
    let tuner = Autotuner::new("attention_overhead_study", vec![config.clone()])?;
    let tuned = attention::tuned_attention(dev, &tuner, p, &args)?;
    dev.launch(&tuned.kernel, &tuned.launch, &args)?;
    let error = attention::tiled_error(dev, &t, p, &tile)?;
    if error.is_nan() || error > 4e-3 {
        return Err(format!("{p} on {config}: error {error:.2e} over 4e-3").into());
    }
    Ok(do_bench(dev, Some(flush), 3, reps, &mut || {
        dev.launch(&tuned.kernel, &tuned.launch, &args)
    })?
    .median_ms)
}

fn main() -> Result<(), Box<dyn Error>> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(30);
    let gpu = CudaGpu::open(0)?;
    let dev: &dyn Device = &gpu;
    let sms = dev.properties().multiprocessors.unwrap_or(132) as usize;
    println!("device: {}, {sms} multiprocessors", dev.properties().name);
    let flush = CacheFlush::new(dev, FlushMode::Copy)?;
    // 16 waves of programs at every length: heads x N_CTX / 128 = 16 x multiprocessors.
    let programs = 16 * sms;
    for (name, head_dim, config) in forms() {
        let block_n = config.value("BLOCK_N")? as usize;
        println!("\n{name}: {config}");
        println!(
            "{:>8} {:>6} {:>10} {:>12} {:>8}",
            "N_CTX", "heads", "ms", "us a wave", "TFLOPS"
        );
        let mut per_wave = Vec::new();
        for n_ctx in [1024, 2048, 4096, 8192] {
            let p = Problem {
                z: 1,
                h: programs / (n_ctx / 128),
                n_ctx,
                head_dim,
                causal: false,
            };
            let ms = time(dev, &flush, &p, &config, reps)?;
            let wave_us = 1e3 * ms / 16.0;
            per_wave.push(((n_ctx / block_n) as f64, wave_us));
            let tflops = p.flops() / (ms * 1e-3) / 1e12;
            println!("{n_ctx:>8} {:>6} {ms:>10.4} {wave_us:>12.2} {tflops:>8.1}", p.h);
        }
        let (overhead, step) = fit_line(&per_wave);
        println!("a program: {overhead:.2} us besides its walk, {step:.3} us a key block of {block_n}");
        println!("{:>8} {:>6} {:>10}", "waves", "heads", "ms");
        let mut by_waves = Vec::new();
        for waves in [1, 2, 4, 8, 16] {
            let p = Problem {
                z: 1,
                h: waves * sms / 8,
                n_ctx: 1024,
                head_dim,
                causal: false,
            };
            let ms = time(dev, &flush, &p, &config, reps)?;
            by_waves.push((waves as f64, 1e3 * ms));
            println!("{waves:>8} {:>6} {ms:>10.4}", p.h);
        }
        let (once, wave) = fit_line(&by_waves);
        println!("at 1024 tokens: {wave:.2} us a wave, {once:.2} us once a launch");
    }
    Ok(())
}
