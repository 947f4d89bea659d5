//! Triton's grouped GEMM tutorial: a list of fp16 matrix products of different shapes in
//! one launch ([`seeds::grouped_matmul`]), its programs walking the problems' tiles, as
//! many programs as the device holds at once (the tutorial's `NUM_SM`). Where Triton's
//! kernel loads each problem's matrix pointers, rutile's loads where each problem's
//! matrices start in one buffer per operand (a Vulkan buffer has no address to load).
//! Checked against a CPU product of every problem.

use super::{timed, Outcome};
use crate::rng::Rng;
use half::f16;
use rutile::autotune::{Autotuner, Config, Tuned};
use rutile::seeds::{self, GroupedMatmulLayout, GroupedMatmulMeta};
use rutile::{Arg, Device, DeviceExt, DeviceType, Error, LaunchConfig, Result};

/// The tutorial's problems: squares of 1024, 512, 256 and 128.
pub const TUTORIAL_PROBLEMS: [(usize, usize, usize); 4] =
    [(1024, 1024, 1024), (512, 512, 512), (256, 256, 256), (128, 128, 128)];

/// Smaller problems, ragged ones among them, for software devices (the interpreter and
/// lavapipe), where the tutorial's take minutes.
pub const SMALL_PROBLEMS: [(usize, usize, usize); 4] = [(128, 128, 128), (64, 64, 64), (96, 40, 72), (33, 17, 50)];

/// The problems the tutorials example runs on `dev`: [`TUTORIAL_PROBLEMS`] on a GPU,
/// [`SMALL_PROBLEMS`] on a software device.
pub fn tutorial_problems(dev: &dyn Device) -> &'static [(usize, usize, usize)] {
    if dev.properties().device_type == DeviceType::Cpu {
        &SMALL_PROBLEMS
    } else {
        &TUTORIAL_PROBLEMS
    }
}

/// The configurations tried, `(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`: the
/// tutorial's 128 x 128 x 32 and 64 x 64 x 32 blocks, the 64-wide K steps of its later
/// versions, and the matmul's fastest block on Hopper (128 x 256 x 64 on 8 warps, whose
/// three stages take 176 KiB of shared memory: where a device has less, the autotuner skips
/// it); on a software device only those of at most 128 x 64 (each larger one takes seconds
/// to compile there).
pub const CONFIGS: [(u32, u32, u32, u32, u32); 5] = [
    (128, 128, 32, 4, 3),
    (64, 64, 32, 4, 3),
    (128, 128, 64, 8, 3),
    (64, 128, 64, 4, 3),
    (128, 256, 64, 8, 3),
];

/// [`CONFIGS`] that `dev` should try, as autotuner configurations.
pub fn configs_for(dev: &dyn Device) -> Vec<Config> {
    let software = dev.properties().device_type == DeviceType::Cpu;
    CONFIGS
        .into_iter()
        .filter(|&(bm, bn, ..)| !software || bm * bn <= 128 * 64)
        .map(|(bm, bn, bk, warps, stages)| {
            Config::new(&[("BLOCK_M", bm.into()), ("BLOCK_N", bn.into()), ("BLOCK_K", bk.into())])
                .num_warps(warps)
                .num_stages(stages)
        })
        .collect()
}

/// The kernel's meta-parameters for configuration `c`, with aligned tables (how the
/// tutorial's host code lays its problems out).
fn meta_of(c: &Config) -> Result<GroupedMatmulMeta> {
    let block = |name| c.value(name).map(|v| v as u32);
    Ok(GroupedMatmulMeta::new(
        (block("BLOCK_M")?, block("BLOCK_N")?, block("BLOCK_K")?),
        true,
    ))
}

