//! libdevice's `jn` and `yn` of f64 values, written out in f64 ops (bessel_n.rs routes f64
//! here), by bessel_n.rs's recurrences from f64_bessel_jy.rs's orders 0 and 1: upward for
//! `Y_n`, and for `J_n` where `x` is at least the order; below, downward (Miller's method)
//! from an even order `m = n + 40 + 2·√(40n)`, which leaves the start's error below f64's
//! last place, normalized by `J_0 + 2·(J_2 + J_4 + ...) = 1`. Below 2^-27, where `J_n(x) =
//! (x/2)^n/n!` to f64's precision, that product, so that the downward recurrence (whose
//! steps grow by `2j/x`) never overflows. `2/x` is taken in two parts, so that its rounding does not add up over the steps.
//! `core-ir/tests/f64_bessel.rs` measures both against the libm crate's (musl's).

use super::bessel_n::{downward, first_term};
use super::f64_math::divide;
use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F64, I32};

/// The downward recurrence's values are scaled by `RESCALE` once they pass `BIG` (each step
/// grows them by at most `2m·2^27`, far below the room left).
const BIG: f64 = 1.0e200;
const RESCALE: f64 = 1.0e-200;
/// Below this `J_n(x) = (x/2)^n/n!`: the next term is `(x/2)²/(n+1)` of it, below 2^-57.
const TINY: f64 = 7.450_580_596_923_828e-9;

impl KernelBuilder {
    /// `J_n(x)` for f64 `x` and a scalar i32 order `n`, special values included.
    pub(super) fn f64_jn<'b>(&'b self, n: Value<'b>, x: Value<'b>) -> Value<'b> {
        let order = n.abs();
        let j = self.f64_jn_positive(order, x.abs());
        // J_n(-x) = (-1)^n·J_n(x), and so for -n.
        let odd = (order & 1).eq(1);
        let flip = odd & (x.lt(0.0) ^ n.lt(0));
        let j = self.where_(flip, -j, j);
        self.where_(x.isnan(), x, j)
    }

    /// `Y_n(x)` for f64 `x` and a scalar i32 order `n`, special values included.
    pub(super) fn f64_yn<'b>(&'b self, n: Value<'b>, x: Value<'b>) -> Value<'b> {
        let order = n.abs();
        let (y0, y1) = (x.y0(), x.y1());
        // Upward: (Y_(k-1), Y_k) to (Y_k, Y_(k+1)) for k = 1 .. order - 1; -∞ stays.
        let two_over_x = two_over(x);
        let steps = self.for_range(1, order, 1, &[y0, y1], |k, f| {
            let next = times(two_over_x, f[1] * k.to(F64)) - f[0];
            let next = self.where_(f[1].eq(f64::NEG_INFINITY), f64::NEG_INFINITY, next);
            vec![f[1], next]
        });
        let y = self.where_(order.eq(0), y0, steps[1]);
        let odd = (order & 1).eq(1);
        let y = self.where_(odd & n.lt(0), -y, y);
        self.where_(x.lt(0.0) | x.isnan(), f64::NAN, y)
    }

    /// `J_order(a)` for f64 `a ≥ 0` (or NaN), `order` a scalar i32 ≥ 0.
    fn f64_jn_positive<'b>(&'b self, order: Value<'b>, a: Value<'b>) -> Value<'b> {
        let (j0, j1) = (a.j0(), a.j1());
        let two_over_a = two_over(a);
        // Upward, where a >= order.
        let up = self.for_range(1, order, 1, &[j0, j1], |k, f| {
            vec![f[1], times(two_over_a, f[1] * k.to(F64)) - f[0]]
        });
        let up = self.where_(order.eq(0), j0, up[1]);
        // Downward from an even m: (J_(j+1), J_j) to (J_j, J_(j-1)) for j = m .. 1, keeping
        // J_order where j - 1 = order and the even orders' sum. Tiny a are held at TINY
        // here (they take the product below).
        let b = a.maximum(TINY);
        let two_over_b = two_over(b);
        let m = order + ((order.to(F64) * 40.0).sqrt() * 2.0).to(I32) + 40;
        let m = (m >> 1) << 1;
        let (kept, norm) = downward(order, m, b, (BIG, RESCALE), |j, here| {
            times(two_over_b, here * j.to(F64))
        });
        let down = divide(kept, norm);
        let first_term = first_term(order, a, |half, k| divide(half, self.zeros_like(half) + k.to(F64)));
        let down = self.where_(a.lt(TINY), first_term, down);
        let r = self.where_(a.ge(order.to(F64)) | order.le(1), up, down);
        self.where_(a.eq(0.0), self.where_(order.eq(0), 1.0, 0.0), r)
    }
}

/// `2/x` in two parts, the quotient and its residual's quotient (0 where that is not
/// finite): the recurrences multiply by `2/x` once a step, and its rounding alone would
/// grow their error by half an ulp a step, in the same direction every step.
fn two_over(x: Value<'_>) -> (Value<'_>, Value<'_>) {
    let k = x.builder;
    let hi = divide(k.zeros_like(x) + 2.0, x);
    let r = (-hi).fma(x, 2.0);
    (hi, k.where_(r.abs().lt(f64::INFINITY), r / x, 0.0))
}

/// `v·(hi + lo)` for `2/x` in two parts.
fn times<'b>((hi, lo): (Value<'b>, Value<'b>), v: Value<'b>) -> Value<'b> {
    v * hi + v * lo
}
