//! The classification and sign functions of libdevice (`isnan`, `isinf`, `isfinite`,
//! `signbit`, `copysign`), its `nextafter`, `fdim`, `remainder`, `fmax`, `fmin` and `modf`,
//! and C's rounding half away from zero (`round`), for every float type. Classification
//! reads the bits, not comparisons: `x != x` is what a driver's compiler may fold away
//! under relaxed float rules, a mask of the exponent bits is not.

use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::{Elem, ScalarType, Type};

/// The exponent bits of an f32 (all ones: an infinity or a NaN).
const F32_EXPONENT: i32 = 0x7F80_0000;
/// The exponent bits of an f64.
const F64_EXPONENT: i64 = 0x7FF0_0000_0000_0000;

impl KernelBuilder {
    /// Whether `x` is a NaN (floats), as `libdevice.isnan`: a block of `i1`.
    #[track_caller]
    pub fn isnan<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        self.classify("isnan", x, SourceLoc::caller(), |magnitude, exponent| {
            magnitude.gt(exponent)
        })
    }

    /// Whether `x` is `+∞` or `-∞` (floats), as `libdevice.isinf`: a block of `i1`.
    #[track_caller]
    pub fn isinf<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        self.classify("isinf", x, SourceLoc::caller(), |magnitude, exponent| {
            magnitude.eq(exponent)
        })
    }

    /// Whether `x` is neither infinite nor NaN (floats), as `libdevice.isfinited`: a block
    /// of `i1`.
    #[track_caller]
    pub fn isfinite<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        self.classify("isfinite", x, SourceLoc::caller(), |magnitude, exponent| {
            magnitude.lt(exponent)
        })
    }

    /// Whether the sign bit of `x` is set (floats), as `libdevice.signbit`: true for `-0.0`
    /// and for NaNs with the bit set, where `x < 0` is false.
    #[track_caller]
    pub fn signbit<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, bits_type)) = self.float_bits_operand("signbit", x, loc) else {
            return self.poison(bool_like(x.ty()));
        };
        x.bitcast(bits_type).lt(0)
    }

    /// `x`'s magnitude with `y`'s sign, bit for bit (floats of one type), as
    /// `libdevice.copysign`: `copysign(1.0, -0.0) = -1.0`, and NaNs keep their payload.
    /// `x` and `y` broadcast together.
    #[track_caller]
    pub fn copysign<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, t)) = self.same_floats("copysign", (x, y), loc) else {
            return self.poison(x.ty());
        };
        let (wide, bits) = wide_float(t);
        let (xb, yb) = (x.to(wide).bitcast(bits), y.to(wide).bitcast(bits));
        let sign = if bits == ScalarType::I64 {
            (yb & i64::MIN) | (xb & i64::MAX)
        } else {
            (yb & i32::MIN) | (xb & i32::MAX)
        };
        sign.bitcast(wide).to(t)
    }

    /// `x` rounded to the nearest integral value, halfway cases away from zero (floats,
    /// keeping the type), as `libdevice.round` and C's `round`: `round(2.5) = 3`,
    /// `round(-2.5) = -3`, `round(-0.3) = -0.0`. [`Value::rint`] rounds halfway cases to
    /// even, as `libdevice.rint`.
    #[track_caller]
    pub fn round<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("round", x, loc);
        if self.is_poisoned(x.id) {
            return self.poison(x.ty());
        }
        if !x.dtype().is_some_and(|t| t.is_float()) {
            let message = format!("takes floats, got {}", x.ty());
            return self.fail("round", loc, message, x.ty());
        }
        // x - trunc(x) is exact in every float type: the fraction's bits.
        let t = x.trunc();
        let away = self.where_(x.lt(0.0), -1.0, 1.0);
        self.where_((x - t).abs().ge(0.5), t + away, t)
    }

    /// The float of `x`'s type next after `x` toward `y` (floats of one type, broadcast
    /// together), as `libdevice.nextafter`: `y` where they are equal, NaN where either is,
    /// the smallest subnormal with `y`'s sign from a zero.
    #[track_caller]
    pub fn nextafter<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, t)) = self.same_floats("nextafter", (x, y), loc) else {
            return self.poison(x.ty());
        };
        // The bits of x's own width (an f16's 16), read as a sign and a magnitude: one
        // more is the next float away from zero, one less the next toward it. The order
        // and the zeros are the bits' too (a sign flipped into two's complement, so that
        // ±0 meet at 0), not float comparisons, which a device that flushes subnormals
        // would take as zeros.
        let (bits_type, min) = match t.bits() {
            16 => (ScalarType::I16, i16::MIN as i64),
            32 => (ScalarType::I32, i32::MIN as i64),
            _ => (ScalarType::I64, i64::MIN),
        };
        let (b, c) = (x.bitcast(bits_type), y.bitcast(bits_type));
        let key = |v: Value<'b>| self.where_(v.ge(0), v, -v + min);
        let (kx, ky) = (key(b), key(c));
        let away = ky.gt(kx).eq(kx.gt(0));
        let next = self.where_(away, b + 1, b - 1);
        let smallest = (c & min) | 1;
        let next = self.where_(kx.eq(0), smallest, next).bitcast(t);
        let next = self.where_(kx.eq(ky), y, next);
        self.where_(x.isnan() | y.isnan(), x + y, next)
    }

    /// `x - y` where `x > y`, `+0` otherwise (floats of one type, broadcast together), as
    /// `libdevice.fdim`: NaN where either is NaN.
    #[track_caller]
    pub fn fdim<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, _)) = self.same_floats("fdim", (x, y), loc) else {
            return self.poison(x.ty());
        };
        let d = self.where_(x.gt(y), x - y, 0.0);
        self.where_(x.isnan() | y.isnan(), x + y, d)
    }

    /// IEEE 754's remainder of `x` by `y` (floats of one type, broadcast together), as
    /// `libdevice.remainder` and C's `remainder`: `x - n·y` with `n` the integer nearest
    /// `x / y`, halfway cases to even (`remainder(5, 2) = 1`, `remainder(7, 2) = -1`), so
    /// in `[-|y|/2, |y|/2]`; exact, with `x`'s sign at zero; NaN where `x` is infinite or
    /// `y` zero or either NaN, `x` where `y` is infinite. `%` is C's `fmod`, whose quotient
    /// is truncated.
    #[track_caller]
    pub fn remainder<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, _)) = self.same_floats("remainder", (x, y), loc) else {
            return self.poison(x.ty());
        };
        let ay = y.abs();
        // What an even quotient leaves, in [0, 2|y|), by `%`, which is exact. 2|y| overflows
        // only where |x| < 2|y| already, and `%` by ∞ gives the dividend.
        let r = x.abs() % (ay + ay);
        // Past |y| the quotient is odd and one more |y| comes off, exactly (|y| <= r < 2|y|).
        let odd = r.ge(ay);
        let r = self.where_(odd, r - ay, r);
        // Past half of |y|, or at half after an odd quotient, the multiple above is the
        // nearer (r - |y| exact again). `r + r` overflows only where r > |y| / 2 anyway.
        let twice = r + r;
        let up = twice.gt(ay) | (twice.eq(ay) & odd);
        let r = self.where_(up, r - ay, r);
        self.where_(x.signbit(), -r, r)
    }

    /// C's `fmax` (floats of one type, broadcast together), as `libdevice.fmax`: the larger,
    /// and where one is NaN the other (NaN only where both are), `+0` above `-0`.
    /// [`KernelBuilder::maximum`] propagates NaNs instead (Triton's `propagate_nan=ALL`);
    /// this is `tl.maximum`'s default, `propagate_nan=NONE`, made definite.
    #[track_caller]
    pub fn fmax<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, _)) = self.same_floats("fmax", (x, y), loc) else {
            return self.poison(x.ty());
        };
        let m = self.maximum(x, y);
        let m = self.where_(x.isnan(), y, m);
        self.where_(y.isnan(), x, m)
    }

    /// C's `fmin` (floats of one type, broadcast together), as `libdevice.fmin`: the
    /// smaller, and where one is NaN the other; see [`KernelBuilder::fmax`].
    #[track_caller]
    pub fn fmin<'b>(&'b self, x: Value<'b>, y: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, y, _)) = self.same_floats("fmin", (x, y), loc) else {
            return self.poison(x.ty());
        };
        let m = self.minimum(x, y);
        let m = self.where_(x.isnan(), y, m);
        self.where_(y.isnan(), x, m)
    }

    /// C's `modf` (floats), as `libdevice.modf`: `(fraction, integral)`, both with `x`'s
    /// sign and exact: `x.trunc()` and the rest (`modf(-3.5) = (-0.5, -3.0)`,
    /// `modf(-3.0) = (-0.0, -3.0)`, `modf(±∞) = (±0, ±∞)`, NaN in both for NaN).
    #[track_caller]
    pub fn modf<'b>(&'b self, x: Value<'b>) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let x = self.adopt("modf", x, loc);
        if self.is_poisoned(x.id) {
            return (self.poison(x.ty()), self.poison(x.ty()));
        }
        if !x.dtype().is_some_and(|t| t.is_float()) {
            let message = format!("takes floats, got {}", x.ty());
            let v = self.fail("modf", loc, message, x.ty());
            return (v, v);
        }
        let integral = x.trunc();
        // x - trunc(x) is exact; infinities leave zero, NaN stays.
        let fraction = self.where_(x.isinf(), 0.0, x - integral);
        (fraction.copysign(x), integral)
    }

    /// `x` and `y` broadcast to one shape, with their float type, or `None` after an error
    /// naming `op` where they are not floats of one type or do not broadcast.
    fn same_floats<'b>(
        &'b self,
        op: &str,
        pair: (Value<'b>, Value<'b>),
        loc: SourceLoc,
    ) -> Option<(Value<'b>, Value<'b>, ScalarType)> {
        self.same_typed(op, pair, loc, ScalarType::is_float, "two floats of one type")
    }

    /// `test(|bits of x|, exponent bits)` on `x`'s bits as an integer (f16 and bf16 read
    /// as the f32 they convert to exactly), or an error naming `op`.
    fn classify<'b>(
        &'b self,
        op: &str,
        x: Value<'b>,
        loc: SourceLoc,
        test: impl FnOnce(Value<'b>, Value<'b>) -> Value<'b>,
    ) -> Value<'b> {
        let Some((x, bits_type)) = self.float_bits_operand(op, x, loc) else {
            return self.poison(bool_like(x.ty()));
        };
        let bits = x.bitcast(bits_type);
        if bits_type == ScalarType::I64 {
            test(bits & i64::MAX, self.full(&[], F64_EXPONENT, ScalarType::I64))
        } else {
            test(bits & i32::MAX, self.full(&[], F32_EXPONENT, ScalarType::I32))
        }
    }

    /// `x` as an f32 or f64 whose bits read as the returned integer type, or `None` (with
    /// an error naming `op`, unless `x` already failed) for non-floats.
    fn float_bits_operand<'b>(&'b self, op: &str, x: Value<'b>, loc: SourceLoc) -> Option<(Value<'b>, ScalarType)> {
        let x = self.adopt(op, x, loc);
        if self.is_poisoned(x.id) {
            return None;
        }
        match x.dtype() {
            Some(t) if t.is_float() => {
                let (wide, bits) = wide_float(t);
                Some((x.to(wide), bits))
            }
            _ => {
                let message = format!("takes floats, got {}", x.ty());
                self.fail(op, loc, message, bool_like(x.ty()));
                None
            }
        }
    }
}

