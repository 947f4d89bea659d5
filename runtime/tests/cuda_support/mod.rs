//! What the CUDA driver-level tests share.

use rutile::cuda::CudaDevice;
use rutile::Backend;

/// The device, or `None` (test skipped) when there is no CUDA here and `RUTILE_REQUIRE`
/// does not name `cuda` (`rutile::device::check_required`).
pub fn gpu_or_skip(test: &str) -> Option<CudaDevice> {
    let required = |opened| rutile::device::check_required(Backend::Cuda, opened).unwrap_or_else(|e| panic!("{e}"));
    match CudaDevice::open(0) {
        Ok(device) => {
            required(Ok(()));
            Some(device)
        }
        Err(e) if e.is_unavailable() => {
            required(Err(&e));
            println!("{test}: no CUDA device: skipped ({e})");
            None
        }
        Err(e) => panic!("opening CUDA device 0 failed: {e}"),
    }
}
