//! f64 `trunc` and `rint` from `floor`: lavapipe (Mesa 22.3's llvmpipe, on an x86-64 host
//! with SSE4.1 and AVX2) computed `GLSL.std.450 Trunc` and `RoundEven` of f64 wrongly:
//! `-0` came back `+0`, and `trunc(-1755846840960.4492)` came back unchanged (the f32
//! threshold past which every value is an integer, taken for f64's), where its `Floor`
//! was right. Both functions are odd, so each is the function of `|x|`, from `floor`, with
//! `x`'s sign: a few more instructions, f64 only (every device computed f32's right).

use super::*;

impl Cx<'_> {
    /// `trunc(x)` of an f64: `floor(|x|)` with `x`'s sign.
    pub(super) fn trunc_f64(&mut self, x: H) -> H {
        let magnitude = self.math(Mf::Abs, &[x]);
        let whole = self.math(Mf::Floor, &[magnitude]);
        self.with_sign_of(whole, x)
    }

    /// `rint(x)` of an f64 (to nearest, ties to even): `|x|`'s floor, plus one where the
    /// fraction is above a half, or a half and the floor odd; with `x`'s sign. The fraction
    /// `|x| - floor(|x|)` is exact; infinities and NaNs pass through `floor` (their
    /// fraction is NaN, and adds nothing).
    pub(super) fn rint_f64(&mut self, x: H) -> H {
        let ty = ScalarType::F64;
        let magnitude = self.math(Mf::Abs, &[x]);
        let whole = self.math(Mf::Floor, &[magnitude]);
        let fraction = self.bin(Bo::Subtract, magnitude, whole);
        let half = self.float_lit(ty, 0.5);
        let above = self.bin(Bo::Greater, fraction, half);
        let tie = self.bin(Bo::Equal, fraction, half);
        // `whole` is odd where half of it has a fraction.
        let halved = self.bin(Bo::Multiply, whole, half);
        let halved_floor = self.math(Mf::Floor, &[halved]);
        let odd = self.bin(Bo::NotEqual, halved, halved_floor);
        let tie_up = self.bin(Bo::LogicalAnd, tie, odd);
        let up = self.bin(Bo::LogicalOr, above, tie_up);
        let (one, zero) = (self.float_lit(ty, 1.0), self.float_lit(ty, 0.0));
        let step = self.select(up, one, zero);
        let rounded = self.bin(Bo::Add, whole, step);
        self.with_sign_of(rounded, x)
    }

    /// `magnitude` (not negative, or NaN) with the sign of f64 `x`.
    fn with_sign_of(&mut self, magnitude: H, x: H) -> H {
        let negative = self.sign_bit(ScalarType::F64, x);
        let negated = self.un(Uo::Negate, magnitude);
        self.select(negative, negated, magnitude)
    }
}
