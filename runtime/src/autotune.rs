//! Triton's `@autotune`: a kernel built from meta-parameters, a list of configurations to
//! try, and a key (the sizes the best choice depends on, Triton's `key=['M', 'N', 'K']`).
//! The first launch with a new key on a device times every configuration there and keeps
//! the fastest; later launches with that key use it directly, in this process (memory) and
//! in later ones (a cache file). A choice in the file counts only for the same list of
//! configurations: when the list changes, the key is tuned again.
//!
//! ```no_run
//! use rutile::autotune::{Autotuner, Config};
//! # fn kernel(block: i64) -> rutile::Result<rutile::Kernel> { unimplemented!() }
//! # fn main() -> rutile::Result<()> {
//! # let dev = rutile::default_device()?;
//! # let args: Vec<rutile::Arg> = Vec::new();
//! let n = 1 << 20;
//! let tuner = Autotuner::new(
//!     "add",
//!     vec![
//!         Config::new(&[("BLOCK", 1024)]).num_warps(4),
//!         Config::new(&[("BLOCK", 4096)]).num_warps(8),
//!     ],
//! )?;
//! tuner.launch(
//!     dev.as_ref(),
//!     &n.to_string(),
//!     &|c| kernel(c.value("BLOCK")?),
//!     &|c| Ok([(n as u32).div_ceil(c.value("BLOCK")? as u32), 1, 1]),
//!     &args,
//! )?;
//! # Ok(())
//! # }
//! ```
//!
//! Each configuration is compiled for the device first, all of them at once on the host's
//! cores before any is timed (a driver may take seconds a kernel: NVIDIA's Vulkan driver
//! on cooperative matrices), then each is timed in turn: one whose kernel does not build
//! or lower (more shared memory than the device gives a program, up to its opt-in limit),
//! or that the device cannot launch (too many threads, too many registers for its
//! threads), is skipped, as Triton prunes it; so, when asked ([`Autotuner::skip_spilling`],
//! [`AUTOTUNE_SKIP_SPILLS_ENV`]), is one whose kernel spills registers to local memory. An
//! error only the arguments or the device can cause (a wrong argument, a lost device) is
//! returned at once. What the compiler reports about each timed kernel (registers,
//! spills, shared memory: [`KernelMetadata`]) and why each skipped configuration was
//! skipped are in the choice's [`Report`] ([`Choice::report`]), and in the error when no
//! configuration ran.
//!
//! `RUTILE_AUTOTUNE_PRINT=1` ([`AUTOTUNE_PRINT_ENV`], as Triton's
//! `TRITON_PRINT_AUTOTUNING`) prints on stderr each configuration's time with its
//! registers, spills and shared memory, each skipped one with why, and the winner. Tuning
//! that takes over a second shows a progress bar on stderr when it is a terminal, naming
//! the kernel, the key and the configuration being timed.
//!
//! The cache file may be shared by processes tuning at once: each adds its choice as one
//! whole line, and none is lost.

mod cache;

use crate::bench::{do_bench, CacheFlush, FlushMode};
use crate::compiled::KernelMetadata;
use crate::device::{Device, DeviceProperties, DeviceType};
use crate::error::{Error, Result};
use crate::ext::DeviceExt;
use crate::launch::{Arg, LaunchConfig};
use crate::progress::Progress;
use cache::Entry;
use rutile_ir::lower::LowerError;
use rutile_ir::Kernel;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The environment variable naming the autotuner's cache file; empty or `off` keeps
/// choices in memory only. Without it the file is `$XDG_CACHE_HOME/rutile/autotune.tsv`
/// (or `~/.cache/rutile/autotune.tsv`).
pub const AUTOTUNE_CACHE_ENV: &str = "RUTILE_AUTOTUNE_CACHE";

/// The environment variable that, set to anything but empty or `0`, makes every
/// autotuner print its tuning on stderr (each configuration's time and resources, the
/// skipped ones with why, the winner; a choice read from the cache file in one line), as
/// Triton's `TRITON_PRINT_AUTOTUNING`. [`Autotuner::print`] overrides it for one tuner.
pub const AUTOTUNE_PRINT_ENV: &str = "RUTILE_AUTOTUNE_PRINT";

/// The environment variable that, set to anything but empty or `0`, makes every
/// autotuner skip configurations whose kernel spills registers; [`Autotuner::skip_spilling`]
/// overrides it for one tuner.
pub const AUTOTUNE_SKIP_SPILLS_ENV: &str = "RUTILE_AUTOTUNE_SKIP_SPILLS";

/// One configuration to try: meta-parameters (Triton's `triton.Config({...})`), and the
/// launch's `num_warps` and `num_stages`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub meta: Vec<(String, i64)>,
    pub num_warps: u32,
    pub num_stages: u32,
    /// [`LaunchConfig::persistent`].
    pub persistent: bool,
    /// [`LaunchConfig::warp_specialize`].
    pub warp_specialize: bool,
    /// [`LaunchConfig::maxnreg`].
    pub maxnreg: Option<u32>,
}

