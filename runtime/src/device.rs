//! The `Device` trait: what every backend (CUDA, wgpu, the CPU interpreter) offers, and the
//! properties it reports.

use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileOptions, CompiledKernel};
use crate::error::{Error, Result};
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

/// The environment variable that names the backends a test run requires, separated by
/// commas: `cuda`, `vulkan` (`RUTILE_REQUIRE=cuda,vulkan` on a GPU machine). GPU tests
/// skip a backend that has no device that opens, unless it is named here: then they fail,
/// with the error of opening it, so that a broken setup cannot pass as a machine without
/// that GPU. `RUTILE_REQUIRE_CUDA=1`, the older spelling of `RUTILE_REQUIRE=cuda`, still
/// counts.
pub const REQUIRE_ENV: &str = "RUTILE_REQUIRE";

/// The backends [`REQUIRE_ENV`] may name, and their names there.
const REQUIRABLE: [(Backend, &str); 2] = [(Backend::Cuda, "cuda"), (Backend::Vulkan, "vulkan")];

/// Parses a value of [`REQUIRE_ENV`]: backend names separated by commas (spaces around a
/// name and empty items are ignored; each backend once, in the order named). An unknown
/// name is an error that lists the valid ones.
pub fn parse_required_backends(value: &str) -> Result<Vec<Backend>> {
    let mut backends = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(&(backend, _)) = REQUIRABLE.iter().find(|(_, n)| *n == name) else {
            let valid: Vec<String> = REQUIRABLE.iter().map(|(_, n)| format!("`{n}`")).collect();
            return Err(Error::Environment {
                variable: REQUIRE_ENV,
                message: format!(
                    "unknown backend `{name}` in `{value}`; the valid names are {}, separated by commas",
                    valid.join(" and ")
                ),
            });
        };
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    Ok(backends)
}

/// The backends this run requires: [`REQUIRE_ENV`]'s, and CUDA where `RUTILE_REQUIRE_CUDA`
/// is `1`. Empty when neither is set; an error when `RUTILE_REQUIRE` is malformed.
pub fn required_backends() -> Result<Vec<Backend>> {
    let mut backends = match std::env::var(REQUIRE_ENV) {
        Ok(value) => parse_required_backends(&value)?,
        Err(std::env::VarError::NotPresent) => Vec::new(),
        Err(std::env::VarError::NotUnicode(value)) => {
            return Err(Error::Environment {
                variable: REQUIRE_ENV,
                message: format!("{value:?} is not valid UTF-8"),
            })
        }
    };
    if std::env::var("RUTILE_REQUIRE_CUDA").as_deref() == Ok("1") && !backends.contains(&Backend::Cuda) {
        backends.push(Backend::Cuda);
    }
    Ok(backends)
}

/// The check of a GPU test about to use `backend`: `opened` is `Ok` when a device of it
/// opened, else why none did. `Ok` when the test may go on (with the device, or skipping
/// the backend); an error when [`REQUIRE_ENV`] is malformed, or names `backend` and no
/// device opened, saying which and why.
pub fn check_required(backend: Backend, opened: std::result::Result<(), &dyn fmt::Display>) -> Result<()> {
    check_required_of(&required_backends()?, backend, opened)
}

fn check_required_of(
    required: &[Backend],
    backend: Backend,
    opened: std::result::Result<(), &dyn fmt::Display>,
) -> Result<()> {
    match opened {
        Err(why) if required.contains(&backend) => Err(Error::Environment {
            variable: REQUIRE_ENV,
            message: format!("a {backend} device is required, but none opens: {why}"),
        }),
        _ => Ok(()),
    }
}

