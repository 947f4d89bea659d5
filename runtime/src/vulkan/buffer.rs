//! Storage buffers: allocation, upload and read-back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytemuck::Pod;

use super::device::WgpuDevice;
use super::error::WgpuError;

/// wgpu copies and writes in multiples of this many bytes.
const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Allocations are multiples of this many bytes, so that a kernel may bind any buffer as
/// an array of 16-byte vectors (rutile-spirv does for 16-byte accesses).
const ALLOC_ALIGN: u64 = 16;

/// A storage buffer of `len` bytes in device memory, usable as a `read_write` storage
/// binding and as the source or destination of copies.
///
/// wgpu forbids zero-sized bindings and copies of sizes that are not multiples of 4, and a
/// kernel may bind any buffer as an array of 16-byte vectors, so the allocation is the
/// length rounded up to a multiple of 16, and at least 16 bytes; the padding is zero and is
/// never returned by [`WgpuBuffer::read`]. Cloning shares the buffer.
#[derive(Debug, Clone)]
pub struct WgpuBuffer {
    device: WgpuDevice,
    buffer: wgpu::Buffer,
    len: u64,
    /// Counts the allocation in the device's live bytes while any clone holds it.
    _counted: Arc<Counted>,
}

/// `bytes` counted in a device's live buffer bytes until dropped.
#[derive(Debug)]
struct Counted {
    bytes: u64,
    count: Arc<AtomicU64>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.count.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Bytes allocated for a buffer of `len` logical bytes, saturating at `u64::MAX` (above
/// every device's limit, so such a buffer is refused rather than wrapped to a small one).
pub(crate) fn padded_size(len: u64) -> u64 {
    len.div_ceil(ALLOC_ALIGN).max(1).saturating_mul(ALLOC_ALIGN)
}

impl WgpuBuffer {
    /// Allocates `len_bytes` bytes set to zero.
    ///
    /// [`WgpuError::BufferTooLarge`] when the buffer could not be bound whole as a storage
    /// buffer on this device.
    pub fn zeroed(device: &WgpuDevice, len_bytes: usize) -> Result<Self, WgpuError> {
        let len = len_bytes as u64;
        let size = padded_size(len);
        let props = device.properties();
        let (limit, limit_name) = if props.max_storage_buffer_binding_size <= props.max_buffer_size {
            (props.max_storage_buffer_binding_size, "max_storage_buffer_binding_size")
        } else {
            (props.max_buffer_size, "max_buffer_size")
        };
        if size > limit {
            return Err(WgpuError::BufferTooLarge {
                requested: len,
                limit,
                limit_name,
            });
        }
        // WebGPU zero-initialises new buffers.
        let buffer = device.scoped("allocating a storage buffer", || {
            device.raw().create_buffer(&wgpu::BufferDescriptor {
                label: Some("rutile storage buffer"),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        let count = device.live_bytes().clone();
        count.fetch_add(size, Ordering::Relaxed);
        Ok(WgpuBuffer {
            device: device.clone(),
            buffer,
            len,
            _counted: Arc::new(Counted { bytes: size, count }),
        })
    }

    /// Allocates a buffer holding a copy of `data`.
    pub fn from_bytes(device: &WgpuDevice, data: &[u8]) -> Result<Self, WgpuError> {
        let buffer = Self::zeroed(device, data.len())?;
        buffer.write(data)?;
        Ok(buffer)
    }

    /// Allocates a buffer holding a copy of `data`'s bytes.
    pub fn from_slice<T: Pod>(device: &WgpuDevice, data: &[T]) -> Result<Self, WgpuError> {
        Self::from_bytes(device, bytemuck::cast_slice(data))
    }

    /// Logical length in bytes (without the padding).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when the buffer holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated: the length rounded up to a multiple of 16, at least 16.
    pub fn allocated_bytes(&self) -> u64 {
        self.buffer.size()
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &WgpuDevice {
        &self.device
    }

    /// Copies `src` into this buffer on the device (recorded; does not wait). Both must have
    /// the same length.
    pub fn copy_from(&self, src: &WgpuBuffer) -> Result<(), WgpuError> {
        if src.len() != self.len() {
            return Err(WgpuError::BufferSize {
                expected: self.len() as u64,
                got: src.len() as u64,
            });
        }
        let size = self.allocated_bytes().min(src.allocated_bytes());
        let device = self.device();
        device.scoped("copying a buffer", || {
            device.record(|encoder| encoder.copy_buffer_to_buffer(src.raw(), 0, self.raw(), 0, size))
        })?
    }

    /// The wgpu buffer, for work this layer does not cover.
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Copies `data` into the buffer, in order with the work already submitted; `data`
    /// must have exactly [`Self::len`] bytes. Does not wait.
    pub fn write(&self, data: &[u8]) -> Result<(), WgpuError> {
        if data.len() as u64 != self.len {
            return Err(WgpuError::BufferSize {
                expected: self.len,
                got: data.len() as u64,
            });
        }
        if data.is_empty() {
            return self.device.check_lost();
        }
        let padded;
        let bytes = if self.len % ALIGN == 0 {
            data
        } else {
            let mut v = data.to_vec();
            v.resize(padded_size(self.len) as usize, 0);
            padded = v;
            &padded[..]
        };
        // The queue writes before the next submission: recorded work that reads the
        // buffer must be submitted first.
        self.device.flush()?;
        self.device.scoped("writing a buffer", || {
            self.device.queue().write_buffer(&self.buffer, 0, bytes)
        })
    }

    /// Copies `data`'s bytes into the buffer (see [`Self::write`]).
    pub fn write_slice<T: Pod>(&self, data: &[T]) -> Result<(), WgpuError> {
        self.write(bytemuck::cast_slice(data))
    }

    /// Copies the buffer into a new vector, after all work submitted before; blocks until
    /// the copy is done.
    pub fn read(&self) -> Result<Vec<u8>, WgpuError> {
        if self.len == 0 {
            self.device.synchronize()?;
            return Ok(Vec::new());
        }
        let mut bytes = read_back(&self.device, &self.buffer, self.buffer.size())?;
        bytes.truncate(self.len as usize);
        Ok(bytes)
    }

    /// Reads the buffer as values of `T`; its length must be a multiple of `T`'s size.
    pub fn read_as<T: Pod>(&self) -> Result<Vec<T>, WgpuError> {
        let size = size_of::<T>() as u64;
        if size == 0 || self.len % size != 0 {
            return Err(WgpuError::InvalidArgument {
                what: format!(
                    "a buffer of {} bytes is not a whole number of {}-byte values of {}",
                    self.len,
                    size,
                    std::any::type_name::<T>()
                ),
            });
        }
        let bytes = self.read()?;
        let mut out = vec![T::zeroed(); (self.len / size) as usize];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }
}

/// Copies the first `size` bytes (a multiple of 4) of `source`, which needs `COPY_SRC`,
/// into a mappable staging buffer, maps it and returns its bytes. Blocks.
pub(crate) fn read_back(device: &WgpuDevice, source: &wgpu::Buffer, size: u64) -> Result<Vec<u8>, WgpuError> {
    let staging = device.scoped("copying a buffer for reading", || {
        let staging = device.raw().create_buffer(&wgpu::BufferDescriptor {
            label: Some("rutile read-back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        device.record(|encoder| encoder.copy_buffer_to_buffer(source, 0, &staging, 0, size))?;
        device.flush()?;
        Ok::<_, WgpuError>(staging)
    })??;
    let (tx, rx) = std::sync::mpsc::channel();
    let slice = staging.slice(..);
    device.scoped("mapping a buffer for reading", || {
        slice.map_async(wgpu::MapMode::Read, move |result| {
            // The receiver outlives the wait below; a failed send only means it is gone.
            let _ = tx.send(result);
        })
    })?;
    // The callback runs during a poll of the device — ours, or one that another thread
    // sharing the device is making at the same moment (it may have taken our callback and
    // not run it yet), so wait for it rather than only checking once.
    let mut result = None;
    for _ in 0..1000 {
        device.wait()?;
        device.take_uncaptured()?;
        match rx.recv_timeout(std::time::Duration::from_millis(10)) {
            Ok(r) => {
                result = Some(r);
                break;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    match result {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(WgpuError::Map { message: e.to_string() }),
        None => {
            return Err(WgpuError::Map {
                message: "the map callback did not run after the device was idle".to_string(),
            })
        }
    }
    let bytes = {
        let view = slice
            .get_mapped_range()
            .map_err(|e| WgpuError::Map { message: e.to_string() })?;
        view.to_vec()
    };
    staging.unmap();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_padded_to_sixteen_bytes() {
        assert_eq!(padded_size(0), 16);
        assert_eq!(padded_size(1), 16);
        assert_eq!(padded_size(16), 16);
        assert_eq!(padded_size(17), 32);
        assert_eq!(padded_size(98432 * 4), 98432 * 4);
        assert_eq!(padded_size(98433 * 4), 98436 * 4);
        // Rounding up the largest sizes would wrap to 0.
        assert_eq!(padded_size(u64::MAX), u64::MAX);
        assert_eq!(padded_size(u64::MAX - 15), u64::MAX - 15);
        assert_eq!(padded_size(u64::MAX - 14), u64::MAX);
    }
}