impl Config {
    /// Meta-parameters as `(name, value)` pairs, with [`LaunchConfig`]'s default warps and
    /// stages (4 and 3).
    pub fn new(meta: &[(&str, i64)]) -> Config {
        let defaults = LaunchConfig::new([1, 1, 1]);
        Config {
            meta: meta.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            num_warps: defaults.num_warps,
            num_stages: defaults.num_stages,
            persistent: false,
            warp_specialize: false,
            maxnreg: None,
        }
    }
    pub fn num_warps(mut self, num_warps: u32) -> Config {
        self.num_warps = num_warps;
        self
    }
    pub fn num_stages(mut self, num_stages: u32) -> Config {
        self.num_stages = num_stages;
        self
    }
    pub fn persistent(mut self, persistent: bool) -> Config {
        self.persistent = persistent;
        self
    }
    pub fn warp_specialize(mut self, warp_specialize: bool) -> Config {
        self.warp_specialize = warp_specialize;
        self
    }
    pub fn maxnreg(mut self, maxnreg: Option<u32>) -> Config {
        self.maxnreg = maxnreg;
        self
    }
    /// The meta-parameter `name`; an error naming it and the configuration when absent.
    pub fn value(&self, name: &str) -> Result<i64> {
        self.meta
            .iter()
            .find(|(k, _)| k == name)
            .map(|&(_, v)| v)
            .ok_or_else(|| Error::Autotune {
                name: self.to_string(),
                message: format!("no meta-parameter `{name}` in this configuration"),
            })
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.meta {
            write!(f, "{k}={v}, ")?;
        }
        write!(f, "num_warps={}, num_stages={}", self.num_warps, self.num_stages)?;
        if self.persistent {
            write!(f, ", persistent")?;
        }
        if self.warp_specialize {
            write!(f, ", warp_specialize")?;
        }
        if let Some(n) = self.maxnreg {
            write!(f, ", maxnreg={n}")?;
        }
        Ok(())
    }
}

/// What the autotuner chose for one key on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub config: Config,
    /// Median time of one launch when it was chosen, in milliseconds.
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
}

/// One configuration's timing.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub config: Config,
    /// Median time of one launch, in milliseconds.
    pub time_ms: f64,
    /// What the compiler and driver reported about its kernel on this device (registers,
    /// spills, shared memory; `None` where the device does not say).
    pub metadata: KernelMetadata,
}

/// A configuration the autotuner did not time, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    pub config: Config,
    pub reason: SkipReason,
}

/// Why a configuration was not timed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Its kernel needs more shared memory per program than the device gives one (its
    /// opt-in limit, where it has one).
    SharedMemory { needed: u32, limit: u32 },
    /// Its kernel uses so many registers per thread that the device runs at most
    /// `max_threads` of them per program, fewer than its `num_warps` makes.
    Registers {
        registers: Option<u32>,
        max_threads: u32,
        threads: u32,
    },
    /// Its kernel spills registers to local memory (`spill_bytes` per thread) and the
    /// autotuner was asked to skip such configurations ([`Autotuner::skip_spilling`]).
    Spills { spill_bytes: u32, registers: Option<u32> },
    /// Its kernel does not build, lower or launch on this device: the error.
    Failed(String),
}

