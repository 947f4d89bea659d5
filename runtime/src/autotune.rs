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
//! On a GPU the configurations timed within 10% of the fastest (at most four) are timed
//! again, in turns over three rounds, before one is chosen ([`Autotuner::runoff`]): timed
//! once each, one after the other, two close configurations may swap places from one tuning
//! to the next as the card's clocks move.
//!
//! The cache file may be shared by processes tuning at once: each adds its choice as one
//! whole line, and none is lost.
//!
//! Tuning launches the kernel many times on the caller's arguments. A kernel that adds into
//! a buffer (atomics, split sums) or updates one in place names it in
//! [`Autotuner::reset_to_zero`] or [`Autotuner::restore_value`], as in Triton: those
//! buffers are put back before every launch of the tuning and after it.

mod cache;
mod config;
mod report;
mod restore;
mod runoff;

pub use config::Config;
pub use report::{Choice, Report, SkipReason, Skipped, Timing};
pub use runoff::{DEFAULT_ROUNDS as DEFAULT_RUNOFF_ROUNDS, MARGIN as RUNOFF_MARGIN, MAX_FINALISTS as RUNOFF_FINALISTS};

use crate::bench::{CacheFlush, FlushMode};
use crate::compiled::KernelMetadata;
use crate::device::{Device, DeviceProperties, DeviceType};
use crate::error::{Error, Result};
use crate::ext::DeviceExt;
use crate::launch::{Arg, LaunchConfig};
use crate::progress::Progress;
use cache::Entry;
use rutile_ir::Kernel;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The environment variable naming the autotuner's cache file; empty or `off` keeps
/// choices in memory only. Without it the file is `$XDG_CACHE_HOME/rutile/autotune.tsv`
/// (or `~/.cache/rutile/autotune.tsv`).
pub const AUTOTUNE_CACHE_ENV: &str = "RUTILE_AUTOTUNE_CACHE";

/// The environment variable that, set to `1`, makes every
/// autotuner print its tuning on stderr (each configuration's time and resources, the
/// skipped ones with why, the winner; a choice read from the cache file in one line), as
/// Triton's `TRITON_PRINT_AUTOTUNING`; `0` or unset: not. Any other value makes
/// [`Autotuner::new`] an [`Error::Environment`] naming it. [`Autotuner::print`] overrides it
/// for one tuner.
pub const AUTOTUNE_PRINT_ENV: &str = "RUTILE_AUTOTUNE_PRINT";

/// The environment variable that, set to `1`, makes every autotuner skip configurations
/// whose kernel spills registers (`0` or unset: not; any other value is an
/// [`Error::Environment`]); [`Autotuner::skip_spilling`] overrides it for one tuner.
pub const AUTOTUNE_SKIP_SPILLS_ENV: &str = "RUTILE_AUTOTUNE_SKIP_SPILLS";

/// The environment variable that sets every autotuner's runoff rounds (a number up to
/// 1000; 0 turns the runoff off; anything else is an [`Error::Environment`]);
/// [`Autotuner::runoff`] overrides it for one tuner.
pub const AUTOTUNE_RUNOFF_ENV: &str = "RUTILE_AUTOTUNE_RUNOFF";

/// A chosen configuration's kernel and launch ([`Autotuner::tuned`]).
#[derive(Clone, Debug)]
pub struct Tuned {
    /// The chosen configuration and the report of its tuning.
    pub choice: Choice,
    /// The kernel built from the chosen configuration.
    pub kernel: Kernel,
    /// The launch of the chosen configuration: its grid, warps, stages and other options.
    pub launch: LaunchConfig,
}

/// Picks the fastest of a list of configurations per key and device, and remembers it.
pub struct Autotuner {
    name: String,
    configs: Vec<Config>,
    repetitions: Option<(usize, usize)>,
    runoff_rounds: Option<usize>,
    file: Option<PathBuf>,
    skip_spilling: bool,
    print: bool,
    /// Buffer parameters zeroed, and restored, around each launch of a tuning.
    reset_to_zero: Vec<String>,
    restore_value: Vec<String>,
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
            runoff_rounds: runoff_rounds_from_env()?,
            file: default_cache_file(),
            skip_spilling: crate::backends::env_opt_in(AUTOTUNE_SKIP_SPILLS_ENV)?,
            print: crate::backends::env_opt_in(AUTOTUNE_PRINT_ENV)?,
            reset_to_zero: Vec::new(),
            restore_value: Vec::new(),
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

