//! libdevice's Bessel functions of integer order `jn` and `yn`, from bessel_jy.rs's orders
//! 0 and 1 by the three-term recurrence `f_(k+1) = (2k/x)·f_k - f_(k-1)`, built from ops
//! every backend has. The order is one for the whole block (a scalar), so the recurrences
//! are loops the program runs once. f16 and bf16 compute in f32 and round once; f64 has
//! its own form in f64 ops, the same recurrences (f64_bessel_n.rs).
//!
//! `Y_n` grows with `n` for every `x`, so its recurrence runs upward from `Y0`, `Y1`,
//! stably. `J_n` does too only where `x ≥ n`; below, where `J_n` falls with `n`, the
//! recurrence runs downward (Miller's method): from an order `m` well above `n`, with
//! `J_(m+1) = 0` and `J_m = 1` (scaled down whenever they grow large), to `J_0`,
//! normalized by `J_0 + 2·(J_2 + J_4 + ...) = 1`. The downward start, `m = n + 24 +
//! 2·√(10n)` (even), leaves the start's error below f32's last place. Below 2^-12, where
//! `J_n(x) = (x/2)^n/n!` to f32's precision, that product: the downward steps grow by up to
//! `2m/x`, and from tiny `x` they overflowed (NaN where `J_n` is next to 0).
//! `core-ir/tests/bessel_n.rs` measures both against f64.

use super::{KernelBuilder, Operand, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType::{F32, I32};
use crate::types::Type;

/// The downward recurrence's values are scaled by `RESCALE` once they pass `BIG`.
const BIG: f32 = 1.0e20;
const RESCALE: f32 = 1.0e-20;
/// Below this `J_n(x) = (x/2)^n/n!`: the next term is `(x/2)²/(n+1)` of it, below 2^-26.
const TINY: f32 = 1.0 / 4096.0;

impl KernelBuilder {
    /// The Bessel function of the first kind of integer order `n` (a scalar, the same for
    /// the whole block) of `x` (floats), as `libdevice.jn`: [`KernelBuilder::j0`] and
    /// [`KernelBuilder::j1`] for orders 0 and 1, `J_(-n) = (-1)^n·J_n`; an error within
    /// `max(1.5, |n|/4)·2^-21` of the larger of `|J_n(x)|` and, where `|x| ≥ |n|`, the
    /// envelope `√(2/(π|x|))` (`core-ir/tests/bessel_n.rs` measured 1.16 units to order 5,
    /// 8.4 at order 50); NaN at NaN. f64 is computed in f64 ops by the same recurrences,
    /// within `max(16, 2|n|)` ulp of the same scale (`core-ir/tests/f64_bessel.rs` measured
    /// 4 for orders 0 and 1, 15 to order 10, 84 at 100, against the libm crate's).
    #[track_caller]
    pub fn jn<'b>(&'b self, n: impl Into<Operand<'b>>, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some(n) = self.order("jn", n.into(), loc) else {
            return self.poison(x.ty());
        };
        self.in_f32_or_f64(
            "jn",
            x,
            loc,
            |x| {
                let order = n.abs();
                let a = x.abs();
                let j = self.jn_positive(order, a);
                // J_n(-x) = (-1)^n·J_n(x), and so for -n.
                let odd = (order & 1).eq(1);
                let flip = odd & (x.lt(0.0f32) ^ n.lt(0));
                let j = self.where_(flip, -j, j);
                self.where_(x.isnan(), x, j)
            },
            |x| self.f64_jn(n, x),
        )
    }

    /// The Bessel function of the second kind of integer order `n` (a scalar, the same for
    /// the whole block) of `x` (floats), as `libdevice.yn`: [`KernelBuilder::y0`] and
    /// [`KernelBuilder::y1`] for orders 0 and 1, `Y_(-n) = (-1)^n·Y_n`; errors as
    /// [`KernelBuilder::jn`]'s, in f32 and in f64 (`core-ir/tests/bessel_n.rs`,
    /// `core-ir/tests/f64_bessel.rs`);
    /// `-∞` at 0 and where `Y_n` overflows, NaN below 0 and at NaN.
    #[track_caller]
    pub fn yn<'b>(&'b self, n: impl Into<Operand<'b>>, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let Some(n) = self.order("yn", n.into(), loc) else {
            return self.poison(x.ty());
        };
        self.in_f32_or_f64(
            "yn",
            x,
            loc,
            |x| {
                let order = n.abs();
                let (y0, y1) = (x.y0(), x.y1());
                // Upward: (Y_(k-1), Y_k) to (Y_k, Y_(k+1)) for k = 1 .. order - 1; -∞ stays.
                let two_over_x = 2.0f32 / x;
                let steps = self.for_range(1, order, 1, &[y0, y1], |k, f| {
                    let next = k.to(F32) * two_over_x * f[1] - f[0];
                    let next = self.where_(f[1].eq(f32::NEG_INFINITY), f32::NEG_INFINITY, next);
                    vec![f[1], next]
                });
                let y = self.where_(order.eq(0), y0, steps[1]);
                let odd = (order & 1).eq(1);
                let y = self.where_(odd & n.lt(0), -y, y);
                self.where_(x.lt(0.0f32) | x.isnan(), f32::NAN, y)
            },
            |x| self.f64_yn(n, x),
        )
    }

    /// `J_order(a)` for f32 `a ≥ 0` (or NaN), `order` a scalar i32 ≥ 0.
    fn jn_positive<'b>(&'b self, order: Value<'b>, a: Value<'b>) -> Value<'b> {
        let (j0, j1) = (a.j0(), a.j1());
        let two_over_a = 2.0f32 / a;
        // Upward, where a >= order.
        let up = self.for_range(1, order, 1, &[j0, j1], |k, f| {
            vec![f[1], k.to(F32) * two_over_a * f[1] - f[0]]
        });
        let up = self.where_(order.eq(0), j0, up[1]);
        // Downward from an even m: (J_(j+1), J_j) to (J_j, J_(j-1)) for j = m .. 1, keeping
        // J_order where j - 1 = order and the even orders' sum.
        let m = order + ((order.to(F32) * 10.0f32).sqrt() * 2.0f32).to(I32) + 24;
        let m = (m >> 1) << 1;
        // Tiny a are held at TINY here (they take the product below).
        let two_over_b = 2.0f32 / a.maximum(TINY);
        let scaling = (BIG as f64, RESCALE as f64);
        let (kept, norm) = downward(order, m, a, scaling, |j, here| j.to(F32) * two_over_b * here);
        let down = kept / norm;
        let first_term = first_term(order, a, |half, k| half / k.to(F32));
        let down = self.where_(a.lt(TINY), first_term, down);
        let r = self.where_(a.ge(order.to(F32)) | order.le(1), up, down);
        self.where_(a.eq(0.0f32), self.where_(order.eq(0), 1.0f32, 0.0f32), r)
    }

    /// The order of `jn` or `yn` as a scalar i32, or `None` after an error naming `op`.
    fn order<'b>(&'b self, op: &str, n: Operand<'b>, loc: SourceLoc) -> Option<Value<'b>> {
        let n = match n {
            Operand::Int(i) => match i32::try_from(i) {
                Ok(i) => return Some(self.scalar(i, I32)),
                Err(_) => {
                    let _ = self.fail(op, loc, format!("takes an i32 order, got {i}"), Type::scalar(I32));
                    return None;
                }
            },
            Operand::Value(v) => self.adopt(op, v, loc),
            other => {
                let what = match other {
                    Operand::Float(f) => format!("the float {f}"),
                    _ => "a boolean".to_string(),
                };
                let message = format!("takes an integer order, got {what}");
                let _ = self.fail(op, loc, message, Type::scalar(I32));
                return None;
            }
        };
        if self.is_poisoned(n.id) {
            return None;
        }
        if !n.ty().shape.is_scalar() || !n.dtype().is_some_and(|t| t.is_int()) {
            let message = format!(
                "takes its order as an integer scalar, the same for the block, got {}",
                n.ty()
            );
            let _ = self.fail(op, loc, message, n.ty());
            return None;
        }
        Some(n.to(I32))
    }
}

