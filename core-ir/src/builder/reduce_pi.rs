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
use crate::types::ScalarType::{F32, F64, I32, I64, U32, U64};

/// 2/π in 1216 fractional bits, most significant word first: enough for the largest f64,
/// whose exponent skips 15 words (`scripts/two_over_pi.py` prints them); f32 takes the
/// first 256.
const TWO_OVER_PI: [u64; 19] = [
    0xA2F9_836E_4E44_1529,
    0xFC27_57D1_F534_DDC0,
    0xDB62_9599_3C43_9041,
    0xFE51_63AB_DEBB_C561,
    0xB724_6E3A_424D_D2E0,
    0x0649_2EEA_09D1_921C,
    0xFE1D_EB1C_B129_A73E,
    0xE882_35F5_2EBB_4484,
    0xE99C_7026_B45F_7E41,
    0x3991_D639_8353_39F4,
    0x9C84_5F8B_BDF9_283B,
    0x1FF8_97FF_DE05_980F,
    0xEF2F_118B_5A0A_6D1F,
    0x6D36_7ECF_27CB_09B7,
    0x4F46_3F66_9E5F_EA2D,
    0x7527_BAC7_EBE5_F17B,
    0x3D07_39F7_8A52_92EA,
    0x6BFB_5FB1_1F8D_5D08,
    0x5603_3046_FC7B_6BAB,
];

/// The `k`-th 32-bit word of 2/π, most significant first.
const fn two_over_pi_u32(k: usize) -> u32 {
    (TWO_OVER_PI[k / 2] >> (32 * (1 - k % 2))) as u32
}

