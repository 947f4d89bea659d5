//! Inputs: random values of each type with its special values, per domain.

use super::*;

/// A deterministic generator (splitmix64).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub(crate) fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.u64() % n
    }
    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// What values an input takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// Anything of the type: special values (±0, ±inf, NaN, subnormals, the largest
    /// magnitudes; MIN, MAX, -1, 0) and random values.
    General,
    /// As `General` without 0 for integers (divisors: integer division by zero is
    /// unspecified on GPUs).
    NonZero,
    /// Shift amounts: 0 to the width + 2.
    Shift,
    /// Floats uniform in `[lo, hi]` and spread over magnitudes `2^lo2 .. 2^hi2` (both signs
    /// if `lo < 0`), plus ±0, ±inf and NaN: the argument range of a transcendental.
    Range { lo: f64, hi: f64, lo2: i32, hi2: i32 },
    /// Finite floats of moderate size (sums, atomic adds), or integers in the full range.
    Moderate,
    /// 0 or 1.
    Flag,
}

pub(super) fn float_specials(t: ScalarType) -> Vec<f64> {
    let (min_sub, max_sub, min_norm, max) = match t {
        _ if t.is_fp8() => {
            let f = rutile::ir::fp8::format_of(t).expect("an fp8 type");
            let (min_sub, min_norm) = (
                2f64.powi(f.min_exponent() - f.mantissa as i32),
                2f64.powi(f.min_exponent()),
            );
            (min_sub, min_norm - min_sub, min_norm, f.max)
        }
        F16 => (2f64.powi(-24), 2f64.powi(-14) - 2f64.powi(-24), 2f64.powi(-14), 65504.0),
        BF16 => (
            2f64.powi(-133),
            2f64.powi(-126) - 2f64.powi(-133),
            2f64.powi(-126),
            half::bf16::MAX.to_f64(),
        ),
        F32 => (
            f32::from_bits(1) as f64,
            f32::from_bits(0x007f_ffff) as f64,
            f32::MIN_POSITIVE as f64,
            f32::MAX as f64,
        ),
        _ => (
            f64::from_bits(1),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            f64::MIN_POSITIVE,
            f64::MAX,
        ),
    };
    vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        min_sub,
        -min_sub,
        max_sub,
        min_norm,
        -min_norm,
        max,
        -max,
        1.0,
        -1.0,
        0.5,
        2.5,
        -2.5,
        3.0,
    ]
}

pub(super) fn int_specials(t: ScalarType) -> Vec<i128> {
    let (min, max) = int_range(t);
    vec![min, max, min + 1, max - 1, -1, 0, 1, 2, -2, 7]
}

/// `n` values of type `t` from `domain`, never all zero; the first ones are the special
/// values (so that a single-element case still sees one of them, seeded).
pub fn generate(t: ScalarType, n: usize, domain: Domain, seed: u64) -> Vec<V> {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ t.bits() as u64);
    let mut out: Vec<V> = Vec::with_capacity(n);
    if t.is_float() {
        let specials = float_specials(t);
        for i in 0..n {
            let x = match domain {
                Domain::General | Domain::NonZero => match rng.below(4) {
                    0 => rng.pick(&specials),
                    1 => rng.range(-10.0, 10.0),
                    _ => {
                        let (lo, hi) = match t {
                            // One binade past the smallest subnormal and the largest value.
                            _ if t.is_fp8() => {
                                let f = rutile::ir::fp8::format_of(t).expect("an fp8 type");
                                (
                                    f.min_exponent() - f.mantissa as i32 - 1,
                                    f.max.log2().floor() as i32 + 1,
                                )
                            }
                            F16 => (-25, 16),
                            BF16 => (-134, 128),
                            F32 => (-150, 128),
                            _ => (-1075, 1024),
                        };
                        let e = rng.range(lo as f64, hi as f64).floor() as i32;
                        let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                        s * rng.range(1.0, 2.0) * 2f64.powi(e)
                    }
                },
                Domain::Range { lo, hi, lo2, hi2 } => match rng.below(8) {
                    0 => rng.pick(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0]),
                    1..=4 => rng.range(lo, hi),
                    _ => {
                        let e = rng.range(lo2 as f64, hi2 as f64).floor() as i32;
                        let s = if lo < 0.0 && rng.below(2) == 0 { -1.0 } else { 1.0 };
                        (s * rng.range(1.0, 2.0) * 2f64.powi(e)).clamp(lo, hi)
                    }
                },
                Domain::Moderate => {
                    let e = rng.range(-8.0, 8.0).floor() as i32;
                    let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                    s * rng.range(1.0, 2.0) * 2f64.powi(e)
                }
                Domain::Shift => rng.below(t.bits() as u64 + 3) as f64,
                Domain::Flag => rng.below(2) as f64,
            };
            // The first elements: the special values in order (General only).
            let x = if matches!(domain, Domain::General | Domain::NonZero)
                && i < specials.len()
                && seed.is_multiple_of(2)
            {
                specials[i]
            } else {
                x
            };
            // Transcendental ranges are f32 ranges (f64 transcendentals have f32 range on
            // some backends): round through f32 first.
            let x = if matches!(domain, Domain::Range { .. }) {
                x as f32 as f64
            } else {
                x
            };
            out.push(quantize(t, V::F(x)));
        }
    } else {
        let specials = int_specials(t);
        let (min, max) = int_range(t);
        for i in 0..n {
            let x = match domain {
                Domain::Shift => rng.below(t.bits() as u64 + 3) as i128,
                Domain::Flag => rng.below(2) as i128,
                _ => match rng.below(4) {
                    0 => rng.pick(&specials),
                    1 => rng.range(-100.0, 100.0) as i128,
                    _ => rng.u64() as i128 | ((rng.u64() as i128) << 64),
                },
            };
            let x = if matches!(domain, Domain::General | Domain::NonZero | Domain::Moderate)
                && i < specials.len()
                && seed.is_multiple_of(2)
            {
                specials[i]
            } else {
                x
            };
            let mut v = quantize(t, V::I(x.clamp(i128::MIN / 2, i128::MAX / 2)));
            if domain == Domain::NonZero && v == V::I(0) {
                v = V::I(if min < 0 { -1 } else { max });
            }
            out.push(v);
        }
    }
    if out.iter().all(|v| v.f() == 0.0) {
        out[0] = quantize(t, V::I(1));
    }
    out
}
