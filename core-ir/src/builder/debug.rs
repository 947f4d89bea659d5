//! Debugging ops: `static_assert` (checked while the kernel is built), `device_assert` (run
//! where the kernel runs in the interpreter: the CPU device and the bounds-checked mode;
//! compiled out of GPU code) and `device_print` (the interpreter and CUDA).

use super::{KernelBuilder, Value};
use crate::ir::{Op, SourceLoc};

impl KernelBuilder {
    /// A build-time check, as `tl.static_assert`: when `cond` (a Rust value, typically of the
    /// meta-parameters) is false, building fails with `message` at the caller's line.
    #[track_caller]
    pub fn static_assert(&self, cond: bool, message: &str) {
        if !cond {
            self.report("static_assert", SourceLoc::caller(), format!("failed: {message}"));
        }
    }

    /// A run-time check, as `tl.device_assert(cond, msg)`: every element of `cond` (a
    /// boolean scalar or block) must hold. Where the kernel runs in the interpreter (the CPU
    /// device, `RUTILE_DEVICE=cpu`, and the bounds-checked mode, `RUTILE_CHECK_BOUNDS=1`), a
    /// failing element stops the launch with an error naming `message`, the program and the
    /// element; GPU code leaves the check out, as Triton does without `debug=True`.
    #[track_caller]
    pub fn device_assert<'b>(&'b self, cond: Value<'b>, message: &str) {
        let loc = SourceLoc::caller();
        let cond = self.adopt("device_assert", cond, loc);
        self.emit(
            Op::Assert {
                cond: cond.id,
                message: message.to_string(),
            },
            None,
            loc,
        );
    }

    /// A fact the kernel's author guarantees, as `tl.assume(cond)` (`cond` a boolean scalar
    /// or block, every element true; Triton's matmul tutorial assumes its strides and
    /// program ids positive). Triton hands it to LLVM to optimize with; rutile's analyses
    /// take nothing from it (divisibility is promised with [`Value::multiple_of`]), so
    /// compiled code is the same with or without it. Where the kernel runs in the
    /// interpreter (the CPU device, `RUTILE_DEVICE=cpu`, and the bounds-checked mode,
    /// `RUTILE_CHECK_BOUNDS=1`) it is checked as [`Self::device_assert`] checks: an element
    /// that does not hold stops the launch with an error naming the assumption's line, so a
    /// port keeps its `assume`s and a broken one is found where kernels are checked.
    #[track_caller]
    pub fn assume<'b>(&'b self, cond: Value<'b>) {
        let loc = SourceLoc::caller();
        let cond = self.adopt("assume", cond, loc);
        self.emit(
            Op::Assert {
                cond: cond.id,
                message: "an assumption (`assume`) does not hold".to_string(),
            },
            None,
            loc,
        );
    }

    /// Prints `values` (numbers, all of one shape) with `prefix`, as `tl.device_print`: a
    /// line per element, `pid (x, y, z) idx (i) prefix: v0, v1`, each element once (in no
    /// particular order between threads). The interpreter prints (the CPU device and the
    /// bounds-checked mode), and CUDA through `vprintf` (the driver writes the lines to
    /// stdout when the host next synchronizes; floats as `%.9g`, booleans as 0 or 1), and
    /// Vulkan through a print buffer that the runtime reads back after the launch and
    /// prints as the interpreter does (the launch then waits for the device).
    #[track_caller]
    pub fn device_print<'b>(&'b self, prefix: &str, values: &[Value<'b>]) {
        let loc = SourceLoc::caller();
        let values: Vec<_> = values.iter().map(|&v| self.adopt("device_print", v, loc).id).collect();
        self.emit(
            Op::Print {
                prefix: prefix.to_string(),
                values,
            },
            None,
            loc,
        );
    }
}
