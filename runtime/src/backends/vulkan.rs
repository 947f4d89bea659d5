//! Any Vulkan (or Metal, DX12) GPU through wgpu: block IR → shared lowering → naga module
//! (validated) → SPIR-V → wgpu compute pipeline.
//!
//! Warp-level steps use subgroup shuffles when the device fixes its subgroup size (it is
//! then the warp size of the lowering; the lowering assumes invocation `i` of a workgroup
//! is lane `i % size` of its subgroup, as on NVIDIA, AMD and lavapipe); otherwise they go
//! through workgroup memory. Grids larger than the dispatch limit are split into several
//! dispatches with a program offset in the uniform buffer.

use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileCache, CompileOptions, CompiledKernel, KernelMetadata};
use crate::device::{next_device_key, Backend, Device, DeviceProperties, DeviceType};
use crate::error::{bytes_text, Error, Result};
use crate::launch::{check_launch, threads_per_program, Arg};
use crate::vulkan::{self as wg, AdapterKind, KernelSource, WgpuBuffer, WgpuDevice, WgpuError, WgpuPipeline};
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{Kernel, ScalarType};
use rutile_spirv::ScalarArg;
use std::borrow::Cow;
use std::sync::Arc;

/// A wgpu adapter as a rutile device.
pub struct WgpuGpu {
    device: WgpuDevice,
    properties: DeviceProperties,
    key: u64,
    cache: CompileCache,
    /// While [`Device::time`] runs: the GPU time of the compute passes launched so far
    /// (NaN once a pass could not be timed).
    pass_time_ms: std::sync::Mutex<Option<f64>>,
    options: WgpuOptions,
}

/// Choices for a [`WgpuGpu`] that the device does not decide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Pass the launch block (grid and scalar arguments) in immediates (push constants)
    /// where it fits, instead of a uniform buffer. Off by default: measured on an H100
    /// through NVIDIA's driver, a dispatch with immediates took about 2.3 µs more GPU time
    /// than the same dispatch reading a uniform buffer (an empty launch 7.3 µs against
    /// 5.0 µs; a 32 MB copy kernel 17.7 µs against 15.5 µs). Other drivers may differ:
    /// `RUTILE_VULKAN_IMMEDIATES=1` turns it on for devices opened with
    /// [`WgpuGpu::open`].
    pub immediates: bool,
    /// Open the device with cooperative matrices (wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`,
    /// Vulkan's `VK_KHR_cooperative_matrix`) where the adapter has them, so that `dot` runs
    /// on the matrix units (`rutile_ir::lower`'s `coop` path). wgpu marks the feature
    /// experimental: rutile accepts that for the kernels it generates, which use only
    /// subgroup-scope loads, stores and multiply-adds on workgroup memory, validated by naga
    /// (and spirv-val in rutile's tests). [`WgpuOptions::from_env`] turns it on unless
    /// `RUTILE_COOP_MATRIX=0`, which keeps `dot` on the FMA path.
    pub cooperative_matrix: bool,
    /// Hold `f16` buffers that kernels move in 16-byte vectors as `vec4<u32>` words of
    /// `f16` pairs (`rutile_spirv::SpirvTarget::packed_f16`): one 16-byte access where
    /// `vec4<f16>` takes two of 8 bytes, which NVIDIA's driver does not merge. On by
    /// default; `RUTILE_VULKAN_PACKED_F16=0` turns it off, to measure the difference.
    pub packed_f16: bool,
    /// Which storage buffers a kernel loads and never writes are declared `NonWritable` in
    /// the SPIR-V words the driver gets (`rutile_spirv::SpirvKernel::read_only_bindings`;
    /// such kernels then go to the driver as rutile's own words, where the device takes
    /// them). All by default; `RUTILE_VULKAN_READ_ONLY=0` declares none, to measure the
    /// difference, and `RUTILE_VULKAN_READ_ONLY=Q,K` only those of the pointer parameters
    /// named, to tell which declaration a driver's behaviour depends on.
    pub read_only: ReadOnlyBuffers,
    /// Rescale an accumulator held in cooperative matrices row by row in place
    /// (`rutile_ir::target::Target::coop_scale`: attention's `acc * alpha[:, None]`), where
    /// the device takes rutile's SPIR-V words, which spell the element-wise products naga
    /// cannot. On by default; `RUTILE_COOP_SCALE=0` turns it off (the accumulator then goes
    /// to registers and back through workgroup memory each step), to measure the difference.
    pub coop_scale: bool,
    /// A subgroup barrier on workgroup memory before every cooperative-matrix load
    /// (`rutile_spirv::SpirvTarget::coop_load_fences`): what made the attention blocks the
    /// tutorial leaves out on NVIDIA's cooperative matrices compute right, at 19% of the
    /// matmul and 7–13% of attention on an H200. Off by default; `RUTILE_COOP_LOAD_FENCE=1`
    /// turns it on.
    pub coop_load_fences: bool,
    /// Take `umulhi(a, b)` and `a * b` of the same 32-bit registers from one 64-bit product
    /// (`rutile_spirv::SpirvTarget::wide_products`; Philox's rounds are made of such
    /// pairs). On by default; `RUTILE_WIDE_PRODUCTS=0` turns it off (on CUDA too), to
    /// measure the difference.
    pub wide_products: bool,
    /// Mark f64 arithmetic `NoContraction` in the words the driver gets
    /// (`rutile_spirv::SpirvTarget::exact_f64`), so that each f64 operation rounds once as
    /// the IR defines. On by default; `RUTILE_VULKAN_EXACT_F64=0` turns it off, to measure
    /// the difference.
    pub exact_f64: bool,
    /// Element types to treat as missing, as a device without them would: a kernel that
    /// uses one is refused with the error naming it. None by default;
    /// `RUTILE_VULKAN_TYPES_OFF=f64,f16` (type names, comma-separated) sets it, to check
    /// kernels for devices that lack those types (f64 on most mobile and Apple GPUs, f16
    /// or 64-bit integers on some) on one that has them.
    pub types_off: Vec<ScalarType>,
}

