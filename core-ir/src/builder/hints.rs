//! The compiler hints of `triton.language`: `multiple_of`, `max_contiguous` and
//! `max_constancy`, promises about an integer value's runs that the axis analysis takes
//! where it cannot prove as much itself (offsets loaded from memory, or past a `%`), so
//! that loads and stores through them can move 16 bytes at once. The interpreter checks
//! every promise where the value is computed; a compiled kernel trusts it, as Triton's do
//! (see [`crate::ir::AxisHint`]).

use super::{KernelBuilder, Value};
use crate::ir::{AxisHint, HintKind, SourceLoc};
use crate::types::MAX_RANK;

/// The numbers of a hint: one for every dimension (`16`), or one per dimension
/// (`[1, 16]`), as Triton takes an int or a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HintNumbers(Vec<i64>);

impl From<i32> for HintNumbers {
    fn from(n: i32) -> Self {
        HintNumbers(vec![n as i64])
    }
}
impl From<u32> for HintNumbers {
    fn from(n: u32) -> Self {
        HintNumbers(vec![n as i64])
    }
}
impl<const N: usize> From<[i32; N]> for HintNumbers {
    fn from(n: [i32; N]) -> Self {
        HintNumbers(n.iter().map(|&v| v as i64).collect())
    }
}
impl<const N: usize> From<[u32; N]> for HintNumbers {
    fn from(n: [u32; N]) -> Self {
        HintNumbers(n.iter().map(|&v| v as i64).collect())
    }
}
impl From<&[u32]> for HintNumbers {
    fn from(n: &[u32]) -> Self {
        HintNumbers(n.iter().map(|&v| v as i64).collect())
    }
}

impl KernelBuilder {
    /// Promises that the first element of every run of consecutive values of `x` (an
    /// integer scalar or block) is a multiple of `n` (per dimension, or one for all), as
    /// `tl.multiple_of`: `k.multiple_of(start_n, BLOCK_N)` for a loop's offset, or
    /// `offs.multiple_of(BLOCK)` for `pid * BLOCK + arange` that the analysis could not
    /// follow. Returns `x`. The interpreter checks the promise; compiled kernels trust it.
    #[track_caller]
    pub fn multiple_of<'b>(&'b self, x: Value<'b>, n: impl Into<HintNumbers>) -> Value<'b> {
        self.hint(HintKind::MultipleOf, x, n.into(), SourceLoc::caller())
    }

    /// Promises that the elements of block `x` (integers) come in runs of `n` consecutive
    /// values (a power of two, per dimension or one for all), each starting at an index
    /// that is a multiple of `n`, as `tl.max_contiguous`. Returns `x`; checked by the
    /// interpreter, trusted by compiled kernels.
    #[track_caller]
    pub fn max_contiguous<'b>(&'b self, x: Value<'b>, n: impl Into<HintNumbers>) -> Value<'b> {
        self.hint(HintKind::MaxContiguous, x, n.into(), SourceLoc::caller())
    }

    /// Promises that the elements of block `x` (integers) come in runs of `n` equal values
    /// (a power of two, per dimension or one for all), each starting at an index that is a
    /// multiple of `n`, as `tl.max_constancy`. Returns `x`; checked by the interpreter,
    /// trusted by compiled kernels.
    #[track_caller]
    pub fn max_constancy<'b>(&'b self, x: Value<'b>, n: impl Into<HintNumbers>) -> Value<'b> {
        self.hint(HintKind::MaxConstancy, x, n.into(), SourceLoc::caller())
    }

    /// Records the promise `kind` of `numbers` about `x`, or an error naming the hint.
    fn hint<'b>(&'b self, kind: HintKind, x: Value<'b>, numbers: HintNumbers, loc: SourceLoc) -> Value<'b> {
        let name = kind.name();
        let x = self.adopt(name, x, loc);
        if self.is_poisoned(x.id) {
            return x;
        }
        match hint_per_dim(kind, x, &numbers.0) {
            Ok(per_dim) => {
                self.state.borrow_mut().hints.push(AxisHint {
                    value: x.id,
                    kind,
                    per_dim,
                    loc,
                });
                x
            }
            Err(message) => self.fail(name, loc, message, x.ty()),
        }
    }
}

/// The hint's numbers per dimension, checked against `x`'s type and shape.
fn hint_per_dim(kind: HintKind, x: Value<'_>, numbers: &[i64]) -> Result<[u64; MAX_RANK], String> {
    let ty = x.ty();
    if !ty.scalar_type().is_some_and(|s| s.is_int()) {
        return Err(format!("takes integers (offsets), got {ty}"));
    }
    let dims = ty.shape.dims();
    let runs = kind != HintKind::MultipleOf;
    if runs && dims.is_empty() {
        return Err(format!("takes a block (a scalar has no runs), got {ty}"));
    }
    let slots = dims.len().max(1);
    if numbers.len() != 1 && numbers.len() != slots {
        return Err(format!(
            "takes one number or one per dimension ({slots}), got {}",
            numbers.len()
        ));
    }
    let mut per_dim = [1u64; MAX_RANK];
    for (d, slot) in per_dim.iter_mut().enumerate().take(slots) {
        let n = numbers[if numbers.len() == 1 { 0 } else { d }];
        if n < 1 {
            return Err(format!("takes positive numbers, got {n}"));
        }
        if runs && (!(n as u64).is_power_of_two() || n as u64 > dims[d] as u64) {
            return Err(format!(
                "takes a power of two up to the dimension's {} elements, got {n} (dimension {d} of {ty})",
                dims[d]
            ));
        }
        *slot = n as u64;
    }
    Ok(per_dim)
}

impl<'b> Value<'b> {
    /// Promises that every run of consecutive values starts at a multiple of `n`; see
    /// [`KernelBuilder::multiple_of`].
    #[track_caller]
    pub fn multiple_of(self, n: impl Into<HintNumbers>) -> Value<'b> {
        self.builder
            .hint(HintKind::MultipleOf, self, n.into(), SourceLoc::caller())
    }
    /// Promises runs of `n` consecutive values; see [`KernelBuilder::max_contiguous`].
    #[track_caller]
    pub fn max_contiguous(self, n: impl Into<HintNumbers>) -> Value<'b> {
        self.builder
            .hint(HintKind::MaxContiguous, self, n.into(), SourceLoc::caller())
    }
    /// Promises runs of `n` equal values; see [`KernelBuilder::max_constancy`].
    #[track_caller]
    pub fn max_constancy(self, n: impl Into<HintNumbers>) -> Value<'b> {
        self.builder
            .hint(HintKind::MaxConstancy, self, n.into(), SourceLoc::caller())
    }
}
