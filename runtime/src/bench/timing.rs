//! Timing as the best do it (Triton's `do_bench`): warm-up, many timed repetitions on the
//! device's own timers with the L2 cache emptied before each, and quantiles of the times.

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ext::DeviceExt;
use crate::launch::LaunchConfig;
use rutile_ir::{Kernel, ScalarType};

/// Quantiles of the times of one benchmark, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    /// The median time of one run, in milliseconds.
    pub median_ms: f64,
    /// The 20th percentile of the times (interpolated between ranks), in milliseconds.
    pub p20_ms: f64,
    /// The 80th percentile of the times (interpolated between ranks), in milliseconds.
    pub p80_ms: f64,
}

/// How the L2 cache is emptied before each timed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// Read a buffer larger than any L2 cache: the cache is left holding clean lines, so
    /// the timed run pays no one else's write-back; but its own writes may then stay in L2
    /// past its end, which flatters runs that write less than the L2 holds.
    Read,
    /// Copy one such buffer into another, as `triton.testing.do_bench` zeroes one: the
    /// cache is left full of dirty lines, whose write-back the timed run pays for.
    Copy,
}

/// A buffer larger than any L2 cache, passed through before each timed run so that no run
/// finds its inputs in the cache.
///
/// On a CPU device there is no cache to empty that matters; use no flush there.
pub struct CacheFlush {
    mode: FlushMode,
    a: Buffer<f32>,
    b: Buffer<f32>,
    read: Kernel,
}

/// Elements each program of the read flush sums.
const FLUSH_BLOCK: u32 = 4096;

impl CacheFlush {
    /// Allocates the flush buffers (512 MiB for [`FlushMode::Copy`]) on `dev`.
    pub fn new(dev: &dyn Device, mode: FlushMode) -> Result<CacheFlush> {
        let n = 64 << 20; // 256 MiB of f32
        let b_len = match mode {
            FlushMode::Copy => n,
            FlushMode::Read => n / FLUSH_BLOCK as usize,
        };
        Ok(CacheFlush {
            mode,
            a: dev.zeros::<f32>(n)?,
            b: dev.zeros::<f32>(b_len)?,
            read: read_flush_kernel()?,
        })
    }
    /// Empties the cache (queued like a launch).
    pub fn run(&self, dev: &dyn Device) -> Result<()> {
        match self.mode {
            FlushMode::Copy => dev.copy(self.a.raw(), self.b.raw()),
            FlushMode::Read => dev.launch(
                &self.read,
                &LaunchConfig::grid1((self.a.len() / FLUSH_BLOCK as usize) as u32).num_warps(8),
                &[(&self.a).into(), (&self.b).into()],
            ),
        }
    }
}

/// Each program sums `FLUSH_BLOCK` elements of `src` into one element of `sums`: reads the
/// whole source and writes almost nothing.
fn read_flush_kernel() -> Result<Kernel> {
    Ok(Kernel::build("l2_flush_read", |k| {
        let src = k.arg_ptr("src", ScalarType::F32);
        let sums = k.arg_ptr("sums", ScalarType::F32);
        let pid = k.program_id(0);
        let x = k.load(src + pid * FLUSH_BLOCK + k.arange(0, FLUSH_BLOCK as i32));
        k.store(sums + pid, x.sum(0));
    })?)
}

