//! How many programs of a compiled kernel fit on one multiprocessor: the driver's count
//! where it gives one, else the persistent softmax tutorial's formula (registers and shared
//! memory) with the registers' allocation unit and the threads a multiprocessor holds,
//! which the tutorial leaves out; and the persistent grids sized from it.

use crate::compiled::KernelMetadata;
use crate::device::DeviceProperties;

/// Programs of `kernel` resident on one multiprocessor: the driver's count where it gives
/// one ([`KernelMetadata::resident_programs`], CUDA). Otherwise, where the compiler reports the
/// kernel's registers (Vulkan where the driver reports pipeline statistics: NVIDIA's), as the
/// tutorial computes it, `registers_per_sm / (registers_per_thread * threads_per_program)`,
/// with the registers rounded up to their allocation unit
/// ([`REGISTER_ALLOCATION_UNIT`]), limited by `shared_memory_per_sm /
/// shared_memory_per_program` and by `threads_per_sm / threads_per_program`: the tutorial's
/// formula leaves both of those out, and counted 17 programs of the softmax at 29 registers
/// where 16 fit (a program past what fits runs in a second, partial wave of the persistent
/// grid). Where the registers are not reported (other Vulkan drivers), the thread limit
/// alone, an upper bound (a kernel short of registers fits fewer) that costs at most such a
/// wave, where guessing low would leave multiprocessors idle. `None` when the device
/// reports neither.
pub fn programs_per_multiprocessor(device: &DeviceProperties, kernel: &KernelMetadata) -> Option<u32> {
    if let Some(resident) = kernel.resident_programs {
        return Some(resident);
    }
    let threads = kernel.threads.max(1);
    let by_threads = device.max_threads_per_multiprocessor.map(|t| t / threads);
    let mut occupancy = match (kernel.registers, device.registers_per_multiprocessor) {
        (Some(regs), Some(per_sm)) => {
            let regs = regs.max(1).next_multiple_of(REGISTER_ALLOCATION_UNIT);
            (per_sm / (regs * threads)).min(by_threads.unwrap_or(u32::MAX))
        }
        _ => by_threads?,
    };
    if let Some(by_shared) = device
        .shared_memory_per_multiprocessor
        .and_then(|per_sm| per_sm.checked_div(kernel.shared_bytes))
    {
        occupancy = occupancy.min(by_shared);
    }
    Some(occupancy)
}

/// Registers a thread is given at a time: NVIDIA GPUs, the only ones whose drivers report a
/// kernel's registers, allocate 256 a warp (CUDA's occupancy calculator's "register
/// allocation unit size").
pub const REGISTER_ALLOCATION_UNIT: u32 = 8;

/// The persistent tutorial's grid: `multiprocessors x occupancy` programs (at least one).
///
/// A warp-specialized kernel ([`KernelMetadata::warp_specialized`]) gets one program a
/// multiprocessor at most, as CUTLASS launches its persistent warp-specialized kernels. On
/// an H200 (driver 580) several of them on one multiprocessor hung in about one launch of
/// four (6 of 21): a matmul of 64 x 64 tiles on one consumer warpgroup, four programs a
/// multiprocessor by its registers, at 2048 x 2048 x 256, in f16 and f32, at 2 and 4
/// stages; 20 launches of the same kernels at one a multiprocessor all finished. (The same
/// kernels passed in the SIMT simulator, which runs their mbarrier protocol; what the
/// hardware does differently is not known. Kernels of two consumer warpgroups or more hold
/// a multiprocessor's registers alone anyway.)
pub fn persistent_programs(device: &DeviceProperties, kernel: &KernelMetadata) -> Option<u32> {
    Some((device.multiprocessors? * persistent_per_multiprocessor(device, kernel)?).max(1))
}

/// The programs of a persistent kernel a multiprocessor holds: [`programs_per_multiprocessor`],
/// one at most for a warp-specialized kernel ([`persistent_programs`]).
fn persistent_per_multiprocessor(device: &DeviceProperties, kernel: &KernelMetadata) -> Option<u32> {
    let per_multiprocessor = programs_per_multiprocessor(device, kernel)?;
    Some(if kernel.warp_specialized {
        per_multiprocessor.min(1)
    } else {
        per_multiprocessor
    })
}