/// [`check_required`] for every backend, on the devices [`crate::list_devices`] found:
/// a backend has a device when one of its listings opened; otherwise the errors of those
/// that did not, or why there are none, say why.
pub fn check_required_devices(listings: &[crate::DeviceListing]) -> Result<()> {
    for backend in required_backends()? {
        let (prefix, none_found) = match backend {
            Backend::Cuda => (
                "cuda:",
                // Why the driver lists no device (the driver's absence, or a count of 0).
                crate::cuda::probe()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "the driver lists no CUDA device".to_string()),
            ),
            _ => ("vulkan:", crate::vulkan::WgpuError::NoAdapter.to_string()),
        };
        let mine: Vec<_> = listings.iter().filter(|l| l.id.starts_with(prefix)).collect();
        let opened = mine
            .iter()
            .any(|l| l.device.as_ref().is_ok_and(|d| d.properties().backend == backend));
        if opened {
            continue;
        }
        let why = if mine.is_empty() {
            none_found
        } else {
            let failures: Vec<String> = mine
                .iter()
                .map(|l| match &l.device {
                    Err(e) => format!("{}: {e}", l.id),
                    Ok(d) => format!("{}: a {} device, not {backend}", l.id, d.properties().backend),
                })
                .collect();
            failures.join("; ")
        };
        check_required(backend, Err(&why))?;
    }
    Ok(())
}

/// What kind of processor a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// A GPU with its own memory, on a separate card or package.
    DiscreteGpu,
    /// A GPU that shares the host's memory (built into the CPU's package or chipset).
    IntegratedGpu,
    /// A virtual GPU of a virtualization environment, as a virtual machine sees it.
    VirtualGpu,
    /// A software rasterizer on the CPU (Mesa's lavapipe) or rutile's interpreter.
    Cpu,
    /// Anything the API reports as none of the above.
    Other,
}

/// A device's properties. `None` means the API does not say — never a guessed number.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProperties {
    /// The device's name as the driver reports it (e.g. `NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// The vendor's name: `NVIDIA` on CUDA, `rutile` for the interpreter, and on wgpu the
    /// name of a known vendor id, else `vendor 0x…` with the id.
    pub vendor: String,
    /// The API the device runs kernels through.
    pub backend: Backend,
    /// What kind of processor the device is.
    pub device_type: DeviceType,
    /// CUDA compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Driver or API version, as the API reports it.
    pub api_version: Option<String>,
    /// Number of multiprocessors (NVIDIA's SMs); on wgpu only where the driver reports them
    /// (NVIDIA's Vulkan driver).
    pub multiprocessors: Option<u32>,
    /// 32-bit registers available on one multiprocessor.
    pub registers_per_multiprocessor: Option<u32>,
    /// 32-bit registers available to one program (thread block).
    pub registers_per_block: Option<u32>,
    /// Shared (workgroup) memory a program may use without opting in, in bytes.
    pub shared_memory_per_block: Option<u32>,
    /// The most shared memory a program may opt in to, in bytes.
    pub shared_memory_per_block_optin: Option<u32>,
    /// Shared memory on one multiprocessor, shared by its resident programs, in bytes.
    pub shared_memory_per_multiprocessor: Option<u32>,
    /// Threads that run in lockstep: the warp size, or the subgroup size when fixed.
    pub warp_size: Option<u32>,
    /// The most threads (invocations) one program (block or workgroup) may have.
    pub max_threads_per_block: Option<u32>,
    /// The most threads resident on one multiprocessor.
    pub max_threads_per_multiprocessor: Option<u32>,
    /// The most programs a launch's grid may have in x, y and z. `u32::MAX` in each on the
    /// interpreter and on wgpu, which splits a grid larger than one dispatch allows into
    /// several dispatches.
    pub max_grid: Option<[u32; 3]>,
    /// L2 cache size, in bytes.
    pub l2_cache_bytes: Option<u64>,
    /// Peak multiprocessor clock, in kHz.
    pub clock_khz: Option<u32>,
    /// Peak memory clock, in kHz.
    pub memory_clock_khz: Option<u32>,
    /// Width of the global memory bus, in bits.
    pub memory_bus_width_bits: Option<u32>,
    /// Total device memory, in bytes.
    pub total_memory_bytes: Option<u64>,
    /// Element types kernels may use on this device.
    pub supported_types: Vec<ScalarType>,
    /// The cooperative-matrix multiply-adds (Vulkan's `VK_KHR_cooperative_matrix`, subgroup
    /// scope) the device was opened with, on which `dot` runs where one fits; `None` where
    /// the device has none or was opened without them (`RUTILE_COOP_MATRIX=0`), and on
    /// CUDA, whose `dot` uses `mma`/`wgmma` instead.
    pub cooperative_matrix: Option<Vec<rutile_ir::target::CoopMatrixShape>>,
}

