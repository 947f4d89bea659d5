//! Low-memory dropout, Triton's tutorial in its seeded form: no mask is stored; each
//! element's keep decision is `rand(seed, offset) > p`, which the same seed reproduces.
//! Checked against a CPU reference that draws the same Philox stream
//! (`rutile::ir::testing::philox`, written from the published algorithm).

use super::{timed, Outcome};
use crate::rng::Rng;
use rutile::ir::testing::philox;
use rutile::seeds;
use rutile::{Device, DeviceExt, LaunchConfig, Result};

/// Elements per program, as the tutorial's `BLOCK_SIZE`.
pub const BLOCK: u32 = 1024;

/// The CPU reference: `x / (1 - p)` where Triton's `rand(seed, i) > p`, else 0 (in `f32`,
/// the division correctly rounded). An `i32` seed counts as its sign extension, as Triton
/// converts it.
pub fn dropout_reference(x: &[f32], p: f32, seed: i32) -> Vec<f32> {
    let scale = 1.0f32 - p;
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            if philox::rand(seed as i64 as u64, i as u32) > p {
                v / scale
            } else {
                0.0
            }
        })
        .collect()
}

/// The walks the benchmark times and the GPU tests check: `(block, warps, stages)` of
/// [`DropoutForm::Walk`].
pub const WALK_SHAPES: [(u32, u32, u32); 6] = [
    (1024, 4, 2),
    (1024, 4, 3),
    (2048, 8, 2),
    (2048, 8, 3),
    (512, 4, 3),
    (512, 4, 4),
];

/// Which kernel runs the dropout, and its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropoutForm {
    /// The tutorial's kernel, a program a block of [`BLOCK`] elements.
    Tutorial,
    /// [`seeds::seeded_dropout_walk`]: programs that walk blocks of `block` elements on
    /// `warps`, the next `stages - 1` blocks copied ahead where the device has asynchronous
    /// copies, on as many programs as the device holds at once.
    Walk { block: u32, warps: u32, stages: u32 },
}

/// Runs the tutorial's kernel ([`DropoutForm::Tutorial`], what the host code runs on every
/// device: the walk measured no faster through either backend; `docs/performance.md`,
/// "Dropout on an H200"): `(output, device time of one launch in ms)`.
pub fn run_dropout(dev: &dyn Device, x: &[f32], p: f32, seed: i32) -> Result<(Vec<f32>, f64)> {
    run_dropout_form(dev, x, p, seed, DropoutForm::Tutorial)
}

/// Runs the seeded dropout on `dev` in `form`: `(output, device time of one launch in ms)`.
pub fn run_dropout_form(dev: &dyn Device, x: &[f32], p: f32, seed: i32, form: DropoutForm) -> Result<(Vec<f32>, f64)> {
    let n = x.len();
    let (xb, ob) = (dev.upload(x)?, dev.zeros::<f32>(n)?);
    let args = [(&xb).into(), (&ob).into(), (n as i32).into(), p.into(), seed.into()];
    let (kernel, config) = dropout_launch(dev, form, n, &args)?;
    let time_ms = timed(dev, &kernel, &config, &args)?;
    Ok((dev.download(&ob)?, time_ms))
}

/// The kernel and launch of `form` for `n` elements and the launch's `args`.
pub fn dropout_launch(
    dev: &dyn Device,
    form: DropoutForm,
    n: usize,
    args: &[rutile::Arg<'_>],
) -> Result<(rutile::Kernel, LaunchConfig)> {
    Ok(match form {
        DropoutForm::Tutorial => (
            seeds::seeded_dropout(BLOCK)?,
            LaunchConfig::grid1((n as u32).div_ceil(BLOCK)),
        ),
        DropoutForm::Walk { block, warps, stages } => {
            let kernel = seeds::seeded_dropout_walk(block, stages)?;
            let blocks = (n as u32).div_ceil(block);
            let config = dev.resident_grid(&kernel, LaunchConfig::grid1(blocks).num_warps(warps), args, blocks)?;
            (kernel, config)
        }
    })
}

/// How far `got` is from the reference: infinite where an element is kept on one side and
/// dropped on the other (the Philox streams differ), else the largest relative error of the
/// kept elements (the division is within 2.5 ulp on Vulkan, exact elsewhere).
pub fn dropout_error(got: &[f32], want: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for (&g, &w) in got.iter().zip(want) {
        if (g == 0.0) != (w == 0.0) || g.is_nan() {
            return f64::INFINITY;
        }
        if w != 0.0 {
            worst = worst.max(((g - w) / w).abs() as f64);
        }
    }
    worst
}

/// The relative error a kept element may have: 2.5 ulp of `f32` (Vulkan's division).
pub const TOLERANCE: f64 = 3.0e-7;

/// Dropout of `n` random `f32`s (never zero) with drop probability `p` and `seed`,
/// against the CPU reference.
pub fn dropout(dev: &dyn Device, n: usize, p: f32, seed: i32, rng_seed: u64) -> Result<Outcome> {
    let x = Rng::new(rng_seed).f32s(n, -2.0, 2.0);
    let (got, time_ms) = run_dropout(dev, &x, p, seed)?;
    let want = dropout_reference(&x, p, seed);
    let kept = want.iter().filter(|&&v| v != 0.0).count();
    Ok(Outcome {
        tutorial: "seeded dropout".into(),
        size: format!("{n}, p={p}"),
        device: dev.id(),
        error: dropout_error(&got, &want),
        tolerance: TOLERANCE,
        time_ms,
        detail: Some(format!("seed {seed}: {kept} of {n} kept")),
    })
}
