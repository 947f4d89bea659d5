//! libdevice's Bessel functions of the first and second kinds of orders 0 and 1: `j0`,
//! `j1`, `y0`, `y1`, built from ops every backend has (polynomials, exp_log.rs's logarithm,
//! reduce_pi.rs's exact reduction by π/2, sincos.rs's polynomials), so that the
//! interpreter, PTX and SPIR-V compute them alike. f16 and bf16 compute in f32 and round
//! once; f64 has its own form in f64 ops (f64_bessel_jy.rs).
//!
//! Below 2, their series in `y = x²/4`: `J0 = Σ (-y)^k/(k!)²`, `J1 = (x/2)·Σ (-y)^k/(k!(k+1)!)`,
//! and `Y0`, `Y1` from them with `ln(x/2)` and the harmonic numbers (Abramowitz and Stegun
//! 9.1.11). From 2 on, `J_n = M_n·cos θ_n` and `Y_n = M_n·sin θ_n` with the modulus
//! `M_n = m_n(2/x)/√x` and the phase `θ_n = x - (2n+1)π/4 + φ_n(2/x)`, `m_n` and `φ_n`
//! degree-8 polynomials (`scripts/fit_bessel_jy.py` makes them); `x` is reduced by π/2
//! exactly, so the phase keeps its digits for every finite `x`. Like libdevice's, the
//! results have an absolute error, not a relative one, next to the functions' zeros:
//! `core-ir/tests/bessel_jy.rs` measures it against f64, below 2 and as a share of the
//! envelope `M_n` beyond.

use super::exp_log::ln_positive;
use super::in_f32::horner;
use super::reduce_pi::FRAC_PI_2_PARTS;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{I32, U32};

/// Where the series hand over to the modulus and phase.
const SPLIT: f32 = 2.0;
/// The series' terms: 12 reach below 10^-15 of the largest at 2.
const TERMS: usize = 12;
#[allow(clippy::excessive_precision)]
const EULER_GAMMA: f32 = 0.577_215_664_901_532_9;
const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
const FRAC_1_PI: f32 = std::f32::consts::FRAC_1_PI;

/// `√x·M0(x)`, `M0 = √(J0² + Y0²)` from 2 on, in `t = 2/x`, highest first.
#[allow(clippy::excessive_precision)]
const MODULUS_0: [f32; 9] = [
    -7.588774315081537e-05,
    -0.00021764523989986628,
    0.0023762774653732777,
    -0.006227301899343729,
    0.007251625880599022,
    -0.00038331461837515235,
    -0.012431405484676361,
    -1.2942020930495346e-06,
    0.7978845834732056,
];
/// `φ0(x) = θ0(x) - x + π/4`, `θ0` the phase of `J0 + i·Y0` from 2 on, in `t = 2/x`, highest first.
#[allow(clippy::excessive_precision)]
const PHASE_0: [f32; 9] = [
    0.0009600987541489303,
    -0.004697330761700869,
    0.00935343373566866,
    -0.008524174802005291,
    5.2798845899815205e-06,
    0.008208174258470535,
    -1.053571486409055e-05,
    -0.06249953806400299,
    -2.93095347991823e-09,
];
/// `√x·M1(x)` from 2 on, in `t = 2/x`, highest first.
#[allow(clippy::excessive_precision)]
const MODULUS_1: [f32; 9] = [
    0.0003024757606908679,
    -0.0006128160748630762,
    -0.0017989580519497395,
    0.008404867723584175,
    -0.012532532215118408,
    0.0005392574821598828,
    0.03735027089715004,
    1.8530683973949635e-06,
    0.7978845238685608,
];
/// `φ1(x) = θ1(x) - x + 3π/4` from 2 on, in `t = 2/x`, highest first.
#[allow(clippy::excessive_precision)]
const PHASE_1: [f32; 9] = [
    -0.0014070277102291584,
    0.007257306016981602,
    -0.015625976026058197,
    0.016063224524259567,
    -0.0006025668699294329,
    -0.02049323543906212,
    4.058817921759328e-06,
    0.1874997466802597,
    1.6794949875276188e-09,
];

/// Which function of an order.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    First,
    Second,
}

