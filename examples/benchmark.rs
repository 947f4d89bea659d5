//! The seed kernels and tutorials against the device-to-device copy ceiling and cuBLAS,
//! measured in the same run on each GPU present (CUDA and wgpu side by side):
//!
//!     cargo run --release --example benchmark [-- --quick] [--csv FILE] [--flush copy|read]
//!                                               [--cols N,N,...] [--ln-cols N,N,...] [--head-dims D,D] [--ctx N,N,...]
//!                                               [--attention-forms F,F,...] [--no-causal | --causal-only]
//!                                               [--backends cuda,vulkan]
//!                                               [--only vector_add,softmax,transpose,matmul_b,matmul,grouped_matmul,
//!                                                       dropout,layer_norm,long_softmax,attention]
//!
//! A run first prints the `RUTILE_` switches set in its environment (the lowering's and the
//! backends', README), which its figures depend on.
//!
//! The sections up to `matmul` are each measured with `rutile::bench::Benchmark` (Triton's
//! `perf_report`) and printed as its tables, one column per line (rutile's kernels and the
//! baselines measured beside them), with what a table cannot hold printed after it.
//!
//! - `vector_add`: f32, 2^12..2^28 elements (12 bytes per element), beside one launch of a
//!   copy kernel moving the same bytes through the same backend.
//! - `softmax`: the fused softmax f32, M = 4096, N = 256..16384 (powers of two and three
//!   widths just past one; 8 bytes per element), in the one-row-per-program, persistent,
//!   several-rows and chunked forms (`-cs`: read-once loads; `-fd`: dividing as Triton's
//!   `/` compiles for f32, within 2 ulp), beside the driver's device-to-device copy of the
//!   same bytes (`copy`) and the copy kernel: one table at the tutorial's `num_warps`, one
//!   at the best of 1..16 (the same sweep), and the `num_warps` that won.
//! - `transpose`: the tiled transpose of an M x M f32 matrix, M = 1024..8192 (8 bytes per
//!   element; its load and store contiguous along different axes of the tile), in 64 x 64
//!   and 32 x 32 tiles at 4 and 8 warps beside the copy kernel, each configuration's result
//!   checked against the CPU's transpose before it is timed.
//! - `matmul_b`: the fp16 matmul with B row-major and column-major, at fixed blocks and
//!   autotuned per layout, with column-major as a percentage of row-major.
//! - `matmul`: the tutorial's fp16 matmul, autotuned, at M = N = K = 256..8192, one table
//!   for every GPU with lines `rutile <device>`, `+leaky_relu <device>` (CUDA only) and
//!   `cuBLAS <device>` (`RUTILE_CUBLAS` points at a libcublas.so.N where it is not found,
//!   see `rutile::cublas`), then rutile as a percentage of cuBLAS on the same GPU and the
//!   configuration chosen per size and device with its registers, spills, shared memory and
//!   whether it runs on `wgmma`, `mma.sync` or FMA; then the skinny shapes 4096x16x4096 and
//!   8192x8192x512 (M x N x K) the same way. Products are checked against cuBLAS and an f64
//!   reference first (`benchmark/matmul.rs`).
//! - `grouped_matmul`: the grouped GEMM tutorial, four fp16 problems of N x N x N (N =
//!   128..1024) in one launch of rutile's grouped kernel, autotuned, beside cuBLAS running
//!   the four one after another (as Triton's tutorial times torch's loop of matmuls), in
//!   TFLOPS; each result checked against the CPU first (`benchmark/grouped_matmul.rs`).
//! - `dropout`: the seeded dropout tutorial for 2^12..2^28 f32 elements (8 bytes per
//!   element: its random numbers are computed, not read), checked against the CPU reference
//!   first.
//! - The next tutorials: the layer norm forward pass, fp16, M = 4096, N = 512..16384 and
//!   long rows beyond (`layer_norm`; 4 bytes per element); the long-row softmax, f32, N =
//!   32768..262144 (`long_softmax`; 8 bytes per element), both against the copy ceiling;
//!   and the fused attention forward pass, fp16, 4 x 32 heads, N_CTX = 1024..16384, head
//!   dimensions 64 and 128, causal and not, in TFLOPS (`attention`), each checked against a
//!   CPU reference before it is timed (`benchmark/tutorial_sweeps.rs`).
//!
//! `--csv` writes every point with its times (p20, median, p80), as one row per device,
//! kernel and size. `--quick` runs small sizes without the cache flush, to try the
//! benchmark on a software device. `--only` runs the named sections only (the copy ceiling
//! is always measured). Times are medians of device-timed runs with the L2 cache emptied
//! before each: by a 256 MiB copy (`--flush copy`, as `triton.testing.do_bench`, the
//! default) which leaves it dirty, or by reading 256 MiB (`--flush read`), which leaves it
//! clean. `--cols` measures the softmax at the given widths only (e.g. `--cols 1024` to
//! repeat one figure), `--ln-cols` the layer norm at the given widths only, `--head-dims` the
//! attention at the given head dimensions only (64, 128), `--ctx` at the given sequence
//! lengths only, `--attention-forms` its given lines only (`tutorial`, `rotated`,
//! `pingpong`, `pingpong_ahead`, `persistent_pingpong`, `persistent_pingpong_ahead`, `blocks`, `blocks_ahead`, `persistent_blocks`, `tma_heads`,
//! `tma_heads_capped`, `longest_first`), `--no-causal` without the causal mask only and
//! `--causal-only` with it only. `--squares` times the matmul at the given M = N = K only,
//! without the skinny shapes (e.g. `--only matmul --squares 4096`). `--backends` runs the sections
//! of one device at a time (all but `matmul`) on the named backends' devices only (e.g.
//! `--backends vulkan`), while the copy ceiling is still measured on every device and the
//! `matmul` section still times cuBLAS: a run through one backend keeps the other's
//! ceiling. (In a process with CUDA hidden, an H200's 1 GiB copy through Vulkan once
//! measured 1645 GB/s where processes that copied through CUDA first measured 4025–4053:
//! NVIDIA's driver had lowered the idle GPU's clock, which Vulkan work raises only after a
//! few hundred milliseconds; `do_bench` now keeps a Vulkan GPU busy that long before
//! timing it, docs/performance.md.)

