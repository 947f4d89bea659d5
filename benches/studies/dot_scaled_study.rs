//! `dot_scaled` in a matmul's K loop, as microscaled weights are used on GPUs without
//! block-scaled MMAs: `C = A @ B` at M = N = K (4096 unless `STUDY_N` says otherwise), f16
//! out, B stored K-contiguous (`[N, K]`, as weights are), for bf16 activations by mxfp4
//! weights (B in E2M1, two values a byte, with E8M0 scales every 32 along K) and mxfp8 by
//! mxfp8 (both E4M3 with scales). Each kernel is autotuned over a few tiles, checked on its
//! first rows against the product of the scaled values in f64, then timed beside cuBLAS's
//! f16 matmul. `python3 benches/triton_baseline.py --only dot_scaled` times Triton's
//! `tl.dot_scaled` in the same kernel.
//!
//!     cargo run --release -p rutile-benches --example dot_scaled_study

use half::{bf16, f16};
use rutile::autotune::{Autotuner, Config};
use rutile::{Device, DeviceExt, Kernel, Microscaled, MxFormat, ScalarType};
use rutile_examples::bench::{do_bench, study_setting, CacheFlush, StudyGpu};
use rutile_examples::rng::Rng;

/// The two operands' formats of a run.
#[derive(Clone, Copy)]
struct Formats {
    lhs: MxFormat,
    rhs: MxFormat,
}

impl Formats {
    fn name(self) -> String {
        let name = |f: MxFormat| match f {
            MxFormat::E2M1 => "mxfp4",
            MxFormat::E4M3 => "mxfp8",
            _ => "bf16",
        };
        format!("{} x {}", name(self.lhs), name(self.rhs))
    }
}

/// Stored elements of `format` along `k` values.
fn stored(format: MxFormat, k: i32) -> i32 {
    if format == MxFormat::E2M1 {
        k / 2
    } else {
        k
    }
}

/// The scaled matmul: `a_ptr` (`[M, K]` row-major, bf16 or bytes), `b_ptr` (`[N, K]`
/// stored values, K-contiguous), `sa_ptr` `[M, K / 32]`, `sb_ptr` `[N, K / 32]`, `c_ptr`
/// (`[M, N]` f16), `M, N, K`; sizes multiples of the blocks; the tutorial's grouped
/// program order.
fn scaled_matmul(f: Formats, c: &Config) -> rutile::Result<Kernel> {
    let block = |name| c.value(name).map(|v| v as i32);
    let (bm, bn, bk) = (block("BLOCK_M")?, block("BLOCK_N")?, block("BLOCK_K")?);
    let group_m = 8;
    let lhs_type = if f.lhs == MxFormat::Bf16 {
        ScalarType::BF16
    } else {
        ScalarType::U8
    };
    Ok(Kernel::build("scaled_matmul", |k| {
        let (pa, pb) = (k.arg_ptr("a_ptr", lhs_type), k.arg_ptr("b_ptr", ScalarType::U8));
        let (psa, psb) = (k.arg_ptr("sa_ptr", ScalarType::U8), k.arg_ptr("sb_ptr", ScalarType::U8));
        let pc = k.arg_ptr("c_ptr", ScalarType::F16);
        let (m, n, kk) = (k.arg_i32("M"), k.arg_i32("N"), k.arg_i32("K"));
        let pid = k.program_id(0);
        let (num_m, num_n) = (k.cdiv(m, bm), k.cdiv(n, bn));
        let in_group = num_n * group_m;
        let first_m = pid / in_group * group_m;
        let size_m = (num_m - first_m).minimum(group_m);
        let pid_m = first_m + (pid % in_group) % size_m;
        let pid_n = (pid % in_group) / size_m;
        let (rm, rn) = (pid_m * bm + k.arange(0, bm), pid_n * bn + k.arange(0, bn));
        let (ka, kb, g) = (
            k.arange(0, stored(f.lhs, bk)),
            k.arange(0, stored(f.rhs, bk)),
            k.arange(0, bk / 32),
        );
        // Row strides of A, of B's columns (K-contiguous) and of the scales.
        let halve = |format: MxFormat| if format == MxFormat::E2M1 { kk / 2 } else { kk };
        let (a_row, b_col, s_row) = (halve(f.lhs), halve(f.rhs), kk / 32);
        let acc = k.zeros(&[bm as u32, bn as u32], ScalarType::F32);
        let out = k.for_range(0, kk / bk, 1, &[acc], |step, carried| {
            let a = k.load(pa + (rm.expand_dims(1) * a_row + (step * stored(f.lhs, bk) + ka).expand_dims(0)));
            let b = k.load(pb + ((step * stored(f.rhs, bk) + kb).expand_dims(1) + rn.expand_dims(0) * b_col));
            let sb = k.load(psb + (rn.expand_dims(1) * s_row + (step * (bk / 32) + g).expand_dims(0)));
            let sa = (f.lhs != MxFormat::Bf16)
                .then(|| k.load(psa + (rm.expand_dims(1) * s_row + (step * (bk / 32) + g).expand_dims(0))));
            vec![k.dot_scaled(
                Microscaled::new(a, sa, f.lhs),
                Microscaled::new(b, Some(sb), f.rhs),
                Some(carried[0]),
            )]
        });
        k.store(
            pc + (rm.expand_dims(1) * n + rn.expand_dims(0)),
            out[0].to(ScalarType::F16),
        );
    })?)
}