impl<'b> Value<'b> {
    /// `J_n(self)` for a scalar integer order `n`; see [`KernelBuilder::jn`].
    #[track_caller]
    pub fn jn(self, n: impl Into<Operand<'b>>) -> Value<'b> {
        self.builder.jn(n, self)
    }

    /// `Y_n(self)` for a scalar integer order `n`; see [`KernelBuilder::yn`].
    #[track_caller]
    pub fn yn(self, n: impl Into<Operand<'b>>) -> Value<'b> {
        self.builder.yn(n, self)
    }
}

/// Miller's downward recurrence for `J_order`, shared by the f32 and f64 forms: from
/// `(J_(m+1), J_m) = (0, 1)` at the even start `m` down to `J_0`, `J_(j-1) = step(j, J_j) -
/// J_(j+1)` with `step(j, v)` the form's `(2j/x)·v`, values past `big` scaled by `rescale`
/// all together (the ratios are what counts). `(kept, norm)` of `like`'s type: `J_order` is
/// `kept / norm`, the norm `J_0 + 2·(J_2 + J_4 + ...)`, which is 1 unscaled.
pub(super) fn downward<'b>(
    order: Value<'b>,
    m: Value<'b>,
    like: Value<'b>,
    (big, rescale): (f64, f64),
    step: impl Fn(Value<'b>, Value<'b>) -> Value<'b>,
) -> (Value<'b>, Value<'b>) {
    let k = like.builder;
    let zero = k.zeros_like(like);
    let one = zero + 1.0;
    let down = k.for_range(m, 0, -1, &[zero, one, zero, zero], |j, f| {
        let (above, here, kept, even_sum) = (f[0], f[1], f[2], f[3]);
        let below = step(j, here) - above;
        // j - 1 even: J_(j-1) joins the sum (J_0 too, counted once below).
        let even = ((j - 1) & 1).eq(0);
        let even_sum = k.where_(even, even_sum + below, even_sum);
        let kept = k.where_((j - 1).eq(order), below, kept);
        let large = below.abs().gt(big);
        let scale = |v: Value<'b>| k.where_(large, v * rescale, v);
        vec![scale(here), scale(below), scale(kept), scale(even_sum)]
    });
    let (j0_unscaled, kept, even_sum) = (down[1], down[2], down[3]);
    // J_0 + 2·(J_2 + J_4 + ...) = 1, the sum holding J_0 once.
    (kept, even_sum * 2.0 - j0_unscaled)
}

/// `(a/2)^order/order!`, `J_order(a)` for tiny `a`: a factor at a time (it underflows
/// gradually, as `J_n` does), each `quotient(a/2, k)` in the form's division.
pub(super) fn first_term<'b>(
    order: Value<'b>,
    a: Value<'b>,
    quotient: impl Fn(Value<'b>, Value<'b>) -> Value<'b>,
) -> Value<'b> {
    let k = a.builder;
    let half = a * 0.5;
    let one = k.zeros_like(a) + 1.0;
    k.for_range(1, order + 1, 1, &[one], |i, f| vec![f[0] * quotient(half, i)])[0]
}
