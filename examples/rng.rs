//! Random inputs for the examples: the project's deterministic test generator, plus
//! normally distributed values (as `torch.randn`) for softmax.

pub use rutile::ir::testing::Rng;

/// `n` approximately normal floats (a scaled sum of four uniforms), never exactly zero.
pub fn normal_f32s(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let v = ((0..4).map(|_| rng.unit()).sum::<f64>() - 2.0) as f32 * 1.7;
            if v == 0.0 {
                f32::MIN_POSITIVE
            } else {
                v
            }
        })
        .collect()
}
