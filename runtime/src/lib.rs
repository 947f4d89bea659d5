//! rutile: the crate users depend on.
pub mod cuda;
pub mod vulkan;