impl WgpuOptions {
    /// The defaults, as the environment's on/off switches set them (each field says which):
    /// each takes `0` or `1`, and any other value is an [`Error::Environment`] naming it, as
    /// the CUDA runtime's switches are.
    pub fn from_env() -> Result<WgpuOptions> {
        use super::{env_flag, env_opt_in};
        Ok(WgpuOptions {
            immediates: env_opt_in("RUTILE_VULKAN_IMMEDIATES")?,
            cooperative_matrix: env_flag("RUTILE_COOP_MATRIX")?,
            packed_f16: env_flag("RUTILE_VULKAN_PACKED_F16")?,
            read_only: ReadOnlyBuffers::parse(std::env::var("RUTILE_VULKAN_READ_ONLY").ok().as_deref()),
            coop_scale: env_flag("RUTILE_COOP_SCALE")?,
            coop_load_fences: env_opt_in("RUTILE_COOP_LOAD_FENCE")?,
            wide_products: env_flag("RUTILE_WIDE_PRODUCTS")?,
            exact_f64: env_flag("RUTILE_VULKAN_EXACT_F64")?,
            types_off: parse_types_off(std::env::var("RUTILE_VULKAN_TYPES_OFF").ok().as_deref())?,
        })
    }
}

/// The element types `RUTILE_VULKAN_TYPES_OFF` names (see [`WgpuOptions::types_off`]).
fn parse_types_off(value: Option<&str>) -> Result<Vec<ScalarType>> {
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            ScalarType::from_name(name).ok_or_else(|| Error::Environment {
                variable: "RUTILE_VULKAN_TYPES_OFF",
                message: format!("takes element type names (f16, f64, i64, bf16, ...); got {name:?}"),
            })
        })
        .collect()
}

/// Which of the buffers a kernel only reads the Vulkan backend declares read-only
/// ([`WgpuOptions::read_only`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ReadOnlyBuffers {
    /// Every one.
    #[default]
    All,
    /// None.
    None,
    /// Those of the pointer parameters of these names.
    Only(Vec<String>),
}

impl ReadOnlyBuffers {
    /// From `RUTILE_VULKAN_READ_ONLY`'s value: unset, empty or `1` all, `0` none, otherwise
    /// a comma-separated list of parameter names.
    pub fn parse(value: Option<&str>) -> ReadOnlyBuffers {
        let names: Vec<String> = value
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        match names.as_slice() {
            [] => ReadOnlyBuffers::All,
            [one] if one == "1" => ReadOnlyBuffers::All,
            [one] if one == "0" => ReadOnlyBuffers::None,
            _ => ReadOnlyBuffers::Only(names),
        }
    }
}

