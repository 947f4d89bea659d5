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
    pub num_warps: u32,
    pub num_stages: u32,
}

impl From<&crate::LaunchConfig> for CompileOptions {
    fn from(c: &crate::LaunchConfig) -> Self {
        CompileOptions {
            num_warps: c.num_warps,
            num_stages: c.num_stages,
        }
    }
}

/// What the compiler and driver say about a compiled kernel. `None`: not reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMetadata {
    /// Threads per program.
    pub threads: u32,
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Bytes of local memory per thread (register spills).
    pub spill_bytes: Option<u32>,
    /// Shared memory per program, in bytes.
    pub shared_bytes: u32,
    /// The most threads per program the compiled code allows.
    pub max_threads: Option<u32>,
}

/// A kernel compiled for one device, options and specialization.
pub struct CompiledKernel {
    /// The block IR it was compiled from.
    pub kernel: Kernel,
    pub options: CompileOptions,
    pub specialization: Specialization,
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

/// Compiled kernels by (kernel, options, specialization), the kernel by a 64-bit hash of
/// its whole IR (ops, types, constants, source locations): the same builder code and
/// meta-parameters give the same IR. Every kernel is verified before its first compilation.
#[derive(Default)]
pub(crate) struct CompileCache {
    entries: Mutex<HashMap<(u64, CompileOptions, Specialization), Arc<CompiledKernel>>>,
}

impl CompileCache {
    pub fn get_or_compile(
        &self,
        kernel: &Kernel,
        options: &CompileOptions,
        spec: &Specialization,
        compile: impl FnOnce() -> Result<CompiledKernel>,
    ) -> Result<Arc<CompiledKernel>> {
        // A structural hash: a launch looks the kernel up every time, so this must cost
        // far less than printing it.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        kernel.hash(&mut h);
        let key = (h.finish(), *options, spec.clone());
        if let Some(k) = self.entries.lock().unwrap().get(&key) {
            return Ok(k.clone());
        }
        // A kernel built by the builder is well formed, but its fields are public: check
        // before any backend relies on it, so a malformed one is an error, not a panic.
        rutile_ir::verify::verify(kernel)?;
        let compiled = Arc::new(compile()?);
        self.entries.lock().unwrap().insert(key, compiled.clone());
        Ok(compiled)
    }
}
