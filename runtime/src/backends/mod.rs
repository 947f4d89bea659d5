//! The implementations of [`Device`](crate::Device).

pub mod cpu;
pub mod cuda;
pub mod vulkan;
mod vulkan_print;

/// Whether environment variable `name` leaves a feature on (anything but `0`, or unset):
/// the CUDA runtime's switches, and `RUTILE_WIDE_PRODUCTS` and `RUTILE_MASKS_BY_RUNS`,
/// which both backends read.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v.trim() != "0")
}
