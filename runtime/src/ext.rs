//! Typed conveniences on every [`Device`].

use crate::buffer::{bytes_of, values_of, Buffer, Element};
use crate::compiled::CompileOptions;
use crate::device::Device;
use crate::error::Result;
use crate::launch::{Arg, LaunchConfig};
use rutile_ir::Kernel;
use std::sync::Arc;

/// Typed buffers and one-call launches, for any [`Device`] (including `dyn Device`).
pub trait DeviceExt: Device {
    /// A buffer holding a copy of `data`.
    fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let raw = self.alloc(T::TYPE, data.len())?;
        self.write(&raw, &bytes_of(data))?;
        Buffer::from_raw(raw)
    }
    /// A zeroed buffer of `len` elements.
    fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Buffer::from_raw(self.alloc(T::TYPE, len)?)
    }
    /// Copies a buffer's contents back (waits for the work that writes it).
    fn download<T: Element>(&self, buffer: &Buffer<T>) -> Result<Vec<T>> {
        values_of(T::TYPE, self.read(buffer.raw())?)
    }
    /// Overwrites a buffer with `data` (of the same length).
    fn upload_into<T: Element>(&self, buffer: &Buffer<T>, data: &[T]) -> Result<()> {
        if data.len() != buffer.len() {
            return Err(crate::Error::Buffer(format!(
                "writing {} elements into a buffer of {}",
                data.len(),
                buffer.len()
            )));
        }
        self.write(buffer.raw(), &bytes_of(data))
    }
    /// Compiles (once, cached) and launches `kernel` with `config` on `args`.
    ///
    /// With [`LaunchConfig::check_bounds`] (or `RUTILE_CHECK_BOUNDS=1`), the launch runs in
    /// the bounds-checked interpreter first and reaches the device only without a fault.
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        let compiled = self.compile_for(kernel, config, args)?;
        if crate::checked::enabled(config) {
            crate::checked::run_in_interpreter(self, &compiled, config.grid, args)?;
        }
        self.launch_compiled(&compiled, config.grid, args)
    }
    /// `kernel` and `config` bound to this device, for launching many times: each launch
    /// skips the compile cache's lookup of the whole kernel that [`launch`](Self::launch)
    /// does (see [`Launcher`](crate::Launcher)). Nothing is compiled until the first launch.
    fn launcher(&self, kernel: &Kernel, config: &LaunchConfig) -> Result<crate::Launcher<'_, Self>> {
        Ok(crate::Launcher::new(self, kernel, config))
    }
    /// Compiles `kernel` specialized for these arguments (cached).
    fn compile_for(
        &self,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<Arc<crate::CompiledKernel>> {
        crate::launch::check_args(kernel, args, self.device_key())?;
        crate::launch::check_maxnreg(kernel, config.maxnreg)?;
        crate::launch::check_cluster(kernel, config, self.properties().max_cluster())?;
        crate::launch::check_programs_per_block(kernel, config, self.properties().backend)?;
        // Every buffer argument is a whole allocation (there are no views with an offset),
        // and allocations start at 256-byte boundaries on every backend.
        let spec = crate::launch::specialization(args, |_| true);
        self.compile(kernel, &CompileOptions::from(config), &spec)
    }
    /// `config` with the grid of a kernel whose programs walk `items` (rows, tiles) with a
    /// stride of the grid, as the persistent softmax tutorial launches it: as many programs
    /// as the device holds at once, compiled for these arguments, or, where a multiprocessor
    /// holds few of them, as few as walk the items in the same rounds
    /// ([`crate::occupancy::persistent_grid`]: never more than `items`). In clusters
    /// (`config.cluster` over 1), of a kernel whose clusters walk the items: as many
    /// clusters as the device holds at once ([`crate::occupancy::persistent_cluster_grid`]).
    fn resident_grid(
        &self,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &[Arg<'_>],
        items: u32,
    ) -> Result<LaunchConfig> {
        let compiled = self.compile_for(kernel, &config, args)?;
        let props = self.properties();
        let programs = match config.cluster {
            0 | 1 => crate::occupancy::persistent_grid(props, &compiled.metadata, items),
            c => crate::occupancy::persistent_cluster_grid(props, &compiled.metadata, c, items),
        };
        Ok(LaunchConfig {
            grid: [programs, 1, 1],
            ..config
        })
    }
}

impl<D: Device + ?Sized> DeviceExt for D {}
