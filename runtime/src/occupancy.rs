//! Occupancy as the persistent softmax tutorial computes it: how many programs of a
//! compiled kernel fit on one multiprocessor, by registers and by shared memory.

use crate::compiled::KernelMetadata;
use crate::device::DeviceProperties;

/// Programs of `kernel` resident on one multiprocessor:
/// `registers_per_sm / (registers_per_thread * threads_per_program)`, limited by
/// `shared_memory_per_sm / shared_memory_per_program`. `None` when the device or the
/// compiler does not report the numbers it needs.
pub fn programs_per_multiprocessor(device: &DeviceProperties, kernel: &KernelMetadata) -> Option<u32> {
    let regs = kernel.registers?.max(1);
    let mut occupancy = device.registers_per_multiprocessor? / (regs * kernel.threads.max(1));
    if let Some(by_shared) = device
        .shared_memory_per_multiprocessor?
        .checked_div(kernel.shared_bytes)
    {
        occupancy = occupancy.min(by_shared);
    }
    Some(occupancy)
}

/// The persistent tutorial's grid: `multiprocessors x occupancy` programs (at least one).
pub fn persistent_programs(device: &DeviceProperties, kernel: &KernelMetadata) -> Option<u32> {
    Some((device.multiprocessors? * programs_per_multiprocessor(device, kernel)?).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Backend, DeviceType};

    #[test]
    fn h100_like_numbers() {
        let mut d = DeviceProperties::unknown("gpu", "v", Backend::Cuda, DeviceType::DiscreteGpu);
        d.multiprocessors = Some(132);
        d.registers_per_multiprocessor = Some(65536);
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
    }
}
