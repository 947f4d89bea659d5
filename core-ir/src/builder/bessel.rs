//! libdevice's modified Bessel functions of the first kind, `cyl_bessel_i0` and
//! `cyl_bessel_i1`, built from ops every backend has (polynomials, a square root, a
//! division, exp_log.rs's exponential), so that the interpreter, PTX and SPIR-V compute them
//! alike. f16 and bf16 compute in f32 and round once; f64 has its own form in f64 ops
//! (f64_bessel_i.rs).
//!
//! Below 4, their Taylor series in `x²/4` (all terms positive: no cancellation), with the
//! square's rounding corrected by the series' slope; from 4 on,
//! `e^x/√x · g(4/x)` with `g` a degree-10 polynomial interpolating `√x·e^-x·I(x)`
//! (`scripts/fit_bessel_i.py` makes every coefficient), the power of two of `e^x` applied
//! last, so that the result overflows only where it does (from about 91.9).
//! `core-ir/tests/bessel.rs` measures both against f64.

use super::erfc::split_square;
use super::exp_log::{exp_reduced, scale};
use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;

/// Where the series hands over to the tail polynomial.
const SPLIT: f32 = 4.0;
/// Past this both overflow f32.
const OVERFLOW: f32 = 100.0;

/// `I0`'s Taylor series in `y = x²/4`, `1/(k!)²`, highest first.
#[allow(clippy::excessive_precision)]
const I0_TAYLOR: [f32; 15] = [
    1.3157801051012797e-22,
    2.5789289454139907e-20,
    4.358389832123526e-18,
    6.276081093560082e-16,
    7.5940583032022e-14,
    7.594058194781983e-12,
    6.151187337266606e-10,
    3.936759895850628e-08,
    1.9290123418613803e-06,
    6.944444612599909e-05,
    0.0017361111240461469,
    0.02777777798473835,
    0.25,
    1.0,
    1.0,
];
/// `√x·e^-x·I0(x)` from 4 on, in `t = 4/x`, highest first.
#[allow(clippy::excessive_precision)]
const I0_TAIL: [f32; 11] = [
    -0.002198893344029784,
    0.013467802666127682,
    -0.03302937000989914,
    0.04163307696580887,
    -0.02939578890800476,
    0.01234340574592352,
    -0.0028162640519440174,
    0.0008643839391879737,
    0.0017255540005862713,
    0.012467656284570694,
    0.3989422917366028,
];
/// `I1(x)·2/x`'s Taylor series in `y = x²/4`, `1/(k!(k+1)!)`, highest first.
#[allow(clippy::excessive_precision)]
const I1_TAYLOR: [f32; 15] = [
    8.771866631071687e-24,
    1.8420920461675957e-21,
    3.352607483635346e-19,
    5.2300677985482315e-17,
    6.903689520553445e-15,
    7.5940583032022e-13,
    6.834652288567611e-11,
    4.920949869813285e-09,
    2.755731998149713e-07,
    1.1574074051168282e-05,
    0.00034722223062999547,
    0.0069444444961845875,
    0.0833333358168602,
    0.5,
    1.0,
];
/// `√x·e^-x·I1(x)` from 4 on, in `t = 4/x`, highest first.
#[allow(clippy::excessive_precision)]
const I1_TAIL: [f32; 11] = [
    0.002047620713710785,
    -0.013020943850278854,
    0.03280431777238846,
    -0.042118437588214874,
    0.030079379677772522,
    -0.01275233831256628,
    0.0028783685993403196,
    -0.0010638706153258681,
    -0.0028931195847690105,
    -0.037401579320430756,
    0.3989422917366028,
];

impl KernelBuilder {
    /// The modified Bessel function of the first kind of order 0 (floats), as
    /// `libdevice.cyl_bessel_i0`: even, within 4 ulp of the exact value
    /// (`core-ir/tests/bessel.rs` measured 3.31), `+∞` from about 91.9 on and at `±∞`, NaN
    /// at NaN. f64 is computed in f64 ops, within 4 ulp (`core-ir/tests/f64_bessel.rs`
    /// measured 2.96), `+∞` from about 713.98 on.
    #[track_caller]
    pub fn cyl_bessel_i0<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "cyl_bessel_i0",
            x,
            loc,
            |x| {
                let a = x.abs();
                let small = series_of_square(a * 0.5f32, &I0_TAYLOR);
                let r = self.where_(a.lt(SPLIT), small, tail(a, &I0_TAIL));
                self.where_(x.isnan(), x, r)
            },
            |x| self.f64_bessel_i0(x),
        )
    }

    /// The modified Bessel function of the first kind of order 1 (floats), as
    /// `libdevice.cyl_bessel_i1`: odd, within 4 ulp of the exact value
    /// (`core-ir/tests/bessel.rs` measured 3.22), `±∞` from about ±91.9 on, NaN at NaN.
    /// f64 is computed in f64 ops, within 4 ulp (`core-ir/tests/f64_bessel.rs` measured
    /// 3.53), `±∞` from about ±713.98 on.
    #[track_caller]
    pub fn cyl_bessel_i1<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "cyl_bessel_i1",
            x,
            loc,
            |x| {
                let a = x.abs();
                let h = a * 0.5f32;
                let small = h * series_of_square(h, &I1_TAYLOR);
                let r = self.where_(a.lt(SPLIT), small, tail(a, &I1_TAIL));
                let r = self.where_(x.signbit(), -r, r);
                self.where_(x.isnan(), x, r)
            },
            |x| self.f64_bessel_i1(x),
        )
    }
}

/// The series `Σ c_k·h^2k` (coefficients highest first) for f32 `h ≥ 0`, with `h²` taken
/// exactly: at its rounded value, plus the series' slope times the rounding's remainder
/// (computed exactly by erfc.rs's split). The rounding alone would move the sum by up to
/// `h²·S'/S` half-ulps, 1.6 at the split.
fn series_of_square<'b>(h: Value<'b>, coefficients: &[f32]) -> Value<'b> {
    let y = h * h;
    let (hi, lo) = split_square(h);
    let remainder = (hi - y) + lo;
    let n = coefficients.len() - 1;
    let slope: Vec<f32> = coefficients[..n]
        .iter()
        .enumerate()
        .map(|(i, &c)| c * (n - i) as f32)
        .collect();
    horner(y, coefficients) + horner(y, &slope) * remainder
}

/// `e^a/√a · g(4/a)` for f32 `a ≥ 4` (others clamped; `+∞` past the overflow), the power of
/// two of `e^a` applied last.
fn tail<'b>(a: Value<'b>, g: &[f32]) -> Value<'b> {
    let ac = a.clamp(SPLIT, OVERFLOW);
    let (k, p) = exp_reduced(ac);
    let q = horner(SPLIT / ac, g) / ac.sqrt();
    let r = scale(p.fma(q, q), k);
    a.builder.where_(a.gt(OVERFLOW), f32::INFINITY, r)
}

impl<'b> Value<'b> {
    /// `I0(self)`; see [`KernelBuilder::cyl_bessel_i0`].
    #[track_caller]
    pub fn cyl_bessel_i0(self) -> Value<'b> {
        self.builder.cyl_bessel_i0(self)
    }

    /// `I1(self)`; see [`KernelBuilder::cyl_bessel_i1`].
    #[track_caller]
    pub fn cyl_bessel_i1(self) -> Value<'b> {
        self.builder.cyl_bessel_i1(self)
    }
}