#[cfg(test)]
#[test]
fn read_only_takes_a_list_of_parameters() {
    use ReadOnlyBuffers::{All, None, Only};
    assert_eq!(ReadOnlyBuffers::parse(Option::None), All);
    assert_eq!(ReadOnlyBuffers::parse(Some("1")), All);
    assert_eq!(ReadOnlyBuffers::parse(Some("")), All);
    assert_eq!(ReadOnlyBuffers::parse(Some("0")), None);
    assert_eq!(
        ReadOnlyBuffers::parse(Some("Q, K,")),
        Only(vec!["Q".to_string(), "K".to_string()])
    );
    assert_eq!(ReadOnlyBuffers::parse(Some("V")), Only(vec!["V".to_string()]));
}

struct VulkanArtifact {
    pipeline: WgpuPipeline,
    bindings: rutile_spirv::BindingLayout,
    /// Whether the kernel walks the launch's grid itself (`rutile_ir::lower::persistent`):
    /// the grid's size then fills the scalar slots after the kernel's own parameters.
    persistent: bool,
    /// The kernel's `device_print` sites: a launch then binds a print buffer and prints
    /// its lines once the device is done (`vulkan_print.rs`).
    prints: Vec<rutile_spirv::PrintSite>,
}

impl From<WgpuError> for Error {
    fn from(e: WgpuError) -> Self {
        if let WgpuError::DeviceLost { reason } = e {
            Error::DeviceLost {
                backend: "wgpu",
                reason,
            }
        } else if e.is_unavailable() {
            Error::NoDevice(e.to_string())
        } else {
            Error::Device {
                backend: "wgpu",
                message: e.to_string(),
            }
        }
    }
}

impl WgpuGpu {
    /// Opens wgpu adapter `index` (as [`crate::vulkan::adapters`] lists them), or the best one,
    /// with [`WgpuOptions::from_env`].
    pub fn open(index: Option<usize>) -> Result<WgpuGpu> {
        WgpuGpu::open_with(index, WgpuOptions::from_env()?)
    }

