//! libdevice's `lgamma` (`ln|Γ(x)|`) and `tgamma` (`Γ(x)`), built from ops every backend has
//! (multiply-adds, divisions, integer ops on the bits, exp_log.rs's exponential and
//! logarithm, sinpi.rs's `sinpi`), so that the interpreter, PTX and SPIR-V compute them
//! alike. f16 and bf16 compute in f32 and round once; f64 computes in f64 (f64_gamma.rs,
//! the same fit and reductions carried in two-part sums, and `tgamma` as the exponential
//! of `lgamma` rather than a product of factors).
//!
//! Both rest on one fit: `lgamma(x) = (x - 1)(x - 2)·R(x - 2)` on `[1, 3]`, `R` a degree-12
//! polynomial (Chebyshev interpolation of `lgamma(x) / ((x - 1)(x - 2))`, whose
//! singularities at 1 and 2 are removable, rounded to f32: `scripts/fit_lgamma.py` makes
//! it). The two roots are factors, computed exactly from the argument, so `lgamma` keeps
//! its relative accuracy next to them.
//!
//! `lgamma`: on `[1, 3)` the fit; below 1, `lgamma(x + 1) - ln x`; on `[3, 8)`, the fit on
//! `[2, 3)` plus the logarithm of the product of the factors stepped over (at most five);
//! from 8, Stirling's series to `x^-7`; negative `x` by the reflection
//! `ln π - ln|x·sinpi(x)| - lgamma(-x)` (between -1/2 and 0, `lgamma(x + 2) - ln(x + 1) -
//! ln(-x)`, where `x·sinpi(x)` would underflow). Near its roots below -2 the reflection
//! subtracts close values, as libdevice's does: there the error is absolute.
//!
//! `tgamma`: `Γ(f) = e^lgamma(f)` for `f` in `[1, 2)` (where `lgamma` is small, so its
//! absolute error is the result's relative one), times the factors `x - k` stepped down
//! over, or divided by the factors `x + k` stepped up over (each exact: a multiple of `x`'s
//! last place no larger than `x`), in a loop of 22 steps covering `[-43, 36)`; past that
//! range the result overflows or underflows. The factors' product is kept in integers, 32
//! bits of significand by high multiplies (`umulhi`): a product of up to 44 f32s would
//! round as many times (10 ulp measured).
//! `core-ir/tests/gamma.rs` measures both against f64 (`core-ir/tests/f64_math.rs` the f64
//! forms).

use super::exp_log::{exp_reduced, ln_positive, scale};
use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32, U32};

/// `R(t)`, `lgamma(t + 2) = (t + 1)·t·R(t)` for `t` in `[-1, 1]`, highest first.
#[allow(clippy::excessive_precision)]
const R: [f32; 13] = [
    1.8091513993567787e-05,
    -3.858047421090305e-05,
    2.3881606466602534e-05,
    -5.2839735872112215e-05,
    0.00019173968757968396,
    -0.00042515413952060044,
    0.000912594492547214,
    -0.0021022423170506954,
    0.0049989959225058556,
    -0.012384943664073944,
    0.03296498954296112,
    -0.10031727701425552,
    0.42278432846069336,
];
/// Stirling's series of `lgamma(x) - ((x - 1/2)·ln x - x + ln(2π)/2)` in `s = 1/x`:
/// `s·(1/12 - s²/360 + s⁴/1260 - s⁶/1680)`, as a polynomial in `s²`, highest first.
const STIRLING: [f32; 4] = [-1.0 / 1680.0, 1.0 / 1260.0, -1.0 / 360.0, 1.0 / 12.0];
#[allow(clippy::excessive_precision)]
const HALF_LN_2PI: f32 = 0.918_938_533_204_672_7;
#[allow(clippy::excessive_precision)]
const LN_PI: f32 = 1.144_729_885_849_400_2;
/// From here every f32 is an integer.
const ALL_INTEGERS: f32 = 8_388_608.0;
/// `tgamma` past this overflows f32 (from 35.0401).
const TGAMMA_OVERFLOW: f32 = 36.0;
/// `tgamma` below this underflows f32 (`|Γ(x)| < 2^-149` for `x < -43`).
const TGAMMA_UNDERFLOW: f32 = -43.0;
/// The loop's steps: two factors of each kind a step, 44 in all.
const TGAMMA_STEPS: i32 = 22;

