//! Memory-bound seed kernels against the device-to-device copy ceiling, measured in the
//! same run on each GPU present (CUDA and wgpu side by side):
//!
//!     cargo run --release --example benchmark [-- --quick] [--csv FILE] [--flush copy|read]
//!                                               [--cols N,N,...]
//!                                               [--only vector_add,softmax,transpose,matmul_b,matmul,dropout,
//!                                                       layer_norm,long_softmax,attention]
//!
//! Vector add f32 for 2^12..2^28 elements (12 bytes per element), fused softmax f32
//! for M = 4096, N = 256..16384 (powers of two and three widths just past one; 8 bytes per
//! element), in the one-row-per-program, persistent, several-rows and chunked forms (`-cs`:
//! read-once loads; `-fd`: dividing as Triton's `/` compiles for f32, within 2 ulp), next
//! to a device-to-device copy of the same bytes and one launch of a copy kernel moving them
//! through the same backend, and the tiled transpose of an 8192 x 8192 f32 matrix (8 bytes
//! per element; its load and store contiguous along different axes of the tile) in 64 x 64
//! and 32 x 32 tiles at 4 and 8 warps, each configuration's result checked against the
//! CPU's transpose before it is timed; and the fp16 matmul with B row-major and
//! column-major (`matmul_b`); and the tutorial's fp16 matmul, autotuned, at M = N = K =
//! 256..8192 on every GPU beside cuBLAS on each CUDA device, in the same run (`matmul`;
//! `RUTILE_CUBLAS` points at a libcublas.so.N where it is not found, see `rutile::cublas`);
//! the seeded dropout tutorial for 2^12..2^28 f32 elements (8 bytes per element: its
//! random numbers are computed, not read), checked against the CPU reference first.
//! The next tutorials: the layer norm forward pass, fp16, M = 4096, N = 512..16384 and
//! long rows beyond (`layer_norm`; 4 bytes per element); the long-row softmax, f32, N =
//! 32768..262144 (`long_softmax`; 8 bytes per element), both against the copy ceiling; and
//! the fused attention forward pass, fp16, 4 x 32 heads, N_CTX = 1024..16384, head
//! dimensions 64 and 128, causal and not, in TFLOPS (`attention`), each checked against a
//! CPU reference before it is timed (`tutorial_sweeps.rs`).
//! `--only` runs the named sections only (the copy ceiling is always measured). Times are
//! medians of device-timed runs with the L2 cache emptied before each: by a 256 MiB copy
//! (`--flush copy`, as `triton.testing.do_bench`, the default) which leaves it dirty, or by
//! reading 256 MiB (`--flush read`), which leaves it clean. `--cols` measures the softmax at
//! the given widths only (e.g. `--cols 1024` to repeat one figure).

