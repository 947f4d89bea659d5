//! `sin` and `cos` of f64 values, written out in f64 ops (f64_math.rs routes the ops here),
//! and libdevice's `tan` of them (tan.rs routes f64 here): PTX has no f64 sine, and
//! Vulkan's GLSL.std.450 sine is for 16- and 32-bit floats only.
//!
//! The argument is reduced by π/2 exactly over the whole f64 range (reduce_pi.rs, to a
//! rest `y + t` with `|y| ≤ π/4` and `t` its next bits), and the rest's sine or cosine,
//! chosen and signed by the quadrant, is its Taylor series: to `y^21` for the sine and `y^22`
//! for the cosine, whose next terms are below 2^-80 of the result at π/4. The rest's low
//! part enters at first order (`sin(y + t) ≈ sin y + t·cos y`), and the cosine's leading
//! `1 - y²/2` keeps the rounding errors of `y²` and of the difference, which would
//! otherwise cost it an ulp near π/4. `core-ir/tests/f64_math.rs` measures both against the
//! platform's f64 functions.

use super::f64_math::divide;
use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F64, I64};

/// Below this an argument is its own rest (quadrant 0).
const UNREDUCED: f64 = 0.5;

fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

/// `sin y - y = y·z·S(z)` and `cos y - (1 - z/2) = z²·C(z)`, `z = y²`, for `|y| ≤ π/4`:
/// the Taylor coefficients highest first.
fn sin_coefficients() -> Vec<f64> {
    (1..=10)
        .rev()
        .map(|n| (-1f64).powi(n) / factorial(2 * n as u32 + 1))
        .collect()
}
fn cos_coefficients() -> Vec<f64> {
    (2..=11)
        .rev()
        .map(|n| (-1f64).powi(n) / factorial(2 * n as u32))
        .collect()
}

/// The rest of f64 `x` by π/2: `(quadrant, sin y, cos y, finite)` with `y` the rest (in
/// two parts, the second entering at first order) of `|x|`; the quadrant is u64.
struct Reduced<'b> {
    quadrant: Value<'b>,
    sin: Value<'b>,
    cos: Value<'b>,
    finite: Value<'b>,
}

impl KernelBuilder {
    fn f64_reduced_sin_cos<'b>(&'b self, x: Value<'b>) -> Reduced<'b> {
        let a = x.abs();
        let finite = a.lt(f64::INFINITY);
        // Infinities and NaN would reach the reduction as huge exponents: replace them by
        // zero there and by NaN in the result.
        let a = self.where_(finite, a, 0.0);
        let (quadrant, y, t) = self.reduce_f64_by_half_pi(a);
        let small = a.lt(UNREDUCED);
        let quadrant = self.where_(small, self.zeros_like(quadrant), quadrant);
        let (y, t) = (self.where_(small, a, y), self.where_(small, 0.0, t));
        let z = y * y;
        let sin = y + (y * z * horner(z, &sin_coefficients()) + t * (1.0 - 0.5 * z));
        // 1 - z/2 as w plus what its rounding and z's left out.
        let h = 0.5 * z;
        let w = 1.0 - h;
        let z_error = y.fma(y, -z);
        let tail = ((1.0 - w) - h) - 0.5 * z_error;
        let cos = w + (tail + (z * z * horner(z, &cos_coefficients()) - y * t));
        Reduced {
            quadrant,
            sin,
            cos,
            finite,
        }
    }

    /// `(sin x, cos x)` of f64 `x`, as the pair's parts are asked for (both are built from
    /// one reduction; the unused part is left for dead-code removal).
    fn f64_sin_cos<'b>(&'b self, x: Value<'b>) -> (Value<'b>, Value<'b>) {
        let Reduced {
            quadrant,
            sin,
            cos,
            finite,
        } = self.f64_reduced_sin_cos(x);
        // sin(n·π/2 + y): sin y, cos y, -sin y, -cos y; cos(n·π/2 + y): cos y, -sin y,
        // -cos y, sin y.
        let odd = (quadrant & 1u64).eq(1u64);
        let (sin_r, cos_r) = (self.where_(odd, cos, sin), self.where_(odd, sin, cos));
        let sin_r = self.where_((quadrant & 2u64).eq(2u64), -sin_r, sin_r);
        let cos_r = self.where_(((quadrant + 1u64) & 2u64).eq(2u64), -cos_r, cos_r);
        (
            self.where_(finite, flip_sign(sin_r, x), f64::NAN),
            self.where_(finite, cos_r, f64::NAN),
        )
    }
}

/// `r` with its sign flipped where `x`'s sign bit is set: for the odd functions (so that
/// `f(-0) = -0`).
fn flip_sign<'b>(r: Value<'b>, x: Value<'b>) -> Value<'b> {
    (r.bitcast(I64) ^ (x.bitcast(I64) & i64::MIN)).bitcast(F64)
}

pub(super) fn sin(x: Value<'_>) -> Value<'_> {
    x.builder.f64_sin_cos(x).0
}

pub(super) fn cos(x: Value<'_>) -> Value<'_> {
    x.builder.f64_sin_cos(x).1
}

/// `tan x`: the rest's sine over its cosine, or an odd multiple of π/2 away minus its
/// cosine over its sine (each quotient corrected by its residual).
pub(super) fn tan(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let Reduced {
        quadrant,
        sin,
        cos,
        finite,
    } = k.f64_reduced_sin_cos(x);
    let odd = (quadrant & 1u64).eq(1u64);
    let t = divide(k.where_(odd, -cos, sin), k.where_(odd, sin, cos));
    k.where_(finite, flip_sign(t, x), f64::NAN)
}
