//! The bounds-checked debug mode ([`LaunchConfig::check_bounds`], `RUTILE_CHECK_BOUNDS=1`):
//! a launch runs first in the interpreter, on host copies of its buffers, and reaches the
//! device only if no program faults. One implementation for every device: it needs only
//! [`Device::read`] and the interpreter.

use crate::buffer::DeviceBuffer;
use crate::compiled::CompiledKernel;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::{check_launch, interpreter_args, Arg, LaunchConfig};
use rutile_ir::interp::{self, HostBuffer};
use std::sync::OnceLock;

/// The environment variable that turns the bounds-checked debug mode on for every launch
/// (`1`; unset, empty or `0` leave it to [`LaunchConfig::check_bounds`]). It is read once,
/// at the first launch.
pub const CHECK_BOUNDS_ENV: &str = "RUTILE_CHECK_BOUNDS";

/// Whether this launch is checked in the interpreter first.
pub(crate) fn enabled(config: &LaunchConfig) -> bool {
    static FROM_ENV: OnceLock<bool> = OnceLock::new();
    // Read once: a launch should not pay for an environment lookup.
    config.check_bounds
        || *FROM_ENV.get_or_init(|| std::env::var(CHECK_BOUNDS_ENV).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Runs the launch in the interpreter on copies of its buffers (the device's buffers are
/// left as they are); its first fault is an [`Error::BoundsCheck`].
pub(crate) fn run_in_interpreter<D: Device + ?Sized>(
    device: &D,
    compiled: &CompiledKernel,
    grid: [u32; 3],
    args: &[Arg<'_>],
) -> Result<()> {
    // The launch's own checks first, so a bad grid or argument reads as it would without
    // this mode.
    let max_grid = device.properties().max_grid.unwrap_or([u32::MAX; 3]);
    check_launch(compiled, grid, args, device.device_key(), max_grid)?;
    let kernel = &compiled.kernel;
    // One copy per distinct buffer: a buffer passed twice is one buffer in the interpreter too.
    let mut copied: Vec<&DeviceBuffer> = Vec::new();
    let mut host: Vec<HostBuffer> = Vec::new();
    let values = interpreter_args(kernel, args, |b| {
        if let Some(i) = copied.iter().position(|c| std::ptr::eq(*c, b)) {
            return Ok(i);
        }
        host.push(HostBuffer::from_bytes(b.elem(), device.read(b)?)?);
        copied.push(b);
        Ok(host.len() - 1)
    })?;
    // The interpreter's `device_print` lines are kept for a launch that faults, which never
    // reaches the device: they show what led there. Otherwise the device prints its own.
    let (run, printed) =
        interp::capture_prints(|| interp::run_clustered(kernel, grid, compiled.options.cluster, &values, &mut host));
    run.map_err(|source| {
        interp::print_captured(&printed);
        Error::BoundsCheck {
            kernel: kernel.name.clone(),
            device: device.id(),
            source: Box::new(source),
        }
    })
}