/// A list of problems on a device: their matrices in three buffers and the tables the
/// kernel reads, laid out by [`GroupedMatmulLayout`] (aligned, or packed).
pub struct GroupedMatmul {
    /// The problems, `(m, n, k)` each.
    pub problems: Vec<(usize, usize, usize)>,
    /// Where everything is.
    pub layout: GroupedMatmulLayout,
    /// The A buffer's contents (each problem's A, the padding as given).
    pub a: Vec<f16>,
    /// The B buffer's contents.
    pub b: Vec<f16>,
    buffers: [rutile::Buffer<f16>; 3],
    tables: [rutile::Buffer<i32>; 3],
}

impl GroupedMatmul {
    /// Random matrices in [-1, 1] for `problems`, laid out aligned or packed, the padding
    /// between rows and matrices set to `padding` (the kernel must not let it reach C: a
    /// NaN there checks that), uploaded to `dev`.
    pub fn new(
        dev: &dyn Device,
        problems: &[(usize, usize, usize)],
        aligned: bool,
        padding: f16,
        seed: u64,
    ) -> Result<GroupedMatmul> {
        let layout = GroupedMatmulLayout::new(problems, aligned).map_err(|e| Error::Argument {
            kernel: "grouped_matmul_kernel".into(),
            message: e.to_string(),
        })?;
        let mut rng = Rng::new(seed);
        let (mut a, mut b) = (vec![padding; layout.lens[0]], vec![padding; layout.lens[1]]);
        for (g, &(m, n, k)) in problems.iter().enumerate() {
            let (off, ld) = (&layout.offsets[3 * g..], &layout.lds[3 * g..]);
            for (buf, rows, cols, start, ld) in [(&mut a, m, k, off[0], ld[0]), (&mut b, k, n, off[1], ld[1])] {
                let values = rng.f32s(rows * cols, -1.0, 1.0);
                for r in 0..rows {
                    for c in 0..cols {
                        buf[start as usize + r * ld as usize + c] = f16::from_f32(values[r * cols + c]);
                    }
                }
            }
        }
        let buffers = [
            dev.upload(&a)?,
            dev.upload(&b)?,
            dev.upload(&vec![padding; layout.lens[2]])?,
        ];
        let tables = [
            dev.upload(&layout.offsets)?,
            dev.upload(&layout.sizes)?,
            dev.upload(&layout.lds)?,
        ];
        Ok(GroupedMatmul {
            problems: problems.to_vec(),
            layout,
            a,
            b,
            buffers,
            tables,
        })
    }

    /// The kernel's arguments: the three matrix buffers, the three tables, the count.
    pub fn args(&self) -> Vec<Arg<'_>> {
        let mut args: Vec<Arg<'_>> = self.buffers.iter().map(Arg::from).collect();
        args.extend(self.tables.iter().map(Arg::from));
        args.push(Arg::I32(self.problems.len() as i32));
        args
    }

    /// The launch of `kernel` (with `meta`'s blocks) on `num_warps` and `num_stages`: as
    /// many programs as `dev` holds at once, at most one a tile.
    pub fn launch(
        &self,
        dev: &dyn Device,
        kernel: &rutile::Kernel,
        meta: &GroupedMatmulMeta,
        (num_warps, num_stages): (u32, u32),
    ) -> Result<LaunchConfig> {
        let config = LaunchConfig::grid1(1).num_warps(num_warps).num_stages(num_stages);
        dev.resident_grid(kernel, config, &self.args(), self.layout.tiles(meta).max(1))
    }

    /// Every problem's C from `dev` against a CPU product: the largest error relative to
    /// the expected value plus the magnitude of a dot product of `k` terms in [-1, 1]
    /// (about `sqrt(k) / 3`, as the matmul tutorial's check), and
    /// whether the padding of C kept the value it was given (nothing outside a problem's C
    /// may be written).
    pub fn check(&self, dev: &dyn Device, padding: f16) -> Result<(f64, bool)> {
        let c = dev.download(&self.buffers[2])?;
        let mut written = vec![false; c.len()];
        let mut worst = 0.0f64;
        for (g, &(m, n, k)) in self.problems.iter().enumerate() {
            let (off, ld) = (&self.layout.offsets[3 * g..], &self.layout.lds[3 * g..]);
            let scale = (k as f64).sqrt() / 3.0 + 1e-3;
            let (a, b) = (off[0] as usize, off[1] as usize);
            let (lda, ldb) = (ld[0] as usize, ld[1] as usize);
            // Row by row, B's rows in order (the cache-friendly order of the products).
            let mut want = vec![0.0f64; n];
            for i in 0..m {
                want.fill(0.0);
                for p in 0..k {
                    let x = self.a[a + i * lda + p].to_f64();
                    let row = &self.b[b + p * ldb..b + p * ldb + n];
                    for (w, y) in want.iter_mut().zip(row) {
                        *w += x * y.to_f64();
                    }
                }
                for (j, &want) in want.iter().enumerate() {
                    let at = off[2] as usize + i * ld[2] as usize + j;
                    written[at] = true;
                    let got = c[at].to_f64();
                    let e = if got.is_nan() {
                        f64::INFINITY
                    } else {
                        (got - want).abs() / (want.abs() + scale)
                    };
                    worst = worst.max(e);
                }
            }
        }
        let padding_kept = c
            .iter()
            .zip(&written)
            .all(|(v, &w)| w || v.to_bits() == padding.to_bits());
        Ok((worst, padding_kept))
    }
}