/// An fp4 E2M1 nibble's value.
fn fp4(nibble: u8) -> f64 {
    let (e, m) = ((nibble >> 1) & 3, (nibble & 1) as f64);
    let magnitude = if e == 0 {
        0.5 * m
    } else {
        2f64.powi(e as i32 - 1) * (1.0 + 0.5 * m)
    };
    if nibble & 8 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Random stored bytes of `format` for `values` values (fp4: any byte; E4M3: values in
/// [-1, 1]), and the values.
fn random_bytes(rng: &mut Rng, format: MxFormat, values: usize) -> (Vec<u8>, Vec<f64>) {
    let (mut bytes, mut vals) = (Vec::new(), Vec::with_capacity(values));
    while vals.len() < values {
        let b = (rng.next_u64() & 0xff) as u8;
        match format {
            MxFormat::E2M1 => {
                bytes.push(b);
                vals.extend([fp4(b & 15), fp4(b >> 4)]);
            }
            _ => {
                // E4M3 of values in [-1, 1] (the f16 output holds the sums).
                let v = rutile::F8E4M3::from_f64(rng.unit() * 2.0 - 1.0);
                bytes.push(v.to_bits());
                vals.push(v.to_f64());
            }
        }
    }
    (bytes, vals)
}

/// The formats' run on `dev`, autotuned, checked on its first `rows` rows, timed: TFLOPS and
/// the configuration.
fn run(dev: &dyn Device, flush: &CacheFlush, f: Formats, n: usize, rows: usize) -> rutile::Result<(f64, String)> {
    let mut rng = Rng::new(7);
    let k = n;
    let scales =
        |rng: &mut Rng, count: usize| -> Vec<u8> { (0..count).map(|_| 122 + (rng.next_u64() % 11) as u8).collect() };
    let (sa, sb) = (scales(&mut rng, n * k / 32), scales(&mut rng, n * k / 32));
    let factor = |s: u8| 2f64.powi(s as i32 - 127);
    // A: bf16 values, or E4M3 bytes; B: `[N, K]` values (K-contiguous).
    let (a_bf16, a_bytes, a_vals) = if f.lhs == MxFormat::Bf16 {
        let vals: Vec<bf16> = rng.f32s(n * k, -1.0, 1.0).into_iter().map(bf16::from_f32).collect();
        let a: Vec<f64> = vals.iter().map(|v| v.to_f64()).collect();
        (Some(dev.upload(&vals)?), None, a)
    } else {
        let (bytes, vals) = random_bytes(&mut rng, f.lhs, n * k);
        let scaled = vals
            .iter()
            .enumerate()
            .map(|(i, v)| v * factor(sa[(i / k) * (k / 32) + (i % k) / 32]))
            .collect();
        (None, Some(dev.upload(&bytes)?), scaled)
    };
    let a_arg: rutile::Arg<'_> = match (&a_bf16, &a_bytes) {
        (Some(a), _) => a.into(),
        (_, Some(a)) => a.into(),
        _ => unreachable!("one of the two is uploaded"),
    };
    let (b_bytes, b_vals) = random_bytes(&mut rng, f.rhs, n * k);
    let b_vals: Vec<f64> = b_vals
        .iter()
        .enumerate()
        .map(|(i, v)| v * factor(sb[(i / k) * (k / 32) + (i % k) / 32]))
        .collect();
    let b_buf = dev.upload(&b_bytes)?;
    let (sa_buf, sb_buf, c_buf) = (dev.upload(&sa)?, dev.upload(&sb)?, dev.zeros::<f16>(n * n)?);
    let mut args = vec![
        a_arg,
        (&b_buf).into(),
        (&sa_buf).into(),
        (&sb_buf).into(),
        (&c_buf).into(),
    ];
    args.extend([n, n, k].map(|v| rutile::Arg::I32(v as i32)));
    // (The last for Vulkan's 48 KiB of shared memory a workgroup on NVIDIA.)
    let configs = [
        (128, 128, 128, 8, 3),
        (128, 128, 64, 8, 3),
        (128, 256, 64, 8, 3),
        (64, 128, 128, 4, 3),
        (128, 64, 128, 4, 3),
        (64, 64, 64, 4, 2),
    ]
    .map(|(bm, bn, bk, w, s)| {
        Config::new(&[("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk)])
            .num_warps(w)
            .num_stages(s)
    })
    .to_vec();
    let tuner = Autotuner::new(&format!("dot_scaled_study_{}", f.name()), configs)?;
    let build = |c: &Config| scaled_matmul(f, c);
    let grid = |c: &Config| {
        let tiles = |name| c.value(name).map(|b| n.div_ceil(b as usize) as u32);
        Ok([tiles("BLOCK_M")? * tiles("BLOCK_N")?, 1, 1])
    };
    let tuned = tuner.tuned(dev, &format!("{n}"), &build, &grid, &args)?;
    dev.launch(&tuned.kernel, &tuned.launch, &args)?;
    let got = dev.download(&c_buf)?;
    let (mut d, mut w) = (0.0, 0.0);
    for i in 0..rows {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| a_vals[i * k + p] * b_vals[j * k + p]).sum();
            let g = got[i * n + j].to_f64();
            d += (g - want) * (g - want);
            w += want * want;
        }
    }
    let err = (d / w).sqrt();
    if err.is_nan() || err > 2e-3 {
        return Err(rutile::Error::Argument {
            kernel: tuned.kernel.name.clone(),
            message: format!("{}: relative error {err:.2e} against the f64 product", f.name()),
        });
    }
    let s = do_bench(dev, Some(flush), 5, 30, &mut || {
        dev.launch(&tuned.kernel, &tuned.launch, &args)
    })?;
    Ok((
        2.0 * (n as f64).powi(3) / (s.median_ms * 1e-3) / 1e12,
        tuned.choice.config.to_string(),
    ))
}

fn main() -> rutile::Result<()> {
    let n: usize = study_setting("STUDY_N").unwrap_or(4096);
    let devices = rutile_examples::gpus::hardware_gpus();
    if devices.is_empty() {
        println!("no GPU: nothing to time");
        return Ok(());
    }
    println!("C = A @ B at {n}^3 by dot_scaled, f32 accumulation, f16 output; TFLOPS (median of 30)");
    let runs = [
        Formats {
            lhs: MxFormat::Bf16,
            rhs: MxFormat::E2M1,
        },
        Formats {
            lhs: MxFormat::E4M3,
            rhs: MxFormat::E4M3,
        },
    ];
    for dev in &devices {
        let gpu = StudyGpu::open(dev, n)?;
        let (dev, flush) = (gpu.device(), &gpu.flush);
        let mut line = gpu.line();
        for f in runs {
            match run(dev, flush, f, n, 8) {
                Ok((t, config)) => line += &format!(", {} {t:.1} [{config}]", f.name()),
                Err(e) => line += &format!(", {}: {e}", f.name()),
            }
        }
        println!("{line}");
    }
    Ok(())
}
