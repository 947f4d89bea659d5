//! A kernel of a loaded module: its resource usage, shared-memory opt-in and occupancy.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::{result, sys};
use sys::CUfunction_attribute as F;

use super::error::{CudaError, DriverResultExt};
use super::module::ModuleHandle;

/// The first driver API version with `cuFuncGetParamInfo` (CUDA 12.4).
const PARAM_INFO_MIN_DRIVER: u32 = 12040;

/// What the JIT produced for one kernel, as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaKernelInfo {
    /// Registers per thread.
    pub num_regs: u32,
    /// Local memory per thread in bytes: register spills and stack arrays.
    pub local_size_bytes: usize,
    /// Statically declared shared memory per block, in bytes.
    pub static_shared_bytes: usize,
    /// Constant memory used, in bytes.
    pub const_size_bytes: usize,
    /// The largest block this kernel can be launched with (can be below the device's limit
    /// when the kernel uses many registers).
    pub max_threads_per_block: u32,
    /// PTX ISA target of the source, as `major * 10 + minor` of the `.target` (e.g. 80).
    pub ptx_version: u32,
    /// Architecture of the machine code, as `major * 10 + minor` (e.g. 90 for sm_90).
    pub binary_version: u32,
}

impl fmt::Display for CudaKernelInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} registers, {} B local (spills), {} B static shared, {} B const, \
             max {} threads/block, ptx sm_{}, binary sm_{}",
            self.num_regs,
            self.local_size_bytes,
            self.static_shared_bytes,
            self.const_size_bytes,
            self.max_threads_per_block,
            self.ptx_version,
            self.binary_version
        )
    }
}

/// How many blocks of a kernel fit on one SM at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaOccupancy {
    /// Resident blocks per SM.
    pub blocks_per_multiprocessor: u32,
    /// Resident warps per SM (`blocks * warps per block`).
    pub warps_per_multiprocessor: u32,
    /// The SM's warp capacity.
    pub max_warps_per_multiprocessor: u32,
}

impl CudaOccupancy {
    /// Resident warps over warp capacity, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        if self.max_warps_per_multiprocessor == 0 {
            return 0.0;
        }
        f64::from(self.warps_per_multiprocessor) / f64::from(self.max_warps_per_multiprocessor)
    }
}

/// A kernel ready to launch with [`super::CudaDevice::launch`]. Keeps its module loaded.
#[derive(Debug)]
pub struct CudaFunction {
    module: Arc<ModuleHandle>,
    cu_function: sys::CUfunction,
    name: String,
    info: CudaKernelInfo,
    /// Byte size of each parameter, when the driver can tell (CUDA 12.4 and later).
    param_sizes: Option<Vec<usize>>,
    /// Current `MAX_DYNAMIC_SHARED_SIZE_BYTES` of the kernel.
    max_dynamic_shared: AtomicUsize,
}

// SAFETY: a CUfunction is a driver handle usable from any thread once its context is
// current; every use binds the context first. The only mutable state is atomic.
unsafe impl Send for CudaFunction {}
// SAFETY: as above.
unsafe impl Sync for CudaFunction {}

