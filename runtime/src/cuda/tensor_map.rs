//! Tensor maps: the `CUtensorMap` descriptors through which a kernel's tensor memory
//! accelerator copies (sm_90 and later) read global memory, encoded on the host with
//! `cuTensorMapEncodeTiled` and passed to the kernel by value ([`KernelArg::TensorMap`]).
//!
//! [`KernelArg::TensorMap`]: super::KernelArg::TensorMap

use std::fmt;

use cudarc::driver::sys;

use super::context::CudaDevice;
use super::error::{describe, CudaError};

/// The first driver API version with `cuTensorMapEncodeTiled` (CUDA 12.0).
const TENSOR_MAP_MIN_DRIVER: u32 = 12000;

/// An encoded tensor map: the 128 opaque bytes of a `CUtensorMap`, 64-byte aligned as the
/// driver and the kernel parameter want them.
#[repr(C, align(64))]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CudaTensorMap {
    opaque: [u64; 16],
}

impl fmt::Debug for CudaTensorMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CudaTensorMap(..)")
    }
}

impl CudaTensorMap {
    /// The size of a `CUtensorMap`, and of the kernel parameter that receives it.
    pub const BYTES: usize = 128;
}

/// The element type of a tensor map (`CUtensorMapDataType`). The copies move bytes, so a
/// signed and an unsigned type of one size are interchangeable where the driver has only one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorMapElem {
    /// 8-bit unsigned integers (`CU_TENSOR_MAP_DATA_TYPE_UINT8`); also carries `i8` and `bool`.
    U8,
    /// 16-bit unsigned integers (`CU_TENSOR_MAP_DATA_TYPE_UINT16`); also carries `i16`.
    U16,
    /// 32-bit unsigned integers (`CU_TENSOR_MAP_DATA_TYPE_UINT32`).
    U32,
    /// 32-bit signed integers (`CU_TENSOR_MAP_DATA_TYPE_INT32`).
    I32,
    /// 64-bit unsigned integers (`CU_TENSOR_MAP_DATA_TYPE_UINT64`).
    U64,
    /// 64-bit signed integers (`CU_TENSOR_MAP_DATA_TYPE_INT64`).
    I64,
    /// IEEE half-precision floats (`CU_TENSOR_MAP_DATA_TYPE_FLOAT16`).
    F16,
    /// bfloat16 floats (`CU_TENSOR_MAP_DATA_TYPE_BFLOAT16`).
    BF16,
    /// 32-bit floats (`CU_TENSOR_MAP_DATA_TYPE_FLOAT32`).
    F32,
    /// 64-bit floats (`CU_TENSOR_MAP_DATA_TYPE_FLOAT64`).
    F64,
}

impl TensorMapElem {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            TensorMapElem::U8 => 1,
            TensorMapElem::U16 | TensorMapElem::F16 | TensorMapElem::BF16 => 2,
            TensorMapElem::U32 | TensorMapElem::I32 | TensorMapElem::F32 => 4,
            TensorMapElem::U64 | TensorMapElem::I64 | TensorMapElem::F64 => 8,
        }
    }

    fn cu(self) -> sys::CUtensorMapDataType {
        use sys::CUtensorMapDataType as T;
        match self {
            TensorMapElem::U8 => T::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            TensorMapElem::U16 => T::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            TensorMapElem::U32 => T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            TensorMapElem::I32 => T::CU_TENSOR_MAP_DATA_TYPE_INT32,
            TensorMapElem::U64 => T::CU_TENSOR_MAP_DATA_TYPE_UINT64,
            TensorMapElem::I64 => T::CU_TENSOR_MAP_DATA_TYPE_INT64,
            TensorMapElem::F16 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            TensorMapElem::BF16 => T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            TensorMapElem::F32 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            TensorMapElem::F64 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        }
    }
}

/// A tiled tensor map of 2 to 5 dimensions, innermost first: the element at coordinates
/// `c` (each `c[i] < dims[i]`) is at byte `address + c[0] * elem size` plus `c[i] *
/// strides_bytes[i - 1]` for each later `i`; a copy moves a box of `box_dims` elements (the
/// first two sides a tile, rows swizzled within `swizzle` bytes: 32, 64 or 128; the others
/// 1), and reads zeros outside the dims. Only the first `rank` dims and box sides, and
/// `rank - 1` strides, count. Element strides are 1, L2 promotion 256 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TiledTensorMap {
    /// The element type.
    pub elem: TensorMapElem,
    /// Device address of element `(0, 0, ..)`.
    pub address: u64,
    /// Number of dimensions, 2 to 5: how many of `dims` and `box_dims`, and `rank - 1` of
    /// `strides_bytes`, count.
    pub rank: usize,
    /// Elements along each dimension, innermost first, 1 to 2^32 each.
    pub dims: [u64; 5],
    /// Bytes between consecutive indices of each dimension but the first (`y`'s: the rows).
    pub strides_bytes: [u64; 4],
    /// Elements a copy moves along each dimension, innermost first, 1 to 256 each; a box row
    /// (`box_dims[0]` elements) must be a multiple of 16 bytes and fit in `swizzle`.
    pub box_dims: [u32; 5],
    /// Bytes within which a box's rows are swizzled in shared memory: 32, 64 or 128.
    pub swizzle: u32,
}