impl DeviceProperties {
    /// The most programs a launch may group into a thread-block cluster
    /// ([`crate::LaunchConfig::cluster`]): 16 on CUDA devices of compute capability 9.0 and
    /// later (Hopper's limit; past CUDA's portable 8 the runtime opts the kernel in) and in
    /// the interpreter, 1 (no clusters) elsewhere.
    pub fn max_cluster(&self) -> u32 {
        match (self.backend, self.compute_capability) {
            (Backend::Cuda, Some((major, _))) if major >= 9 => rutile_ir::lower::MAX_CLUSTER,
            (Backend::Interpreter, _) => rutile_ir::lower::MAX_CLUSTER,
            _ => 1,
        }
    }
    /// Whether the device copies from global into shared memory asynchronously (CUDA's
    /// `cp.async`, compute capability 8.0 and later): where it does, a loop's `num_stages`
    /// copies its loads ahead (`KernelBuilder::for_range_staged`); elsewhere such a loop
    /// loads each iteration's data when it gets to it.
    pub fn async_copies(&self) -> bool {
        self.backend == Backend::Cuda && self.compute_capability.is_some_and(|cc| cc >= (8, 0))
    }
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
            cooperative_matrix: None,
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
        let coop = match &self.cooperative_matrix {
            None => "none".to_string(),
            Some(shapes) => shapes
                .iter()
                .map(|s| format!("{}x{}x{} {}->{}", s.m, s.n, s.k, s.ab, s.acc))
                .collect::<Vec<_>>()
                .join(", "),
        };
        writeln!(f, "  cooperative matrices    {coop}")?;
        match self.max_cluster() {
            1 => writeln!(f, "  thread-block clusters   none")?,
            n => writeln!(f, "  thread-block clusters   up to {n} programs")?,
        }
        let types: Vec<&str> = self.supported_types.iter().map(|t| t.name()).collect();
        write!(f, "  types                   {}", types.join(" "))
    }
}

/// Memory in use on a device, as far as it can tell ([`Device::memory_in_use`]). `None`
/// where the backend does not count or its API does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryInUse {
    /// Bytes of the live buffers of this device object, as rutile counts them (each
    /// buffer's allocation, padding included): CUDA and wgpu devices.
    pub buffers: Option<u64>,
    /// Bytes in use as the API below reports them, which includes what rutile does not
    /// allocate itself: on CUDA, `cuMemGetInfo`'s total less free (the whole GPU: every
    /// context and process on it, the driver's own memory, loaded kernels); on wgpu, the
    /// live allocations of wgpu's memory allocator for this device (rutile's buffers and
    /// wgpu's staging, uniform and query buffers; Vulkan itself has no such call).
    pub device: Option<u64>,
}

impl fmt::Display for MemoryInUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = |b: Option<u64>| b.map_or("not counted".to_string(), crate::error::bytes_text);
        write!(f, "buffers {}, device {}", bytes(self.buffers), bytes(self.device))
    }
}

