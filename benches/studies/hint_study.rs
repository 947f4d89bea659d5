//! What a hint is worth: a copy of 2^26 elements in blocks of 1024 whose places are read
//! from memory (`src[starts[pid] + i]`, as a paged cache or an embedding table is read),
//! where no analysis can know that the blocks start at multiples of 1024, beside the same
//! kernel with `starts[pid].multiple_of(1024)`, a plain copy (`pid * 1024`) and the
//! benchmarks' copy kernel (masked), in f32 and f16, on every GPU present.
//! Each copy is checked against the CPU's first; GB/s (bytes read and written).
//!
//!     cargo run --release -p rutile-benches --example hint_study
//!
//! `STUDY_REPS=N` sets the timed runs per kernel (30 by default); `STUDY_FLUSH=read` empties
//! the L2 by a kernel reading 256 MiB instead of a copy of them; `STUDY_TIME_FIRST=1` times
//! each kernel before checking its result (no readback before a timing).

use half::f16;
use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode};
use rutile::{Device, DeviceExt, Element, Kernel, LaunchConfig, ScalarType};
use rutile_examples::rng::Rng;

/// Elements per program (a block of the copy).
const BLOCK: i32 = 1024;
/// Elements copied.
const N: usize = 1 << 26;

/// How a copy finds its blocks.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// Read from `starts`.
    Loaded,
    /// Read from `starts`, promised a multiple of `BLOCK`.
    Hinted,
    /// `pid * BLOCK`: a plain copy, for comparison.
    Computed,
}

/// `dst[pid * BLOCK + i] = src[start + i]`, `start` found as `how` says.
fn gather_blocks(t: ScalarType, how: Start) -> rutile::Result<Kernel> {
    Ok(Kernel::build("gather_blocks", |k| {
        let (src, dst, starts) = (
            k.arg_ptr("src", t),
            k.arg_ptr("dst", t),
            k.arg_ptr("starts", ScalarType::I32),
        );
        let pid = k.program_id(0);
        let start = match how {
            Start::Loaded => k.load(starts + pid),
            Start::Hinted => k.load(starts + pid).multiple_of(BLOCK),
            Start::Computed => pid * BLOCK,
        };
        let i = k.arange(0, BLOCK);
        k.store(dst + pid * BLOCK + i, k.load(src + start + i));
    })?)
}

fn main() -> rutile::Result<()> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(30);
    let blocks = N / BLOCK as usize;
    let mut rng = Rng::new(13);
    // The blocks in a random order (a permutation by sorting random keys).
    let keys = rng.i32s(blocks, 0, i32::MAX);
    let mut order: Vec<usize> = (0..blocks).collect();
    order.sort_by_key(|&b| keys[b]);
    let starts: Vec<i32> = order.iter().map(|&b| b as i32 * BLOCK).collect();
    let src32 = rng.f32s(N, -1.0, 1.0);
    let src16: Vec<f16> = src32.iter().map(|&v| f16::from_f32(v)).collect();
    for dev in rutile_examples::gpus::open_gpus() {
        let dev = dev.as_ref();
        if dev.properties().device_type == rutile::DeviceType::Cpu {
            continue;
        }
        println!("\n{} ({})", dev.id(), dev.properties().name);
        let mode = match std::env::var("STUDY_FLUSH").as_deref() {
            Ok("read") => FlushMode::Read,
            _ => FlushMode::Copy,
        };
        let flush = CacheFlush::new(dev, mode).ok();
        if flush.is_none() {
            println!("(no L2 flush: the device cannot hold its buffers)");
        }
        let starts_b = dev.upload(&starts)?;
        let config = LaunchConfig::grid1(blocks as u32).num_warps(4);
        println!("type | kernel | GB/s (median)");
        let setup = Setup {
            flush: flush.as_ref(),
            starts: &starts_b,
            order: &order,
            config: &config,
            reps,
            time_first: std::env::var("STUDY_TIME_FIRST").as_deref() == Ok("1"),
        };
        time_type(dev, &setup, ScalarType::F32, &src32, f32::NAN)?;
        time_type(dev, &setup, ScalarType::F16, &src16, f16::NAN)?;
    }
    Ok(())
}

/// What every timed copy shares.
struct Setup<'a> {
    flush: Option<&'a CacheFlush>,
    starts: &'a rutile::Buffer<i32>,
    order: &'a [usize],
    config: &'a LaunchConfig,
    reps: usize,
    /// Whether each kernel is timed before its result is checked (`STUDY_TIME_FIRST=1`).
    time_first: bool,
}

/// Checks (the destination poisoned with `poison` first), then times, the plain and the
/// hinted copy of `src` (of type `t`).
fn time_type<T: Element + PartialEq>(
    dev: &dyn Device,
    s: &Setup,
    t: ScalarType,
    src: &[T],
    poison: T,
) -> rutile::Result<()> {
    let (src_b, dst) = (dev.upload(src)?, dev.zeros::<T>(N)?);
    let poisoned = vec![poison; N];
    let args = [(&src_b).into(), (&dst).into(), s.starts.into()];
    let gathered: Vec<T> = s
        .order
        .iter()
        .flat_map(|&b| src[b * BLOCK as usize..(b + 1) * BLOCK as usize].iter().copied())
        .collect();
    let bytes = 2.0 * N as f64 * t.size_bytes() as f64;
    for (how, name) in [
        (Start::Loaded, "start loaded"),
        (Start::Hinted, "start loaded, multiple_of(1024)"),
        (Start::Computed, "start computed (a copy)"),
    ] {
        let kernel = gather_blocks(t, how)?;
        let label = format!("{t} | {name}");
        let want = if how == Start::Computed { src } else { &gathered[..] };
        let check = || -> rutile::Result<bool> {
            dev.upload_into(&dst, &poisoned)?;
            dev.launch(&kernel, s.config, &args)?;
            Ok(dev.download(&dst)? == want)
        };
        let time = || do_bench(dev, s.flush, 3, s.reps, &mut || dev.launch(&kernel, s.config, &args));
        report(&label, bytes, s.time_first, check, time)?;
    }
    // The benchmarks' copy kernel on the same buffers: masked by `n`, the same blocks.
    let copy = rutile_examples::bench::copy_kernel_of(t, BLOCK as u32, 0)?;
    let args = [(&src_b).into(), (&dst).into(), rutile::Arg::I32(N as i32)];
    let check = || -> rutile::Result<bool> {
        dev.upload_into(&dst, &poisoned)?;
        dev.launch(&copy, s.config, &args)?;
        Ok(dev.download(&dst)? == src)
    };
    let time = || do_bench(dev, s.flush, 3, s.reps, &mut || dev.launch(&copy, s.config, &args));
    report(&format!("{t} | copy kernel (masked)"), bytes, s.time_first, check, time)?;
    Ok(())
}

/// Checks and times one kernel (timed first where `time_first`, so that no result read back
/// to the host comes before its timing), and prints its line.
fn report(
    label: &str,
    bytes: f64,
    time_first: bool,
    check: impl Fn() -> rutile::Result<bool>,
    time: impl Fn() -> rutile::Result<rutile::bench::Stats>,
) -> rutile::Result<()> {
    let (ok, stats) = if time_first {
        let stats = time()?;
        (check()?, Some(stats))
    } else {
        let ok = check()?;
        (ok, if ok { Some(time()?) } else { None })
    };
    match (ok, stats) {
        (true, Some(stats)) => println!("{label} | {:.0}", gbps(bytes, stats.median_ms)),
        _ => println!("{label} | WRONG: the copy differs from the source's blocks"),
    }
    Ok(())
}
