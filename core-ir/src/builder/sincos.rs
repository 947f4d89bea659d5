//! libdevice's `sin` and `cos` (CUDA's `sinf`, `cosf`) as `sin_precise` and `cos_precise`:
//! accurate for every finite argument, where the `sin` and `cos` ops are the hardware's
//! approximations, as Triton's `tl.sin` (PTX `sin.approx`: about 2^-21 absolute inside
//! `[-π, π]`, growing outside; Vulkan's `sin`: 2^-11 promised inside `[-π, π]`, nothing
//! outside). Built from ops every backend has, so that
//! the interpreter, PTX and SPIR-V compute them alike; f16 and bf16 compute in f32 and
//! round once; f64 is the `sin` and `cos` ops, which are accurate for f64 (f64_trig.rs).
//!
//! The argument is reduced by π/2 exactly (reduce_pi.rs), and `sin` or `cos` of the rest,
//! in `[-π/4, π/4]`, are Moshier's Cephes polynomials for single precision (`sinf`,
//! `cosf`), chosen and signed by the quadrant. `core-ir/tests/sincos.rs` measures them
//! against f64.

use super::in_f32::horner;
use super::{KernelBuilder, Value};
use crate::ir::{SourceLoc, UnaryOp};
use crate::types::ScalarType::{F32, F64, I32};

/// `sin(z) ≈ z + z·s·P(s)` and `cos(z) ≈ 1 - s/2 + s²·Q(s)`, `s = z²`, for `|z| <= π/4`:
/// the coefficients as Cephes publishes them, highest first.
#[allow(clippy::excessive_precision)]
const SIN_P: [f32; 3] = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1];
#[allow(clippy::excessive_precision)]
const COS_Q: [f32; 3] = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2];

impl KernelBuilder {
    /// `sin x` of an angle in radians (floats), as `libdevice.sin` (CUDA's `sinf`): within
    /// 2.5 ulp of the exact value for every finite `x` (`core-ir/tests/sincos.rs` measured
    /// 2.15, up to the largest f32 and next to multiples of π/2 too), `±0` at
    /// `±0`, NaN at infinities and NaN; f64 within an ulp (the `sin` op's f64 form). [`Value::sin`] is the hardware's approximation,
    /// faster and as Triton's `tl.sin`, but only absolutely accurate, inside `[-π, π]`.
    #[track_caller]
    pub fn sin_precise<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        if let Some(r) = self.f64_precise(x, UnaryOp::Sin) {
            return r;
        }
        self.in_f32("sin_precise", x, loc, |x| {
            let (quadrant, z) = self.reduce_by_half_pi_from_zero(x.abs());
            let (r, _) = self.quadrant_sin_cos(quadrant, z);
            let r = self.where_(x.abs().lt(f32::INFINITY), r, f32::NAN);
            // sin is odd: x's sign bit flips r's (so that sin(-0) = -0).
            (r.bitcast(I32) ^ (x.bitcast(I32) & i32::MIN)).bitcast(F32)
        })
    }

    /// `cos x` of an angle in radians (floats), as `libdevice.cos` (CUDA's `cosf`): within
    /// 2.5 ulp of the exact value for every finite `x` (`core-ir/tests/sincos.rs` measured
    /// 2.09), 1 at
    /// `±0`, NaN at infinities and NaN; f64 within an ulp (the `cos` op's f64 form). [`Value::cos`] is the hardware's approximation.
    #[track_caller]
    pub fn cos_precise<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        if let Some(r) = self.f64_precise(x, UnaryOp::Cos) {
            return r;
        }
        self.in_f32("cos_precise", x, loc, |x| {
            let (quadrant, z) = self.reduce_by_half_pi_from_zero(x.abs());
            let (_, r) = self.quadrant_sin_cos(quadrant, z);
            self.where_(x.abs().lt(f32::INFINITY), r, f32::NAN)
        })
    }

    /// `op` (`sin` or `cos`) of an f64 `x`, which the ops compute accurately already
    /// (f64_trig.rs); `None` for other types.
    fn f64_precise<'b>(&'b self, x: Value<'b>, op: UnaryOp) -> Option<Value<'b>> {
        (x.dtype() == Some(F64) && !self.is_poisoned(x.id)).then(|| self.f64_function(op, x).expect("sin and cos"))
    }

    /// `sin` and `cos` of `quadrant·π/2 + z` (u32 `quadrant`, f32 `z` within about π/4):
    /// the polynomials of `z`, chosen and signed by the quadrant.
    pub(super) fn quadrant_sin_cos<'b>(&'b self, quadrant: Value<'b>, z: Value<'b>) -> (Value<'b>, Value<'b>) {
        let s = z * z;
        let sin = (s * horner(s, &SIN_P)).fma(z, z);
        let cos = (s * s).fma(horner(s, &COS_Q), s.fma(-0.5f32, 1.0f32));
        (
            quarter_turns(quadrant, sin, cos),
            quarter_turns(quadrant + 1u32, sin, cos),
        )
    }
}

/// `sin(n·π/2 + y)` from `sin y` and `cos y`, for an integer value `n` of any type (its last
/// two bits read): `sin y`, `cos y`, `-sin y`, `-cos y`. `cos(n·π/2 + y)` is this at `n + 1`.
/// What the reductions by π/2 and by halves, f32's and f64's, share.
pub(super) fn quarter_turns<'b>(n: Value<'b>, sin: Value<'b>, cos: Value<'b>) -> Value<'b> {
    let k = n.builder;
    let r = k.where_((n & 1).eq(1), cos, sin);
    k.where_((n & 2).eq(2), -r, r)
}

impl<'b> Value<'b> {
    /// `sin self`, accurate for every argument; see [`KernelBuilder::sin_precise`].
    #[track_caller]
    pub fn sin_precise(self) -> Value<'b> {
        self.builder.sin_precise(self)
    }

    /// `cos self`, accurate for every argument; see [`KernelBuilder::cos_precise`].
    #[track_caller]
    pub fn cos_precise(self) -> Value<'b> {
        self.builder.cos_precise(self)
    }
}
