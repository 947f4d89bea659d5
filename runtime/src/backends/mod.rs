//! The implementations of [`Device`](crate::Device).

pub mod cpu;
pub mod cuda;
pub mod vulkan;
