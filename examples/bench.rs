//! Benchmarking as the best do it: warm-up, many timed repetitions on device timers with
//! the L2 cache flushed before each, and the median reported next to a ceiling measured in
//! the same run on the same device.

use rutile::{Buffer, Device, DeviceExt, Result};

/// Quantiles of the times of one benchmark, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub median_ms: f64,
    pub p20_ms: f64,
    pub p80_ms: f64,
}

/// A buffer larger than any L2 cache, rewritten before each timed run so that no run finds
/// its inputs in the cache (as `triton.testing.do_bench` does).
pub struct CacheFlush {
    a: Buffer<u8>,
    b: Buffer<u8>,
}

impl CacheFlush {
    pub fn new(dev: &dyn Device) -> Result<CacheFlush> {
        let n = 256 << 20;
        Ok(CacheFlush {
            a: dev.zeros::<u8>(n)?,
            b: dev.zeros::<u8>(n)?,
        })
    }
    fn run(&self, dev: &dyn Device) -> Result<()> {
        dev.copy(self.a.raw(), self.b.raw())
    }
}

/// Times `f` (which queues device work) `reps` times after `warmup` untimed runs.
pub fn do_bench(
    dev: &dyn Device,
    flush: Option<&CacheFlush>,
    warmup: usize,
    reps: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<Stats> {
    for _ in 0..warmup {
        f()?;
    }
    dev.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        if let Some(c) = flush {
            c.run(dev)?;
        }
        times.push(dev.time(f)?);
    }
    times.sort_by(f64::total_cmp);
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    Ok(Stats {
        median_ms: q(0.5),
        p20_ms: q(0.2),
        p80_ms: q(0.8),
    })
}

/// GB/s for `bytes` moved in `ms` milliseconds.
pub fn gbps(bytes: f64, ms: f64) -> f64 {
    bytes / (ms * 1e-3) / 1e9
}
