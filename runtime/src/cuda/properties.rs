//! The hardware limits and facts of one CUDA device, read from the driver.

use std::fmt;

use cudarc::driver::{result, sys};
use sys::CUdevice_attribute as A;

use super::error::{CudaError, DriverResultExt};

/// What the driver reports about one device: the numbers a kernel compiler and its
/// launcher need (limits, resources per SM, memory system).
///
/// Fields that newer drivers may no longer report (clock rates, bus width) are `None`
/// when the driver returns 0 or an error; they are never guessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDeviceProperties {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)`.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors (SMs).
    pub multiprocessor_count: u32,
    /// 32-bit registers available per SM.
    pub registers_per_multiprocessor: u32,
    /// 32-bit registers available to one block.
    pub registers_per_block: u32,
    /// Shared memory per block without opt-in, in bytes (48 KiB on all current GPUs).
    pub shared_memory_per_block: usize,
    /// Shared memory per block with the opt-in attribute, in bytes.
    pub shared_memory_per_block_optin: usize,
    /// Shared memory per SM, in bytes.
    pub shared_memory_per_multiprocessor: usize,
    /// Shared memory the system reserves for each resident block, in bytes.
    pub reserved_shared_memory_per_block: usize,
    /// Threads per warp (32 on every NVIDIA GPU so far).
    pub warp_size: u32,
    /// Maximum threads in one block.
    pub max_threads_per_block: u32,
    /// Maximum block size in x, y and z.
    pub max_block_dim: [u32; 3],
    /// Maximum grid size in x, y and z (in blocks).
    pub max_grid_dim: [u32; 3],
    /// Maximum resident threads per SM.
    pub max_threads_per_multiprocessor: u32,
    /// Maximum resident blocks per SM.
    pub max_blocks_per_multiprocessor: u32,
    /// L2 cache size, in bytes.
    pub l2_cache_size: usize,
    /// Peak SM clock in kHz, if the driver reports it.
    pub clock_rate_khz: Option<u32>,
    /// Peak memory clock in kHz, if the driver reports it.
    pub memory_clock_rate_khz: Option<u32>,
    /// Global memory bus width in bits, if the driver reports it.
    pub memory_bus_width_bits: Option<u32>,
    /// Total global memory, in bytes.
    pub total_memory: usize,
    /// Driver CUDA API version, `major * 1000 + minor * 10`.
    pub driver_version: u32,
    /// Whether the GPU shares the host's memory (`CU_DEVICE_ATTRIBUTE_INTEGRATED`: Jetson
    /// and other systems on a chip) rather than having its own.
    pub integrated: bool,
}