impl SkipReason {
    /// The reason a configuration-specific error gives.
    fn of(error: &Error) -> SkipReason {
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

/// A chosen configuration's kernel and launch ([`Autotuner::tuned`]).
#[derive(Clone, Debug)]
pub struct Tuned {
    pub choice: Choice,
    pub kernel: Kernel,
    pub launch: LaunchConfig,
}

/// Picks the fastest of a list of configurations per key and device, and remembers it.
pub struct Autotuner {
    name: String,
    configs: Vec<Config>,
    repetitions: Option<(usize, usize)>,
    file: Option<PathBuf>,
    skip_spilling: bool,
    print: bool,
    /// Per (device, key): the choice and its built kernel.
    chosen: Mutex<HashMap<(String, String), Arc<Tuned>>>,
}

/// Builds the kernel of a configuration.
pub type BuildFn<'a> = dyn Fn(&Config) -> Result<Kernel> + 'a;
/// The grid of a configuration's launch.
pub type GridFn<'a> = dyn Fn(&Config) -> Result<[u32; 3]> + 'a;

/// What came of trying one configuration.
enum Outcome {
    Timed(Timing),
    Skipped(SkipReason),
}

impl Autotuner {
    /// An autotuner named `name` (it names the kernel family in the cache file and in
    /// errors) trying `configs`, which must be non-empty and distinct. The cache file is
    /// the default one ([`AUTOTUNE_CACHE_ENV`]); spilling configurations are skipped and
    /// the tuning printed as [`AUTOTUNE_SKIP_SPILLS_ENV`] and [`AUTOTUNE_PRINT_ENV`] say
    /// (by default neither).
    pub fn new(name: &str, configs: Vec<Config>) -> Result<Autotuner> {
        let err = |message: String| Error::Autotune {
            name: name.to_string(),
            message,
        };
        if configs.is_empty() {
            return Err(err("no configurations to try".into()));
        }
        for (i, c) in configs.iter().enumerate() {
            if configs[..i].contains(c) {
                return Err(err(format!("the configuration `{c}` is listed twice")));
            }
            if c.num_warps == 0 || c.num_stages == 0 {
                return Err(err(format!("`{c}`: num_warps and num_stages must be at least 1")));
            }
        }
        Ok(Autotuner {
            name: name.to_string(),
            configs,
            repetitions: None,
            file: default_cache_file(),
            skip_spilling: env_flag(AUTOTUNE_SKIP_SPILLS_ENV),
            print: env_flag(AUTOTUNE_PRINT_ENV),
            chosen: Mutex::new(HashMap::new()),
        })
    }

    /// Keeps choices in `path` (read at the first launch of each key, a line added after
    /// each tuning), or in memory only with `None`.
    pub fn cache_file(mut self, path: Option<PathBuf>) -> Autotuner {
        self.file = path;
        self
    }

    /// Untimed and timed launches per configuration. By default, as Triton's `do_bench`,
    /// a GPU runs each configuration for about 25 ms before timing and times it for about
    /// 100 ms (so that its clocks have risen after the compilations), each timed launch
    /// after emptying the L2 cache; a software device (lavapipe, the interpreter) times
    /// one launch.
    pub fn repetitions(mut self, warmup: usize, reps: usize) -> Autotuner {
        self.repetitions = Some((warmup, reps.max(1)));
        self
    }

    /// Whether to skip configurations whose compiled kernel spills registers to local
    /// memory (where the device reports spills: CUDA). Off by default (or as
    /// [`AUTOTUNE_SKIP_SPILLS_ENV`] says): a spilling kernel may still be the fastest, so
    /// skipping is a way to save tuning time on lists known to spill. When every
    /// configuration spills, none runs and tuning fails, saying so.
    pub fn skip_spilling(mut self, skip: bool) -> Autotuner {
        self.skip_spilling = skip;
        self
    }

    /// Whether to print the tuning on stderr, whatever [`AUTOTUNE_PRINT_ENV`] says.
    pub fn print(mut self, print: bool) -> Autotuner {
        self.print = print;
        self
    }

    /// The configurations it tries, in order.
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }

    /// The configuration for `key` on `dev`: remembered, read from the cache file, or found
    /// by timing each configuration's launch with `args` (which it may overwrite, as the
    /// launch itself would).
    pub fn choose(
        &self,
        dev: &dyn Device,
        key: &str,
        build: &BuildFn<'_>,
        grid: &GridFn<'_>,
        args: &[Arg<'_>],
    ) -> Result<Choice> {
        Ok(self.remembered(dev, key, build, grid, args)?.choice.clone())
    }

    /// The chosen configuration for `key` (see [`Self::choose`]) with its kernel and launch
    /// configuration, ready to launch, time or launch again.
    pub fn tuned(
        &self,
        dev: &dyn Device,
        key: &str,
        build: &BuildFn<'_>,
        grid: &GridFn<'_>,
        args: &[Arg<'_>],
    ) -> Result<Tuned> {
        Ok(Tuned::clone(&*self.remembered(dev, key, build, grid, args)?))
    }

    /// Launches the chosen configuration for `key` (choosing it first if needed). The
    /// kernel is built once per key and device, not at every launch.
    pub fn launch(
        &self,
        dev: &dyn Device,
        key: &str,
        build: &BuildFn<'_>,
        grid: &GridFn<'_>,
        args: &[Arg<'_>],
    ) -> Result<Choice> {
        let tuned = self.remembered(dev, key, build, grid, args)?;
        dev.launch(&tuned.kernel, &tuned.launch, args)?;
        Ok(tuned.choice.clone())
    }

    /// The choice for `key` on `dev` with its kernel built: kept in memory after the first
    /// call, which reads it from the cache file or tunes.
    fn remembered(
        &self,
        dev: &dyn Device,
        key: &str,
        build: &BuildFn<'_>,
        grid: &GridFn<'_>,
        args: &[Arg<'_>],
    ) -> Result<Arc<Tuned>> {
        let device = device_name(dev);
        let slot = (device.clone(), key.to_string());
        if let Some(t) = lock(&self.chosen).get(&slot) {
            return Ok(Arc::clone(t));
        }
        let choice = match self.read_file(&device, key) {
            Some(c) => {
                if self.print {
                    eprintln!("{}", self.cached_choice_line(&device, key, &c));
                }
                c
            }
            None => {
                let c = self.tune(dev, &device, key, build, grid, args)?;
                self.write_file(&device, key, &c);
                c
            }
        };
        let tuned = Arc::new(Tuned {
            kernel: build(&choice.config)?,
            launch: launch_config(&choice.config, grid)?,
            choice,
        });
        lock(&self.chosen).insert(slot, Arc::clone(&tuned));
        Ok(tuned)
    }

    /// Times every configuration that can run; the fastest wins (the first of equals).
    fn tune(
        &self,
        dev: &dyn Device,
        device: &str,
        key: &str,
        build: &BuildFn<'_>,
        grid: &GridFn<'_>,
        args: &[Arg<'_>],
    ) -> Result<Choice> {
        let flush = if is_software(dev) {
            None
        } else {
            Some(CacheFlush::new(dev, FlushMode::Read)?)
        };
        let mut progress = Progress::new(
            self.configs.len(),
            format!("autotuning `{}` for key `{key}`", self.name),
        );
        let printer = Printer::new(&self.configs);
        if self.print {
            progress.println(&format!(
                "rutile: autotuning `{}` for key `{key}` on {device}: {} configurations",
                self.name,
                self.configs.len()
            ));
        }
        let started = std::time::Instant::now();
        // Each kernel and its launch are made once, here: the builder need not be shareable
        // between threads, and the timing loop takes the same ones.
        let built: Vec<Result<(Kernel, LaunchConfig)>> = self
            .configs
            .iter()
            .map(|c| Ok((build(c)?, launch_config(c, grid)?)))
            .collect();
        let (compiled, threads) = self.precompile(dev, &built, args);
        if self.print && threads > 1 {
            progress.println(&format!(
                "rutile: compiled {compiled} configurations on {threads} threads in {:.2} s",
                started.elapsed().as_secs_f64()
            ));
        }
        let mut report = Report::default();
        for (config, kernel) in self.configs.iter().zip(built) {
            progress.step(config.to_string());
            let outcome =
                match kernel.and_then(|(k, launch)| self.try_config(dev, flush.as_ref(), &k, &launch, args, config)) {
                    Ok(outcome) => outcome,
                    Err(e) if config_specific(&e) => Outcome::Skipped(SkipReason::of(&e)),
                    Err(e) => return Err(e),
                };
            if self.print {
                progress.println(&printer.outcome(config, &outcome));
            }
            match outcome {
                Outcome::Timed(timing) => report.timed.push(timing),
                Outcome::Skipped(reason) => report.skipped.push(Skipped {
                    config: config.clone(),
                    reason,
                }),
            }
            progress.done();
        }
        let Some(best) = report.timed.iter().min_by(|a, b| a.time_ms.total_cmp(&b.time_ms)) else {
            return Err(self.none_ran(&report.skipped));
        };
        if self.print {
            progress.println(&printer.winner(&self.name, key, best, &report, progress.elapsed()));
        }
        let (config, time_ms) = (best.config.clone(), best.time_ms);
        Ok(Choice {
            config,
            time_ms,
            from_file: false,
            report: Some(Arc::new(report)),
        })
    }

    /// Compiles the kernel of every configuration that built, with its launch, on as many threads as the
    /// host has cores (at most one a kernel), into the device's compile cache, where the
    /// timing loop finds them: what fails here is left for that loop to meet again and
    /// report in order. Returns how many compiled, and on how many threads.
    fn precompile(
        &self,
        dev: &dyn Device,
        built: &[Result<(Kernel, LaunchConfig)>],
        args: &[Arg<'_>],
    ) -> (usize, usize) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let jobs: Vec<&(Kernel, LaunchConfig)> = built.iter().filter_map(|b| b.as_ref().ok()).collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(jobs.len());
        if threads < 2 || !dev.compiles_in_parallel() {
            return (0, 1);
        }
        let (next, compiled) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    while let Some((kernel, launch)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)).copied() {
                        if dev.compile_for(kernel, launch, args).is_ok() {
                            compiled.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        (compiled.into_inner(), threads)
    }

    /// Compiles `config`'s kernel (found in the compile cache when `precompile` did), and
    /// times it unless the device cannot run it (or should not, as asked). An error is the
    /// configuration's or the launch's: the caller tells which.
    fn try_config(
        &self,
        dev: &dyn Device,
        flush: Option<&CacheFlush>,
        kernel: &Kernel,
        launch: &LaunchConfig,
        args: &[Arg<'_>],
        config: &Config,
    ) -> Result<Outcome> {
        let metadata = dev.compile_for(kernel, launch, args)?.metadata.clone();
        if let Some(reason) = prune(&metadata, dev.properties(), self.skip_spilling) {
            return Ok(Outcome::Skipped(reason));
        }
        let mut run = || dev.launch(kernel, launch, args);
        let (warmup, reps) = match self.repetitions {
            Some(r) => r,
            None if is_software(dev) => (0, 1),
            None => {
                // One launch runs the compiled kernel once, a second estimates its time.
                run()?;
                let ms = dev.time(&mut run)?.max(1e-3);
                let count = |budget_ms: f64, min: f64| (budget_ms / ms).clamp(min, 1000.0) as usize;
                (count(25.0, 1.0), count(100.0, 5.0))
            }
        };
        let stats = do_bench(dev, flush, warmup, reps, &mut run)?;
        Ok(Outcome::Timed(Timing {
            config: config.clone(),
            time_ms: stats.median_ms,
            metadata,
        }))
    }

    /// The error of a tuning where every configuration was skipped, saying why for each.
    fn none_ran(&self, skipped: &[Skipped]) -> Error {
        let reasons: Vec<String> = skipped
            .iter()
            .map(|s| format!("`{}`: {}", s.config, s.reason))
            .collect();
        Error::Autotune {
            name: self.name.clone(),
            message: format!("no configuration ran: {}", reasons.join("; ")),
        }
    }

    /// The line [`AUTOTUNE_PRINT_ENV`] prints for a choice read from the cache file.
    fn cached_choice_line(&self, device: &str, key: &str, choice: &Choice) -> String {
        let file = self
            .file
            .as_ref()
            .map_or(String::new(), |f| format!(" {}", f.display()));
        format!(
            "rutile: autotuning `{}` for key `{key}` on {device}: `{}` from the cache file{file} ({} when tuned)",
            self.name,
            choice.config,
            milliseconds(choice.time_ms)
        )
    }

    fn read_file(&self, device: &str, key: &str) -> Option<Choice> {
        let text = cache::read(self.file.as_ref()?)?;
        let fingerprint = self.fingerprint();
        // The last line of a key is the latest choice (several may be left when the file
        // could not be locked).
        text.lines().rev().find_map(|line| {
            let entry = Entry::parse(line)?;
            if (entry.name, entry.device, entry.key) != (&*self.name, device, key) {
                return None;
            }
            // A choice made among other configurations is ignored: one added since may
            // be faster, and the chosen one may no longer be listed.
            if entry.configs != fingerprint {
                return None;
            }
            let config = self.configs.iter().find(|c| c.to_string() == entry.config)?;
            Some(Choice {
                config: config.clone(),
                time_ms: entry.time_ms,
                from_file: true,
                report: None,
            })
        })
    }

    /// The list of configurations as the cache file records it: a 64-bit FNV-1a hash of
    /// their texts in order (std's hasher may change between Rust releases; this may not).
    fn fingerprint(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.configs.iter().flat_map(|c| format!("{c}\n").into_bytes()) {
            hash = (hash ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("configs:{hash:016x}")
    }

    /// Adds this key's choice to the cache file, replacing its older lines. A file that
    /// cannot be written is reported on stderr and otherwise ignored: the cache only saves
    /// time.
    fn write_file(&self, device: &str, key: &str, choice: &Choice) {
        let Some(path) = &self.file else { return };
        let config = choice.config.to_string();
        let fingerprint = self.fingerprint();
        let entry = Entry {
            name: &self.name,
            device,
            key,
            config: &config,
            time_ms: choice.time_ms,
            configs: &fingerprint,
        };
        // Any line of this key goes, also one written in an older layout.
        let superseded = |line: &str| Entry::is_of(line, (&self.name, device, key));
        if let Err(e) = cache::store(path, &entry.line(), &superseded) {
            eprintln!("rutile: cannot write the autotuning cache {}: {e}", path.display());
        }
    }
}

/// Why the device cannot run a compiled kernel (or, as asked, should not), from what its
/// compiler reported; `None` when it may run.
fn prune(metadata: &KernelMetadata, device: &DeviceProperties, skip_spilling: bool) -> Option<SkipReason> {
    // The backends' lowering already refuses more shared memory than the opt-in limit;
    // this catches one that did not.
    if let Some(limit) = device.shared_memory_per_block_optin {
        if metadata.shared_bytes > limit {
            return Some(SkipReason::SharedMemory {
                needed: metadata.shared_bytes,
                limit,
            });
        }
    }
    if let Some(max_threads) = metadata.max_threads {
        if max_threads < metadata.threads {
            return Some(SkipReason::Registers {
                registers: metadata.registers,
                max_threads,
                threads: metadata.threads,
            });
        }
    }
    match metadata.spill_bytes {
        Some(spill_bytes) if skip_spilling && spill_bytes > 0 => Some(SkipReason::Spills {
            spill_bytes,
            registers: metadata.registers,
        }),
        _ => None,
    }
}

/// The lines [`AUTOTUNE_PRINT_ENV`] prints, with configurations in a column as wide as the
/// widest.
struct Printer {
    width: usize,
}

impl Printer {
    fn new(configs: &[Config]) -> Printer {
        Printer {
            width: configs.iter().map(|c| c.to_string().len()).max().unwrap_or(0),
        }
    }

    fn outcome(&self, config: &Config, outcome: &Outcome) -> String {
        let config = format!("{config}");
        match outcome {
            Outcome::Timed(t) => format!(
                "  {config:<w$}  {:>12}  {}",
                milliseconds(t.time_ms),
                resources(&t.metadata),
                w = self.width
            ),
            Outcome::Skipped(reason) => {
                // An error of several lines (a kernel's diagnostics) stays under its line.
                let reason = reason.to_string().replace('\n', "\n      ");
                format!("  {config:<w$}  skipped: {reason}", w = self.width)
            }
        }
    }

    fn winner(&self, name: &str, key: &str, best: &Timing, report: &Report, took: std::time::Duration) -> String {
        format!(
            "rutile: autotuning `{name}` for key `{key}` finished after {:.2} s ({} timed, {} skipped); best: `{}`, \
             {}, {}",
            took.as_secs_f64(),
            report.timed.len(),
            report.skipped.len(),
            best.config,
            milliseconds(best.time_ms),
            resources(&best.metadata)
        )
    }
}

/// A time as the printed tuning shows it.
fn milliseconds(ms: f64) -> String {
    format!("{ms:.4} ms")
}

/// A kernel's registers, spills and shared memory, as far as the device reports them.
fn resources(m: &KernelMetadata) -> String {
    let mut parts = Vec::new();
    if let Some(r) = m.registers {
        parts.push(format!("{r} registers"));
    }
    if let Some(s) = m.spill_bytes {
        parts.push(format!("{s} bytes spilled"));
    }
    parts.push(format!("{} bytes shared", m.shared_bytes));
    parts.join(", ")
}

fn launch_config(config: &Config, grid: &GridFn<'_>) -> Result<LaunchConfig> {
    Ok(LaunchConfig::new(grid(config)?)
        .num_warps(config.num_warps)
        .num_stages(config.num_stages)
        .persistent(config.persistent)
        .warp_specialize(config.warp_specialize)
        .maxnreg(config.maxnreg))
}

/// Whether `dev` runs kernels in software (lavapipe, the interpreter): one launch is
/// timed, and no cache is flushed.
fn is_software(dev: &dyn Device) -> bool {
    dev.properties().device_type == DeviceType::Cpu
}

/// Errors that one configuration causes and another may not: its kernel does not build
/// or lower, or the device cannot launch it (threads, shared memory).
fn config_specific(e: &Error) -> bool {
    matches!(
        e,
        Error::Build(_) | Error::Lower(_) | Error::Codegen { .. } | Error::Launch { .. } | Error::Autotune { .. }
    )
}

/// A device as the cache file names it: the GPU and the API, since the best configuration
/// of one GPU may differ between CUDA and Vulkan.
fn device_name(dev: &dyn Device) -> String {
    let p = dev.properties();
    format!("{} ({})", p.name, p.backend)
}

/// Whether the environment variable `name` is set to anything but empty or `0`.
fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

fn default_cache_file() -> Option<PathBuf> {
    match std::env::var_os(AUTOTUNE_CACHE_ENV) {
        Some(v) if v.is_empty() || v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(base.join("rutile").join("autotune.tsv"))
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::DeviceBuffer;
    use crate::compiled::{CompileOptions, CompiledKernel};
    use crate::device::Backend;
    use crate::CpuDevice;
    use rutile_ir::analysis::extent::ExtentPlan;
    use rutile_ir::target::Specialization;
    use rutile_ir::ScalarType;

    /// The interpreter dressed as a GPU whose compiler reports, for each `num_warps`, the
    /// resources [`resources_of`] says: what the tuner does with them can be tested
    /// without one.
    struct FakeGpu {
        cpu: CpuDevice,
        properties: DeviceProperties,
        /// Compiles running now, and the most that ever ran at once (each takes 20 ms, as a
        /// slow driver's would take longer).
        compiling: std::sync::atomic::AtomicUsize,
        most_compiling: std::sync::atomic::AtomicUsize,
    }

    /// 1 warp: a small kernel; 2: one that spills; 4: more shared memory than the device
    /// gives; 8: more registers than 8 warps' threads can have.
    fn resources_of(options: &CompileOptions) -> KernelMetadata {
        let threads = options.num_warps * 32;
        let (registers, spill_bytes, shared_bytes, max_threads) = match options.num_warps {
            1 => (40, 0, 1024, 1024),
            2 => (255, 128, 1024, 256),
            4 => (64, 0, 64 * 1024, 1024),
            _ => (255, 0, 0, 128),
        };
        KernelMetadata {
            threads,
            registers: Some(registers),
            spill_bytes: Some(spill_bytes),
            shared_bytes,
            max_threads: Some(max_threads),
        }
    }

    impl FakeGpu {
        fn new() -> FakeGpu {
            let mut properties = DeviceProperties::unknown("fake gpu", "rutile", Backend::Cuda, DeviceType::Cpu);
            properties.shared_memory_per_block_optin = Some(48 * 1024);
            FakeGpu {
                cpu: CpuDevice::new(),
                properties,
                compiling: Default::default(),
                most_compiling: Default::default(),
            }
        }
    }

    impl Device for FakeGpu {
        fn properties(&self) -> &DeviceProperties {
            &self.properties
        }
        fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer> {
            self.cpu.alloc(elem, len)
        }
        fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()> {
            self.cpu.write(buffer, bytes)
        }
        fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>> {
            self.cpu.read(buffer)
        }
        fn compile(
            &self,
            kernel: &Kernel,
            options: &CompileOptions,
            spec: &Specialization,
        ) -> Result<Arc<CompiledKernel>> {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.compiling.fetch_add(1, SeqCst) + 1;
            self.most_compiling.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            self.compiling.fetch_sub(1, SeqCst);
            Ok(Arc::new(CompiledKernel {
                kernel: kernel.clone(),
                options: *options,
                specialization: spec.clone(),
                metadata: resources_of(options),
                code: None,
                artifact: Box::new(()),
                extent: ExtentPlan::new(kernel),
            }))
        }
        fn launch_compiled(&self, kernel: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
            self.cpu.launch_compiled(kernel, grid, args)
        }
        fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()> {
            self.cpu.copy(src, dst)
        }
        fn synchronize(&self) -> Result<()> {
            self.cpu.synchronize()
        }
        fn id(&self) -> String {
            "fake".into()
        }
        fn device_key(&self) -> u64 {
            self.cpu.device_key()
        }
    }

    /// Tunes a vector add of 1000 elements with `tuner` on a [`FakeGpu`].
    fn tune(tuner: Autotuner) -> Result<Choice> {
        tune_on(&FakeGpu::new(), tuner)
    }

    fn tune_on(dev: &FakeGpu, tuner: Autotuner) -> Result<Choice> {
        let n = 1000;
        let (x, y, z) = (dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?);
        let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
        let build = |_: &Config| Ok(rutile_ir::seeds::vector_add(ScalarType::F32, 256)?);
        tuner
            .cache_file(None)
            .choose(dev, "1000", &build, &|_| Ok([4, 1, 1]), &args)
    }

    /// The configurations are compiled several at once, on the host's cores, before any is
    /// timed: a driver that takes seconds a kernel (NVIDIA's Vulkan driver on cooperative
    /// matrices) then costs the tuning a fraction of what it would one after another.
    #[test]
    fn configurations_compile_at_once_on_the_hosts_cores() {
        let dev = FakeGpu::new();
        let warps = [1, 1, 1, 1, 1, 1];
        let configs: Vec<Config> = warps
            .iter()
            .enumerate()
            .map(|(i, &w)| Config::new(&[("BLOCK", 256), ("COPY", i as i64)]).num_warps(w))
            .collect();
        let choice = tune_on(&dev, Autotuner::new("add", configs).unwrap()).unwrap();
        assert_eq!(choice.report.as_ref().unwrap().timed.len(), warps.len());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let most = dev.most_compiling.load(std::sync::atomic::Ordering::SeqCst);
        // (At least two at once where there are two cores; never more than the cores.)
        assert!(
            most >= cores.min(2) && most <= cores.min(warps.len()),
            "{most} compiles at once on {cores} cores"
        );
    }

    fn configs(warps: &[u32]) -> Vec<Config> {
        warps
            .iter()
            .map(|&w| Config::new(&[("BLOCK", 256)]).num_warps(w))
            .collect()
    }

    fn skipped_warps(choice: &Choice) -> Vec<(u32, SkipReason)> {
        let report = choice.report.as_ref().expect("a tuned choice has a report");
        report
            .skipped
            .iter()
            .map(|s| (s.config.num_warps, s.reason.clone()))
            .collect()
    }

    #[test]
    fn each_timed_kernel_reports_its_resources_and_what_cannot_run_is_skipped() {
        let tuner = Autotuner::new("add", configs(&[1, 2, 4, 8]))
            .unwrap()
            .skip_spilling(false);
        let choice = tune(tuner).unwrap();
        let report = choice.report.as_ref().unwrap();
        let timed: Vec<(u32, &KernelMetadata)> =
            report.timed.iter().map(|t| (t.config.num_warps, &t.metadata)).collect();
        let (one, two) = (resources_of(&options(1)), resources_of(&options(2)));
        assert_eq!(timed, vec![(1, &one), (2, &two)], "spilling runs unless asked");
        assert!(report.timed.iter().all(|t| t.time_ms > 0.0));
        assert_eq!(
            skipped_warps(&choice),
            vec![
                (
                    4,
                    SkipReason::SharedMemory {
                        needed: 64 * 1024,
                        limit: 48 * 1024
                    }
                ),
                (
                    8,
                    SkipReason::Registers {
                        registers: Some(255),
                        max_threads: 128,
                        threads: 256
                    }
                ),
            ]
        );
        assert!([1, 2].contains(&choice.config.num_warps));
        assert_eq!(
            choice.metadata(),
            Some(&resources_of(&options(choice.config.num_warps)))
        );
    }

    fn options(num_warps: u32) -> CompileOptions {
        CompileOptions {
            num_warps,
            num_stages: 3,
            persistent: false,
            warp_specialize: false,
            maxnreg: None,
        }
    }

    #[test]
    fn spilling_configurations_are_skipped_when_asked() {
        let tuner = Autotuner::new("add", configs(&[2, 1])).unwrap().skip_spilling(true);
        let choice = tune(tuner).unwrap();
        assert_eq!(choice.config.num_warps, 1);
        let skipped = skipped_warps(&choice);
        assert_eq!(
            skipped,
            vec![(
                2,
                SkipReason::Spills {
                    spill_bytes: 128,
                    registers: Some(255)
                }
            )]
        );
        let text = skipped[0].1.to_string();
        assert!(
            text.contains("spills 128 bytes") && text.contains(AUTOTUNE_SKIP_SPILLS_ENV),
            "{text}"
        );
    }

    #[test]
    fn when_nothing_runs_the_error_says_why_for_each() {
        let tuner = Autotuner::new("add", configs(&[2, 4, 8])).unwrap().skip_spilling(true);
        let text = tune(tuner).unwrap_err().to_string();
        for words in [
            "autotuning `add`: no configuration ran",
            "`BLOCK=256, num_warps=2, num_stages=3`: its kernel spills 128 bytes per thread",
            "`BLOCK=256, num_warps=4, num_stages=3`: its kernel needs 65536 bytes of shared memory per program; \
             the device gives one at most 49152",
            "`BLOCK=256, num_warps=8, num_stages=3`: its kernel (255 registers per thread) runs at most 128 \
             threads per program",
        ] {
            assert!(text.contains(words), "{words:?} in {text}");
        }
    }

    /// A shared-memory error of the lowering (as the GPU backends give, at their opt-in
    /// limit) reads as the same reason.
    #[test]
    fn a_lowering_out_of_shared_memory_is_a_shared_memory_reason() {
        let e = Error::Lower(LowerError::OutOfSharedMemory {
            kernel: "k".into(),
            needed: 300_000,
            limit: 232_448,
        });
        assert_eq!(
            SkipReason::of(&e),
            SkipReason::SharedMemory {
                needed: 300_000,
                limit: 232_448
            }
        );
    }

    #[test]
    fn printed_lines_show_times_resources_reasons_and_the_winner() {
        let list = configs(&[1, 4]);
        let printer = Printer::new(&list);
        let timing = Timing {
            config: list[0].clone(),
            time_ms: 0.0123,
            metadata: resources_of(&options(1)),
        };
        let line = printer.outcome(&list[0], &Outcome::Timed(timing.clone()));
        assert_eq!(
            line,
            "  BLOCK=256, num_warps=1, num_stages=3     0.0123 ms  40 registers, 0 bytes spilled, 1024 bytes shared"
        );
        let reason = SkipReason::SharedMemory {
            needed: 65536,
            limit: 49152,
        };
        let line = printer.outcome(&list[1], &Outcome::Skipped(reason.clone()));
        assert_eq!(
            line,
            format!("  BLOCK=256, num_warps=4, num_stages=3  skipped: {reason}")
        );
        let report = Report {
            timed: vec![timing.clone()],
            skipped: vec![Skipped {
                config: list[1].clone(),
                reason,
            }],
        };
        let line = printer.winner("add", "1000", &timing, &report, std::time::Duration::from_millis(1500));
        assert_eq!(
            line,
            "rutile: autotuning `add` for key `1000` finished after 1.50 s (1 timed, 1 skipped); best: \
             `BLOCK=256, num_warps=1, num_stages=3`, 0.0123 ms, 40 registers, 0 bytes spilled, 1024 bytes shared"
        );
        // Unreported resources are left out.
        assert_eq!(resources(&KernelMetadata::default()), "0 bytes shared");
    }
}
