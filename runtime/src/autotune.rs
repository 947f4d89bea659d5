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
//! Configurations that cannot run (their kernel does not build, or needs more threads or
//! shared memory than the device has) are skipped, as Triton prunes them; an error only the
//! arguments or the device can cause (a wrong argument, a lost device) is returned at once.

use crate::bench::{do_bench, CacheFlush, FlushMode};
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ext::DeviceExt;
use crate::launch::{Arg, LaunchConfig};
use rutile_ir::Kernel;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The environment variable naming the autotuner's cache file; empty or `off` keeps
/// choices in memory only. Without it the file is `$XDG_CACHE_HOME/rutile/autotune.tsv`
/// (or `~/.cache/rutile/autotune.tsv`).
pub const AUTOTUNE_CACHE_ENV: &str = "RUTILE_AUTOTUNE_CACHE";

/// One configuration to try: meta-parameters (Triton's `triton.Config({...})`), and the
/// launch's `num_warps` and `num_stages`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub meta: Vec<(String, i64)>,
    pub num_warps: u32,
    pub num_stages: u32,
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
        write!(f, "num_warps={}, num_stages={}", self.num_warps, self.num_stages)
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
    /// Per (device, key): the choice and its built kernel.
    chosen: Mutex<HashMap<(String, String), Arc<Tuned>>>,
}

/// Builds the kernel of a configuration.
pub type BuildFn<'a> = dyn Fn(&Config) -> Result<Kernel> + 'a;
/// The grid of a configuration's launch.
pub type GridFn<'a> = dyn Fn(&Config) -> Result<[u32; 3]> + 'a;

impl Autotuner {
    /// An autotuner named `name` (it names the kernel family in the cache file and in
    /// errors) trying `configs`, which must be non-empty and distinct. The cache file is
    /// the default one ([`AUTOTUNE_CACHE_ENV`]).
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
            chosen: Mutex::new(HashMap::new()),
        })
    }

    /// Keeps choices in `path` (read at the first launch of each key, rewritten after
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
            Some(c) => c,
            None => {
                let c = self.tune(dev, build, grid, args)?;
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

    /// Times every configuration; the fastest wins.
    fn tune(&self, dev: &dyn Device, build: &BuildFn<'_>, grid: &GridFn<'_>, args: &[Arg<'_>]) -> Result<Choice> {
        let cpu = dev.properties().device_type == DeviceType::Cpu;
        let flush = if cpu {
            None
        } else {
            Some(CacheFlush::new(dev, FlushMode::Read)?)
        };
        let mut best: Option<Choice> = None;
        let mut skipped = Vec::new();
        for config in &self.configs {
            let timed = build(config).and_then(|kernel| {
                let launch = launch_config(config, grid)?;
                let mut run = || dev.launch(&kernel, &launch, args);
                let (warmup, reps) = match self.repetitions {
                    Some(r) => r,
                    None if cpu => (0, 1),
                    None => {
                        // One launch compiles, a second estimates the time of one.
                        run()?;
                        let ms = dev.time(&mut run)?.max(1e-3);
                        let count = |budget_ms: f64, min: f64| (budget_ms / ms).clamp(min, 1000.0) as usize;
                        (count(25.0, 1.0), count(100.0, 5.0))
                    }
                };
                do_bench(dev, flush.as_ref(), warmup, reps, &mut run)
            });
            match timed {
                Ok(stats) => {
                    if best.as_ref().is_none_or(|b| stats.median_ms < b.time_ms) {
                        best = Some(Choice {
                            config: config.clone(),
                            time_ms: stats.median_ms,
                            from_file: false,
                        });
                    }
                }
                Err(e) if config_specific(&e) => skipped.push(format!("`{config}`: {e}")),
                Err(e) => return Err(e),
            }
        }
        best.ok_or_else(|| Error::Autotune {
            name: self.name.clone(),
            message: format!("no configuration ran: {}", skipped.join("; ")),
        })
    }

    fn read_file(&self, device: &str, key: &str) -> Option<Choice> {
        let text = std::fs::read_to_string(self.file.as_ref()?).ok()?;
        text.lines().rev().find_map(|line| {
            let entry = Entry::parse(line)?;
            if (entry.name, entry.device, entry.key) != (&*self.name, device, key) {
                return None;
            }
            // A choice made among other configurations is ignored: one added since may
            // be faster, and the chosen one may no longer be listed.
            if entry.configs != self.fingerprint() {
                return None;
            }
            let config = self.configs.iter().find(|c| c.to_string() == entry.config)?;
            Some(Choice {
                config: config.clone(),
                time_ms: entry.time_ms,
                from_file: true,
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

    /// Replaces this key's line in the cache file. A file that cannot be written is
    /// reported on stderr and otherwise ignored: the cache only saves time.
    fn write_file(&self, device: &str, key: &str, choice: &Choice) {
        let Some(path) = &self.file else { return };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut text: String = old
            .lines()
            // Any line of this key goes, also one written in an older layout.
            .filter(|l| {
                let mut f = l.split('\t');
                (f.next(), f.next(), f.next()) != (Some(&*self.name), Some(device), Some(key))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let field = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        text += &format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            field(&self.name),
            field(device),
            field(key),
            choice.config,
            choice.time_ms,
            self.fingerprint()
        );
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            // Written aside and renamed, so that a reader never sees half a file.
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, path)
        });
        if let Err(e) = written {
            eprintln!("rutile: cannot write the autotuning cache {}: {e}", path.display());
        }
    }
}

/// One line of the cache file: name, device, key, configuration, time, and the
/// fingerprint of the list of configurations it was chosen from (tab-separated).
struct Entry<'a> {
    name: &'a str,
    device: &'a str,
    key: &'a str,
    config: &'a str,
    time_ms: f64,
    configs: &'a str,
}

impl<'a> Entry<'a> {
    fn parse(line: &'a str) -> Option<Entry<'a>> {
        let mut f = line.split('\t');
        let entry = Entry {
            name: f.next()?,
            device: f.next()?,
            key: f.next()?,
            config: f.next()?,
            time_ms: f.next()?.parse().ok()?,
            configs: f.next()?,
        };
        f.next().is_none().then_some(entry)
    }
}

fn launch_config(config: &Config, grid: &GridFn<'_>) -> Result<LaunchConfig> {
    Ok(LaunchConfig::new(grid(config)?)
        .num_warps(config.num_warps)
        .num_stages(config.num_stages))
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