/// Times `f` (which queues device work) `reps` times after `warmup` untimed runs, each
/// after `flush` empties the cache when given; times are the device's (events on CUDA,
/// timestamps on Vulkan, the host clock on the CPU device). `reps` must be at least 1.
///
/// A device whose clock follows its load (Vulkan's, [`super::BENCH_WARM_UP_ENV`]) and
/// that was not timed in the last half second is first kept busy (by the flush, or `f`
/// where there is none) until its clock is up; see [`super::warm_up`].
pub fn do_bench(
    dev: &dyn Device,
    flush: Option<&CacheFlush>,
    warmup: usize,
    reps: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<Stats> {
    do_bench_prepared(dev, flush, &mut || Ok(()), warmup, reps, f)
}

/// [`do_bench`] with `prepare` (which queues device work) run before every run of `f`,
/// untimed and before the flush: to put back what `f` changes (the autotuner's
/// `reset_to_zero` and `restore_value`), so that every run starts from the same memory.
pub fn do_bench_prepared(
    dev: &dyn Device,
    flush: Option<&CacheFlush>,
    prepare: &mut dyn FnMut() -> Result<()>,
    warmup: usize,
    reps: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<Stats> {
    if reps == 0 {
        return Err(Error::Argument {
            kernel: "do_bench".into(),
            message: "reps must be at least 1".into(),
        });
    }
    let warm_up = super::clocks::warm_up_duration(dev)?;
    if !warm_up.is_zero() && !super::clocks::recently_timed(dev) {
        match flush {
            Some(c) => super::clocks::warm_up(dev, &mut || c.run(dev), warm_up)?,
            None => super::clocks::warm_up(dev, &mut || prepare().and_then(|()| f()), warm_up)?,
        }
    }
    for _ in 0..warmup {
        prepare()?;
        f()?;
    }
    dev.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        prepare()?;
        if let Some(c) = flush {
            c.run(dev)?;
        }
        times.push(dev.time(f)?);
    }
    super::clocks::timed_now(dev);
    times.sort_by(f64::total_cmp);
    Ok(Stats {
        median_ms: quantile(&times, 0.5),
        p20_ms: quantile(&times, 0.2),
        p80_ms: quantile(&times, 0.8),
    })
}

/// The `p` quantile of `sorted` (ascending, not empty), interpolated linearly between the
/// two nearest ranks, as `torch.quantile` (and so Triton's `do_bench`) takes it: the median
/// of an even count is the mean of the two middle times, not the upper one.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let at = (sorted.len() - 1) as f64 * p;
    let (below, above) = (at.floor() as usize, at.ceil() as usize);
    sorted[below] + (sorted[above] - sorted[below]) * (at - below as f64)
}

/// GB/s for `bytes` moved in `ms` milliseconds.
pub fn gbps(bytes: f64, ms: f64) -> f64 {
    bytes / (ms * 1e-3) / 1e9
}

/// How the points of a sweep are timed: a [`CacheFlush`] (or none), warm-up runs and timed
/// runs, for [`do_bench`].
pub struct Timing {
    /// What empties the L2 cache before each timed run; `None` for no flush.
    pub flush: Option<CacheFlush>,
    /// Untimed runs before the timed ones.
    pub warmup: usize,
    /// Timed runs, at least 1.
    pub reps: usize,
}

impl Timing {
    /// `reps` timed runs after 3 untimed ones, each after a 256 MiB copy empties the L2
    /// ([`FlushMode::Copy`], as `triton.testing.do_bench`).
    pub fn flushed(dev: &dyn Device, reps: usize) -> Result<Timing> {
        Ok(Timing {
            flush: Some(CacheFlush::new(dev, FlushMode::Copy)?),
            warmup: 3,
            reps,
        })
    }

    /// 3 timed runs after 1 untimed, with no flush: to try a sweep quickly (on a software
    /// device, or a GPU with little memory to spare), not to measure.
    pub fn quick() -> Timing {
        Timing {
            flush: None,
            warmup: 1,
            reps: 3,
        }
    }

    /// [`Timing::quick`] on a CPU device (software Vulkan included), where there is no cache
    /// worth emptying and every run is slow; [`Timing::flushed`] on a GPU.
    pub fn for_device(dev: &dyn Device, reps: usize) -> Result<Timing> {
        if dev.properties().device_type == crate::DeviceType::Cpu {
            Ok(Timing::quick())
        } else {
            Timing::flushed(dev, reps)
        }
    }

    /// The times of `f` (which queues device work) on `dev`.
    pub fn stats(&self, dev: &dyn Device, f: &mut dyn FnMut() -> Result<()>) -> Result<Stats> {
        do_bench(dev, self.flush.as_ref(), self.warmup, self.reps, f)
    }
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let times = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(quantile(&times, 0.5), 3.0);
        assert_eq!(quantile(&times, 0.0), 1.0);
        assert_eq!(quantile(&times, 1.0), 8.0);
        // Rank 0.6 of 3: 60% of the way from 1 to 2.
        assert!((quantile(&times, 0.2) - 1.6).abs() < 1e-12);
        assert_eq!(quantile(&[5.0, 7.0, 9.0], 0.5), 7.0);
        assert_eq!(quantile(&[5.0], 0.8), 5.0);
    }
}
