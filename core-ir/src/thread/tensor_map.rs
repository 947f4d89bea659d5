//! What the tensor memory accelerator (TMA, sm_90) needs described: tensor maps, which the
//! runtime encodes at each launch, and the shared-memory barriers ("mbarriers") that count
//! the bytes its copies deliver ([`super::Stmt::TmaLoad`] and the `Mbarrier*` statements).

use super::Reg;

/// A number one launch fixes: a constant of the kernel, or the value of an integer scalar
/// parameter (an index into [`super::ThreadKernel::params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchValue {
    Const(i64),
    Param(u32),
}

/// A 2-D view of the buffer behind pointer parameter `param`, which the runtime describes to
/// the hardware at each launch (CUDA: a `CUtensorMap` from `cuTensorMapEncodeTiled`, passed
/// as a kernel parameter after the kernel's own, in the order of
/// [`super::ThreadKernel::tensor_maps`]).
///
/// Element `(x, y)` of the view, `0 <= x < dims[0]` and `0 <= y < dims[1]`, is element
/// `y * stride + x` of the buffer; any other coordinate reads as zero. A box is
/// `box_dims[0] x box_dims[1]` elements, `box_dims[0]` of them contiguous, and lands in
/// shared memory as `box_dims[1]` rows of `box_dims[0] * element size` bytes (at most
/// `swizzle` bytes), one after the other, swizzled: within each aligned `8 * 128`-byte
/// span, byte address bits 4 and up (as many as `swizzle / 16` needs) are XORed with the
/// bits from 7 up, the swizzle `wgmma`'s matrix descriptors read ([`super::SmemMatrix`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    pub param: u32,
    pub dims: [LaunchValue; 2],
    /// Elements between consecutive `y` (the buffer's row stride).
    pub stride: LaunchValue,
    pub box_dims: [u32; 2],
    /// 32, 64 or 128.
    pub swizzle: u32,
}

impl TensorMap {
    /// Bytes one box delivers (out-of-bounds zeros included).
    pub fn box_bytes(&self, elem_bytes: u32) -> u32 {
        self.box_dims[0] * self.box_dims[1] * elem_bytes
    }
}

/// An mbarrier: 8 bytes of shared memory, element `index` (a uniform i32 register) of a
/// shared buffer of `u64`s. It counts arrivals and transaction bytes per phase; a phase
/// completes when both reach what it expects, and the next one begins (parity flips).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier {
    pub alloc: u32,
    pub index: Reg,
}
