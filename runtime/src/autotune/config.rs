//! One configuration the autotuner tries: meta-parameters and the launch's options.

use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use std::fmt;

/// One configuration to try: meta-parameters (Triton's `triton.Config({...})`), and the
/// launch's `num_warps` and `num_stages`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// The meta-parameters as `(name, value)` pairs, in the order given; read them with
    /// [`Config::value`].
    pub meta: Vec<(String, i64)>,
    /// [`LaunchConfig::num_warps`](LaunchConfig#structfield.num_warps); at least 1.
    pub num_warps: u32,
    /// [`LaunchConfig::num_stages`](LaunchConfig#structfield.num_stages); at least 1.
    pub num_stages: u32,
    /// [`LaunchConfig::persistent`].
    pub persistent: bool,
    /// [`LaunchConfig::warp_specialize`].
    pub warp_specialize: bool,
    /// [`LaunchConfig::tma_outer`].
    pub tma_outer: bool,
    /// [`LaunchConfig::maxnreg`].
    pub maxnreg: Option<u32>,
    /// [`LaunchConfig::programs_per_block`].
    pub programs_per_block: u32,
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
            tma_outer: false,
            maxnreg: None,
            programs_per_block: 1,
        }
    }
    /// Sets the warps per program, [`Config::num_warps`](#structfield.num_warps).
    pub fn num_warps(mut self, num_warps: u32) -> Config {
        self.num_warps = num_warps;
        self
    }
    /// Sets the software-pipelining depth, [`Config::num_stages`](#structfield.num_stages).
    pub fn num_stages(mut self, num_stages: u32) -> Config {
        self.num_stages = num_stages;
        self
    }
    /// Sets the persistent schedule, [`Config::persistent`](#structfield.persistent).
    pub fn persistent(mut self, persistent: bool) -> Config {
        self.persistent = persistent;
        self
    }
    /// Sets warp specialization, [`Config::warp_specialize`](#structfield.warp_specialize).
    pub fn warp_specialize(mut self, warp_specialize: bool) -> Config {
        self.warp_specialize = warp_specialize;
        self
    }
    /// Sets [`Config::tma_outer`](#structfield.tma_outer).
    pub fn tma_outer(mut self, tma_outer: bool) -> Config {
        self.tma_outer = tma_outer;
        self
    }
    /// Sets the register limit per thread, [`Config::maxnreg`](#structfield.maxnreg).
    pub fn maxnreg(mut self, maxnreg: Option<u32>) -> Config {
        self.maxnreg = maxnreg;
        self
    }
    /// Sets the programs per thread block,
    /// [`Config::programs_per_block`](#structfield.programs_per_block).
    pub fn programs_per_block(mut self, programs: u32) -> Config {
        self.programs_per_block = programs;
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
        if self.tma_outer {
            write!(f, ", tma_outer")?;
        }
        if let Some(n) = self.maxnreg {
            write!(f, ", maxnreg={n}")?;
        }
        if self.programs_per_block > 1 {
            write!(f, ", programs_per_block={}", self.programs_per_block)?;
        }
        Ok(())
    }
}
