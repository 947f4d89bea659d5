//! The `Device` trait: what every backend (CUDA, wgpu, the CPU interpreter) offers, and the
//! properties it reports.

use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileOptions, CompiledKernel};
use crate::error::Result;
use crate::launch::Arg;
use rutile_ir::target::Specialization;
use rutile_ir::{Kernel, ScalarType};
use std::fmt;
use std::sync::Arc;

/// Which API a device runs kernels through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// NVIDIA's CUDA driver, with PTX.
    Cuda,
    /// wgpu over Vulkan, with SPIR-V.
    Vulkan,
    /// wgpu over Metal.
    Metal,
    /// wgpu over DirectX 12.
    Dx12,
    /// rutile's CPU interpreter.
    Interpreter,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cuda => "cuda",
            Backend::Vulkan => "vulkan",
            Backend::Metal => "metal",
            Backend::Dx12 => "dx12",
            Backend::Interpreter => "cpu",
        })
    }
}

/// What kind of processor a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// A software rasterizer on the CPU (Mesa's lavapipe) or rutile's interpreter.
    Cpu,
    Other,
}

/// A device's properties. `None` means the API does not say — never a guessed number.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProperties {
    pub name: String,
    pub vendor: String,
    pub backend: Backend,
    pub device_type: DeviceType,
    /// CUDA compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Driver or API version, as the API reports it.
    pub api_version: Option<String>,
    pub multiprocessors: Option<u32>,
    pub registers_per_multiprocessor: Option<u32>,
    pub registers_per_block: Option<u32>,
    /// Shared (workgroup) memory a program may use without opting in, in bytes.
    pub shared_memory_per_block: Option<u32>,
    /// The most shared memory a program may opt in to, in bytes.
    pub shared_memory_per_block_optin: Option<u32>,
    pub shared_memory_per_multiprocessor: Option<u32>,
    /// Threads that run in lockstep: the warp size, or the subgroup size when fixed.
    pub warp_size: Option<u32>,
    pub max_threads_per_block: Option<u32>,
    /// The most threads resident on one multiprocessor.
    pub max_threads_per_multiprocessor: Option<u32>,
    pub max_grid: Option<[u32; 3]>,
    pub l2_cache_bytes: Option<u64>,
    pub clock_khz: Option<u32>,
    pub memory_clock_khz: Option<u32>,
    pub memory_bus_width_bits: Option<u32>,
    pub total_memory_bytes: Option<u64>,
    /// Element types kernels may use on this device.
    pub supported_types: Vec<ScalarType>,
}

impl DeviceProperties {
    /// Properties with only the identity known.
    pub fn unknown(
        name: impl Into<String>,
        vendor: impl Into<String>,
        backend: Backend,
        device_type: DeviceType,
    ) -> Self {
        DeviceProperties {
            name: name.into(),
            vendor: vendor.into(),
            backend,
            device_type,
            compute_capability: None,
            api_version: None,
            multiprocessors: None,
            registers_per_multiprocessor: None,
            registers_per_block: None,
            shared_memory_per_block: None,
            shared_memory_per_block_optin: None,
            shared_memory_per_multiprocessor: None,
            warp_size: None,
            max_threads_per_block: None,
            max_threads_per_multiprocessor: None,
            max_grid: None,
            l2_cache_bytes: None,
            clock_khz: None,
            memory_clock_khz: None,
            memory_bus_width_bits: None,
            total_memory_bytes: None,
            supported_types: ScalarType::ALL.to_vec(),
        }
    }
}

impl fmt::Display for DeviceProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn opt<T: fmt::Display>(v: &Option<T>) -> String {
            v.as_ref().map(|x| x.to_string()).unwrap_or_else(|| "unknown".into())
        }
        writeln!(
            f,
            "{} ({}, {}, {:?})",
            self.name, self.vendor, self.backend, self.device_type
        )?;
        if let Some((a, b)) = self.compute_capability {
            writeln!(f, "  compute capability      {a}.{b}")?;
        }
        writeln!(f, "  api version             {}", opt(&self.api_version))?;
        writeln!(f, "  multiprocessors         {}", opt(&self.multiprocessors))?;
        writeln!(
            f,
            "  registers / SM, block   {} / {}",
            opt(&self.registers_per_multiprocessor),
            opt(&self.registers_per_block)
        )?;
        writeln!(
            f,
            "  shared memory / block   {} (opt-in {}), per SM {}",
            opt(&self.shared_memory_per_block),
            opt(&self.shared_memory_per_block_optin),
            opt(&self.shared_memory_per_multiprocessor)
        )?;
        writeln!(f, "  warp (subgroup) size    {}", opt(&self.warp_size))?;
        writeln!(f, "  max threads / block     {}", opt(&self.max_threads_per_block))?;
        writeln!(
            f,
            "  max threads / SM        {}",
            opt(&self.max_threads_per_multiprocessor)
        )?;
        writeln!(f, "  L2 cache bytes          {}", opt(&self.l2_cache_bytes))?;
        writeln!(
            f,
            "  clocks (kHz) sm / mem   {} / {}, bus width {} bits",
            opt(&self.clock_khz),
            opt(&self.memory_clock_khz),
            opt(&self.memory_bus_width_bits)
        )?;
        let types: Vec<&str> = self.supported_types.iter().map(|t| t.name()).collect();
        write!(f, "  types                   {}", types.join(" "))
    }
}

/// A device that runs kernels: CUDA, wgpu or the CPU interpreter. Generic conveniences
/// (typed upload and download, launching a block-IR kernel) are in [`DeviceExt`](crate::DeviceExt).
pub trait Device: Send + Sync {
    fn properties(&self) -> &DeviceProperties;
    /// Allocates a zeroed buffer of `len` elements of `elem`.
    fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer>;
    /// Overwrites a buffer's contents; `bytes` must be exactly its size.
    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()>;
    /// Reads a buffer's contents (waiting for work that writes it).
    fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>>;
    /// Compiles a kernel for this device (cached: the same kernel, options and
    /// specialization compile once).
    fn compile(&self, kernel: &Kernel, options: &CompileOptions, spec: &Specialization) -> Result<Arc<CompiledKernel>>;
    /// Launches a compiled kernel over `grid` programs. Arguments are checked against the
    /// kernel's parameters first.
    fn launch_compiled(&self, kernel: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()>;
    /// Copies `src` into `dst` on the device (same element type and length); queued like a
    /// launch. The bandwidth of large copies is the ceiling that memory-bound kernels are
    /// measured against.
    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()>;
    /// Waits for all launched work to finish.
    fn synchronize(&self) -> Result<()>;
    /// Runs `f` and returns the device time it took in milliseconds, measured with device
    /// timers where the device has them (otherwise wall-clock time after synchronizing).
    fn time(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        self.synchronize()?;
        let start = std::time::Instant::now();
        f()?;
        self.synchronize()?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
    }
    /// A short identifier, as in `RUTILE_DEVICE` (`cuda:0`, `vulkan:1`, `cpu`).
    fn id(&self) -> String;
    /// A number unique to this device object; buffers carry it so that a buffer of one
    /// device cannot be passed to another.
    fn device_key(&self) -> u64;
}

/// A fresh value for [`Device::device_key`].
pub(crate) fn next_device_key() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
