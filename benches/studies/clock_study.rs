//! What the GPU's clock does to a timing: a copy of 2^26 f32 (512 MB read and written)
//! timed after three seconds idle, at once and after the L2 flush's copies ran back to back
//! for 100 to 1000 ms (`rutile::bench::warm_up`), then by `do_bench` (which warms a Vulkan
//! device up by itself), on every GPU present. Each phase prints GB/s (median) and the
//! first and last runs' times, so a clock that moves during the timing shows. Sampling the
//! SM clock beside it (`nvidia-smi --query-gpu=clocks.sm --format=csv -lms 20`) says
//! which clock each phase ran at.
//!
//!     cargo run --release -p rutile-benches --example clock_study

use std::time::Duration;

use rutile::bench::{do_bench, gbps, warm_up, CacheFlush, FlushMode};
use rutile::{DeviceExt, LaunchConfig, ScalarType};
use rutile_examples::rng::Rng;

/// Elements copied.
const N: usize = 1 << 26;
/// Elements per program.
const BLOCK: u32 = 1024;
/// Timed runs a phase.
const REPS: usize = 30;

/// Times in milliseconds as whole microseconds.
fn micros(times: &[f64]) -> String {
    times
        .iter()
        .map(|ms| format!("{:.0}", ms * 1e3))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> rutile::Result<()> {
    let src = Rng::new(5).f32s(N, -1.0, 1.0);
    for dev in rutile_examples::gpus::open_gpus() {
        let dev = dev.as_ref();
        if dev.properties().device_type == rutile::DeviceType::Cpu {
            continue;
        }
        println!("\n{} ({})", dev.id(), dev.properties().name);
        let flush = CacheFlush::new(dev, FlushMode::Copy)?;
        let (src_b, dst) = (dev.upload(&src)?, dev.zeros::<f32>(N)?);
        let copy = rutile_examples::bench::copy_kernel_of(ScalarType::F32, BLOCK, 0)?;
        let config = LaunchConfig::grid1(N as u32 / BLOCK).num_warps(4);
        let args = [(&src_b).into(), (&dst).into(), rutile::Arg::I32(N as i32)];
        let mut launch = || dev.launch(&copy, &config, &args);
        launch()?;
        if dev.download(&dst)? != src {
            println!("WRONG: the copy differs from its source");
            continue;
        }
        let bytes = 2.0 * N as f64 * 4.0;
        println!("phase | GB/s (median) | first runs (us) | last runs (us)");
        for (label, warm_ms) in [
            ("timed at once", 0),
            ("after 100 ms of flushes", 100),
            ("after 250 ms of flushes", 250),
            ("after 500 ms of flushes", 500),
            ("after 1000 ms of flushes", 1000),
        ] {
            std::thread::sleep(Duration::from_secs(3));
            warm_up(dev, &mut || flush.run(dev), Duration::from_millis(warm_ms))?;
            for _ in 0..3 {
                launch()?;
            }
            let mut times = Vec::with_capacity(REPS);
            for _ in 0..REPS {
                flush.run(dev)?;
                times.push(dev.time(&mut launch)?);
            }
            let mut sorted = times.clone();
            sorted.sort_by(f64::total_cmp);
            println!(
                "3 s idle, {label} | {:.0} | {} | {}",
                gbps(bytes, sorted[REPS / 2]),
                micros(&times[..5]),
                micros(&times[REPS - 5..])
            );
        }
        std::thread::sleep(Duration::from_secs(3));
        let stats = do_bench(dev, Some(&flush), 3, REPS, &mut launch)?;
        println!("3 s idle, do_bench | {:.0} | |", gbps(bytes, stats.median_ms));
    }
    Ok(())
}
