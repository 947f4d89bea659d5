//! Float `rem`: C's `fmod`, exact, as the IR defines it (the interpreter and the PTX backend
//! compute the same). SPIR-V's `OpFRem` is only as precise as `x - y·trunc(x/y)`: wrong in
//! its low bits once the quotient passes the significand, and NaN for `rem(x, ±inf)`.
//!
//! `|a|` is reduced by `|b|·2^k` for decreasing `k`, each subtraction exact (Sterbenz: it
//! happens only where `|b|·2^k ≤ x < |b|·2^(k+1)`), then takes the sign of `a`; NaN when `a`
//! is infinite or NaN or `b` is zero or NaN. Both loops are bounded by the type's exponent
//! span, so a driver that flushes subnormals to zero on the way (Vulkan allows it) gives
//! what flushing gives, never a loop that does not end.

use super::*;

impl Cx<'_> {
    /// `fmod(a, b)` of float type `ty`, exactly.
    pub(super) fn fmod(&mut self, ty: ScalarType, a: H, b: H) -> R<H> {
        if let (Some(x), Some(y)) = (self.literal_of(a), self.literal_of(b)) {
            if let Some(l) = fold_binary(Bo::Modulo, x, y) {
                return Ok(self.any_lit(l));
            }
        }
        let x0 = self.math(Mf::Abs, &[a]);
        let y = self.math(Mf::Abs, &[b]);
        let inf = self.float_lit(ty, f64::INFINITY);
        let finite = self.bin(Bo::Less, x0, inf);
        let zero = self.float_lit(ty, 0.0);
        let positive = self.bin(Bo::Greater, y, zero);
        let valid = self.bin(Bo::LogicalAnd, finite, positive);
        // An invalid pair reduces nothing (the result is NaN either way).
        let zero = self.float_lit(ty, 0.0);
        let start = self.select(valid, x0, zero);
        let x = self.new_temp(ty, "fmod_x");
        self.stmt(Statement::Store {
            pointer: x,
            value: start,
        });
        let ys = self.new_temp(ty, "fmod_ys");
        self.stmt(Statement::Store { pointer: ys, value: y });
        let k = self.new_temp(ScalarType::U32, "fmod_k");
        let k0 = self.u32c(0);
        self.stmt(Statement::Store { pointer: k, value: k0 });
        let span = exponent_span(ty);
        // ys ← the largest |b|·2^k not above |a|, k counted.
        let up = self.nested(|cx| {
            let s = cx.load(ys);
            let xv = cx.load(x);
            let two = cx.float_lit(ty, 2.0);
            let t = cx.bin(Bo::Multiply, s, two);
            let kv = cx.load(k);
            let fits = cx.bin(Bo::LessEqual, t, xv);
            let cap = cx.u32c(span);
            let room = cx.bin(Bo::Less, kv, cap);
            let go = cx.bin(Bo::LogicalAnd, fits, room);
            let stop = cx.un(Uo::LogicalNot, go);
            cx.break_if(stop);
            cx.stmt(Statement::Store { pointer: ys, value: t });
            let one = cx.u32c(1);
            let next = cx.bin(Bo::Add, kv, one);
            cx.stmt(Statement::Store {
                pointer: k,
                value: next,
            });
            Ok(())
        })?;
        self.loop_until_break(up);
        // Subtract ys where it fits, halve it, k + 1 times (down to |b| itself).
        let down = self.nested(|cx| {
            let s = cx.load(ys);
            let xv = cx.load(x);
            let fits = cx.bin(Bo::GreaterEqual, xv, s);
            let less = cx.bin(Bo::Subtract, xv, s);
            let nx = cx.select(fits, less, xv);
            cx.stmt(Statement::Store { pointer: x, value: nx });
            let kv = cx.load(k);
            let k0 = cx.u32c(0);
            let last = cx.bin(Bo::Equal, kv, k0);
            cx.break_if(last);
            let one = cx.u32c(1);
            let next = cx.bin(Bo::Subtract, kv, one);
            cx.stmt(Statement::Store {
                pointer: k,
                value: next,
            });
            let half = cx.float_lit(ty, 0.5);
            let h = cx.bin(Bo::Multiply, s, half);
            cx.stmt(Statement::Store { pointer: ys, value: h });
            Ok(())
        })?;
        self.loop_until_break(down);
        let r = self.load(x);
        let negated = self.un(Uo::Negate, r);
        let negative = self.sign_bit(ty, a);
        let signed = self.select(negative, negated, r);
        let nan = self.float_lit(ty, f64::NAN);
        Ok(self.select(valid, signed, nan))
    }
}

/// The most doublings from the smallest subnormal of `ty` to its largest finite value: the
/// most steps `fmod` can need.
fn exponent_span(ty: ScalarType) -> u32 {
    match ty {
        ScalarType::F16 => 15 + 24,
        ScalarType::BF16 | ScalarType::F32 => 127 + 149,
        _ => 1023 + 1074,
    }
}
