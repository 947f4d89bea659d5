//! NVIDIA GPUs through the CUDA driver: block IR → shared lowering → PTX → the driver's JIT.

use super::{env_count, env_flag, env_opt_in, env_switch, sum_chains};
use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileCache, CompileOptions, CompiledKernel, KernelMetadata};
use crate::cuda::{
    CudaBuffer, CudaDevice, CudaError, CudaFunction, CudaModule, CudaTensorMap, KernelArg, LaunchConfig as CudaLaunch,
    TensorMapElem, TiledTensorMap,
};
use crate::device::{next_device_key, Backend, Device, DeviceProperties, DeviceType};
use crate::error::{bytes_text, Error, Result};
use crate::launch::{check_launch, threads_per_program, Arg};
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::thread::{LaunchValue, TensorMap, ThreadParam};
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
    /// The per-thread kernel's parameters: the launch's arguments, one for one, then (for
    /// a persistent kernel) the grid's size.
    params: Vec<ThreadParam>,
    /// Whether the kernel walks the launch's grid itself (`rutile_ir::lower::persistent`):
    /// it gets as many programs as the device holds at once, and the grid as arguments.
    persistent: bool,
    /// Where a thread block runs several programs (`rutile_ir::lower::block_programs`): how
    /// many; the kernel gets the program grid's x as an argument, and a block per group.
    block_programs: Option<rutile_ir::thread::BlockPrograms>,
    /// The tensor maps the kernel takes after its own parameters, each encoded at launch.
    tensor_maps: Vec<TensorMapSlot>,
}

/// One tensor map of a kernel, and the last one encoded for it: launches over the same
/// buffer and sizes pass it again without calling the driver.
struct TensorMapSlot {
    map: TensorMap,
    last: Mutex<Option<(TiledTensorMap, CudaTensorMap)>>,
}