use rutile::autotune::Autotuner;
use rutile::bench::{Benchmark, Report, Unit};
use rutile::cublas::Cublas;
use rutile::seeds;
use rutile::{Backend, CacheModifier, CudaGpu, Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use rutile_examples::bench::{copy_kernel, do_bench, gbps, CacheFlush, CopyTimes, FlushMode, Stats, COPY_BLOCK};
use rutile_examples::check::{first_difference, transpose_reference};
use rutile_examples::rng::{normal_f32s, Rng};
use rutile_examples::tutorials::{matmul_configs_for, tuned_matmul};
use std::fmt::Write as _;
use std::sync::Arc;

#[path = "benchmark/tutorial_sweeps.rs"]
mod tutorial_sweeps;

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
                    "--only takes sections from vector_add, softmax, transpose, matmul_b, matmul, dropout, layer_norm, \
                     long_softmax and attention separated by commas, got {list:?}"
                );
                std::process::exit(2);
            })
        }
    };
    let mut sizes = softmax_sizes(quick);
    if let Some(i) = args.iter().position(|a| a == "--cols") {
        let list = args.get(i + 1).map(String::as_str).unwrap_or("");
        match list.split(',').map(str::parse::<usize>).collect::<Result<Vec<_>, _>>() {
            Ok(c) if !c.is_empty() && c.iter().all(|&n| (1..=1 << 20).contains(&n)) => sizes.cols = c,
            _ => {
                eprintln!("--cols takes widths from 1 to 2^20 separated by commas, got {list:?}");
                std::process::exit(2);
            }
        }
    }
    if !sections.softmax {
        // No softmax, so no copies of its bytes either.
        sizes.cols.clear();
    }
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
    for dev in &devices {
        let name = &dev.properties().name;
        let same_gpu = || {
            devices
                .iter()
                .zip(&copies)
                .filter(|(d, _)| &d.properties().name == name)
        };
        let ceiling = same_gpu().map(|(_, c)| c.large).fold(0.0, f64::max);
        let same_bytes: Vec<f64> = (0..sizes.cols.len())
            .map(|i| same_gpu().map(|(_, c)| c.same_bytes[i]).fold(0.0, f64::max))
            .collect();
        let run = Run {
            quick,
            flush_mode,
            sections,
            ceiling,
        };
        if let Err(e) = bench_device(dev.as_ref(), &run, &sizes, &same_bytes, &mut csv) {
            eprintln!("{}: benchmark failed: {e}", dev.id());
            std::process::exit(1);
        }
    }
    if sections.matmul {
        if let Err(e) = bench_matmul(&devices, quick, flush_mode, &mut csv) {
            eprintln!("matmul benchmark failed: {e}");
            std::process::exit(1);
        }
    }
    if let Some(path) = csv_path {
        std::fs::write(&path, csv).expect("writing the CSV file");
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

/// Copy bandwidths of one device, in GB/s (bytes read + written).
struct Copies {
    /// A 1 GiB copy: the ceiling.
    large: f64,
    /// A copy of the bytes of each softmax size, timed as the kernels are.
    same_bytes: Vec<f64>,
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
        same_bytes.push(g);
    }
    Ok(Copies { large, same_bytes })
}

fn bench_device(
    dev: &dyn Device,
    run: &Run,
    sizes: &SoftmaxSizes,
    same_bytes: &[f64],
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
        bench_softmax(dev, run, flush, &mut rng, sizes, same_bytes, csv)?;
    }
    if sections.transpose {
        bench_transpose(dev, run, flush, &mut rng, csv)?;
    }
    if sections.matmul_b {
        bench_matmul_b(dev, run, flush, &mut rng, csv)?;
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
    let reps = if quick { 5 } else { 50 };
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
    let reps = if quick { 5 } else { 50 };
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
    for line in &report.lines {
        for (i, &x) in report.x_values.iter().enumerate() {
            let (Some(s), Some(v)) = (line.stats[i], line.value(i)) else {
                continue;
            };
            let _ = write!(
                csv,
                "{id},{},{x},{:.5},{:.5},{:.5},",
                line.name, s.median_ms, s.p20_ms, s.p80_ms
            );
            let _ = match (report.unit, ceiling) {
                (Unit::GBps, Some(c)) => writeln!(csv, "{v:.1},{c:.1},{:.4}", v / c),
                (Unit::GBps, None) => writeln!(csv, "{v:.1},,"),
                _ => writeln!(csv, ",,"),
            };
        }
    }
}