impl KernelBuilder {
    /// `ln|Γ(x)|` (floats), as `libdevice.lgamma` and C's `lgamma`: within 3 ulp of the
    /// exact value for positive `x` (2.27 measured, next to the roots 1 and 2 too), within 5
    /// between -2.25 and 0 (4.0 measured: `sinpi`'s error through the logarithm), and below
    /// -2.25 within 4 ulp of the largest term of the reflection `ln π - ln|x·sinpi(x)| -
    /// lgamma(-x)`, which next to the roots there is far above the result (as libdevice's,
    /// whose bound excludes `[-10.001, -2.264]`; `core-ir/tests/gamma.rs`); `+∞` at zero, the
    /// negative integers and `±∞`, NaN at NaN; exactly +0 at 1 and 2. f64 computes in f64:
    /// by mpmath within 0.85 ulp of the exact value for positive `x` (next to the roots 1
    /// and 2 too) and 1.15 between -2 and 0; below -2 within 2.1 ulp where the result is at
    /// least a quarter of the reflection's largest term, and next to the roots there within
    /// about 2^-52 absolute (1.5·2^-53 measured down to -10: `sinpi`'s rounding through the
    /// logarithm). `core-ir/tests/f64_math.rs` holds it within 3 ulp of musl's for positive
    /// `x` (5 between -2 and 0, where musl's is up to 3.5 off) and below -2 within 3 ulp of
    /// musl's or of the reflection's largest term.
    #[track_caller]
    pub fn lgamma<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64("lgamma", x, loc, |x| self.lgamma_f32(x), super::f64_gamma::lgamma)
    }

    /// [`KernelBuilder::lgamma`] of f32 `x`.
    fn lgamma_f32<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let y = x.abs();
        let positive = lgamma_positive(self, y);
        // Between -1/2 and 0: lgamma(x + 2) - ln(x + 1) - ln(-x), x + 2 on [1.5, 2).
        let near_zero = (x + 1.0f32) * x * horner(x, &R) - ln_positive(x + 1.0f32) - ln_positive(y);
        // Below: ln π - ln|x·sinpi(x)| - lgamma(-x).
        let s = (x * x.sinpi()).abs();
        let reflected = (LN_PI - ln_positive(s)) - positive;
        let y_result = self.where_(x.gt(-0.5f32), near_zero, reflected);
        let r = self.where_(x.gt(0.0f32), positive, y_result);
        // Poles: zero, the negative integers (every f32 from 2^23 on).
        let pole = x.le(0.0f32) & x.floor().eq(x);
        let r = self.where_(pole | x.isinf(), f32::INFINITY, r);
        // +0 at 1 and 2, where the factor x - 1 or x - 2 is zero of either sign.
        let r = self.where_(r.eq(0.0f32), 0.0f32, r);
        self.where_(x.isnan(), x, r)
    }

    /// `Γ(x)` (floats), as `libdevice.tgamma` and C's `tgamma`: within 3 ulp of the exact
    /// value over its range (`core-ir/tests/gamma.rs` measured at most 2.31 over 2.3
    /// million points, next to the poles and the ends of the range too); `±∞` at `±0`, `+∞`
    /// from 35.05 on and at `+∞`, NaN at the negative integers, `-∞` and NaN; zeros of the
    /// right sign below -43. f64 computes in f64: within 1.5 ulp of the exact value over
    /// its whole range (by mpmath; `core-ir/tests/f64_math.rs` holds it within 2 ulp of a
    /// reference in two parts), next to the poles and into the subnormals too; `+∞` from
    /// 171.62 on, zeros of the right sign below -184. (Its two-part sums need a fused `fma`:
    /// a Vulkan device that rounds `fma` twice, as lavapipe, is off by up to 2.4 ulp per
    /// unit of `|lgamma(x)|`.)
    #[track_caller]
    pub fn tgamma<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64("tgamma", x, loc, |x| self.tgamma_f32(x), super::f64_gamma::tgamma)
    }

    /// [`KernelBuilder::tgamma`] of f32 `x`.
    fn tgamma_f32<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        // Inside [-43, 36): n = floor(x) - 1, Γ(x) = Γ(f)·(x-1)···(x-n) with f = x - n
        // in [1, 2) for n > 0, Γ(f) / (x·(x+1)···(x-n-1)) for n < 0.
        let xc = x.clamp(TGAMMA_UNDERFLOW, TGAMMA_OVERFLOW);
        let n = xc.floor() - 1.0f32;
        // lgamma(f) = (f - 1)(f - 2)·R(f - 2), the factors taken from x.
        let t = xc - (n + 2.0f32);
        let core = exp((xc - (n + 1.0f32)) * t * horner(t, &R));
        let start = Product::one(self, x);
        let init = [start.m, start.e, start.m, start.e];
        let steps = self.for_range(0, TGAMMA_STEPS, 1, &init, |i, acc| {
            let k = (i * 2).to(F32);
            let mut up = Product { m: acc[0], e: acc[1] };
            let mut down = Product { m: acc[2], e: acc[3] };
            for j in [0.0f32, 1.0] {
                up = up.times(self, xc - (k + (j + 1.0)), (k + (j + 1.0)).le(n));
                down = down.times(self, xc + (k + j), (k + j).lt(-n));
            }
            vec![up.m, up.e, down.m, down.e]
        });
        let (up, down) = (
            Product {
                m: steps[0],
                e: steps[1],
            },
            Product {
                m: steps[2],
                e: steps[3],
            },
        );
        // Both products are m·2^(e - 31), m below 2^32.
        let grown = scale(core * up.m.to(F32), up.e.to(F32) - 31.0f32);
        let odd = (x.floor().maximum(-ALL_INTEGERS).to(I32) & 1).eq(1);
        let shrunk = scale(core / down.m.to(F32), 31.0f32 - down.e.to(F32));
        let shrunk = self.where_(odd, -shrunk, shrunk);
        let r = self.where_(n.ge(0.0f32), grown, shrunk);
        // Below -43 a zero with Γ's sign there: negative where floor(x) is odd.
        let tiny = self.where_(odd, -0.0f32, 0.0f32);
        let r = self.where_(x.lt(TGAMMA_UNDERFLOW), tiny, r);
        let r = self.where_(x.ge(TGAMMA_OVERFLOW), f32::INFINITY, r);
        let r = self.where_(x.eq(0.0f32), (x.bitcast(I32) | 0x7F80_0000).bitcast(F32), r);
        let bad = (x.lt(0.0f32) & x.floor().eq(x)) | x.isnan();
        self.where_(bad, f32::NAN, r)
    }
}

