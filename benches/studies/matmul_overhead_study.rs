//! What a matmul tile costs besides its K loop: the seed's matmul on Hopper at 128x256x64
//! (8 warps) in each schedule, and cuBLAS, timed at M = N = 4096 for K = 256..4096. A
//! program's time is `waves x (overhead + steps x step)`, `steps = K / 64`, so a line
//! through the points gives each schedule's time per K step and its fixed cost per tile
//! (filling the ring, the epilogue, starting the program). docs/performance.md ("What a
//! tile costs besides its K loop") reports a run on the H100.
//!
//!     cargo run --release -p rutile-benches --example matmul_overhead_study
//!
//! `STUDY_REPS=N` sets the timed runs per point (40 by default); `STUDY_PROFILE=1` instead
//! launches each schedule and cuBLAS twice at 4096³ and nothing else, for a profiler.
//! `STUDY_SQUARE=S` instead times each schedule and cuBLAS at S³ in five rounds, each
//! starting one line further on, and prints the median of the rounds: whether the
//! schedules differ there by more than the rounds spread.

use half::f16;
use rutile::bench::{do_bench, CacheFlush, FlushMode};
use rutile::cublas::Cublas;
use rutile::{seeds, CudaGpu, Device, DeviceExt, LaunchConfig};
use rutile_benches::fit_line;
use rutile_examples::rng::Rng;

const M: usize = 4096;
const N: usize = 4096;
const KS: [usize; 5] = [256, 512, 1024, 2048, 4096];
const BLOCK: (u32, u32, u32) = (128, 256, 64);

/// A schedule of the warpgroup matmul: name, stages, persistent, warp-specialized.
const SCHEDULES: [(&str, u32, bool, bool); 5] = [
    ("plain, 4 stages", 4, false, false),
    ("persistent, 4 stages", 4, true, false),
    ("warp-specialized, 4 stages", 4, false, true),
    ("persistent + warp-specialized, 3 stages", 3, true, true),
    ("plain, 3 stages", 3, false, false),
];