/// Programs a persistent kernel gets on devices that do not report what
/// [`persistent_programs`] needs (no multiprocessor count, or neither registers nor threads
/// per multiprocessor): enough to fill a mid-sized GPU.
pub const UNKNOWN_DEVICE_PROGRAMS: u32 = 256;

/// The grid of a persistent kernel over `rows` rows (or tiles): [`persistent_programs`], or
/// [`UNKNOWN_DEVICE_PROGRAMS`] where the device does not say, never more programs than rows
/// and at least one. Where a multiprocessor holds at most [`EVEN_ROWS_PROGRAMS`] of the
/// kernel's programs, as few programs as walk the rows in the same number of rounds, so
/// that each walks as many rows as the others or one fewer: 4096 rows on 264 resident
/// programs are 256 programs of 16 rows, where 264 would leave the last round to 136 of
/// them.
pub fn persistent_grid(device: &DeviceProperties, kernel: &KernelMetadata, rows: u32) -> u32 {
    let Some(resident) = persistent_programs(device, kernel) else {
        return UNKNOWN_DEVICE_PROGRAMS.min(rows).max(1);
    };
    if persistent_per_multiprocessor(device, kernel).is_some_and(|p| p > EVEN_ROWS_PROGRAMS) {
        return resident.min(rows).max(1);
    }
    evened(rows, resident)
}

/// As few of `resident` workers as walk `rows` rows in the rounds `resident` would take, so
/// that each walks as many rows as the others or one fewer (at least one).
fn evened(rows: u32, resident: u32) -> u32 {
    let rounds = rows.div_ceil(resident.max(1)).max(1);
    rows.div_ceil(rounds).max(1)
}

/// The grid of a kernel in clusters of `cluster` programs whose clusters walk `rows` rows
/// (or tiles) with a stride of the clusters: as many clusters as the device holds at once
/// ([`KernelMetadata::resident_clusters`], else the resident programs
/// ([`persistent_programs`]) divided into clusters, else [`UNKNOWN_DEVICE_PROGRAMS`]), never
/// more than `rows` and at least one, as few as walk the rows in the same number of rounds
/// (so that each walks as many rows as the others or one fewer); in programs, a multiple
/// of `cluster`.
pub fn persistent_cluster_grid(device: &DeviceProperties, kernel: &KernelMetadata, cluster: u32, rows: u32) -> u32 {
    let cluster = cluster.max(1);
    let resident = kernel
        .resident_clusters
        .or_else(|| persistent_programs(device, kernel).map(|p| p / cluster))
        .unwrap_or(UNKNOWN_DEVICE_PROGRAMS / cluster);
    evened(rows, resident) * cluster
}

/// The most programs a multiprocessor may hold for [`persistent_grid`] to even out the
/// rows. On an H200 (driver 580) the layer norm's row walk ran 0.6 to 1.4 points of the
/// copy ceiling faster with its rows even at two programs a multiprocessor and at one
/// (8192 and 16384 columns, three runs), level at five (4096 columns), and 1.1 points
/// slower at nine (2048 columns), where evening the rows takes 14% of the programs away
/// (docs/performance.md, "Even rows for the persistent grids").
pub const EVEN_ROWS_PROGRAMS: u32 = 2;