impl CudaFunction {
    pub(crate) fn new(
        module: Arc<ModuleHandle>,
        cu_function: sys::CUfunction,
        name: String,
        params: Option<usize>,
    ) -> Result<Self, CudaError> {
        let get = |attr: F| -> Result<u32, CudaError> {
            // SAFETY: the function belongs to a loaded module whose context is current.
            let v = unsafe { result::function::get_function_attribute(cu_function, attr) }.call("cuFuncGetAttribute");
            let v = module.health.note(v)?;
            Ok(v.max(0) as u32)
        };
        let info = CudaKernelInfo {
            num_regs: get(F::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_size_bytes: get(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as usize,
            static_shared_bytes: get(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as usize,
            const_size_bytes: get(F::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)? as usize,
            max_threads_per_block: get(F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            ptx_version: get(F::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: get(F::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        };
        let max_dynamic_shared = get(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)? as usize;
        let param_sizes = if module.driver_version >= PARAM_INFO_MIN_DRIVER {
            param_sizes(cu_function, params)
        } else {
            None
        };
        Ok(CudaFunction {
            module,
            cu_function,
            name,
            info,
            param_sizes,
            max_dynamic_shared: AtomicUsize::new(max_dynamic_shared),
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers, spills, static shared memory and versions, read when it was loaded.
    pub fn info(&self) -> &CudaKernelInfo {
        &self.info
    }

    /// Byte size of each kernel parameter, in order, or `None` when the driver is older
    /// than CUDA 12.4 and cannot report them.
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.param_sizes.as_deref()
    }

    /// The most dynamic shared memory a launch may currently ask for, in bytes.
    pub fn max_dynamic_shared_memory(&self) -> usize {
        self.max_dynamic_shared.load(Ordering::Relaxed)
    }

    /// Allows launches with up to `bytes` of dynamic shared memory. Needed above 48 KiB
    /// (static + dynamic); [`super::CudaDevice::launch`] calls it when a launch needs it.
    ///
    /// Returns [`CudaError::OutOfSharedMemory`] when static plus `bytes` exceeds the
    /// device's opt-in maximum per block.
    pub fn set_max_dynamic_shared_memory(&self, bytes: usize) -> Result<(), CudaError> {
        let limit = self.module.props.shared_memory_per_block_optin;
        let requested = self.info.static_shared_bytes + bytes;
        if requested > limit {
            return Err(CudaError::OutOfSharedMemory { requested, limit });
        }
        self.module.bind()?;
        // SAFETY: valid function of a loaded module; the value was checked against the limit.
        let set = unsafe {
            result::function::set_function_attribute(
                self.cu_function,
                F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .call("cuFuncSetAttribute");
        self.module.health.note(set)?;
        self.max_dynamic_shared.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// [`Self::set_max_dynamic_shared_memory`] where `bytes` is more than launches may ask
    /// for now: a launch past it fails, and the driver's occupancy counts no block.
    pub(crate) fn allow_dynamic_shared_memory(&self, bytes: usize) -> Result<(), CudaError> {
        if bytes > self.max_dynamic_shared_memory() {
            self.set_max_dynamic_shared_memory(bytes)?;
        }
        Ok(())
    }

    /// Allows clusters past CUDA's portable 8 blocks (up to 16 on Hopper), as a kernel
    /// whose PTX asks for such a cluster (`.reqnctapercluster`) needs before it launches.
    pub fn allow_non_portable_clusters(&self) -> Result<(), CudaError> {
        self.module.bind()?;
        // SAFETY: valid function of a loaded module; the attribute takes 0 or 1.
        let set = unsafe {
            result::function::set_function_attribute(
                self.cu_function,
                F::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
            )
        }
        .call("cuFuncSetAttribute");
        self.module.health.note(set)
    }

    /// How many blocks of `block_size` threads using `dynamic_shared_bytes` of dynamic
    /// shared memory fit on one SM at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub fn occupancy(&self, block_size: u32, dynamic_shared_bytes: usize) -> Result<CudaOccupancy, CudaError> {
        if block_size == 0 || block_size > self.info.max_threads_per_block {
            return Err(CudaError::InvalidArgument {
                what: format!(
                    "occupancy of `{}` asked for a block of {block_size} threads; the kernel \
                     allows 1..={}",
                    self.name, self.info.max_threads_per_block
                ),
            });
        }
        self.allow_dynamic_shared_memory(dynamic_shared_bytes)?;
        self.module.bind()?;
        // SAFETY: valid function of a loaded module whose context is current.
        let blocks = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.cu_function,
                block_size as i32,
                dynamic_shared_bytes,
            )
        }
        .call("cuOccupancyMaxActiveBlocksPerMultiprocessor");
        let blocks = self.module.health.note(blocks)?.max(0) as u32;
        let props = &self.module.props;
        let warp = props.warp_size.max(1);
        Ok(CudaOccupancy {
            blocks_per_multiprocessor: blocks,
            warps_per_multiprocessor: blocks * block_size.div_ceil(warp),
            max_warps_per_multiprocessor: props.max_threads_per_multiprocessor / warp,
        })
    }

    /// How many clusters of `cluster` blocks of `block_size` threads, each with
    /// `dynamic_shared_bytes` of dynamic shared memory, the device can hold at once
    /// (`cuOccupancyMaxActiveClusters`). A cluster's blocks run at the same time on the
    /// multiprocessors of one GPC, so registers, shared memory and the GPC's size bound
    /// this; 0 means that a launch in such clusters cannot run at all.
    pub fn max_active_clusters(
        &self,
        cluster: u32,
        block_size: u32,
        dynamic_shared_bytes: usize,
    ) -> Result<u32, CudaError> {
        if cluster == 0 || block_size == 0 || block_size > self.info.max_threads_per_block {
            return Err(CudaError::InvalidArgument {
                what: format!(
                    "resident clusters of `{}` asked for clusters of {cluster} blocks of {block_size} threads; \
                     the kernel allows blocks of 1..={} threads",
                    self.name, self.info.max_threads_per_block
                ),
            });
        }
        self.allow_dynamic_shared_memory(dynamic_shared_bytes)?;
        self.module.bind()?;
        // The cluster's shape, as the kernel's PTX requires it (the driver accepts a size
        // that matches the compiled one).
        // SAFETY: a plain-data union of integers; every field is valid zeroed.
        let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
        value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: cluster, y: 1, z: 1 };
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            pad: [0; 4],
            value,
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cluster,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: block_size,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: dynamic_shared_bytes as u32,
            hStream: std::ptr::null_mut(),
            attrs: &mut attribute,
            numAttrs: 1,
        };
        let mut clusters: std::ffi::c_int = 0;
        // SAFETY: valid function of a loaded module whose context is current; `config` and
        // the attribute it points to outlive the call; the out-parameter is an integer.
        let status = unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, self.cu_function, &config) };
        self.module
            .health
            .note(status.result().call("cuOccupancyMaxActiveClusters"))?;
        Ok(clusters.max(0) as u32)
    }

    pub(crate) fn cu_function(&self) -> sys::CUfunction {
        self.cu_function
    }

    pub(crate) fn module(&self) -> &ModuleHandle {
        &self.module
    }
}

/// Asks the driver for the size of each of the `count` parameters, or, when the count is
/// not known, of each until it reports no more; `None` if it fails in any other way (the
/// sizes are then simply not checked at launch).
fn param_sizes(f: sys::CUfunction, count: Option<usize>) -> Option<Vec<usize>> {
    let mut sizes = Vec::new();
    loop {
        if count == Some(sizes.len()) {
            return Some(sizes);
        }
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: valid function; out-parameters are plain integers.
        let status = unsafe { sys::cuFuncGetParamInfo(f, sizes.len(), &mut offset, &mut size) };
        match status {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_fraction() {
        let o = CudaOccupancy {
            blocks_per_multiprocessor: 4,
            warps_per_multiprocessor: 32,
            max_warps_per_multiprocessor: 64,
        };
        assert_eq!(o.fraction(), 0.5);
        let none = CudaOccupancy {
            blocks_per_multiprocessor: 0,
            warps_per_multiprocessor: 0,
            max_warps_per_multiprocessor: 0,
        };
        assert_eq!(none.fraction(), 0.0);
    }

    #[test]
    fn kernel_info_display() {
        let info = CudaKernelInfo {
            num_regs: 10,
            local_size_bytes: 0,
            static_shared_bytes: 0,
            const_size_bytes: 0,
            max_threads_per_block: 1024,
            ptx_version: 80,
            binary_version: 90,
        };
        let s = info.to_string();
        assert!(s.starts_with("10 registers"), "{s}");
        assert!(s.contains("binary sm_90"), "{s}");
    }
}
