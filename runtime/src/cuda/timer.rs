//! GPU-side timing of work on a device's stream with CUDA events.

use std::sync::atomic::{AtomicU8, Ordering};

use cudarc::driver::{sys, CudaEvent};

use super::context::CudaDevice;
use super::error::{CudaError, DriverResultExt};

const IDLE: u8 = 0;
const STARTED: u8 = 1;
const STOPPED: u8 = 2;

/// Measures the GPU time between two points of a device's stream.
///
/// ```no_run
/// # use rutile::cuda::{CudaDevice, CudaError};
/// # fn main() -> Result<(), CudaError> {
/// let device = CudaDevice::open(0)?;
/// let timer = device.timer()?;
/// timer.start()?;
/// // ... launches ...
/// timer.stop()?;
/// println!("{:.3} ms", timer.elapsed_ms()?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CudaTimer {
    device: CudaDevice,
    start: CudaEvent,
    stop: CudaEvent,
    state: AtomicU8,
}

impl CudaDevice {
    /// A timer for work on this device's stream.
    pub fn timer(&self) -> Result<CudaTimer, CudaError> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        Ok(CudaTimer {
            device: self.clone(),
            start: self.ctx().new_event(flags).call("cuEventCreate")?,
            stop: self.ctx().new_event(flags).call("cuEventCreate")?,
            state: AtomicU8::new(IDLE),
        })
    }
}

impl CudaTimer {
    /// Marks the start: work issued on the stream after this call is timed.
    pub fn start(&self) -> Result<(), CudaError> {
        self.start.record(self.device.stream()).call("cuEventRecord")?;
        self.state.store(STARTED, Ordering::Release);
        Ok(())
    }

    /// Marks the end: work issued before this call is timed. Does not wait.
    pub fn stop(&self) -> Result<(), CudaError> {
        if self.state.load(Ordering::Acquire) == IDLE {
            return Err(CudaError::InvalidArgument {
                what: "CudaTimer::stop called before CudaTimer::start".to_string(),
            });
        }
        self.stop.record(self.device.stream()).call("cuEventRecord")?;
        self.state.store(STOPPED, Ordering::Release);
        Ok(())
    }

    /// Waits for the stop mark and returns the GPU time between start and stop, in
    /// milliseconds (resolution about half a microsecond).
    pub fn elapsed_ms(&self) -> Result<f32, CudaError> {
        if self.state.load(Ordering::Acquire) != STOPPED {
            return Err(CudaError::InvalidArgument {
                what: "CudaTimer::elapsed_ms needs start() and then stop() first".to_string(),
            });
        }
        self.start.elapsed_ms(&self.stop).call("cuEventElapsedTime")
    }
}
