//! What bounds the long-row softmax's clusters walking rows (`seeds::softmax_cluster_rows`,
//! the host code's pick through CUDA from 65536 f32 columns)? Times, at the host code's
//! shape (shares of 32768 columns on 16 warps, 2 stages), against the copy ceiling of the
//! same run:
//!
//! - `host`: the host code's launch, checked against a CPU softmax;
//! - `no exchange`: the same walk with each program normalizing its share by its own
//!   maximum and sum (the cluster's exchange left out: wrong results, not checked), what
//!   any cheaper exchange could at most give;
//! - `exp form`: the host code's kernel as it was before its exponentials became `exp2`s,
//!   each written as `exp(x - max)` (rutile's `exp` takes ten instructions through CUDA to
//!   correct the rounding of `x·log2 e`) where the seed writes `exp2((x - max)·log2 e)` (a
//!   multiply and one `ex2.approx.ftz`), checked;
//! - `exp, no exchange`: both;
//! - `copy walk`: the same walk storing what it loaded (checked: the output is the input),
//!   the walk's loads and stores alone.
//!
//!     cargo run --release -p rutile-benches --example cluster_walk_study -- [N...]
//!
//! Medians of 20 device-timed launches, the L2 emptied by a 256 MiB copy before each; M =
//! 2^28 / N rows, as the benchmark's long-row softmax.

use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode};
use rutile::ir::ScalarType::F32;
use rutile::{Device, DeviceExt, Kernel, LaunchConfig};
use rutile_examples::bench::CopyTimes;
use rutile_examples::check::{max_relative_error, softmax_reference};
use rutile_examples::rng::{normal_f32s, Rng};
use rutile_examples::tutorials::{long_rows, softmax_args};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut widths: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    if widths.is_empty() {
        widths = vec![65536, 131_072, 262_144];
    }
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter_map(|l| l.device.ok())
        .filter(|d| d.properties().async_copies() && d.properties().max_cluster() >= 2)
        .collect();
    if devices.is_empty() {
        return Err("no GPU with clusters and asynchronous copies found".into());
    }
    for dev in &devices {
        study(dev.as_ref(), &widths)?;
    }
    Ok(())
}

/// Which walk a study kernel is.
#[derive(Clone, Copy, PartialEq)]
enum Walk {
    NoExchange,
    Exp,
    ExpNoExchange,
    Copy,
}

const LOG2E: f32 = std::f32::consts::LOG2_E;