/// A device that runs kernels: CUDA, wgpu or the CPU interpreter. Generic conveniences
/// (typed upload and download, launching a block-IR kernel) are in [`DeviceExt`](crate::DeviceExt).
pub trait Device: Send + Sync {
    /// The device's identity, limits and supported types, as read when it was opened.
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
    /// The memory in use on the device now (see [`MemoryInUse`] for what each backend
    /// counts). Work still queued may free more: synchronize first for a level to compare.
    /// The interpreter counts nothing (its buffers are host memory).
    fn memory_in_use(&self) -> Result<MemoryInUse> {
        Ok(MemoryInUse::default())
    }
    /// A number unique to this device object; buffers carry it so that a buffer of one
    /// device cannot be passed to another.
    fn device_key(&self) -> u64;
    /// Whether kernels may be compiled on several threads at once with every error still
    /// returned by the compile that caused it (the autotuner then compiles its
    /// configurations in parallel). Not where errors reported by a driver's validation
    /// layer are gathered per process and returned by whichever call comes next.
    fn compiles_in_parallel(&self) -> bool {
        true
    }
}

/// A fresh value for [`Device::device_key`].
pub(crate) fn next_device_key() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooperative_matrices_are_listed() {
        let mut p = DeviceProperties::unknown("gpu", "vendor", Backend::Vulkan, DeviceType::DiscreteGpu);
        assert_eq!(p.cooperative_matrix, None);
        assert!(p.to_string().contains("cooperative matrices    none"), "{p}");
        p.cooperative_matrix = Some(vec![rutile_ir::target::CoopMatrixShape {
            m: 16,
            n: 16,
            k: 16,
            ab: ScalarType::F16,
            acc: ScalarType::F32,
        }]);
        assert!(
            p.to_string().contains("cooperative matrices    16x16x16 f16->f32"),
            "{p}"
        );
    }

    #[test]
    fn clusters_are_listed() {
        let mut p = DeviceProperties::unknown("gpu", "vendor", Backend::Cuda, DeviceType::DiscreteGpu);
        p.compute_capability = Some((8, 0));
        assert!(p.to_string().contains("thread-block clusters   none"), "{p}");
        p.compute_capability = Some((9, 0));
        assert!(
            p.to_string().contains("thread-block clusters   up to 16 programs"),
            "{p}"
        );
        let v = DeviceProperties::unknown("gpu", "vendor", Backend::Vulkan, DeviceType::DiscreteGpu);
        assert!(v.to_string().contains("thread-block clusters   none"), "{v}");
    }

    #[test]
    fn required_backends_are_parsed() {
        let parse = |v: &str| parse_required_backends(v).unwrap();
        assert_eq!(parse(""), vec![]);
        assert_eq!(parse("cuda"), vec![Backend::Cuda]);
        assert_eq!(parse("cuda,vulkan"), vec![Backend::Cuda, Backend::Vulkan]);
        assert_eq!(parse(" vulkan , cuda,,vulkan "), vec![Backend::Vulkan, Backend::Cuda]);
        for (value, name) in [
            ("cuda,metal", "metal"),
            ("CUDA", "CUDA"),
            ("cuda;vulkan", "cuda;vulkan"),
            ("1", "1"),
        ] {
            let e = parse_required_backends(value).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Environment {
                        variable: REQUIRE_ENV,
                        ..
                    }
                ),
                "{e:?}"
            );
            assert_eq!(
                e.to_string(),
                format!(
                    "RUTILE_REQUIRE: unknown backend `{name}` in `{value}`; the valid names are `cuda` and \
                     `vulkan`, separated by commas"
                )
            );
        }
    }

    /// A required backend without a device is an error naming it and why it did not open;
    /// one not required is skipped.
    #[test]
    fn a_required_backend_must_open() {
        let why = "no wgpu adapter found";
        let required = [Backend::Cuda, Backend::Vulkan];
        let e = check_required_of(&required, Backend::Vulkan, Err(&why)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "RUTILE_REQUIRE: a vulkan device is required, but none opens: no wgpu adapter found"
        );
        assert!(check_required_of(&required, Backend::Vulkan, Ok(())).is_ok());
        assert!(check_required_of(&[Backend::Cuda], Backend::Vulkan, Err(&why)).is_ok());
        assert!(check_required_of(&[], Backend::Cuda, Err(&why)).is_ok());
    }
}
