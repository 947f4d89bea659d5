//! A small deterministic generator (splitmix64) for test inputs: never zeros, reproducible.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `n` floats uniform in [lo, hi).
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| lo + (hi - lo) * self.unit() as f32).collect()
    }
    /// `n` approximately normal floats (sum of uniforms), as `torch.randn`.
    pub fn normal_f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| ((0..4).map(|_| self.unit()).sum::<f64>() - 2.0) as f32 * 1.7).collect()
    }
}