/// The clusters' walk over rows as `seeds::softmax_cluster_rows` writes it (same
/// parameters, shares and pipelined loop), with `walk`'s body.
fn walk_kernel(block: u32, cluster: u32, num_stages: u32, walk: Walk) -> Result<Kernel, rutile::ir::BuildError> {
    let name = match walk {
        Walk::NoExchange => "cluster_walk_no_exchange",
        Walk::Exp => "cluster_walk_exp",
        Walk::ExpNoExchange => "cluster_walk_exp_no_exchange",
        Walk::Copy => "cluster_walk_copy",
    };
    Kernel::build(name, |k| {
        let out = k.arg_ptr("output_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let in_stride = k.arg_i32("input_row_stride");
        let out_stride = k.arg_i32("output_row_stride");
        let n_rows = k.arg_i32("n_rows");
        let n_cols = k.arg_i32("n_cols");
        let pid = k.program_id(0);
        let c = cluster as i32;
        let cols = (pid % c) * block as i32 + k.arange(0, block as i32);
        let mask = cols.lt(n_cols);
        k.for_range_staged(pid / c, n_rows, k.num_programs(0) / c, num_stages, &[], |row, _| {
            let x = k.load_masked_with(
                inp + row * in_stride + cols,
                mask,
                f32::NEG_INFINITY,
                Default::default(),
            );
            let local_max = x.max(0).maximum(k.scalar(f32::MIN, F32));
            let num = match walk {
                Walk::Exp | Walk::ExpNoExchange => (x - local_max).exp(),
                _ => ((x - local_max) * LOG2E).exp2(),
            };
            let y = match walk {
                Walk::Copy => x,
                Walk::NoExchange | Walk::ExpNoExchange => num.fdiv(num.sum(0), false),
                Walk::Exp => {
                    // As `seeds::softmax_cluster_rows`.
                    let stats = k.cluster_reduce_n(&[local_max, num.sum(0)], |_, a, b| {
                        let m = a[0].maximum(b[0]);
                        vec![m, a[1] * (a[0] - m).exp() + b[1] * (b[0] - m).exp()]
                    });
                    num * (local_max - stats[0]).exp().fdiv(stats[1], false)
                }
            };
            k.store_masked(out + row * out_stride + cols, y, mask);
            vec![]
        });
    })
}

fn study(dev: &dyn Device, widths: &[usize]) -> rutile::Result<()> {
    let ceiling = CopyTimes::measure(dev, 1 << 28, 20)?.ceiling_gbps();
    println!("\n{} ({}): ceiling {ceiling:.0} GB/s", dev.id(), dev.properties().name);
    let flush = CacheFlush::new(dev, FlushMode::Copy)?;
    let max_cluster = dev.properties().max_cluster();
    for &n in widths {
        let m = (1usize << 28) / n;
        let Some(shape) = long_rows::cluster_walk_for(n, max_cluster) else {
            println!("{m}x{n}: no cluster walk on this device");
            continue;
        };
        let x = normal_f32s(&mut Rng::new(n as u64), m * n);
        let (xb, yb) = (dev.upload(&x)?, dev.zeros::<f32>(m * n)?);
        let args = softmax_args(&yb, &xb, m, n);
        let stages = long_rows::CLUSTER_WALK_STAGES;
        let (host, config) = long_rows::softmax_cluster_rows_launch_on(dev, m, n, shape, stages, &args)?;
        let block = (n.div_ceil(shape.cluster as usize)).next_power_of_two() as u32;
        let mut forms: Vec<(&str, Kernel, LaunchConfig, Option<Walk>)> = vec![("host", host, config, None)];
        for (name, walk) in [
            ("no exchange", Walk::NoExchange),
            ("exp form", Walk::Exp),
            ("exp, no exch", Walk::ExpNoExchange),
            ("copy walk", Walk::Copy),
        ] {
            let kernel = walk_kernel(block, shape.cluster, stages, walk)?;
            let config = dev.resident_grid(&kernel, config, &args, m as u32)?;
            forms.push((name, kernel, config, Some(walk)));
        }
        for (name, kernel, config, walk) in forms {
            dev.upload_into(&yb, &vec![f32::NAN; m * n])?;
            dev.launch(&kernel, &config, &args)?;
            let y = dev.download(&yb)?;
            let verdict = match walk {
                Some(Walk::NoExchange | Walk::ExpNoExchange) => "not checked".to_string(),
                Some(Walk::Copy) => ok(y == x),
                None | Some(Walk::Exp) => {
                    let mut error: f64 = 0.0;
                    for r in [0, 1, m / 2, m - 1] {
                        let want = softmax_reference(&x[r * n..(r + 1) * n], 1, n);
                        let got = y[r * n..(r + 1) * n].iter().map(|&v| v as f64);
                        error = error.max(max_relative_error(got, &want, 1e-30).0);
                    }
                    ok(error < 1e-5)
                }
            };
            let s = do_bench(dev, Some(&flush), 3, 20, &mut || dev.launch(&kernel, &config, &args))?;
            let g = gbps(8.0 * (m * n) as f64, s.median_ms);
            println!(
                "{:>12} {:<14} {:>16}  {} clusters of {} on {} warps, {verdict}",
                format!("{m}x{n}"),
                name,
                format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling),
                config.grid[0] / shape.cluster,
                shape.cluster,
                config.num_warps
            );
        }
    }
    Ok(())
}

fn ok(good: bool) -> String {
    if good { "checked" } else { "WRONG" }.to_string()
}