/// A product of nonzero normal f32 factors as `m·2^(e - 31)`: `m` (u32) its leading 32
/// bits (the top one set), `e` (i32) its exponent. Each factor's 24-bit significand goes
/// in by a high multiply, truncating at the 32nd bit: 44 factors move it by at most 2^-25,
/// where a product of f32s would round 44 times.
#[derive(Clone, Copy)]
struct Product<'b> {
    m: Value<'b>,
    e: Value<'b>,
}

impl<'b> Product<'b> {
    /// 1 (`2^31·2^-31`), shaped as `x`.
    fn one(k: &'b KernelBuilder, x: Value<'b>) -> Product<'b> {
        Product {
            m: k.zeros_like(x.bitcast(U32)) | 0x8000_0000u32,
            e: k.zeros_like(x.bitcast(I32)),
        }
    }

    /// The product times `|v|` where `used`, itself elsewhere.
    fn times(self, k: &'b KernelBuilder, v: Value<'b>, used: Value<'b>) -> Product<'b> {
        let bits = v.bitcast(U32);
        let significand = ((bits & 0x007F_FFFFu32) | 0x0080_0000u32) << 8u32;
        let exponent = ((bits >> 23u32) & 0xFFu32).to(I32) - 127;
        let p = self.m.umulhi(significand);
        // m·s is in [2^62, 2^64): its top 32 bits have the top one set, or the next.
        let top = p >> 31u32;
        let m = k.where_(top.eq(1u32), p, p << 1u32);
        let e = self.e + exponent + top.to(I32);
        Product {
            m: k.where_(used, m, self.m),
            e: k.where_(used, e, self.e),
        }
    }
}

/// `e^a` for f32 `a` in `[-1, 1]`.
fn exp(a: Value<'_>) -> Value<'_> {
    let (k, p) = exp_reduced(a);
    scale(p + 1.0f32, k)
}

/// `lgamma(y)` for f32 `y > 0` (any value for others, which the callers replace).
fn lgamma_positive<'b>(k: &'b KernelBuilder, y: Value<'b>) -> Value<'b> {
    // Below 1: lgamma(y + 1) - ln y, lgamma(y + 1) = y·(y - 1)·R(y - 1).
    let yc = y.maximum(f32::MIN_POSITIVE);
    let below_one = yc * (yc - 1.0f32) * horner(yc - 1.0f32, &R) - ln_positive(yc);
    // [1, 3): the fit.
    let fit = (y - 1.0f32) * (y - 2.0f32) * horner(y - 2.0f32, &R);
    // [3, 8): the fit at f = y - n in [2, 3), plus ln((y - 1)···(y - n)), n <= 5.
    let ym = y.clamp(3.0f32, 8.0f32);
    let n = ym.floor() - 2.0f32;
    let f = ym - n;
    let mut product = ym - 1.0f32;
    for j in 2..=5 {
        let j = j as f32;
        product = product * k.where_(n.ge(j), ym - j, 1.0f32);
    }
    let stepped = (f - 1.0f32) * (f - 2.0f32) * horner(f - 2.0f32, &R) + ln_positive(product);
    // From 8: (y - 1/2)·(ln y - 1) + (ln(2π) - 1)/2 + Stirling's series in 1/y.
    let yl = y.maximum(8.0f32);
    let s = 1.0f32 / yl;
    let series = s * horner(s * s, &STIRLING);
    let large = (yl - 0.5f32) * (ln_positive(yl) - 1.0f32) + ((HALF_LN_2PI - 0.5f32) + series);
    let r = k.where_(y.lt(8.0f32), stepped, large);
    let r = k.where_(y.lt(3.0f32), fit, r);
    k.where_(y.lt(1.0f32), below_one, r)
}

impl<'b> Value<'b> {
    /// `ln|Γ(self)|`; see [`KernelBuilder::lgamma`].
    #[track_caller]
    pub fn lgamma(self) -> Value<'b> {
        self.builder.lgamma(self)
    }

    /// `Γ(self)`; see [`KernelBuilder::tgamma`].
    #[track_caller]
    pub fn tgamma(self) -> Value<'b> {
        self.builder.tgamma(self)
    }
}
