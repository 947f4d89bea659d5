//! The author's hints (`multiple_of`, `max_contiguous`, `max_constancy`), checked where
//! the values they are about are computed: a compiled kernel trusts them (its loads and
//! stores move as many elements at once as they promise), so the interpreter, the reference,
//! makes a broken promise a fault naming the hint and the element that breaks it.
//!
//! `multiple_of` is checked at the elements the axis analysis takes it for: the first of
//! each run of consecutive values that it knows of (the value's contiguity, hints
//! included), under the specialization the runtime would compile the launch's arguments
//! with. The checks are made once a launch, and shared by its programs.

use super::debug_ops::index;
use super::error::{Fault, FaultKind};
use super::tensor::{Data, Tensor};
use crate::analysis::axis;
use crate::ir::{AxisHint, HintKind, Kernel, ValueId};
use crate::target::Specialization;
use crate::types::MAX_RANK;

/// The checks of a kernel's hints, by value.
pub(crate) struct HintChecks {
    by_value: Vec<Vec<Check>>,
}

struct Check {
    hint: AxisHint,
    /// Per dimension, the length of the runs of consecutive values the analysis takes.
    runs: [u64; MAX_RANK],
}

impl HintChecks {
    /// The checks of `kernel`'s hints for a launch specialized as `spec`; `None` for a
    /// kernel without hints.
    pub fn new(kernel: &Kernel, spec: &Specialization) -> Option<HintChecks> {
        if kernel.hints.is_empty() {
            return None;
        }
        let info = axis::analyze(kernel, spec);
        let mut by_value: Vec<Vec<Check>> = (0..kernel.values.len()).map(|_| Vec::new()).collect();
        for h in &kernel.hints {
            let runs = info.get(h.value.index()).map_or([1; MAX_RANK], |a| a.contiguity);
            if let Some(checks) = by_value.get_mut(h.value.index()) {
                checks.push(Check { hint: *h, runs });
            }
        }
        Some(HintChecks { by_value })
    }

    /// `Err((hint, fault))` for the first promise about `value` that `t` breaks.
    pub fn check(&self, value: ValueId, t: &Tensor) -> Result<(), (AxisHint, Fault)> {
        let Some(checks) = self.by_value.get(value.index()) else {
            return Ok(());
        };
        let Data::Int(v) = &t.data else {
            return Ok(());
        };
        for c in checks {
            if let Some(message) = broken(c, t.ty.shape.dims(), v) {
                let fault = Fault {
                    kind: FaultKind::BrokenHint,
                    message: format!("broken hint on %{}: {message}", value.index()),
                };
                return Err((c.hint, fault));
            }
        }
        Ok(())
    }
}

/// Why `values` (of a block of `dims`, row-major; a scalar where `dims` is empty) break
/// check `c`, or `None`.
fn broken(c: &Check, dims: &[u32], values: &[i64]) -> Option<String> {
    let h = &c.hint;
    if dims.is_empty() {
        let n = h.per_dim[0] as i64;
        return (h.kind == HintKind::MultipleOf && values[0].rem_euclid(n) != 0)
            .then(|| format!("{} is not a multiple of {n}", values[0]));
    }
    for (d, &len) in dims.iter().enumerate() {
        let n = h.per_dim[d];
        let stride: usize = dims[d + 1..].iter().map(|&x| x as usize).product();
        for (i, &x) in values.iter().enumerate() {
            let along = (i / stride) % len as usize;
            let at = || index(dims, i).join(", ");
            match h.kind {
                HintKind::MultipleOf if along as u64 % c.runs[d] == 0 && x.rem_euclid(n as i64) != 0 => {
                    let run = match c.runs[d] {
                        1 => String::new(),
                        r => format!(" (the first of a run of {r} consecutive values along dimension {d})"),
                    };
                    return Some(format!("element ({}) is {x}, not a multiple of {n}{run}", at()));
                }
                HintKind::MaxContiguous | HintKind::MaxConstancy if along as u64 % n != 0 => {
                    let prev = values[i - stride];
                    let (want, what) = if h.kind == HintKind::MaxContiguous {
                        (prev.wrapping_add(1), "consecutive")
                    } else {
                        (prev, "equal")
                    };
                    if x != want {
                        return Some(format!(
                            "element ({}) is {x} after {prev}: not in a run of {n} {what} values along dimension {d}",
                            at()
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    None
}
