//! What a tuning puts back: the buffers a kernel accumulates into or updates in place
//! (Triton's `reset_to_zero` and `restore_value`). Every timing launch of every
//! configuration would otherwise start from what the one before left, and the launch
//! that follows the tuning from all of them together: a kernel that adds into its output
//! would return its sum many times over, silently.

use crate::bench::{do_bench_prepared, CacheFlush, Stats};
use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::Arg;
use rutile_ir::Kernel;

/// For each buffer to put back, the argument's position and what to copy into it: a
/// zeroed buffer of its shape (`reset_to_zero`) or a copy of it made before the tuning
/// (`restore_value`).
pub(super) struct Restorer {
    sources: Vec<(usize, DeviceBuffer)>,
}

impl Restorer {
    /// The buffers `reset` and `restore` name (parameters of `kernel`, which `args` are
    /// for), with their sources made on `dev`; an error (naming `tuner`) where a name is
    /// not a parameter, is a scalar, or is in both lists.
    pub(super) fn new(
        dev: &dyn Device,
        tuner: &str,
        kernel: &Kernel,
        args: &[Arg<'_>],
        reset: &[String],
        restore: &[String],
    ) -> Result<Restorer> {
        let err = |message: String| Error::Autotune {
            name: tuner.to_string(),
            message,
        };
        let mut sources = Vec::with_capacity(reset.len() + restore.len());
        let lists = [("reset_to_zero", reset), ("restore_value", restore)];
        for (list, names) in lists {
            for name in names {
                if list == "reset_to_zero" && restore.contains(name) {
                    return Err(err(format!(
                        "`{name}` is both in reset_to_zero and in restore_value: a buffer is either zeroed or restored"
                    )));
                }
                let Some(at) = kernel.params.iter().position(|p| p.name == *name) else {
                    let params: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
                    return Err(err(format!(
                        "{list} names `{name}`, which is not a parameter of `{}` (its parameters: {})",
                        kernel.name,
                        params.join(", ")
                    )));
                };
                let Some(Arg::Buffer(buffer)) = args.get(at) else {
                    return Err(err(format!(
                        "{list} names `{name}`, parameter {at} of `{}`, whose argument is not a buffer",
                        kernel.name
                    )));
                };
                if sources.iter().any(|(a, _)| *a == at) {
                    continue;
                }
                let source = dev.alloc(buffer.elem(), buffer.len())?;
                if list == "restore_value" {
                    dev.copy(buffer, &source)?;
                }
                sources.push((at, source));
            }
        }
        Ok(Restorer { sources })
    }

    /// Nothing to put back.
    pub(super) fn none() -> Restorer {
        Restorer { sources: Vec::new() }
    }

    /// Queues the copies that put the buffers of `args` back.
    pub(super) fn apply(&self, dev: &dyn Device, args: &[Arg<'_>]) -> Result<()> {
        for (at, source) in &self.sources {
            if let Some(Arg::Buffer(buffer)) = args.get(*at) {
                dev.copy(source, buffer)?;
            }
        }
        Ok(())
    }
}

/// How a tuning times a launch: the cache emptied before each timed one (where there is a
/// cache to empty), and `prepare` (the [`Restorer`]'s copies) before every one, untimed.
pub(super) struct Timer<'a> {
    pub(super) flush: Option<&'a CacheFlush>,
    pub(super) prepare: &'a dyn Fn() -> Result<()>,
}

impl Timer<'_> {
    /// The times of `f` over `warmup` untimed and `reps` timed runs ([`do_bench_prepared`]).
    pub(super) fn time(
        &self,
        dev: &dyn Device,
        warmup: usize,
        reps: usize,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Stats> {
        do_bench_prepared(dev, self.flush, &mut || (self.prepare)(), warmup, reps, f)
    }
}
