//! The tutorials' performance sweeps: what each seed tutorial's `perf_report` measures at
//! its end, rutile's kernel against the alternative the tutorial compares it with, as
//! `rutile::bench::Benchmark`s. The `tutorials` example prints them as short tables, and
//! `figures` runs them whole on every GPU and draws them.
//!
//! A tutorial plugs in by writing a [`Sweep`] (its x values and unit per [`Scope`], and the
//! lines it measures on one device: rutile's and its baselines') and listing it in
//! `tutorials::sweeps`.

pub mod baselines;
pub mod matmul;
pub mod softmax;
pub mod vector_add;

use rutile::bench::{Benchmark, Report, Timing};
use rutile::{Device, DeviceType, Result};

/// How much of a sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A few small sizes, timed without emptying the cache: for the interpreter and
    /// software Vulkan, and `figures --quick` (trying the program, not measuring).
    Small,
    /// A few sizes across the seed's range: the table at the end of each tutorial.
    Short,
    /// The seed's whole sweep: the figures.
    Full,
}

impl Scope {
    /// The scope for `dev` where `wanted` is asked for: [`Scope::Small`] on a CPU device
    /// (the interpreter, lavapipe), where the seed's sizes would take hours.
    pub fn on(dev: &dyn Device, wanted: Scope) -> Scope {
        if dev.properties().device_type == DeviceType::Cpu {
            Scope::Small
        } else {
            wanted
        }
    }
}

/// One device a sweep measures on, with the name of its lines and how it is timed.
pub struct SweepDevice<'a> {
    pub dev: &'a dyn Device,
    /// What the device's lines are called after their provider, e.g. `H100 (cuda)`; empty
    /// where the report says its device once instead (the tutorials' tables).
    pub label: String,
    pub timing: Timing,
    /// Whether this is the only device of the report: a baseline that needs another kind
    /// of device (cuBLAS on a Vulkan device) is then a line of gaps that says why, instead
    /// of being left out.
    pub alone: bool,
}

impl<'a> SweepDevice<'a> {
    /// `dev`, timed as `scope` asks: 30 timed runs a point with the L2 emptied before each
    /// ([`Scope::Full`]), 10 ([`Scope::Short`]), or [`Timing::quick`] ([`Scope::Small`]).
    pub fn new(dev: &'a dyn Device, scope: Scope, alone: bool) -> Result<SweepDevice<'a>> {
        let timing = match scope {
            Scope::Small => Timing::quick(),
            Scope::Short => Timing::flushed(dev, 10)?,
            Scope::Full => Timing::flushed(dev, 30)?,
        };
        let p = dev.properties();
        Ok(SweepDevice {
            dev,
            label: format!("{} ({})", p.name, p.backend),
            timing,
            alone,
        })
    }

    /// The name of `provider`'s line on this device: `rutile, H100 (cuda)`, or `rutile`
    /// without a label.
    pub fn line(&self, provider: &str) -> String {
        if self.label.is_empty() {
            provider.to_string()
        } else {
            format!("{provider}, {}", self.label)
        }
    }
}

/// Adds one device's lines to a sweep's benchmark.
pub type AddLines = for<'a> fn(&mut Benchmark<'a>, &'a SweepDevice<'a>, Scope) -> Result<()>;

/// A tutorial's `perf_report`.
pub struct Sweep {
    /// The figure's file stem, which `--only` matches (`softmax-performance`).
    pub name: &'static str,
    /// The benchmark with its x values, unit and title at a scope, and no lines yet.
    pub benchmark: fn(Scope) -> Benchmark<'static>,
    /// Adds the lines of one device: rutile's kernel and its baselines.
    pub lines: AddLines,
}

impl Sweep {
    /// Measures the sweep at `scope` with the lines of each of `devices`.
    pub fn run(&self, scope: Scope, devices: &[SweepDevice<'_>]) -> Result<Report> {
        let mut bench = (self.benchmark)(scope);
        for d in devices {
            (self.lines)(&mut bench, d, scope)?;
        }
        Ok(bench.run())
    }

    /// The report of this sweep at `scope` with no point measured, to read an earlier
    /// run's CSV into.
    pub fn empty_report(&self, scope: Scope) -> Report {
        (self.benchmark)(scope).empty_report()
    }
}
