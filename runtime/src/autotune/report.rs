//! What a tuning found: the choice, each configuration's time and resources, and why a
//! configuration was skipped.

use super::{Config, AUTOTUNE_SKIP_SPILLS_ENV};
use crate::compiled::KernelMetadata;
use crate::error::Error;
use rutile_ir::lower::LowerError;
use std::fmt;
use std::sync::Arc;

/// What the autotuner chose for one key on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The chosen configuration.
    pub config: Config,
    /// Median time of one launch when it was chosen, in milliseconds (where a runoff chose
    /// it, the median of its rounds).
    pub time_ms: f64,
    /// Whether it came from the cache file rather than from timing in this process.
    pub from_file: bool,
    /// How the tuning went: every configuration timed, with its kernel's resources, and
    /// every one skipped, with why. `None` for a choice read from the cache file, which
    /// timed nothing.
    pub report: Option<Arc<Report>>,
}

impl Choice {
    /// What the compiler reported about the chosen configuration's kernel when it was
    /// timed; `None` for a choice read from the cache file.
    pub fn metadata(&self) -> Option<&KernelMetadata> {
        let report = self.report.as_ref()?;
        report
            .timed
            .iter()
            .find(|t| t.config == self.config)
            .map(|t| &t.metadata)
    }
}

/// How the tuning of one key went, in the order of the configurations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// The configurations that ran, with their times.
    pub timed: Vec<Timing>,
    /// The configurations that did not, with why.
    pub skipped: Vec<Skipped>,
    /// The runoff's finalists, fastest first by their first time, each with the median of
    /// every round it ran in (see [`Autotuner::runoff`](super::Autotuner::runoff)); empty
    /// where none ran.
    pub runoff: Vec<(Config, Vec<f64>)>,
}

/// One configuration's timing.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// The configuration timed.
    pub config: Config,
    /// Median time of one launch, in milliseconds; for a finalist of the runoff, the
    /// median of its rounds' medians.
    pub time_ms: f64,
    /// What the compiler and driver reported about its kernel on this device (registers,
    /// spills, shared memory; `None` where the device does not say).
    pub metadata: KernelMetadata,
}

/// A configuration the autotuner did not time, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    /// The configuration skipped.
    pub config: Config,
    /// Why it was skipped.
    pub reason: SkipReason,
}

/// Why a configuration was not timed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Its kernel needs more shared memory per program than the device gives one (its
    /// opt-in limit, where it has one).
    SharedMemory {
        /// Shared memory the kernel needs per program, in bytes.
        needed: u32,
        /// The most shared memory the device gives one program, in bytes.
        limit: u32,
    },
    /// Its kernel uses so many registers per thread that the device runs at most
    /// `max_threads` of them per program, fewer than its `num_warps` makes.
    Registers {
        /// Registers per thread, where the device reports them.
        registers: Option<u32>,
        /// The most threads per program the compiled kernel allows.
        max_threads: u32,
        /// The threads per program its `num_warps` makes.
        threads: u32,
    },
    /// Its kernel spills registers to local memory (`spill_bytes` per thread) and the
    /// autotuner was asked to skip such configurations ([`Autotuner::skip_spilling`](super::Autotuner::skip_spilling)).
    Spills {
        /// Bytes spilled to local memory per thread.
        spill_bytes: u32,
        /// Registers per thread, where the device reports them.
        registers: Option<u32>,
    },
    /// Its kernel does not build, lower or launch on this device: the error.
    Failed(String),
}

impl SkipReason {
    /// The reason a configuration-specific error gives.
    pub(super) fn of(error: &Error) -> SkipReason {
        match error {
            Error::Lower(LowerError::OutOfSharedMemory { needed, limit, .. }) => SkipReason::SharedMemory {
                needed: *needed,
                limit: *limit,
            },
            e => SkipReason::Failed(e.to_string()),
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::SharedMemory { needed, limit } => write!(
                f,
                "its kernel needs {needed} bytes of shared memory per program; the device gives one at most {limit}"
            ),
            SkipReason::Registers {
                registers,
                max_threads,
                threads,
            } => {
                let registers = registers.map_or(String::new(), |r| format!(" ({r} registers per thread)"));
                write!(
                    f,
                    "its kernel{registers} runs at most {max_threads} threads per program on this device; \
                     num_warps makes {threads}"
                )
            }
            SkipReason::Spills { spill_bytes, registers } => {
                let registers = registers.map_or(String::new(), |r| format!(" with {r} registers"));
                write!(
                    f,
                    "its kernel spills {spill_bytes} bytes per thread to local memory{registers}, and this \
                     autotuner skips spilling configurations (`skip_spilling`, {AUTOTUNE_SKIP_SPILLS_ENV})"
                )
            }
            SkipReason::Failed(message) => f.write_str(message),
        }
    }
}