use rutile::bench::{Benchmark, Report, Series, Unit};
use rutile::seeds;
use rutile::{Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use rutile_examples::bench::{copy_kernel, do_bench, gbps, CacheFlush, CopyTimes, FlushMode, Stats, COPY_BLOCK};
use rutile_examples::rng::Rng;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

#[path = "benchmark/grouped_matmul.rs"]
mod grouped_matmul;
#[path = "benchmark/matmul.rs"]
mod matmul;
#[path = "benchmark/softmax.rs"]
mod softmax;
#[path = "benchmark/transpose.rs"]
mod transpose;
#[path = "benchmark/tutorial_sweeps.rs"]
mod tutorial_sweeps;

/// The sizes given after `flag`, comma-separated, each in `range`; `None` without the
/// flag. Anything else ends the program with what `flag` takes (`what`).
fn size_list(args: &[String], flag: &str, range: std::ops::RangeInclusive<usize>, what: &str) -> Option<Vec<usize>> {
    let i = args.iter().position(|a| a == flag)?;
    let list = args.get(i + 1).map(String::as_str).unwrap_or("");
    match list.split(',').map(str::parse::<usize>).collect::<Result<Vec<_>, _>>() {
        Ok(s) if !s.is_empty() && s.iter().all(|n| range.contains(n)) => Some(s),
        _ => {
            eprintln!("{flag} takes {what} separated by commas, got {list:?}");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let csv_path = args
        .iter()
        .position(|a| a == "--csv")
        .and_then(|i| args.get(i + 1).cloned());
    let flush_mode = match args
        .iter()
        .position(|a| a == "--flush")
        .map(|i| args.get(i + 1).map(String::as_str))
    {
        None | Some(Some("copy")) => FlushMode::Copy,
        Some(Some("read")) => FlushMode::Read,
        Some(other) => {
            eprintln!("--flush takes `read` or `copy`, got {other:?}");
            std::process::exit(2);
        }
    };
    let sections = match args.iter().position(|a| a == "--only") {
        None => Sections::ALL,
        Some(i) => {
            let list = args.get(i + 1).map(String::as_str).unwrap_or("");
            Sections::parse(list).unwrap_or_else(|| {
                eprintln!(
                    "--only takes sections from vector_add, softmax, transpose, matmul_b, matmul, grouped_matmul, dropout, layer_norm, \
                     long_softmax and attention separated by commas, got {list:?}"
                );
                std::process::exit(2);
            })
        }
    };
    let squares = size_list(&args, "--squares", 16..=16384, "sizes from 16 to 16384");
    let layer_norm_cols = size_list(&args, "--ln-cols", 1..=1 << 20, "widths from 1 to 2^20");
    let head_dims = size_list(&args, "--head-dims", 64..=128, "head dimensions 64 and 128");
    let attention_lengths = size_list(&args, "--ctx", 16..=65536, "sequence lengths from 16 to 65536");
    const FORMS: [&str; 12] = [
        "tutorial",
        "rotated",
        "pingpong",
        "pingpong_ahead",
        "persistent_pingpong",
        "persistent_pingpong_ahead",
        "blocks",
        "blocks_ahead",
        "persistent_blocks",
        "tma_heads",
        "tma_heads_capped",
        "longest_first",
    ];
    let attention_forms: Option<Vec<String>> = args.iter().position(|a| a == "--attention-forms").map(|i| {
        let list = args.get(i + 1).map(String::as_str).unwrap_or("");
        let forms: Vec<String> = list.split(',').map(str::to_string).collect();
        if forms.iter().any(|f| !FORMS.contains(&f.as_str())) {
            eprintln!(
                "--attention-forms takes forms from {} separated by commas, got {list:?}",
                FORMS.join(", ")
            );
            std::process::exit(2);
        }
        forms
    });
    let attention_causal = !args.iter().any(|a| a == "--no-causal");
    let attention_plain = !args.iter().any(|a| a == "--causal-only");
    if !attention_causal && !attention_plain {
        eprintln!("--no-causal and --causal-only leave no attention to time: give one of them");
        std::process::exit(2);
    }
    if let Some(bad) = head_dims.iter().flatten().find(|&&d| d != 64 && d != 128) {
        eprintln!("--head-dims takes 64 and 128 (the attention benchmark's), got {bad}");
        std::process::exit(2);
    }
    let mut sizes = softmax_sizes(quick);
    if let Some(cols) = size_list(&args, "--cols", 1..=1 << 20, "widths from 1 to 2^20") {
        sizes.cols = cols;
    }
    if !sections.softmax {
        // No softmax, so no copies of its bytes either.
        sizes.cols.clear();
    }
    let backends: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--backends")
        .map(|i| args.get(i + 1).map(String::as_str).unwrap_or(""))
        .map(|list| {
            let names: Vec<String> = list.split(',').map(str::to_string).collect();
            if names.iter().any(|n| !["cuda", "vulkan", "cpu"].contains(&n.as_str())) {
                eprintln!("--backends takes cuda, vulkan or cpu separated by commas, got {list:?}");
                std::process::exit(2);
            }
            names
        });
    let mut csv = String::from("device,kernel,size,median_ms,p20_ms,p80_ms,gbps,ceiling_gbps,fraction\n");
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id != "cpu")
        .filter_map(|l| l.device.map_err(|e| eprintln!("{}: {e}", l.id)).ok())
        .filter(|d| quick || d.properties().device_type != DeviceType::Cpu)
        .collect();
    if devices.is_empty() {
        eprintln!("no GPU found: nothing to benchmark");
        std::process::exit(1);
    }
    // What was measured depends on the switches the lowering and the backends read: say
    // which are set, so that a run's figures carry them.
    let mut switches: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("RUTILE_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    switches.sort();
    if !switches.is_empty() {
        println!("switches: {}", switches.join(" "));
    }
    // The ceiling is the fastest device-to-device copy of 1 GiB measured on the same GPU in
    // this run, by the driver or by a copy kernel through either backend: wgpu's buffer copy
    // may go through a copy engine slower than the memory system (on the H100 it does), and
    // a kernel cannot beat the memory system, whatever API launches it.
    // Copies of exactly the bytes each softmax moves, timed as the kernels are, show what
    // the fixed costs of one operation of that size leave of the ceiling.
    let mut copies = Vec::new();
    for dev in &devices {
        match copy_bandwidth(dev.as_ref(), quick, flush_mode, &sizes, &mut csv) {
            Ok(g) => copies.push(g),
            Err(e) => {
                eprintln!("{}: copy benchmark failed: {e}", dev.id());
                std::process::exit(1);
            }
        }
    }
    // The CSV file is written again after each section, so that a run cut short or failed
    // keeps the sections it finished.
    let save = |csv: &str| {
        if let Some(path) = &csv_path {
            std::fs::write(path, csv).expect("writing the CSV file");
        }
    };
    save(&csv);
    // The matmul first: its cuBLAS line is the baseline the attention figures are shares
    // of, so that a run cut short after it keeps the baseline its figures need.
    if sections.matmul {
        if let Err(e) = matmul::matmul(&devices, quick, flush_mode, squares.as_deref(), &mut csv) {
            eprintln!("matmul benchmark failed: {e}");
            save(&csv);
            std::process::exit(1);
        }
        save(&csv);
    }
    if sections.grouped_matmul {
        if let Err(e) = grouped_matmul::grouped_matmul(&devices, quick, flush_mode, &mut csv) {
            eprintln!("grouped matmul benchmark failed: {e}");
            save(&csv);
            std::process::exit(1);
        }
        save(&csv);
    }
    for dev in &devices {
        let backend = dev.id().split(':').next().unwrap_or_default().to_string();
        if backends.as_ref().is_some_and(|b| !b.contains(&backend)) {
            continue;
        }
        let name = &dev.properties().name;
        let same_gpu = || {
            devices
                .iter()
                .zip(&copies)
                .filter(|(d, _)| &d.properties().name == name)
        };
        let ceiling = same_gpu().map(|(_, c)| c.large).fold(0.0, f64::max);
        // The fastest copy of each softmax's bytes on this GPU.
        let same_bytes: Vec<Stats> = (0..sizes.cols.len())
            .filter_map(|i| {
                same_gpu()
                    .map(|(_, c)| c.same_bytes[i])
                    .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
            })
            .collect();
        let run = Run {
            quick,
            flush_mode,
            sections,
            ceiling,
            layer_norm_cols: layer_norm_cols.clone(),
            head_dims: head_dims.clone(),
            attention_lengths: attention_lengths.clone(),
            attention_forms: attention_forms.clone(),
            attention_causal,
            attention_plain,
        };
        let result = bench_device(dev.as_ref(), &run, &sizes, &same_bytes, &mut csv);
        save(&csv);
        if let Err(e) = result {
            eprintln!("{}: benchmark failed: {e}", dev.id());
            std::process::exit(1);
        }
    }
    if let Some(path) = &csv_path {
        println!("wrote {path}");
    }
}

/// Which sections of the benchmark run (`--only`).
#[derive(Clone, Copy, Debug)]
struct Sections {
    vector_add: bool,
    softmax: bool,
    transpose: bool,
    matmul_b: bool,
    matmul: bool,
    grouped_matmul: bool,
    dropout: bool,
    layer_norm: bool,
    long_softmax: bool,
    attention: bool,
}

impl Sections {
    const ALL: Sections = Sections {
        vector_add: true,
        softmax: true,
        transpose: true,
        matmul_b: true,
        matmul: true,
        grouped_matmul: true,
        dropout: true,
        layer_norm: true,
        long_softmax: true,
        attention: true,
    };

    /// Section names separated by commas; `None` for an unknown name or none at all.
    fn parse(list: &str) -> Option<Sections> {
        let mut sections = Sections {
            vector_add: false,
            softmax: false,
            transpose: false,
            matmul_b: false,
            matmul: false,
            grouped_matmul: false,
            dropout: false,
            layer_norm: false,
            long_softmax: false,
            attention: false,
        };
        for name in list.split(',') {
            match name {
                "vector_add" => sections.vector_add = true,
                "softmax" => sections.softmax = true,
                "transpose" => sections.transpose = true,
                "matmul_b" => sections.matmul_b = true,
                "matmul" => sections.matmul = true,
                "grouped_matmul" => sections.grouped_matmul = true,
                "dropout" => sections.dropout = true,
                "layer_norm" => sections.layer_norm = true,
                "long_softmax" => sections.long_softmax = true,
                "attention" => sections.attention = true,
                _ => return None,
            }
        }
        Some(sections)
    }
}

/// What every section of one device's run shares.
struct Run {
    quick: bool,
    flush_mode: FlushMode,
    sections: Sections,
    /// The copy ceiling of the device's GPU, in GB/s.
    ceiling: f64,
    /// `--ln-cols`: the layer norm's widths of those it times (all where `None`).
    layer_norm_cols: Option<Vec<usize>>,
    /// `--head-dims`: the attention's head dimensions of those it times (all where `None`).
    head_dims: Option<Vec<usize>>,
    /// `--ctx`: the attention's sequence lengths (1024 to 16384 where `None`).
    attention_lengths: Option<Vec<usize>>,
    /// `--attention-forms`: the attention's lines of those it times, by name (`tutorial`,
    /// `rotated`, `pingpong`, `pingpong_ahead`, `persistent_pingpong`, `blocks`, `blocks_ahead`, `persistent_blocks`, `tma_heads`,
    /// `tma_heads_capped`, `longest_first`; all where `None`).
    attention_forms: Option<Vec<String>>,
    /// Whether the attention is timed with the causal mask (`--no-causal`: not).
    attention_causal: bool,
    /// Whether the attention is timed without the causal mask (`--causal-only`: not).
    attention_plain: bool,
}

impl Run {
    /// Timed launches per point of the memory-bound sections.
    fn reps(&self) -> usize {
        if self.quick {
            5
        } else {
            50
        }
    }
}

/// The rows and the column counts of the softmax benchmark.
struct SoftmaxSizes {
    rows: usize,
    cols: Vec<usize>,
}

/// The default rows and column counts of the softmax benchmark.
fn softmax_sizes(quick: bool) -> SoftmaxSizes {
    if quick {
        SoftmaxSizes {
            rows: 256,
            cols: vec![256, 1024],
        }
    } else {
        // Powers of two, and one width past each of three: there the one-block kernel's
        // block doubles and is nearly half masked, where the chunked form is meant to help.
        SoftmaxSizes {
            rows: 4096,
            cols: vec![256, 512, 1024, 1152, 2048, 4096, 4224, 8192, 8320, 16384],
        }
    }
}

/// Copies on one device.
struct Copies {
    /// The ceiling from a 1 GiB copy, in GB/s (bytes read + written).
    large: f64,
    /// The times of a copy of the bytes of each softmax size, timed as the kernels are.
    same_bytes: Vec<Stats>,
}

fn copy_bandwidth(
    dev: &dyn Device,
    quick: bool,
    flush_mode: FlushMode,
    sizes: &SoftmaxSizes,
    csv: &mut String,
) -> rutile::Result<Copies> {
    let n_copy: usize = if quick { 1 << 20 } else { 1 << 28 };
    let mut rng = Rng::new(3);
    let copies = CopyTimes::measure(dev, n_copy, if quick { 5 } else { 20 })?;
    let (copy, by_kernel) = (copies.driver, copies.kernel);
    let (driver, kernel_gbps) = copies.gbps();
    let large = copies.ceiling_gbps();
    println!(
        "{}: device-to-device copy of {} MiB: {driver:.0} GB/s by the driver (median {:.3} ms), \
         {kernel_gbps:.0} GB/s by a copy kernel (median {:.3} ms)",
        dev.id(),
        (4 * n_copy) >> 20,
        copy.median_ms,
        by_kernel.median_ms
    );
    for (what, s, g) in [("copy", copy, driver), ("copy_kernel_large", by_kernel, kernel_gbps)] {
        let _ = writeln!(
            csv,
            "{},{what},{n_copy},{:.5},{:.5},{:.5},{g:.1},,",
            dev.id(),
            s.median_ms,
            s.p20_ms,
            s.p80_ms
        );
    }
    let flush = if quick {
        None
    } else {
        Some(CacheFlush::new(dev, flush_mode)?)
    };
    let m = sizes.rows;
    let mut same_bytes = Vec::new();
    for &n in &sizes.cols {
        let (a, b) = (dev.upload(&rng.f32s(m * n, 0.5, 1.5))?, dev.zeros::<f32>(m * n)?);
        let s = do_bench(dev, flush.as_ref(), 3, if quick { 5 } else { 50 }, &mut || {
            dev.copy(a.raw(), b.raw())
        })?;
        let g = gbps(8.0 * (m * n) as f64, s.median_ms);
        let _ = writeln!(
            csv,
            "{},copy_softmax_bytes,{m}x{n},{:.5},{:.5},{:.5},{g:.1},{large:.1},{:.4}",
            dev.id(),
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / large
        );
        same_bytes.push(s);
    }
    Ok(Copies { large, same_bytes })
}

fn bench_device(
    dev: &dyn Device,
    run: &Run,
    sizes: &SoftmaxSizes,
    same_bytes: &[Stats],
    csv: &mut String,
) -> rutile::Result<()> {
    println!(
        "\n== {} ({}): ceiling {:.0} GB/s",
        dev.id(),
        dev.properties().name,
        run.ceiling
    );
    let flush = if run.quick {
        None
    } else {
        Some(CacheFlush::new(dev, run.flush_mode)?)
    };
    let flush = flush.as_ref();
    let mut rng = Rng::new(7);
    let sections = run.sections;
    if sections.vector_add {
        bench_vector_add(dev, run, flush, &mut rng, csv)?;
    }
    if sections.softmax {
        softmax::softmax(dev, run, flush, &mut rng, sizes, same_bytes, csv)?;
    }
    if sections.transpose {
        transpose::transpose(dev, run, flush, &mut rng, csv)?;
    }
    if sections.matmul_b {
        matmul::matmul_b(dev, run, flush, &mut rng, csv)?;
    }
    if sections.dropout {
        bench_dropout(dev, run, flush, &mut rng, csv)?;
    }
    if sections.layer_norm {
        tutorial_sweeps::layer_norm(dev, run, flush, &mut rng, csv)?;
    }
    if sections.long_softmax {
        tutorial_sweeps::long_softmax(dev, run, flush, &mut rng, csv)?;
    }
    if sections.attention {
        tutorial_sweeps::attention(dev, run, flush, csv)?;
    }
    Ok(())
}

/// The seeded dropout (p = 0.5) at each size, checked against the CPU reference at the
/// first size, in GB/s of the bytes it moves (x read, output written).
fn bench_dropout(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    use rutile_examples::tutorials::dropout::{self, dropout_error, dropout_reference, BLOCK, TOLERANCE};
    let (id, quick, ceiling) = (dev.id(), run.quick, run.ceiling);
    let reps = run.reps();
    let (p, seed) = (0.5f32, 1234);
    let check = rng.f32s(4099, -1.0, 1.0);
    let (got, _) = dropout::run_dropout(dev, &check, p, seed)?;
    let error = dropout_error(&got, &dropout_reference(&check, p, seed));
    if error > TOLERANCE {
        println!("\nseeded dropout: wrong results on {id} (error {error:e}); not timed");
        return Ok(());
    }
    println!("\nseeded dropout f32        size     GB/s   of ceiling");
    let kernel = seeds::seeded_dropout(BLOCK)?;
    let max_log = if quick { 20 } else { 28 };
    for log in 12..=max_log {
        let n = 1usize << log;
        let (x, out) = (dev.upload(&rng.f32s(n, 0.5, 1.5))?, dev.zeros::<f32>(n)?);
        let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK));
        let args = [(&x).into(), (&out).into(), (n as i32).into(), p.into(), seed.into()];
        let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
        let g = gbps(8.0 * n as f64, s.median_ms);
        println!("{:>31} {g:>8.0} {:>9.1}%", format!("2^{log}"), 100.0 * g / ceiling);
        let _ = writeln!(
            csv,
            "{id},seeded_dropout,{n},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / ceiling
        );
    }
    // Other elements a thread (and so registers, and programs a multiprocessor) at 2^26,
    // beside the tutorial's 1024 on 4 warps: Philox's arithmetic bounds the kernel on an
    // H200 (docs/performance.md, "Dropout on an H200").
    let n = if quick { 1usize << 20 } else { 1usize << 26 };
    let xs = rng.f32s(n, 0.5, 1.5);
    let x = dev.upload(&xs)?;
    // Each shape's output (a fresh buffer of zeros, where a kept element is not zero)
    // checked on its first elements (the reference is one CPU thread).
    let want = dropout_reference(&xs[..1 << 16], p, seed);
    println!("seeded dropout shapes at {n} elements: BLOCK, warps, stages of the walk, GB/s, of ceiling");
    // The one-block kernel in other shapes, then the walk (`seeds::seeded_dropout_walk`) on
    // as many programs as the device holds at once.
    let blocks = [(256, 2), (512, 4), (1024, 8), (2048, 8), (2048, 16), (4096, 16)];
    let shapes = blocks.into_iter().map(|(block, warps)| (block, warps, 0));
    for (block, warps, stages) in shapes.chain(dropout::WALK_SHAPES) {
        let blocks = (n as u32).div_ceil(block);
        let out = dev.zeros::<f32>(n)?;
        let args = [(&x).into(), (&out).into(), (n as i32).into(), p.into(), seed.into()];
        let (kernel, config) = if stages == 0 {
            let config = LaunchConfig::grid1(blocks).num_warps(warps);
            (seeds::seeded_dropout(block)?, config)
        } else {
            let form = dropout::DropoutForm::Walk { block, warps, stages };
            dropout::dropout_launch(dev, form, n, &args)?
        };
        let form = if stages == 0 {
            format!("{block:>20} {warps:>6} {:>6}", "-")
        } else {
            format!("{block:>20} {warps:>6} {stages:>6}")
        };
        dev.launch(&kernel, &config, &args)?;
        let error = dropout_error(&dev.download(&out)?[..want.len()], &want);
        if error > TOLERANCE {
            println!("{form}  wrong results (error {error:e}); not timed");
            continue;
        }
        let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
        let g = gbps(8.0 * n as f64, s.median_ms);
        println!("{form} {g:>8.0} {:>9.1}%", 100.0 * g / ceiling);
        let name = match stages {
            0 => format!("seeded_dropout_b{block}_w{warps}"),
            _ => format!("seeded_dropout_walk_b{block}_w{warps}_s{stages}"),
        };
        let _ = writeln!(
            csv,
            "{id},{name},{n},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / ceiling
        );
    }
    Ok(())
}

/// Vector add f32 at 2^12..2^28 elements (2^20 with `--quick`) as a `perf_report`, next to
/// one launch of the copy kernel moving the same bytes through this backend. A size that
/// fails (a device without the memory) is a gap in the table, and has no CSV row.
fn bench_vector_add(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, quick, ceiling) = (dev.id(), run.quick, run.ceiling);
    let reps = run.reps();
    let max_log = if quick { 20 } else { 28 };
    let block = 1024;
    let kernel = seeds::vector_add(ScalarType::F32, block)?;
    let copy = copy_kernel(0)?;
    let bytes = |n: f64| 12.0 * n;
    let report = Benchmark::new("vector_add", "size", (12..=max_log).map(|log| (1u64 << log) as f64))
        .title(format!("vector add f32 on {id} (ceiling {ceiling:.0} GB/s)"))
        .gbps(bytes)
        .line("vector_add", |n| {
            let n = n as usize;
            let (x, y, z) = (
                dev.upload(&rng.f32s(n, 0.5, 1.5))?,
                dev.upload(&rng.f32s(n, 0.5, 1.5))?,
                dev.zeros::<f32>(n)?,
            );
            let config = LaunchConfig::grid1((n as u32).div_ceil(block));
            let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
            Ok(do_bench(dev, flush, 3, reps, &mut || {
                dev.launch(&kernel, &config, &args)
            })?)
        })
        .line("copy_kernel", |n| {
            // The same bytes: 1.5 elements copied (read and written) per element added.
            let n = (1.5 * n) as usize;
            let (a, b) = (dev.upload(&vec![1.0f32; n])?, dev.zeros::<f32>(n)?);
            let config = LaunchConfig::grid1((n as u32).div_ceil(COPY_BLOCK));
            let args = [(&a).into(), (&b).into(), (n as i32).into()];
            Ok(do_bench(dev, flush, 3, reps, &mut || {
                dev.launch(&copy, &config, &args)
            })?)
        })
        .run();
    println!();
    report.print();
    append_csv(csv, &id, &report, Some(ceiling));
    Ok(())
}

