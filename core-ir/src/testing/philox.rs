//! A plain CPU Philox4x32, written from the published algorithm (Salmon, Moraes, Dror and
//! Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011, and its Random123
//! implementation), independent of the builder's expansion: the reference that the random
//! ops and the dropout tutorial are checked against.
//!
//! One round maps the counter `(X0, X1, X2, X3)` under the key `(K0, K1)` to
//! `(hi(M1·X2) ^ X1 ^ K0, lo(M1·X2), hi(M0·X0) ^ X3 ^ K1, lo(M0·X0))` with the multipliers
//! `M0 = 0xD2511F53`, `M1 = 0xCD9E8D57`; the key then grows by the Weyl constants
//! `(0x9E3779B9, 0xBB67AE85)` (the golden ratio and √3 - 1 as 32-bit fractions).

/// The paper's multipliers and Weyl constants for Philox4x32.
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The high and low words of the 64-bit product.
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with `rounds` rounds of `counter` under `key`.
pub fn philox4x32(counter: [u32; 4], key: [u32; 2], rounds: u32) -> [u32; 4] {
    let mut x = counter;
    let mut k = key;
    for round in 0..rounds {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, x[0]);
        let (hi1, lo1) = mulhilo(M1, x[2]);
        x = [hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0];
    }
    x
}

/// Triton's key for a seed: its low and high 32 bits (after converting it to `u64`).
pub fn key_of_seed(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// Triton's `randint4x(seed, offset)`: Philox4x32-10 of the counter `(offset, 0, 0, 0)`.
pub fn randint4x(seed: u64, offset: u32) -> [u32; 4] {
    philox4x32([offset, 0, 0, 0], key_of_seed(seed), 10)
}

/// Triton's `uint_to_uniform_float` of one `u32`: as `i32`, negatives `v` become `-v - 1`
/// (31 random bits), then times 4.6566127342e-10 in `f32` (the product rounded once).
pub fn uniform(bits: u32) -> f32 {
    let i = bits as i32;
    let v = if i < 0 { i.wrapping_neg().wrapping_sub(1) } else { i };
    v as f32 * (4.6566127342e-10f64 as f32)
}

/// Triton's `rand(seed, offset)`.
pub fn rand(seed: u64, offset: u32) -> f32 {
    uniform(randint4x(seed, offset)[0])
}

/// Triton's `randn(seed, offset)`, computed in `f64` from the two `f32` uniforms (a device's
/// `log`, `cos` and `sin` are approximations: compare with a tolerance).
pub fn randn(seed: u64, offset: u32) -> f64 {
    let r = randint4x(seed, offset);
    let u1 = uniform(r[0]).max(1.0e-7f64 as f32) as f64;
    let u2 = uniform(r[1]);
    let theta = (u2 * (std::f64::consts::TAU as f32)) as f64;
    (-2.0 * u1.ln()).sqrt() * theta.cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors of Philox4x32-10 published with Random123 (`kat_vectors`):
    /// counter and key all zeros, all ones, and digits of π.
    #[test]
    fn known_answers() {
        assert_eq!(
            philox4x32([0; 4], [0; 2], 10),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32([u32::MAX; 4], [u32::MAX; 2], 10),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                10
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_floats_stay_in_zero_to_one() {
        for bits in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
            let u = uniform(bits);
            assert!((0.0..1.0).contains(&u), "{bits:#x} -> {u}");
        }
        assert_eq!(uniform(0), 0.0);
        assert_eq!(uniform(u32::MAX), 0.0);
    }
}