fn bench_softmax(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    sizes: &SoftmaxSizes,
    same_bytes: &[f64],
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, quick, ceiling) = (dev.id(), run.quick, run.ceiling);
    let reps = if quick { 5 } else { 50 };
    let (m, ns) = (sizes.rows, &sizes.cols);
    println!("\nsoftmax f32, M={m}: GB/s (of ceiling) at the tutorial's num_warps, and at the best num_warps of 1..16");
    println!(
        "{:>8}  {:<12} {:>22} {:>22}",
        "N", "form", "tutorial num_warps", "best num_warps"
    );
    let copy = copy_kernel(0)?;
    for (&n, &same) in ns.iter().zip(same_bytes) {
        println!(
            "{n:>8}  {:<12} {:>22}",
            "copy (same bytes)",
            format!("{same:.0} ({:.1}%)", 100.0 * same / ceiling)
        );
        let x = dev.upload(&normal_f32s(rng, m * n))?;
        let y = dev.zeros::<f32>(m * n)?;
        // The same bytes moved by one launch of a copy kernel through this backend.
        let config = LaunchConfig::grid1(((m * n) as u32).div_ceil(COPY_BLOCK));
        let args = [(&x).into(), (&y).into(), ((m * n) as i32).into()];
        let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&copy, &config, &args))?;
        let g = gbps(8.0 * (m * n) as f64, s.median_ms);
        println!(
            "{n:>8}  {:<12} {:>22}",
            "copy kernel",
            format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling)
        );
        let _ = writeln!(
            csv,
            "{id},copy_kernel,{m}x{n},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / ceiling
        );
        let blk = seeds::softmax_block(n as u32);
        let heuristic = seeds::softmax_num_warps(blk);
        let c = n as i32;
        let args = [
            (&y).into(),
            (&x).into(),
            c.into(),
            c.into(),
            (m as i32).into(),
            c.into(),
        ];
        let full_division = seeds::SoftmaxOptions {
            cache: CacheModifier::Streaming,
            ieee_rounding: false,
        };
        // One row per program, persistent, and several rows per program (short rows only:
        // a program should not hold more than 8192 elements).
        let mut forms = vec![
            ("simple", seeds::softmax(blk)?, 1u32),
            ("persistent", seeds::softmax_persistent(blk)?, 0),
            // The simple form with its input loads marked read-once (Triton's
            // `cache_modifier=".cs"`).
            ("simple-cs", seeds::softmax_with(blk, CacheModifier::Streaming)?, 1),
            // The persistent form with read-once loads: with fewer rows in flight than the
            // simple form, evict-first lines can make room for each other in L2.
            (
                "persistent-cs",
                seeds::softmax_persistent_with(blk, 2, CacheModifier::Streaming)?,
                0,
            ),
            // `simple-cs` dividing as Triton's `/` compiles for f32 (`div.full.f32`, within
            // 2 ulp) instead of correctly rounded: fewer registers, more programs resident.
            ("simple-cs-fd", seeds::softmax_with(blk, full_division)?, 1),
        ];
        for rows in [2u32, 4] {
            if rows * blk <= 8192 {
                forms.push((
                    if rows == 2 { "rows2" } else { "rows4" },
                    seeds::softmax_rows(rows, blk)?,
                    rows,
                ));
            }
        }
        if 2 * blk <= 8192 {
            forms.push((
                "rows2-cs",
                seeds::softmax_rows_with(2, blk, CacheModifier::Streaming)?,
                2,
            ));
        }
        // The row in power-of-two pieces, where it does not fill one block.
        let chunks = seeds::softmax_chunks(n as u32);
        if chunks.len() > 1 {
            forms.push(("chunked", seeds::softmax_chunked(&chunks, CacheModifier::Default)?, 1));
            forms.push((
                "chunked-cs",
                seeds::softmax_chunked(&chunks, CacheModifier::Streaming)?,
                1,
            ));
            forms.push(("chunked-cs-fd", seeds::softmax_chunked(&chunks, full_division)?, 1));
        }
        for (form, kernel, rows_per_program) in &forms {
            let mut choice = WarpChoice::new(heuristic);
            for warps in [1u32, 2, 4, 8, 16] {
                let mut config = LaunchConfig::grid1((m as u32).div_ceil((*rows_per_program).max(1))).num_warps(warps);
                if *rows_per_program == 0 {
                    let compiled = dev.compile_for(kernel, &config, &args)?;
                    let programs = rutile::occupancy::persistent_grid(dev.properties(), &compiled.metadata, m as u32);
                    config.grid = [programs, 1, 1];
                }
                let s = match do_bench(dev, flush, 3, reps, &mut || dev.launch(kernel, &config, &args)) {
                    Ok(s) => s,
                    // Configurations the device cannot run (too many threads) are skipped.
                    Err(rutile::Error::Launch { .. }) => continue,
                    Err(e) => return Err(e),
                };
                let g = gbps(8.0 * (m * n) as f64, s.median_ms);
                let _ = writeln!(
                    csv,
                    "{id},softmax_{form}_w{warps},{m}x{n},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
                    s.median_ms,
                    s.p20_ms,
                    s.p80_ms,
                    g / ceiling
                );
                choice.record(warps, g);
            }
            let (h, best) = choice.cells(ceiling);
            println!("{n:>8}  {form:<12} {h:>22} {best:>22}");
        }
    }
    Ok(())
}

