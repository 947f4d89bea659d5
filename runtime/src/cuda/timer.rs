//! GPU-side timing of work on a device's stream with CUDA events.

use std::mem::ManuallyDrop;
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
    // Dropped by hand: leaked once the context is lost (see `context`).
    start: ManuallyDrop<CudaEvent>,
    stop: ManuallyDrop<CudaEvent>,
    state: AtomicU8,
}

impl Drop for CudaTimer {
    fn drop(&mut self) {
        if self.device.is_lost() {
            return;
        }
        // SAFETY: dropped once, here.
        unsafe {
            ManuallyDrop::drop(&mut self.start);
            ManuallyDrop::drop(&mut self.stop);
        }
    }
}

impl CudaDevice {
    /// A timer for work on this device's stream.
    pub fn timer(&self) -> Result<CudaTimer, CudaError> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.health().check()?;
        let start = self.health().note(self.ctx().new_event(flags).call("cuEventCreate"))?;
        let stop = self.health().note(self.ctx().new_event(flags).call("cuEventCreate"))?;
        Ok(CudaTimer {
            device: self.clone(),
            start: ManuallyDrop::new(start),
            stop: ManuallyDrop::new(stop),
            state: AtomicU8::new(IDLE),
        })
    }
}

impl CudaTimer {
    /// Marks the start: work issued on the stream after this call is timed.
    pub fn start(&self) -> Result<(), CudaError> {
        self.device.health().check()?;
        let recorded = self.start.record(self.device.stream()).call("cuEventRecord");
        self.device.health().note(recorded)?;
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
        self.device.health().check()?;
        let recorded = self.stop.record(self.device.stream()).call("cuEventRecord");
        self.device.health().note(recorded)?;
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
        self.device.health().check()?;
        let elapsed = self.start.elapsed_ms(&self.stop).call("cuEventElapsedTime");
        self.device.health().note(elapsed)
    }
}