/// The tutorial's kernel and launch for `group` on `dev`, autotuned over [`configs_for`]
/// the device with the problems' shapes as the key.
pub fn tuned(dev: &dyn Device, group: &GroupedMatmul) -> Result<Tuned> {
    let tuner = Autotuner::new("grouped_matmul", configs_for(dev))?;
    let key: Vec<String> = group.problems.iter().map(|(m, n, k)| format!("{m}x{n}x{k}")).collect();
    let build = |c: &Config| Ok(seeds::grouped_matmul(&meta_of(c)?)?);
    let grid = |c: &Config| {
        let meta = meta_of(c)?;
        let kernel = seeds::grouped_matmul(&meta)?;
        Ok(group.launch(dev, &kernel, &meta, (c.num_warps, c.num_stages))?.grid)
    };
    tuner.tuned(dev, &key.join(","), &build, &grid, &group.args())
}

/// The tiles of `problems` under configuration `c`'s blocks.
pub fn tiles(group: &GroupedMatmul, c: &Config) -> Result<u32> {
    Ok(group.layout.tiles(&meta_of(c)?))
}

/// The floating-point operations of `problems` (two a multiply-add).
pub fn flops(problems: &[(usize, usize, usize)]) -> f64 {
    problems.iter().map(|&(m, n, k)| 2.0 * (m * n * k) as f64).sum()
}

/// The grouped GEMM of `problems` on `dev`, autotuned over [`configs_for`] the device,
/// checked against the CPU.
pub fn grouped_matmul(dev: &dyn Device, problems: &[(usize, usize, usize)], seed: u64) -> Result<Outcome> {
    let padding = f16::ZERO;
    let group = GroupedMatmul::new(dev, problems, true, padding, seed)?;
    let Tuned { choice, kernel, launch } = tuned(dev, &group)?;
    let time_ms = timed(dev, &kernel, &launch, &group.args())?;
    let (error, padding_kept) = group.check(dev, padding)?;
    Ok(Outcome {
        tutorial: "grouped matmul".into(),
        size: format!("{} problems", problems.len()),
        device: dev.id(),
        error: if padding_kept { error } else { f64::INFINITY },
        tolerance: 2e-3,
        time_ms,
        detail: Some(format!(
            "{:.1} TFLOPS; {} programs walking {} tiles; autotuned{}: {}{}",
            flops(problems) / (time_ms * 1e-3) / 1e12,
            launch.grid[0],
            tiles(&group, &choice.config)?,
            if choice.from_file { " (cached)" } else { "" },
            choice.config,
            if padding_kept {
                ""
            } else {
                "; WROTE OUTSIDE THE PROBLEMS' C"
            }
        )),
    })
}
