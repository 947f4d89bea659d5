//! The benchmarks' own kernels; the measuring itself is `rutile::bench`.

pub use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode, Stats};
use rutile::{Device, DeviceExt, Kernel, LaunchConfig, Result, ScalarType};

/// A study's numeric setting from the environment variable `name` (`STUDY_REPS=50`):
/// `None` where unset or empty; a value that does not parse ends the program with a
/// message naming the variable, rather than the study running on a default its reader
/// did not ask for.
pub fn study_setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => {
            eprintln!("{name} takes a number, got {value:?}");
            std::process::exit(2);
        }
    }
}

/// Elements each program of [`copy_kernel`] copies.
pub const COPY_BLOCK: u32 = 1024;

/// `dst[i] = src[i]` for `i < n`, `COPY_BLOCK` elements per program: one launch moving
/// given bytes, the floor for any kernel moving as many through the same backend. With
/// `unused_scalars` extra `i32` parameters the kernel reads nothing more, but its launch
/// data grows (past what Vulkan immediates hold, into a uniform buffer).
pub fn copy_kernel(unused_scalars: usize) -> Result<Kernel> {
    copy_kernel_of(ScalarType::F32, COPY_BLOCK, unused_scalars)
}

/// [`copy_kernel`] on elements of `elem`, `block` of them per program: what moving a
/// buffer of 2-byte elements costs beside moving the same bytes in 4-byte ones.
pub fn copy_kernel_of(elem: ScalarType, block: u32, unused_scalars: usize) -> Result<Kernel> {
    Ok(Kernel::build("copy", |k| {
        let src = k.arg_ptr("src", elem);
        let dst = k.arg_ptr("dst", elem);
        let n = k.arg_i32("n");
        for i in 0..unused_scalars {
            k.arg_i32(&format!("unused{i}"));
        }
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
        let mask = offs.lt(n);
        k.store_masked(dst + offs, k.load_masked(src + offs, mask, 0.0), mask);
    })?)
}

/// One device-to-device copy of `n` random f32 elements timed two ways, `reps` timed runs
/// each after 3 warm-ups, with no flush (at 1 GiB, the size of the ceiling, no cache holds
/// it): by the driver and by one launch of [`copy_kernel`].
pub struct CopyTimes {
    pub n: usize,
    pub driver: Stats,
    pub kernel: Stats,
}

impl CopyTimes {
    pub fn measure(dev: &dyn Device, n: usize, reps: usize) -> Result<CopyTimes> {
        let data = crate::rng::Rng::new(3).f32s(n, 0.5, 1.5);
        let (a, b) = (dev.upload(&data)?, dev.zeros::<f32>(n)?);
        let driver = do_bench(dev, None, 3, reps, &mut || dev.copy(a.raw(), b.raw()))?;
        let (kernel, config) = (copy_kernel(0)?, LaunchConfig::grid1((n as u32).div_ceil(COPY_BLOCK)));
        let args = [(&a).into(), (&b).into(), (n as i32).into()];
        let by_kernel = do_bench(dev, None, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
        Ok(CopyTimes {
            n,
            driver,
            kernel: by_kernel,
        })
    }

    /// GB/s of the driver's copy and of the copy kernel (bytes read plus written).
    pub fn gbps(&self) -> (f64, f64) {
        let bytes = 8.0 * self.n as f64;
        (gbps(bytes, self.driver.median_ms), gbps(bytes, self.kernel.median_ms))
    }

    /// The ceiling: the faster of the two (NVIDIA's Vulkan driver copies buffers with a
    /// slower copy engine, where a copy kernel reaches the memory's rate).
    pub fn ceiling_gbps(&self) -> f64 {
        let (driver, kernel) = self.gbps();
        driver.max(kernel)
    }
}

/// The CUDA device `dev` stands for, opened again as itself so that cuBLAS can run beside
/// rutile's kernels on it; `None` on other backends.
pub fn as_cuda(dev: &dyn Device) -> Result<Option<std::sync::Arc<rutile::CudaGpu>>> {
    let ordinal = dev.id().strip_prefix("cuda:").and_then(|o| o.parse().ok());
    match (dev.properties().backend, ordinal) {
        (rutile::Backend::Cuda, Some(o)) => Ok(Some(std::sync::Arc::new(rutile::CudaGpu::open(o)?))),
        _ => Ok(None),
    }
}

/// A GPU a study times its kernels on beside cuBLAS: a CUDA device opened again as itself
/// ([`as_cuda`]), or the device as it is; its cache flush (by copy); and cuBLAS's f16
/// matmul at `n`³ in TFLOPS where it is CUDA ([`cublas_f16_tflops`]).
pub struct StudyGpu {
    cuda: Option<std::sync::Arc<rutile::CudaGpu>>,
    other: std::sync::Arc<dyn Device>,
    /// The cache flush the study's timings use.
    pub flush: CacheFlush,
    /// cuBLAS's f16 matmul at `n`³, TFLOPS, on CUDA devices.
    pub cublas_f16: Option<f64>,
}

impl StudyGpu {
    /// `dev` set up for a study at `n`³.
    pub fn open(dev: &std::sync::Arc<dyn Device>, n: usize) -> Result<StudyGpu> {
        let cuda = as_cuda(dev.as_ref())?;
        let device: &dyn Device = match &cuda {
            Some(gpu) => gpu.as_ref(),
            None => dev.as_ref(),
        };
        let flush = CacheFlush::new(device, FlushMode::Copy)?;
        let cublas_f16 = match &cuda {
            Some(gpu) => Some(cublas_f16_tflops(gpu, &flush, n)?),
            None => None,
        };
        Ok(StudyGpu {
            cuda,
            other: dev.clone(),
            flush,
            cublas_f16,
        })
    }

    /// The device to time on.
    pub fn device(&self) -> &dyn Device {
        match &self.cuda {
            Some(gpu) => gpu.as_ref(),
            None => self.other.as_ref(),
        }
    }

    /// The start of the study's line: the device and cuBLAS's rate where measured.
    pub fn line(&self) -> String {
        let mut line = format!("{}:", self.device().id());
        if let Some(c) = self.cublas_f16 {
            line += &format!(" cuBLAS f16 {c:.1}");
        }
        line
    }
}

/// cuBLAS's f16 matmul (`cublasGemmEx`, f32 accumulation, f16 out) at `n`³ on `gpu`, the
/// cache emptied by `flush` before each of 30 timed launches: TFLOPS of the median.
pub fn cublas_f16_tflops(gpu: &rutile::CudaGpu, flush: &CacheFlush, n: usize) -> Result<f64> {
    let cublas = rutile::cublas::Cublas::new(gpu)?;
    let a: Vec<half::f16> = rutile::ir::testing::Rng::new(6)
        .f32s(n * n, -1.0, 1.0)
        .into_iter()
        .map(half::f16::from_f32)
        .collect();
    let (ab, cb) = (gpu.upload(&a)?, gpu.zeros::<half::f16>(n * n)?);
    let s = do_bench(gpu, Some(flush), 5, 30, &mut || cublas.matmul(&ab, &ab, &cb, (n, n, n)))?;
    Ok(2.0 * (n as f64).powi(3) / (s.median_ms * 1e-3) / 1e12)
}
