//! Benchmarking as Triton's `triton.testing` does it: [`do_bench`] times one operation
//! (warm-up, many repetitions on the device's own timers, the L2 cache emptied before each,
//! quantiles of the times), and [`Benchmark`] is `perf_report`: a sweep over an x-axis with
//! one line per provider (rutile, and the baseline it is measured against), printed as a
//! table and written as CSV and, with the `plot` feature, as an SVG line chart.
//!
//! ```
//! use rutile::bench::{Benchmark, Timing};
//! use rutile::{seeds, Device, DeviceExt, LaunchConfig, ScalarType};
//! # fn main() -> Result<(), rutile::Error> {
//! let dev = rutile::CpuDevice::new();
//! let kernel = seeds::vector_add(ScalarType::F32, 256)?;
//! let timing = Timing::quick();
//! let (x, y, z) = (dev.upload(&[1.0f32; 4096])?, dev.upload(&[2.0f32; 4096])?, dev.zeros::<f32>(4096)?);
//! let report = Benchmark::new("vector-add", "elements", [1024.0, 4096.0])
//!     .gbps(|n| 12.0 * n)
//!     .line("rutile", |n| {
//!         let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
//!         let config = LaunchConfig::grid1((n as u32).div_ceil(256));
//!         Ok(timing.stats(&dev, &mut || dev.launch(&kernel, &config, &args))?)
//!     })
//!     .run();
//! print!("{report}");
//! # Ok(()) }
//! ```
//!
//! The autotuner ([`crate::autotune`]) times its configurations with [`do_bench`] too.

mod clocks;
#[cfg(feature = "plot")]
mod plot;
mod report;
mod timing;

pub use clocks::{warm_up, BENCH_WARM_UP_ENV};
pub use report::{Benchmark, ProviderError, Report, Series, Unit};
pub use timing::{do_bench, do_bench_prepared, gbps, CacheFlush, FlushMode, Stats, Timing};