impl CudaDeviceProperties {
    /// Reads the properties of `device` (ordinal `ordinal`) from the driver.
    pub(crate) fn query(device: sys::CUdevice, ordinal: usize, driver_version: u32) -> Result<Self, CudaError> {
        let get = |attr: A| -> Result<u32, CudaError> {
            // SAFETY: `device` comes from cuDeviceGet; the call only writes an int.
            let v = unsafe { result::device::get_attribute(device, attr) }.call("cuDeviceGetAttribute")?;
            Ok(v.max(0) as u32)
        };
        // Reported as 0 or refused by some drivers: keep `None` rather than a made-up value.
        let optional = |attr: A| -> Option<u32> {
            // SAFETY: as above.
            match unsafe { result::device::get_attribute(device, attr) } {
                Ok(v) if v > 0 => Some(v as u32),
                _ => None,
            }
        };
        let name = result::device::get_name(device).call("cuDeviceGetName")?;
        // SAFETY: `device` is valid; the call writes one size_t.
        let total_memory = unsafe { result::device::total_mem(device) }.call("cuDeviceTotalMem")?;
        Ok(CudaDeviceProperties {
            ordinal,
            name,
            compute_capability: (
                get(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                get(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            multiprocessor_count: get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            registers_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            registers_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            shared_memory_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as usize,
            shared_memory_per_block_optin: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as usize,
            shared_memory_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?
                as usize,
            reserved_shared_memory_per_block: get(A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)? as usize,
            warp_size: get(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_threads_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_blocks_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            l2_cache_size: get(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
            clock_rate_khz: optional(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_rate_khz: optional(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            memory_bus_width_bits: optional(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            total_memory,
            driver_version,
            integrated: optional(A::CU_DEVICE_ATTRIBUTE_INTEGRATED).is_some(),
        })
    }

    /// The compute capability as one number, e.g. `90` for sm_90.
    pub fn sm_version(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }

    /// Theoretical peak DRAM bandwidth in GB/s, `2 × memory clock × bus width / 8` (double
    /// data rate), or `None` when the driver does not report the clock or the bus width.
    pub fn peak_memory_bandwidth_gbps(&self) -> Option<f64> {
        let clock_hz = self.memory_clock_rate_khz? as f64 * 1e3;
        let bus_bytes = self.memory_bus_width_bits? as f64 / 8.0;
        Some(2.0 * clock_hz * bus_bytes / 1e9)
    }
}

fn kib(bytes: usize) -> String {
    if bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn or_unreported(v: Option<String>) -> String {
    v.unwrap_or_else(|| "not reported".to_string())
}

impl fmt::Display for CudaDeviceProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.compute_capability;
        writeln!(f, "CUDA device {}: {}", self.ordinal, self.name)?;
        writeln!(f, "  compute capability     {major}.{minor} (sm_{})", self.sm_version())?;
        writeln!(
            f,
            "  driver API version     {}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )?;
        writeln!(f, "  multiprocessors        {}", self.multiprocessor_count)?;
        writeln!(
            f,
            "  global memory          {:.2} GiB",
            self.total_memory as f64 / (1u64 << 30) as f64
        )?;
        writeln!(f, "  L2 cache               {}", kib(self.l2_cache_size))?;
        writeln!(
            f,
            "  shared memory          {} per block, {} opt-in, {} per SM, {} reserved per block",
            kib(self.shared_memory_per_block),
            kib(self.shared_memory_per_block_optin),
            kib(self.shared_memory_per_multiprocessor),
            kib(self.reserved_shared_memory_per_block)
        )?;
        writeln!(
            f,
            "  registers              {} per block, {} per SM",
            self.registers_per_block, self.registers_per_multiprocessor
        )?;
        writeln!(
            f,
            "  threads                warp {}, {} per block, {} per SM, {} blocks per SM",
            self.warp_size,
            self.max_threads_per_block,
            self.max_threads_per_multiprocessor,
            self.max_blocks_per_multiprocessor
        )?;
        let [bx, by, bz] = self.max_block_dim;
        let [gx, gy, gz] = self.max_grid_dim;
        writeln!(f, "  max block              {bx} x {by} x {bz}")?;
        writeln!(f, "  max grid               {gx} x {gy} x {gz}")?;
        writeln!(
            f,
            "  SM clock               {}",
            or_unreported(self.clock_rate_khz.map(|k| format!("{} MHz", k / 1000)))
        )?;
        writeln!(
            f,
            "  memory clock           {}",
            or_unreported(self.memory_clock_rate_khz.map(|k| format!("{} MHz", k / 1000)))
        )?;
        writeln!(
            f,
            "  memory bus             {}",
            or_unreported(self.memory_bus_width_bits.map(|b| format!("{b} bits")))
        )?;
        write!(
            f,
            "  peak DRAM bandwidth    {}",
            or_unreported(self.peak_memory_bandwidth_gbps().map(|g| format!("{g:.0} GB/s")))
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The figures of an H100 SXM as its driver reports them; used to test code that only
    /// reads properties.
    pub(crate) fn h100_like() -> CudaDeviceProperties {
        CudaDeviceProperties {
            ordinal: 0,
            name: "NVIDIA H100 80GB HBM3".to_string(),
            compute_capability: (9, 0),
            multiprocessor_count: 132,
            registers_per_multiprocessor: 65536,
            registers_per_block: 65536,
            shared_memory_per_block: 49152,
            shared_memory_per_block_optin: 232448,
            shared_memory_per_multiprocessor: 233472,
            reserved_shared_memory_per_block: 1024,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [2147483647, 65535, 65535],
            max_threads_per_multiprocessor: 2048,
            max_blocks_per_multiprocessor: 32,
            l2_cache_size: 52428800,
            clock_rate_khz: Some(1980000),
            memory_clock_rate_khz: Some(2619000),
            memory_bus_width_bits: Some(5120),
            total_memory: 85_045_870_592,
            driver_version: 13000,
            integrated: false,
        }
    }

    #[test]
    fn display_is_readable() {
        let p = h100_like();
        let s = p.to_string();
        assert!(s.contains("NVIDIA H100"), "{s}");
        assert!(s.contains("9.0 (sm_90)"), "{s}");
        assert!(s.contains("132"), "{s}");
        assert!(s.contains("48 KiB per block, 227 KiB opt-in"), "{s}");
        assert!(s.contains("13.0"), "{s}");
        assert!(s.lines().count() > 10);
    }

    #[test]
    fn missing_clocks_are_not_invented() {
        let mut p = h100_like();
        let bw = p.peak_memory_bandwidth_gbps().unwrap();
        assert!((bw - 3352.3).abs() < 1.0, "{bw}");
        p.memory_clock_rate_khz = None;
        p.clock_rate_khz = None;
        assert_eq!(p.peak_memory_bandwidth_gbps(), None);
        let s = p.to_string();
        assert!(s.contains("SM clock               not reported"), "{s}");
        assert_eq!(p.sm_version(), 90);
    }
}