impl KernelBuilder {
    /// The Bessel function of the first kind of order 0 (floats), as `libdevice.j0`: even;
    /// an absolute error below 2^-21 (4.8·10^-7) for `|x| < 2` and below 2^-21 of the
    /// envelope `√(2/(π|x|))` beyond, for every finite `x` (`core-ir/tests/bessel_jy.rs`
    /// measured 2.2·10^-7 for `j0`, 3.3·10^-7 for the four); 1 at 0, 0 at `±∞`, NaN at NaN.
    /// f64 is computed in f64 ops: within a few ulp away from the zeros, and an absolute
    /// error of a few 10^-16 of the envelope (of 1 below 2) next to them and for every
    /// finite `x` (`core-ir/tests/f64_bessel.rs`).
    #[track_caller]
    pub fn j0<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "j0",
            x,
            loc,
            |x| self.bessel(0, Kind::First, x),
            |x| self.f64_bessel(0, Kind::First, x),
        )
    }

    /// The Bessel function of the first kind of order 1 (floats), as `libdevice.j1`: odd;
    /// errors as [`KernelBuilder::j0`]'s, in f32 and in f64; `±0` at `±0` and `±∞`, NaN at
    /// NaN.
    #[track_caller]
    pub fn j1<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "j1",
            x,
            loc,
            |x| self.bessel(1, Kind::First, x),
            |x| self.f64_bessel(1, Kind::First, x),
        )
    }

    /// The Bessel function of the second kind of order 0 (floats), as `libdevice.y0`:
    /// errors as [`KernelBuilder::j0`]'s, in f32 and in f64 (below 2, relative to `|Y0|`
    /// where it passes 1);
    /// `-∞` at `±0`, 0 at `+∞`, NaN below 0 and at NaN.
    #[track_caller]
    pub fn y0<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "y0",
            x,
            loc,
            |x| self.bessel(0, Kind::Second, x),
            |x| self.f64_bessel(0, Kind::Second, x),
        )
    }

    /// The Bessel function of the second kind of order 1 (floats), as `libdevice.y1`:
    /// errors as [`KernelBuilder::j0`]'s, in f32 and in f64 (below 2, relative to `|Y1|`
    /// where it passes 1);
    /// `-∞` at `±0`, 0 at `+∞`, NaN below 0 and at NaN.
    #[track_caller]
    pub fn y1<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "y1",
            x,
            loc,
            |x| self.bessel(1, Kind::Second, x),
            |x| self.f64_bessel(1, Kind::Second, x),
        )
    }

    /// `J_order(x)` or `Y_order(x)` for f32 `x`, special values included.
    fn bessel<'b>(&'b self, order: u32, kind: Kind, x: Value<'b>) -> Value<'b> {
        let a = x.abs();
        let near = series(order, kind, a.maximum(f32::from_bits(1)));
        let far = modulus_phase(self, order, kind, a.clamp(SPLIT, f32::MAX));
        let r = self.where_(a.lt(SPLIT), near, far);
        let r = self.where_(a.eq(f32::INFINITY), 0.0f32, r);
        match (kind, order) {
            (Kind::First, 0) => self.where_(x.isnan(), x, r),
            // J1 is odd: x's sign (J1(±0) = ±0).
            (Kind::First, _) => {
                let r = self.where_(a.eq(0.0f32), 0.0f32, r);
                let r = self.where_(x.signbit(), -r, r);
                self.where_(x.isnan(), x, r)
            }
            (Kind::Second, _) => {
                let r = self.where_(a.eq(0.0f32), f32::NEG_INFINITY, r);
                self.where_(x.lt(0.0f32) | x.isnan(), f32::NAN, r)
            }
        }
    }
}

