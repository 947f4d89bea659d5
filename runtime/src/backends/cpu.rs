//! The CPU interpreter as a device: exact semantics and bounds checks, for machines without
//! a GPU and for checking a GPU's results.

use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileCache, CompileOptions, CompiledKernel, KernelMetadata};
use crate::device::{next_device_key, Backend, Device, DeviceProperties, DeviceType};
use crate::error::{Error, Result};
use crate::launch::{check_launch, interpreter_args, Arg};
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::interp::{self, HostBuffer};
use rutile_ir::target::Specialization;
use rutile_ir::{Kernel, ScalarType};
use std::sync::{Arc, Mutex};

/// Runs kernels in rutile's interpreter, program after program.
pub struct CpuDevice {
    properties: DeviceProperties,
    key: u64,
    cache: CompileCache,
}

impl Default for CpuDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuDevice {
    /// A new interpreter device, with its own compile cache and buffers that no other
    /// device accepts.
    pub fn new() -> CpuDevice {
        let mut properties = DeviceProperties::unknown(
            "rutile CPU interpreter",
            "rutile",
            Backend::Interpreter,
            DeviceType::Cpu,
        );
        properties.max_grid = Some([u32::MAX; 3]);
        properties.api_version = Some(env!("CARGO_PKG_VERSION").to_string());
        CpuDevice {
            properties,
            key: next_device_key(),
            cache: CompileCache::default(),
        }
    }

    fn host<'b>(&self, b: &'b DeviceBuffer) -> Result<&'b Mutex<HostBuffer>> {
        b.storage(self.key)
    }
}

impl Device for CpuDevice {
    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer> {
        // As the GPU devices do: `HostBuffer::zeros` would panic on a size that overflows,
        // and abort the process when the allocator refuses.
        let Some(bytes) = len.checked_mul(elem.size_bytes()) else {
            return Err(Error::Buffer(format!(
                "{len} elements of {elem} overflow the address space"
            )));
        };
        let zeros = zeroed_bytes(bytes).ok_or_else(|| Error::OutOfMemory {
            device: self.id(),
            elem,
            len,
            requested: bytes as u64,
            reason: "out of host memory: the allocator refused it".into(),
        })?;
        let host = HostBuffer::from_bytes(elem, zeros)?;
        Ok(DeviceBuffer::new(elem, len, self.key, Box::new(Mutex::new(host))))
    }

    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()> {
        let mut host = self.host(buffer)?.lock().unwrap();
        let dst = host.as_bytes_mut();
        if dst.len() != bytes.len() {
            return Err(Error::Buffer(format!(
                "writing {} bytes into a buffer of {} bytes",
                bytes.len(),
                dst.len()
            )));
        }
        dst.copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>> {
        Ok(self.host(buffer)?.lock().unwrap().as_bytes().to_vec())
    }

    fn compile(&self, kernel: &Kernel, options: &CompileOptions, spec: &Specialization) -> Result<Arc<CompiledKernel>> {
        self.cache.get_or_compile(kernel, options, spec, || {
            Ok(CompiledKernel {
                kernel: kernel.clone(),
                extent: ExtentPlan::new(kernel),
                options: *options,
                specialization: spec.clone(),
                metadata: KernelMetadata {
                    threads: 1,
                    ..KernelMetadata::default()
                },
                code: None,
                artifact: Box::new(()),
            })
        })
    }

    fn launch_compiled(&self, compiled: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
        let kernel = &compiled.kernel;
        check_launch(compiled, grid, args, self.key, [u32::MAX; 3])?;
        // The interpreter works on a slice of host buffers: move each distinct buffer out of
        // its lock for the launch (the same buffer may be passed twice) and back after.
        let mut slots: Vec<&Mutex<HostBuffer>> = Vec::new();
        let values = interpreter_args(kernel, args, |b| {
            let m = self.host(b)?;
            Ok(slots.iter().position(|s| std::ptr::eq(*s, m)).unwrap_or_else(|| {
                slots.push(m);
                slots.len() - 1
            }))
        })?;
        let mut guards: Vec<_> = slots.iter().map(|m| m.lock().unwrap()).collect();
        let mut buffers: Vec<HostBuffer> = guards
            .iter_mut()
            .map(|g| std::mem::replace(&mut **g, HostBuffer::zeros(ScalarType::U8, 0)))
            .collect();
        let result = interp::run_clustered(kernel, grid, compiled.options.cluster, &values, &mut buffers);
        for (g, b) in guards.iter_mut().zip(buffers) {
            **g = b;
        }
        result.map_err(Error::from)
    }

    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()> {
        crate::buffer::check_copy(src, dst)?;
        let bytes = self.host(src)?.lock().unwrap().as_bytes().to_vec();
        self.write(dst, &bytes)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn id(&self) -> String {
        "cpu".into()
    }

    fn device_key(&self) -> u64 {
        self.key
    }
}

/// `n` zero bytes, or `None` when the allocator refuses (where `vec![0; n]` would abort the
/// process). Zeroed by the allocator, so that pages the interpreter never touches are never
/// written either.
fn zeroed_bytes(n: usize) -> Option<Vec<u8>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(n).ok()?;
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: a non-null `ptr` was allocated by the global allocator with the layout of
    // `n` bytes, all of them initialised (to zero); the vector takes ownership of it.
    (!ptr.is_null()).then(|| unsafe { Vec::from_raw_parts(ptr, n, n) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As on the GPU devices, a size that overflows is an error (the host buffer's size
    /// overflowed: a panic, or a wrapped and much smaller buffer).
    #[test]
    fn allocations_that_overflow_are_errors() {
        let d = CpuDevice::new();
        let e = d.alloc(ScalarType::F64, usize::MAX / 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("buffer: {} elements of f64 overflow the address space", usize::MAX / 4)
        );
        assert_eq!(d.alloc(ScalarType::F64, 3).unwrap().size_bytes(), 24);
    }

    /// A size the allocator refuses (2^50 bytes: above any machine's memory and the 2^47
    /// bytes of a process's address space) is an error naming it, not an abort; allocating
    /// works afterwards.
    #[test]
    fn allocations_the_host_cannot_give_are_errors() {
        let d = CpuDevice::new();
        let len = 1usize << 48;
        let e = d.alloc(ScalarType::F32, len).unwrap_err();
        assert!(
            matches!(e, Error::OutOfMemory { requested, .. } if requested == 1 << 50),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "cpu: cannot allocate 1125899906842624 bytes (1048576.0 GiB) for {len} elements of f32: \
                 out of host memory: the allocator refused it"
            )
        );
        let b = d.alloc(ScalarType::F32, 5).unwrap();
        assert_eq!(d.read(&b).unwrap(), vec![0; 20]);
        assert_eq!(d.alloc(ScalarType::F32, 0).unwrap().size_bytes(), 0);
    }
}
