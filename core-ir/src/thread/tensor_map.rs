//! What the tensor memory accelerator (TMA, sm_90) needs described: tensor maps, which the
//! runtime encodes at each launch, and the shared-memory barriers ("mbarriers") that count
//! the bytes its copies deliver ([`super::Stmt::TmaLoad`] and the `Mbarrier*` statements).

use super::Reg;

/// A number one launch fixes: a constant of the kernel, or the value of an integer scalar
/// parameter (an index into [`super::ThreadKernel::params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchValue {
    /// A constant of the kernel.
    Const(i64),
    /// The value of an integer scalar parameter, given by its index into
    /// [`super::ThreadKernel::params`].
    Param(u32),
}

/// A view of the buffer behind pointer parameter `param`, which the runtime describes to the
/// hardware at each launch (CUDA: a `CUtensorMap` from `cuTensorMapEncodeTiled`, passed as a
/// kernel parameter after the kernel's own, in the order of
/// [`super::ThreadKernel::tensor_maps`]).
///
/// Element `(x, y, o_0, ..)` of the view is element `y * stride + x + o_0 * outer[0] + ..`
/// of the buffer where each coordinate is within its extent ([`TensorMap::extents`]); any
/// other coordinate reads as zero. A box is `box_dims[0] x box_dims[1]` elements at one
/// index of each outer dimension, `box_dims[0]` of them contiguous, and lands in shared
/// memory as `box_dims[1]` rows of `box_dims[0] * element size` bytes (at most `swizzle`
/// bytes), one after the other, swizzled: within each aligned `8 * 128`-byte span, byte
/// address bits 4 and up (as many as `swizzle / 16` needs) are XORed with the bits from 7
/// up, the swizzle `wgmma`'s matrix descriptors read ([`super::SmemMatrix`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    /// The pointer parameter whose buffer the view is of: an index into
    /// [`super::ThreadKernel::params`]. The view's first element is the one the pointer
    /// points to.
    pub param: u32,
    /// The extents along `x` and `y` where the kernel's masks bound its accesses; `None`
    /// along a dimension it reads unmasked, whose extent the launch derives from the
    /// strides ([`TensorMap::extents`]).
    pub dims: [Option<LaunchValue>; 2],
    /// Elements between consecutive `y` (the buffer's row stride).
    pub stride: LaunchValue,
    /// The dimensions outside `y` (a head, a batch), innermost first: each one's stride in
    /// elements. A box spans one index of each, and no mask bounds them.
    pub outer: [Option<LaunchValue>; 3],
    /// The box's size in elements along `x` and `y` (1 to 256 each); `box_dims[0]` elements
    /// make a multiple of 16 bytes, at most `swizzle`.
    pub box_dims: [u32; 2],
    /// The swizzle mode in bytes: 32, 64 or 128 (CUDA's
    /// `CU_TENSOR_MAP_SWIZZLE_{32B,64B,128B}`).
    pub swizzle: u32,
}

/// A tensor map's view in one launch, innermost dimension first (`x`, `y`, then the outer
/// ones): each extent, and the stride in elements of each dimension but `x` (whose is 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewExtents {
    /// Each dimension's extent in elements, [`TensorMap::rank`] of them.
    pub dims: Vec<i64>,
    /// The stride in elements of each dimension but `x`: one fewer than `dims`.
    pub strides: Vec<i64>,
}

impl TensorMap {
    /// Bytes one box delivers (out-of-bounds zeros included).
    pub fn box_bytes(&self, elem_bytes: u32) -> u32 {
        self.box_dims[0] * self.box_dims[1] * elem_bytes
    }

    /// Dimensions of the view: 2, and one per outer dimension.
    pub fn rank(&self) -> usize {
        2 + self.outer.iter().flatten().count()
    }