/// Appends a report's points to the benchmark's CSV, a row per point with its times (none
/// for a gap), the report's line names as kernels and its x values as sizes; with the
/// fraction of `ceiling` (GB/s) where the report is in GB/s. A section measured with
/// `rutile::bench::Benchmark` ends with this.
fn append_csv(csv: &mut String, id: &str, report: &Report, ceiling: Option<f64>) {
    append_csv_as(csv, id, report, ceiling, |line, x| {
        Some((line.to_string(), format!("{x}")))
    });
}

/// [`append_csv`] with the kernel and size columns of each line's point at x given by
/// `row(line, x)`; `None` leaves the line out (a line whose rows another part wrote).
fn append_csv_as(
    csv: &mut String,
    id: &str,
    report: &Report,
    ceiling: Option<f64>,
    row: impl Fn(&str, f64) -> Option<(String, String)>,
) {
    for line in &report.lines {
        for (i, &x) in report.x_values.iter().enumerate() {
            let (Some(s), Some(v)) = (line.stats[i], line.value(i)) else {
                continue;
            };
            let Some((kernel, size)) = row(&line.name, x) else {
                continue;
            };
            let _ = write!(
                csv,
                "{id},{kernel},{size},{:.5},{:.5},{:.5},",
                s.median_ms, s.p20_ms, s.p80_ms
            );
            let _ = match (report.unit, ceiling) {
                (Unit::GBps, Some(c)) => writeln!(csv, "{v:.1},{c:.1},{:.4}", v / c),
                (Unit::GBps, None) => writeln!(csv, "{v:.1},,"),
                _ => writeln!(csv, ",,"),
            };
        }
    }
}

