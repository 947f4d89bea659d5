//! Command buffers recorded by the device's work, submitted together when the host needs
//! them.
//!
//! A queue submission costs the host tens of microseconds and the GPU a few between
//! submissions, which is as long as a small kernel runs. So each dispatch or copy is
//! recorded and finished as a command buffer of its own (finishing validates it, so an
//! error names the dispatch that caused it) and kept until the host waits for the device
//! (a read, [`WgpuDevice::synchronize`], the end of a timing) or writes a buffer from the
//! host (a queue write must not overtake recorded work that reads the buffer); then all of
//! them go in one submission. After [`MAX_BATCHED`] command buffers the batch is submitted
//! anyway, so that a long loop of launches keeps the GPU busy. [`WgpuDevice::flush`]
//! submits on request.

use super::device::{lock, WgpuDevice};
use super::error::WgpuError;

/// Command buffers kept before the batch is submitted without waiting for a sync point.
pub(crate) const MAX_BATCHED: usize = 32;

/// Finished command buffers not yet submitted, oldest first.
#[derive(Default)]
pub(crate) struct Batch {
    buffers: Vec<wgpu::CommandBuffer>,
}

impl WgpuDevice {
    /// Records commands into a command buffer of their own and adds it to the batch;
    /// submits the batch when it is full. Call it inside an error scope
    /// ([`WgpuDevice::scoped`]): encoding errors are raised when the buffer is finished.
    pub(crate) fn record<T>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> T) -> Result<T, WgpuError> {
        let mut encoder = self
            .raw()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("rutile") });
        let value = f(&mut encoder);
        let buffer = encoder.finish();
        let full = {
            let mut batch = lock(self.batch());
            batch.buffers.push(buffer);
            batch.buffers.len() >= MAX_BATCHED
        };
        if full {
            self.flush()?;
        }
        Ok(value)
    }

    /// Submits the recorded work, in order, without waiting for it.
    ///
    /// The batch stays locked until it is submitted: a thread that took a batch and
    /// submitted it after another thread's later batch would run work out of the order it
    /// was recorded in (a read-back copy before the dispatch that writes what it reads).
    pub fn flush(&self) -> Result<(), WgpuError> {
        let mut batch = lock(self.batch());
        if batch.buffers.is_empty() {
            return Ok(());
        }
        let buffers = std::mem::take(&mut batch.buffers);
        let submitted = self.scoped("submitting recorded work", || {
            self.queue().submit(buffers);
        });
        drop(batch);
        submitted
    }
}