    /// Like [`Self::open`], with `options`.
    pub fn open_with(index: Option<usize>, options: WgpuOptions) -> Result<WgpuGpu> {
        let device = if options.cooperative_matrix {
            // SAFETY: see `WgpuOptions::cooperative_matrix`: rutile's kernels use the
            // experimental feature only as naga validates it.
            match unsafe { WgpuDevice::open_with_cooperative_matrix(index) } {
                Err(WgpuError::MissingFeature { .. }) => WgpuDevice::open(index)?,
                opened => opened?,
            }
        } else {
            WgpuDevice::open(index)?
        };
        let p = device.properties();
        let (backend, device_type) = (
            match p.backend {
                wgpu::Backend::Metal => Backend::Metal,
                wgpu::Backend::Dx12 => Backend::Dx12,
                _ => Backend::Vulkan,
            },
            match p.kind {
                AdapterKind::Discrete => DeviceType::DiscreteGpu,
                AdapterKind::Integrated => DeviceType::IntegratedGpu,
                AdapterKind::Virtual => DeviceType::VirtualGpu,
                AdapterKind::Cpu => DeviceType::Cpu,
                AdapterKind::Other => DeviceType::Other,
            },
        );
        let vendor = p
            .vendor_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("vendor {:#x}", p.vendor_id));
        let mut properties = DeviceProperties::unknown(p.name.clone(), vendor, backend, device_type);
        properties.api_version = p.driver_info.clone().or_else(|| p.driver.clone());
        properties.shared_memory_per_block = Some(p.max_workgroup_storage_bytes);
        properties.shared_memory_per_block_optin = Some(p.max_workgroup_storage_bytes);
        properties.warp_size = fixed_subgroup(&device);
        properties.max_threads_per_block = Some(p.max_invocations_per_workgroup);
        properties.multiprocessors = p.multiprocessors;
        // Warps are subgroups of a fixed size there (NVIDIA: 32).
        properties.max_threads_per_multiprocessor = p
            .warps_per_multiprocessor
            .zip(properties.warp_size)
            .map(|(warps, size)| warps * size);
        // NVIDIA's driver is the one that reports multiprocessors (`VK_NV_shader_sm_builtins`);
        // every NVIDIA GPU from compute capability 5.0 on has 64 K 32-bit registers per
        // multiprocessor (CUDA C++ Programming Guide, "Technical Specifications per Compute
        // Capability"), and the occupancy needs that with a kernel's register count.
        if p.multiprocessors.is_some() && p.vendor_name() == Some("NVIDIA") {
            properties.registers_per_multiprocessor = Some(64 * 1024);
        }
        properties.total_memory_bytes = p.device_memory_bytes;
        properties.cooperative_matrix = cooperative_shapes(&device);
        // Larger grids are split into several dispatches.
        properties.max_grid = Some([u32::MAX; 3]);
        let f = &p.features;
        properties.supported_types.retain(|t| match t {
            ScalarType::F16 => f.f16,
            ScalarType::I64 | ScalarType::U64 => f.i64,
            ScalarType::F64 => f.f64,
            // bf16 and 8- and 16-bit integers are packed in 32-bit words in storage buffers
            // and widened in registers: every device has them.
            _ => true,
        });
        properties.supported_types.retain(|t| !options.types_off.contains(t));
        Ok(WgpuGpu {
            device,
            properties,
            key: next_device_key(),
            cache: CompileCache::default(),
            pass_time_ms: std::sync::Mutex::new(None),
            options,
        })
    }

    /// The wgpu-level device, for what the `Device` trait does not cover.
    pub fn wgpu(&self) -> &WgpuDevice {
        &self.device
    }

    /// Loses the device as a driver failure would (it is destroyed), so that tests can check
    /// that every later operation is an [`Error::DeviceLost`].
    #[doc(hidden)]
    pub fn simulate_device_loss(&self) {
        self.device.simulate_loss();
    }

    fn buffer<'b>(&self, b: &'b DeviceBuffer) -> Result<&'b WgpuBuffer> {
        b.storage(self.key)
    }

    fn target(&self, num_warps: u32, loops: LoopKind, dots: bool) -> Result<Target> {
        let fixed = fixed_subgroup(&self.device).filter(|_| self.device.features().subgroups);
        // Cooperative matrices belong to a subgroup: the warps must be subgroups.
        let coop = self.properties.cooperative_matrix.as_ref().filter(|_| fixed.is_some());
        // Without a fixed subgroup size, "warps" are groups of 32 invocations that exchange
        // values through workgroup memory. SPIR-V has no NaN-propagating maximum (f32 max
        // reductions use integer keys) and a workgroup variable per shared buffer (no two
        // share bytes): `Target::vulkan`.
        let warp_size = fixed.unwrap_or(32);
        Ok(Target {
            shuffles: fixed.is_some(),
            // 16-byte accesses, as on CUDA: rutile-spirv declares a buffer moved in whole
            // vectors as an array of `vec4` (buffers are allocated in multiples of 16
            // bytes), which makes one 16-byte load or store per vector. Except in kernels
            // with loops: measured on an H100 through NVIDIA's driver, 16-byte accesses
            // made the simple softmax faster (N = 1024: 58% -> 64% of the copy ceiling) but
            // the persistent one, which loads rows in a loop, much slower (N = 16384: 88% ->
            // 57%); one element per access, each warp access contiguous, was best there.
            // Why the driver's compiler does worse with vectors in loops is not known.
            // Two exceptions. Kernels whose `dot`s run on cooperative matrices: their
            // loops move operands into shared memory in 8-byte vectors, where 4-byte ones
            // ran at a fifth of the rate (H100). 16-byte ones did better than 8 in an earlier
            // K loop (154.8 and 144.5 TFLOPS at 4096^3 on the H100), and worse in the
            // loop that prefetches into registers: each thread's 16 bytes
            // are two 8-byte loads, so that a warp's load instruction reads every other 8
            // bytes of its span, and its stores into workgroup memory, 2 bytes each, meet
            // twice the bank conflicts. Measured on an H200 at 4096^3 (128 x 256 on 16
            // warps, read-only operands): 16-wide K steps, one prefetch set, 0.697 ms with
            // 16-byte vectors and 0.651 with 8; a hand-written 32-wide one 0.91 and 0.59
            // (`docs/performance.md`, "One workgroup stage, and the vectors of the K loop").
            // Kernels without `dot`s whose loops walk 16-bit elements, which 4-byte pieces
            // move two at a time: the layer norm tutorial's fp16 kernel at 4096 columns
            // went from 29% to 52% of the copy ceiling with 16-byte vectors, the long-row
            // one at 32768 from 18% to 45% (`docs/performance.md`).
            max_vector_bytes: match loops {
                LoopKind::None => 16,
                _ if dots && coop.is_some() => 8,
                LoopKind::Over16BitElements if !dots => 16,
                _ => 4,
            },
            coop_matrix: coop.cloned().unwrap_or_default(),
            coop_scale: coop.is_some() && self.options.coop_scale && self.device.features().spirv_passthrough,
            // `RUTILE_MASKS_BY_RUNS=0`: every element of a mask compared on its own.
            masks_by_runs: super::env_flag("RUTILE_MASKS_BY_RUNS")?,
            ..Target::vulkan(
                warp_size,
                num_warps,
                self.device.properties().max_workgroup_storage_bytes,
            )
        })
    }
}

