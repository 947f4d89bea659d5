//! Float arithmetic rounded in a chosen direction (`Op::Rounded`: libdevice's `add_rd`,
//! `div_ru`, `fma_rz`, ...), computed exactly in integers.
//!
//! Every operand is a finite float of the format `p` bits wide; the exact result of an add,
//! product, quotient, square root or fused multiply-add is an integer significand times a
//! power of two (quotients and roots: 64 or more correct bits and a sticky bit that says
//! whether anything nonzero lies below them), which [`round_exact`] rounds to the format as
//! IEEE 754 defines each direction, subnormals and overflow included. No host float
//! operation rounds on the way, so the result does not depend on the host's rounding mode
//! or on how the compiler contracts arithmetic. Infinities, NaNs and zeros take the IEEE
//! results of the plain operations, whose signs are those of the rounding direction only for
//! an exact zero sum (`x + (-x)` is `-0` rounding down, `+0` otherwise).

use crate::ir::{RoundedOp, Rounding};
use crate::types::ScalarType;

/// A binary floating-point format: its precision and the exponents of its smallest normal
/// and largest finite numbers.
#[derive(Clone, Copy)]
struct Format {
    precision: u32,
    emin: i32,
    emax: i32,
}

const F32: Format = Format {
    precision: 24,
    emin: -126,
    emax: 127,
};
const F64: Format = Format {
    precision: 53,
    emin: -1022,
    emax: 1023,
};
const F16: Format = Format {
    precision: 11,
    emin: -14,
    emax: 15,
};
const BF16: Format = Format {
    precision: 8,
    emin: -126,
    emax: 127,
};

/// An exact value `(-1)^negative · m · 2^e`, plus `sticky`: nonzero bits lie below `m`'s
/// last (only where `m` has 60 bits or more, so that they never reach half of the last
/// place a format keeps).
#[derive(Clone, Copy, Debug)]
struct Exact {
    negative: bool,
    m: u128,
    e: i32,
    sticky: bool,
}

/// `op` of `args` (values of type `ty`, f32 or f64, held as f64) rounded as `rounding` says.
pub(crate) fn rounded(op: RoundedOp, rounding: Rounding, ty: ScalarType, args: &[f64]) -> f64 {
    let fmt = if ty == ScalarType::F32 { F32 } else { F64 };
    let round = |x: Exact| round_exact(x, fmt, rounding);
    let zero_sum_sign = rounding == Rounding::Down;
    match op {
        RoundedOp::Add | RoundedOp::Sub => {
            let (a, b) = (args[0], if op == RoundedOp::Sub { -args[1] } else { args[1] });
            if !a.is_finite() || !b.is_finite() {
                return a + b;
            }
            if a == 0.0 || b == 0.0 {
                // A zero addend: the other operand, exact, or a sum of zeros.
                return if b != 0.0 {
                    b
                } else if a != 0.0 {
                    a
                } else {
                    signed_zero_sum(a, b, zero_sum_sign)
                };
            }
            sum(decompose(a), decompose(b)).map_or(signed_zero(zero_sum_sign), round)
        }
        RoundedOp::Mul => {
            let (a, b) = (args[0], args[1]);
            if !a.is_finite() || !b.is_finite() || a == 0.0 || b == 0.0 {
                return a * b;
            }
            round(product(a, b))
        }
        RoundedOp::Div | RoundedOp::Rcp => {
            let (a, b) = if op == RoundedOp::Rcp {
                (1.0, args[0])
            } else {
                (args[0], args[1])
            };
            if !a.is_finite() || !b.is_finite() || a == 0.0 || b == 0.0 {
                return a / b;
            }
            round(quotient(a, b))
        }
        RoundedOp::Sqrt => {
            let a = args[0];
            if !a.is_finite() || a <= 0.0 {
                return a.sqrt();
            }
            round(root(a))
        }
        RoundedOp::Convert => convert_float(args[0], rounding, ty),
        RoundedOp::Fma => {
            let (a, b, c) = (args[0], args[1], args[2]);
            if !a.is_finite() || !b.is_finite() || !c.is_finite() {
                return a.mul_add(b, c);
            }
            if a == 0.0 || b == 0.0 {
                // An exact zero product: the sum is `c`, or a zero whose sign the rounding
                // direction picks when both are zeros of opposite signs.
                return if c == 0.0 {
                    signed_zero_sum(a * b, c, zero_sum_sign)
                } else {
                    c
                };
            }
            if c == 0.0 {
                return round(product(a, b));
            }
            sum(product(a, b), decompose(c)).map_or(signed_zero(zero_sum_sign), round)
        }
    }
}

