//! The vector add tutorial's figure: GB/s of `x + y` over the number of f32 elements (12
//! bytes each: two read, one written), against the copy ceiling.

use super::baselines::copy_ceiling;
use super::{Scope, Sweep, SweepDevice};
use crate::rng::Rng;
use rutile::bench::Benchmark;
use rutile::{seeds, DeviceExt, LaunchConfig, Result, ScalarType};

/// The tutorial's block.
const BLOCK: u32 = 1024;

pub fn sweep() -> Sweep {
    Sweep {
        name: "vector-add-performance",
        benchmark,
        lines,
    }
}

/// The seed's sizes, 2^12 to 2^27 elements.
fn benchmark(scope: Scope) -> Benchmark<'static> {
    let powers: Vec<u32> = match scope {
        Scope::Small => vec![12, 14, 16],
        Scope::Short => vec![12, 16, 20, 24, 27],
        Scope::Full => (12..28).collect(),
    };
    Benchmark::new(
        "vector-add-performance",
        "size",
        powers.into_iter().map(|p| (1u64 << p) as f64),
    )
    .title("vector add, f32")
    .log_x(true)
    .gbps(|n| 12.0 * n)
}

fn lines<'a>(bench: &mut Benchmark<'a>, sd: &'a SweepDevice<'a>, _: Scope) -> Result<()> {
    let largest = bench.x_values().iter().copied().fold(0.0, f64::max) as usize;
    let mut rng = Rng::new(1);
    let dev = sd.dev;
    let (x, y) = (
        dev.upload(&rng.f32s(largest, 0.0, 1.0))?,
        dev.upload(&rng.f32s(largest, 0.0, 1.0))?,
    );
    let z = dev.zeros::<f32>(largest)?;
    let kernel = seeds::vector_add(ScalarType::F32, BLOCK)?;
    bench.add_line(sd.line("rutile"), move |n| {
        let n = n as usize;
        let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK));
        let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
        Ok(sd.timing.stats(dev, &mut || dev.launch(&kernel, &config, &args))?)
    });
    bench.add_line(
        sd.line("copy ceiling"),
        copy_ceiling(sd, |n| 12.0 * n, 12.0 * largest as f64)?,
    );
    Ok(())
}