    /// Rounds of the runoff: the configurations whose first time is within
    /// [`RUNOFF_MARGIN`] of the fastest (at most [`RUNOFF_FINALISTS`]) are timed again,
    /// each round timing each once, in an order that starts one further on every round, and
    /// the one with the fastest median of its rounds is chosen ([`Report::runoff`] says
    /// what each round measured). By default [`DEFAULT_RUNOFF_ROUNDS`] on a GPU and none
    /// on a software device, or as [`AUTOTUNE_RUNOFF_ENV`] says; 0 turns it off. A round's
    /// launches are as [`repetitions`](Self::repetitions) says, or by default about 10 ms
    /// untimed and 50 ms timed.
    pub fn runoff(mut self, rounds: usize) -> Autotuner {
        self.runoff_rounds = Some(rounds);
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

    /// Buffers the kernel accumulates into (its parameters' names), as Triton's
    /// `reset_to_zero`: zeroed before every launch of a tuning, and once more after it, so
    /// that each configuration is timed from zeros and the launch that follows the tuning
    /// ([`Self::launch`]) adds into zeros, as a launch without tuning would (the caller
    /// zeroes them before it). A kernel that adds into a buffer not named here returns
    /// from its first, tuned launch the sum of every launch of the tuning. Each named
    /// buffer costs a zeroed buffer of its size on the device while the tuning runs.
    pub fn reset_to_zero(mut self, names: &[&str]) -> Autotuner {
        self.reset_to_zero = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Buffers the kernel updates in place (its parameters' names), as Triton's
    /// `restore_value`: copied before a tuning, put back before every launch of it and
    /// after it, so that the launch that follows the tuning sees the caller's values. Each
    /// named buffer costs a copy of it on the device while the tuning runs.
    pub fn restore_value(mut self, names: &[&str]) -> Autotuner {
        self.restore_value = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// The configurations it tries, in order.
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }

    /// The configuration for `key` on `dev`: remembered, read from the cache file, or found
    /// by timing each configuration's launch with `args` (which it may overwrite, as the
    /// launch itself would, except the buffers [`Self::reset_to_zero`] and
    /// [`Self::restore_value`] name: those it puts back).
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
        // The buffers put back before every launch, and after the tuning whatever came of
        // it (nothing to put back where no configuration built: none will launch).
        let restorer = match built.iter().find_map(|b| b.as_ref().ok()) {
            Some((kernel, _)) => {
                restore::Restorer::new(dev, &self.name, kernel, args, &self.reset_to_zero, &self.restore_value)?
            }
            None => restore::Restorer::none(),
        };
        let prepare = || restorer.apply(dev, args);
        let timer = restore::Timer {
            flush: flush.as_ref(),
            prepare: &prepare,
        };
        let tuned = (|| -> Result<Choice> {
            let (compiled, threads) = self.precompile(dev, &built, args);
            if self.print && threads > 1 {
                progress.println(&format!(
                    "rutile: compiled {compiled} configurations on {threads} threads in {:.2} s",
                    started.elapsed().as_secs_f64()
                ));
            }
            let mut report = Report::default();
            // The kernels that ran, by configuration, for the runoff.
            let mut ran: Vec<Option<(Kernel, LaunchConfig)>> = vec![None; self.configs.len()];
            for ((config, kernel), ran) in self.configs.iter().zip(built).zip(&mut ran) {
                progress.step(config.to_string());
                let outcome = match kernel.and_then(|(k, launch)| {
                    let outcome = self.try_config(dev, &timer, &k, &launch, args, config);
                    *ran = Some((k, launch));
                    outcome
                }) {
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
            let rounds = self
                .runoff_rounds
                .unwrap_or(if is_software(dev) { 0 } else { runoff::DEFAULT_ROUNDS });
            let kernel_of = |config: &Config| {
                let at = self.configs.iter().position(|c| c == config)?;
                ran[at].as_ref().map(|(k, l)| (k, l))
            };
            let repetitions = |ms: f64| self.runoff_repetitions(dev, ms);
            runoff::run(dev, &timer, &mut report, rounds, &kernel_of, &repetitions, args)?;
            if self.print && !report.runoff.is_empty() {
                progress.println(&printer.runoff(&report));
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
        })();
        // The tuning's own error, where it failed, before one in putting the buffers back.
        let restored = prepare();
        let choice = tuned?;
        restored?;
        Ok(choice)
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

    /// Untimed and timed launches of one round of the runoff, for a configuration whose
    /// launch took `ms` in the first pass.
    fn runoff_repetitions(&self, dev: &dyn Device, ms: f64) -> (usize, usize) {
        match self.repetitions {
            Some(r) => r,
            None if is_software(dev) => (0, 1),
            None => launches_within(ms, 10.0, 50.0),
        }
    }

    /// Compiles `config`'s kernel (found in the compile cache when `precompile` did), and
    /// times it unless the device cannot run it (or should not, as asked). An error is the
    /// configuration's or the launch's: the caller tells which.
    fn try_config(
        &self,
        dev: &dyn Device,
        timer: &restore::Timer<'_>,
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
                (timer.prepare)()?;
                run()?;
                (timer.prepare)()?;
                launches_within(dev.time(&mut run)?, 25.0, 100.0)
            }
        };
        let stats = timer.time(dev, warmup, reps, &mut run)?;
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

    /// The runoff's line: each finalist with its rounds' medians.
    fn runoff(&self, report: &Report) -> String {
        let finalists: Vec<String> = report
            .runoff
            .iter()
            .map(|(config, rounds)| {
                let times: Vec<String> = rounds.iter().map(|&ms| milliseconds(ms)).collect();
                format!("`{config}` {}", times.join(" / "))
            })
            .collect();
        format!(
            "rutile: runoff of {} finalists over {} rounds: {}",
            report.runoff.len(),
            report.runoff.first().map_or(0, |(_, r)| r.len()),
            finalists.join("; ")
        )
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
    if let Some(dots) = &m.dots {
        parts.push(dots.to_string());
    }
    parts.join(", ")
}

fn launch_config(config: &Config, grid: &GridFn<'_>) -> Result<LaunchConfig> {
    Ok(LaunchConfig::new(grid(config)?)
        .num_warps(config.num_warps)
        .num_stages(config.num_stages)
        .persistent(config.persistent)
        .warp_specialize(config.warp_specialize)
        .tma_outer(config.tma_outer)
        .maxnreg(config.maxnreg)
        .programs_per_block(config.programs_per_block))
}

/// Untimed and timed launches of a kernel whose launch takes `ms` that fill about
/// `warmup_ms` and `timed_ms` (at least 1 and 5, at most 1000 each).
fn launches_within(ms: f64, warmup_ms: f64, timed_ms: f64) -> (usize, usize) {
    let count = |budget_ms: f64, min: f64| (budget_ms / ms.max(1e-3)).clamp(min, 1000.0) as usize;
    (count(warmup_ms, 1.0), count(timed_ms, 5.0))
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

/// The most runoff rounds [`AUTOTUNE_RUNOFF_ENV`] may ask for: each round times every
/// finalist again, so more than this is a typo, not a wish.
const MAX_RUNOFF_ROUNDS: u32 = 1000;

/// The runoff rounds [`AUTOTUNE_RUNOFF_ENV`] asks for, if set (and not empty); anything but
/// a count up to [`MAX_RUNOFF_ROUNDS`] is an [`Error::Environment`] naming the variable.
fn runoff_rounds_from_env() -> Result<Option<usize>> {
    let value = std::env::var(AUTOTUNE_RUNOFF_ENV).ok().filter(|v| !v.trim().is_empty());
    let rounds = crate::backends::parse_count(
        AUTOTUNE_RUNOFF_ENV,
        value.as_deref(),
        0..=MAX_RUNOFF_ROUNDS,
        "a number of runoff rounds (0 for none)",
    )?;
    Ok(rounds.map(|r| r as usize))
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
mod tests;