/// The cooperative-matrix shapes of a device opened with them, in the lowering's terms;
/// `None` when it has none (or was opened without them).
fn cooperative_shapes(device: &WgpuDevice) -> Option<Vec<rutile_ir::target::CoopMatrixShape>> {
    if !device.features().cooperative_matrix {
        return None;
    }
    let scalar = |t: wgpu::CooperativeScalarType| match t {
        wgpu::CooperativeScalarType::F32 => ScalarType::F32,
        wgpu::CooperativeScalarType::F16 => ScalarType::F16,
        wgpu::CooperativeScalarType::I32 => ScalarType::I32,
        wgpu::CooperativeScalarType::U32 => ScalarType::U32,
    };
    let shapes: Vec<_> = device
        .properties()
        .cooperative_matrix_shapes
        .iter()
        .flatten()
        // A saturating accumulation clamps: not the `dot` of the IR.
        .filter(|s| !s.saturating)
        .map(|s| rutile_ir::target::CoopMatrixShape {
            m: s.m,
            n: s.n,
            k: s.k,
            ab: scalar(s.ab_type),
            acc: scalar(s.cr_type),
        })
        .collect();
    (!shapes.is_empty()).then_some(shapes)
}

/// The subgroup size when the device has only one.
fn fixed_subgroup(device: &WgpuDevice) -> Option<u32> {
    let p = device.properties();
    match (p.subgroup_min_size, p.subgroup_max_size) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    }
}

fn artifact(kernel: &CompiledKernel) -> Result<&VulkanArtifact> {
    kernel.artifact.downcast_ref::<VulkanArtifact>().ok_or_else(|| {
        Error::Buffer(format!(
            "kernel `{}` was compiled for another device",
            kernel.kernel.name
        ))
    })
}

impl Device for WgpuGpu {
    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer> {
        let bytes = len
            .checked_mul(elem.size_bytes())
            .ok_or_else(|| Error::Buffer(format!("{len} elements of {elem} overflow the address space")))?;
        let memory = || match self.properties.total_memory_bytes {
            Some(total) => format!("the device has {}", bytes_text(total)),
            None => "the API does not say how much memory the device has".to_string(),
        };
        let buf = WgpuBuffer::zeroed(&self.device, bytes).map_err(|e| {
            let reason = match e {
                WgpuError::BufferTooLarge { limit, limit_name, .. } => format!(
                    "larger than the device's {limit_name}, {}; {}",
                    bytes_text(limit),
                    memory()
                ),
                WgpuError::OutOfMemory { message } => format!("out of device memory: {}; wgpu: {message}", memory()),
                e => return e.into(),
            };
            Error::OutOfMemory {
                device: self.id(),
                elem,
                len,
                requested: bytes as u64,
                reason,
            }
        })?;
        Ok(DeviceBuffer::new(elem, len, self.key, Box::new(buf)))
    }

    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()> {
        Ok(self.buffer(buffer)?.write(bytes)?)
    }

    fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>> {
        Ok(self.buffer(buffer)?.read()?)
    }

