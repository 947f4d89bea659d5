//! What the element type costs a memory-bound kernel on every GPU backend: `y = x + 1`
//! over 256 MiB of `f32`, `f16`, `bf16`, `i16`, `i8` and `u8`, at a length a multiple of
//! 16 and at a ragged one, against the copy ceiling measured in the same run.
//! Through Vulkan, `bf16` and the 8- and 16-bit integers are packed in 32-bit words
//! (`rutile_spirv`'s `sub_word.rs`), `f16` is naga's own.
//!
//!     cargo run --release -p rutile-benches --example narrow_types_study [-- --quick]
//!
//! Every result is checked against the host's arithmetic before it is timed. With
//! `RUTILE_DUMP=DIR` each kernel's per-thread IR, PTX and WGSL land in `DIR`.

use half::{bf16, f16};
use rutile::{DeviceExt, Element, Kernel, LaunchConfig, ScalarType};
use rutile_examples::bench::{do_bench, gbps, CacheFlush, CopyTimes, FlushMode};
use rutile_examples::rng::Rng;

const BLOCK: u32 = 4096;
const BYTES: usize = 1 << 28;

/// `y[i] = x[i] + 1` for `i < n`, `BLOCK` elements a program.
fn add_one(t: ScalarType) -> rutile::Result<Kernel> {
    Ok(Kernel::build(&format!("add_one_{}", t.name()), |k| {
        let (x, y, n) = (k.arg_ptr("x", t), k.arg_ptr("y", t), k.arg_i32("n"));
        let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i32);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, k.scalar(0, t));
        k.store_masked(y + offs, v + k.scalar(1, t), mask);
    })?)
}

/// Runs and times `y = x + 1` for `host` on `dev`: GB/s, or an error where the result is
/// not `want`.
fn measure<T: Element + PartialEq + std::fmt::Debug>(
    dev: &dyn rutile::Device,
    flush: &CacheFlush,
    reps: usize,
    host: &[T],
    want: impl Fn(T) -> T,
) -> Result<f64, String> {
    let t = T::TYPE;
    let kernel = add_one(t).map_err(|e| e.to_string())?;
    let n = host.len();
    let x = dev.upload(host).map_err(|e| e.to_string())?;
    let y = dev.zeros::<T>(n).map_err(|e| e.to_string())?;
    let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK));
    let args = [(&x).into(), (&y).into(), (n as i32).into()];
    dev.launch(&kernel, &config, &args).map_err(|e| e.to_string())?;
    let got = dev.download::<T>(&y).map_err(|e| e.to_string())?;
    if let Some(i) = (0..n).find(|&i| got[i] != want(host[i])) {
        return Err(format!("element {i}: {:?} for {:?}", got[i], want(host[i])));
    }
    let s =
        do_bench(dev, Some(flush), 3, reps, &mut || dev.launch(&kernel, &config, &args)).map_err(|e| e.to_string())?;
    Ok(gbps((2 * n * std::mem::size_of::<T>()) as f64, s.median_ms))
}

fn main() -> rutile::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 5 } else { 50 };
    let devices = rutile_examples::gpus::hardware_gpus();
    if devices.is_empty() {
        println!("no GPU present: nothing to measure");
        return Ok(());
    }
    let mut rng = Rng::new(17);
    for dev in &devices {
        let dev = dev.as_ref();
        let ceiling = CopyTimes::measure(dev, BYTES / 4, if quick { 3 } else { 10 })?.gbps();
        let ceiling = ceiling.0.max(ceiling.1);
        let flush = CacheFlush::new(dev, FlushMode::Copy)?;
        println!(
            "\n== {} ({}): copy ceiling {ceiling:.0} GB/s",
            dev.id(),
            dev.properties().name
        );
        let show = |t: &str, r: Result<f64, String>| match r {
            Ok(g) => println!("{t:<5} {g:>6.0} GB/s ({:.1}%)", 100.0 * g / ceiling),
            Err(e) => println!("{t:<5} {e}"),
        };
        // Lengths a multiple of 16 (the length's divisibility lets each thread's accesses
        // be vectors), and ragged ones 3 shorter (no proof: one element an access).
        for ragged in [0usize, 3] {
            println!(
                "{}",
                if ragged == 0 {
                    "length a multiple of 16:"
                } else {
                    "ragged length:"
                }
            );
            let len = |size: usize| BYTES / size - ragged;
            let floats = rng.f32s(len(2), -100.0, 100.0);
            let f: Vec<f32> = rng.f32s(len(4), -100.0, 100.0);
            show("f32", measure(dev, &flush, reps, &f, |v| v + 1.0));
            let h: Vec<f16> = floats.iter().map(|&v| f16::from_f32(v)).collect();
            show(
                "f16",
                measure(dev, &flush, reps, &h, |v| f16::from_f32(v.to_f32() + 1.0)),
            );
            let b: Vec<bf16> = floats.iter().map(|&v| bf16::from_f32(v)).collect();
            show(
                "bf16",
                measure(dev, &flush, reps, &b, |v| bf16::from_f32(v.to_f32() + 1.0)),
            );
            let words: Vec<u32> = (0..BYTES / 4).map(|_| rng.next_u64() as u32).collect();
            let i16s: Vec<i16> = words
                .iter()
                .flat_map(|w| [*w as i16, (w >> 16) as i16])
                .take(len(2))
                .collect();
            show("i16", measure(dev, &flush, reps, &i16s, |v| v.wrapping_add(1)));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).take(len(1)).collect();
            let i8s: Vec<i8> = bytes.iter().map(|&v| v as i8).collect();
            show("i8", measure(dev, &flush, reps, &i8s, |v| v.wrapping_add(1)));
            show("u8", measure(dev, &flush, reps, &bytes, |v| v.wrapping_add(1)));
        }
    }
    Ok(())
}
