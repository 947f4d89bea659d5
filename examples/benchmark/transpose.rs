//! The benchmark's transpose section: the tiled transpose of an `M x M` f32 matrix as a
//! `perf_report` over M, one line per tile and `num_warps`, beside the copy kernel.

use super::{append_csv_as, wrong_results, PerX, Run};
use rutile::bench::Benchmark;
use rutile::{seeds, Device, DeviceExt, LaunchConfig, ScalarType};
use rutile_examples::bench::{copy_kernel, do_bench, CacheFlush, COPY_BLOCK};
use rutile_examples::check::{first_difference, transpose_reference};
use rutile_examples::rng::Rng;
use std::cell::RefCell;

/// A matrix, its transpose computed on the CPU, and the device buffers of one size.
struct Inputs {
    want: Vec<f32>,
    poison: Vec<f32>,
    x: rutile::Buffer<f32>,
    out: rutile::Buffer<f32>,
}

/// The tiled transpose of an `m x m` f32 matrix for m = 1024..8192 in powers of two (1024
/// only with `--quick`), in 64 x 64 and 32 x 32 tiles at 4 and 8 warps, next to one launch
/// of the copy kernel moving the same bytes (8 per element) through this backend. Each
/// configuration's result, on an output poisoned with NaN, is checked against the CPU's
/// transpose before it is timed; a wrong one is a gap, and fails the benchmark once the
/// table is printed.
pub fn transpose(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, quick, ceiling) = (dev.id(), run.quick, run.ceiling);
    let reps = run.reps();
    let sides: Vec<f64> = if quick {
        vec![1024.0]
    } else {
        vec![1024.0, 2048.0, 4096.0, 8192.0]
    };
    let rng = RefCell::new(rng);
    let inputs = PerX::new();
    let inputs_at = |m: usize| {
        inputs.get(m as f64, || {
            let host = rng.borrow_mut().f32s(m * m, 0.5, 1.5);
            let want = transpose_reference(&host, m, m);
            let poison = vec![f32::NAN; m * m];
            Ok(Inputs {
                x: dev.upload(&host)?,
                out: dev.upload(&poison)?,
                want,
                poison,
            })
        })
    };
    let wrong = RefCell::new(Vec::new());
    let copy = copy_kernel(0)?;
    let mut bench = Benchmark::new("transpose", "M", sides)
        .title(format!("transpose f32, M x M, on {id} (ceiling {ceiling:.0} GB/s)"))
        .gbps(|m| 8.0 * m * m)
        .line("copy kernel", |m| {
            let m = m as usize;
            let t = inputs_at(m)?;
            let config = LaunchConfig::grid1(((m * m) as u32).div_ceil(COPY_BLOCK));
            let args = [(&t.x).into(), (&t.out).into(), ((m * m) as i32).into()];
            Ok(do_bench(dev, flush, 3, reps, &mut || {
                dev.launch(&copy, &config, &args)
            })?)
        });
    for (bm, bn) in [(64u32, 64u32), (32, 32)] {
        let kernel = seeds::transpose(ScalarType::F32, bm, bn)?;
        for w in [4u32, 8] {
            let (kernel, inputs_at, wrong) = (kernel.clone(), &inputs_at, &wrong);
            bench.add_line(format!("{bm}x{bn} w{w}"), move |m| {
                let m = m as usize;
                let t = inputs_at(m)?;
                let mi = m as i32;
                let args = [
                    (&t.x).into(),
                    (&t.out).into(),
                    mi.into(),
                    mi.into(),
                    mi.into(),
                    mi.into(),
                ];
                let config = LaunchConfig::new(seeds::transpose_grid(m as u32, m as u32, bm, bn)).num_warps(w);
                dev.upload_into(&t.out, &t.poison)?;
                dev.launch(&kernel, &config, &args)?;
                let got = dev.download(&t.out)?;
                if let Some((r, c)) = first_difference(&got, &t.want, m) {
                    let message = format!(
                        "transpose {m}x{m} in {bm}x{bn} tiles at num_warps {w} is wrong: out[{r}, {c}] = {} \
                         where x[{c}, {r}] = {}",
                        got[r * m + c],
                        t.want[r * m + c]
                    );
                    wrong.borrow_mut().push(message.clone());
                    return Err(message.into());
                }
                Ok(do_bench(dev, flush, 3, reps, &mut || {
                    dev.launch(&kernel, &config, &args)
                })?)
            });
        }
    }
    let report = bench.run();
    println!();
    report.print();
    append_csv_as(csv, &id, &report, Some(ceiling), |line, m| {
        let kernel = match line {
            "copy kernel" => "copy_kernel".to_string(),
            tiles => format!("transpose_{}", tiles.replace(' ', "_")),
        };
        Some((kernel, format!("{m}x{m}")))
    });
    wrong_results(wrong.into_inner())
}