/// The tiled transpose of an `m x m` f32 matrix (8192, or 1024 with `--quick`) in 64 x 64
/// and 32 x 32 tiles at 4 and 8 warps, next to one launch of the copy kernel moving the
/// same bytes through this backend. Each configuration's result, on an output poisoned
/// with NaN, is checked against the CPU's transpose before it is timed.
fn bench_transpose(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, quick, ceiling) = (dev.id(), run.quick, run.ceiling);
    let reps = if quick { 5 } else { 50 };
    let m = if quick { 1024usize } else { 8192 };
    let (tiles, warps) = ([(64u32, 64u32), (32, 32)], [4u32, 8]);
    let bytes = 8.0 * (m * m) as f64;
    let host = rng.f32s(m * m, 0.5, 1.5);
    let want = transpose_reference(&host, m, m);
    let poison = vec![f32::NAN; m * m];
    let (x, out) = (dev.upload(&host)?, dev.upload(&poison)?);
    let row = |csv: &mut String, kernel: &str, s: Stats| {
        let g = gbps(bytes, s.median_ms);
        let _ = writeln!(
            csv,
            "{id},{kernel},{m}x{m},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / ceiling
        );
        format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling)
    };
    println!("\ntranspose f32, {m}x{m}: GB/s (of ceiling)");
    println!(
        "{:<12} {:>18} {:>18}",
        "tiles",
        format!("num_warps {}", warps[0]),
        format!("num_warps {}", warps[1])
    );
    let copy = copy_kernel(0)?;
    let config = LaunchConfig::grid1(((m * m) as u32).div_ceil(COPY_BLOCK));
    let args = [(&x).into(), (&out).into(), ((m * m) as i32).into()];
    let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&copy, &config, &args))?;
    println!("{:<12} {:>18}", "copy kernel", row(csv, "copy_kernel", s));
    let mi = m as i32;
    let args = [(&x).into(), (&out).into(), mi.into(), mi.into(), mi.into(), mi.into()];
    for (bm, bn) in tiles {
        let kernel = seeds::transpose(ScalarType::F32, bm, bn)?;
        let grid = seeds::transpose_grid(m as u32, m as u32, bm, bn);
        let mut cells = Vec::new();
        for w in warps {
            let config = LaunchConfig::new(grid).num_warps(w);
            dev.upload_into(&out, &poison)?;
            dev.launch(&kernel, &config, &args)?;
            let got = dev.download(&out)?;
            if let Some((r, c)) = first_difference(&got, &want, m) {
                eprintln!(
                    "{id}: transpose {m}x{m} in {bm}x{bn} tiles at num_warps {w} is wrong: out[{r}, {c}] = {} \
                     where x[{c}, {r}] = {}",
                    got[r * m + c],
                    want[r * m + c]
                );
                std::process::exit(1);
            }
            let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
            cells.push(row(csv, &format!("transpose_{bm}x{bn}_w{w}"), s));
        }
        println!("{:<12} {:>18} {:>18}", format!("{bm}x{bn}"), cells[0], cells[1]);
    }
    Ok(())
}