/// The lines of `report` that `pick` renames (those it gives `None` left out), under
/// `title`: one sweep printed as several tables.
fn subset(report: &Report, title: String, pick: impl Fn(&str) -> Option<String>) -> Report {
    Report {
        title,
        lines: report
            .lines
            .iter()
            .filter_map(|l| pick(&l.name).map(|name| Series { name, ..l.clone() }))
            .collect(),
        ..report.clone()
    }
}

/// Inputs shared by the lines of one x value of a `Benchmark` (which runs every line at
/// one x before the next x): made by the first line that needs them, kept for the others,
/// and dropped (buffers freed) when a line asks for another x.
struct PerX<T> {
    current: RefCell<Option<(f64, Rc<T>)>>,
}

impl<T> PerX<T> {
    fn new() -> Self {
        PerX {
            current: RefCell::new(None),
        }
    }

    /// The inputs of `x`, made by `make` unless they are the current ones.
    fn get(&self, x: f64, make: impl FnOnce() -> rutile::Result<T>) -> rutile::Result<Rc<T>> {
        let mut current = self.current.borrow_mut();
        if let Some((at, inputs)) = &*current {
            if *at == x {
                return Ok(inputs.clone());
            }
        }
        // The previous inputs go first: the largest sizes may not fit twice.
        *current = None;
        let inputs = Rc::new(make()?);
        *current = Some((x, inputs.clone()));
        Ok(inputs)
    }

