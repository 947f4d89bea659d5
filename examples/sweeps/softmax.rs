//! The fused softmax tutorial's figure: GB/s over the row width N of an M x N f32 matrix
//! (8 bytes an element: read once and written once, the fused kernel's traffic, which
//! every line is measured by, as the seed's figure does), against the tutorial's
//! `naive_softmax` (five unfused kernels, 5MN + 2M elements read and 3MN + 2M written) and
//! the copy ceiling.

use super::baselines::{copy_ceiling, naive_softmax, NaiveSoftmaxBuffers};
use super::{Scope, Sweep, SweepDevice};
use crate::rng::{normal_f32s, Rng};
use crate::tutorials::{softmax_args, softmax_configs, tuned_softmax};
use rutile::autotune::Autotuner;
use rutile::bench::Benchmark;
use rutile::seeds::{self, NaiveSoftmax};
use rutile::{DeviceExt, LaunchConfig, Result};

pub fn sweep() -> Sweep {
    Sweep {
        name: "softmax-performance",
        benchmark,
        lines,
    }
}

/// The seed's M = 4096 rows; fewer where every run is slow.
fn rows(scope: Scope) -> usize {
    match scope {
        Scope::Small => 256,
        Scope::Short | Scope::Full => 4096,
    }
}

/// The seed's widths, N = 256 to 12672 in steps of 128.
fn benchmark(scope: Scope) -> Benchmark<'static> {
    let cols: Vec<usize> = match scope {
        Scope::Small => vec![256, 781, 1024],
        Scope::Short => vec![256, 1024, 3072, 8192, 12672],
        Scope::Full => (2..100).map(|i| 128 * i).collect(),
    };
    let m = rows(scope);
    Benchmark::new("softmax-performance", "N", cols.into_iter().map(|n| n as f64))
        .title(format!("fused softmax, f32, M = {m}"))
        .gbps(move |n| 8.0 * m as f64 * n)
}

/// rutile's kernel at the tutorial's `num_warps` heuristic (and, in the full sweep,
/// autotuned per width over `tutorials::softmax_configs`, not remembered in a file), the
/// naive softmax, and the copy ceiling.
fn lines<'a>(bench: &mut Benchmark<'a>, sd: &'a SweepDevice<'a>, scope: Scope) -> Result<()> {
    let (dev, m) = (sd.dev, rows(scope));
    let widest = bench.x_values().iter().copied().fold(0.0, f64::max) as usize;
    let x = std::rc::Rc::new(dev.upload(&normal_f32s(&mut Rng::new(2), m * widest))?);
    let y = std::rc::Rc::new(dev.zeros::<f32>(m * widest)?);
    let (x1, y1) = (x.clone(), y.clone());
    bench.add_line(sd.line("rutile"), move |n| {
        let n = n as usize;
        let block = seeds::softmax_block(n as u32);
        let kernel = seeds::softmax(block)?;
        let config = LaunchConfig::grid1(m as u32).num_warps(seeds::softmax_num_warps(block));
        let args = softmax_args(&y1, &x1, m, n);
        Ok(sd.timing.stats(dev, &mut || dev.launch(&kernel, &config, &args))?)
    });
    if scope == Scope::Full {
        let (x2, y2) = (x.clone(), y.clone());
        bench.add_line(sd.line("rutile autotuned"), move |n| {
            let n = n as usize;
            let args = softmax_args(&y2, &x2, m, n);
            let tuner = Autotuner::new("softmax", softmax_configs(n))?
                .cache_file(None)
                .repetitions(3, 20);
            let tuned = tuned_softmax(dev, &tuner, m, n, &args)?;
            Ok(sd
                .timing
                .stats(dev, &mut || dev.launch(&tuned.kernel, &tuned.launch, &args))?)
        });
    }
    let scratch = NaiveSoftmaxBuffers::new(dev, m, widest)?;
    bench.add_line(sd.line("naive softmax"), move |n| {
        let n = n as usize;
        let kernels = NaiveSoftmax::new(n as u32)?;
        Ok(sd
            .timing
            .stats(dev, &mut || naive_softmax(dev, &kernels, &scratch, &y, &x, (m, n)))?)
    });
    let bytes = move |n: f64| 8.0 * m as f64 * n;
    bench.add_line(sd.line("copy ceiling"), copy_ceiling(sd, bytes, bytes(widest as f64))?);
    Ok(())
}