/// f64 `x` rounded to `ty` (f32, f16 or bf16) toward `rounding` (`Op::Rounded`'s
/// `Convert`).
pub(crate) fn convert_float(x: f64, rounding: Rounding, ty: ScalarType) -> f64 {
    let fmt = match ty {
        ScalarType::F32 => F32,
        ScalarType::F16 => F16,
        ScalarType::BF16 => BF16,
        _ => return x,
    };
    if !x.is_finite() || x == 0.0 {
        // (Infinities, zeros and NaN are values of each; a NaN is quieted as `as` does.)
        return x as f32 as f64;
    }
    round_exact(decompose(x), fmt, rounding)
}

/// Integer `x` rounded to `ty` (f32 or f64) toward `rounding`.
pub(crate) fn convert_int(x: i128, rounding: Rounding, ty: ScalarType) -> f64 {
    if x == 0 {
        return 0.0;
    }
    let fmt = if ty == ScalarType::F32 { F32 } else { F64 };
    let exact = Exact {
        negative: x < 0,
        m: x.unsigned_abs(),
        e: 0,
        sticky: false,
    };
    round_exact(exact, fmt, rounding)
}

fn signed_zero(negative: bool) -> f64 {
    if negative {
        -0.0
    } else {
        0.0
    }
}

/// The IEEE sum of two zeros: their sign where they agree, else `-0` rounding down.
fn signed_zero_sum(a: f64, b: f64, down: bool) -> f64 {
    if a.is_sign_negative() == b.is_sign_negative() {
        a
    } else {
        signed_zero(down)
    }
}

/// A finite nonzero float as an exact value (f32 values are f64 values, so one decoding
/// serves both).
fn decompose(x: f64) -> Exact {
    let bits = x.to_bits();
    let field = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if field == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, field - 1075)
    };
    Exact {
        negative: x.is_sign_negative(),
        m: m as u128,
        e,
        sticky: false,
    }
}

fn bit_len(m: u128) -> i32 {
    128 - m.leading_zeros() as i32
}

/// `a · b`, exactly (at most 106 bits).
fn product(a: f64, b: f64) -> Exact {
    let (x, y) = (decompose(a), decompose(b));
    Exact {
        negative: x.negative != y.negative,
        m: x.m * y.m,
        e: x.e + y.e,
        sticky: false,
    }
}

/// `a / b`: 64 or 65 quotient bits and whether a remainder is left.
fn quotient(a: f64, b: f64) -> Exact {
    let (x, y) = (decompose(a), decompose(b));
    // Both significands to 64 bits, the dividend then widened by 64 more.
    let (sx, sy) = (64 - bit_len(x.m), 64 - bit_len(y.m));
    let n = (x.m << sx) << 64;
    let d = y.m << sy;
    Exact {
        negative: x.negative != y.negative,
        m: n / d,
        e: (x.e - sx) - (y.e - sy) - 64,
        sticky: n % d != 0,
    }
}

/// `sqrt(a)` of a positive finite `a`: 63 or 64 root bits and whether a remainder is left.
fn root(a: f64) -> Exact {
    let x = decompose(a);
    // The radicand to 126 or 127 bits, its exponent made even.
    let mut s = 126 - bit_len(x.m);
    if (x.e - s) % 2 != 0 {
        s += 1;
    }
    let n = x.m << s;
    let r = isqrt(n);
    Exact {
        negative: false,
        m: r,
        e: (x.e - s) / 2,
        sticky: r * r != n,
    }
}

