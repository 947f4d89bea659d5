//! `sin` and `cos` of f64 values, written out in f64 ops (f64_math.rs routes the ops here),
//! and libdevice's `tan`, `sinpi` and `cospi` of them (tan.rs and sinpi.rs route f64 here): PTX has no f64 sine, and
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
use super::sincos::quarter_turns;
use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F64, I64};

/// Below this an argument is its own rest (quadrant 0).
const UNREDUCED: f64 = 0.5;
/// From here on every f64 is an even integer.
const EVEN: f64 = 9_007_199_254_740_992.0;
/// π as the nearest f64 and the nearest f64 to the rest.
#[allow(clippy::excessive_precision)]
const PI: [f64; 2] = [std::f64::consts::PI, 1.224_646_799_147_353_2e-16];

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
        let (sin, cos) = sin_cos_of(y, t);
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
        let sin_r = quarter_turns(quadrant, sin, cos);
        let cos_r = quarter_turns(quadrant + 1u64, sin, cos);
        (
            self.where_(finite, flip_sign(sin_r, x), f64::NAN),
            self.where_(finite, cos_r, f64::NAN),
        )
    }
}

/// `(sin, cos)` of `y + t` for `|y| ≤ π/4` and `t` the next bits of the angle (within an
/// ulp of `y`): the Taylor series of `y` (to `y^21` and `y^22`, the next terms below 2^-80
/// of the result), `t` entering at first order, the cosine's `1 - y²/2` keeping its
/// roundings. f64_bessel_jy.rs's phases take it too.
pub(super) fn sin_cos_of<'b>(y: Value<'b>, t: Value<'b>) -> (Value<'b>, Value<'b>) {
    let z = y * y;
    let sin = y + (y * z * horner(z, &sin_coefficients()) + t * (1.0 - 0.5 * z));
    // 1 - z/2 as w plus what its rounding and z's left out.
    let h = 0.5 * z;
    let w = 1.0 - h;
    let z_error = y.fma(y, -z);
    let tail = ((1.0 - w) - h) - 0.5 * z_error;
    let cos = w + (tail + (z * z * horner(z, &cos_coefficients()) - y * t));
    (sin, cos)
}

/// `sin(π(x + shift/2))` of f64 `x`: `shift` 0 is libdevice's `sinpi`, 1 its `cospi`, as
/// sinpi.rs's f32 form: `x` less the nearest multiple of 1/2 (exact), the quarter turns
/// choosing and signing the sine or cosine of `π·f` (the product in two parts).
pub(super) fn sin_cos_pi(x: Value<'_>, shift: i64) -> Value<'_> {
    let k = x.builder;
    // From 2^53 every f64 is an even integer: taken as 0 (so that 2x cannot overflow).
    let a = k.where_(x.abs().lt(EVEN), x, 0.0);
    let halves = (a + a).rint();
    let f = a - halves * 0.5;
    // Quarter turns: `halves` modulo 4, exactly, then `shift` more.
    let m = halves - (halves * 0.25).floor() * 4.0;
    let n = (m.to(I64) + shift) & 3i64;
    let [hi, lo] = PI;
    let y = f * hi;
    let t = f.fma(hi, -y) + f * lo;
    let (sin, cos) = sin_cos_of(y, t);
    let r = quarter_turns(n, sin, cos);
    // The exact zeros: `sinpi` of an integer has x's sign, `cospi` of a half-integer is +0.
    let zero = f.eq(0.0) & (n & 1i64).eq(0i64);
    let signed_zero = (x.bitcast(I64) & i64::MIN).bitcast(F64);
    let r = k.where_(zero, if shift == 0 { signed_zero } else { k.zeros_like(x) }, r);
    k.where_(x.abs().lt(f64::INFINITY), r, f64::NAN)
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