    /// The view in a launch where `value` gives what each [`LaunchValue`] is and `len` is
    /// the number of elements from the view's first to the end of its buffer.
    ///
    /// An extent the kernel does not give (an unmasked dimension) is the most the next
    /// stride leaves room for (`x`: the row stride; `y`: the first outer stride over the row
    /// stride), and along the outermost dimension as many as fit in `len`: where the
    /// buffer's dimensions do not overlap, the view then holds every element such accesses
    /// reach. Errors name what does not hold: positive strides and extents, each dimension's
    /// extent times its stride within the next stride (the hardware's model of a tensor,
    /// which overlapping dimensions would break), a box no wider than a derived row, and the
    /// view within `len`.
    pub fn extents(&self, value: impl Fn(LaunchValue) -> Result<i64, String>, len: i64) -> Result<ViewExtents, String> {
        // The stride of every dimension, x's (1) included.
        let mut all = vec![1, value(self.stride)?];
        for o in self.outer.iter().flatten() {
            all.push(value(*o)?);
        }
        if let Some(s) = all.iter().find(|&&s| s <= 0) {
            return Err(format!("a stride of {s} elements (strides are positive)"));
        }
        let rank = all.len();
        let mut dims = Vec::with_capacity(rank);
        // The offset of the last element of the dimensions so far.
        let mut span = 0i64;
        for i in 0..rank {
            let extent = match self.dims.get(i).copied().flatten() {
                Some(v) => value(v)?,
                None if i + 1 < rank => all[i + 1] / all[i],
                None => (len - 1 - span).div_euclid(all[i]) + 1,
            };
            if extent <= 0 {
                return Err(format!(
                    "dimension {i} (stride {}) has extent {extent}: the buffer holds {len} elements from the view's first",
                    all[i]
                ));
            }
            if i + 1 < rank && extent.saturating_mul(all[i]) > all[i + 1] {
                return Err(format!(
                    "dimension {i} has {extent} indices {} elements apart, past the next dimension's stride {} (overlapping dimensions)",
                    all[i],
                    all[i + 1]
                ));
            }
            span = span.saturating_add((extent - 1).saturating_mul(all[i]));
            dims.push(extent);
        }
        if self.dims[0].is_none() && i64::from(self.box_dims[0]) > dims[0] {
            return Err(format!(
                "a box {} elements wide in rows of {} (a box unbounded along x lies within a row)",
                self.box_dims[0], dims[0]
            ));
        }
        if span >= len {
            return Err(format!(
                "the view's last element is {span} elements past its first; the buffer holds {len} from there"
            ));
        }
        Ok(ViewExtents {
            dims,
            strides: all[1..].to_vec(),
        })
    }
}

/// An mbarrier: 8 bytes of shared memory, element `index` (a uniform i32 register) of a
/// shared buffer of `u64`s. It counts arrivals and transaction bytes per phase; a phase
/// completes when both reach what it expects, and the next one begins (parity flips).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier {
    /// The shared buffer of `u64`s that holds it: an index into
    /// [`super::ThreadKernel::shared`].
    pub alloc: u32,
    /// Its element index (not bytes) in that buffer: a uniform i32 register.
    pub index: Reg,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention's keys: rows of 64 elements, `rows` of them a head where a mask bounds
    /// them (`None`: unmasked), heads 1000 rows apart and batches 3 heads apart.
    fn keys(rows: Option<i64>) -> TensorMap {
        TensorMap {
            param: 1,
            dims: [None, rows.map(LaunchValue::Const)],
            stride: LaunchValue::Const(64),
            outer: [
                Some(LaunchValue::Const(64 * 1000)),
                Some(LaunchValue::Const(64 * 1000 * 3)),
                None,
            ],
            box_dims: [64, 32],
            swizzle: 128,
        }
    }

    fn of(v: LaunchValue) -> Result<i64, String> {
        match v {
            LaunchValue::Const(c) => Ok(c),
            LaunchValue::Param(p) => Err(format!("parameter {p}")),
        }
    }

    #[test]
    fn unbounded_extents_come_from_the_next_stride_and_the_buffer() {
        let len = 64 * 1000 * 3 * 2;
        let v = keys(None).extents(of, len).unwrap();
        assert_eq!(v.dims, [64, 1000, 3, 2]);
        assert_eq!(v.strides, [64, 64_000, 192_000]);
        // A masked row count is the kernel's; a buffer one element short loses a batch.
        assert_eq!(keys(Some(999)).extents(of, len).unwrap().dims, [64, 999, 3, 2]);
        assert_eq!(keys(None).extents(of, len - 1).unwrap().dims, [64, 1000, 3, 1]);
        // Two plain dimensions, both given: what the 2-D maps always were.
        let plain = TensorMap {
            dims: [Some(LaunchValue::Const(50)), Some(LaunchValue::Const(7))],
            outer: [None; 3],
            ..keys(None)
        };
        assert_eq!(plain.extents(of, 64 * 6 + 50).unwrap().dims, [50, 7]);
    }

    #[test]
    fn what_a_view_cannot_be_is_named() {
        let len = 64 * 1000 * 3 * 2;
        let err = |m: TensorMap, len: i64| m.extents(of, len).unwrap_err();
        assert!(err(keys(Some(1001)), len).contains("overlapping dimensions"));
        let wide = TensorMap {
            box_dims: [128, 32],
            ..keys(None)
        };
        assert!(err(wide, len).contains("a box 128 elements wide in rows of 64"));
        let plain = TensorMap {
            dims: [Some(LaunchValue::Const(64)), Some(LaunchValue::Const(8))],
            outer: [None; 3],
            ..keys(None)
        };
        assert!(err(plain, 64 * 7 + 63).contains("the buffer holds 511"));
        let negative = TensorMap {
            stride: LaunchValue::Const(-64),
            ..keys(None)
        };
        assert!(err(negative, len).contains("strides are positive"));
        assert!(err(keys(None), 0).contains("extent 0"));
    }
}
