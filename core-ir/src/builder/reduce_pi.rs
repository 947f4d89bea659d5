//! The reduction of an f32 angle by π/2 in integers, as Payne and Hanek do, exact on any
//! device and over the whole f32 range: what `tan`, `sin_precise` and `cos_precise` share.
//! (A reduction by fused multiply-adds is exact only where the device fuses them, which
//! Vulkan does not promise, and only for arguments of moderate size.)
//!
//! `a = m·2^E` with `m` its 24-bit significand. The bits of 2/π whose products with `m·2^E`
//! are multiples of 4 are skipped a word at a time (the quadrant is the multiple modulo 4),
//! and `m` times the next four words of 2/π (a 152-bit product of 32-bit words) holds the
//! multiple's last two bits and the 64 bits of the fraction after them, at a place the
//! exponent gives: three words taken from the product by a funnel shift. The fraction,
//! normalized by its leading zeros (an argument can lie within 2^-30 of a multiple, where
//! the fraction's top bits are all zeros), becomes an f32 by one rounding and is
//! multiplied by π/2 in two parts.

use super::{KernelBuilder, Value};
use crate::types::ScalarType::{F32, I32, U32};

/// 2/π in 256 fractional bits, most significant word first: enough for the largest f32,
/// whose exponent skips three words.
const TWO_OVER_PI: [u32; 8] = [
    0xA2F9_836E,
    0x4E44_1529,
    0xFC27_57D1,
    0xF534_DDC0,
    0xDB62_9599,
    0x3C43_9041,
    0xFE51_63AB,
    0xDEBB_C561,
];
/// π/2 as the f32 nearest it and the f32 nearest the rest.
#[allow(clippy::excessive_precision)]
pub(super) const FRAC_PI_2_PARTS: [f32; 2] = [1.570796370506286621, -4.371139000186243e-8];
/// 2^-32 and 2^-24.
const TWO_MINUS_32: f32 = 1.0 / 4_294_967_296.0;
const TWO_MINUS_24: f32 = 1.0 / 16_777_216.0;
/// Below this an argument is its own reduction (the nearest multiple of π/2 is 0).
const UNREDUCED: f32 = 0.5;

impl KernelBuilder {
    /// For finite f32 `a ≥ 0`: the quadrant of `a` (the multiple of π/2 nearest it, modulo
    /// 4, u32) and what is left, in `[-π/4, π/4]`; below 1/2, quadrant 0 and `a` itself.
    pub(super) fn reduce_by_half_pi_from_zero<'b>(&'b self, a: Value<'b>) -> (Value<'b>, Value<'b>) {
        let (quadrant, z) = self.reduce_by_half_pi(a);
        let small = a.lt(UNREDUCED);
        (
            self.where_(small, self.zeros_like(quadrant), quadrant),
            self.where_(small, a, z),
        )
    }

    /// For finite f32 `a ≥ 1/2`: the multiple of π/2 nearest `a`, modulo 4 (u32), and `a`
    /// less that multiple, in `[-π/4, π/4]` (f32, within about an ulp). Other `a` give
    /// values the callers replace.
    pub(super) fn reduce_by_half_pi<'b>(&'b self, a: Value<'b>) -> (Value<'b>, Value<'b>) {
        let bits = a.bitcast(U32);
        let m = (bits & 0x007F_FFFFu32) | 0x0080_0000u32;
        // E = biased exponent - 150. Words of 2/π skipped: j = max(0, E - 2) / 32, so that
        // every skipped bit's product is a multiple of 4 (E - i >= 2 for bit i <= 32j).
        let e = (bits >> 23).to(I32) - 150;
        let j = (e - 2).maximum(0) >> 5;
        let zero = self.zeros_like(m);
        let words: Vec<Value<'b>> = (0..4)
            .map(|k| {
                (1..4).fold(zero + TWO_OVER_PI[k], |w, s| {
                    self.where_(j.ge(s as i32), zero + TWO_OVER_PI[k + s], w)
                })
            })
            .collect();
        let product = product_words(m, &words);
        // m·2^E·(2/π) ≡ V·2^(E' - 128) modulo 4, E' = E - 32j: the unit is V's bit
        // 128 - E', and the window starts 64 bits below it, at b = 64 - E' (31 to 88).
        let b = (-(e - (j << 5)) + 64).to(U32);
        let (q, r) = (b >> 5u32, b & 31u32);
        let pick = |i: usize| {
            let at = |k: usize| product.get(k).copied().unwrap_or(zero);
            let w = self.where_(q.eq(1u32), at(i + 1), at(i));
            self.where_(q.eq(2u32), at(i + 2), w)
        };
        let (q0, q1, q2, q3) = (pick(0), pick(1), pick(2), pick(3));
        // Shifts by 32 (r = 0) give 0.
        let up = 32u32 - r;
        let low = (q0 >> r) | (q1 << up);
        let high = (q1 >> r) | (q2 << up);
        let ints = ((q2 >> r) | (q3 << up)) & 3u32;
        // A fraction of a half or more rounds the multiple up and is left as its negative
        // (the 64-bit two's complement), so that no subtraction loses its bits.
        let round_up = (high >> 31).eq(1u32);
        let quadrant = (ints + (high >> 31)) & 3u32;
        let neg_low = 0u32 - low;
        let neg_high = !high + low.eq(0u32).to(U32);
        let high = self.where_(round_up, neg_high, high);
        let low = self.where_(round_up, neg_low, low);
        // Normalized by the leading zeros of the 64 bits, then one rounding to f32: the top
        // 24 bits exact, the next 32 below them.
        let high_zero = high.eq(0u32);
        let lz = self.where_(high_zero, low.clz() + 32u32, high.clz());
        let s = lz & 31u32;
        let (h, l) = (self.where_(high_zero, low, high), self.where_(high_zero, zero, low));
        let h = (h << s) | (l >> (32u32 - s));
        let l = l << s;
        let top = (h & 0xFFFF_FF00u32).to(F32) * TWO_MINUS_32;
        let rest = ((h << 24u32) | (l >> 8u32)).to(F32) * (TWO_MINUS_32 * TWO_MINUS_24);
        // 2^-lz from the bits (lz is at most 64).
        let scale = ((127u32 - lz) << 23u32).bitcast(F32);
        let f = (top + rest) * scale;
        let z = f.fma(FRAC_PI_2_PARTS[0], f * FRAC_PI_2_PARTS[1]);
        (quadrant, self.where_(round_up, -z, z))
    }
}

/// `m·(w0 w1 w2 w3)` (u32 `m` below 2^24, four words most significant first) as five
/// words, least significant first, with their carries.
fn product_words<'b>(m: Value<'b>, w: &[Value<'b>]) -> Vec<Value<'b>> {
    let hi: Vec<Value<'b>> = w.iter().map(|&x| m.umulhi(x)).collect();
    let lo: Vec<Value<'b>> = w.iter().map(|&x| m * x).collect();
    let mut words = vec![lo[3]];
    let mut carry = None;
    for k in (0..3).rev() {
        // hi[k + 1] and lo[k] meet in one word, with the carry from the word below.
        let s = hi[k + 1] + lo[k];
        let mut c = s.lt(lo[k]).to(U32);
        let s = match carry {
            Some(cin) => {
                let t = s + cin;
                c = c + t.lt(cin).to(U32);
                t
            }
            None => s,
        };
        words.push(s);
        carry = Some(c);
    }
    words.push(hi[0] + carry.expect("three words below"));
    words
}
