//! NVIDIA GPUs through the CUDA driver: block IR → shared lowering → PTX → the driver's JIT.

use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileCache, CompileOptions, CompiledKernel, KernelMetadata};
use crate::cuda::{CudaBuffer, CudaDevice, CudaError, CudaFunction, CudaModule, KernelArg, LaunchConfig as CudaLaunch};
use crate::device::{next_device_key, Backend, Device, DeviceProperties, DeviceType};
use crate::error::{bytes_text, Error, Result};
use crate::launch::{check_launch, threads_per_program, Arg};
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{Kernel, ScalarType};
use std::sync::{Arc, Mutex};

/// A CUDA GPU as a rutile device.
pub struct CudaGpu {
    device: CudaDevice,
    properties: DeviceProperties,
    key: u64,
    cache: CompileCache,
}

/// The loaded module and function of a compiled kernel.
struct CudaArtifact {
    _module: CudaModule,
    function: CudaFunction,
}

impl CudaGpu {
    /// Opens CUDA device `ordinal`; an error if there is no driver or no such GPU.
    pub fn open(ordinal: usize) -> Result<CudaGpu> {
        let device = CudaDevice::open(ordinal)?;
        let p = device.properties();
        let mut properties =
            DeviceProperties::unknown(p.name.clone(), "NVIDIA", Backend::Cuda, DeviceType::DiscreteGpu);
        properties.compute_capability = Some(p.compute_capability);
        let v = p.driver_version;
        properties.api_version = Some(format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10));
        properties.multiprocessors = Some(p.multiprocessor_count);
        properties.registers_per_multiprocessor = Some(p.registers_per_multiprocessor);
        properties.registers_per_block = Some(p.registers_per_block);
        properties.shared_memory_per_block = Some(p.shared_memory_per_block as u32);
        properties.shared_memory_per_block_optin = Some(p.shared_memory_per_block_optin as u32);
        properties.shared_memory_per_multiprocessor = Some(p.shared_memory_per_multiprocessor as u32);
        properties.warp_size = Some(p.warp_size);
        properties.max_threads_per_block = Some(p.max_threads_per_block);
        properties.max_threads_per_multiprocessor = Some(p.max_threads_per_multiprocessor);
        properties.max_grid = Some(p.max_grid_dim);
        properties.l2_cache_bytes = Some(p.l2_cache_size as u64);
        properties.clock_khz = p.clock_rate_khz;
        properties.memory_clock_khz = p.memory_clock_rate_khz;
        properties.memory_bus_width_bits = p.memory_bus_width_bits;
        properties.total_memory_bytes = Some(p.total_memory as u64);
        Ok(CudaGpu {
            device,
            properties,
            key: next_device_key(),
            cache: CompileCache::default(),
        })
    }

    /// How many CUDA GPUs there are (0 without a driver).
    pub fn count() -> usize {
        CudaDevice::count().unwrap_or(0)
    }

    /// The driver-level device, for what the `Device` trait does not cover.
    pub fn cuda(&self) -> &CudaDevice {
        &self.device
    }

    fn storage<'b>(&self, b: &'b DeviceBuffer) -> Result<&'b Mutex<CudaBuffer<u8>>> {
        b.storage(self.key)
    }

    /// Resident programs per multiprocessor for a compiled kernel (the occupancy the
    /// persistent softmax tutorial sizes its grid with).
    pub fn occupancy(&self, kernel: &CompiledKernel) -> Result<u32> {
        let a = artifact(kernel)?;
        Ok(a.function
            .occupancy(kernel.metadata.threads, kernel.metadata.shared_bytes as usize)?
            .blocks_per_multiprocessor)
    }
}

fn artifact(kernel: &CompiledKernel) -> Result<&CudaArtifact> {
    kernel.artifact.downcast_ref::<CudaArtifact>().ok_or_else(|| {
        Error::Buffer(format!(
            "kernel `{}` was compiled for another device",
            kernel.kernel.name
        ))
    })
}

impl Device for CudaGpu {
    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer> {
        let bytes = len
            .checked_mul(elem.size_bytes())
            .ok_or_else(|| Error::Buffer(format!("{len} elements of {elem} overflow the address space")))?;
        let buf = CudaBuffer::<u8>::zeroed(&self.device, bytes).map_err(|e| match e {
            CudaError::OutOfMemory {
                call,
                requested,
                total,
                free,
                code,
            } => Error::OutOfMemory {
                device: self.id(),
                elem,
                len,
                requested: requested as u64,
                reason: format!(
                    "out of device memory: the device has {}{} ({call} failed with {code})",
                    bytes_text(total as u64),
                    free.map(|f| format!(", {} of them free", bytes_text(f as u64)))
                        .unwrap_or_default()
                ),
            },
            e => e.into(),
        })?;
        Ok(DeviceBuffer::new(elem, len, self.key, Box::new(Mutex::new(buf))))
    }

    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()> {
        Ok(self.storage(buffer)?.lock().unwrap().upload(bytes)?)
    }

    fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>> {
        Ok(self.storage(buffer)?.lock().unwrap().download()?)
    }

