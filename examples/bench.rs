//! The benchmarks' own kernels; the measuring itself is `rutile::bench`.

pub use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode, Stats};
use rutile::{Kernel, Result, ScalarType};

/// Elements each program of [`copy_kernel`] copies.
pub const COPY_BLOCK: u32 = 1024;

/// `dst[i] = src[i]` for `i < n`, `COPY_BLOCK` elements per program: one launch moving
/// given bytes, the floor for any kernel moving as many through the same backend. With
/// `unused_scalars` extra `i32` parameters the kernel reads nothing more, but its launch
/// data grows (past what Vulkan immediates hold, into a uniform buffer).
pub fn copy_kernel(unused_scalars: usize) -> Result<Kernel> {
    Ok(Kernel::build("copy", |k| {
        let src = k.arg_ptr("src", ScalarType::F32);
        let dst = k.arg_ptr("dst", ScalarType::F32);
        let n = k.arg_i32("n");
        for i in 0..unused_scalars {
            k.arg_i32(&format!("unused{i}"));
        }
        let offs = k.program_id(0) * COPY_BLOCK as i32 + k.arange(0, COPY_BLOCK as i32);
        let mask = offs.lt(n);
        k.store_masked(dst + offs, k.load_masked(src + offs, mask, 0.0), mask);
    })?)
}
