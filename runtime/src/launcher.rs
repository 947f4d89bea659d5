//! [`Launcher`]: one kernel and launch configuration bound to a device, for launching many
//! times with little host cost.
//!
//! [`DeviceExt::launch`](crate::DeviceExt::launch) finds its compiled kernel in the device's
//! compile cache at every call: a structural hash of the whole IR and a comparison with the
//! cached kernel, about 2 µs for a small kernel, as much again as the driver's own launch.
//! A `Launcher` has done that once: each launch computes the arguments' specialization (a
//! pass over the arguments), finds it among the few it has compiled for, and goes to
//! [`Device::launch_compiled`], which still checks every argument, the grid and the buffer
//! extents.

use crate::compiled::CompiledKernel;
use crate::device::Device;
use crate::error::Result;
use crate::ext::DeviceExt;
use crate::launch::{Arg, LaunchConfig};
use rutile_ir::Kernel;
use std::sync::{Arc, Mutex};

/// A kernel and its [`LaunchConfig`] bound to a device (see the module's docs); made by
/// [`DeviceExt::launcher`](crate::DeviceExt::launcher).
///
/// ```
/// use rutile::{seeds, DeviceExt, LaunchConfig, ScalarType};
/// # fn main() -> Result<(), rutile::Error> {
/// let device = rutile::CpuDevice::new();
/// let (x, out) = (device.upload(&[1.0f32; 64])?, device.zeros::<f32>(64)?);
/// let add = device.launcher(&seeds::vector_add(ScalarType::F32, 64)?, &LaunchConfig::grid1(1))?;
/// for _ in 0..3 {
///     add.launch(&[(&x).into(), (&x).into(), (&out).into(), 64i32.into()])?;
/// }
/// assert_eq!(device.download(&out)?[0], 2.0);
/// # Ok(()) }
/// ```
pub struct Launcher<'d, D: Device + ?Sized> {
    device: &'d D,
    kernel: Kernel,
    config: LaunchConfig,
    /// The compiled forms launched so far, one per specialization (usually one or two).
    compiled: Mutex<Vec<Arc<CompiledKernel>>>,
}

impl<'d, D: Device + ?Sized> Launcher<'d, D> {
    pub(crate) fn new(device: &'d D, kernel: &Kernel, config: &LaunchConfig) -> Launcher<'d, D> {
        Launcher {
            device,
            kernel: kernel.clone(),
            config: *config,
            compiled: Mutex::new(Vec::new()),
        }
    }

    /// Launches over the configuration's grid; the same checks and the same compiled code
    /// as [`DeviceExt::launch`](crate::DeviceExt::launch).
    pub fn launch(&self, args: &[Arg<'_>]) -> Result<()> {
        self.launch_grid(self.config.grid, args)
    }

    /// Launches over `grid` programs instead of the configuration's grid (the compiled
    /// code does not depend on the grid).
    pub fn launch_grid(&self, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
        let compiled = self.compiled_for(args)?;
        if crate::checked::enabled(&self.config) {
            crate::checked::run_in_interpreter(self.device, &compiled, grid, args)?;
        }
        self.device.launch_compiled(&compiled, grid, args)
    }

    /// The compiled kernel these arguments launch (compiled at the first launch with their
    /// specialization).
    pub fn compiled_for(&self, args: &[Arg<'_>]) -> Result<Arc<CompiledKernel>> {
        // Compared in place, without building the arguments' specialization: this runs at
        // every launch.
        if let Some(c) = self
            .compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|c| crate::launch::specialized_for(&c.specialization, args))
        {
            return Ok(c.clone());
        }
        let compiled = self.device.compile_for(&self.kernel, &self.config, args)?;
        // (A panic elsewhere while the list was held leaves it whole: each push is one step.)
        self.compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(compiled.clone());
        Ok(compiled)
    }

    /// The kernel this launcher launches.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Its launch configuration.
    pub fn config(&self) -> &LaunchConfig {
        &self.config
    }
}
