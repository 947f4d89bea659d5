//! The implementations of [`Device`](crate::Device).

pub mod cpu;
pub mod cuda;
pub mod vulkan;
mod vulkan_print;