/// The schedules and cuBLAS at `s`³, in interleaved rounds (module comment).
fn square(dev: &dyn Device, cublas: &Cublas, flush: &CacheFlush, s: usize, reps: usize) -> rutile::Result<()> {
    const ROUNDS: usize = 5;
    let mut rng = Rng::new(11);
    let mut operand = || -> rutile::Result<_> {
        let v: Vec<f16> = rng.f32s(s * s, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        dev.upload(&v)
    };
    let (a, b) = (operand()?, operand()?);
    let c = dev.zeros::<f16>(s * s)?;
    let meta = seeds::MatmulMeta::fp16(BLOCK.0, BLOCK.1, BLOCK.2);
    let kernel = seeds::matmul(&meta)?;
    let tiles = seeds::matmul_grid(&meta, s as u32, s as u32);
    let mut args = vec![(&a).into(), (&b).into(), (&c).into()];
    args.extend(seeds::matmul_row_major_args(s, s, s).map(rutile::Arg::I32));
    let lines = SCHEDULES.len() + 1;
    let mut times = vec![Vec::new(); lines];
    for round in 0..ROUNDS {
        for i in (0..lines).map(|j| (j + round) % lines) {
            let t = match SCHEDULES.get(i) {
                Some(&(_, stages, persistent, ws)) => {
                    let config = LaunchConfig::grid1(tiles)
                        .num_warps(8)
                        .num_stages(stages)
                        .persistent(persistent)
                        .warp_specialize(ws);
                    do_bench(dev, Some(flush), 3, reps, &mut || dev.launch(&kernel, &config, &args))?
                }
                None => do_bench(dev, Some(flush), 3, reps, &mut || cublas.matmul(&a, &b, &c, (s, s, s)))?,
            };
            times[i].push(t.median_ms);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let tflops = |ms: f64| 2.0 * (s as f64).powi(3) / ms / 1e9;
    let cublas_ms = median(&mut times[lines - 1].clone());
    println!("{s}³, median of {ROUNDS} interleaved rounds (their range):");
    for (i, t) in times.iter_mut().enumerate() {
        let name = SCHEDULES.get(i).map_or("cuBLAS", |s| s.0);
        let m = median(t);
        println!(
            "{name:42} {:7.1} TFLOPS ({:.1}..{:.1})  {:5.1}% of cuBLAS",
            tflops(m),
            tflops(t[t.len() - 1]),
            tflops(t[0]),
            100.0 * cublas_ms / m
        );
    }
    Ok(())
}

fn main() -> rutile::Result<()> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(40);
    let profile = std::env::var("STUDY_PROFILE").is_ok_and(|v| v == "1");
    let gpu = CudaGpu::open(0)?;
    let cublas = Cublas::new(&gpu)?;
    let dev: &dyn Device = &gpu;
    println!("device: {}", dev.properties().name);
    let sms = dev.properties().multiprocessors.unwrap_or(132) as f64;
    let flush = CacheFlush::new(dev, FlushMode::Copy)?;
    if let Some(s) = rutile_examples::bench::study_setting("STUDY_SQUARE") {
        return square(dev, &cublas, &flush, s, reps);
    }
    let mut rng = Rng::new(7);
    let kmax = *KS.last().unwrap();
    let ks: &[usize] = if profile { &[kmax] } else { &KS };
    // One A per K (M x K, row-major); B's first K rows are the K x N operand at each K.
    let a_of: Vec<_> = ks
        .iter()
        .map(|&k| {
            let a: Vec<f16> = rng.f32s(M * k, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
            dev.upload(&a)
        })
        .collect::<rutile::Result<_>>()?;
    let b: Vec<f16> = rng.f32s(kmax * N, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let bb = dev.upload(&b)?;
    let (c, c_ref) = (dev.zeros::<f16>(M * N)?, dev.zeros::<f16>(M * N)?);
    let meta = seeds::MatmulMeta::fp16(BLOCK.0, BLOCK.1, BLOCK.2);
    let kernel = seeds::matmul(&meta)?;
    let tiles = seeds::matmul_grid(&meta, M as u32, N as u32);
    let waves = (tiles as f64 / sms).ceil();
    let args_for = |i: usize| {
        let mut args = vec![(&a_of[i]).into(), (&bb).into(), (&c).into()];
        args.extend(seeds::matmul_row_major_args(M, N, ks[i]).map(rutile::Arg::I32));
        args
    };
    let mut fits = Vec::new();
    for (name, stages, persistent, ws) in SCHEDULES {
        let config = LaunchConfig::grid1(tiles)
            .num_warps(8)
            .num_stages(stages)
            .persistent(persistent)
            .warp_specialize(ws);
        let mut points = Vec::new();
        for (i, &k) in ks.iter().enumerate() {
            let args = args_for(i);
            if profile {
                for _ in 0..2 {
                    dev.launch(&kernel, &config, &args)?;
                }
                continue;
            }
            let s = do_bench(dev, Some(&flush), 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
            // The product at this K, checked against cuBLAS's (the same sums in the same order
            // on warpgroup MMAs: equal but for the last bit).
            cublas.matmul(&a_of[i], &bb, &c_ref, (M, N, k))?;
            let (got, want) = (dev.download(&c)?, dev.download(&c_ref)?);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g.to_f32() - w.to_f32()).abs() / w.to_f32().abs().max(1.0))
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-2, "{name} at K = {k}: differs from cuBLAS by {worst}");
            let tflops = 2.0 * (M * N * k) as f64 / s.median_ms / 1e9;
            println!("{name:42} K = {k:5}: {:.4} ms ({tflops:.1} TFLOPS)", s.median_ms);
            points.push(((k / 64) as f64, s.median_ms * 1e3 / waves));
        }
        if !profile {
            fits.push((name, fit_line(&points)));
        }
    }
    let mut points = Vec::new();
    for (i, &k) in ks.iter().enumerate() {
        if profile {
            for _ in 0..2 {
                cublas.matmul(&a_of[i], &bb, &c_ref, (M, N, k))?;
            }
            continue;
        }
        let s = do_bench(dev, Some(&flush), 3, reps, &mut || {
            cublas.matmul(&a_of[i], &bb, &c_ref, (M, N, k))
        })?;
        let tflops = 2.0 * (M * N * k) as f64 / s.median_ms / 1e9;
        println!("{:42} K = {k:5}: {:.4} ms ({tflops:.1} TFLOPS)", "cuBLAS", s.median_ms);
        points.push(((k / 64) as f64, s.median_ms * 1e3 / waves));
    }
    if profile {
        dev.download(&c_ref)?;
        return Ok(());
    }
    fits.push(("cuBLAS (on rutile's waves)", fit_line(&points)));
    println!("\n{tiles} tiles of 128x256 on {sms} multiprocessors: {waves} waves");
    println!("{:42} {:>14} {:>16}", "schedule", "µs per K step", "µs per tile");
    for (name, (overhead, step)) in fits {
        println!("{name:42} {step:14.3} {overhead:16.2}");
    }
    Ok(())
}