    fn compile(&self, kernel: &Kernel, options: &CompileOptions, spec: &Specialization) -> Result<Arc<CompiledKernel>> {
        // Vulkan has no register limit: launches that differ only in one share a compile
        // (the driver's compiles are the slow part of autotuning here).
        let options = &CompileOptions {
            maxnreg: None,
            ..*options
        };
        self.cache.get_or_compile(kernel, options, spec, || {
            let target = Target {
                persistent: options.persistent,
                // No asynchronous copies: on cooperative matrices, how far ahead the K loop's
                // operands are loaded into registers (`lower::pipeline`).
                num_stages: options.num_stages,
                sum_chains: super::sum_chains()?,
                ..self.target(options.num_warps, loop_kind(kernel), has_dots(kernel))?
            };
            threads_per_program(
                kernel,
                options.num_warps,
                target.warp_size,
                self.device.properties().max_invocations_per_workgroup,
                "invocations per workgroup",
            )?;
            for t in kernel.values.iter().filter_map(|(_, v)| {
                v.ty.scalar_type().or(match v.ty.elem {
                    rutile_ir::Elem::Ptr(s) => Some(s),
                    _ => None,
                })
            }) {
                if !self.properties.supported_types.contains(&t) {
                    return Err(Error::Codegen {
                        backend: "SPIR-V",
                        kernel: kernel.name.clone(),
                        message: format!("the kernel uses {t}, which {} does not support", self.properties.name),
                    });
                }
            }
            let thread_kernel = rutile_ir::lower::lower(kernel, &target, spec)?;
            let f = self.device.features();
            let spirv_target = rutile_spirv::SpirvTarget {
                subgroup_size: target.shuffles.then_some(target.warp_size),
                shader_f16: f.f16,
                shader_i64: f.i64,
                shader_i16: f.i16,
                shader_f64: f.f64,
                subgroups: f.subgroups,
                cooperative_matrix: f.cooperative_matrix,
                packed_f16: self.options.packed_f16,
                coop_load_fences: self.options.coop_load_fences,
                wide_products: self.options.wide_products,
                exact_f64: self.options.exact_f64,
                immediate_size: if f.immediates && self.options.immediates {
                    self.device.properties().max_immediate_size
                } else {
                    0
                },
            };
            let codegen = |e: rutile_spirv::SpirvError| Error::Codegen {
                backend: "SPIR-V",
                kernel: kernel.name.clone(),
                message: e.to_string(),
            };
            let mut spirv = rutile_spirv::emit(&thread_kernel, &spirv_target).map_err(codegen)?;
            match &self.options.read_only {
                ReadOnlyBuffers::All => {}
                ReadOnlyBuffers::None => spirv.read_only_bindings.clear(),
                ReadOnlyBuffers::Only(names) => {
                    // Binding `i` is the kernel's `i`-th pointer parameter.
                    let pointers: Vec<&str> = kernel
                        .params
                        .iter()
                        .filter(|p| p.ty.elem.is_ptr())
                        .map(|p| p.name.as_str())
                        .collect();
                    spirv
                        .read_only_bindings
                        .retain(|&b| pointers.get(b as usize).is_some_and(|n| names.iter().any(|m| m == n)));
                }
            }
            let wgsl = spirv.wgsl().unwrap_or_else(|e| format!("// {e}"));
            let dumped = crate::dump::write(
                &kernel.name,
                &[
                    ("block.ir", &|| kernel.to_string()),
                    ("thread.ir", &|| thread_kernel.to_string()),
                    ("wgsl", &|| wgsl.clone()),
                ],
            );
            // The naga module itself goes to wgpu, which writes the SPIR-V the driver gets
            // from it. A kernel with read-once loads, coherent buffers or products of
            // cooperative matrices instead goes to the driver as rutile's own SPIR-V 1.4
            // words, which carry the `Nontemporal` hint, the `Coherent` decoration and the
            // `OpFMul`s a naga module cannot, where the device takes such words (the target
            // asks for the products only there). Elsewhere the hint is dropped, as the IR allows; `Coherent` is not a
            // hint (without it another workgroup's published stores may be read stale from
            // a cache), so such a kernel is refused there.
            if !spirv.coherent_bindings.is_empty() && !f.spirv_passthrough {
                return Err(Error::Codegen {
                    backend: "SPIR-V",
                    kernel: kernel.name.clone(),
                    message: "the kernel loads what other workgroups store under its atomics (a lock), which needs \
                              coherent storage buffers: rutile declares them in SPIR-V 1.4 words it hands the driver, \
                              and this device takes no such words (it needs Vulkan 1.2 and wgpu's passthrough shaders)"
                        .into(),
                });
            }
            if spirv.coop_products && !f.spirv_passthrough {
                return Err(Error::Codegen {
                    backend: "SPIR-V",
                    kernel: kernel.name.clone(),
                    message: "the kernel multiplies cooperative matrices element by element, which only rutile's \
                              own SPIR-V words spell, and this device takes no such words (the target should not \
                              have asked for it: a bug)"
                        .into(),
                });
            }
            let hinted = if spirv.needs_own_words() && f.spirv_passthrough {
                Some(spirv.spirv_words_hinted().map_err(codegen)?)
            } else {
                None
            };
            crate::dump::write_spirv(&kernel.name, dumped, || match &hinted {
                Some(words) => Ok(words.clone()),
                None => spirv.spirv_words(),
            });
            // (The print buffer is one more storage buffer, after the parameters'.)
            let storage = spirv.bindings.storage.len() as u32 + spirv.bindings.print.is_some() as u32;
            let layout = match spirv.bindings.launch {
                rutile_spirv::LaunchPlace::Immediates => {
                    wg::BindingLayout::with_immediates(storage, spirv.bindings.launch_size)
                }
                rutile_spirv::LaunchPlace::Uniform { .. } => wg::BindingLayout::new(storage, true),
            };
            // The driver's register count, where it reports one (for occupancy): from the
            // words it gets, or else from rutile's SPIR-V of the same module.
            let registers = if self.device.has_pipeline_statistics() {
                let words = match &hinted {
                    Some(words) => Some(Cow::Borrowed(words.as_slice())),
                    // Best effort: a writer failure leaves the count unknown.
                    None => spirv.spirv_words().ok().map(Cow::Owned),
                };
                let report = crate::dump::path(&kernel.name, dumped, "driver.txt");
                // SAFETY: rutile's SPIR-V, whose bindings are `layout`'s.
                words.and_then(|w| unsafe {
                    self.device
                        .register_count(&w, &spirv.entry_point, layout, report.as_deref())
                })
            } else {
                None
            };
            let source = match hinted {
                Some(words) => KernelSource::SpirVPassthrough {
                    words: words.into(),
                    module: Box::new(spirv.module),
                },
                None => KernelSource::Naga(Box::new(spirv.module)),
            };
            // SAFETY: rutile's kernels access memory only where their author's masks allow, as
            // in CUDA (an unmasked access past a buffer is the kernel's bug, caught at launch
            // where its extent is known, and otherwise checkable in the interpreter with
            // RUTILE_DEVICE=cpu or RUTILE_CHECK_BOUNDS=1), and their loops are the author's.
            let pipeline = unsafe {
                self.device
                    .create_pipeline_trusted(source, &spirv.entry_point, layout)?
            };
            Ok(CompiledKernel {
                kernel: kernel.clone(),
                extent: ExtentPlan::new(kernel),
                options: *options,
                specialization: spec.clone(),
                metadata: KernelMetadata {
                    threads: target.threads(),
                    shared_bytes: thread_kernel.shared_bytes(),
                    registers,
                    dots: thread_kernel.dots.clone(),
                    ..KernelMetadata::default()
                },
                code: Some(wgsl),
                artifact: Box::new(VulkanArtifact {
                    pipeline,
                    bindings: spirv.bindings,
                    persistent: thread_kernel.persistent.is_some(),
                    prints: spirv.prints,
                }),
            })
        })
    }

