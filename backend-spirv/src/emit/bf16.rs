//! `bf16` arithmetic. naga has no `bf16`: a `bf16` register is an `f32` that holds a `bf16`
//! value (its low 16 bits zero), and every op that makes one computes in `f32` and rounds
//! the result to `bf16` once, to nearest even, with integer operations on the bits (no
//! float conversion that a driver could round its own way).
//!
//! One `f32` rounding and then one to `bf16` gives the correctly rounded `bf16` where the
//! `f32` result is exact (products, casts of narrower types) or is the correctly rounded
//! `f32` of a sum, difference, quotient or square root of `bf16` values (24 bits of `f32`
//! are at least twice `bf16`'s 8, plus two: the double rounding is innocuous). Elsewhere
//! the `f32` value is first rounded to odd, which keeps the information the second
//! rounding needs: `fma` (a product of 16 bits plus an addend), and casts from `f64` and
//! from 32- and 64-bit integers, which `f32` cannot hold exactly. The interpreter and the
//! PTX backend (`cvt.rn.bf16.f32` after a round-to-odd `cvt.rn`) round once as well.
//!
//! The fp8 types are held the same way (`fp8.rs` rounds them): the expression, cast and
//! `fma` paths here serve both, a value "held in f32".

use super::*;

impl Cx<'_> {
    /// `f32` `x` rounded to the nearest `bf16` (ties to even), still as an `f32`; NaN stays
    /// NaN (quiet), infinities stay, values beyond `bf16`'s largest round to infinity.
    pub(super) fn round_bf16(&mut self, x: H) -> H {
        let bits = self.as_(x, ScalarKind::Uint, None);
        let sixteen = self.u32c(16);
        let one = self.u32c(1);
        let up = self.bin(Bo::ShiftRight, bits, sixteen);
        let lsb = self.bin(Bo::And, up, one);
        let half = self.u32c(0x7fff);
        let bias = self.bin(Bo::Add, half, lsb);
        let sum = self.bin(Bo::Add, bits, bias);
        let high = self.u32c(0xffff_0000);
        let rounded = self.bin(Bo::And, sum, high);
        let quiet = self.u32c(0x0040_0000);
        let nan_bits = self.bin(Bo::InclusiveOr, bits, quiet);
        let high = self.u32c(0xffff_0000);
        let nan_bits = self.bin(Bo::And, nan_bits, high);
        let nan = self.is_nan(ScalarType::F32, x);
        let r = self.select(nan, nan_bits, rounded);
        self.as_(r, ScalarKind::Float, None)
    }

    /// An exact value rounded to odd in `f32` (toward zero, the last bit set where
    /// `inexact`), from `r`, one of the two `f32` around it (either), and whether the
    /// exact value lies toward zero from `r` (`inward`: the remainder's sign is not `r`'s).
    fn odd_from(&mut self, r: H, inexact: H, inward: H) -> H {
        let bits = self.as_(r, ScalarKind::Uint, None);
        let one = self.u32c(1);
        let below = self.bin(Bo::Subtract, bits, one);
        let away = self.bin(Bo::LogicalAnd, inexact, inward);
        let truncated = self.select(away, below, bits);
        let one = self.u32c(1);
        let odd = self.bin(Bo::InclusiveOr, truncated, one);
        let bits = self.select(inexact, odd, truncated);
        self.as_(bits, ScalarKind::Float, None)
    }

    /// `a + b` of `ty` (`f32` or `f64`) as an `f32` rounded to odd: the rounded sum and
    /// its exact error (Knuth's two-sum, six additions in no particular order of magnitude).
    fn sum_to_odd(&mut self, ty: ScalarType, a: H, b: H) -> H {
        let (s, err) = self.two_sum(a, b);
        if ty == ScalarType::F64 {
            return self.f64_to_f32_odd(s, Some(err));
        }
        // An infinite sum is beyond f32's range, so beyond bf16's: it stays.
        let finite = self.finite_f32(s);
        let z = self.float_lit(ScalarType::F32, 0.0);
        let nonzero = self.bin(Bo::NotEqual, err, z);
        let inexact = self.bin(Bo::LogicalAnd, finite, nonzero);
        let rs = self.sign_bit(ScalarType::F32, s);
        let es = self.sign_bit(ScalarType::F32, err);
        let inward = self.bin(Bo::NotEqual, rs, es);
        self.odd_from(s, inexact, inward)
    }

    /// Whether `f32` `x` is neither infinite nor NaN, from its bits.
    pub(super) fn finite_f32(&mut self, x: H) -> H {
        let bits = self.as_(x, ScalarKind::Uint, None);
        let e = self.u32c(0x7f80_0000);
        let exp = self.bin(Bo::And, bits, e);
        let e = self.u32c(0x7f80_0000);
        self.bin(Bo::NotEqual, exp, e)
    }

    /// `f64` `x` (plus `tail`, an exact remainder below half its ulp, where given) as an
    /// `f32` rounded to odd.
    pub(super) fn f64_to_f32_odd(&mut self, x: H, tail: Option<H>) -> H {
        let r = self.as_(x, ScalarKind::Float, Some(4));
        let back = self.as_(r, ScalarKind::Float, Some(8));
        // Exact where `r` is finite: within an ulp of `x`. Its sign is the remainder's
        // with `tail` added (a rounded sum keeps the exact sum's sign).
        let mut rem = self.bin(Bo::Subtract, x, back);
        if let Some(t) = tail {
            rem = self.bin(Bo::Add, rem, t);
        }
        let ax = self.math(Mf::Abs, &[x]);
        let max = self.float_lit(ScalarType::F64, f64::MAX);
        let x_finite = self.bin(Bo::LessEqual, ax, max);
        let x_nan = self.is_nan(ScalarType::F64, x);
        let x_number = self.un(Uo::LogicalNot, x_nan);
        let x_finite = self.bin(Bo::LogicalAnd, x_finite, x_number);
        // A finite `x` past f32's range: `r` is infinite, and the odd truncation is f32's
        // largest, which rounds to bf16's infinity as `x` does.
        let r_finite = self.finite_f32(r);
        let r_inf = self.un(Uo::LogicalNot, r_finite);
        let overflow = self.bin(Bo::LogicalAnd, r_inf, x_finite);
        let z = self.float_lit(ScalarType::F64, 0.0);
        let nonzero = self.bin(Bo::NotEqual, rem, z);
        let inexact = self.bin(Bo::LogicalOr, nonzero, overflow);
        let inexact = self.bin(Bo::LogicalAnd, inexact, x_finite);
        let rs = self.sign_bit(ScalarType::F32, r);
        let z = self.float_lit(ScalarType::F64, 0.0);
        let below = self.bin(Bo::Less, rem, z);
        let inward = self.bin(Bo::NotEqual, rs, below);
        let inward = self.bin(Bo::LogicalOr, inward, overflow);
        self.odd_from(r, inexact, inward)
    }

    /// `fma(x, y, z)` of `bf16` values, rounded once. The product is exact in f64 (and in
    /// f32 unless it falls below f32's normal range), the sum rounded to odd by two-sum:
    /// in f64 where the device has it, whose arithmetic rutile's words mark
    /// `NoContraction` (`exact_f64`); else in f32, which a driver may rearrange (Vulkan's
    /// own `fma` may round twice too).
    pub(super) fn fma_held(&mut self, ty: ScalarType, x: H, y: H, z: H) -> H {
        let s = if self.float64 {
            // f64 among the module's types, which is how `exact_f64` knows to mark it.
            self.ty(TypeInner::Scalar(Scalar::F64));
            let [x, y, z] = [x, y, z].map(|v| self.as_(v, ScalarKind::Float, Some(8)));
            let p = self.bin(Bo::Multiply, x, y);
            self.sum_to_odd(ScalarType::F64, p, z)
        } else {
            let p = self.bin(Bo::Multiply, x, y);
            self.sum_to_odd(ScalarType::F32, p, z)
        };
        self.round_held(ty, s)
    }

    /// `f32` `x` rounded to `ty`, a type held in `f32` (`bf16` or fp8).
    pub(super) fn round_held(&mut self, ty: ScalarType, x: H) -> H {
        if ty == ScalarType::BF16 {
            self.round_bf16(x)
        } else {
            self.round_fp8(ty, x)
        }
    }

    /// Integer `x` of `src` (32 or 64 bits) as an `f32` rounded to odd: its magnitude's
    /// bits past the 24 leading ones cleared, the last one kept set where any was, which
    /// converts exactly (integer operations only, which no driver rearranges).
    fn int_to_f32_odd(&mut self, src: ScalarType, x: H) -> H {
        let wide = src.bits() == 64;
        let unsigned = if wide { ScalarType::U64 } else { ScalarType::U32 };
        let m = if src.is_signed_int() {
            let a = self.math(Mf::Abs, &[x]);
            self.as_(a, ScalarKind::Uint, None)
        } else {
            x
        };
        // Leading zeros, and the bits past 24 significant ones: 8 - lz (40 - lz), or none.
        let (lz, spare) = if wide {
            let lo = self.as_(m, ScalarKind::Uint, Some(4));
            let s = self.int_lit(ScalarType::U64, 32);
            let hi = self.bin(Bo::ShiftRight, m, s);
            let hi = self.as_(hi, ScalarKind::Uint, Some(4));
            let lz_hi = self.math(Mf::CountLeadingZeros, &[hi]);
            let lz_lo = self.math(Mf::CountLeadingZeros, &[lo]);
            let c = self.u32c(32);
            let lz_lo = self.bin(Bo::Add, lz_lo, c);
            let z = self.u32c(0);
            let hi_zero = self.bin(Bo::Equal, hi, z);
            (self.select(hi_zero, lz_lo, lz_hi), 40)
        } else {
            (self.math(Mf::CountLeadingZeros, &[m]), 8)
        };
        let cap = self.u32c(spare);
        let lz = self.math(Mf::Min, &[lz, cap]);
        let cap = self.u32c(spare);
        let drop = self.bin(Bo::Subtract, cap, lz);
        let one = self.int_lit(unsigned, 1);
        let unit = self.bin(Bo::ShiftLeft, one, drop);
        let one = self.int_lit(unsigned, 1);
        let mask = self.bin(Bo::Subtract, unit, one);
        let low = self.bin(Bo::And, m, mask);
        let kept_mask = self.un(Uo::BitwiseNot, mask);
        let kept = self.bin(Bo::And, m, kept_mask);
        let z = self.int_lit(unsigned, 0);
        let inexact = self.bin(Bo::NotEqual, low, z);
        let z = self.int_lit(unsigned, 0);
        let jam = self.select(inexact, unit, z);
        let odd = self.bin(Bo::InclusiveOr, kept, jam);
        let f = self.as_(odd, ScalarKind::Float, Some(4));
        if !src.is_signed_int() {
            return f;
        }
        let z = self.int_lit(src, 0);
        let negative = self.bin(Bo::Less, x, z);
        let nf = self.un(Uo::Negate, f);
        self.select(negative, nf, f)
    }

    /// `x` of `src` converted with one rounding to `dst`, a type held in `f32` (`bf16` or
    /// fp8).
    pub(super) fn cast_to_held(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        use ScalarType::*;
        let wide = match src {
            _ if src == dst => return x,
            Bool => return self.cast(Bool, F32, x),
            // Held in f32 already, exactly.
            F32 | BF16 | F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz => x,
            F16 | I8 | I16 | U8 | U16 => self.cast(src, F32, x),
            F64 => self.f64_to_f32_odd(x, None),
            I32 | U32 | I64 | U64 => self.int_to_f32_odd(src, x),
        };
        self.round_held(dst, wide)
    }

    /// The value of expression `e` of type `ty`, held in `f32` (`bf16` or fp8): computed in
    /// `f32`, rounded once where the result can be inexact.
    pub(super) fn held_expr(&mut self, ty: ScalarType, e: &Expr) -> R<H> {
        use ScalarType::F32;
        Ok(match e {
            Expr::Const(Literal::Float(v)) => self.float_lit(ty, *v),
            Expr::Const(Literal::Int(v)) => self.float_lit(ty, *v as f64),
            // Rounded once, in its own direction (`rounded.rs`), not in f32 then again.
            Expr::Rounded(op, rounding, args) => self.rounded(*op, *rounding, ty, args)?,
            Expr::Cast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                self.cast_to_held(src, ty, x)
            }
            Expr::Bitcast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                if ty.is_fp8() {
                    self.bitcast_8(src, ty, x)
                } else {
                    self.bitcast_16(src, ty, x)
                }
            }
            Expr::Fma(a, b, c) => {
                let (x, y, z) = (self.read(*a), self.read(*b), self.read(*c));
                self.fma_held(ty, x, y, z)
            }
            Expr::Copy(_) | Expr::Param(_) | Expr::Select(..) | Expr::ShuffleXor { .. } | Expr::ShuffleIdx { .. } => {
                self.expr(F32, e)?
            }
            // Exact on bf16, E4M3 and E5M2 values: the result is one (integers below the
            // first that needs more bits are whole numbers of one step; `fmod` is exact).
            // The other fp8 formats round them: the `fnuz` ones have no negative zero, and
            // `float8e4b15` ends below 2 (its `floor(-1.875)` saturates back to -1.875).
            Expr::Unary(
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Rint,
                _,
            )
            | Expr::Binary(BinaryOp::Min | BinaryOp::Max | BinaryOp::Rem, ..) => {
                let r = self.expr(F32, e)?;
                if ty.is_fp8() && !ty.is_ocp_fp8() {
                    self.round_held(ty, r)
                } else {
                    r
                }
            }
            _ => {
                let r = self.expr(F32, e)?;
                self.round_held(ty, r)
            }
        })
    }

    /// The bits of 16-bit `x` of `src` as the 16-bit `dst` (`f16`, `bf16`, `i16`, `u16`,
    /// each held in 32 bits its own way).
    pub(super) fn bitcast_16(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        let bits = self.bits_16(src, x);
        self.of_bits_16(dst, bits)
    }

    /// The 16 bits of `x` of 16-bit `ty`, in the low half of a `u32`.
    pub(super) fn bits_16(&mut self, ty: ScalarType, x: H) -> H {
        match ty {
            ScalarType::F16 if self.int16 => {
                self.declare_u16();
                let b = self.as_(x, ScalarKind::Uint, None);
                self.as_(b, ScalarKind::Uint, Some(4))
            }
            ScalarType::F16 => {
                let wide = self.as_(x, ScalarKind::Float, Some(4));
                let z = self.lit(naga::Literal::F32(0.0));
                let pair_ty = self.ty(TypeInner::Vector {
                    size: naga::VectorSize::Bi,
                    scalar: Scalar::F32,
                });
                let pair = self.e(Expression::Compose {
                    ty: pair_ty,
                    components: vec![wide, z],
                });
                self.math(Mf::Pack2x16float, &[pair])
            }
            ScalarType::BF16 => {
                let b = self.as_(x, ScalarKind::Uint, None);
                let sixteen = self.u32c(16);
                self.bin(Bo::ShiftRight, b, sixteen)
            }
            _ => {
                let b = self.as_(x, ScalarKind::Uint, None);
                let m = self.u32c(0xffff);
                self.bin(Bo::And, b, m)
            }
        }
    }

    /// The value of 16-bit `ty` whose bits are the low half of `u32` `bits` (the high half
    /// ignored).
    pub(super) fn of_bits_16(&mut self, ty: ScalarType, bits: H) -> H {
        match ty {
            ScalarType::F16 if self.int16 => {
                self.declare_u16();
                let b = self.as_(bits, ScalarKind::Uint, Some(2));
                self.as_(b, ScalarKind::Float, None)
            }
            ScalarType::F16 => {
                let pair = self.math(Mf::Unpack2x16float, &[bits]);
                let x = self.index(pair, 0);
                self.as_(x, ScalarKind::Float, Some(2))
            }
            ScalarType::BF16 => {
                let sixteen = self.u32c(16);
                let b = self.bin(Bo::ShiftLeft, bits, sixteen);
                self.as_(b, ScalarKind::Float, None)
            }
            ScalarType::I16 => {
                let b = self.as_(bits, ScalarKind::Sint, None);
                self.narrow(ty, b)
            }
            _ => self.narrow(ScalarType::U16, bits),
        }
    }

    /// `u16` in the module's types, so that the WGSL writer enables 16-bit integers.
    fn declare_u16(&mut self) {
        self.ty(TypeInner::Scalar(Scalar {
            kind: ScalarKind::Uint,
            width: 2,
        }));
    }
}