    fn compile(&self, kernel: &Kernel, options: &CompileOptions, spec: &Specialization) -> Result<Arc<CompiledKernel>> {
        self.cache.get_or_compile(kernel, options, spec, || {
            let p = self.device.properties();
            let threads = threads_per_program(
                kernel,
                options.num_warps,
                p.warp_size,
                p.max_threads_per_block,
                "threads per program",
            )?;
            // Shared memory is dynamic in rutile's PTX: a kernel may use up to the opt-in
            // maximum (227 KiB on an H100); the launch opts in above 48 KiB.
            let (major, minor) = p.compute_capability;
            let target = Target {
                // `min.NaN`/`max.NaN` from sm_80.
                native_float_minmax: major >= 8,
                // The tensor cores' `mma.sync.m16n8k16` from sm_80.
                mma_sync: major >= 8,
                // Hopper's warpgroup MMA (sm_90a only), unless `RUTILE_HOPPER=0` asks for
                // the mma.sync path.
                wgmma: (major, minor) == (9, 0) && hopper_enabled(),
                // `cp.async` from sm_80: the dot's operand loads are pipelined over
                // `num_stages` shared buffers.
                async_copy: major >= 8,
                num_stages: options.num_stages,
                ..Target::nvidia(options.num_warps, p.shared_memory_per_block_optin as u32)
            };
            let thread_kernel = rutile_ir::lower::lower(kernel, &target, spec)?;
            let ptx_target = rutile_ptx::PtxTarget::from_compute_capability(major, minor);
            let ptx = rutile_ptx::emit(&thread_kernel, &ptx_target).map_err(|e| Error::Codegen {
                backend: "PTX",
                kernel: kernel.name.clone(),
                message: e.to_string(),
            })?;
            crate::dump::write(
                &kernel.name,
                &[
                    ("block.ir", &|| kernel.to_string()),
                    ("thread.ir", &|| thread_kernel.to_string()),
                    ("ptx", &|| ptx.clone()),
                ],
            );
            let module = self.device.load_ptx(&ptx)?;
            let function = module.function_with_params(&kernel.name, thread_kernel.params.len())?;
            let info = function.info();
            let metadata = KernelMetadata {
                threads,
                registers: Some(info.num_regs as u32),
                spill_bytes: Some(info.local_size_bytes as u32),
                shared_bytes: thread_kernel.shared_bytes(),
                max_threads: Some(info.max_threads_per_block),
            };
            Ok(CompiledKernel {
                kernel: kernel.clone(),
                extent: ExtentPlan::new(kernel),
                options: *options,
                specialization: spec.clone(),
                metadata,
                code: Some(ptx),
                artifact: Box::new(CudaArtifact {
                    _module: module,
                    function,
                }),
            })
        })
    }

    fn launch_compiled(&self, compiled: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
        check_launch(compiled, grid, args, self.key, self.device.properties().max_grid_dim)?;
        let a = artifact(compiled)?;
        let mut raw = Vec::with_capacity(args.len());
        for arg in args {
            raw.push(match *arg {
                Arg::Buffer(b) => KernelArg::Ptr(self.storage(b)?.lock().unwrap().device_ptr()),
                Arg::Bool(v) => KernelArg::U8(v as u8),
                Arg::I8(v) => KernelArg::I8(v),
                Arg::I16(v) => KernelArg::I16(v),
                Arg::I32(v) => KernelArg::I32(v),
                Arg::I64(v) => KernelArg::I64(v),
                Arg::U8(v) => KernelArg::U8(v),
                Arg::U16(v) => KernelArg::U16(v),
                Arg::U32(v) => KernelArg::U32(v),
                Arg::U64(v) => KernelArg::U64(v),
                Arg::F32(v) => KernelArg::F32(v),
                Arg::F64(v) => KernelArg::F64(v),
            });
        }
        let config = CudaLaunch::new((grid[0], grid[1], grid[2]), (compiled.metadata.threads, 1, 1))
            .with_dynamic_shared(compiled.metadata.shared_bytes);
        // SAFETY: every pointer argument is a live buffer of this device whose element type
        // matches the parameter (checked above); the kernel's accesses are bounded by the
        // masks its author wrote, as in CUDA itself.
        unsafe { self.device.launch(&a.function, &config, &raw)? };
        Ok(())
    }

    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()> {
        crate::buffer::check_copy(src, dst)?;
        if std::ptr::eq(src, dst) {
            return Ok(());
        }
        let s = self.storage(src)?.lock().unwrap();
        Ok(self.storage(dst)?.lock().unwrap().copy_from(&s)?)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(self.device.synchronize()?)
    }

    fn time(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        let timer = self.device.timer()?;
        timer.start()?;
        f()?;
        timer.stop()?;
        Ok(timer.elapsed_ms()? as f64)
    }

    fn id(&self) -> String {
        format!("cuda:{}", self.device.ordinal())
    }

    fn device_key(&self) -> u64 {
        self.key
    }

    fn memory_in_use(&self) -> Result<crate::device::MemoryInUse> {
        let (free, total) = self.device.memory_info()?;
        Ok(crate::device::MemoryInUse {
            buffers: Some(self.device.buffer_bytes()),
            device: Some(total.saturating_sub(free) as u64),
        })
    }
}

/// Whether `dot` may use Hopper's `wgmma` where the device has it: yes unless the
/// environment sets `RUTILE_HOPPER=0` (then it runs on `mma.sync`, as on sm_80..89).
fn hopper_enabled() -> bool {
    std::env::var("RUTILE_HOPPER").map_or(true, |v| v.trim() != "0")
}
