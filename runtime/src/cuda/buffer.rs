//! Typed device buffers: allocation, upload and download.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;

use bytemuck::Pod;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{result, CudaSlice, DevicePtr};

use super::context::CudaDevice;
use super::error::{describe, is_sticky, CudaError, DriverResultExt};
use super::launch::KernelArg;

/// An array of `len` values of `T` in device memory.
///
/// Memory is allocated and freed in order on the device's stream, so a buffer may be
/// dropped right after the launch that uses it. Copies block until they are done. Once
/// the device's context is lost, every call fails with [`CudaError::ContextLost`] and the
/// allocation is left to the context's reset.
#[derive(Debug)]
pub struct CudaBuffer<T: Pod> {
    device: CudaDevice,
    // Owns the allocation; at least one byte, so empty buffers still have a valid pointer.
    // Dropped by hand: not freed once the context is lost (see `context`).
    memory: ManuallyDrop<CudaSlice<u8>>,
    ptr: u64,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> Drop for CudaBuffer<T> {
    fn drop(&mut self) {
        self.device
            .live_bytes()
            .fetch_sub(self.memory.len() as u64, Ordering::Relaxed);
        if self.device.is_lost() {
            return;
        }
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.memory) };
    }
}

impl<T: Pod> CudaBuffer<T> {
    /// Allocates `len` elements set to zero bits.
    pub fn zeroed(device: &CudaDevice, len: usize) -> Result<Self, CudaError> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| CudaError::InvalidArgument {
                what: format!(
                    "a buffer of {len} elements of {} bytes overflows the address space",
                    size_of::<T>()
                ),
            })?;
        device.health().check()?;
        let memory = match device.stream().alloc_zeros::<u8>(bytes.max(1)) {
            Ok(memory) => memory,
            // More than the device has fails with CUDA_ERROR_OUT_OF_MEMORY, or for absurd
            // sizes with another code of the one call (not a sticky one: the context is
            // fine).
            Err(e)
                if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY
                    || (bytes > device.properties().total_memory && !is_sticky(e.0)) =>
            {
                return Err(CudaError::OutOfMemory {
                    call: "cuMemAllocAsync",
                    requested: bytes,
                    total: device.properties().total_memory,
                    free: device.memory_info().ok().map(|(free, _)| free),
                    code: describe(e),
                });
            }
            Err(e) => return device.health().note(Err(CudaError::driver("cuMemAllocAsync", e))),
        };
        // Event tracking is off for this context, so the guard returned here does nothing.
        let ptr = memory.device_ptr(device.stream()).0;
        device.live_bytes().fetch_add(memory.len() as u64, Ordering::Relaxed);
        Ok(CudaBuffer {
            device: device.clone(),
            memory: ManuallyDrop::new(memory),
            ptr,
            len,
            _elem: PhantomData,
        })
    }

    /// Allocates a buffer holding a copy of `data`.
    pub fn from_slice(device: &CudaDevice, data: &[T]) -> Result<Self, CudaError> {
        let mut buffer = Self::zeroed(device, data.len())?;
        buffer.upload(data)?;
        Ok(buffer)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes (`len * size_of::<T>()`).
    pub fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The device address of the first element, as a kernel sees it.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The buffer as a pointer argument of a kernel launch.
    pub fn arg(&self) -> KernelArg {
        KernelArg::Ptr(self.ptr)
    }

    /// Copies `data` into the buffer; `data` must have exactly [`Self::len`] elements.
    pub fn upload(&mut self, data: &[T]) -> Result<(), CudaError> {
        self.check_len(data.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        self.device.bind()?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        // SAFETY: the destination holds at least `bytes.len()` bytes (checked above) and
        // belongs to this context; the stream is synchronised before `data` is released.
        let copied = unsafe { result::memcpy_htod_async(self.ptr, bytes, self.device.stream().cu_stream()) }
            .call("cuMemcpyHtoDAsync");
        self.device.health().note(copied)?;
        self.device.synchronize()
    }

    /// Copies the buffer into a new vector, after all earlier work on the stream.
    pub fn download(&self) -> Result<Vec<T>, CudaError> {
        let mut out = vec![T::zeroed(); self.len];
        self.download_into(&mut out)?;
        Ok(out)
    }

    /// Copies the buffer into `out`, which must have exactly [`Self::len`] elements.
    pub fn download_into(&self, out: &mut [T]) -> Result<(), CudaError> {
        self.check_len(out.len())?;
        if self.size_bytes() == 0 {
            return self.device.synchronize();
        }
        self.device.bind()?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        // SAFETY: the source holds at least `bytes.len()` bytes; the stream is synchronised
        // before `out` is given back, so the copy has finished writing it.
        let copied = unsafe { result::memcpy_dtoh_async(bytes, self.ptr, self.device.stream().cu_stream()) }
            .call("cuMemcpyDtoHAsync");
        self.device.health().note(copied)?;
        self.device.synchronize()
    }

    /// Copies `src` into this buffer on the device (in order on the stream; does not wait).
    /// Both must have the same length.
    pub fn copy_from(&mut self, src: &CudaBuffer<T>) -> Result<(), CudaError> {
        if src.len != self.len {
            return Err(CudaError::BufferSize {
                expected: self.len,
                got: src.len,
            });
        }
        self.device.bind()?;
        // SAFETY: both ranges lie inside their allocations, which are distinct objects.
        let copied = unsafe {
            result::memcpy_dtod_async(
                self.ptr,
                src.ptr,
                self.len * size_of::<T>(),
                self.device.stream().cu_stream(),
            )
        }
        .call("cuMemcpyDtoDAsync");
        self.device.health().note(copied)
    }

    /// Sets every byte of the buffer to zero (in order on the stream; does not wait).
    pub fn fill_zero(&mut self) -> Result<(), CudaError> {
        self.device.bind()?;
        // SAFETY: the range lies inside the allocation.
        let set = unsafe { result::memset_d8_async(self.ptr, 0, self.memory.len(), self.device.stream().cu_stream()) }
            .call("cuMemsetD8Async");
        self.device.health().note(set)
    }

    fn check_len(&self, got: usize) -> Result<(), CudaError> {
        if got == self.len {
            Ok(())
        } else {
            Err(CudaError::BufferSize {
                expected: self.len,
                got,
            })
        }
    }
}
