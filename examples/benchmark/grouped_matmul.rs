//! The grouped GEMM tutorial's benchmark: four fp16 products of N x N x N in one launch
//! of rutile's grouped kernel, beside cuBLAS running the same four one after another (as
//! Triton's tutorial times torch's loop of matmuls), in TFLOPS.

use std::fmt::Write as _;
use std::sync::Arc;

use half::f16;
use rutile::{Device, DeviceExt};
use rutile_examples::bench::{do_bench, CacheFlush, FlushMode};
use rutile_examples::tutorials::grouped_matmul::{self, GroupedMatmul};

use super::matmul::{reason, with_cublas};

/// Problems in a group, as the tutorial's benchmark.
const GROUP: usize = 4;

/// On each device: the group at N = 128..1024 (128 and 256 with `quick`), each result
/// checked against the CPU first; rutile's TFLOPS with the autotuner's configuration, and
/// on a CUDA GPU cuBLAS's and rutile's share of it.
pub fn grouped_matmul(
    devices: &[Arc<dyn Device>],
    quick: bool,
    flush_mode: FlushMode,
    csv: &mut String,
) -> rutile::Result<()> {
    println!(
        "\n== grouped matmul, {GROUP} problems of N x N x N, fp16: TFLOPS; rutile's grouped kernel (one launch), and \
         cuBLAS (one launch a problem)"
    );
    let sizes: &[usize] = if quick { &[128, 256] } else { &[128, 256, 512, 1024] };
    for dev in devices {
        let (dev, cublas) = with_cublas(dev)?;
        let dev = dev.as_ref();
        let cublas = match cublas {
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => {
                println!("{}: cuBLAS: not available ({})", dev.id(), reason(&e));
                None
            }
            None => None,
        };
        let flush = if quick {
            None
        } else {
            Some(CacheFlush::new(dev, flush_mode)?)
        };
        let reps = if quick { 3 } else { 20 };
        println!(
            "{:>9} {:>6} {:>9} {:>9} {:>8}  configuration",
            dev.id(),
            "N",
            "rutile",
            "cuBLAS",
            "of it"
        );
        for (i, &n) in sizes.iter().enumerate() {
            let problems = [(n, n, n); GROUP];
            let group = GroupedMatmul::new(dev, &problems, true, f16::ZERO, 40 + i as u64)?;
            let tuned = grouped_matmul::tuned(dev, &group)?;
            let args = group.args();
            dev.launch(&tuned.kernel, &tuned.launch, &args)?;
            let (error, padding_kept) = group.check(dev, f16::ZERO)?;
            if error > 2e-3 || !padding_kept {
                println!(
                    "{:>9} {n:>6}  wrong results (error {error:.1e}, padding kept {padding_kept}); not timed",
                    ""
                );
                continue;
            }
            let flops = grouped_matmul::flops(&problems);
            let ours = do_bench(dev, flush.as_ref(), 3, reps, &mut || {
                dev.launch(&tuned.kernel, &tuned.launch, &args)
            })?;
            let ours_tflops = flops / (ours.median_ms * 1e-3) / 1e12;
            let theirs = match &cublas {
                Some(cublas) => {
                    // Each problem's matrices on their own (n is a multiple of 8: the
                    // aligned layout holds them whole, one after another).
                    let (a, b) = (group.a.chunks(n * n), group.b.chunks(n * n));
                    let mut operands = Vec::with_capacity(GROUP);
                    for (a, b) in a.zip(b) {
                        operands.push((dev.upload(a)?, dev.upload(b)?, dev.zeros::<f16>(n * n)?));
                    }
                    Some(do_bench(dev, flush.as_ref(), 3, reps, &mut || {
                        for (a, b, c) in &operands {
                            cublas.matmul(a, b, c, (n, n, n))?;
                        }
                        Ok(())
                    })?)
                }
                None => None,
            };
            let theirs_tflops = theirs.map(|s| flops / (s.median_ms * 1e-3) / 1e12);
            for (kernel, stats, tflops) in [
                ("grouped_matmul", Some(ours), Some(ours_tflops)),
                ("grouped_matmul_cublas", theirs, theirs_tflops),
            ] {
                if let (Some(s), Some(t)) = (stats, tflops) {
                    let _ = writeln!(
                        csv,
                        "{},{kernel},{GROUP}x{n}x{n}x{n},{:.5},{:.5},{:.5},{t:.2},,",
                        dev.id(),
                        s.median_ms,
                        s.p20_ms,
                        s.p80_ms
                    );
                }
            }
            let (theirs, share) = match theirs_tflops {
                Some(t) => (format!("{t:.1}"), format!("{:.1}%", 100.0 * ours_tflops / t)),
                None => ("-".into(), "-".into()),
            };
            println!(
                "{:>9} {n:>6} {ours_tflops:>9.1} {theirs:>9} {share:>8}  {} ({} programs)",
                "", tuned.choice.config, tuned.launch.grid[0]
            );
        }
    }
    Ok(())
}