    fn launch_compiled(&self, compiled: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
        let kernel = &compiled.kernel;
        check_launch(compiled, grid, args, self.key, [u32::MAX; 3])?;
        let a = artifact(compiled)?;
        // A printing kernel's lines go to a print buffer of this launch (bound after the
        // parameters' buffers), read once it is done.
        let print = match a.prints.is_empty() {
            true => None,
            false => Some(WgpuBuffer::zeroed(
                &self.device,
                super::vulkan_print::PRINT_BUFFER_BYTES,
            )?),
        };
        let mut buffers = Vec::with_capacity(a.bindings.storage.len() + 1);
        for s in &a.bindings.storage {
            match args[s.param as usize] {
                Arg::Buffer(b) => buffers.push(self.buffer(b)?),
                _ => {
                    return Err(Error::Argument {
                        kernel: kernel.name.clone(),
                        message: format!("argument {} must be a buffer", s.param),
                    })
                }
            }
        }
        let mut scalars = Vec::with_capacity(a.bindings.scalars.len());
        let mut launched = grid;
        if a.persistent {
            launched = crate::occupancy::persistent_launch(self.properties(), &compiled.metadata, grid, &kernel.name)?;
        }
        for s in &a.bindings.scalars {
            // A persistent kernel's parameters after its own: the grid asked for.
            if let Some(axis) = (s.param as usize)
                .checked_sub(kernel.params.len())
                .filter(|_| a.persistent)
            {
                scalars.push(ScalarArg::I32(grid[axis.min(2)] as i32));
                continue;
            }
            scalars.push(match args[s.param as usize] {
                Arg::Bool(v) => ScalarArg::Bool(v),
                Arg::I32(v) => ScalarArg::I32(v),
                Arg::U32(v) => ScalarArg::U32(v),
                Arg::I64(v) => ScalarArg::I64(v),
                Arg::U64(v) => ScalarArg::U64(v),
                Arg::F32(v) => ScalarArg::F32(v),
                Arg::F64(v) => ScalarArg::F64(v),
                Arg::I8(v) => ScalarArg::I8(v),
                Arg::I16(v) => ScalarArg::I16(v),
                Arg::U8(v) => ScalarArg::U8(v),
                Arg::U16(v) => ScalarArg::U16(v),
                other => {
                    return Err(Error::Argument {
                        kernel: kernel.name.clone(),
                        message: format!(
                            "argument {} (`{}`): {:?} scalars are not supported on {}",
                            s.param,
                            s.name,
                            other.scalar_type(),
                            self.id()
                        ),
                    })
                }
            });
        }
        buffers.extend(print.as_ref());
        let max = self.device.properties().max_workgroups_per_dimension;
        for (offset, count) in wg::split_grid(launched, max) {
            let launch = a
                .bindings
                .launch_bytes(launched, offset, &scalars)
                .map_err(|e| Error::Argument {
                    kernel: kernel.name.clone(),
                    message: e.to_string(),
                })?;
            let timing = self.pass_time_ms.lock().unwrap().is_some();
            if timing {
                let ms = self
                    .device
                    .dispatch_timed(&a.pipeline, &buffers, Some(&launch), count)?;
                if let Some(total) = self.pass_time_ms.lock().unwrap().as_mut() {
                    *total += ms.unwrap_or(f64::NAN);
                }
            } else {
                self.device.dispatch(&a.pipeline, &buffers, Some(&launch), count)?;
            }
        }
        if let Some(print) = print {
            // (Reading the buffer waits for the launch, as CUDA's lines wait for the host
            // to synchronize.)
            let words: Vec<u32> = print.read_as()?;
            super::vulkan_print::print_records(&kernel.name, &a.prints, &words);
        }
        Ok(())
    }

    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()> {
        crate::buffer::check_copy(src, dst)?;
        Ok(self.buffer(dst)?.copy_from(self.buffer(src)?)?)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(self.device.synchronize()?)
    }