/// The fp16 matmul (64x64x32 blocks, 4 warps) with B row-major and column-major
/// (`stride_bk = 1`, specialized as Triton's `equal_to_1`, so B's loads run down its
/// columns), in TFLOPS at M = N = K = 1024 and 2048 (512 with `--quick`), and the
/// column-major one as a fraction of the row-major one. Each is checked against an f64
/// reference at 256 first.
fn bench_matmul_b(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    use half::f16;
    let id = dev.id();
    let meta = seeds::MatmulMeta::fp16(64, 64, 32);
    let kernel = seeds::matmul(&meta)?;
    let config = |n: usize| LaunchConfig::grid1(seeds::matmul_grid(&meta, n as u32, n as u32)).num_warps(4);
    // B (k x n) as given: row-major, or column-major (its transpose stored row-major).
    let stored_b = |b: &[f16], n: usize, column_major: bool| -> Vec<f16> {
        if !column_major {
            return b.to_vec();
        }
        let mut t = vec![f16::ZERO; n * n];
        for p in 0..n {
            for j in 0..n {
                t[j * n + p] = b[p * n + j];
            }
        }
        t
    };
    let args_for = |n: usize, column_major: bool| -> Vec<i32> {
        let n = n as i32;
        let (sbk, sbn) = if column_major { (1, n) } else { (n, 1) };
        vec![n, n, n, n, 1, sbk, sbn, n, 1]
    };
    let launch = |a: &rutile::Buffer<f16>, b: &rutile::Buffer<f16>, c: &rutile::Buffer<f16>, n: usize, cm: bool| {
        let mut args: Vec<rutile::Arg> = vec![a.into(), b.into(), c.into()];
        args.extend(args_for(n, cm).into_iter().map(rutile::Arg::I32));
        dev.launch(&kernel, &config(n), &args)
    };
    // Correctness first, both ways.
    let n = 256;
    let a: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
    let want = rutile_examples::check::matmul_reference(&a, &b, n, n, n, false);
    for cm in [false, true] {
        let (ab, bb, cb) = (
            dev.upload(&a)?,
            dev.upload(&stored_b(&b, n, cm))?,
            dev.zeros::<f16>(n * n)?,
        );
        launch(&ab, &bb, &cb, n, cm)?;
        let got = dev.download(&cb)?;
        let (err, at) = rutile_examples::check::max_relative_error(got.iter().map(|v| v.to_f64()), &want, 1.0);
        if err > 1e-2 {
            eprintln!("{id}: matmul with column-major B = {cm} is wrong: relative error {err:.2e} at {at}");
            std::process::exit(1);
        }
    }
    let reps = if run.quick { 3 } else { 20 };
    let sizes: &[usize] = if run.quick { &[512] } else { &[1024, 2048] };
    println!("\nmatmul fp16 64x64x32 w4: TFLOPS with B row-major, column-major (fraction)");
    for &n in sizes {
        let a: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let b: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let mut tflops = Vec::new();
        for cm in [false, true] {
            let (ab, bb, cb) = (
                dev.upload(&a)?,
                dev.upload(&stored_b(&b, n, cm))?,
                dev.zeros::<f16>(n * n)?,
            );
            let s = do_bench(dev, flush, 2, reps, &mut || launch(&ab, &bb, &cb, n, cm))?;
            let t = 2.0 * (n as f64).powi(3) / (s.median_ms * 1e-3) / 1e12;
            let name = if cm { "matmul_fp16_b_col" } else { "matmul_fp16_b_row" };
            let _ = writeln!(
                csv,
                "{id},{name},{n}x{n}x{n},{:.5},{:.5},{:.5},,,",
                s.median_ms, s.p20_ms, s.p80_ms
            );
            tflops.push(t);
        }
        println!(
            "{n:>6}  {:>8.2} {:>8.2} ({:.1}%)",
            tflops[0],
            tflops[1],
            100.0 * tflops[1] / tflops[0]
        );
    }
    // The tutorial's matmul, autotuned for each layout on its own (a tuner per layout:
    // the tutorial's key, `M, N, K`, does not tell them apart).
    let sizes: &[usize] = if run.quick { &[512] } else { &[2048, 4096] };
    let tuners = [
        Autotuner::new("matmul_b_row", matmul_configs_for(dev))?,
        Autotuner::new("matmul_b_col", matmul_configs_for(dev))?,
    ];
    println!("matmul fp16 autotuned: TFLOPS with B row-major, column-major (fraction)");
    for &n in sizes {
        let a: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let b: Vec<f16> = rng.f32s(n * n, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let mut tflops = Vec::new();
        let mut chosen = Vec::new();
        for (cm, tuner) in [false, true].into_iter().zip(&tuners) {
            let (ab, bb, cb) = (
                dev.upload(&a)?,
                dev.upload(&stored_b(&b, n, cm))?,
                dev.zeros::<f16>(n * n)?,
            );
            let mut args: Vec<rutile::Arg> = vec![(&ab).into(), (&bb).into(), (&cb).into()];
            args.extend(args_for(n, cm).into_iter().map(rutile::Arg::I32));
            let tuned = tuned_matmul(dev, tuner, (n, n, n), false, &args)?;
            let s = do_bench(dev, flush, 2, reps, &mut || {
                dev.launch(&tuned.kernel, &tuned.launch, &args)
            })?;
            let name = if cm {
                "matmul_fp16_b_col_tuned"
            } else {
                "matmul_fp16_b_row_tuned"
            };
            let _ = writeln!(
                csv,
                "{id},{name},{n}x{n}x{n},{:.5},{:.5},{:.5},,,",
                s.median_ms, s.p20_ms, s.p80_ms
            );
            tflops.push(2.0 * (n as f64).powi(3) / (s.median_ms * 1e-3) / 1e12);
            chosen.push(tuned.choice.config.to_string());
        }
        println!(
            "{n:>6}  {:>8.2} {:>8.2} ({:.1}%)   [{} | {}]",
            tflops[0],
            tflops[1],
            100.0 * tflops[1] / tflops[0],
            chosen[0],
            chosen[1]
        );
    }
    Ok(())
}

/// One device of the matmul section: the device rutile's matmul runs on, and cuBLAS where
/// it is a CUDA GPU (or why not).
struct MatmulDevice {
    dev: Arc<dyn Device>,
    /// The GPU's name, which pairs each backend's device with the same GPU's cuBLAS.
    gpu: String,
    cublas: Option<rutile::Result<Cublas>>,
    flush: Option<CacheFlush>,
    tuner: Autotuner,
    /// The same kernel with the tutorial's fused leaky ReLU, on the GPUs cuBLAS runs on.
    leaky: Option<Autotuner>,
}

/// The device's cuBLAS handle, where it has one.
fn cublas_of(d: &MatmulDevice) -> Option<&Cublas> {
    match &d.cublas {
        Some(Ok(c)) => Some(c),
        _ => None,
    }
}

/// Why cuBLAS could not be used, without the error's `cuBLAS: ` prefix.
fn reason(e: &rutile::Error) -> String {
    match e {
        rutile::Error::Device { message, .. } => message.clone(),
        e => e.to_string(),
    }
}

/// The ordinal of a CUDA device (`cuda:N`); `None` for another backend.
fn cuda_ordinal(dev: &dyn Device) -> Option<usize> {
    if dev.properties().backend != Backend::Cuda {
        return None;
    }
    dev.id().strip_prefix("cuda:")?.parse().ok()
}

/// The tutorial's fp16 matmul (f32 accumulation, fp16 out), autotuned per size over the
/// tutorial's configurations as `tutorials::matmul` does, on every GPU, beside cuBLAS
/// (`cublasGemmEx`, fp16 in and out, f32 accumulation, its default algorithm) on each CUDA
/// device, in TFLOPS at M = N = K = 256..8192 (256 and 512 with `--quick`), with rutile's
/// as a percentage of cuBLAS's on the same GPU: the tensor-core baseline. On a CUDA GPU
/// both run on a `CudaGpu` opened for this section (the same GPU and context: cuBLAS needs
/// the driver-level device, and then runs on the stream whose events time it). At 512,
/// before anything is timed, rutile's and cuBLAS's products are compared with each other
/// and with an f64 CPU reference (relative Frobenius error).
fn bench_matmul(
    devices: &[Arc<dyn Device>],
    quick: bool,
    flush_mode: FlushMode,
    csv: &mut String,
) -> rutile::Result<()> {
    use half::f16;
    let mut rows = Vec::new();
    for dev in devices {
        let (dev, cublas): (Arc<dyn Device>, _) = match cuda_ordinal(dev.as_ref()) {
            Some(ordinal) => {
                let gpu = CudaGpu::open(ordinal)?;
                let cublas = Cublas::new(&gpu);
                (Arc::new(gpu), Some(cublas))
            }
            None => (dev.clone(), None),
        };
        let flush = if quick {
            None
        } else {
            Some(CacheFlush::new(dev.as_ref(), flush_mode)?)
        };
        let tuner = Autotuner::new("matmul", matmul_configs_for(dev.as_ref()))?;
        let leaky = match cublas {
            Some(_) => Some(Autotuner::new("matmul_leaky_relu", matmul_configs_for(dev.as_ref()))?),
            None => None,
        };
        rows.push(MatmulDevice {
            gpu: dev.properties().name.clone(),
            dev,
            cublas,
            flush,
            tuner,
            leaky,
        });
    }
    println!(
        "\n== matmul, fp16 inputs, f32 accumulation, fp16 output, M = N = K: TFLOPS; rutile's tutorial kernel \
         autotuned, and cuBLAS"
    );
    for d in &rows {
        match &d.cublas {
            Some(Ok(c)) => println!("{}: {}", d.dev.id(), c.library()),
            Some(Err(e)) => println!("{}: cuBLAS: not available ({})", d.dev.id(), reason(e)),
            None => {}
        }
        // Which units a Vulkan device's `dot` runs on (the H100 runs both: `RUTILE_COOP_MATRIX=0`).
        if d.dev.properties().backend == Backend::Vulkan {
            let on = match &d.dev.properties().cooperative_matrix {
                Some(shapes) => format!(
                    "cooperative matrices ({})",
                    shapes
                        .iter()
                        .map(|s| format!("{}x{}x{} {}->{}", s.m, s.n, s.k, s.ab, s.acc))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "FMAs (no cooperative matrices)".to_string(),
            };
            println!("{}: dot on {on}", d.dev.id());
        }
    }
    let random =
        |rng: &mut Rng, len: usize| -> Vec<f16> { rng.f32s(len, -1.0, 1.0).into_iter().map(f16::from_f32).collect() };
    let mut rng = Rng::new(11);
    // Correctness first, on every device.
    let n = 512;
    let (a, b) = (random(&mut rng, n * n), random(&mut rng, n * n));
    let want = rutile_examples::check::matmul_reference(&a, &b, n, n, n, false);
    for d in &rows {
        let dev = d.dev.as_ref();
        let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(n * n)?);
        let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
        args.extend(seeds::matmul_row_major_args(n, n, n).map(rutile::Arg::I32));
        let tuned = tuned_matmul(dev, &d.tuner, (n, n, n), false, &args)?;
        dev.launch(&tuned.kernel, &tuned.launch, &args)?;
        let ours: Vec<f64> = dev.download(&cb)?.iter().map(|v| v.to_f64()).collect();
        let mut report = format!("rutile vs f64 {:.1e}", frobenius_error(&ours, &want));
        let mut errors = vec![frobenius_error(&ours, &want)];
        if let Some(cublas) = cublas_of(d) {
            let cc = dev.zeros::<f16>(n * n)?;
            cublas.matmul(&ab, &bb, &cc, (n, n, n))?;
            let theirs: Vec<f64> = dev.download(&cc)?.iter().map(|v| v.to_f64()).collect();
            let (vs, theirs_err) = (frobenius_error(&ours, &theirs), frobenius_error(&theirs, &want));
            let _ = write!(report, ", cuBLAS vs f64 {theirs_err:.1e}, rutile vs cuBLAS {vs:.1e}");
            errors.extend([vs, theirs_err]);
        }
        println!("{}: check at {n}: relative Frobenius error {report}", dev.id());
        // A NaN anywhere fails too.
        if errors.iter().any(|e| e.is_nan() || *e > 1e-2) {
            eprintln!("{}: the matmul at {n} is wrong: {report}", dev.id());
            std::process::exit(1);
        }
    }
    let tflops = |n: usize, ms: f64| 2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e12;
    let sizes: &[usize] = if quick {
        &[256, 512]
    } else {
        &[256, 512, 1024, 2048, 4096, 8192]
    };
    let reps = if quick { 3 } else { 20 };
    let mut header = format!("{:>6}", "N");
    for d in &rows {
        let _ = write!(header, "  {:>22}", format!("rutile {}", d.dev.id()));
    }
    for d in rows.iter().filter(|d| d.leaky.is_some()) {
        let _ = write!(header, "  {:>22}", format!("+leaky_relu {}", d.dev.id()));
    }
    for d in rows.iter().filter(|d| cublas_of(d).is_some()) {
        let _ = write!(header, "  {:>14}", format!("cuBLAS {}", d.dev.id()));
    }
    if rows.iter().any(|d| cublas_of(d).is_some()) {
        header += "    (rutile as % of cuBLAS on the same GPU)";
    }
    println!("{header}");
    let mut chosen = Vec::new();
    for &n in sizes {
        let (a, b) = (random(&mut rng, n * n), random(&mut rng, n * n));
        let mut ours = Vec::new();
        let mut leaky = Vec::new();
        let mut theirs = Vec::new();
        for d in &rows {
            let (dev, id, flush) = (d.dev.as_ref(), d.dev.id(), d.flush.as_ref());
            let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(n * n)?);
            let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
            args.extend(seeds::matmul_row_major_args(n, n, n).map(rutile::Arg::I32));
            let tuned = tuned_matmul(dev, &d.tuner, (n, n, n), false, &args)?;
            let s = do_bench(dev, flush, 3, reps, &mut || {
                dev.launch(&tuned.kernel, &tuned.launch, &args)
            })?;
            let c = &tuned.choice.config;
            let block = |name| c.value(name).unwrap_or(0);
            chosen.push(format!(
                "{id} {n}: {}x{}x{} w{} s{}",
                block("BLOCK_M"),
                block("BLOCK_N"),
                block("BLOCK_K"),
                c.num_warps,
                c.num_stages
            ));
            let _ = writeln!(
                csv,
                "{id},matmul_fp16_rutile,{n}x{n}x{n},{:.5},{:.5},{:.5},,,",
                s.median_ms, s.p20_ms, s.p80_ms
            );
            ours.push((d.gpu.clone(), tflops(n, s.median_ms)));
            if let Some(tuner) = &d.leaky {
                let tuned = tuned_matmul(dev, tuner, (n, n, n), true, &args)?;
                let s = do_bench(dev, flush, 3, reps, &mut || {
                    dev.launch(&tuned.kernel, &tuned.launch, &args)
                })?;
                let _ = writeln!(
                    csv,
                    "{id},matmul_fp16_leaky_relu_rutile,{n}x{n}x{n},{:.5},{:.5},{:.5},,,",
                    s.median_ms, s.p20_ms, s.p80_ms
                );
                leaky.push((d.gpu.clone(), tflops(n, s.median_ms)));
            }
            if let Some(cublas) = cublas_of(d) {
                let cc = dev.zeros::<f16>(n * n)?;
                let s = do_bench(dev, flush, 3, reps, &mut || cublas.matmul(&ab, &bb, &cc, (n, n, n)))?;
                let _ = writeln!(
                    csv,
                    "{id},matmul_fp16_cublas,{n}x{n}x{n},{:.5},{:.5},{:.5},,,",
                    s.median_ms, s.p20_ms, s.p80_ms
                );
                theirs.push((d.gpu.clone(), tflops(n, s.median_ms)));
            }
        }
        let mut row = format!("{n:>6}");
        for (gpu, t) in ours.iter().chain(&leaky) {
            let cell = match theirs.iter().find(|(g, _)| g == gpu) {
                Some((_, c)) => format!("{t:.1} ({:.1}%)", 100.0 * t / c),
                None => format!("{t:.1}"),
            };
            let _ = write!(row, "  {cell:>22}");
        }
        for (_, t) in &theirs {
            let _ = write!(row, "  {t:>14.1}");
        }
        println!("{row}");
    }
    println!("autotuned: {}", chosen.join("; "));
    Ok(())
}

