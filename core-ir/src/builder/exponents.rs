//! libdevice's functions of a float's exponent: `ldexp`, `frexp`, `ilogb` and `logb`, for
//! f16, bf16 and f32 (computed in f32, where each of their values is exact), built from
//! the bits and exact products by powers of two, so that every backend computes them alike
//! and exactly. Subnormals are normalized in integers (by `clz`), not by a product a device
//! that flushes subnormals would lose. f64 is read in its own format (`Format`).

use super::in_f32::computed_in_f32;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, F64, I32, I64};
use crate::types::{Elem, ScalarType, Shape};

/// A float format as these functions read it: its type, the integer type of its bits, its
/// significand's width (without the implicit bit), its exponent field's largest value and
/// bias, the largest step up that leaves `2^step` finite, the step down that leaves a
/// significand's bits above the subnormals (`2^-(bias - 1) · 2^(mantissa + 1)`, so that only
/// the last product rounds), and how far past `n` every finite value over- or underflows.
struct Format {
    float: ScalarType,
    bits: ScalarType,
    mantissa: i64,
    field: i64,
    bias: i64,
    step_down: i64,
    reach: i64,
}

const F32_FORMAT: Format = Format {
    float: F32,
    bits: I32,
    mantissa: 23,
    field: 0xFF,
    bias: 127,
    step_down: 102,
    reach: 400,
};
const F64_FORMAT: Format = Format {
    float: F64,
    bits: I64,
    mantissa: 52,
    field: 0x7FF,
    bias: 1023,
    step_down: 969,
    reach: 2200,
};

impl Format {
    /// f64's for f64, f32's for the types computed in f32.
    fn of(t: ScalarType) -> &'static Format {
        if t == F64 {
            &F64_FORMAT
        } else {
            &F32_FORMAT
        }
    }

    /// The sign bit, as a value of the bits' type.
    fn sign_bit(&self) -> i64 {
        if self.bits == I32 {
            i32::MIN as i64
        } else {
            i64::MIN
        }
    }

    fn significand_mask(&self) -> i64 {
        (1i64 << self.mantissa) - 1
    }

    /// `2^e` for integer `e` within the normals, from the bits.
    fn power_of_two<'b>(&self, e: Value<'b>) -> Value<'b> {
        ((e.to(self.bits) + self.bias) << self.mantissa).bitcast(self.float)
    }
}

/// A float's exponent (i32), its significand scaled to `[1, 2)` as bits without the
/// exponent, and whether it is zero, infinite or NaN: what `frexp`, `ilogb` and `logb` read.
struct Parts<'b> {
    exponent: Value<'b>,
    significand: Value<'b>,
    zero: Value<'b>,
    infinite: Value<'b>,
    nan: Value<'b>,
}