impl TiledTensorMap {
    /// A 2-D map: `dims[0]` elements a row, `dims[1]` rows `stride_bytes` apart.
    pub fn two_d(
        elem: TensorMapElem,
        address: u64,
        dims: [u64; 2],
        stride_bytes: u64,
        box_dims: [u32; 2],
        swizzle: u32,
    ) -> TiledTensorMap {
        TiledTensorMap {
            elem,
            address,
            rank: 2,
            dims: [dims[0], dims[1], 1, 1, 1],
            strides_bytes: [stride_bytes, 0, 0, 0],
            box_dims: [box_dims[0], box_dims[1], 1, 1, 1],
            swizzle,
        }
    }
}

impl fmt::Display for TiledTensorMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.rank.clamp(1, 5);
        let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ");
        let boxes: Vec<u64> = self.box_dims[..r].iter().map(|&b| u64::from(b)).collect();
        write!(
            f,
            "{:?} at {:#x}, dims {}, strides {:?} bytes, box {}, {}-byte swizzle",
            self.elem,
            self.address,
            join(&self.dims[..r]),
            &self.strides_bytes[..r - 1],
            join(&boxes),
            self.swizzle
        )
    }
}

impl TiledTensorMap {
    /// What `cuTensorMapEncodeTiled` requires of these values (CUDA driver API
    /// documentation), checked here so that a refusal says which value is wrong: among them,
    /// each stride holds the dimensions inside it (the driver's model of a tensor).
    pub fn check(&self) -> Result<(), String> {
        let size = self.elem.size_bytes();
        if !(2..=5).contains(&self.rank) {
            return Err(format!("{} dimensions; rutile's maps have 2 to 5", self.rank));
        }
        let r = self.rank;
        if self.address % 16 != 0 {
            return Err(format!("the address {:#x} is not 16-byte aligned", self.address));
        }
        for (i, &d) in self.dims[..r].iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return Err(format!("dimension {i} is {d}; the driver takes 1 to 2^32"));
            }
        }
        for (i, &s) in self.strides_bytes[..r - 1].iter().enumerate() {
            let what = if i == 0 {
                "the row stride".to_string()
            } else {
                format!("the stride of dimension {}", i + 1)
            };
            if s % 16 != 0 || s >= 1 << 40 {
                return Err(format!(
                    "{what} is {s} bytes; the driver takes a multiple of 16 below 2^40"
                ));
            }
            // The bytes dimension i spans.
            let inner = if i == 0 {
                self.dims[0] * size
            } else {
                self.dims[i] * self.strides_bytes[i - 1]
            };
            if s < inner {
                return Err(if i == 0 {
                    format!(
                        "the row stride of {s} bytes is shorter than a row of {} elements ({inner} bytes)",
                        self.dims[0]
                    )
                } else {
                    format!("{what} of {s} bytes is shorter than the {inner} bytes dimension {i} spans")
                });
            }
        }
        if self.box_dims[..r].iter().any(|&b| b == 0 || b > 256) {
            return Err(format!(
                "a box of {:?} elements; the driver takes 1 to 256 a side",
                &self.box_dims[..r]
            ));
        }
        let row = u64::from(self.box_dims[0]) * size;
        if !matches!(self.swizzle, 32 | 64 | 128) || row % 16 != 0 || row > u64::from(self.swizzle) {
            return Err(format!(
                "box rows of {row} bytes with a {}-byte swizzle; the driver takes rows of a multiple \
                 of 16 bytes up to the swizzle (32, 64 or 128)",
                self.swizzle
            ));
        }
        Ok(())
    }

    fn swizzle(&self) -> sys::CUtensorMapSwizzle {
        use sys::CUtensorMapSwizzle as S;
        match self.swizzle {
            32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
            64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
            _ => S::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

impl CudaDevice {
    /// Encodes `map` with `cuTensorMapEncodeTiled`. Values the driver would refuse are
    /// [`CudaError::InvalidArgument`] (see [`TiledTensorMap::check`]), before any call.
    pub fn encode_tensor_map(&self, map: &TiledTensorMap) -> Result<CudaTensorMap, CudaError> {
        map.check().map_err(|what| CudaError::InvalidArgument {
            what: format!("tensor map ({map}): {what}"),
        })?;
        let driver = self.properties().driver_version;
        if driver < TENSOR_MAP_MIN_DRIVER {
            // cudarc's loader would panic on the missing entry point.
            return Err(CudaError::InvalidArgument {
                what: format!(
                    "tensor maps need a CUDA 12.0 driver or newer, this one is {}.{}",
                    driver / 1000,
                    (driver % 1000) / 10
                ),
            });
        }
        self.bind()?;
        let mut out = sys::CUtensorMap { opaque: [0; 16] };
        let dims = map.dims;
        let strides = map.strides_bytes;
        let element_strides = [1u32; 5];
        // SAFETY: every pointer is to a live local of at least the size the driver reads for
        // a map of `rank` dimensions (checked 2 to 5: `rank` dims, box sides and element
        // strides, `rank - 1` strides); `out` is a `CUtensorMap`. The global address is only
        // recorded, not accessed.
        let status = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut out,
                map.elem.cu(),
                map.rank as u32,
                map.address as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                map.box_dims.as_ptr(),
                element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                map.swizzle(),
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                // Zeros outside the tensor.
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if let Err(e) = status.result() {
            return self
                .health()
                .note(Err(CudaError::from_code("cuTensorMapEncodeTiled", e.0, describe(e))));
        }
        Ok(CudaTensorMap { opaque: out.opaque })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_map() -> TiledTensorMap {
        TiledTensorMap::two_d(TensorMapElem::F16, 0x7f00_0000_0000, [1000, 300], 2048, [64, 128], 128)
    }

    /// Attention's keys: 64 halves a row, 1024 rows a head, 32 heads, 4 batches.
    fn heads_map() -> TiledTensorMap {
        TiledTensorMap {
            rank: 4,
            dims: [64, 1024, 32, 4, 1],
            strides_bytes: [128, 128 * 1024, 128 * 1024 * 32, 0],
            box_dims: [64, 128, 1, 1, 1],
            ..f16_map()
        }
    }

    #[test]
    fn accepts_what_the_driver_takes() {
        f16_map().check().unwrap();
        heads_map().check().unwrap();
        let mut m = f16_map();
        m.elem = TensorMapElem::F32;
        m.box_dims[..2].copy_from_slice(&[8, 256]);
        m.swizzle = 32;
        m.strides_bytes[0] = 4000;
        m.check().unwrap();
    }

    #[test]
    fn names_the_value_the_driver_would_refuse() {
        let refused = |f: &dyn Fn(&mut TiledTensorMap), needle: &str| {
            let mut m = f16_map();
            f(&mut m);
            let e = m.check().unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        };
        refused(&|m| m.dims[1] = 0, "dimension 1 is 0");
        refused(&|m| m.dims[0] = (1 << 32) + 1, "dimension 0");
        refused(
            &|m| m.strides_bytes[0] = 2008,
            "2008 bytes; the driver takes a multiple of 16",
        );
        refused(&|m| m.strides_bytes[0] = 1 << 40, "below 2^40");
        refused(&|m| m.strides_bytes[0] = 1984, "shorter than a row of 1000 elements");
        refused(&|m| m.address += 8, "not 16-byte aligned");
        refused(&|m| m.box_dims[1] = 257, "1 to 256");
        refused(&|m| m.swizzle = 64, "box rows of 128 bytes with a 64-byte swizzle");
        refused(&|m| m.box_dims[0] = 4, "box rows of 8 bytes");
        refused(&|m| m.rank = 6, "6 dimensions");
        let heads = |f: &dyn Fn(&mut TiledTensorMap), needle: &str| {
            let mut m = heads_map();
            f(&mut m);
            let e = m.check().unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        };
        // Heads that overlap: a head's 1024 rows pass the next head's first.
        heads(
            &|m| m.strides_bytes[1] = 128 * 1000,
            "the stride of dimension 2 of 128000 bytes is shorter than the 131072 bytes dimension 1 spans",
        );
        heads(&|m| m.box_dims[2] = 0, "1 to 256");
    }

    #[test]
    fn the_map_is_a_64_byte_aligned_128_byte_parameter() {
        assert_eq!(std::mem::size_of::<CudaTensorMap>(), CudaTensorMap::BYTES);
        assert_eq!(std::mem::align_of::<CudaTensorMap>(), 64);
        assert_eq!(std::mem::size_of::<sys::CUtensorMap>(), CudaTensorMap::BYTES);
    }
}