/// The programs a persistent kernel (`rutile_ir::lower::persistent`) is launched with for
/// the `grid` a launch asks for: [`persistent_grid`] over its programs, which the kernel
/// counts in i32 (an error names `kernel` where they do not fit).
pub(crate) fn persistent_launch(
    device: &DeviceProperties,
    metadata: &KernelMetadata,
    grid: [u32; 3],
    kernel: &str,
) -> crate::Result<[u32; 3]> {
    let tiles = grid.iter().map(|&g| g as u64).product::<u64>();
    if tiles > i32::MAX as u64 {
        return Err(crate::Error::Launch {
            kernel: kernel.to_string(),
            message: format!(
                "the persistent schedule counts the grid's {tiles} programs in i32; at most {} fit",
                i32::MAX
            ),
        });
    }
    Ok([persistent_grid(device, metadata, tiles as u32), 1, 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Backend, DeviceType};

    /// A GPU of 132 multiprocessors of 64 K registers each, through `backend`.
    fn gpu_of_132(backend: Backend) -> DeviceProperties {
        let mut d = DeviceProperties::unknown("gpu", "NVIDIA", backend, DeviceType::DiscreteGpu);
        d.multiprocessors = Some(132);
        d.registers_per_multiprocessor = Some(65536);
        d
    }

    /// Rows shared evenly where a multiprocessor holds at most two programs: as many rounds
    /// as the resident programs need, and as few programs as walk them in those rounds;
    /// where it holds more, every resident program.
    #[test]
    fn persistent_grids_share_the_rows_evenly_where_programs_are_few() {
        let d = gpu_of_132(Backend::Cuda);
        // 256 threads at 116 registers: two programs a multiprocessor, 264 in all.
        let two = KernelMetadata {
            threads: 256,
            registers: Some(116),
            shared_bytes: 16,
            ..KernelMetadata::default()
        };
        assert_eq!(persistent_programs(&d, &two), Some(264));
        for (rows, programs) in [(4096, 256), (264, 264), (265, 133), (1000, 250), (1, 1)] {
            let grid = persistent_grid(&d, &two, rows);
            assert_eq!(grid, programs, "{rows} rows");
            assert_eq!(rows.div_ceil(grid), rows.div_ceil(264), "{rows} rows: rounds");
        }
        // 128 threads at 56 registers: nine a multiprocessor, every one of them.
        let nine = KernelMetadata {
            threads: 128,
            registers: Some(56),
            ..two.clone()
        };
        assert_eq!(persistent_programs(&d, &nine), Some(1188));
        assert_eq!(persistent_grid(&d, &nine, 4096), 1188);
        assert_eq!(persistent_grid(&d, &nine, 1000), 1000);
    }

    #[test]
    fn h100_like_numbers() {
        let mut d = gpu_of_132(Backend::Cuda);
        d.shared_memory_per_multiprocessor = Some(233472);
        let k = KernelMetadata {
            threads: 128,
            registers: Some(32),
            shared_bytes: 16,
            ..KernelMetadata::default()
        };
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(16));
        assert_eq!(persistent_programs(&d, &k), Some(132 * 16));
        let unknown = DeviceProperties::unknown("gpu", "v", Backend::Vulkan, DeviceType::DiscreteGpu);
        assert_eq!(persistent_programs(&unknown, &k), None);
        // Sixteen programs a multiprocessor: all of them.
        assert_eq!(persistent_grid(&d, &k, 4096), 132 * 16);
        assert_eq!(persistent_grid(&d, &k, 100), 100);
        assert_eq!(persistent_grid(&unknown, &k, 4096), UNKNOWN_DEVICE_PROGRAMS);
        assert_eq!(persistent_grid(&unknown, &k, 0), 1);
        // Warp-specialized: one program a multiprocessor at most.
        let ws = KernelMetadata {
            warp_specialized: true,
            ..k.clone()
        };
        assert_eq!(persistent_launch(&d, &k, [64, 64, 1], "k").unwrap(), [132 * 16, 1, 1]);
        // 4096 tiles on 132 programs take 32 rounds, which 128 programs walk as well.
        assert_eq!(persistent_launch(&d, &ws, [64, 64, 1], "k").unwrap(), [128, 1, 1]);
        assert_eq!(persistent_launch(&d, &ws, [33, 8, 1], "k").unwrap(), [132, 1, 1]);
        assert_eq!(persistent_launch(&d, &ws, [10, 3, 1], "k").unwrap(), [30, 1, 1]);
        assert_eq!(persistent_grid(&unknown, &ws, 4096), UNKNOWN_DEVICE_PROGRAMS);
    }

    /// The driver's count of resident programs, where it gives one, stands: from the
    /// registers and shared memory alone, seven programs of 32784 bytes fit an H100's
    /// 233472, but the driver reserves 1 KiB more for each, and holds six.
    #[test]
    fn the_drivers_count_stands() {
        let mut d = gpu_of_132(Backend::Cuda);
        d.shared_memory_per_multiprocessor = Some(233472);
        let mut k = KernelMetadata {
            threads: 128,
            registers: Some(56),
            shared_bytes: 32784,
            ..KernelMetadata::default()
        };
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(7));
        k.resident_programs = Some(6);
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(6));
        assert_eq!(persistent_grid(&d, &k, 4096), 132 * 6);
    }

    /// Clusters that walk rows: the driver's count of resident clusters where it gives one,
    /// the rows even over the rounds, a multiple of the cluster in programs; without it, the
    /// resident programs divided into clusters.
    #[test]
    fn clusters_walk_rows_on_the_clusters_that_fit() {
        let d = gpu_of_132(Backend::Cuda);
        let mut k = KernelMetadata {
            threads: 256,
            registers: Some(128),
            shared_bytes: 131200,
            resident_programs: Some(1),
            resident_clusters: Some(7),
            ..KernelMetadata::default()
        };
        // 1024 rows on 7 clusters of 16: 147 rounds, 1024 / 147 rounded up = 7 clusters.
        assert_eq!(persistent_cluster_grid(&d, &k, 16, 1024), 7 * 16);
        // 10 rows: 2 rounds of 5 clusters, not 7 then 3.
        assert_eq!(persistent_cluster_grid(&d, &k, 16, 10), 5 * 16);
        assert_eq!(persistent_cluster_grid(&d, &k, 16, 3), 3 * 16);
        assert_eq!(persistent_cluster_grid(&d, &k, 16, 0), 16);
        // No driver count: 132 programs in clusters of 8 are 16 clusters.
        k.resident_clusters = None;
        assert_eq!(persistent_cluster_grid(&d, &k, 8, 1024), 16 * 8);
    }

    /// Registers count in their allocation unit, and the threads a multiprocessor holds
    /// bound the count where registers would allow more: the persistent softmax at 29
    /// registers on 4 warps fits 16 programs (by threads; 32 registers allow 16 too), where
    /// the tutorial's formula says 17.
    #[test]
    fn registers_round_up_and_threads_bound() {
        let mut d = gpu_of_132(Backend::Vulkan);
        let mut k = KernelMetadata {
            threads: 128,
            registers: Some(29),
            shared_bytes: 0,
            ..KernelMetadata::default()
        };
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(16));
        d.max_threads_per_multiprocessor = Some(2048);
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(16));
        // 34 registers are allocated as 40: 12 programs, where 34 would give 15.
        k.registers = Some(34);
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(12));
        // Few registers: the threads bound it.
        k.registers = Some(16);
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(16));
    }

    /// Without the kernel's registers (Vulkan), the threads a multiprocessor holds bound
    /// the occupancy; shared memory still limits it.
    #[test]
    fn thread_limit_without_registers() {
        let mut d = DeviceProperties::unknown("gpu", "v", Backend::Vulkan, DeviceType::DiscreteGpu);
        d.multiprocessors = Some(132);
        let mut k = KernelMetadata {
            threads: 128,
            registers: None,
            shared_bytes: 16,
            ..KernelMetadata::default()
        };
        // Multiprocessors alone are not enough.
        assert_eq!(persistent_programs(&d, &k), None);
        d.max_threads_per_multiprocessor = Some(2048);
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(16));
        assert_eq!(persistent_programs(&d, &k), Some(2112));
        d.shared_memory_per_multiprocessor = Some(64 * 1024);
        k.shared_bytes = 8 * 1024;
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(8));
        // Registers, where reported, decide as the tutorial computes it.
        d.registers_per_multiprocessor = Some(65536);
        k.registers = Some(64);
        k.shared_bytes = 16;
        assert_eq!(programs_per_multiprocessor(&d, &k), Some(8));
    }
}