/// `‖got - want‖ / ‖want‖` (Frobenius norms); NaN where `got` holds a NaN.
fn frobenius_error(got: &[f64], want: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        diff += (g - w) * (g - w);
        norm += w * w;
    }
    (diff / norm).sqrt()
}

/// GB/s at the host code's `num_warps` and at the best of those timed: the two cells of a
/// row of the memory-bound sweeps that ask whether the heuristic picks well.
struct WarpChoice {
    heuristic: u32,
    at_heuristic: Option<f64>,
    best: Option<(f64, u32)>,
}

impl WarpChoice {
    fn new(heuristic: u32) -> WarpChoice {
        WarpChoice {
            heuristic,
            at_heuristic: None,
            best: None,
        }
    }
    fn record(&mut self, warps: u32, gbps: f64) {
        if warps == self.heuristic {
            self.at_heuristic = Some(gbps);
        }
        if self.best.is_none_or(|(b, _)| gbps > b) {
            self.best = Some((gbps, warps));
        }
    }
    /// The cells as printed: "GB/s (share of `ceiling`)", and the best with its warps.
    fn cells(&self, ceiling: f64) -> (String, String) {
        let h = self
            .at_heuristic
            .map(|g| format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling))
            .unwrap_or_else(|| "-".into());
        let (bg, bw) = self.best.unwrap_or((0.0, 0));
        (h, format!("{bg:.0} ({:.1}%, w{bw})", 100.0 * bg / ceiling))
    }
}
