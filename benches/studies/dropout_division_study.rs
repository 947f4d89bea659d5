//! What the dropout's division costs on each backend: the tutorial's kernel (`x / (1 - p)`,
//! Triton's `/`: `div.full.f32` through CUDA, `OpFDiv` through Vulkan) beside the same
//! kernel multiplying by `1 / (1 - p)` given by the host, and keeping `x` undivided (what
//! no division at all would leave), with the benchmarks' copy kernel on the same bytes,
//! at 2^26 and 2^28 f32 elements, on every GPU present. Each kernel's output is checked
//! against the CPU reference (the undivided one against the reference times `1 - p`);
//! GB/s (bytes read and written), median of the timed runs.
//!
//!     cargo run --release -p rutile-benches --example dropout_division_study
//!
//! `STUDY_REPS=N` sets the timed runs per kernel (30 by default).

use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode};
use rutile::{seeds, DeviceExt, Kernel, LaunchConfig, ScalarType};
use rutile_examples::rng::Rng;
use rutile_examples::tutorials::dropout::{dropout_error, dropout_reference, BLOCK, TOLERANCE};

const P: f32 = 0.3;
const SEED: i32 = 123;

/// How a kept element is scaled.
#[derive(Clone, Copy)]
enum Scale {
    /// By `scale`, an argument the host computes as `1 / (1 - p)`.
    ByReciprocal,
    /// Not at all: `x` where kept.
    None,
}

/// The tutorial's dropout with its division replaced as `how` says (arguments: x, output,
/// n_elements, p, seed, scale).
fn variant(how: Scale) -> rutile::Result<Kernel> {
    Ok(Kernel::build("_seeded_dropout_variant", |k| {
        let x_ptr = k.arg_ptr("x_ptr", ScalarType::F32);
        let output_ptr = k.arg_ptr("output_ptr", ScalarType::F32);
        let n = k.arg_i32("n_elements");
        let p = k.arg_scalar("p", ScalarType::F32);
        let seed = k.arg_i32("seed");
        let scale = k.arg_scalar("scale", ScalarType::F32);
        let offsets = k.program_id(0) * BLOCK + k.arange(0, BLOCK as i32);
        let mask = offsets.lt(n);
        let x = k.load_masked(x_ptr + offsets, mask, 0);
        let keep = k.rand(seed, offsets).gt(p);
        let kept = match how {
            Scale::ByReciprocal => x * scale,
            Scale::None => x,
        };
        k.store_masked(output_ptr + offsets, k.where_(keep, kept, 0.0f32), mask);
    })?)
}

fn main() -> rutile::Result<()> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(30);
    for dev in rutile_examples::gpus::open_gpus() {
        let dev = dev.as_ref();
        if dev.properties().device_type == rutile::DeviceType::Cpu {
            continue;
        }
        println!("\n{} ({})", dev.id(), dev.properties().name);
        let flush = CacheFlush::new(dev, FlushMode::Copy).ok();
        for log2n in [26, 28] {
            let n = 1usize << log2n;
            let x = Rng::new(7).f32s(n, -2.0, 2.0);
            let want = dropout_reference(&x, P, SEED);
            let undivided: Vec<f32> = want.iter().map(|&w| w * (1.0 - P)).collect();
            let (xb, out) = (dev.upload(&x)?, dev.zeros::<f32>(n)?);
            let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK)).num_warps(4);
            let bytes = 2.0 * n as f64 * 4.0;
            let base = [(&xb).into(), (&out).into(), (n as i32).into(), P.into(), SEED.into()];
            let with_scale: Vec<rutile::Arg> = base.iter().cloned().chain([(1.0 / (1.0 - P)).into()]).collect();
            let forms: [(&str, Kernel, &[rutile::Arg], &[f32]); 3] = [
                (
                    "x / (1 - p), the tutorial's",
                    seeds::seeded_dropout(BLOCK)?,
                    &base,
                    &want,
                ),
                (
                    "x * scale, 1 / (1 - p) from the host",
                    variant(Scale::ByReciprocal)?,
                    &with_scale,
                    &want,
                ),
                ("x kept undivided", variant(Scale::None)?, &with_scale, &undivided),
            ];
            println!("2^{log2n} elements | kernel | GB/s (median) | error");
            for (name, kernel, args, reference) in forms {
                dev.launch(&kernel, &config, args)?;
                let error = dropout_error(&dev.download(&out)?, reference);
                let stats = do_bench(dev, flush.as_ref(), 3, reps, &mut || dev.launch(&kernel, &config, args))?;
                let verdict = if error <= TOLERANCE { "" } else { " WRONG" };
                println!(
                    "2^{log2n} | {name} | {:.0} | {error:.1e}{verdict}",
                    gbps(bytes, stats.median_ms)
                );
            }
            let copy = rutile_examples::bench::copy_kernel_of(ScalarType::F32, BLOCK, 0)?;
            let args = [(&xb).into(), (&out).into(), rutile::Arg::I32(n as i32)];
            let stats = do_bench(dev, flush.as_ref(), 3, reps, &mut || dev.launch(&copy, &config, &args))?;
            println!("2^{log2n} | copy kernel | {:.0} |", gbps(bytes, stats.median_ms));
        }
    }
    Ok(())
}
