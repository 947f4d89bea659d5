//! libdevice's exponential, logarithmic and hyperbolic functions that `triton.language`
//! does not have itself: `expm1`, `log1p`, `exp10`, `log10`, `sinh`, `cosh`, `asinh`,
//! `acosh` and `atanh`. Built here from ops every backend has (multiply-adds, one division,
//! `sqrt`, integer ops on the bits), so that the interpreter, PTX and SPIR-V compute them
//! alike, without the backends' approximate `ex2` and `lg2`, whose absolute errors would
//! swamp `expm1` and `log1p` near zero, the very place they exist for. f16 and bf16 compute
//! in f32 and round once; f64 computes in f64 with reductions of its own (f64_exp_log.rs).
//!
//! The method is the classic one (Tang's and Sun's fdlibm's): `e^x = 2^k e^r` with
//! `|r| <= ln(2)/2` by a two-part `ln 2` (so that `k·ln2_hi` is exact), `e^r - 1` by its
//! Taylor series to `r^8` (truncation below 2^-30 there); `log(2^k m) = k ln 2 + log m` with
//! `m` in `[√½, √2)` read from the bits, `log m = 2 atanh(s)`, `s = (m-1)/(m+1)`, by its
//! series to `s^9`. `core-ir/tests/exp_log.rs` measures each against f64 in the
//! interpreter.

use super::in_f32::{copysign, horner};
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};

/// `ln 2` in two parts: `LN2_HI` has 15 significant bits, so that `k·LN2_HI` is exact for
/// the exponents here; `LN2_LO` the rest.
const LN2_HI: f32 = f32::from_bits(0x3F31_7200); // 0.693145751953125
#[allow(clippy::excessive_precision)]
const LN2_LO: f32 = 1.428_606_765_330_187e-6;
/// `log10 2` in two parts, `LOG10_2_HI` with 11 significant bits.
const LOG10_2_HI: f32 = f32::from_bits(0x3E9A_2000); // 0.301025390625
#[allow(clippy::excessive_precision)]
const LOG10_2_LO: f32 = 4.605_039_066_518_657e-6;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
const LOG2_10: f32 = std::f32::consts::LOG2_10;
const LN_10: f32 = std::f32::consts::LN_10;
const LOG10_E: f32 = std::f32::consts::LOG10_E;
const LN_2: f32 = std::f32::consts::LN_2;
/// The smallest normal f32, and 2^25, which scales subnormals into the normals.
const MIN_NORMAL: f32 = f32::MIN_POSITIVE;
const TWO_25: f32 = 33_554_432.0;
/// Below this magnitude `expm1(x)` and `log1p(x)` round to `x` (and keep its sign of zero).
const TINY: f32 = 1.0 / TWO_25;
/// Past this magnitude `asinh` and `acosh` are `ln(2|x|)` to f32's precision, and below
/// `2^-12` `asinh` and `atanh` are `x`.
const HUGE_ARC: f32 = 4096.0;
const TINY_ARC: f32 = 1.0 / HUGE_ARC;

/// `(e^r - 1 - r) / r²`'s Taylor coefficients, highest first: `1/8!` down to `1/2`.
const EXPM1_TAYLOR: [f32; 7] = [
    1.0 / 40320.0,
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];
/// `(2 atanh(s) - 2s) / (s·z)`, `z = s²`, highest first: `2/9` down to `2/3`.
const ATANH_SERIES: [f32; 4] = [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0];