/// The integer square root of `n`, rounded down (bit by bit).
fn isqrt(n: u128) -> u128 {
    let mut rem = n;
    let mut root = 0u128;
    let mut bit = 1u128 << 126;
    while bit > rem {
        bit >>= 2;
    }
    while bit != 0 {
        if rem >= root + bit {
            rem -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    root
}

/// `x + y` of two exact values without sticky bits (the larger one at most 106 bits),
/// exactly where it fits 126 bits, else with the smaller one's lost bits sticky; `None` for
/// an exact zero.
fn sum(x: Exact, y: Exact) -> Option<Exact> {
    let top = |v: &Exact| v.e + bit_len(v.m) - 1;
    let (big, small) = if top(&x) >= top(&y) { (x, y) } else { (y, x) };
    // The larger to 126 bits (room for a carry), the smaller aligned to its last place.
    let shift = 126 - bit_len(big.m);
    let (bm, be) = (big.m << shift, big.e - shift);
    let d = small.e - be;
    let (sm, sticky) = if d >= 0 {
        (small.m << d, false)
    } else if d > -128 {
        (small.m >> -d, small.m & ((1u128 << -d) - 1) != 0)
    } else {
        (0, small.m != 0)
    };
    let (negative, m) = if big.negative == small.negative {
        (big.negative, bm + sm)
    } else if sticky {
        // big - (sm + f) with 0 < f < 1: (big - sm - 1) + (1 - f).
        (big.negative, bm - sm - 1)
    } else if bm >= sm {
        (big.negative, bm - sm)
    } else {
        (small.negative, sm - bm)
    };
    (m != 0 || sticky).then_some(Exact {
        negative,
        m,
        e: be,
        sticky,
    })
}

/// `x` rounded to `fmt` in direction `rounding`, as an f64 (an f32 value for f32).
fn round_exact(x: Exact, fmt: Format, rounding: Rounding) -> f64 {
    debug_assert!(x.m != 0 && (!x.sticky || bit_len(x.m) >= 60));
    let p = fmt.precision as i32;
    let qmin = fmt.emin - (p - 1);
    let top = x.e + bit_len(x.m) - 1;
    // The place of the result's last bit: p bits below its first, or the subnormals'.
    let mut q = (top - (p - 1)).max(qmin);
    let shift = q - x.e;
    let (mut r, inexact, away) = if shift <= 0 {
        // Exact in the format; sticky bits (if any) lie far below half a place.
        (x.m << -shift, x.sticky, false)
    } else if shift >= 128 {
        (0, true, false)
    } else {
        let r = x.m >> shift;
        let rem = x.m & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let inexact = rem != 0 || x.sticky;
        // Whether the nearest is the next value up in magnitude (ties to even).
        let away = rem > half || (rem == half && (x.sticky || r & 1 == 1));
        (r, inexact, away)
    };
    let up = match rounding {
        Rounding::NearestEven => away,
        Rounding::TowardZero => false,
        Rounding::Down => inexact && x.negative,
        Rounding::Up => inexact && !x.negative,
    };
    if up {
        r += 1;
        if r == 1u128 << p {
            r >>= 1;
            q += 1;
        }
    }
    let sign = if x.negative { -1.0 } else { 1.0 };
    if r != 0 && q + bit_len(r) - 1 > fmt.emax {
        // Past the largest finite value: infinity, unless the direction rounds toward zero.
        let to_infinity = match rounding {
            Rounding::NearestEven => true,
            Rounding::TowardZero => false,
            Rounding::Down => x.negative,
            Rounding::Up => !x.negative,
        };
        let largest = (2.0 - 2f64.powi(1 - fmt.precision as i32)) * 2f64.powi(fmt.emax);
        return sign * if to_infinity { f64::INFINITY } else { largest };
    }
    sign * encode(r as u64, q, fmt)
}

/// The value `r · 2^q`, which `fmt` holds exactly (`r` below `2^p`).
fn encode(r: u64, q: i32, fmt: Format) -> f64 {
    let p = fmt.precision;
    let qmin = fmt.emin - (p as i32 - 1);
    if fmt.precision == 24 {
        let bits = if r < 1 << (p - 1) {
            debug_assert!(q == qmin || r == 0);
            r as u32
        } else {
            (((q + 23 + 127) as u32) << 23) | (r as u32 & ((1 << 23) - 1))
        };
        f32::from_bits(bits) as f64
    } else if p < 24 {
        // f16 and bf16: `r` of at most 11 bits, times a power of two f64 holds, exactly.
        r as f64 * 2f64.powi(q)
    } else {
        let bits = if r < 1 << (p - 1) {
            debug_assert!(q == qmin || r == 0);
            r
        } else {
            (((q + 52 + 1023) as u64) << 52) | (r & ((1 << 52) - 1))
        };
        f64::from_bits(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// IEEE's `nextUp` in `ty` (`-0` after the negative subnormal closest to zero).
    fn next_up(x: f64, ty: ScalarType) -> f64 {
        if x.is_nan() || x == f64::INFINITY {
            return x;
        }
        if ty == ScalarType::F32 {
            let v = x as f32;
            match v {
                0.0 => f32::from_bits(1) as f64,
                _ if v > 0.0 => f32::from_bits(v.to_bits() + 1) as f64,
                _ => f32::from_bits(v.to_bits() - 1) as f64,
            }
        } else {
            match x {
                0.0 => f64::from_bits(1),
                _ if x > 0.0 => f64::from_bits(x.to_bits() + 1),
                _ => f64::from_bits(x.to_bits() - 1),
            }
        }
    }

    /// Floats of every magnitude, subnormals and near-overflow values among them.
    fn sample(rng: &mut Rng, ty: ScalarType) -> f64 {
        let bits = rng.next_u64();
        if bits % 16 == 0 {
            // Zeros of both signs, which sums and products treat apart.
            return if bits % 32 == 0 { 0.0 } else { -0.0 };
        }
        let x = if ty == ScalarType::F32 {
            f32::from_bits(bits as u32) as f64
        } else {
            f64::from_bits(bits)
        };
        if x.is_finite() {
            x
        } else {
            1.5
        }
    }

    /// Near each other, so that sums cancel and quotients land near 1.
    fn close(rng: &mut Rng, x: f64, ty: ScalarType) -> f64 {
        let k = (rng.next_u64() % 5) as i32 - 2;
        let mut y = x;
        for _ in 0..k.abs() {
            y = if k > 0 { next_up(y, ty) } else { -next_up(-y, ty) };
        }
        if rng.next_u64() % 2 == 0 {
            -y
        } else {
            y
        }
    }

    fn native(op: RoundedOp, ty: ScalarType, a: &[f64]) -> f64 {
        if ty == ScalarType::F32 {
            let x: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            (match op {
                RoundedOp::Add => x[0] + x[1],
                RoundedOp::Sub => x[0] - x[1],
                RoundedOp::Mul => x[0] * x[1],
                RoundedOp::Div => x[0] / x[1],
                RoundedOp::Rcp => 1.0 / x[0],
                RoundedOp::Sqrt => x[0].sqrt(),
                RoundedOp::Fma => x[0].mul_add(x[1], x[2]),
                RoundedOp::Convert => x[0],
            }) as f64
        } else {
            match op {
                RoundedOp::Add => a[0] + a[1],
                RoundedOp::Sub => a[0] - a[1],
                RoundedOp::Mul => a[0] * a[1],
                RoundedOp::Div => a[0] / a[1],
                RoundedOp::Rcp => 1.0 / a[0],
                RoundedOp::Sqrt => a[0].sqrt(),
                RoundedOp::Fma => a[0].mul_add(a[1], a[2]),
                RoundedOp::Convert => a[0],
            }
        }
    }

    fn same(x: f64, y: f64) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    /// To nearest is the host's IEEE arithmetic bit for bit; down and up bracket it, one
    /// place apart where inexact, equal where exact; toward zero is one of them by sign.
    #[test]
    fn every_direction_brackets_the_hosts_correctly_rounded_result() {
        let mut rng = Rng::new(0x5eed_2026);
        for ty in [ScalarType::F32, ScalarType::F64] {
            for op in RoundedOp::ALL {
                for i in 0..20_000 {
                    let a0 = sample(&mut rng, ty);
                    let mut args = vec![a0];
                    for _ in 1..op.arity() {
                        let v = if i % 3 == 0 {
                            close(&mut rng, a0, ty)
                        } else {
                            sample(&mut rng, ty)
                        };
                        args.push(v);
                    }
                    if op == RoundedOp::Sqrt {
                        args[0] = args[0].abs();
                    }
                    let at = |r| rounded(op, r, ty, &args);
                    let (rn, rz, rd, ru) = (
                        at(Rounding::NearestEven),
                        at(Rounding::TowardZero),
                        at(Rounding::Down),
                        at(Rounding::Up),
                    );
                    let host = native(op, ty, &args);
                    assert!(same(rn, host), "{op:?} {ty} {args:?}: rn {rn:e}, host {host:e}");
                    if rn.is_nan() {
                        continue;
                    }
                    assert!(rd <= rn && rn <= ru, "{op:?} {ty} {args:?}: {rd:e} {rn:e} {ru:e}");
                    if rd != ru {
                        assert!(next_up(rd, ty) == ru, "{op:?} {ty} {args:?}: {rd:e} {ru:e}");
                    }
                    let toward_zero = if rd >= 0.0 && ru > 0.0 { rd } else { ru };
                    if rd != ru {
                        assert!(rz == toward_zero, "{op:?} {ty} {args:?}: rz {rz:e}");
                    }
                }
            }
        }
    }

    /// Where the exact value is known independently: f32 products and sums are exact in
    /// f64 (sums where the exponents are close), so the directed f32 results are the f32
    /// neighbours around them.
    #[test]
    fn directed_f32_results_are_the_neighbours_of_the_exact_value() {
        let mut rng = Rng::new(7);
        for _ in 0..50_000 {
            let a = (rng.unit() as f32 - 0.5) * 1e3;
            let b = (rng.unit() as f32 - 0.5) * 1e-2;
            for (op, exact) in [
                (RoundedOp::Mul, a as f64 * b as f64),
                (RoundedOp::Add, a as f64 + b as f64),
            ] {
                let args = [a as f64, b as f64];
                let rd = rounded(op, Rounding::Down, ScalarType::F32, &args);
                let ru = rounded(op, Rounding::Up, ScalarType::F32, &args);
                assert!(rd <= exact && exact <= ru, "{op:?} {a} {b}");
                assert!(rd == exact || next_up(rd, ScalarType::F32) == ru);
                assert!(rd as f32 as f64 == rd && ru as f32 as f64 == ru);
            }
        }
    }

    /// Conversions to nearest are the host's `as` (which rounds to nearest even), and the
    /// directed ones its neighbours around the exact value.
    #[test]
    fn conversions_bracket_the_hosts_nearest() {
        let mut rng = Rng::new(11);
        let (f, d) = (ScalarType::F32, ScalarType::F64);
        for _ in 0..50_000 {
            let bits = rng.next_u64();
            let i = (bits as i64) >> (bits % 40);
            let u = bits >> (bits % 40);
            let x = f64::from_bits(bits.rotate_left(7));
            let cases: [(f64, f64, f64, ScalarType, Option<i128>); 4] = [
                (i as f32 as f64, i as f64, 0.0, f, Some(i as i128)),
                (u as f32 as f64, u as f64, 0.0, f, Some(u as i128)),
                (i as f64, i as f64, 0.0, d, Some(i as i128)),
                (x as f32 as f64, x, 0.0, f, None),
            ];
            for (nearest, approx, _, ty, int) in cases {
                if !approx.is_finite() {
                    continue;
                }
                let at = |r| match int {
                    Some(v) => convert_int(v, r, ty),
                    None => convert_float(approx, r, ty),
                };
                let (rn, rd, ru, rz) = (
                    at(Rounding::NearestEven),
                    at(Rounding::Down),
                    at(Rounding::Up),
                    at(Rounding::TowardZero),
                );
                assert!(same(rn, nearest), "{int:?} {approx:e} to {ty}: {rn:e} {nearest:e}");
                assert!(
                    rd <= rn && rn <= ru && (rd == ru || next_up(rd, ty) == ru),
                    "{int:?} {approx:e}"
                );
                assert!(rz == if rd >= 0.0 { rd } else { ru }, "{int:?} {approx:e}");
            }
        }
    }

    /// f32 values converted to f16 and bf16 in every direction: to nearest is `half`'s
    /// conversion (correctly rounded from f32), down and up are neighbours bracketing the
    /// value (equal where exact), toward zero the one on zero's side; past the largest
    /// finite value the directions toward infinity give it, the others the largest.
    #[test]
    fn conversions_to_half_types_in_every_direction() {
        let mut rng = Rng::new(0x5eed_2027);
        let values = (0..20000)
            .map(|_| f32::from_bits(rng.next_u64() as u32))
            .filter(|x| x.is_finite());
        for x in values.chain([65519.0, 65520.0, 1e5, -1e5, 2f32.powi(-25), -2f32.powi(-25), 3.0e38]) {
            let v = x as f64;
            for (ty, nearest, next) in [
                (
                    ScalarType::F16,
                    half::f16::from_f32(x).to_f64(),
                    (|h: f64| {
                        let b = half::f16::from_f64(h);
                        half::f16::from_bits(b.to_bits() + 1).to_f64()
                    }) as fn(f64) -> f64,
                ),
                (
                    ScalarType::BF16,
                    half::bf16::from_f32(x).to_f64(),
                    (|h: f64| {
                        let b = half::bf16::from_f64(h);
                        half::bf16::from_bits(b.to_bits() + 1).to_f64()
                    }) as fn(f64) -> f64,
                ),
            ] {
                let c = |r| convert_float(v, r, ty);
                let (rn, rz, rd, ru) = (
                    c(Rounding::NearestEven),
                    c(Rounding::TowardZero),
                    c(Rounding::Down),
                    c(Rounding::Up),
                );
                assert!(same(rn, nearest), "{x:e} to {ty} nearest: {rn:e}, want {nearest:e}");
                assert!(rd <= v && v <= ru, "{x:e} to {ty}: {rd:e} {ru:e}");
                if rd == ru {
                    assert_eq!(rd, v, "{x:e} to {ty}");
                } else if rd.is_finite() && ru.is_finite() && rd != 0.0 {
                    // Neighbours: one step of the type apart (the next magnitude, sign and
                    // magnitude bits, from the one nearer zero).
                    let (inner, outer) = if v > 0.0 { (rd, ru) } else { (ru, rd) };
                    assert_eq!(next(inner), outer, "{x:e} to {ty}: {rd:e} {ru:e}");
                }
                assert!(
                    same(rz, if v > 0.0 { rd } else { ru }),
                    "{x:e} to {ty} toward zero: {rz:e}"
                );
            }
        }
        let c = |x: f64, r, ty| convert_float(x, r, ty);
        assert_eq!(c(1e5, Rounding::TowardZero, ScalarType::F16), 65504.0);
        assert_eq!(c(1e5, Rounding::Up, ScalarType::F16), f64::INFINITY);
        assert_eq!(c(-1e5, Rounding::Up, ScalarType::F16), -65504.0);
        assert_eq!(c(65519.0, Rounding::NearestEven, ScalarType::F16), 65504.0);
        assert_eq!(c(2f64.powi(-26), Rounding::Up, ScalarType::F16), 2f64.powi(-24));
        assert_eq!(c(f64::MAX, Rounding::Down, ScalarType::BF16), half::bf16::MAX.to_f64());
    }

    #[test]
    fn edges_of_the_range_and_signs_of_zero() {
        let f = ScalarType::F32;
        let max = f32::MAX as f64;
        let r = |op, mode, a: &[f64]| rounded(op, mode, f, a);
        assert_eq!(r(RoundedOp::Add, Rounding::Down, &[max, max]), max);
        assert_eq!(r(RoundedOp::Add, Rounding::Up, &[max, max]), f64::INFINITY);
        assert_eq!(r(RoundedOp::Add, Rounding::Up, &[-max, -max]), -max);
        assert_eq!(r(RoundedOp::Add, Rounding::TowardZero, &[-max, -max]), -max);
        let tiny = f32::from_bits(1) as f64;
        assert_eq!(r(RoundedOp::Mul, Rounding::Up, &[tiny, 0.5]), tiny);
        assert_eq!(r(RoundedOp::Mul, Rounding::Down, &[tiny, 0.5]), 0.0);
        assert!(r(RoundedOp::Mul, Rounding::Down, &[-tiny, 0.5]) == -tiny);
        assert!(r(RoundedOp::Sub, Rounding::Down, &[1.0, 1.0]).is_sign_negative());
        assert!(r(RoundedOp::Sub, Rounding::Up, &[1.0, 1.0]).is_sign_positive());
        assert!(r(RoundedOp::Fma, Rounding::Down, &[2.0, 3.0, -6.0]).is_sign_negative());
        // 1/3 lies between two f32s: nearest is the upper one (0.3333333432...).
        let (rd, ru) = (
            r(RoundedOp::Div, Rounding::Down, &[1.0, 3.0]),
            r(RoundedOp::Div, Rounding::Up, &[1.0, 3.0]),
        );
        assert!(rd < 1.0 / 3.0 && 1.0 / 3.0 < ru && next_up(rd, f) == ru);
        assert_eq!(ru, (1.0f32 / 3.0) as f64);
        assert_eq!(r(RoundedOp::Sqrt, Rounding::Up, &[4.0]), 2.0);
        assert!(r(RoundedOp::Sqrt, Rounding::Down, &[-1.0]).is_nan());
        // 1 + 2^-60 rounds up to the next f64 after 1, and down to 1.
        let e = 2f64.powi(-60);
        let d = ScalarType::F64;
        assert_eq!(rounded(RoundedOp::Add, Rounding::Up, d, &[1.0, e]), next_up(1.0, d));
        assert_eq!(rounded(RoundedOp::Add, Rounding::Down, d, &[1.0, e]), 1.0);
        assert_eq!(
            rounded(RoundedOp::Add, Rounding::Down, d, &[1.0, -e]),
            1.0 - f64::EPSILON / 2.0
        );
        assert_eq!(
            rounded(RoundedOp::Fma, Rounding::Up, d, &[1.0, 1.0, e]),
            next_up(1.0, d)
        );
    }
}