impl CudaGpu {
    /// Opens CUDA device `ordinal`; an error if there is no driver or no such GPU.
    pub fn open(ordinal: usize) -> Result<CudaGpu> {
        let device = CudaDevice::open(ordinal)?;
        let p = device.properties();
        let kind = if p.integrated {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        };
        let mut properties = DeviceProperties::unknown(p.name.clone(), "NVIDIA", Backend::Cuda, kind);
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

    /// How many clusters of a compiled kernel the GPU holds at once
    /// (`cuOccupancyMaxActiveClusters`, for the cluster it was compiled for; for a kernel
    /// without one, the programs resident on the whole GPU). Compiling a kernel in clusters
    /// already fails where this is 0.
    pub fn resident_clusters(&self, kernel: &CompiledKernel) -> Result<u32> {
        if let Some(resident) = kernel.metadata.resident_clusters {
            return Ok(resident);
        }
        let a = artifact(kernel)?;
        Ok(a.function.max_active_clusters(
            kernel.options.cluster.max(1),
            kernel.metadata.threads,
            kernel.metadata.shared_bytes as usize,
        )?)
    }

    /// Resident programs per multiprocessor for a compiled kernel (the occupancy the
    /// persistent grids are sized with): the driver's count, taken when the kernel was
    /// compiled ([`KernelMetadata::resident_programs`]), or asked of it again where that failed.
    pub fn occupancy(&self, kernel: &CompiledKernel) -> Result<u32> {
        if let Some(resident) = kernel.metadata.resident_programs {
            return Ok(resident);
        }
        let a = artifact(kernel)?;
        Ok(a.function
            .occupancy(kernel.metadata.threads, kernel.metadata.shared_bytes as usize)?
            .blocks_per_multiprocessor)
    }
}

/// A kernel in clusters must fit a whole cluster on the device at once: its programs run
/// together on the multiprocessors of one GPC, so a cluster of programs that each need a
/// whole multiprocessor (registers, shared memory) may be more than a GPC holds (a
/// smaller GPU of the same generation, a MIG slice). The driver would refuse every launch;
/// this says why, once, at compile time.
fn resident_clusters(
    kernel: &str,
    function: &crate::cuda::CudaFunction,
    cluster: u32,
    metadata: &KernelMetadata,
) -> Result<Option<u32>> {
    if cluster <= 1 {
        return Ok(None);
    }
    let resident = function.max_active_clusters(cluster, metadata.threads, metadata.shared_bytes as usize)?;
    if resident > 0 {
        return Ok(Some(resident));
    }
    Err(cluster_does_not_fit(kernel, cluster, metadata))
}

/// The error of a kernel none of whose clusters of `cluster` programs fits the device.
fn cluster_does_not_fit(kernel: &str, cluster: u32, metadata: &KernelMetadata) -> Error {
    Error::Launch {
        kernel: kernel.to_string(),
        message: format!(
            "cluster = {cluster}: no cluster of {cluster} programs of this kernel fits the device at once \
             ({} threads, {} registers a thread, {} bytes of shared memory a program); \
             use a smaller cluster, or fewer registers (`maxnreg`) or warps a program",
            metadata.threads,
            metadata.registers.map_or("?".to_string(), |r| r.to_string()),
            metadata.shared_bytes
        ),
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

impl CudaGpu {
    /// Appends the kernel's tensor maps to `raw` (the launch's own arguments, already
    /// converted), encoding those whose buffer or sizes changed since the last launch.
    fn push_tensor_maps(
        &self,
        compiled: &CompiledKernel,
        a: &CudaArtifact,
        args: &[Arg<'_>],
        raw: &mut Vec<KernelArg>,
    ) -> Result<()> {
        if a.tensor_maps.is_empty() {
            return Ok(());
        }
        let name = &compiled.kernel.name;
        let ints: Vec<Option<i128>> = args.iter().map(Arg::as_i128).collect();
        for (j, slot) in a.tensor_maps.iter().enumerate() {
            let p = slot.map.param as usize;
            let buffer = match (args.get(p), raw.get(p)) {
                (Some(Arg::Buffer(b)), Some(&KernelArg::Ptr(address))) => (address, b.len as u64),
                _ => {
                    return Err(Error::Argument {
                        kernel: name.clone(),
                        message: format!("tensor map {j} is over parameter {p}, which got no buffer"),
                    })
                }
            };
            let desc = tiled_map(name, &a.params, j, &slot.map, buffer, &ints)?;
            let mut last = slot.last.lock().unwrap();
            let encoded = match *last {
                Some((d, m)) if d == desc => m,
                _ => {
                    let m = self.device.encode_tensor_map(&desc).map_err(|e| match e {
                        e @ CudaError::ContextLost { .. } => Error::from(e),
                        e => Error::Argument {
                            kernel: name.clone(),
                            message: format!("tensor map {j} over `{}` ({desc}): {e}", a.params[p].name()),
                        },
                    })?;
                    *last = Some((desc, m));
                    m
                }
            };
            raw.push(KernelArg::TensorMap(encoded));
        }
        Ok(())
    }
}

/// The driver's description of tensor map `j` (`m`) of kernel `kernel` for one launch:
/// `buffer` is the device address and length in elements of the buffer behind its pointer
/// parameter, `ints` the launch's integer arguments (`None` for the others). Values the
/// driver would refuse, and maps that reach past the end of the buffer, are errors that
/// name the kernel, the parameter and the values.
fn tiled_map(
    kernel: &str,
    params: &[ThreadParam],
    j: usize,
    m: &TensorMap,
    buffer: (u64, u64),
    ints: &[Option<i128>],
) -> Result<TiledTensorMap> {
    let error = |message: String| Error::Argument {
        kernel: kernel.to_string(),
        message: format!("tensor map {j} {message}"),
    };
    let Some(ThreadParam::Ptr { name: ptr, elem }) = params.get(m.param as usize) else {
        return Err(error(format!("reads parameter {}, which is not a pointer", m.param)));
    };
    let fail = |message: String| error(format!("over `{ptr}`: {message}"));
    let value = |v: LaunchValue, what: &str| -> Result<u64> {
        let (n, from) = match v {
            LaunchValue::Const(c) => (i128::from(c), String::new()),
            LaunchValue::Param(i) => {
                let name = params.get(i as usize).map_or("?", ThreadParam::name);
                let Some(n) = ints.get(i as usize).copied().flatten() else {
                    return Err(fail(format!(
                        "{what} is argument {i} (`{name}`), which is not an integer"
                    )));
                };
                (n, format!(" (argument {i}, `{name}`)"))
            }
        };
        u64::try_from(n)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| fail(format!("{what} is {n}{from}; it must be at least 1")))
    };
    // The values the kernel gives, each checked and named; then the view they make.
    let given = [
        m.dims[0].map(|d| (d, "the row length".to_string())),
        m.dims[1].map(|d| (d, "the row count".to_string())),
        Some((m.stride, "the row stride".to_string())),
    ];
    let outer = m.outer.iter().flatten().enumerate();
    let outer = outer.map(|(i, &s)| Some((s, format!("the stride of outer dimension {i}"))));
    for (v, what) in given.into_iter().chain(outer).flatten() {
        value(v, &what)?;
    }
    let size = elem.size_bytes() as u64;
    let (address, len) = buffer;
    // (Every value passed the checks above.)
    let plain = |v: LaunchValue| value(v, "a value").map(|n| n as i64).map_err(|e| e.to_string());
    let view = m
        .extents(plain, i64::try_from(len).unwrap_or(i64::MAX))
        .map_err(&fail)?;
    let mut dims = [1u64; 5];
    let mut strides_bytes = [0u64; 4];
    let mut box_dims = [1u32; 5];
    for (d, &e) in dims.iter_mut().zip(&view.dims) {
        *d = e as u64;
    }
    for (s, &e) in strides_bytes.iter_mut().zip(&view.strides) {
        *s = (e as u64).saturating_mul(size);
    }
    box_dims[..2].copy_from_slice(&m.box_dims);
    let map = TiledTensorMap {
        elem: tensor_map_elem(*elem),
        address,
        rank: view.dims.len(),
        dims,
        strides_bytes,
        box_dims,
        swizzle: m.swizzle,
    };
    map.check().map_err(|e| fail(format!("{e} ({map})")))?;
    Ok(map)
}

/// The tensor-map type of elements of `t`: one of its size where the driver has no such
/// type (the copies move bytes).
fn tensor_map_elem(t: ScalarType) -> TensorMapElem {
    match t {
        ScalarType::Bool
        | ScalarType::I8
        | ScalarType::U8
        | ScalarType::F8E4M3
        | ScalarType::F8E5M2
        | ScalarType::F8E4M3B15
        | ScalarType::F8E4M3Fnuz
        | ScalarType::F8E5M2Fnuz => TensorMapElem::U8,
        ScalarType::I16 | ScalarType::U16 => TensorMapElem::U16,
        ScalarType::F16 => TensorMapElem::F16,
        ScalarType::BF16 => TensorMapElem::BF16,
        ScalarType::I32 => TensorMapElem::I32,
        ScalarType::U32 => TensorMapElem::U32,
        ScalarType::F32 => TensorMapElem::F32,
        ScalarType::I64 => TensorMapElem::I64,
        ScalarType::U64 => TensorMapElem::U64,
        ScalarType::F64 => TensorMapElem::F64,
    }
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
                wgmma: (major, minor) == (9, 0) && hopper_enabled()?,
                // With it, the tensor memory accelerator feeds the pipeline where the lowering
                // proves an operand a box of a tensor, unless `RUTILE_TMA=0` keeps `cp.async`.
                tma: (major, minor) == (9, 0) && hopper_enabled()? && env_flag("RUTILE_TMA")?,
                // And stores a `dot`'s result tile through it, unless `RUTILE_TMA_STORE=0`
                // keeps the exchange through shared memory and 16-byte stores.
                tma_store: env_flag("RUTILE_TMA_STORE")?,
                // Boxes across a pointer's outer dimensions (attention's heads) and unmasked
                // ones: asked for by the launch, or by `RUTILE_TMA_OUTER=1` for every launch
                // (off by default: no faster than the `cp.async` ring for attention).
                tma_outer: options.tma_outer || env_opt_in("RUTILE_TMA_OUTER")?,
                // With them, stores of boxes across outer dimensions too (attention's output):
                // where one program's consumers take a producer's loop (the ping-pongs: on an
                // H200 3.5-5% faster at 1024 tokens, 2-3% at 2048), not elsewhere (within
                // run-to-run spread for one warpgroup a program and for several programs a
                // block); `RUTILE_TMA_STORE_OUTER=0` or `=1` says so for every launch.
                tma_store_outer: env_switch("RUTILE_TMA_STORE_OUTER")?
                    .unwrap_or(options.warp_specialize && options.programs_per_block <= 1),
                // `cp.async` from sm_80: the dot's operand loads are pipelined over
                // `num_stages` shared buffers.
                async_copy: major >= 8,
                num_stages: options.num_stages,
                persistent: options.persistent,
                // With a producer warpgroup of its own where TMA feeds a loop.
                warp_specialize: options.warp_specialize,
                cluster: options.cluster,
                programs_per_block: options.programs_per_block,
                // `RUTILE_EXP2_FMA=k`: k of every 8 f32 `exp2`s on the FMA units (0 by
                // default: every share measured slower on an H200).
                exp2_on_fma: env_count(
                    "RUTILE_EXP2_FMA",
                    0..=8,
                    "how many of every 8 f32 `exp2`s run on the FMA units",
                )?
                .unwrap_or(0),
                // `RUTILE_REDUCE_CHAINS=k`: a thread's elements of a max or min folded into k
                // interleaved partials; 1 (in order) by default: 4 measured within run-to-run
                // spread of it on an H200 (docs/performance.md, "The last values ahead, and
                // shorter chains timed").
                reduce_chains: env_count(
                    "RUTILE_REDUCE_CHAINS",
                    1..=32,
                    "into how many interleaved partials a thread folds a max or min",
                )?
                .unwrap_or(1),
                sum_chains: sum_chains()?,
                // `RUTILE_TMA_STAGED=0`: a warp-specialized loop's invariant `dot` operands
                // (attention's Q) loaded by the consumers, not copied by the producer.
                tma_staged_operands: env_flag("RUTILE_TMA_STAGED")?,
                // The operands of the `dot`s after such a loop (the rotated walk's last
                // values loaded ahead) copied by the producer too, on persistent grids
                // (where it copies them a tile ahead: the head-128 ping-pong 8-11% faster
                // than the plain grid's at 1024 tokens on an H200), not on plain ones (no
                // faster than `Q` alone);
                // `RUTILE_TMA_STAGED_AFTER=0` or `=1` says so for every launch.
                tma_staged_after: env_switch("RUTILE_TMA_STAGED_AFTER")?.unwrap_or(options.persistent),
                // `RUTILE_DIVISIONS_AS_SHIFTS=0`: divisions by constant powers of two in loops
                // left to `ptxas`, to time what the shifts save.
                divisions_as_shifts: env_flag("RUTILE_DIVISIONS_AS_SHIFTS")?,
                // `RUTILE_MASKS_BY_RUNS=0`: every element of a mask compared on its own, to
                // time what one comparison a run saves.
                masks_by_runs: env_flag("RUTILE_MASKS_BY_RUNS")?,
                // `RUTILE_REFILL_AFTER_READ=0`: loops of own copies refill another stage at
                // each iteration's top (one stage more of shared memory), to time it.
                refill_after_read: env_flag("RUTILE_REFILL_AFTER_READ")?,
                ..Target::nvidia(options.num_warps, p.shared_memory_per_block_optin as u32)
            };
            let thread_kernel = rutile_ir::lower::lower(kernel, &target, spec)?;
            // `RUTILE_PACK_BEFORE_FENCE=1`: a warpgroup MMA group's register A operands packed
            // before its fence (off: measured slower, `PtxTarget::pack_before_fence`).
            // `RUTILE_WIDE_PRODUCTS=0`: `umulhi` and `mul` of the same operands as two
            // instructions (`PtxTarget::wide_products`), to time what the one saves.
            // `RUTILE_NATIVE_FP8=0`: fp8 conversions from integer instructions as before
            // sm_89 (`PtxTarget::native_fp8_conversions`), to test and time that path.
            let ptx_target = rutile_ptx::PtxTarget::from_compute_capability(major, minor)
                .max_registers(options.maxnreg)
                .pack_before_fence(env_opt_in("RUTILE_PACK_BEFORE_FENCE")?)
                .wide_products(env_flag("RUTILE_WIDE_PRODUCTS")?)
                .native_fp8_conversions(env_flag("RUTILE_NATIVE_FP8")?);
            let ptx = rutile_ptx::emit(&thread_kernel, &ptx_target).map_err(|e| Error::Codegen {
                backend: "PTX",
                kernel: kernel.name.clone(),
                message: e.to_string(),
            })?;
            let dumped = crate::dump::write(
                &kernel.name,
                &[
                    ("block.ir", &|| kernel.to_string()),
                    ("thread.ir", &|| thread_kernel.to_string()),
                    ("ptx", &|| ptx.clone()),
                ],
            );
            let module = self.device.load_ptx(&ptx)?;
            // What the driver's compiler said of it: registers, spills, and its notes (an
            // ignored `setmaxnreg`, say).
            if let Some(path) = crate::dump::path(&kernel.name, dumped, "driver.txt") {
                if let Err(e) = std::fs::write(&path, module.jit_log()) {
                    eprintln!("rutile: cannot write {}: {e}", path.display());
                }
            }
            // Tensor maps are parameters too, after the kernel's own.
            let params = thread_kernel.params.len() + thread_kernel.tensor_maps.len();
            let function = module.function_with_params(&kernel.name, params)?;
            if options.cluster > rutile_ir::lower::PORTABLE_CLUSTER {
                function.allow_non_portable_clusters()?;
            }
            let info = function.info();
            // A producer warpgroup adds its threads to the `num_warps` warps'.
            let threads = threads.max(thread_kernel.threads());
            let mut metadata = KernelMetadata {
                threads,
                registers: Some(info.num_regs as u32),
                spill_bytes: Some(info.local_size_bytes as u32),
                shared_bytes: thread_kernel.shared_bytes(),
                max_threads: Some(info.max_threads_per_block),
                warp_specialized: thread_kernel.producer_warps > 0,
                dots: thread_kernel.dots.clone(),
                // The driver's count: from the registers and shared memory alone, a
                // persistent grid counted seven programs a multiprocessor of the layer
                // norm's row walk at 4096 columns (32784 bytes of shared memory each) where
                // the driver, which reserves 1 KiB more for each, holds six; the programs
                // past them ran as a second, partial wave (docs/performance.md).
                resident_programs: function
                    .occupancy(threads, thread_kernel.shared_bytes() as usize)
                    .ok()
                    .map(|o| o.blocks_per_multiprocessor),
                resident_clusters: None,
            };
            metadata.resident_clusters = resident_clusters(&kernel.name, &function, options.cluster, &metadata)?;
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
                    params: thread_kernel.params.clone(),
                    persistent: thread_kernel.persistent.is_some(),
                    block_programs: thread_kernel.block_programs,
                    tensor_maps: thread_kernel
                        .tensor_maps
                        .iter()
                        .map(|&map| TensorMapSlot {
                            map,
                            last: Mutex::new(None),
                        })
                        .collect(),
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
        let mut launched = grid;
        if let Some(b) = a.block_programs {
            // The program grid's x, after the kernel's own arguments; a block per group.
            raw.push(KernelArg::I32(grid[0] as i32));
            launched = b.blocks(grid);
        }
        if a.persistent {
            // The grid asked for (of blocks, where a block runs several programs), after the
            // arguments above.
            raw.extend(launched.iter().map(|&g| KernelArg::I32(g as i32)));
            let name = &compiled.kernel.name;
            launched = crate::occupancy::persistent_launch(self.properties(), &compiled.metadata, launched, name)?;
        }
        self.push_tensor_maps(compiled, a, args, &mut raw)?;
        let config = CudaLaunch::new(
            (launched[0], launched[1], launched[2]),
            (compiled.metadata.threads, 1, 1),
        )
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
fn hopper_enabled() -> Result<bool> {
    env_flag("RUTILE_HOPPER")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{parse_count, parse_switch};

    #[test]
    fn switches_from_the_environment_take_0_or_1_and_name_the_variable_otherwise() {
        let switch = |v| parse_switch("RUTILE_TMA_STAGED_AFTER", v);
        assert_eq!(switch(None).unwrap(), None);
        assert_eq!(switch(Some("")).unwrap(), None);
        assert_eq!(switch(Some("0")).unwrap(), Some(false));
        assert_eq!(switch(Some(" 1 ")).unwrap(), Some(true));
        for bad in ["off", "false", "on", "2", "yes"] {
            let e = switch(Some(bad)).unwrap_err().to_string();
            assert!(
                e.starts_with("RUTILE_TMA_STAGED_AFTER: ") && e.contains("0 (off) or 1 (on)") && e.contains(bad),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn counts_from_the_environment_take_their_range_and_name_the_variable_otherwise() {
        let share = |v| parse_count("RUTILE_EXP2_FMA", v, 0..=8, "a share");
        assert_eq!(share(None).unwrap(), None);
        assert_eq!(share(Some("3")).unwrap(), Some(3));
        assert_eq!(share(Some(" 8 ")).unwrap(), Some(8));
        for bad in ["9", "-1", "half", ""] {
            let e = share(Some(bad)).unwrap_err().to_string();
            assert!(
                e.starts_with("RUTILE_EXP2_FMA: ") && e.contains("0 to 8"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn a_cluster_that_does_not_fit_names_the_kernel_and_what_it_takes() {
        let metadata = KernelMetadata {
            threads: 1024,
            registers: Some(64),
            spill_bytes: Some(0),
            shared_bytes: 200 * 1024,
            max_threads: Some(1024),
            warp_specialized: false,
            dots: None,
            resident_programs: None,
            resident_clusters: None,
        };
        let e = cluster_does_not_fit("softmax_cluster_kernel", 16, &metadata).to_string();
        for needle in [
            "softmax_cluster_kernel",
            "cluster = 16",
            "1024 threads",
            "64 registers a thread",
            "204800 bytes of shared memory",
            "smaller cluster",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    /// `a: *f16, rows: i32, cols: i32, stride: i64`; the map views `a` as `rows` x `cols`.
    fn params() -> Vec<ThreadParam> {
        let scalar = |name: &str, ty| ThreadParam::Scalar { name: name.into(), ty };
        vec![
            ThreadParam::Ptr {
                name: "a".into(),
                elem: ScalarType::F16,
            },
            scalar("rows", ScalarType::I32),
            scalar("cols", ScalarType::I32),
            scalar("stride", ScalarType::I64),
        ]
    }

    fn map() -> TensorMap {
        TensorMap {
            param: 0,
            dims: [Some(LaunchValue::Param(2)), Some(LaunchValue::Param(1))],
            stride: LaunchValue::Param(3),
            outer: [None; 3],
            box_dims: [64, 128],
            swizzle: 128,
        }
    }

    fn ints(rows: i128, cols: i128, stride: i128) -> Vec<Option<i128>> {
        vec![None, Some(rows), Some(cols), Some(stride)]
    }

    fn message(r: Result<TiledTensorMap>) -> String {
        match r {
            Err(Error::Argument { kernel, message }) => {
                assert_eq!(kernel, "gemm");
                message
            }
            other => panic!("expected an argument error, got {other:?}"),
        }
    }

    #[test]
    fn launch_values_become_the_driver_description() {
        let m = tiled_map(
            "gemm",
            &params(),
            0,
            &map(),
            (0x1000, 300 * 1024),
            &ints(300, 1000, 1024),
        )
        .unwrap();
        assert_eq!(
            m,
            TiledTensorMap::two_d(TensorMapElem::F16, 0x1000, [1000, 300], 2048, [64, 128], 128)
        );
        // Constants too; the last row need not be padded to the stride.
        let mut constant = map();
        constant.dims = [Some(LaunchValue::Const(64)), Some(LaunchValue::Const(2))];
        constant.stride = LaunchValue::Const(72);
        let m = tiled_map("gemm", &params(), 0, &constant, (0x1000, 72 + 64), &[]).unwrap();
        assert_eq!((m.dims[..2].to_vec(), m.strides_bytes[0]), (vec![64, 2], 144));
    }

    /// A map over heads: the rows unmasked (their extent the head stride over the row
    /// stride) and two outer dimensions, the outermost as many as the buffer holds.
    #[test]
    fn outer_dimensions_and_unmasked_rows_take_their_extents_from_the_strides() {
        let mut heads = map();
        heads.dims = [Some(LaunchValue::Const(64)), None];
        heads.stride = LaunchValue::Const(64);
        heads.outer = [
            Some(LaunchValue::Const(64 * 1024)),
            Some(LaunchValue::Const(64 * 1024 * 32)),
            None,
        ];
        heads.box_dims = [64, 128];
        let len = 64 * 1024 * 32 * 4;
        let m = tiled_map("gemm", &params(), 0, &heads, (0x1000, len), &[]).unwrap();
        assert_eq!(m.rank, 4);
        assert_eq!(m.dims[..4], [64, 1024, 32, 4]);
        assert_eq!(m.strides_bytes[..3], [128, 128 * 1024, 128 * 1024 * 32]);
        assert_eq!(m.box_dims, [64, 128, 1, 1, 1]);
        // Heads closer than a head's rows: refused, naming the overlap.
        heads.dims[1] = Some(LaunchValue::Const(1025));
        let e = message(tiled_map("gemm", &params(), 0, &heads, (0x1000, len), &[]));
        assert!(e.contains("overlapping dimensions"), "{e}");
    }

    #[test]
    fn values_the_driver_would_refuse_are_named() {
        let p = params();
        let at = |ints: Vec<Option<i128>>| message(tiled_map("gemm", &p, 1, &map(), (0x1000, 1 << 30), &ints));
        let e = at(ints(0, 1000, 1024));
        assert!(
            e.starts_with("tensor map 1 over `a`: ") && e.contains("row count is 0 (argument 1, `rows`)"),
            "{e}"
        );
        let e = at(ints(300, -5, 1024));
        assert!(e.contains("row length is -5 (argument 2, `cols`)"), "{e}");
        // 1001 halves: 2002 bytes, not a multiple of 16.
        let e = at(ints(300, 1000, 1001));
        assert!(
            e.contains("2002 bytes") && e.contains("multiple of 16") && e.contains("dims 1000 x 300"),
            "{e}"
        );
        let e = at(vec![None, Some(300), None, Some(1024)]);
        assert!(e.contains("argument 2 (`cols`), which is not an integer"), "{e}");
        // Past the end of the buffer: the copies would read it.
        let e = message(tiled_map(
            "gemm",
            &p,
            0,
            &map(),
            (0x1000, 299 * 1024 + 999),
            &ints(300, 1000, 1024),
        ));
        assert!(e.contains("the buffer holds 307175 from there"), "{e}");
    }
}
