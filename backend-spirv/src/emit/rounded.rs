//! Float arithmetic rounded in a chosen direction (`Expr::Rounded`: libdevice's `add_rd`,
//! `div_ru`, `fma_rz`, ...). SPIR-V under Vulkan has no rounding modes for arithmetic, so
//! an f32 result is computed in f64, exactly or nearly, and rounded by exact comparisons:
//!
//! * a sum, difference, product or fused multiply-add of f32 values is exact in f64 as a
//!   pair `s + e` (the product of two 24-bit significands fits f64's 53 bits; a two-sum
//!   gives the sum's rounding error), so `X - y` has the sign of `(s - y) + e` for every f32
//!   `y` near `X` (`s - y` is exact there);
//! * a quotient `a / b` is `X - y` of the sign of `(a - y·b)·sign(b)`, and a square root of
//!   `a - y²`: `y·b` and `y²` are exact in f64 for f32 `y` and for the midpoints between
//!   two f32s, and so is the difference from `a`.
//!
//! The f64 result, converted to f32, is within an f32 place of the exact value; one
//! comparison brackets the exact value between two neighbouring f32s (the bits stepped by
//! one), and a comparison with their midpoint decides to-nearest (ties to the even one).
//! Every f64 operation here must round once: rutile marks f64 arithmetic `NoContraction`
//! (`exact_f64`), which the target needs on for these ops (they are refused without it),
//! with `shaderFloat64`. The
//! conversion of the f64 result to f32 is taken to be correctly rounded (as Vulkan's
//! precision rules require), so that it lands within one place.
//!
//! f64 results have nothing wider to be computed in. A sum or difference of f64 values,
//! and a 64-bit integer, is exactly an f64 pair `s + e` (a two-sum), and the directed
//! result is `s` or its neighbour, stepped on the bits (`rounded_f64`); products,
//! quotients, square roots and `fma` would need an f64 `fma` that rounds once for their
//! exact errors, which Vulkan does not promise: they are refused.

use super::*;
use rutile_ir::ir::{RoundedOp, Rounding};

