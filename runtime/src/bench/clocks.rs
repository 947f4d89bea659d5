//! Raising a GPU's clock before it is timed.
//!
//! Through Vulkan, NVIDIA's driver lowers the SM clock of a GPU left idle for about 1.5 s
//! (an H200's from 1980 to 345 MHz) and raises it again only after a few hundred
//! milliseconds of sustained work; through CUDA the clock stays up from the first launch.
//! A timing of a few milliseconds after the host has checked a result (seconds without GPU
//! work) then measures the low clock: on an H200 a 512 MB copy timed so through Vulkan ran
//! at 1630 GB/s, and at 3990 after a second of back-to-back launches
//! (`benches/studies/clock_study.rs`, with the clock sampled beside it). So [`do_bench`]
//! keeps a device whose clock follows its load busy before timing it, unless it timed that
//! device a moment ago; [`warm_up`] does the same for any other timing.
//!
//! [`do_bench`]: super::do_bench

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::error::Result;

/// The environment variable that sets how many milliseconds of sustained work
/// [`super::do_bench`] runs before timing a device that has not been timed in the last
/// half second (a count up to 10000; 0 for none; anything else is an
/// [`crate::Error::Environment`]). Unset: 500 on Vulkan devices, none on others.
pub const BENCH_WARM_UP_ENV: &str = "RUTILE_BENCH_WARM_UP_MS";

/// The sustained work before a Vulkan device is timed: on an H200 through NVIDIA's driver
/// the clock came up after about 300 ms of back-to-back copies, not after 100.
const VULKAN_WARM_UP: Duration = Duration::from_millis(500);

/// A device timed less than this long ago still runs at that timing's clock: the clock
/// measured falling only after about 1.5 s without work.
const STILL_WARM: Duration = Duration::from_millis(500);

/// Launches of the load between two waits for the device: enough to keep it busy while the
/// host queues the next ones, few enough that the warm-up ends close to its duration.
const BATCH: usize = 8;

/// When each device (by [`Device::device_key`]) last finished a timing.
static LAST_TIMED: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());

/// Runs `load` (which queues device work) back to back on `dev` for at least `duration`
/// of wall time, waiting for the device every few launches, so that a clock which follows
/// the device's load is up when a timing starts. A heavy load keeps the device busiest:
/// a [`super::CacheFlush`]'s copy of 256 MiB rather than a launch of a few microseconds,
/// whose host cost leaves the device idle most of the time.
pub fn warm_up(dev: &dyn Device, load: &mut dyn FnMut() -> Result<()>, duration: Duration) -> Result<()> {
    let start = Instant::now();
    while start.elapsed() < duration {
        for _ in 0..BATCH {
            load()?;
        }
        dev.synchronize()?;
    }
    Ok(())
}

/// The sustained work [`super::do_bench`] runs before timing `dev` when it has not timed it
/// in the last moment: [`BENCH_WARM_UP_ENV`]'s, or [`VULKAN_WARM_UP`] on a Vulkan GPU.
pub(crate) fn warm_up_duration(dev: &dyn Device) -> Result<Duration> {
    let value = std::env::var(BENCH_WARM_UP_ENV).ok();
    duration_for(value.as_deref(), dev.properties())
}

/// [`warm_up_duration`] with [`BENCH_WARM_UP_ENV`]'s value given (`None` or blank: unset).
fn duration_for(value: Option<&str>, props: &crate::DeviceProperties) -> Result<Duration> {
    let value = value.filter(|v| !v.trim().is_empty());
    let ms = crate::backends::parse_count(
        BENCH_WARM_UP_ENV,
        value,
        0..=10_000,
        "milliseconds of sustained work before a timing (0 for none)",
    )?;
    Ok(match ms {
        Some(ms) => Duration::from_millis(ms.into()),
        None if props.backend == crate::Backend::Vulkan && props.device_type != crate::DeviceType::Cpu => {
            VULKAN_WARM_UP
        }
        None => Duration::ZERO,
    })
}

/// Whether `dev` finished a timing less than [`STILL_WARM`] ago.
pub(crate) fn recently_timed(dev: &dyn Device) -> bool {
    let key = dev.device_key();
    lock().iter().any(|&(k, at)| k == key && at.elapsed() < STILL_WARM)
}

/// Records that `dev` has just finished a timing.
pub(crate) fn timed_now(dev: &dyn Device) {
    let key = dev.device_key();
    let mut last = lock();
    match last.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = Instant::now(),
        None => last.push((key, Instant::now())),
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(u64, Instant)>> {
    LAST_TIMED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, CpuDevice, DeviceProperties, DeviceType, Error};

    fn props(backend: Backend, device_type: DeviceType) -> DeviceProperties {
        DeviceProperties::unknown("gpu", "vendor", backend, device_type)
    }

    #[test]
    fn vulkan_gpus_are_warmed_up_by_default_and_others_not() {
        let gpu = props(Backend::Vulkan, DeviceType::DiscreteGpu);
        assert_eq!(duration_for(None, &gpu).unwrap(), VULKAN_WARM_UP);
        assert_eq!(duration_for(Some(" "), &gpu).unwrap(), VULKAN_WARM_UP);
        let lavapipe = props(Backend::Vulkan, DeviceType::Cpu);
        assert_eq!(duration_for(None, &lavapipe).unwrap(), Duration::ZERO);
        let cuda = props(Backend::Cuda, DeviceType::DiscreteGpu);
        assert_eq!(duration_for(None, &cuda).unwrap(), Duration::ZERO);
        assert_eq!(duration_for(Some("250"), &cuda).unwrap(), Duration::from_millis(250));
        assert_eq!(duration_for(Some("0"), &gpu).unwrap(), Duration::ZERO);
    }

    #[test]
    fn a_bad_warm_up_setting_is_an_error_naming_the_variable() {
        let gpu = props(Backend::Vulkan, DeviceType::DiscreteGpu);
        for bad in ["fast", "-1", "10001", "0.5"] {
            match duration_for(Some(bad), &gpu) {
                Err(Error::Environment { variable, message }) => {
                    assert_eq!(variable, BENCH_WARM_UP_ENV);
                    assert!(message.contains(bad), "{message}");
                }
                other => panic!("{bad}: expected an environment error, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_warm_up_runs_the_load_for_its_duration() {
        let dev = CpuDevice::new();
        let mut runs = 0;
        let start = Instant::now();
        warm_up(
            &dev,
            &mut || {
                runs += 1;
                Ok(())
            },
            Duration::from_millis(20),
        )
        .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(runs >= BATCH && runs % BATCH == 0, "{runs} runs");
        let mut none = 0;
        warm_up(
            &dev,
            &mut || {
                none += 1;
                Ok(())
            },
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(none, 0);
    }

    #[test]
    fn a_device_is_recently_timed_only_after_a_timing() {
        let (dev, other) = (CpuDevice::new(), CpuDevice::new());
        assert!(!recently_timed(&dev));
        timed_now(&dev);
        assert!(recently_timed(&dev));
        assert!(!recently_timed(&other));
    }
}
