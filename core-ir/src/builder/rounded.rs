//! Float arithmetic rounded in a chosen direction, as CUDA's libdevice names it (`add_rd`,
//! `mul_ru`, `div_rz`, `sqrt_rn`, `fma_ru`, ...): one [`Op::Rounded`] each.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{Op, RoundedOp, Rounding, SourceLoc};
use crate::types::{ScalarType, Type};

impl KernelBuilder {
    /// `op` of `args` rounded once, toward `rounding`: the exact result rounded to the
    /// operands' type (f32 or f64), as libdevice's `add_rd`, `div_ru`, `fma_rz` and the
    /// like. Operands are brought to one type and shape as for arithmetic (literals take the
    /// other side's type). Unlike the plain operators, the op is never contracted with
    /// another or computed otherwise: `add_rounded(.., NearestEven)` is IEEE's `a + b`
    /// exactly, on every backend.
    ///
    /// Errors (recorded, as every op's): a count of operands other than the op's arity,
    /// operands of another type than f32 or f64.
    #[track_caller]
    pub fn rounded<'b>(&'b self, op: RoundedOp, rounding: Rounding, args: &[Operand<'b>]) -> Value<'b> {
        let loc = SourceLoc::caller();
        self.rounded_at(op, rounding, args, loc)
    }

    fn rounded_at<'b>(&'b self, op: RoundedOp, rounding: Rounding, args: &[Operand<'b>], loc: SourceLoc) -> Value<'b> {
        let name = op.name(rounding);
        let fallback = args
            .iter()
            .find_map(|a| match a {
                Operand::Value(v) => Some(self.ty_of(v.id)),
                _ => None,
            })
            .unwrap_or(Type::scalar(ScalarType::F32));
        if args.len() != op.arity() {
            let message = format!("takes {} operands, got {}", op.arity(), args.len());
            return self.fail(name, loc, message, fallback);
        }
        if op == RoundedOp::Convert {
            let message = "converts to a type of its own: build it with `Value::to_rounded`".to_string();
            return self.fail(name, loc, message, fallback);
        }
        // Every operand brought to the first's type and shape, then all to the unified one.
        let mut first = args[0];
        let mut rest = Vec::with_capacity(args.len() - 1);
        for &a in &args[1..] {
            let Some((x, y)) = self.unify(name, first, a, loc) else {
                return self.poison(fallback);
            };
            first = x.into();
            rest.push(y);
        }
        let Operand::Value(head) = first else {
            let message = "needs a block or scalar value among its operands, got only literals".to_string();
            return self.fail(name, loc, message, fallback);
        };
        let (ty, shape) = (self.ty_of(head.id), self.ty_of(head.id).shape);
        let mut ids = vec![head.id];
        for v in rest {
            let v = match ty.scalar_type() {
                Some(s) => self.cast_to(v, s, loc),
                None => v,
            };
            ids.push(self.broadcast_to(name, v, shape, loc).id);
        }
        self.emit1(
            Op::Rounded {
                op,
                rounding,
                args: ids,
            },
            None,
            loc,
        )
    }
}

impl<'b> Value<'b> {
    /// `self` converted to `dtype`, rounded toward `rounding` where the conversion is
    /// inexact: libdevice's `double2float_rd`, `int2float_ru`, `ll2float_rz`,
    /// `ull2double_rn`, `float2int_rd`, `double2ll_ru`, ...
    ///
    /// * An integer of 32 or 64 bits or an f64 to f32, and a 64-bit integer to f64: one
    ///   [`RoundedOp::Convert`], correctly rounded in the direction.
    /// * A float to an integer: rounded to an integral value in the direction (`rint`,
    ///   `trunc`, `floor`, `ceil`), then converted as [`Value::to`] does (saturating, NaN to
    ///   0, as PTX's `cvt.rmi.s32.f32` and the like).
    /// * f32 or f64 to f16 or bf16 (Triton's `tl.cast(x, dtype, fp_downcast_rounding=...)`,
    ///   which has `"rtne"` and `"rtz"`; here every direction): one [`RoundedOp::Convert`].
    /// * Conversions that are always exact (f32 to f64, 32-bit integers to f64, a type to
    ///   itself): as [`Value::to`].
    ///
    /// Errors (recorded): integer to integer (there is nothing to round), conversions from
    /// f16 and bf16 (exact to any float, and to integers `to_rounded` of their f32 does the
    /// same), and to or from the fp8 types.
    #[track_caller]
    pub fn to_rounded(self, dtype: ScalarType, rounding: Rounding) -> Value<'b> {
        let loc = SourceLoc::caller();
        let k = self.builder;
        let name = RoundedOp::Convert.name(rounding);
        let t = self.ty();
        let Some(from) = t.scalar_type() else {
            return k.fail(name, loc, format!("cannot convert pointers ({t}) to {dtype}"), t);
        };
        let wide = |s: ScalarType| matches!(s, ScalarType::F32 | ScalarType::F64) || s.is_int();
        let half = |s: ScalarType| matches!(s, ScalarType::F16 | ScalarType::BF16);
        let to_half = half(dtype) && matches!(from, ScalarType::F32 | ScalarType::F64);
        if !to_half && (!wide(from) || !wide(dtype) || (from.is_int() && dtype.is_int())) {
            let message = format!(
                "converts between f32, f64 and integers, a float on one side, or f32 or f64 to f16 or bf16, got {from} to {dtype}"
            );
            return k.fail(name, loc, message, t.with_elem(crate::types::Elem::Scalar(dtype)));
        }
        if from.is_float() && dtype.is_int() {
            let integral = match rounding {
                Rounding::NearestEven => self.rint(),
                Rounding::TowardZero => self.trunc(),
                Rounding::Down => self.floor(),
                Rounding::Up => self.ceil(),
            };
            return integral.to(dtype);
        }
        if !RoundedOp::converts(from, dtype) {
            // Exact whatever the direction.
            return self.to(dtype);
        }
        k.emit1(
            Op::Rounded {
                op: RoundedOp::Convert,
                rounding,
                args: vec![self.id],
            },
            Some(t.with_elem(crate::types::Elem::Scalar(dtype))),
            loc,
        )
    }

    /// `self + other` rounded toward `rounding`: libdevice's `add_rn`, `add_rz`, `add_rd`,
    /// `add_ru` (f32 and f64; see [`KernelBuilder::rounded`]).
    #[track_caller]
    pub fn add_rounded(self, other: impl Into<Operand<'b>>, rounding: Rounding) -> Value<'b> {
        self.builder.rounded_at(
            RoundedOp::Add,
            rounding,
            &[self.into(), other.into()],
            SourceLoc::caller(),
        )
    }

    /// `self - other` rounded toward `rounding` (libdevice's `sub_r*`, as `add_r*` of
    /// `-other`).
    #[track_caller]
    pub fn sub_rounded(self, other: impl Into<Operand<'b>>, rounding: Rounding) -> Value<'b> {
        self.builder.rounded_at(
            RoundedOp::Sub,
            rounding,
            &[self.into(), other.into()],
            SourceLoc::caller(),
        )
    }

    /// `self * other` rounded toward `rounding`: libdevice's `mul_rn`, ..., `mul_ru`.
    #[track_caller]
    pub fn mul_rounded(self, other: impl Into<Operand<'b>>, rounding: Rounding) -> Value<'b> {
        self.builder.rounded_at(
            RoundedOp::Mul,
            rounding,
            &[self.into(), other.into()],
            SourceLoc::caller(),
        )
    }

    /// `self / other` rounded toward `rounding`: libdevice's `div_rn`, ..., `div_ru`
    /// (correctly rounded on every backend, where `/` through Vulkan is the device's
    /// division).
    #[track_caller]
    pub fn div_rounded(self, other: impl Into<Operand<'b>>, rounding: Rounding) -> Value<'b> {
        self.builder.rounded_at(
            RoundedOp::Div,
            rounding,
            &[self.into(), other.into()],
            SourceLoc::caller(),
        )
    }

    /// `1 / self` rounded toward `rounding`: libdevice's `rcp_rn`, ..., `rcp_ru`.
    #[track_caller]
    pub fn rcp_rounded(self, rounding: Rounding) -> Value<'b> {
        self.builder
            .rounded_at(RoundedOp::Rcp, rounding, &[self.into()], SourceLoc::caller())
    }

    /// `sqrt(self)` rounded toward `rounding`: libdevice's `sqrt_rn`, ..., `sqrt_ru`.
    #[track_caller]
    pub fn sqrt_rounded(self, rounding: Rounding) -> Value<'b> {
        self.builder
            .rounded_at(RoundedOp::Sqrt, rounding, &[self.into()], SourceLoc::caller())
    }

    /// `self * b + c` rounded once toward `rounding`: libdevice's `fma_rn`, ..., `fma_ru`.
    #[track_caller]
    pub fn fma_rounded(self, b: impl Into<Operand<'b>>, c: impl Into<Operand<'b>>, rounding: Rounding) -> Value<'b> {
        let args = [self.into(), b.into(), c.into()];
        self.builder
            .rounded_at(RoundedOp::Fma, rounding, &args, SourceLoc::caller())
    }
}