impl KernelBuilder {
    /// `e^x - 1` (floats), as `libdevice.expm1`: accurate where `x` is near zero, where
    /// `exp(x) - 1` loses every digit.
    #[track_caller]
    pub fn expm1<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "expm1",
            x,
            loc,
            |x| {
                // Past 89, e^x - 1 overflows f32; below -64 it is -1.
                let xc = x.clamp(-64.0f32, 89.0f32);
                let (kf, p) = exp_reduced(xc);
                // 2^k·p + (2^k - 1): the first two exact, one rounding, while 2^k - 1 is exact.
                let two = pow2(kf.clamp(-24.0f32, 24.0f32));
                let near = two * p + (two - 1.0f32);
                let far = scale(p + 1.0f32, kf) - 1.0f32;
                let y = self.where_(kf.abs().le(24.0f32), near, far);
                self.where_(x.abs().lt(TINY) | x.isnan(), x, y)
            },
            super::f64_exp_log::expm1,
        )
    }

    /// `ln(1 + x)` (floats), as `libdevice.log1p`: accurate where `x` is near zero, where
    /// `log(1 + x)` loses the digits `1 + x` rounds away. NaN below -1, `-∞` at -1.
    #[track_caller]
    pub fn log1p<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64("log1p", x, loc, |x| self.log1p_f32(x), super::f64_exp_log::log1p)
    }

    /// `10^x` (floats), as `libdevice.exp10`.
    #[track_caller]
    pub fn exp10<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "exp10",
            x,
            loc,
            |x| {
                // 10^39 overflows f32; 10^-46 is below its smallest subnormal.
                let xc = x.clamp(-46.0f32, 39.0f32);
                let kf = (xc * LOG2_10).rint();
                // x·log2(10) - k, times ln 2: the reduced argument of e^r, |r| <= ln(2)/2.
                let r = ((xc - kf * LOG10_2_HI) - kf * LOG10_2_LO) * LN_10;
                scale(expm1_series(r) + 1.0f32, kf)
            },
            super::f64_exp_log::exp10,
        )
    }

    /// `log10 x` (floats), as `libdevice.log10`: NaN below 0, `-∞` at 0.
    #[track_caller]
    pub fn log10<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "log10",
            x,
            loc,
            |x| {
                let (kf, ln_m) = log_reduced(x);
                let y = kf * LOG10_2_HI + (kf * LOG10_2_LO + ln_m * LOG10_E);
                self.log_special_values(x, 0.0f32, y)
            },
            super::f64_exp_log::log10,
        )
    }

    /// Hyperbolic sine (floats), as `libdevice.sinh`.
    #[track_caller]
    pub fn sinh<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "sinh",
            x,
            loc,
            |x| {
                let a = x.abs();
                // Below 1, from t = e^a - 1: (e^a - e^-a) / 2 = (t + t / (t + 1)) / 2, with no
                // cancellation; from 1, e^a/2 - e^-a/2 loses under a bit.
                let t = self.expm1(a);
                let small = (t + t / (t + 1.0f32)) * 0.5f32;
                let h = half_exp(a);
                let large = h - 0.25f32 / h;
                copysign(self.where_(a.lt(1.0f32), small, large), x)
            },
            super::f64_exp_log::sinh,
        )
    }

    /// Hyperbolic cosine (floats), as `libdevice.cosh`.
    #[track_caller]
    pub fn cosh<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "cosh",
            x,
            loc,
            |x| {
                // e^a/2 + e^-a/2: two positive terms, e^a/2 scaled without overflowing first.
                let h = half_exp(x.abs());
                h + 0.25f32 / h
            },
            super::f64_exp_log::cosh,
        )
    }

    /// Inverse hyperbolic sine (floats), as `libdevice.asinh`.
    #[track_caller]
    pub fn asinh<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "asinh",
            x,
            loc,
            |x| {
                let a = x.abs();
                // ln(a + sqrt(a² + 1)) = log1p(a + a² / (1 + sqrt(1 + a²))), whose argument
                // keeps its digits near zero; past 2^12, ln(2a).
                let a2 = a * a;
                let mid = self.log1p_f32(a + a2 / (1.0f32 + (1.0f32 + a2).sqrt()));
                let large = ln_positive(a) + LN_2;
                let y = self.where_(a.gt(HUGE_ARC), large, mid);
                let y = self.where_(a.eq(f32::INFINITY), a, y);
                self.where_(a.lt(TINY_ARC), x, copysign(y, x))
            },
            super::f64_exp_log::asinh,
        )
    }

    /// Inverse hyperbolic cosine (floats), as `libdevice.acosh`: NaN below 1.
    #[track_caller]
    pub fn acosh<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "acosh",
            x,
            loc,
            |x| {
                // ln(x + sqrt(x² - 1)) = log1p(t + sqrt(2t + t²)), t = x - 1 (exact near 1);
                // past 2^12, ln(2x).
                let t = x - 1.0f32;
                let mid = self.log1p_f32(t + (t * (t + 2.0f32)).sqrt());
                let large = ln_positive(x) + LN_2;
                let y = self.where_(x.gt(HUGE_ARC), large, mid);
                let y = self.where_(x.eq(f32::INFINITY), x, y);
                self.where_(x.lt(1.0f32), f32::NAN, y)
            },
            super::f64_exp_log::acosh,
        )
    }

    /// Inverse hyperbolic tangent (floats), as `libdevice.atanh`: `±∞` at ±1, NaN past.
    #[track_caller]
    pub fn atanh<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.in_f32_or_f64(
            "atanh",
            x,
            loc,
            |x| {
                let a = x.abs();
                // ln((1 + a) / (1 - a)) / 2 = log1p(2a / (1 - a)) / 2; below 1/2 the argument as
                // 2a + 2a² / (1 - a), which keeps its digits near zero.
                let one_minus = 1.0f32 - a;
                let small = (a + a) + (a + a) * a / one_minus;
                let large = (a + a) / one_minus;
                let y = self.log1p_f32(self.where_(a.lt(0.5f32), small, large)) * 0.5f32;
                let y = self.where_(a.gt(1.0f32), f32::NAN, y);
                self.where_(a.lt(TINY_ARC), x, copysign(y, x))
            },
            super::f64_exp_log::atanh,
        )
    }

    /// `log1p` of f32 `x`.
    fn log1p_f32<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let u = x + 1.0f32;
        let (k, m) = exponent_and_mantissa(u);
        let kf = k.to(F32);
        // Where 1 + x is within [√½, √2), k = 0 and x itself is m - 1, exactly. Elsewhere
        // c / u is what u lost of 1 + x, relative: ln(1 + x) = ln(u) + c / u.
        let near = k.eq(0);
        let f = self.where_(near, x, m - 1.0f32);
        let lost = self.where_(x.gt(1.0f32), 1.0f32 - (u - x), x - (u - 1.0f32));
        let c = self.where_(near, 0.0f32, lost / u);
        let y = kf * LN2_HI + (log_one_plus(f) + (kf * LN2_LO + c));
        let y = self.log_special_values(x, -1.0f32, y);
        self.where_(x.abs().lt(TINY), x, y)
    }

    /// `y` where `x` (f32) is above `at`; `-∞` at `at`, NaN below it or for NaN, `+∞` at
    /// `+∞`: the special values of a logarithm whose pole is at `at`.
    fn log_special_values<'b>(&'b self, x: Value<'b>, at: f32, y: Value<'b>) -> Value<'b> {
        let y = self.where_(x.eq(f32::INFINITY), x, y);
        let y = self.where_(x.eq(at), f32::NEG_INFINITY, y);
        self.where_(x.lt(at) | x.isnan(), f32::NAN, y)
    }
}