/// The series below 2 for `a > 0` (A&S 9.1.10, 9.1.11): in `y = a²/4`,
/// `J0 = Σ (-y)^k/(k!)²`, `J1 = (a/2)·Σ (-y)^k/(k!(k+1)!)`,
/// `Y0 = (2/π)(ln(a/2) + γ)·J0 + (2/π)·Σ (-1)^(k+1) H_k y^k/(k!)²`,
/// `Y1 = -2/(πa) + (2/π)·ln(a/2)·J1 - (a/2π)·Σ (-y)^k (ψ(k+1) + ψ(k+2))/(k!(k+1)!)`.
fn series(order: u32, kind: Kind, a: Value<'_>) -> Value<'_> {
    let y = a * a * 0.25f32;
    let half = a * 0.5f32;
    let j = match order {
        0 => horner(y, &coefficients(|n, _| alternate(n) / (fact(n) * fact(n)))),
        _ => half * horner(y, &coefficients(|n, _| alternate(n) / (fact(n) * fact(n + 1)))),
    };
    if kind == Kind::First {
        return j;
    }
    let log = ln_positive(half);
    match order {
        0 => {
            let sum = horner(y, &coefficients(|n, h| -alternate(n) * h[n] / (fact(n) * fact(n))));
            ((log + EULER_GAMMA) * j + sum) * FRAC_2_PI
        }
        _ => {
            // ψ(k + 1) + ψ(k + 2) = H_k + H_(k+1) - 2γ.
            let psi = |n: usize, h: &[f64]| h[n] + h[n + 1] - 2.0 * EULER_GAMMA as f64;
            let sum = horner(
                y,
                &coefficients(|n, h| alternate(n) * psi(n, h) / (fact(n) * fact(n + 1))),
            );
            let r = (log * j).fma(FRAC_2_PI, -(half * sum) * FRAC_1_PI);
            r - FRAC_2_PI / a
        }
    }
}

/// `(-1)^n`.
fn alternate(n: usize) -> f64 {
    if n % 2 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// `n!` in f64.
fn fact(n: usize) -> f64 {
    (1..=n).map(|i| i as f64).product()
}

/// The series' coefficients `c(n, H)` for `n` below [`TERMS`] (with the harmonic numbers
/// `H`), in f64 rounded to f32, highest first.
fn coefficients(c: impl Fn(usize, &[f64]) -> f64) -> Vec<f32> {
    let mut h = vec![0.0f64; TERMS + 2];
    for n in 1..h.len() {
        h[n] = h[n - 1] + 1.0 / n as f64;
    }
    (0..TERMS).rev().map(|n| c(n, &h) as f32).collect()
}

/// The modulus and phase form from 2 on, for f32 `a ≥ 2` (finite).
fn modulus_phase<'b>(k: &'b KernelBuilder, order: u32, kind: Kind, a: Value<'b>) -> Value<'b> {
    let (modulus, phase) = match order {
        0 => (&MODULUS_0, &PHASE_0),
        _ => (&MODULUS_1, &PHASE_1),
    };
    let t = SPLIT / a;
    let m = horner(t, modulus) / a.sqrt();
    // θ = a + δ, δ = φ(t) - (2·order + 1)·π/4: a reduced exactly, then a + δ once more
    // (a quarter turn either way at most), by π/2 in two parts.
    let delta = horner(t, phase) - (2 * order + 1) as f32 * std::f32::consts::FRAC_PI_4;
    let (quadrant, z) = k.reduce_by_half_pi(a);
    let w = z + delta;
    let turns = (w * FRAC_2_PI).rint();
    let w = (w - turns * FRAC_PI_2_PARTS[0]) - turns * FRAC_PI_2_PARTS[1];
    let quadrant = (quadrant.to(I32) + turns.to(I32) + 4) & 3;
    let (sin, cos) = k.quadrant_sin_cos(quadrant.to(U32), w);
    m * match kind {
        Kind::First => cos,
        Kind::Second => sin,
    }
}

impl<'b> Value<'b> {
    /// `J0(self)`; see [`KernelBuilder::j0`].
    #[track_caller]
    pub fn j0(self) -> Value<'b> {
        self.builder.j0(self)
    }

    /// `J1(self)`; see [`KernelBuilder::j1`].
    #[track_caller]
    pub fn j1(self) -> Value<'b> {
        self.builder.j1(self)
    }

    /// `Y0(self)`; see [`KernelBuilder::y0`].
    #[track_caller]
    pub fn y0(self) -> Value<'b> {
        self.builder.y0(self)
    }

    /// `Y1(self)`; see [`KernelBuilder::y1`].
    #[track_caller]
    pub fn y1(self) -> Value<'b> {
        self.builder.y1(self)
    }
}
