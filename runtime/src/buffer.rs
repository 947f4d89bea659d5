//! Device buffers: untyped ([`DeviceBuffer`], what backends see) and typed ([`Buffer<T>`],
//! what users hold).

pub use rutile_ir::interp::Element;
use rutile_ir::ScalarType;
use std::any::Any;
use std::marker::PhantomData;

/// Memory on one device holding `len` elements of one scalar type.
pub struct DeviceBuffer {
    pub(crate) elem: ScalarType,
    pub(crate) len: usize,
    /// The device that made it (see [`crate::Device::id`]); launching with a buffer of
    /// another device is an error.
    pub(crate) device: u64,
    /// The backend's own storage.
    pub(crate) storage: Box<dyn Any + Send + Sync>,
}

impl DeviceBuffer {
    pub(crate) fn new(elem: ScalarType, len: usize, device: u64, storage: Box<dyn Any + Send + Sync>) -> Self {
        DeviceBuffer {
            elem,
            len,
            device,
            storage,
        }
    }
    /// The element type.
    pub fn elem(&self) -> ScalarType {
        self.elem
    }
    /// The length, in elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The size of its contents in bytes: `len` times the element's size. The device may
    /// allocate more (padding), which this does not count.
    pub fn size_bytes(&self) -> usize {
        self.len * self.elem.size_bytes()
    }
    /// The backend storage of type `T`, for the device whose key is `device`: an error when
    /// the buffer belongs to another device.
    pub(crate) fn storage<T: 'static>(&self, device: u64) -> Result<&T, crate::Error> {
        if self.device != device {
            return Err(crate::Error::Buffer("the buffer belongs to another device".into()));
        }
        self.storage
            .downcast_ref::<T>()
            .ok_or_else(|| crate::Error::Buffer("the buffer's storage is of another backend".into()))
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}; {}>", self.elem, self.len)
    }
}

/// A typed buffer of `T` on a device.
pub struct Buffer<T: Element> {
    raw: DeviceBuffer,
    marker: PhantomData<T>,
}

impl<T: Element> Buffer<T> {
    /// Wraps an untyped buffer; fails if its element type is not `T`.
    pub fn from_raw(raw: DeviceBuffer) -> Result<Self, crate::Error> {
        if raw.elem != T::TYPE {
            return Err(crate::Error::Buffer(format!(
                "a buffer of {} cannot be used as a buffer of {}",
                raw.elem,
                T::TYPE
            )));
        }
        Ok(Buffer {
            raw,
            marker: PhantomData,
        })
    }
    /// The untyped buffer, as launches and the [`Device`](crate::Device) trait take it.
    pub fn raw(&self) -> &DeviceBuffer {
        &self.raw
    }
    /// The length, in elements of `T`.
    pub fn len(&self) -> usize {
        self.raw.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer<{}; {}>", T::TYPE, self.raw.len)
    }
}

/// Any value as bytes, for typed uploads.
pub(crate) fn bytes_of<T: Element>(data: &[T]) -> Vec<u8> {
    rutile_ir::interp::HostBuffer::from_slice(data).into_bytes()
}

/// Bytes as values, for typed downloads.
pub(crate) fn values_of<T: Element>(elem: ScalarType, bytes: Vec<u8>) -> Result<Vec<T>, crate::Error> {
    let host = rutile_ir::interp::HostBuffer::from_bytes(elem, bytes).map_err(crate::Error::Interp)?;
    host.to_vec::<T>().map_err(crate::Error::Interp)
}

/// Checks that a copy's buffers match.
pub(crate) fn check_copy(src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<(), crate::Error> {
    if src.elem != dst.elem || src.len != dst.len {
        return Err(crate::Error::Buffer(format!(
            "cannot copy {src:?} into {dst:?}: element types and lengths must match"
        )));
    }
    Ok(())
}