/// The float type that `t` converts to exactly for reading bits (f64 stays, the others go
/// to f32), and the integer type of its bits.
fn wide_float(t: ScalarType) -> (ScalarType, ScalarType) {
    if t == ScalarType::F64 {
        (ScalarType::F64, ScalarType::I64)
    } else {
        (ScalarType::F32, ScalarType::I32)
    }
}

/// `ty` with `i1` elements: the type of a test of it.
fn bool_like(ty: Type) -> Type {
    ty.with_elem(Elem::Scalar(ScalarType::Bool))
}

impl<'b> Value<'b> {
    /// The next float after `self` toward `y`; see [`KernelBuilder::nextafter`].
    #[track_caller]
    pub fn nextafter(self, y: Value<'b>) -> Value<'b> {
        self.builder.nextafter(self, y)
    }
    /// C's `fmax` of `self` and `y`; see [`KernelBuilder::fmax`].
    #[track_caller]
    pub fn fmax(self, y: Value<'b>) -> Value<'b> {
        self.builder.fmax(self, y)
    }

    /// C's `fmin` of `self` and `y`; see [`KernelBuilder::fmin`].
    #[track_caller]
    pub fn fmin(self, y: Value<'b>) -> Value<'b> {
        self.builder.fmin(self, y)
    }

    /// `(fraction, integral)` of `self`; see [`KernelBuilder::modf`].
    #[track_caller]
    pub fn modf(self) -> (Value<'b>, Value<'b>) {
        self.builder.modf(self)
    }

    /// IEEE 754's remainder of `self` by `y`; see [`KernelBuilder::remainder`].
    #[track_caller]
    pub fn remainder(self, y: Value<'b>) -> Value<'b> {
        self.builder.remainder(self, y)
    }

    /// The positive difference of `self` and `y`; see [`KernelBuilder::fdim`].
    #[track_caller]
    pub fn fdim(self, y: Value<'b>) -> Value<'b> {
        self.builder.fdim(self, y)
    }
    /// Whether `self` is a NaN; see [`KernelBuilder::isnan`].
    #[track_caller]
    pub fn isnan(self) -> Value<'b> {
        self.builder.isnan(self)
    }
    /// Whether `self` is infinite; see [`KernelBuilder::isinf`].
    #[track_caller]
    pub fn isinf(self) -> Value<'b> {
        self.builder.isinf(self)
    }
    /// Whether `self` is finite; see [`KernelBuilder::isfinite`].
    #[track_caller]
    pub fn isfinite(self) -> Value<'b> {
        self.builder.isfinite(self)
    }
    /// Whether the sign bit of `self` is set; see [`KernelBuilder::signbit`].
    #[track_caller]
    pub fn signbit(self) -> Value<'b> {
        self.builder.signbit(self)
    }
    /// `self`'s magnitude with `sign`'s sign; see [`KernelBuilder::copysign`].
    #[track_caller]
    pub fn copysign(self, sign: Value<'b>) -> Value<'b> {
        self.builder.copysign(self, sign)
    }
    /// Rounds halfway cases away from zero; see [`KernelBuilder::round`].
    #[track_caller]
    pub fn round(self) -> Value<'b> {
        self.builder.round(self)
    }
}
