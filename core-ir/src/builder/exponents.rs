//! libdevice's functions of a float's exponent: `ldexp`, `frexp`, `ilogb` and `logb`, for
//! f16, bf16 and f32 (computed in f32, where each of their values is exact), built from
//! the bits and exact products by powers of two, so that every backend computes them alike
//! and exactly. Subnormals are normalized in integers (by `clz`), not by a product a device
//! that flushes subnormals would lose. f64 is refused.

use super::in_f32::computed_in_f32;
use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};
use crate::types::{Elem, ScalarType, Shape};

/// The exponent bias and the f32 bits of 2^127 and of 2^-102 (2^-126 · 2^24: a step down
/// that leaves 24 bits above the subnormals, so that only the last product rounds).
const BIAS: i32 = 127;
const TWO_127: i32 = 0x7F00_0000;
const TWO_MINUS_102: i32 = 25 << 23;
/// The exponent and significand fields of an f32.
const EXPONENT_FIELD: i32 = 0xFF;
const SIGNIFICAND: i32 = 0x007F_FFFF;

/// An f32's exponent, its significand scaled to `[1, 2)` as bits without the exponent, and
/// whether it is zero, infinite or NaN (`special`): what `frexp`, `ilogb` and `logb` read.
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
        if !computed_in_f32(x.dtype()) || !n.dtype().is_some_and(|t| t.is_int()) {
            let message = format!("takes a f16, bf16 or f32 and an integer, got {} and {}", x.ty(), n.ty());
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
        let x = self.broadcast_to("ldexp", x.to(F32), shape, loc);
        // Past ±400 every finite f32 over- or underflows: n limited to it, in its own type
        // (8- and 16-bit ones widened first, so that 400 is one of their values), is an i32.
        let n_type = n.dtype().expect("an integer");
        let n = if n_type.bits() <= 16 { n.to(I32) } else { n };
        let n = if n_type.is_unsigned_int() {
            self.minimum(n, 400)
        } else {
            self.clamp(n, -400, 400)
        };
        let n = self.broadcast_to("ldexp", n.to(I32), shape, loc);
        // Two steps of at most 127 up or 102 down (each exact), then one product by 2^n
        // with n in [-126, 127], the only one that rounds (musl's `scalbnf`).
        let (mut y, mut n) = (x, n);
        for _ in 0..2 {
            let (up, down) = (n.gt(127), n.lt(-126));
            let step = self.where_(up, 127, self.where_(down, -102, 0));
            let factor = self.where_(up, TWO_127, self.where_(down, TWO_MINUS_102, BIAS << 23));
            y = y * factor.bitcast(F32);
            n = n - step;
        }
        let n = self.clamp(n, -126, 127);
        let y = y * ((n + BIAS) << 23).bitcast(F32);
        y.to(t)
    }

    /// `x`'s significand in `[1/2, 1)` with `x`'s sign and its exponent `e` (an i32), so
    /// that `x = m · 2^e`, as `libdevice.frexp` (floats): `(x, 0)` for zeros, infinities
    /// and NaN; subnormals as their normalized values.
    #[track_caller]
    pub fn frexp<'b>(&'b self, x: Value<'b>) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let Some((x, t)) = self.exponent_operand("frexp", x, loc) else {
            let int = self.poison(x.ty().with_elem(Elem::Scalar(I32)));
            return (self.poison(x.ty()), int);
        };
        let p = self.parts(x);
        let special = p.zero | p.infinite | p.nan;
        let bits = (x.bitcast(I32) & i32::MIN) | p.significand | ((BIAS - 1) << 23);
        let m = self.where_(special, x, bits.bitcast(F32));
        let e = self.where_(special, 0, p.exponent + 1);
        (m.to(t), e)
    }

    /// `x`'s exponent, `⌊log2 |x|⌋` as an i32, as `libdevice.ilogb` (floats): `i32::MIN`
    /// for zero and NaN, `i32::MAX` for infinities (CUDA's and C's `FP_ILOGB0`,
    /// `FP_ILOGBNAN` on common systems).
    #[track_caller]
    pub fn ilogb<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, _)) = self.exponent_operand("ilogb", x, loc) else {
            return self.poison(x.ty().with_elem(Elem::Scalar(I32)));
        };
        let p = self.parts(x);
        let e = self.where_(p.infinite, i32::MAX, p.exponent);
        self.where_(p.zero | p.nan, i32::MIN, e)
    }

    /// `x`'s exponent, `⌊log2 |x|⌋` as a float of `x`'s type, as `libdevice.logb`: `-∞` for
    /// zero, `+∞` for infinities, NaN for NaN.
    #[track_caller]
    pub fn logb<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some((x, t)) = self.exponent_operand("logb", x, loc) else {
            return self.poison(x.ty());
        };
        let p = self.parts(x);
        let e = self.where_(p.infinite, f32::INFINITY, p.exponent.to(F32));
        let e = self.where_(p.zero, f32::NEG_INFINITY, e);
        self.where_(p.nan, f32::NAN, e).to(t)
    }

    /// `x` (f16, bf16 or f32) as f32, with its type; `None` after an error naming `op` for
    /// other types (unless `x` already failed).
    fn exponent_operand<'b>(&'b self, op: &str, x: Value<'b>, loc: SourceLoc) -> Option<(Value<'b>, ScalarType)> {
        let x = self.adopt(op, x, loc);
        if self.is_poisoned(x.id) {
            return None;
        }
        match x.dtype() {
            Some(t) if computed_in_f32(Some(t)) => Some((x.to(F32), t)),
            _ => {
                let message = format!("takes f16, bf16 or f32, got {}", x.ty());
                let _ = self.fail(op, loc, message, x.ty());
                None
            }
        }
    }

    /// The parts of f32 `x` that `frexp`, `ilogb` and `logb` read.
    fn parts<'b>(&'b self, x: Value<'b>) -> Parts<'b> {
        let bits = x.bitcast(I32);
        let field = (bits >> 23) & EXPONENT_FIELD;
        let fraction = bits & SIGNIFICAND;
        // A subnormal's leading bit, `clz(fraction) - 8` places below the implicit one's.
        let below = fraction.clz() - 8;
        let subnormal = field.eq(0);
        let exponent = self.where_(subnormal, 1 - BIAS - below, field - BIAS);
        let significand = self.where_(subnormal, (fraction << below) & SIGNIFICAND, fraction);
        Parts {
            exponent,
            significand,
            zero: subnormal & fraction.eq(0),
            infinite: field.eq(EXPONENT_FIELD) & fraction.eq(0),
            nan: field.eq(EXPONENT_FIELD) & fraction.ne(0),
        }
    }
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
