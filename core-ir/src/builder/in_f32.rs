//! What the math functions built from ops share: computing f16 and bf16 in f32 (and
//! refusing other types with an error naming the function), polynomials by Horner's rule,
//! and sign transfers by bits.

use super::{KernelBuilder, Operand, Value};
use crate::ir::SourceLoc;
use crate::types::{ScalarType, Shape};

impl KernelBuilder {
    /// `f` of `x` in f32, the result in `x`'s type: f16 and bf16 convert both ways; f64 and
    /// non-floats are an error naming `op`.
    pub(super) fn in_f32<'b>(
        &'b self,
        op: &str,
        x: Value<'b>,
        loc: SourceLoc,
        f: impl FnOnce(Value<'b>) -> Value<'b>,
    ) -> Value<'b> {
        let x = self.adopt(op, x, loc);
        if self.is_poisoned(x.id) {
            return self.poison(x.ty());
        }
        match x.dtype() {
            Some(ScalarType::F32) => f(x),
            Some(t) if computed_in_f32(Some(t)) => f(x.to(ScalarType::F32)).to(t),
            _ => {
                let message = format!("takes f16, bf16 or f32 (computed in f32), got {}", x.ty());
                self.fail(op, loc, message, x.ty())
            }
        }
    }

    /// `f` of `x` as [`KernelBuilder::in_f32`] computes it, or `g` of an f64 `x`: the
    /// functions with an f64 form (`f64_*.rs`). Non-floats are an error naming `op`.
    pub(super) fn in_f32_or_f64<'b>(
        &'b self,
        op: &str,
        x: Value<'b>,
        loc: SourceLoc,
        f: impl FnOnce(Value<'b>) -> Value<'b>,
        g: impl FnOnce(Value<'b>) -> Value<'b>,
    ) -> Value<'b> {
        let x = self.adopt(op, x, loc);
        if self.is_poisoned(x.id) {
            return self.poison(x.ty());
        }
        match x.dtype() {
            Some(ScalarType::F64) => g(x),
            t if computed_in_f32(t) => self.in_f32(op, x, loc, f),
            _ => {
                let message = format!("takes f16, bf16, f32 (computed in f32) or f64, got {}", x.ty());
                self.fail(op, loc, message, x.ty())
            }
        }
    }

    /// `f` of `args` as [`KernelBuilder::in_f32_n`] computes it, or `g` of them in f64
    /// where one is f64 and all are floats (broadcast to one shape, the others widened).
    pub(super) fn in_f32_or_f64_n<'b>(
        &'b self,
        op: &str,
        args: &[Value<'b>],
        loc: SourceLoc,
        f: impl FnOnce(&[Value<'b>]) -> Value<'b>,
        g: impl FnOnce(&[Value<'b>]) -> Value<'b>,
    ) -> Value<'b> {
        let args: Vec<Value<'b>> = args.iter().map(|&v| self.adopt(op, v, loc)).collect();
        if args.iter().any(|v| self.is_poisoned(v.id)) {
            return self.poison(args[0].ty());
        }
        let any_f64 = args.iter().any(|v| v.dtype() == Some(ScalarType::F64));
        let floats = args.iter().all(|v| v.dtype().is_some_and(|t| t.is_float()));
        if !(any_f64 && floats) {
            return self.in_f32_n(op, &args, loc, f);
        }
        let Some(shape) = self.common_shape(op, &args, loc) else {
            return self.poison(args[0].ty());
        };
        let wide: Vec<Value<'b>> = args
            .iter()
            .map(|&v| self.broadcast_to(op, v.to(ScalarType::F64), shape, loc))
            .collect();
        g(&wide)
    }

    /// The shape `args` broadcast to, or `None` after an error naming `op`.
    fn common_shape(&self, op: &str, args: &[Value<'_>], loc: SourceLoc) -> Option<Shape> {
        let shape = args[1..]
            .iter()
            .try_fold(args[0].ty().shape, |s, v| Shape::broadcast(s, v.ty().shape));
        if shape.is_none() {
            let shapes = listed(args.iter().map(|v| v.ty().shape.to_string()));
            let message = format!("shapes {shapes} cannot be broadcast together");
            let _ = self.fail(op, loc, message, args[0].ty());
        }
        shape
    }

    /// `f` of `args` in f32, broadcast to one shape, the result in their type (f32 where
    /// they differ): f16 and bf16 convert both ways; f64, non-floats and shapes that do not
    /// broadcast are errors naming `op`.
    pub(super) fn in_f32_n<'b>(
        &'b self,
        op: &str,
        args: &[Value<'b>],
        loc: SourceLoc,
        f: impl FnOnce(&[Value<'b>]) -> Value<'b>,
    ) -> Value<'b> {
        let args: Vec<Value<'b>> = args.iter().map(|&v| self.adopt(op, v, loc)).collect();
        if args.iter().any(|v| self.is_poisoned(v.id)) {
            return self.poison(args[0].ty());
        }
        let types = || listed(args.iter().map(|v| v.ty().to_string()));
        if !args.iter().all(|v| computed_in_f32(v.dtype())) {
            let message = format!("takes f16, bf16 or f32 (computed in f32), got {}", types());
            return self.fail(op, loc, message, args[0].ty());
        }
        let Some(shape) = self.common_shape(op, &args, loc) else {
            return self.poison(args[0].ty());
        };
        let first = args[0].dtype().unwrap();
        let out = if args.iter().all(|v| v.dtype() == Some(first)) {
            first
        } else {
            ScalarType::F32
        };
        let wide: Vec<Value<'b>> = args
            .iter()
            .map(|&v| self.broadcast_to(op, v.to(ScalarType::F32), shape, loc))
            .collect();
        f(&wide).to(out)
    }
}

/// `a`, `a and b`, `a, b and c`: items as a message lists them.
fn listed(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => items.join(""),
    }
}

/// Whether these functions take elements of type `t`: fp8, f16, bf16 and f32, computed in f32.
pub(super) fn computed_in_f32(t: Option<ScalarType>) -> bool {
    matches!(t, Some(ScalarType::F16 | ScalarType::BF16 | ScalarType::F32)) || t.is_some_and(ScalarType::is_fp8)
}

/// `c_0 z^(n-1) + ... + c_(n-1)` by Horner's rule, `coefficients` (two or more, f32 or
/// f64 as `z` is) highest first.
pub(super) fn horner<'b, C: Copy + Into<Operand<'b>>>(z: Value<'b>, coefficients: &[C]) -> Value<'b> {
    let mut acc = z * coefficients[0] + coefficients[1];
    for &c in &coefficients[2..] {
        acc = acc * z + c;
    }
    acc
}

/// `magnitude` (not negative, or NaN) with the sign of `sign` (f32), bit for bit, so that
/// `-0.0` gives `-0.0`.
pub(super) fn copysign<'b>(magnitude: Value<'b>, sign: Value<'b>) -> Value<'b> {
    let bits = magnitude.bitcast(ScalarType::I32) | (sign.bitcast(ScalarType::I32) & i32::MIN);
    bits.bitcast(ScalarType::F32)
}