    /// Forgets the current inputs (before a sweep whose x values mean something else).
    fn clear(&self) {
        *self.current.borrow_mut() = None;
    }
}

/// `Err` listing the results that were wrong (each a gap in its table, not timed), if any.
fn wrong_results(wrong: Vec<String>) -> rutile::Result<()> {
    if wrong.is_empty() {
        return Ok(());
    }
    Err(rutile::Error::Device {
        backend: "benchmark",
        message: wrong.join("; "),
    })
}

/// GB/s at the host code's `num_warps` and at the best of those timed: the two cells of a
/// row of the memory-bound sweeps that ask whether the heuristic picks well.
struct WarpChoice {
    heuristic: LaunchShape,
    at_heuristic: Option<f64>,
    best: Option<(f64, LaunchShape)>,
}

/// A launch's `num_warps` and register limit (`maxnreg`), as a sweep varies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LaunchShape {
    num_warps: u32,
    maxnreg: Option<u32>,
}

impl LaunchShape {
    fn of(config: &LaunchConfig) -> LaunchShape {
        LaunchShape {
            num_warps: config.num_warps,
            maxnreg: config.maxnreg,
        }
    }
}

impl std::fmt::Display for LaunchShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "w{}", self.num_warps)?;
        if let Some(r) = self.maxnreg {
            write!(f, " r{r}")?;
        }
        Ok(())
    }
}

impl WarpChoice {
    fn new(heuristic: LaunchShape) -> WarpChoice {
        WarpChoice {
            heuristic,
            at_heuristic: None,
            best: None,
        }
    }
    fn record(&mut self, shape: LaunchShape, gbps: f64) {
        if shape == self.heuristic {
            self.at_heuristic = Some(gbps);
        }
        if self.best.is_none_or(|(b, _)| gbps > b) {
            self.best = Some((gbps, shape));
        }
    }
    /// The cells as printed: "GB/s (share of `ceiling`)", and the best with its launch
    /// shape (warps, and the register limit where one was set).
    fn cells(&self, ceiling: f64) -> (String, String) {
        let h = self
            .at_heuristic
            .map(|g| format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling))
            .unwrap_or_else(|| "-".into());
        match self.best {
            Some((bg, shape)) => (h, format!("{bg:.0} ({:.1}%, {shape})", 100.0 * bg / ceiling)),
            None => (h, "-".into()),
        }
    }
}