impl Cx<'_> {
    /// `op(regs)` of type `ty`, rounded toward `rounding` (`Expr::Rounded`, also for the
    /// types held in f32, which it rounds once itself).
    pub(super) fn rounded(&mut self, op: RoundedOp, rounding: Rounding, ty: ScalarType, regs: &[Reg]) -> R<H> {
        let from = self.k.reg_type(regs[0]);
        let args: Vec<H> = regs.iter().map(|&r| self.read(r)).collect();
        let args = &args[..];
        let name = op.name(rounding);
        let half = matches!(ty, ScalarType::F16 | ScalarType::BF16);
        if op == RoundedOp::Convert && half && matches!(from, ScalarType::F32 | ScalarType::F64) {
            return Ok(self.convert_to_half(rounding, from, ty, args[0]));
        }
        if !matches!(ty, ScalarType::F32 | ScalarType::F64) {
            let detail =
                format!("`{name}` of {ty}: Vulkan has no rounding modes, and only f32 and f64 are rounded exactly");
            return Err(unsupported(self.k, "directed rounding", detail));
        }
        if !self.float64 {
            let detail = format!("`{name}` computes its result exactly in f64, which the device lacks (shaderFloat64)");
            return Err(unsupported(self.k, "f64", detail));
        }
        if !self.exact_f64 {
            let detail =
                format!("`{name}` needs each f64 operation rounded once, which the target's exact_f64 (off) ensures");
            return Err(unsupported(self.k, "directed rounding", detail));
        }
        // f64 among the module's types, which is how `exact_f64` knows to mark it.
        self.ty(TypeInner::Scalar(Scalar::F64));
        if ty == ScalarType::F64 {
            return self.rounded_f64(op, rounding, from, args);
        }
        if op == RoundedOp::Convert {
            return self.convert_rounded(rounding, from, args[0]);
        }
        let w: Vec<H> = args.iter().map(|&a| self.widen_exact(a)).collect();
        let mut finite = self.finite_f32(args[0]);
        for &a in &args[1..] {
            let f = self.finite_f32(a);
            finite = self.bin(Bo::LogicalAnd, finite, f);
        }
        let result = match op {
            RoundedOp::Add | RoundedOp::Sub | RoundedOp::Fma => {
                let (p, c) = match op {
                    RoundedOp::Add => (w[0], w[1]),
                    RoundedOp::Sub => (w[0], self.un(Uo::Negate, w[1])),
                    _ => (self.bin(Bo::Multiply, w[0], w[1]), w[2]),
                };
                let (s, e) = self.two_sum(p, c);
                let directed = self.round_pair(rounding, s, e);
                // An exact zero: `+0`, or `-0` rounding down, unless both addends are zeros
                // of one sign (f64's own sums of zeros give these signs).
                let zero_sum = if rounding == Rounding::Down {
                    let (np, nc) = (self.un(Uo::Negate, p), self.un(Uo::Negate, c));
                    let t = self.bin(Bo::Add, np, nc);
                    self.un(Uo::Negate, t)
                } else {
                    self.bin(Bo::Add, p, c)
                };
                let zero = self.float_lit(ScalarType::F64, 0.0);
                let (s0, e0) = (self.bin(Bo::Equal, s, zero), self.bin(Bo::Equal, e, zero));
                let exact_zero = self.bin(Bo::LogicalAnd, s0, e0);
                let zero_sum = self.as_(zero_sum, ScalarKind::Float, Some(4));
                let r = self.select(exact_zero, zero_sum, directed);
                // Infinities and NaNs: f64's result, which is IEEE's.
                let plain = if op == RoundedOp::Fma {
                    self.bin(Bo::Add, p, c)
                } else {
                    s
                };
                let plain = self.as_(plain, ScalarKind::Float, Some(4));
                self.select(finite, r, plain)
            }
            RoundedOp::Mul => {
                let s = self.bin(Bo::Multiply, w[0], w[1]);
                let zero = self.float_lit(ScalarType::F64, 0.0);
                let r = self.round_pair(rounding, s, zero);
                let plain = self.as_(s, ScalarKind::Float, Some(4));
                self.select(finite, r, plain)
            }
            RoundedOp::Div | RoundedOp::Rcp => {
                let (a, b, a32, b32) = if op == RoundedOp::Rcp {
                    let one = self.float_lit(ScalarType::F64, 1.0);
                    let one32 = self.float_lit(ScalarType::F32, 1.0);
                    (one, w[0], one32, args[0])
                } else {
                    (w[0], w[1], args[0], args[1])
                };
                let q = self.bin(Bo::Divide, a, b);
                let zero = self.float_lit(ScalarType::F64, 0.0);
                let negative = self.bin(Bo::Less, b, zero);
                let r = self.round_by(rounding, q, |cx, y| {
                    let yb = cx.bin(Bo::Multiply, y, b);
                    let d = cx.bin(Bo::Subtract, a, yb);
                    let nd = cx.un(Uo::Negate, d);
                    cx.select(negative, nd, d)
                });
                let special = self.quotient_of_specials(a32, b32);
                let nonzero = {
                    let z = self.u32c(0);
                    let (ma, mb) = (self.mag_bits(a32), self.mag_bits(b32));
                    let (az, bz) = (self.bin(Bo::NotEqual, ma, z), self.bin(Bo::NotEqual, mb, z));
                    self.bin(Bo::LogicalAnd, az, bz)
                };
                let ordinary = self.bin(Bo::LogicalAnd, finite, nonzero);
                self.select(ordinary, r, special)
            }
            RoundedOp::Convert => unreachable!("converted above"),
            RoundedOp::Sqrt => {
                let a = w[0];
                let root = self.math(Mf::Sqrt, &[a]);
                let r = self.round_by(rounding, root, |cx, y| {
                    let yy = cx.bin(Bo::Multiply, y, y);
                    cx.bin(Bo::Subtract, a, yy)
                });
                // Zeros and +inf are their own roots; negatives and NaN give NaN. From the
                // bits: a driver may compare subnormals as zeros.
                let x = args[0];
                let nan = self.float_lit(ScalarType::F32, f64::NAN);
                let (m, negative) = (self.mag_bits(x), self.sign_bit(ScalarType::F32, x));
                let (zero, inf) = (self.u32c(0), self.u32c(0x7f80_0000));
                let is_zero = self.bin(Bo::Equal, m, zero);
                let is_inf = self.bin(Bo::Equal, m, inf);
                let positive_inf = {
                    let p = self.un(Uo::LogicalNot, negative);
                    self.bin(Bo::LogicalAnd, is_inf, p)
                };
                let own = self.bin(Bo::LogicalOr, is_zero, positive_inf);
                let special = self.select(own, x, nan);
                let nonzero = self.bin(Bo::NotEqual, m, zero);
                let positive = {
                    let p = self.un(Uo::LogicalNot, negative);
                    self.bin(Bo::LogicalAnd, p, nonzero)
                };
                let below_inf = self.bin(Bo::Less, m, inf);
                let ordinary = self.bin(Bo::LogicalAnd, positive, below_inf);
                self.select(ordinary, r, special)
            }
        };
        Ok(result)
    }

    /// Integer or f64 `x` (of type `from`) converted to f32 toward `rounding`: the exact
    /// value as an f64 pair (an f64 itself; a 32-bit integer converted; a 64-bit one as its
    /// high word times 2^32 plus its low word, two-summed), rounded as the arithmetic is.
    fn convert_rounded(&mut self, rounding: Rounding, from: ScalarType, x: H) -> R<H> {
        let zero = self.float_lit(ScalarType::F64, 0.0);
        let r = match from {
            ScalarType::F64 => {
                let r = self.round_pair(rounding, x, zero);
                // Zeros, infinities and NaN convert as they are.
                let plain = self.as_(x, ScalarKind::Float, Some(4));
                let a = self.math(Mf::Abs, &[x]);
                let inf = self.float_lit(ScalarType::F64, f64::INFINITY);
                let finite = self.bin(Bo::Less, a, inf);
                let nonzero = self.bin(Bo::NotEqual, x, zero);
                let ordinary = self.bin(Bo::LogicalAnd, finite, nonzero);
                self.select(ordinary, r, plain)
            }
            ScalarType::I32 | ScalarType::U32 => {
                let w = self.as_(x, ScalarKind::Float, Some(8));
                self.round_pair(rounding, w, zero)
            }
            ScalarType::I64 | ScalarType::U64 => {
                let (s, e) = self.int64_pair(from, x);
                self.round_pair(rounding, s, e)
            }
            _ => {
                let detail = format!("`{}` from {from}", RoundedOp::Convert.name(rounding));
                return Err(unsupported(self.k, "directed rounding", detail));
            }
        };
        Ok(r)
    }

    /// 64-bit integer `x` (of `from`) as an exact f64 pair `s + e`: its high word times 2^32
    /// plus its low word, two-summed.
    fn int64_pair(&mut self, from: ScalarType, x: H) -> (H, H) {
        let thirty_two = self.lit(naga::Literal::U32(32));
        let hi = self.bin(Bo::ShiftRight, x, thirty_two);
        let mask = self.int_lit(from, 0xffff_ffff);
        let lo = self.bin(Bo::And, x, mask);
        let hi = self.as_(hi, ScalarKind::Float, Some(8));
        let lo = self.as_(lo, ScalarKind::Float, Some(8));
        let scale = self.float_lit(ScalarType::F64, 2f64.powi(32));
        let hi = self.bin(Bo::Multiply, hi, scale);
        self.two_sum(hi, lo)
    }

    /// An f64 result in a direction (`rounded` has checked `exact_f64`): `add` and `sub` of
    /// f64 values, and 64-bit integers converted to f64. Their exact value is an f64 pair
    /// `s + e` (a two-sum, `s` rounded to nearest, every f64 operation rounded once), so the
    /// directed result is `s` or its neighbour one place toward `e`, stepped on the bits. A product's,
    /// quotient's or square root's exact error would need an f64 `fma` that rounds once,
    /// which Vulkan does not promise (lavapipe's rounds twice): those are refused.
    fn rounded_f64(&mut self, op: RoundedOp, rounding: Rounding, from: ScalarType, args: &[H]) -> R<H> {
        let name = op.name(rounding);
        if !matches!(op, RoundedOp::Add | RoundedOp::Sub | RoundedOp::Convert) {
            let detail = format!(
                "`{name}` of f64: through Vulkan only add, sub and conversions from 64-bit integers are rounded in a \
                 direction (the exact error of an f64 product or quotient needs an fma rounded once, which Vulkan \
                 does not promise)"
            );
            return Err(unsupported(self.k, "directed rounding", detail));
        }
        if !self.int64 {
            let detail =
                format!("`{name}` of f64 steps the result on its 64 bits, which needs the device's shader-int64");
            return Err(unsupported(self.k, "i64", detail));
        }
        if op == RoundedOp::Convert {
            if !matches!(from, ScalarType::I64 | ScalarType::U64) {
                return Err(unsupported(
                    self.k,
                    "directed rounding",
                    format!("`{name}` from {from} to f64"),
                ));
            }
            let (s, e) = self.int64_pair(from, args[0]);
            return Ok(self.step_toward(rounding, s, e));
        }
        let (a, b) = match op {
            RoundedOp::Add => (args[0], args[1]),
            _ => (args[0], self.un(Uo::Negate, args[1])),
        };
        let (s, e) = self.two_sum(a, b);
        let directed = self.step_toward(rounding, s, e);
        // An exact zero: `+0`, or `-0` rounding down, unless both addends are zeros of one
        // sign (f64's own sums of zeros give these signs).
        let zero_sum = if rounding == Rounding::Down {
            let (na, nb) = (self.un(Uo::Negate, a), self.un(Uo::Negate, b));
            let t = self.bin(Bo::Add, na, nb);
            self.un(Uo::Negate, t)
        } else {
            s
        };
        let zero = self.float_lit(ScalarType::F64, 0.0);
        let (s0, e0) = (self.bin(Bo::Equal, s, zero), self.bin(Bo::Equal, e, zero));
        let exact_zero = self.bin(Bo::LogicalAnd, s0, e0);
        let r = self.select(exact_zero, zero_sum, directed);
        // Past the largest finite value (the sum to nearest infinite, its operands finite):
        // infinity where the direction points away from zero, else the largest value.
        let max = self.float_lit(ScalarType::F64, f64::MAX);
        let finite = |cx: &mut Self, x: H| {
            let a = cx.math(Mf::Abs, &[x]);
            cx.bin(Bo::LessEqual, a, max)
        };
        let (fa, fb, fs) = (finite(self, a), finite(self, b), finite(self, s));
        let operands = self.bin(Bo::LogicalAnd, fa, fb);
        let not_fs = self.un(Uo::LogicalNot, fs);
        let overflow = self.bin(Bo::LogicalAnd, operands, not_fs);
        let positive = self.bin(Bo::Greater, s, zero);
        let to_infinity = match rounding {
            Rounding::NearestEven => self.lit(naga::Literal::Bool(true)),
            Rounding::TowardZero => self.lit(naga::Literal::Bool(false)),
            Rounding::Up => positive,
            Rounding::Down => self.un(Uo::LogicalNot, positive),
        };
        let largest = self.math(Mf::Sign, &[s]);
        let largest = self.bin(Bo::Multiply, largest, max);
        let past = self.select(to_infinity, s, largest);
        let r = self.select(overflow, past, r);
        // Infinities and NaN among the operands: f64's own sum.
        Ok(self.select(operands, r, s))
    }

    /// f64 `s` stepped one place toward `s + e` where the direction says (`s` is the pair's
    /// rounding to nearest; `e` its exact remainder, at most half a place): up where `e > 0`
    /// rounding up, or toward zero from a negative `s`; down likewise. On the bits: one more
    /// is one place away from zero, one less toward it.
    fn step_toward(&mut self, rounding: Rounding, s: H, e: H) -> H {
        let zero = self.float_lit(ScalarType::F64, 0.0);
        let (above, below) = (self.bin(Bo::Greater, e, zero), self.bin(Bo::Less, e, zero));
        let negative = self.bin(Bo::Less, s, zero);
        let positive = self.un(Uo::LogicalNot, negative);
        let no = self.lit(naga::Literal::Bool(false));
        let (up, down) = match rounding {
            Rounding::NearestEven => (no, no),
            Rounding::Up => (above, no),
            Rounding::Down => (no, below),
            Rounding::TowardZero => (
                self.bin(Bo::LogicalAnd, above, negative),
                self.bin(Bo::LogicalAnd, below, positive),
            ),
        };
        let bits = self.as_(s, ScalarKind::Uint, None);
        let one = self.lit(naga::Literal::U64(1));
        let (away, toward) = (self.bin(Bo::Add, bits, one), self.bin(Bo::Subtract, bits, one));
        let up_bits = self.select(negative, toward, away);
        let down_bits = self.select(negative, away, toward);
        let stepped = self.select(down, down_bits, bits);
        let stepped = self.select(up, up_bits, stepped);
        self.as_(stepped, ScalarKind::Float, None)
    }

    /// f32 or f64 `x` (of `from`) converted to f16 or bf16 (`ty`) toward `rounding`
    /// (Triton's `fp_downcast_rounding`), in integer and exact f32 operations: an f64 is
    /// rounded to odd in f32 first, which keeps every direction's answer. bf16 (held in
    /// f32): the low 16 bits dropped, one unit of the kept ones added where the direction
    /// points away from zero and they were not all zero. f16: the magnitude scaled to whole
    /// units of its f16 place (exact), rounded to an integer by the direction (`floor` or
    /// `ceil` of the magnitude; to nearest even where asked), scaled back; past the largest
    /// finite value the largest, or infinity where the direction points away from zero;
    /// then converted to f16, which holds it exactly.
    fn convert_to_half(&mut self, rounding: Rounding, from: ScalarType, ty: ScalarType, x: H) -> H {
        let x = if from == ScalarType::F64 {
            // Past f32's range the odd rounding is f32's largest odd value (its infinity
            // would be exact, and round toward zero to infinity).
            let odd = self.f64_to_f32_odd(x, None);
            let ax = self.math(Mf::Abs, &[x]);
            let max = self.float_lit(ScalarType::F64, f64::MAX);
            let finite = self.bin(Bo::LessEqual, ax, max);
            let m = self.mag_bits(odd);
            let inf = self.u32c(0x7f80_0000);
            let overflowed = self.bin(Bo::Equal, m, inf);
            let clamp = self.bin(Bo::LogicalAnd, finite, overflowed);
            let bits = self.as_(odd, ScalarKind::Uint, None);
            let sign_mask = self.u32c(0x8000_0000);
            let sign = self.bin(Bo::And, bits, sign_mask);
            let largest = self.u32c(0x7f7f_ffff);
            let largest = self.bin(Bo::InclusiveOr, largest, sign);
            let largest = self.as_(largest, ScalarKind::Float, None);
            self.select(clamp, largest, odd)
        } else {
            x
        };
        if ty == ScalarType::BF16 && rounding == Rounding::NearestEven {
            return self.round_bf16(x);
        }
        let bits = self.as_(x, ScalarKind::Uint, None);
        let magnitude = self.mag_bits(x);
        let sign_mask = self.u32c(0x8000_0000);
        let sign = self.bin(Bo::And, bits, sign_mask);
        let zero = self.u32c(0);
        let negative = self.bin(Bo::NotEqual, sign, zero);
        // Whether the direction points away from zero for `x`'s sign.
        let away = match rounding {
            Rounding::Up => Some(self.un(Uo::LogicalNot, negative)),
            Rounding::Down => Some(negative),
            _ => None,
        };
        if ty == ScalarType::BF16 {
            let nan = self.is_nan(ScalarType::F32, x);
            let low_mask = self.u32c(0xffff);
            let low = self.bin(Bo::And, bits, low_mask);
            let high = self.u32c(0xffff_0000);
            let mut kept = self.bin(Bo::And, bits, high);
            if let Some(away) = away {
                let inexact = self.bin(Bo::NotEqual, low, zero);
                let step = self.bin(Bo::LogicalAnd, away, inexact);
                let unit = self.u32c(0x1_0000);
                let next = self.bin(Bo::Add, kept, unit);
                kept = self.select(step, next, kept);
            }
            let quiet = self.u32c(0x0040_0000);
            let nan_bits = self.bin(Bo::InclusiveOr, bits, quiet);
            let high = self.u32c(0xffff_0000);
            let nan_bits = self.bin(Bo::And, nan_bits, high);
            let out = self.select(nan, nan_bits, kept);
            return self.as_(out, ScalarKind::Float, None);
        }
        // f16's place at `x`'s exponent (at least the subnormals', 2^-24) as biased f32
        // exponents of the scale and its inverse, both normal.
        let twenty_three = self.u32c(23);
        let biased = self.bin(Bo::ShiftRight, magnitude, twenty_three);
        let lowest = self.u32c(127 - 14);
        let e = self.math(Mf::Max, &[biased, lowest]);
        let ten = self.u32c(10);
        let q = self.bin(Bo::Subtract, e, ten);
        let scale_bits = self.bin(Bo::ShiftLeft, q, twenty_three);
        let scale = self.as_(scale_bits, ScalarKind::Float, None);
        let top = self.u32c(254);
        let inv = self.bin(Bo::Subtract, top, q);
        let inv_bits = self.bin(Bo::ShiftLeft, inv, twenty_three);
        let inv_scale = self.as_(inv_bits, ScalarKind::Float, None);
        let a = self.as_(magnitude, ScalarKind::Float, None);
        let units = self.bin(Bo::Multiply, a, inv_scale);
        // An f32 subnormal is below half of f16's smallest step: a fraction of a unit,
        // whichever (a driver may flush it in the multiply).
        let smallest_normal = self.u32c(0x0080_0000);
        let below = self.bin(Bo::Less, magnitude, smallest_normal);
        let nonzero = self.bin(Bo::NotEqual, magnitude, zero);
        let subnormal = self.bin(Bo::LogicalAnd, below, nonzero);
        let fraction = self.float_lit(ScalarType::F32, 0.5);
        let units = self.select(subnormal, fraction, units);
        let units = match away {
            None if rounding == Rounding::NearestEven => self.math(Mf::Round, &[units]),
            None => self.math(Mf::Floor, &[units]),
            Some(away) => {
                let (up, down) = (self.math(Mf::Ceil, &[units]), self.math(Mf::Floor, &[units]));
                self.select(away, up, down)
            }
        };
        let r = self.bin(Bo::Multiply, units, scale);
        // Past f16's largest finite value: infinity to nearest or away from zero, else it.
        let largest = self.float_lit(ScalarType::F32, 65504.0);
        let beyond = self.bin(Bo::Greater, r, largest);
        let to_infinity = match away {
            Some(away) => away,
            None => self.lit(naga::Literal::Bool(rounding == Rounding::NearestEven)),
        };
        let infinity = self.float_lit(ScalarType::F32, f64::INFINITY);
        let past = self.select(to_infinity, infinity, largest);
        let r = self.select(beyond, past, r);
        let r_bits = self.as_(r, ScalarKind::Uint, None);
        let signed = self.bin(Bo::InclusiveOr, r_bits, sign);
        let signed = self.as_(signed, ScalarKind::Float, None);
        // Infinities and NaN as they are.
        let infinity_bits = self.u32c(0x7f80_0000);
        let special = self.bin(Bo::GreaterEqual, magnitude, infinity_bits);
        let out = self.select(special, x, signed);
        self.cast(ScalarType::F32, ScalarType::F16, out)
    }

    /// The bits of f32 `x` without its sign.
    fn mag_bits(&mut self, x: H) -> H {
        let bits = self.as_(x, ScalarKind::Uint, None);
        let mask = self.u32c(0x7fff_ffff);
        self.bin(Bo::And, bits, mask)
    }

    /// f32 `x` in f64, exactly, subnormals included: a driver may flush them in a
    /// conversion (NVIDIA's does), so they are widened from their bits.
    fn widen_exact(&mut self, x: H) -> H {
        let bits = self.as_(x, ScalarKind::Uint, None);
        let exp_mask = self.u32c(0x7f80_0000);
        let e = self.bin(Bo::And, bits, exp_mask);
        let z = self.u32c(0);
        let tiny = self.bin(Bo::Equal, e, z);
        let frac_mask = self.u32c(0x007f_ffff);
        let k = self.bin(Bo::And, bits, frac_mask);
        let k = self.as_(k, ScalarKind::Float, Some(8));
        let scale = self.float_lit(ScalarType::F64, 2f64.powi(-149));
        let sub = self.bin(Bo::Multiply, k, scale);
        let neg = self.un(Uo::Negate, sub);
        let negative = self.sign_bit(ScalarType::F32, x);
        let sub = self.select(negative, neg, sub);
        let normal = self.as_(x, ScalarKind::Float, Some(8));
        self.select(tiny, sub, normal)
    }

    /// An f32 next to f64 `near`: its conversion where that is a normal f32 (an infinity
    /// taken as the largest finite value, whose neighbour the infinity is), else the
    /// subnormal made from the bits (a driver may flush a conversion's subnormal result).
    fn narrow_near(&mut self, near: H) -> H {
        let f = self.as_(near, ScalarKind::Float, Some(4));
        let m = self.mag_bits(f);
        let inf = self.u32c(0x7f80_0000);
        let is_inf = self.bin(Bo::Equal, m, inf);
        let sign_mask = self.u32c(0x8000_0000);
        let bits = self.as_(f, ScalarKind::Uint, None);
        let sign = self.bin(Bo::And, bits, sign_mask);
        let largest = self.u32c(0x7f7f_ffff);
        let largest = self.bin(Bo::InclusiveOr, largest, sign);
        let largest = self.as_(largest, ScalarKind::Float, None);
        let normal = self.select(is_inf, largest, f);
        let a = self.math(Mf::Abs, &[near]);
        let min_normal = self.float_lit(ScalarType::F64, 2f64.powi(-126));
        let tiny = self.bin(Bo::Less, a, min_normal);
        let scale = self.float_lit(ScalarType::F64, 2f64.powi(149));
        let scaled = self.bin(Bo::Multiply, a, scale);
        let k = self.math(Mf::Round, &[scaled]);
        let k = self.as_(k, ScalarKind::Uint, Some(4));
        // The sign from the conversion's bits, which keep it for zeros and flushed values.
        let sub = self.bin(Bo::InclusiveOr, k, sign);
        let sub = self.as_(sub, ScalarKind::Float, None);
        self.select(tiny, sub, normal)
    }

    /// The exact f64 value `s + e` (with `|e|` at most half of `s`'s last place) rounded to
    /// f32 toward `rounding`.
    fn round_pair(&mut self, rounding: Rounding, s: H, e: H) -> H {
        self.round_by(rounding, s, |cx, y| {
            let d = cx.bin(Bo::Subtract, s, y);
            cx.bin(Bo::Add, d, e)
        })
    }

    /// The exact value `X` rounded to f32 toward `rounding`, from `near` (an f64 within an
    /// f32 place of `X` once converted) and `diff(y)`, an f64 of the sign of `X - y` for f64
    /// `y` an f32 or the midpoint of two.
    fn round_by(&mut self, rounding: Rounding, near: H, diff: impl Fn(&mut Self, H) -> H) -> H {
        let f = self.narrow_near(near);
        let fy = self.widen_exact(f);
        let d = diff(self, fy);
        let zero = self.float_lit(ScalarType::F64, 0.0);
        let above = self.bin(Bo::Greater, d, zero);
        let exact = self.bin(Bo::Equal, d, zero);
        let (up, down) = (self.step_f32(f, true), self.step_f32(f, false));
        let lo = self.select(above, f, down);
        let hi = self.select(above, up, f);
        let chosen = match rounding {
            Rounding::Down => lo,
            Rounding::Up => hi,
            Rounding::TowardZero => {
                let negative = self.sign_bit(ScalarType::F32, lo);
                self.select(negative, hi, lo)
            }
            Rounding::NearestEven => {
                let (l, h) = (self.wide_f32(lo), self.wide_f32(hi));
                let sum = self.bin(Bo::Add, l, h);
                let half = self.float_lit(ScalarType::F64, 0.5);
                let mid = self.bin(Bo::Multiply, sum, half);
                let dm = diff(self, mid);
                let (below_mid, above_mid) = (self.bin(Bo::Less, dm, zero), self.bin(Bo::Greater, dm, zero));
                let bits = self.as_(lo, ScalarKind::Uint, None);
                let one = self.u32c(1);
                let odd = self.bin(Bo::And, bits, one);
                let z = self.u32c(0);
                let lo_even = self.bin(Bo::Equal, odd, z);
                let even = self.select(lo_even, lo, hi);
                let t = self.select(above_mid, hi, even);
                self.select(below_mid, lo, t)
            }
        };
        self.select(exact, f, chosen)
    }

    /// f32 `x` in f64, an infinity as `±2^128` (where the next f32 after the largest would
    /// be), so that the midpoint of the largest and the infinity is a number.
    fn wide_f32(&mut self, x: H) -> H {
        let w = self.widen_exact(x);
        let m = self.mag_bits(x);
        let inf = self.u32c(0x7f80_0000);
        let is_inf = self.bin(Bo::Equal, m, inf);
        let big = self.float_lit(ScalarType::F64, 2f64.powi(128));
        let signed = self.math(Mf::Sign, &[w]);
        let big = self.bin(Bo::Multiply, signed, big);
        self.select(is_inf, big, w)
    }

    /// The f32 next to finite `x` upward (`up`) or downward, by its bits (zeros of either
    /// sign step to the smallest subnormals).
    fn step_f32(&mut self, x: H, up: bool) -> H {
        let bits = self.as_(x, ScalarKind::Uint, None);
        let one = self.u32c(1);
        let (inc, dec) = (self.bin(Bo::Add, bits, one), self.bin(Bo::Subtract, bits, one));
        let m = self.mag_bits(x);
        let z = self.u32c(0);
        let nonzero = self.bin(Bo::NotEqual, m, z);
        let sign = self.sign_bit(ScalarType::F32, x);
        let negative = self.bin(Bo::LogicalAnd, sign, nonzero);
        let not_sign = self.un(Uo::LogicalNot, sign);
        let positive = self.bin(Bo::LogicalAnd, not_sign, nonzero);
        let first = self.u32c(if up { 1 } else { 0x8000_0001 });
        let stepped = if up {
            self.select(positive, inc, dec)
        } else {
            self.select(negative, inc, dec)
        };
        let bits = self.select(nonzero, stepped, first);
        self.as_(bits, ScalarKind::Float, None)
    }

    /// `a / b` of f32s where one is zero, infinite or NaN, as IEEE defines it (without the
    /// device's division, whose results there Vulkan leaves open).
    fn quotient_of_specials(&mut self, a: H, b: H) -> H {
        let zero = self.float_lit(ScalarType::F32, 0.0);
        let inf = self.float_lit(ScalarType::F32, f64::INFINITY);
        let nan = self.float_lit(ScalarType::F32, f64::NAN);
        let (ma, mb) = (self.mag_bits(a), self.mag_bits(b));
        let (a_nan, b_nan) = (self.is_nan(ScalarType::F32, a), self.is_nan(ScalarType::F32, b));
        let (zb, ib) = (self.u32c(0), self.u32c(0x7f80_0000));
        let (a_zero, b_zero) = (self.bin(Bo::Equal, ma, zb), self.bin(Bo::Equal, mb, zb));
        let (a_inf, b_inf) = (self.bin(Bo::Equal, ma, ib), self.bin(Bo::Equal, mb, ib));
        let zeros = self.bin(Bo::LogicalAnd, a_zero, b_zero);
        let infs = self.bin(Bo::LogicalAnd, a_inf, b_inf);
        let any_nan = self.bin(Bo::LogicalOr, a_nan, b_nan);
        let t = self.bin(Bo::LogicalOr, any_nan, zeros);
        let is_nan = self.bin(Bo::LogicalOr, t, infs);
        let to_inf = self.bin(Bo::LogicalOr, a_inf, b_zero);
        // The sign: that of a product of the two signs, from the bits.
        let (ba, bb) = (self.as_(a, ScalarKind::Uint, None), self.as_(b, ScalarKind::Uint, None));
        let x = self.bin(Bo::ExclusiveOr, ba, bb);
        let sign_bit = self.u32c(0x8000_0000);
        let sign = self.bin(Bo::And, x, sign_bit);
        let magnitude = self.select(to_inf, inf, zero);
        let mbits = self.as_(magnitude, ScalarKind::Uint, None);
        let signed = self.bin(Bo::InclusiveOr, mbits, sign);
        let signed = self.as_(signed, ScalarKind::Float, None);
        self.select(is_nan, nan, signed)
    }
}