impl KernelBuilder {
    /// `x · 2^n` (`x` a float, `n` an integer; broadcast together), exactly but for the one
    /// rounding of a subnormal result, as `libdevice.ldexp`: zeros, infinities and NaN as
    /// given, `±∞` past the largest float and `±0` below the smallest.
    #[track_caller]
    pub fn ldexp<'b>(&'b self, x: Value<'b>, n: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let (x, n) = (self.adopt("ldexp", x, loc), self.adopt("ldexp", n, loc));
        if self.is_poisoned(x.id) || self.is_poisoned(n.id) {
            return self.poison(x.ty());
        }
        if !takes(x.dtype()) || !n.dtype().is_some_and(|t| t.is_int()) {
            let message = format!(
                "takes a f16, bf16, f32 or f64 and an integer, got {} and {}",
                x.ty(),
                n.ty()
            );
            return self.fail("ldexp", loc, message, x.ty());
        }
        let Some(shape) = Shape::broadcast(x.ty().shape, n.ty().shape) else {
            let message = format!(
                "shapes {} and {} cannot be broadcast together",
                x.ty().shape,
                n.ty().shape
            );
            return self.fail("ldexp", loc, message, x.ty());
        };
        let t = x.dtype().expect("a float");
        let f = Format::of(t);
        let x = self.broadcast_to("ldexp", x.to(f.float), shape, loc);
        // Past ±reach every finite value over- or underflows: n limited to it, in its own
        // type (8- and 16-bit ones widened first, so that the reach is one of their values),
        // is then an i32. (The steps compare it as an i32 for f64 too: lavapipe compared an
        // i32 widened to i64 with a constant wrongly, `conformance`'s `cmp(widened)` row.)
        let n_type = n.dtype().expect("an integer");
        let n = if n_type.bits() <= 16 { n.to(I32) } else { n };
        let n = if n_type.is_unsigned_int() {
            self.minimum(n, f.reach)
        } else {
            self.clamp(n, -f.reach, f.reach)
        };
        let n = self.broadcast_to("ldexp", n.to(I32), shape, loc);
        // Two steps of at most the bias up or `step_down` down (each exact), then one
        // product by 2^n with n within the normals, the only one that rounds (musl's
        // `scalbn`).
        let (top, bottom) = (f.bias, 1 - f.bias);
        let (mut y, mut n) = (x, n);
        for _ in 0..2 {
            let (up, down) = (n.gt(top), n.lt(bottom));
            let step = self.where_(up, top, self.where_(down, -f.step_down, self.zeros_like(n)));
            y = y * f.power_of_two(step);
            n = n - step;
        }
        let n = self.clamp(n, bottom, top);
        (y * f.power_of_two(n)).to(t)
    }

    /// `x`'s significand in `[1/2, 1)` with `x`'s sign and its exponent `e` (an i32), so
    /// that `x = m · 2^e`, as `libdevice.frexp` (floats): `(x, 0)` for zeros, infinities
    /// and NaN; subnormals as their normalized values.
    #[track_caller]
    pub fn frexp<'b>(&'b self, x: Value<'b>) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let Some((x, t, f)) = self.exponent_operand("frexp", x, loc) else {
            let int = self.poison(x.ty().with_elem(Elem::Scalar(I32)));
            return (self.poison(x.ty()), int);
        };
        let p = self.parts(x, f);
        let special = p.zero | p.infinite | p.nan;
        let sign = x.bitcast(f.bits) & f.sign_bit();
        let bits = sign | p.significand | ((f.bias - 1) << f.mantissa);
        let m = self.where_(special, x, bits.bitcast(f.float));
        let e = self.where_(special, 0, p.exponent + 1);
        (m.to(t), e)
    }

    /// `x`'s exponent, `⌊log2 |x|⌋` as an i32, as `libdevice.ilogb` (floats): `i32::MIN`
    /// for zero and NaN, `i32::MAX` for infinities (CUDA's and C's `FP_ILOGB0`,
    /// `FP_ILOGBNAN` on common systems).
    #[track_caller]
    pub fn ilogb<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, _, f)) = self.exponent_operand("ilogb", x, loc) else {
            return self.poison(x.ty().with_elem(Elem::Scalar(I32)));
        };
        let p = self.parts(x, f);
        let e = self.where_(p.infinite, i32::MAX, p.exponent);
        self.where_(p.zero | p.nan, i32::MIN, e)
    }

    /// `x`'s exponent, `⌊log2 |x|⌋` as a float of `x`'s type, as `libdevice.logb`: `-∞` for
    /// zero, `+∞` for infinities, NaN for NaN.
    #[track_caller]
    pub fn logb<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, t, f)) = self.exponent_operand("logb", x, loc) else {
            return self.poison(x.ty());
        };
        let p = self.parts(x, f);
        let infinity = self.full(&[], f64::INFINITY, f.float);
        let e = self.where_(p.infinite, infinity, p.exponent.to(f.float));
        let e = self.where_(p.zero, -infinity, e);
        self.where_(p.nan, self.full(&[], f64::NAN, f.float), e).to(t)
    }

    /// `x` (f16, bf16 or f32 as f32; f64) with its type and format; `None` after an error
    /// naming `op` for other types (unless `x` already failed).
    fn exponent_operand<'b>(
        &'b self,
        op: &str,
        x: Value<'b>,
        loc: SourceLoc,
    ) -> Option<(Value<'b>, ScalarType, &'static Format)> {
        let x = self.adopt(op, x, loc);
        if self.is_poisoned(x.id) {
            return None;
        }
        match x.dtype() {
            Some(t) if takes(Some(t)) => {
                let f = Format::of(t);
                Some((x.to(f.float), t, f))
            }
            _ => {
                let message = format!("takes f16, bf16, f32 or f64, got {}", x.ty());
                let _ = self.fail(op, loc, message, x.ty());
                None
            }
        }
    }

    /// The parts of `x` (of format `f`) that `frexp`, `ilogb` and `logb` read.
    fn parts<'b>(&'b self, x: Value<'b>, f: &Format) -> Parts<'b> {
        let bits = x.bitcast(f.bits);
        let field = (bits >> f.mantissa) & f.field;
        let fraction = bits & f.significand_mask();
        // A subnormal's leading bit, `clz(fraction) - (width - 1 - mantissa)` places below
        // the implicit one's.
        let width = f.bits.bits() as i64;
        let below = fraction.clz().to(f.bits) - (width - 1 - f.mantissa);
        let subnormal = field.eq(0);
        let exponent = self.where_(subnormal, -below + (1 - f.bias), field - f.bias);
        let significand = self.where_(subnormal, (fraction << below) & f.significand_mask(), fraction);
        Parts {
            exponent: exponent.to(I32),
            significand,
            zero: subnormal & fraction.eq(0),
            infinite: field.eq(f.field) & fraction.eq(0),
            nan: field.eq(f.field) & fraction.ne(0),
        }
    }
}

/// Whether these functions take elements of type `t`: f16, bf16 and f32 (computed in f32)
/// and f64.
fn takes(t: Option<ScalarType>) -> bool {
    computed_in_f32(t) || t == Some(F64)
}

impl<'b> Value<'b> {
    /// `self · 2^n`; see [`KernelBuilder::ldexp`].
    #[track_caller]
    pub fn ldexp(self, n: Value<'b>) -> Value<'b> {
        self.builder.ldexp(self, n)
    }

    /// The significand and exponent of `self`; see [`KernelBuilder::frexp`].
    #[track_caller]
    pub fn frexp(self) -> (Value<'b>, Value<'b>) {
        self.builder.frexp(self)
    }

    /// The exponent of `self` as an i32; see [`KernelBuilder::ilogb`].
    #[track_caller]
    pub fn ilogb(self) -> Value<'b> {
        self.builder.ilogb(self)
    }

    /// The exponent of `self` as a float; see [`KernelBuilder::logb`].
    #[track_caller]
    pub fn logb(self) -> Value<'b> {
        self.builder.logb(self)
    }
}
