//! SPIR-V/WGSL generation from rutile per-thread code (filled in by the Vulkan-path work).
