//! Compiled kernels, their metadata, and the in-memory compile cache.

use crate::error::Result;
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::target::Specialization;
use rutile_ir::Kernel;
use std::any::Any;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// Options that change the compiled code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// See [`crate::LaunchConfig::num_warps`](crate::LaunchConfig#structfield.num_warps).
    pub num_warps: u32,
    /// See [`crate::LaunchConfig::num_stages`](crate::LaunchConfig#structfield.num_stages).
    pub num_stages: u32,
    /// See [`crate::LaunchConfig::persistent`].
    pub persistent: bool,
    /// See [`crate::LaunchConfig::warp_specialize`].
    pub warp_specialize: bool,
    /// See [`crate::LaunchConfig::tma_outer`].
    pub tma_outer: bool,
    /// See [`crate::LaunchConfig::maxnreg`].
    pub maxnreg: Option<u32>,
    /// See [`crate::LaunchConfig::cluster`].
    pub cluster: u32,
    /// See [`crate::LaunchConfig::programs_per_block`].
    pub programs_per_block: u32,
}

impl From<&crate::LaunchConfig> for CompileOptions {
    fn from(c: &crate::LaunchConfig) -> Self {
        CompileOptions {
            num_warps: c.num_warps,
            num_stages: c.num_stages,
            persistent: c.persistent,
            warp_specialize: c.warp_specialize,
            tma_outer: c.tma_outer,
            maxnreg: c.maxnreg,
            cluster: c.cluster,
            programs_per_block: c.programs_per_block,
        }
    }
}

/// What the compiler and driver say about a compiled kernel. `None`: not reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMetadata {
    /// Threads per program.
    pub threads: u32,
    /// Registers per thread: from the CUDA driver, or from a Vulkan driver that reports
    /// pipeline statistics (`VK_KHR_pipeline_executable_properties`, NVIDIA's does).
    pub registers: Option<u32>,
    /// Bytes of local memory per thread (register spills).
    pub spill_bytes: Option<u32>,
    /// Shared memory per program, in bytes.
    pub shared_bytes: u32,
    /// The most threads per program the compiled code allows.
    pub max_threads: Option<u32>,
    /// Whether a producer warpgroup feeds the kernel's consumers through mbarriers
    /// (`rutile_ir::lower::specialize`): a persistent launch then puts one program on a
    /// multiprocessor at most ([`crate::occupancy::persistent_programs`]).
    pub warp_specialized: bool,
    /// What the kernel's `dot`s run on (`None`: it has none, or the backend runs block IR).
    /// A block whose operands do not fit the matrix units' staging in shared memory runs
    /// its `dot`s on FMAs instead; the autotuner's printout shows this beside each timing.
    pub dots: Option<rutile_ir::thread::DotPath>,
    /// Programs a multiprocessor holds at once, as the driver counts them (CUDA:
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`, which rounds registers to their
    /// allocation unit and adds the shared memory the driver reserves for each program).
    /// `None` where the driver does not say; [`crate::occupancy::programs_per_multiprocessor`]
    /// then computes it from the registers and shared memory.
    pub resident_programs: Option<u32>,
    /// Clusters of the kernel's launch the device holds at once, for a kernel compiled for
    /// clusters of more than one program (CUDA: `cuOccupancyMaxActiveClusters`, which
    /// counts the multiprocessors of each GPC). `None` for other kernels, or where the
    /// driver does not say.
    pub resident_clusters: Option<u32>,
}

/// A kernel compiled for one device, options and specialization.
pub struct CompiledKernel {
    /// The block IR it was compiled from.
    pub kernel: Kernel,
    /// The options it was compiled with.
    pub options: CompileOptions,
    /// The facts about the launch's arguments it was compiled assuming; a launch whose
    /// arguments do not match them is refused.
    pub specialization: Specialization,
    /// What the compiler and driver reported about it: threads, registers, shared memory.
    pub metadata: KernelMetadata,
    /// The generated code as text (PTX, WGSL), when there is one.
    pub code: Option<String>,
    /// The backend's loaded module.
    pub(crate) artifact: Box<dyn Any + Send + Sync>,
    /// The elements each unmasked access needs, checked at every launch.
    pub(crate) extent: ExtentPlan,
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledKernel")
            .field("kernel", &self.kernel.name)
            .field("options", &self.options)
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// Compiled kernels by (kernel, options, specialization). A launch looks its kernel up
/// every time, so the lookup must be cheap: a fast structural hash of the IR (ops, types,
/// constants, source locations) picks a bucket, and the kernel is compared whole with the
/// ones in it, so that two kernels never share an entry, whatever their hashes. The same
/// builder code and meta-parameters give the same IR. Every kernel is verified before its
/// first compilation.
#[derive(Default)]
pub(crate) struct CompileCache {
    entries: Mutex<HashMap<CacheKey, Vec<Arc<CompiledKernel>>>>,
}

/// (hash of the kernel's IR, options, specialization).
type CacheKey = (u64, CompileOptions, Specialization);

impl CompileCache {
    pub fn get_or_compile(
        &self,
        kernel: &Kernel,
        options: &CompileOptions,
        spec: &Specialization,
        compile: impl FnOnce() -> Result<CompiledKernel>,
    ) -> Result<Arc<CompiledKernel>> {
        let mut h = rustc_hash::FxHasher::default();
        kernel.hash(&mut h);
        let key = (h.finish(), *options, spec.clone());
        let find = |bucket: Option<&Vec<Arc<CompiledKernel>>>| {
            bucket.and_then(|b| b.iter().find(|c| c.kernel == *kernel).cloned())
        };
        if let Some(k) = find(self.entries.lock().unwrap().get(&key)) {
            return Ok(k);
        }
        // A kernel built by the builder is well formed, but its fields are public: check
        // before any backend relies on it, so a malformed one is an error, not a panic.
        rutile_ir::verify::verify(kernel)?;
        let compiled = Arc::new(compile()?);
        let mut entries = self.entries.lock().unwrap();
        let bucket = entries.entry(key).or_default();
        // Another thread may have compiled it meanwhile; keep one.
        match find(Some(bucket)) {
            Some(k) => Ok(k),
            None => {
                bucket.push(compiled.clone());
                Ok(compiled)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{CpuDevice, Device};
    use rutile_ir::target::Specialization;
    use rutile_ir::{Kernel, ScalarType::F32};
    use std::sync::Arc;

    /// `out[i] = where(x[i] < 0, fill, x[i])` with `fill` a literal.
    fn fill(fill: f32) -> Kernel {
        Kernel::build("fill", |k| {
            let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
            let i = k.arange(0, 16);
            let v = k.load(x + i);
            k.store(out + i, k.where_(v.lt(0.0), fill, v));
        })
        .unwrap()
    }

    #[test]
    fn the_cache_finds_a_kernel_again_and_never_confuses_two() {
        let dev = CpuDevice::new();
        let opts = crate::CompileOptions::from(&crate::LaunchConfig::grid1(1));
        let spec = Specialization::none(2);
        let compile = |k: &Kernel| dev.compile(k, &opts, &spec).unwrap();
        // Rebuilt kernels are found again, NaN literals included.
        for value in [1.5, f32::NAN] {
            assert!(Arc::ptr_eq(&compile(&fill(value)), &compile(&fill(value))), "{value}");
        }
        // Kernels differing in one constant, even only in its sign bit, are different.
        let (plus, minus) = (compile(&fill(0.0)), compile(&fill(-0.0)));
        assert!(!Arc::ptr_eq(&plus, &minus));
        assert_eq!(plus.kernel, fill(0.0));
        assert_eq!(minus.kernel, fill(-0.0));
    }
}