    /// Kernels are timed by timestamps at the start and end of their compute passes, so
    /// the host's time to record and submit them is not counted (as with CUDA events around
    /// asynchronous launches); other work (copies) by timestamps around its submission;
    /// without timestamp support, by the wall clock after waiting for the work.
    fn time(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        self.synchronize()?;
        let start = std::time::Instant::now();
        *self.pass_time_ms.lock().unwrap() = Some(0.0);
        let queued = self.device.time_queued(f);
        let passes = self.pass_time_ms.lock().unwrap().take().unwrap_or(0.0);
        let queued = queued?;
        self.synchronize()?;
        if passes > 0.0 && passes.is_finite() {
            return Ok(passes);
        }
        Ok(queued.unwrap_or_else(|| start.elapsed().as_secs_f64() * 1e3))
    }

    fn id(&self) -> String {
        format!("vulkan:{}", self.device.adapter_index())
    }

    fn compiles_in_parallel(&self) -> bool {
        // The validation layer's messages are returned by the next call of any thread.
        !crate::vulkan::validation_active()
    }

    fn device_key(&self) -> u64 {
        self.key
    }

    fn memory_in_use(&self) -> Result<crate::device::MemoryInUse> {
        self.device.check_lost()?;
        Ok(crate::device::MemoryInUse {
            buffers: Some(self.device.buffer_bytes()),
            device: self.device.allocated_bytes(),
        })
    }
}

/// Whether a kernel has a `for` or `while` loop anywhere.
fn has_dots(kernel: &Kernel) -> bool {
    kernel
        .insts
        .iter()
        .any(|(_, inst)| matches!(inst.op, rutile_ir::Op::Dot { .. }))
}

/// Whether a kernel loops, and whether it has pointers to 16-bit elements: what decides
/// the width of its Vulkan accesses (`WgpuGpu::target`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoopKind {
    None,
    Over16BitElements,
    Other,
}

fn loop_kind(kernel: &Kernel) -> LoopKind {
    let loops = kernel
        .insts
        .iter()
        .any(|(_, inst)| matches!(inst.op, rutile_ir::Op::For { .. } | rutile_ir::Op::While { .. }));
    let half = kernel
        .params
        .iter()
        .any(|p| matches!(p.ty.elem, rutile_ir::Elem::Ptr(t) if t.size_bytes() == 2));
    match (loops, half) {
        (false, _) => LoopKind::None,
        (true, true) => LoopKind::Over16BitElements,
        (true, false) => LoopKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `RUTILE_VULKAN_TYPES_OFF` names types; anything else is an error naming the variable.
    #[test]
    fn types_turned_off_by_name() {
        assert_eq!(parse_types_off(None).unwrap(), vec![]);
        assert_eq!(
            parse_types_off(Some(" f64, bf16,i8 ,")).unwrap(),
            vec![ScalarType::F64, ScalarType::BF16, ScalarType::I8]
        );
        let e = parse_types_off(Some("f64,float")).unwrap_err().to_string();
        assert!(e.contains("RUTILE_VULKAN_TYPES_OFF") && e.contains("\"float\""), "{e}");
    }
}
