//! Host buffers: the global memory of an interpreted launch, one element type per buffer,
//! stored as bytes in the host's byte order (as a GPU runtime copies them).

use super::error::InterpError;
use crate::types::ScalarType;
use half::{bf16, f16};
use std::fmt;

mod sealed {
    pub trait Sealed {}
}

/// A host element type: `i8` to `i64`, `u8` to `u64`, `f32`, `f64`, [`half::f16`],
/// [`half::bf16`], and the fp8 types of [`crate::fp8`] ([`crate::fp8::F8E4M3`] and the
/// others). Booleans (`i1`) have no `Element` impl; use [`HostBuffer::from_bools`]
/// and [`HostBuffer::to_bools`].
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The IR type of the element.
    const TYPE: ScalarType;
}

macro_rules! element {
    ($($t:ty => $s:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TYPE: ScalarType = ScalarType::$s;
        }
    )*};
}
element!(
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f16 => F16, bf16 => BF16, f32 => F32, f64 => F64,
    crate::fp8::F8E4M3 => F8E4M3, crate::fp8::F8E5M2 => F8E5M2,
    crate::fp8::F8E4M3B15 => F8E4M3B15, crate::fp8::F8E4M3Fnuz => F8E4M3Fnuz,
    crate::fp8::F8E5M2Fnuz => F8E5M2Fnuz,
);

/// A host buffer of one element type, stored as bytes (booleans as one byte, 0 or 1).
#[derive(Clone, PartialEq, Eq)]
pub struct HostBuffer {
    elem: ScalarType,
    bytes: Vec<u8>,
}

impl HostBuffer {
    /// A buffer holding a copy of `data`.
    pub fn from_slice<T: Element>(data: &[T]) -> Self {
        HostBuffer {
            elem: T::TYPE,
            bytes: bytemuck::cast_slice(data).to_vec(),
        }
    }
    /// A buffer of `len` zeros (false for booleans).
    ///
    /// # Panics
    ///
    /// When `len` elements do not fit the address space, as `Vec::with_capacity` does (a
    /// wrapped size would silently make a shorter buffer).
    pub fn zeros(elem: ScalarType, len: usize) -> Self {
        let bytes = len
            .checked_mul(elem.size_bytes())
            .unwrap_or_else(|| panic!("HostBuffer::zeros: {len} elements of {elem} overflow the address space"));
        HostBuffer {
            elem,
            bytes: vec![0; bytes],
        }
    }
    /// A boolean (`i1`) buffer.
    pub fn from_bools(data: &[bool]) -> Self {
        HostBuffer {
            elem: ScalarType::Bool,
            bytes: data.iter().map(|&b| b as u8).collect(),
        }
    }
    /// A buffer from raw bytes in the host's byte order; the length must be a whole number of
    /// elements, and boolean bytes must be 0 or 1.
    pub fn from_bytes(elem: ScalarType, bytes: Vec<u8>) -> Result<Self, InterpError> {
        if bytes.len() % elem.size_bytes() != 0 {
            return Err(InterpError::Buffer {
                message: format!("{} bytes is not a whole number of {elem} elements", bytes.len()),
            });
        }
        if elem == ScalarType::Bool {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(InterpError::Buffer {
                    message: format!("byte {i} of an i1 buffer is {}, not 0 or 1", bytes[i]),
                });
            }
        }
        Ok(HostBuffer { elem, bytes })
    }
    /// The element type.
    pub fn elem(&self) -> ScalarType {
        self.elem
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.elem.size_bytes()
    }
    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The elements' bytes, in the host's byte order.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The elements' bytes, to fill the buffer in place (for example from a device copy).
    /// Boolean buffers must hold only 0 and 1 bytes; other bytes read as `true`.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
    /// The elements' bytes, in the host's byte order, taking the buffer apart.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
    /// The elements as `T`, which must be the buffer's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, InterpError> {
        if T::TYPE != self.elem {
            return Err(InterpError::buffer_type(T::TYPE, self.elem));
        }
        // Copies into a vector of `T`: the byte vector has no alignment guarantee.
        let mut out = vec![T::zeroed(); self.len()];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&self.bytes);
        Ok(out)
    }
    /// The elements of a boolean (`i1`) buffer.
    pub fn to_bools(&self) -> Result<Vec<bool>, InterpError> {
        if self.elem != ScalarType::Bool {
            return Err(InterpError::buffer_type(ScalarType::Bool, self.elem));
        }
        Ok(self.bytes.iter().map(|&b| b != 0).collect())
    }
}

impl fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostBuffer<{}>[{}]", self.elem, self.len())
    }
}
