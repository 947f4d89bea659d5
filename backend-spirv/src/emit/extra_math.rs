//! `sigmoid`, `tanh`, `pow` and `umulhi`, written out: GLSL.std.450's `Tanh` and `Pow` are
//! only as precise as their exponential definitions (`Pow` undefined for a negative base),
//! and naga has no high multiply. `tanh` and `pow` follow the PTX backend's construction, in
//! `f32` for every float type; `sigmoid` is computed in `f32` for `f16` too.

use super::*;
use rutile_ir::mathfn::{TANH_SERIES, TANH_SERIES_BELOW};

impl Cx<'_> {
    /// `sigmoid`: `1 / (1 + exp(-x))`, in `f32` for `f16`: in `f16`, `exp(-x)` overflows
    /// below x = -11.09, where the result is still an `f16` subnormal.
    pub(super) fn sigmoid(&mut self, ty: ScalarType, x: H) -> H {
        let wide = if ty == ScalarType::F64 {
            ScalarType::F64
        } else {
            ScalarType::F32
        };
        let x = if ty == ScalarType::F64 { x } else { self.as_f32(ty, x) };
        let n = self.un(Uo::Negate, x);
        let e = self.transcendental(Mf::Exp, wide, n);
        let one = self.float_lit(wide, 1.0);
        let d = self.bin(Bo::Add, one, e);
        let one = self.float_lit(wide, 1.0);
        let s = self.bin(Bo::Divide, one, d);
        if ty == ScalarType::F64 {
            s
        } else {
            self.f32_as(ty, s)
        }
    }

    /// `tanh`: the series of [`TANH_SERIES`] below [`TANH_SERIES_BELOW`], else
    /// `±(1 - 2 / (e^(2|x|) + 1))` with `2|x|` capped at 40, where tanh is 1 in every float
    /// type and `e^40` is finite.
    pub(super) fn tanh(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let coefs: Vec<f32> = TANH_SERIES.iter().map(|&c| c as f32).collect();
        let s = self.bin(Bo::Multiply, x, x);
        let p = self.horner(&coefs, s);
        let small = self.bin(Bo::Multiply, x, p);
        let ax = self.math(Mf::Abs, &[x]);
        let two_a = self.bin(Bo::Add, ax, ax);
        let cap = self.lit(naga::Literal::F32(40.0));
        let arg = self.math(Mf::Min, &[two_a, cap]);
        let ex = self.math(Mf::Exp, &[arg]);
        let one = self.lit(naga::Literal::F32(1.0));
        let den = self.bin(Bo::Add, ex, one);
        let two = self.lit(naga::Literal::F32(2.0));
        let q = self.bin(Bo::Divide, two, den);
        let one = self.lit(naga::Literal::F32(1.0));
        let l = self.bin(Bo::Subtract, one, q);
        let nl = self.un(Uo::Negate, l);
        let zero = self.lit(naga::Literal::F32(0.0));
        let negative = self.bin(Bo::Less, x, zero);
        let large = self.select(negative, nl, l);
        // NaN fails the comparison and takes the series, which gives NaN.
        let split = self.lit(naga::Literal::F32(TANH_SERIES_BELOW as f32));
        let big = self.bin(Bo::GreaterEqual, ax, split);
        let r = self.select(big, large, small);
        self.f32_as(ty, r)
    }

    /// C's `pow(x, y)` (see the PTX backend's `pow_f32`): `2^(y·log2|x|)` with the sign of
    /// a negative base for odd integer `y`, NaN for a finite negative base and non-integer
    /// `y`, NaN for a NaN operand otherwise, and 1 for `y = ±0`, `x = 1` and `|x| = 1` with
    /// infinite `y`. `log2` and `exp2`
    /// are undefined at 0 and infinity in Vulkan, so bases of magnitude 0 and infinity
    /// take their exact results (0 or infinity) by selection.
    pub(super) fn pow(&mut self, ty: ScalarType, x: H, y: H) -> H {
        let x = self.as_f32(ty, x);
        let y = self.as_f32(ty, y);
        let a = self.math(Mf::Abs, &[x]);
        let l = self.math(Mf::Log2, &[a]);
        let t = self.bin(Bo::Multiply, y, l);
        let p = self.math(Mf::Exp2, &[t]);
        // |x| = 0 or infinity: infinity when (y > 0) == (|x| is infinite), else 0.
        let inf = self.float_lit(ScalarType::F32, f64::INFINITY);
        let zero = self.lit(naga::Literal::F32(0.0));
        let a_zero = self.bin(Bo::Equal, a, zero);
        let a_inf = self.bin(Bo::Equal, a, inf);
        let y_pos = self.bin(Bo::Greater, y, zero);
        let to_inf = self.bin(Bo::Equal, y_pos, a_inf);
        let inf = self.float_lit(ScalarType::F32, f64::INFINITY);
        let zero = self.lit(naga::Literal::F32(0.0));
        let edge = self.select(to_inf, inf, zero);
        let a_edge = self.bin(Bo::LogicalOr, a_zero, a_inf);
        let p = self.select(a_edge, edge, p);
        // Integer: unchanged by truncation (also ±inf); odd: its half is not an integer.
        let yi = self.math(Mf::Trunc, &[y]);
        let int = self.bin(Bo::Equal, yi, y);
        let half = self.lit(naga::Literal::F32(0.5));
        let h = self.bin(Bo::Multiply, y, half);
        let hi = self.math(Mf::Trunc, &[h]);
        let h_int = self.bin(Bo::Equal, hi, h);
        let not_h_int = self.un(Uo::LogicalNot, h_int);
        let odd = self.bin(Bo::LogicalAnd, int, not_h_int);
        let sign = self.sign_bit(ScalarType::F32, x);
        let flip = self.bin(Bo::LogicalAnd, sign, odd);
        let np = self.un(Uo::Negate, p);
        let signed = self.select(flip, np, p);
        // A finite negative base with a non-integer exponent (NaN exponents included).
        let zero = self.lit(naga::Literal::F32(0.0));
        let below = self.bin(Bo::Less, x, zero);
        let ninf = self.float_lit(ScalarType::F32, f64::NEG_INFINITY);
        let finite = self.bin(Bo::Greater, x, ninf);
        let finite_neg = self.bin(Bo::LogicalAnd, below, finite);
        let not_int = self.un(Uo::LogicalNot, int);
        let nan = self.bin(Bo::LogicalAnd, finite_neg, not_int);
        // NaN operands, tested on the bits: devices need not carry NaN through log2 and exp2.
        let x_nan = self.is_nan(ScalarType::F32, x);
        let y_nan = self.is_nan(ScalarType::F32, y);
        let nan = self.bin(Bo::LogicalOr, nan, x_nan);
        let nan = self.bin(Bo::LogicalOr, nan, y_nan);
        let nan_lit = self.float_lit(ScalarType::F32, f64::NAN);
        let r = self.select(nan, nan_lit, signed);
        // y = ±0, x = 1, or |x| = 1 with y = ±inf: 1.
        let one = self.lit(naga::Literal::F32(1.0));
        let a_one = self.bin(Bo::Equal, a, one);
        let ay = self.math(Mf::Abs, &[y]);
        let inf = self.float_lit(ScalarType::F32, f64::INFINITY);
        let y_inf = self.bin(Bo::Equal, ay, inf);
        let unit = self.bin(Bo::LogicalAnd, a_one, y_inf);
        let one = self.lit(naga::Literal::F32(1.0));
        let x_one = self.bin(Bo::Equal, x, one);
        let zero = self.lit(naga::Literal::F32(0.0));
        let y_zero = self.bin(Bo::Equal, y, zero);
        let ones = self.bin(Bo::LogicalOr, unit, x_one);
        let ones = self.bin(Bo::LogicalOr, ones, y_zero);
        let one = self.lit(naga::Literal::F32(1.0));
        let r = self.select(ones, one, r);
        self.f32_as(ty, r)
    }

    /// `umulhi` of 32-bit integers as the high half of one 64-bit product where the device
    /// has 64-bit integers (one wide multiply on NVIDIA and AMD, where the limbs below cost
    /// a dozen instructions: Philox's rounds are made of these); otherwise, and for 64-bit
    /// integers, from half-width limbs: with `a = ah·2^h + al` and `b = bh·2^h + bl`, the
    /// high half is `ah·bh + (al·bh >> h) + (ah·bl >> h)` plus the carry out of the middle
    /// sum.
    pub(super) fn umulhi(&mut self, ty: ScalarType, x: H, y: H) -> R<H> {
        if ty.bits() == 32 && self.int64 {
            let product = self.wide_product(ty, x, y);
            return Ok(self.product_half(ty, product, true));
        }
        let (uty, h) = match ty.bits() {
            32 => (ScalarType::U32, 16),
            64 => (ScalarType::U64, 32),
            _ => return Err(invalid(self.k, format!("umulhi of {ty}"))),
        };
        let signed = ty.is_signed_int();
        let (x, y) = if signed {
            (self.as_(x, ScalarKind::Uint, None), self.as_(y, ScalarKind::Uint, None))
        } else {
            (x, y)
        };
        let mask = (1i64 << h) - 1;
        let lo = |cx: &mut Self, v: H| {
            let m = cx.int_lit(uty, mask);
            cx.bin(Bo::And, v, m)
        };
        let (al, bl) = (lo(self, x), lo(self, y));
        let shift = |cx: &mut Self, v: H| {
            let s = cx.u32c(h);
            cx.bin(Bo::ShiftRight, v, s)
        };
        let (ah, bh) = (shift(self, x), shift(self, y));
        let ll = self.bin(Bo::Multiply, al, bl);
        let lh = self.bin(Bo::Multiply, al, bh);
        let hl = self.bin(Bo::Multiply, ah, bl);
        let hh = self.bin(Bo::Multiply, ah, bh);
        let ll_hi = shift(self, ll);
        let lh_lo = lo(self, lh);
        let hl_lo = lo(self, hl);
        let mid = self.bin(Bo::Add, ll_hi, lh_lo);
        let mid = self.bin(Bo::Add, mid, hl_lo);
        let carry = shift(self, mid);
        let lh_hi = shift(self, lh);
        let hl_hi = shift(self, hl);
        let r = self.bin(Bo::Add, hh, lh_hi);
        let r = self.bin(Bo::Add, r, hl_hi);
        let r = self.bin(Bo::Add, r, carry);
        Ok(if signed { self.as_(r, ScalarKind::Sint, None) } else { r })
    }

    /// The 64-bit product of 32-bit integers `x` and `y` of type `ty`, their bits taken as
    /// unsigned (where the device has 64-bit integers): one wide multiply, whose halves are
    /// `umulhi` and the 32-bit product ([`Self::product_half`]).
    pub(super) fn wide_product(&mut self, ty: ScalarType, x: H, y: H) -> H {
        // The operands' bits as unsigned, zero-extended.
        let wide = |cx: &mut Self, v: H| {
            let v = if ty.is_signed_int() {
                cx.as_(v, ScalarKind::Uint, None)
            } else {
                v
            };
            cx.as_(v, ScalarKind::Uint, Some(8))
        };
        let (x, y) = (wide(self, x), wide(self, y));
        self.bin(Bo::Multiply, x, y)
    }

    /// The high or low 32 bits of a [`Self::wide_product`], as a value of 32-bit `ty`.
    pub(super) fn product_half(&mut self, ty: ScalarType, product: H, high: bool) -> H {
        let half = if high {
            let s = self.u32c(32);
            self.bin(Bo::ShiftRight, product, s)
        } else {
            product
        };
        let half = self.as_(half, ScalarKind::Uint, Some(4));
        if ty.is_signed_int() {
            self.as_(half, ScalarKind::Sint, None)
        } else {
            half
        }
    }
}
