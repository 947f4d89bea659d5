//! libdevice's `erfinv`, built from ops every backend has (a logarithm, a square root,
//! polynomials by multiply-adds, selects), so that the interpreter, PTX and SPIR-V compute
//! it alike. f16 and bf16 compute in f32 and round once; f64 computes in f64
//! (f64_normal.rs).
//!
//! Giles' single-precision approximation ("Approximating the erfinv function", GPU Computing
//! Gems, 2011): with `w = -ln((1 - x)(1 + x))`, a polynomial in `w - 2.5` for `w < 5` (the
//! centre, `|x|` below about 0.9966) and one in `√w - 3` beyond, times `x`.
//! `core-ir/tests/erfinv.rs` measures it against f64.

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;

/// The polynomials' coefficients as Giles publishes them, highest first: in `w - 2.5` for
/// `w < 5`, and in `√w - 3` beyond.
#[allow(clippy::excessive_precision)]
pub(super) const CENTRE: [f32; 9] = [
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
];
#[allow(clippy::excessive_precision)]
pub(super) const TAIL: [f32; 9] = [
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
];

impl KernelBuilder {
    /// The inverse error function (floats), as `libdevice.erfinv`: `erf(erfinv(x)) = x` for
    /// `x` in `(-1, 1)`, `±∞` at `±1`, NaN outside `[-1, 1]` and at NaN, `erfinv(±0) = ±0`.
    #[track_caller]
    pub fn erfinv<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "erfinv",
            x,
            loc,
            |x| {
                // `1 - x` is exact for `x` from 1/2 to 1, so that `w` keeps its digits near ±1.
                let w = -((1.0f32 - x) * (1.0f32 + x)).log();
                let centre = horner(w - 2.5f32, &CENTRE);
                let tail = horner(w.sqrt() - 3.0f32, &TAIL);
                let y = self.where_(w.lt(5.0f32), centre, tail) * x;
                let a = x.abs();
                let y = self.where_(a.eq(1.0f32), x * f32::INFINITY, y);
                self.where_(a.gt(1.0f32), f32::NAN, y)
            },
            super::f64_normal::erfinv,
        )
    }
}

impl<'b> Value<'b> {
    /// The inverse error function of `self`; see [`KernelBuilder::erfinv`].
    #[track_caller]
    pub fn erfinv(self) -> Value<'b> {
        self.builder.erfinv(self)
    }
}