/// `2^k` for integral f32 `kf` in `[-126, 127]`, from the bits.
fn pow2(kf: Value<'_>) -> Value<'_> {
    ((kf.to(I32) + 127) << 23).bitcast(F32)
}

/// `y · 2^k` for integral f32 `kf` in `[-252, 254]`: by two powers of two, each normal, so
/// that the product overflows or goes subnormal only as the result does (rounding once).
pub(super) fn scale<'b>(y: Value<'b>, kf: Value<'b>) -> Value<'b> {
    let first = (kf * 0.5f32).floor();
    y * pow2(first) * pow2(kf - first)
}

/// `(k, e^r - 1)` with `e^xc = 2^k e^r`, for f32 `xc` clamped to where `k` stays in
/// `[-252, 254]`.
pub(super) fn exp_reduced(xc: Value<'_>) -> (Value<'_>, Value<'_>) {
    let kf = (xc * LOG2_E).rint();
    // k·LN2_HI is exact and xc - k·LN2_HI too (the two are within a factor of two).
    let r = (xc - kf * LN2_HI) - kf * LN2_LO;
    (kf, expm1_series(r))
}

/// `e^r - 1` for `|r| <= ln(2)/2`: `r + r²·(1/2 + r/6 + ... + r^6/8!)`.
fn expm1_series(r: Value<'_>) -> Value<'_> {
    r + r * r * horner(r, &EXPM1_TAYLOR)
}

/// `e^a / 2` for f32 `a >= 0` (or NaN): overflows only where it does.
fn half_exp(a: Value<'_>) -> Value<'_> {
    let (kf, p) = exp_reduced(a.clamp(0.0f32, 90.0f32));
    scale(p + 1.0f32, kf - 1.0f32)
}

/// `(k, m)` with `u = 2^k m`, `m` in `[√½, √2)`, for positive normal f32 `u`: `k` (i32) and
/// `m` (f32) from the bits, the exponent taken one up where the mantissa is past `√2`.
fn exponent_and_mantissa(u: Value<'_>) -> (Value<'_>, Value<'_>) {
    // Adding 1 - √2's mantissa carries into the exponent exactly when m >= √2.
    const SQRT_HALF_BITS: i32 = 0x3F35_04F3;
    let bits = u.bitcast(I32) + (0x3F80_0000 - SQRT_HALF_BITS);
    let k = (bits >> 23) - 127;
    let m = ((bits & 0x007F_FFFF) + SQRT_HALF_BITS).bitcast(F32);
    (k, m)
}

/// `ln(1 + f)` for `1 + f` in `[√½, √2)`: `2 atanh(s)`, `s = f / (2 + f)`, as
/// `f - s·(f - R)` (using `2s = f - s·f`), which keeps `f` exact in the sum.
fn log_one_plus(f: Value<'_>) -> Value<'_> {
    let s = f / (f + 2.0f32);
    let z = s * s;
    let r = z * horner(z, &ATANH_SERIES);
    f - s * (f - r)
}

/// `(k, ln m)` with `x = 2^k m` (k as f32), for f32 `x > 0` and finite, subnormals
/// included (scaled by 2^25 first).
fn log_reduced(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    let k = x.builder;
    let subnormal = x.lt(MIN_NORMAL);
    let xs = k.where_(subnormal, x * TWO_25, x);
    let (e, m) = exponent_and_mantissa(xs);
    let kf = e.to(F32) - k.where_(subnormal, 25.0f32, 0.0f32);
    (kf, log_one_plus(m - 1.0f32))
}

/// `ln x` for finite f32 `x > 0`, within an ulp or two (the callers' large arguments).
pub(super) fn ln_positive(x: Value<'_>) -> Value<'_> {
    let (kf, ln_m) = log_reduced(x);
    kf * LN2_HI + (ln_m + kf * LN2_LO)
}

impl<'b> Value<'b> {
    /// `e^self - 1`; see [`KernelBuilder::expm1`].
    #[track_caller]
    pub fn expm1(self) -> Value<'b> {
        self.builder.expm1(self)
    }
    /// `ln(1 + self)`; see [`KernelBuilder::log1p`].
    #[track_caller]
    pub fn log1p(self) -> Value<'b> {
        self.builder.log1p(self)
    }
    /// `10^self`; see [`KernelBuilder::exp10`].
    #[track_caller]
    pub fn exp10(self) -> Value<'b> {
        self.builder.exp10(self)
    }
    /// `log10 self`; see [`KernelBuilder::log10`].
    #[track_caller]
    pub fn log10(self) -> Value<'b> {
        self.builder.log10(self)
    }
    /// Hyperbolic sine; see [`KernelBuilder::sinh`].
    #[track_caller]
    pub fn sinh(self) -> Value<'b> {
        self.builder.sinh(self)
    }
    /// Hyperbolic cosine; see [`KernelBuilder::cosh`].
    #[track_caller]
    pub fn cosh(self) -> Value<'b> {
        self.builder.cosh(self)
    }
    /// Inverse hyperbolic sine; see [`KernelBuilder::asinh`].
    #[track_caller]
    pub fn asinh(self) -> Value<'b> {
        self.builder.asinh(self)
    }
    /// Inverse hyperbolic cosine; see [`KernelBuilder::acosh`].
    #[track_caller]
    pub fn acosh(self) -> Value<'b> {
        self.builder.acosh(self)
    }
    /// Inverse hyperbolic tangent; see [`KernelBuilder::atanh`].
    #[track_caller]
    pub fn atanh(self) -> Value<'b> {
        self.builder.atanh(self)
    }
}