/// π/2 as the f32 nearest it and the f32 nearest the rest.
#[allow(clippy::excessive_precision)]
pub(super) const FRAC_PI_2_PARTS: [f32; 2] = [1.570796370506286621, -4.371139000186243e-8];
/// π/2 as the f64 nearest it and the f64 nearest the rest.
#[allow(clippy::excessive_precision)]
pub(super) const FRAC_PI_2_F64: [f64; 2] = [std::f64::consts::FRAC_PI_2, 6.123_233_995_736_766e-17];
/// 2^-32 and 2^-24.
const TWO_MINUS_32: f32 = 1.0 / 4_294_967_296.0;
const TWO_MINUS_24: f32 = 1.0 / 16_777_216.0;
/// 2^-53.
const TWO_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;
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
                (1..4).fold(zero + two_over_pi_u32(k), |w, s| {
                    self.where_(j.ge(s as i32), zero + two_over_pi_u32(k + s), w)
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

    /// For finite f64 `a ≥ 1/2`: the multiple of π/2 nearest `a`, modulo 4 (u64), and `a`
    /// less that multiple as an unevaluated sum `hi + lo` (f64s, `|hi| ≤ π/4`, `lo` the
    /// next 53 bits or so). The method is the f32 one's on 64-bit words: 53-bit
    /// significands times four words of 2/π, and 128 bits of fraction after the multiple's
    /// last two, since an f64 can lie within 2^-61 of a multiple of π/2.
    pub(super) fn reduce_f64_by_half_pi<'b>(&'b self, a: Value<'b>) -> (Value<'b>, Value<'b>, Value<'b>) {
        let bits = a.bitcast(U64);
        let m = (bits & 0x000F_FFFF_FFFF_FFFFu64) | 0x0010_0000_0000_0000u64;
        // E = biased exponent - 1075 (-53 to 971). Words skipped: j = max(0, E - 2) / 64,
        // at most 15, so that every skipped bit's product is a multiple of 4.
        let e = (bits >> 52u64).to(I64) - 1075i64;
        let j = ((e - 2i64).maximum(0i64) >> 6i64).to(U64);
        let words: Vec<Value<'b>> = (0..4).map(|k| select_word(self, j, &TWO_OVER_PI[k..k + 16])).collect();
        let product = product_words(m, &words);
        // m·2^E·(2/π) ≡ P·2^(E' - 256) modulo 4, E' = E - 64j (-53 to 65): the unit is P's
        // bit 256 - E', and the window starts 128 bits below it, at b = 128 - E' (63 to
        // 181).
        let b = (-(e - (j.to(I64) << 6i64)) + 128i64).to(U64);
        let (q, r) = (b >> 6u64, b & 63u64);
        let zero = self.zeros_like(m);
        let pick = |i: usize| {
            let at = |k: usize| product.get(k).copied().unwrap_or(zero);
            let w = self.where_(q.eq(1u64), at(i + 1), at(i));
            self.where_(q.eq(2u64), at(i + 2), w)
        };
        let (q0, q1, q2, q3) = (pick(0), pick(1), pick(2), pick(3));
        // Shifts by 64 (r = 0) give 0.
        let up = 64u64 - r;
        let low = (q0 >> r) | (q1 << up);
        let high = (q1 >> r) | (q2 << up);
        let ints = ((q2 >> r) | (q3 << up)) & 3u64;
        // A fraction of a half or more rounds the multiple up and is left as its negative
        // (the 128-bit two's complement).
        let round_up = (high >> 63u64).eq(1u64);
        let quadrant = (ints + (high >> 63u64)) & 3u64;
        let neg_low = 0u64 - low;
        let neg_high = !high + low.eq(0u64).to(U64);
        let high = self.where_(round_up, neg_high, high);
        let low = self.where_(round_up, neg_low, low);
        // Normalized by the leading zeros of the 128 bits, then cut into a 53-bit top and
        // the 53 bits below it, each an f64 exactly.
        let high_zero = high.eq(0u64);
        let lz = self.where_(high_zero, low.clz() + 64u64, high.clz());
        let s = lz & 63u64;
        let (h, l) = (self.where_(high_zero, low, high), self.where_(high_zero, zero, low));
        let h = (h << s) | (l >> (64u64 - s));
        let l = l << s;
        let top = (h >> 11u64).to(F64);
        let rest = (((h & 0x7FFu64) << 42u64) | (l >> 22u64)).to(F64);
        // 2^-(53 + lz) from the bits (lz is at most 128).
        let scale = ((1023u64 - 53u64 - lz) << 52u64).bitcast(F64);
        let (fh, fl) = (top * scale, rest * scale * TWO_MINUS_53);
        // (fh + fl)·π/2: the product of the leading parts and its rounding error (by a fused
        // multiply-add), then the cross terms.
        let [p1, p2] = FRAC_PI_2_F64;
        let hi = fh * p1;
        let lo = fh.fma(p1, -hi) + (fh * p2 + fl * p1);
        let sum = hi + lo;
        let lo = lo - (sum - hi);
        let sign = |v: Value<'b>| self.where_(round_up, -v, v);
        (quadrant, sign(sum), sign(lo))
    }
}

/// `m·(w0 w1 w2 w3)` (`m` below 2^24 in u32 words, below 2^53 in u64 words; four words
/// most significant first) as five words, least significant first, with their carries.
fn product_words<'b>(m: Value<'b>, w: &[Value<'b>]) -> Vec<Value<'b>> {
    let word = m.dtype().expect("an integer word");
    let hi: Vec<Value<'b>> = w.iter().map(|&x| m.umulhi(x)).collect();
    let lo: Vec<Value<'b>> = w.iter().map(|&x| m * x).collect();
    let mut words = vec![lo[3]];
    let mut carry = None;
    for k in (0..3).rev() {
        // hi[k + 1] and lo[k] meet in one word, with the carry from the word below.
        let s = hi[k + 1] + lo[k];
        let mut c = s.lt(lo[k]).to(word);
        let s = match carry {
            Some(cin) => {
                let t = s + cin;
                c = c + t.lt(cin).to(word);
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

/// `words[j]` for u64 `j` below `words.len()` (a power of two), by a tree of selects on
/// `j`'s bits.
fn select_word<'b>(k: &'b KernelBuilder, j: Value<'b>, words: &[u64]) -> Value<'b> {
    let mut level: Vec<Value<'b>> = words.iter().map(|&w| k.zeros_like(j) + w).collect();
    let mut bit = 0u32;
    while level.len() > 1 {
        let set = ((j >> bit) & 1u64).eq(1u64);
        level = level.chunks(2).map(|p| k.where_(set, p[1], p[0])).collect();
        bit += 1;
    }
    level[0]
}
