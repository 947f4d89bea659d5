//! The benchmark's matmul sections: the fp16 matmul with B row-major and column-major
//! (`matmul_b`, per device), and the tutorial's matmul autotuned on every GPU beside
//! cuBLAS (`matmul`, all devices in one table), each a `perf_report`.

use super::{append_csv_as, PerX, Run};
use half::f16;
use rutile::autotune::Autotuner;
use rutile::bench::{Benchmark, Report};
use rutile::cublas::Cublas;
use rutile::{seeds, Backend, CudaGpu, Device, DeviceExt, LaunchConfig};
use rutile_examples::bench::{do_bench, CacheFlush, FlushMode};
use rutile_examples::check::relative_frobenius as frobenius_error;
use rutile_examples::rng::Rng;
use rutile_examples::tutorials::{matmul_configs_for, tuned_matmul};
use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::Arc;

/// Rounds a point is timed in, the lines interleaved ([`Benchmark::rounds`]): the share of
/// cuBLAS at 8192³ moved between 86% and 92% from run to run when each line was timed in
/// one block after the autotuner's runs, so that rutile and cuBLAS now take turns and
/// meet the same clocks. Five, each starting one line further on: in three rounds of one
/// order, the same kernel with and without its leaky ReLU came 7% apart at 4096³ (H200).
const ROUNDS: usize = 5;

/// Random fp16 values in [-1, 1].
fn random(rng: &mut Rng, len: usize) -> Vec<f16> {
    rng.f32s(len, -1.0, 1.0).into_iter().map(f16::from_f32).collect()
}

/// The value of `report`'s line `b` as a percentage of its line `a` at each x, one row per
/// x value: `label` then the percentages.
fn print_ratio(report: &Report, label: &str, a: usize, b: usize) {
    let cells: Vec<String> = report
        .x_values
        .iter()
        .enumerate()
        .map(|(i, x)| match (report.lines[a].value(i), report.lines[b].value(i)) {
            (Some(va), Some(vb)) => format!("{x}: {:.1}%", 100.0 * vb / va),
            _ => format!("{x}: -"),
        })
        .collect();
    println!("{label}: {}", cells.join(", "));
}

/// The fp16 matmul (64x64x32 blocks, 4 warps) with B row-major and column-major
/// (`stride_bk = 1`, specialized as Triton's `equal_to_1`, so B's loads run down its
/// columns), in TFLOPS at M = N = K = 1024 and 2048 (512 with `--quick`), and the
/// column-major one as a percentage of the row-major one; then the tutorial's matmul,
/// autotuned for each layout on its own, at 2048 and 4096 (512 with `--quick`), with the
/// configurations chosen. Each layout is checked against an f64 reference at 256 first.
pub fn matmul_b(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
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
    let (a, b) = (random(rng, n * n), random(rng, n * n));
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
    let rng = RefCell::new(rng);
    // The operands of one size, the same for both layouts; each line stores B its way.
    let host = PerX::new();
    let host_at = |n: usize| {
        host.get(n as f64, || {
            let mut rng = rng.borrow_mut();
            Ok((random(&mut rng, n * n), random(&mut rng, n * n)))
        })
    };
    let upload = |n: usize, cm: bool| -> rutile::Result<[rutile::Buffer<f16>; 3]> {
        let ops = host_at(n)?;
        Ok([
            dev.upload(&ops.0)?,
            dev.upload(&stored_b(&ops.1, n, cm))?,
            dev.zeros::<f16>(n * n)?,
        ])
    };
    let layouts = [(false, "B row-major"), (true, "B column-major")];
    let csv_name = |line: &str, suffix: &str| {
        let layout = if line == layouts[1].1 { "col" } else { "row" };
        format!("matmul_fp16_b_{layout}{suffix}")
    };
    let sizes = if run.quick { vec![512.0] } else { vec![1024.0, 2048.0] };
    let mut bench = Benchmark::new("matmul_b", "M = N = K", sizes)
        .title(format!("matmul fp16 64x64x32 w4 on {id}, B row-major and column-major"))
        .tflops(|n| 2.0 * n * n * n);
    for (cm, name) in layouts {
        let (upload, launch) = (&upload, &launch);
        bench.add_line(name, move |n| {
            let n = n as usize;
            let [ab, bb, cb] = upload(n, cm)?;
            Ok(do_bench(dev, flush, 2, reps, &mut || launch(&ab, &bb, &cb, n, cm))?)
        });
    }
    let report = bench.run();
    println!();
    report.print();
    print_ratio(&report, "column-major as % of row-major", 0, 1);
    append_csv_as(csv, &id, &report, None, |line, n| {
        Some((csv_name(line, ""), format!("{n}x{n}x{n}")))
    });
    // The tutorial's matmul, autotuned for each layout on its own (a tuner per layout:
    // the tutorial's key, `M, N, K`, does not tell them apart).
    let sizes = if run.quick { vec![512.0] } else { vec![2048.0, 4096.0] };
    let tuners = [
        Autotuner::new("matmul_b_row", matmul_configs_for(dev))?,
        Autotuner::new("matmul_b_col", matmul_configs_for(dev))?,
    ];
    let chosen = RefCell::new(Vec::new());
    let mut bench = Benchmark::new("matmul_b_tuned", "M = N = K", sizes)
        .title(format!(
            "matmul fp16 autotuned per layout on {id}, B row-major and column-major"
        ))
        .tflops(|n| 2.0 * n * n * n);
    for ((cm, name), tuner) in layouts.into_iter().zip(&tuners) {
        let (upload, args_for, chosen) = (&upload, &args_for, &chosen);
        bench.add_line(name, move |n| {
            let n = n as usize;
            let [ab, bb, cb] = upload(n, cm)?;
            let mut args: Vec<rutile::Arg> = vec![(&ab).into(), (&bb).into(), (&cb).into()];
            args.extend(args_for(n, cm).into_iter().map(rutile::Arg::I32));
            let tuned = tuned_matmul(dev, tuner, (n, n, n), false, &args)?;
            chosen.borrow_mut().push(format!("{name} {n}: {}", tuned.choice.config));
            Ok(do_bench(dev, flush, 2, reps, &mut || {
                dev.launch(&tuned.kernel, &tuned.launch, &args)
            })?)
        });
    }
    let report = bench.run();
    println!();
    report.print();
    print_ratio(&report, "column-major as % of row-major", 0, 1);
    println!("autotuned: {}", chosen.into_inner().join("; "));
    append_csv_as(csv, &id, &report, None, |line, n| {
        Some((csv_name(line, "_tuned"), format!("{n}x{n}x{n}")))
    });
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

impl MatmulDevice {
    /// The device's cuBLAS handle, where it has one.
    fn cublas(&self) -> Option<&Cublas> {
        match &self.cublas {
            Some(Ok(c)) => Some(c),
            _ => None,
        }
    }
}

/// Why cuBLAS could not be used, without the error's `cuBLAS: ` prefix.
pub(super) fn reason(e: &rutile::Error) -> String {
    match e {
        rutile::Error::Device { message, .. } => message.clone(),
        e => e.to_string(),
    }
}

/// A device, and cuBLAS (or why it could not be loaded) where it is a CUDA GPU.
pub(super) type WithCublas = (Arc<dyn Device>, Option<rutile::Result<Cublas>>);

/// `dev`, and cuBLAS where it is a CUDA GPU: then both on a `CudaGpu` opened here (the same
/// GPU and context: cuBLAS needs the driver-level device, and runs on the stream whose
/// events time it); `None` for another backend.
pub(super) fn with_cublas(dev: &Arc<dyn Device>) -> rutile::Result<WithCublas> {
    Ok(match cuda_ordinal(dev.as_ref()) {
        Some(ordinal) => {
            let gpu = CudaGpu::open(ordinal)?;
            let cublas = Cublas::new(&gpu);
            (Arc::new(gpu), Some(cublas))
        }
        None => (dev.clone(), None),
    })
}

/// The ordinal of a CUDA device (`cuda:N`); `None` for another backend.
fn cuda_ordinal(dev: &dyn Device) -> Option<usize> {
    if dev.properties().backend != Backend::Cuda {
        return None;
    }
    dev.id().strip_prefix("cuda:")?.parse().ok()
}

/// Which units the compiled code multiplies on: Hopper's warpgroup MMA, the warp-level
/// `mma.sync`, Vulkan's cooperative matrices (the WGSL of such a kernel enables naga's
/// `wgpu_cooperative_matrix`), or none of them (FMA).
fn mma_kind(code: Option<&str>) -> &'static str {
    match code {
        Some(c) if c.contains("wgmma.mma_async") => "wgmma",
        Some(c) if c.contains("mma.sync") => "mma.sync",
        Some(c) if c.contains("wgpu_cooperative_matrix") => "coop",
        Some(_) => "FMA",
        None => "?",
    }
}

/// What the autotuner chose for one line at one problem, and what the compiled kernel uses.
struct Chosen {
    device: String,
    problem: String,
    line: &'static str,
    config: String,
    registers: Option<u32>,
    spill_bytes: Option<u32>,
    shared_bytes: u32,
    mma: &'static str,
}

/// The configuration `tuned` runs with, from its compiled kernel's metadata and code.
fn chosen(
    dev: &dyn Device,
    problem: String,
    line: &'static str,
    tuned: &rutile::autotune::Tuned,
    args: &[rutile::Arg<'_>],
) -> rutile::Result<Chosen> {
    let c = &tuned.choice.config;
    let block = |name| c.value(name).unwrap_or(0);
    let compiled = dev.compile_for(&tuned.kernel, &tuned.launch, args)?;
    Ok(Chosen {
        device: dev.id(),
        problem,
        line,
        // The schedule after the stages: `p` persistent, `ws` warp-specialized.
        config: format!(
            "{}x{}x{} w{} s{}{}{}",
            block("BLOCK_M"),
            block("BLOCK_N"),
            block("BLOCK_K"),
            c.num_warps,
            c.num_stages,
            if c.persistent { " p" } else { "" },
            if c.warp_specialize { " ws" } else { "" }
        ),
        registers: compiled.metadata.registers,
        spill_bytes: compiled.metadata.spill_bytes,
        shared_bytes: compiled.metadata.shared_bytes,
        mma: mma_kind(compiled.code.as_deref()),
    })
}

fn print_chosen(chosen: &[Chosen]) {
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    println!(
        "autotuned:\n{:>10}  {:>16}  {:>11}  {:>23}  {:>9}  {:>11}  {:>12}  mma",
        "device", "problem", "line", "configuration", "registers", "spill bytes", "shared bytes"
    );
    for c in chosen {
        println!(
            "{:>10}  {:>16}  {:>11}  {:>23}  {:>9}  {:>11}  {:>12}  {}",
            c.device,
            c.problem,
            c.line,
            c.config,
            opt(c.registers),
            opt(c.spill_bytes),
            c.shared_bytes,
            c.mma
        );
    }
}

/// The line kinds of the matmul tables, per device.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rutile,
    Leaky,
    Cublas,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Rutile => "rutile",
            Kind::Leaky => "+leaky_relu",
            Kind::Cublas => "cuBLAS",
        }
    }
    fn csv(self) -> &'static str {
        match self {
            Kind::Rutile => "matmul_fp16_rutile",
            Kind::Leaky => "matmul_fp16_leaky_relu_rutile",
            Kind::Cublas => "matmul_fp16_cublas",
        }
    }
}

/// The operands of one problem on one device: A, B, rutile's C and cuBLAS's C.
struct Operands {
    a: rutile::Buffer<f16>,
    b: rutile::Buffer<f16>,
    c: rutile::Buffer<f16>,
    c_cublas: rutile::Buffer<f16>,
}

/// Prints each rutile line of `report` (`lines`: each line's device row and kind) as a
/// percentage of cuBLAS on the same GPU, per x value (`x_label` names it).
fn print_percent_of_cublas(
    report: &Report,
    lines: &[(usize, Kind)],
    rows: &[MatmulDevice],
    x_label: &dyn Fn(f64) -> String,
) {
    let pairs: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, (_, kind))| *kind != Kind::Cublas)
        .filter_map(|(i, (row, _))| {
            let theirs = lines
                .iter()
                .position(|(r, kind)| *kind == Kind::Cublas && rows[*r].gpu == rows[*row].gpu)?;
            Some((i, theirs))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let labels: Vec<String> = report.x_values.iter().map(|&x| x_label(x)).collect();
    let x_width = labels
        .iter()
        .map(String::len)
        .chain([report.x_name.len()])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = pairs.iter().map(|&(i, _)| report.lines[i].name.len().max(8)).collect();
    println!("\nrutile as % of cuBLAS on the same GPU:");
    let mut header = format!("{:>x_width$}", report.x_name);
    for (&(i, _), width) in pairs.iter().zip(&widths) {
        let _ = write!(header, "  {:>width$}", report.lines[i].name);
    }
    println!("{header}");
    for (x, label) in labels.iter().enumerate() {
        let mut row = format!("{label:>x_width$}");
        for (&(ours, theirs), width) in pairs.iter().zip(&widths) {
            let cell = match (report.lines[ours].value(x), report.lines[theirs].value(x)) {
                (Some(o), Some(t)) => format!("{:.1}%", 100.0 * o / t),
                _ => "-".to_string(),
            };
            let _ = write!(row, "  {cell:>width$}");
        }
        println!("{row}");
    }
}

/// The tutorial's fp16 matmul (f32 accumulation, fp16 out), autotuned per size over the
/// tutorial's configurations as `tutorials::matmul` does, on every GPU, beside cuBLAS
/// (`cublasGemmEx`, fp16 in and out, f32 accumulation, its default algorithm) on each CUDA
/// device, in TFLOPS at M = N = K = 256..8192 (256 and 512 with `--quick`): one
/// `perf_report` with lines `rutile <device>`, `+leaky_relu <device>` (the fused
/// activation, where cuBLAS runs) and `cuBLAS <device>`, then each rutile line as a
/// percentage of cuBLAS on the same GPU, and the configuration the autotuner chose per size
/// and device with its registers, spills, shared memory and whether it multiplies with
/// `wgmma`, `mma.sync` or FMA. Then the skinny shapes 4096x16x4096 and 8192x8192x512 (M x N
/// x K; 256x16x256 and 512x512x64 with `--quick`) the same way, without the activation. On
/// a CUDA GPU both run on a `CudaGpu` opened for this section (the same GPU and context:
/// cuBLAS needs the driver-level device, and then runs on the stream whose events time it).
/// Before anything is timed, rutile's and cuBLAS's products are compared with each other
/// and with an f64 CPU reference (relative Frobenius error): at 512 (all rows), and at each
/// skinny shape (the reference on 16 rows).
/// `squares`: the M = N = K to time instead of the default ones, and no skinny shapes.
pub fn matmul(
    devices: &[Arc<dyn Device>],
    quick: bool,
    flush_mode: FlushMode,
    squares: Option<&[usize]>,
    csv: &mut String,
) -> rutile::Result<()> {
    let mut rows = Vec::new();
    for dev in devices {
        let (dev, cublas) = with_cublas(dev)?;
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
        "\n== matmul, fp16 inputs, f32 accumulation, fp16 output: TFLOPS; rutile's tutorial kernel autotuned, and \
         cuBLAS"
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
        if let Some(cublas) = d.cublas() {
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
    let tables = Tables {
        rows: &rows,
        reps: if quick { 3 } else { 20 },
        rng: RefCell::new(rng),
        host: PerX::new(),
        buffers: rows.iter().map(|_| PerX::new()).collect(),
        picked: RefCell::default(),
    };
    let sizes: Vec<f64> = if let Some(s) = squares {
        s.iter().map(|&n| n as f64).collect()
    } else if quick {
        vec![256.0, 512.0]
    } else {
        vec![256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0]
    };
    let cube: fn(f64) -> (usize, usize, usize) = |n| (n as usize, n as usize, n as usize);
    let mut bench = Benchmark::new("matmul", "M = N = K", sizes)
        .title("matmul fp16, M = N = K")
        .tflops(|n| 2.0 * n * n * n)
        .rounds(ROUNDS);
    let lines = tables.add_lines(&mut bench, &[Kind::Rutile, Kind::Leaky, Kind::Cublas], cube, |n| {
        format!("{n}x{n}x{n}")
    });
    let report = bench.run();
    println!();
    report.print();
    tables.finish(&report, &lines, &|n| format!("{n}"), csv, &|n| format!("{n}x{n}x{n}"));
    if squares.is_some() {
        return Ok(());
    }

    // The skinny shapes, M x N x K, checked first: every device's product against
    // cuBLAS's (the first CUDA device's), and on 16 rows against the f64 reference.
    const SHAPES: [(usize, usize, usize); 2] = [(4096, 16, 4096), (8192, 8192, 512)];
    const QUICK_SHAPES: [(usize, usize, usize); 2] = [(256, 16, 256), (512, 512, 64)];
    let shape: fn(f64) -> (usize, usize, usize) = if quick {
        |i| QUICK_SHAPES[i as usize]
    } else {
        |i| SHAPES[i as usize]
    };
    let problem: fn(f64) -> String = if quick {
        |i| {
            let (m, n, k) = QUICK_SHAPES[i as usize];
            format!("{m}x{n}x{k}")
        }
    } else {
        |i| {
            let (m, n, k) = SHAPES[i as usize];
            format!("{m}x{n}x{k}")
        }
    };
    let count = SHAPES.len();
    println!();
    for i in 0..count {
        let (x, (m, n, k)) = (i as f64, shape(i as f64));
        let (a, b) = {
            let mut rng = tables.rng.borrow_mut();
            (random(&mut rng, m * k), random(&mut rng, k * n))
        };
        let sample: Vec<usize> = (0..15).chain([m - 1]).collect();
        let mut want = Vec::with_capacity(sample.len() * n);
        for &r in &sample {
            want.extend(rutile_examples::check::matmul_reference(
                &a[r * k..(r + 1) * k],
                &b,
                1,
                n,
                k,
                false,
            ));
        }
        let sampled = |c: &[f64]| -> Vec<f64> { sample.iter().flat_map(|&r| c[r * n..(r + 1) * n].to_vec()).collect() };
        let mut cublas_product: Option<Vec<f64>> = None;
        for d in &rows {
            let Some(cublas) = d.cublas() else { continue };
            let dev = d.dev.as_ref();
            let (ab, bb, cc) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(m * n)?);
            cublas.matmul(&ab, &bb, &cc, (m, n, k))?;
            let theirs: Vec<f64> = dev.download(&cc)?.iter().map(|v| v.to_f64()).collect();
            let error = frobenius_error(&sampled(&theirs), &want);
            println!(
                "{}: check at {}: cuBLAS vs f64 (16 rows) {error:.1e}",
                dev.id(),
                problem(x)
            );
            if error.is_nan() || error > 1e-2 {
                eprintln!("{}: cuBLAS's matmul at {} is wrong: {error:.1e}", dev.id(), problem(x));
                std::process::exit(1);
            }
            cublas_product.get_or_insert(theirs);
        }
        for d in &rows {
            let dev = d.dev.as_ref();
            let (ab, bb, cb) = (dev.upload(&a)?, dev.upload(&b)?, dev.zeros::<f16>(m * n)?);
            let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
            args.extend(seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32));
            let tuned = tuned_matmul(dev, &d.tuner, (m, n, k), false, &args)?;
            dev.launch(&tuned.kernel, &tuned.launch, &args)?;
            let ours: Vec<f64> = dev.download(&cb)?.iter().map(|v| v.to_f64()).collect();
            let mut errors = vec![frobenius_error(&sampled(&ours), &want)];
            let mut report = format!("rutile vs f64 (16 rows) {:.1e}", errors[0]);
            if let Some(theirs) = &cublas_product {
                let vs = frobenius_error(&ours, theirs);
                let _ = write!(report, ", rutile vs cuBLAS {vs:.1e}");
                errors.push(vs);
            }
            println!(
                "{}: check at {}: relative Frobenius error {report}",
                dev.id(),
                problem(x)
            );
            if errors.iter().any(|e| e.is_nan() || *e > 1e-2) {
                eprintln!("{}: the matmul at {} is wrong: {report}", dev.id(), problem(x));
                std::process::exit(1);
            }
        }
    }
    tables.host.clear();
    for b in &tables.buffers {
        b.clear();
    }
    let legend: Vec<String> = (0..count).map(|i| format!("{i} = {}", problem(i as f64))).collect();
    let mut bench = Benchmark::new("matmul_skinny", "shape", (0..count).map(|i| i as f64))
        .title(format!("matmul fp16, skinny shapes M x N x K ({})", legend.join(", ")))
        .tflops(|i| {
            let (m, n, k) = shape(i);
            2.0 * (m * n * k) as f64
        })
        .rounds(ROUNDS);
    let lines = tables.add_lines(&mut bench, &[Kind::Rutile, Kind::Cublas], shape, problem);
    let report = bench.run();
    println!();
    report.print();
    tables.finish(&report, &lines, &problem, csv, &problem);
    Ok(())
}

/// What the tables of the matmul section share: the devices, the operands of the problem
/// being timed, and the configurations the autotuner chose for it.
struct Tables<'r> {
    rows: &'r [MatmulDevice],
    reps: usize,
    rng: RefCell<Rng>,
    /// The inputs of one problem, the same on every device.
    host: PerX<(Vec<f16>, Vec<f16>)>,
    /// Each device's buffers of them.
    buffers: Vec<PerX<Operands>>,
    picked: RefCell<Vec<Chosen>>,
}

impl Tables<'_> {
    /// The operands of problem `x` (`m x k` by `k x n`) on the device of row `row`.
    fn operands(&self, row: usize, x: f64, (m, n, k): (usize, usize, usize)) -> rutile::Result<Rc<Operands>> {
        let dev = self.rows[row].dev.as_ref();
        self.buffers[row].get(x, || {
            let ab = self.host.get(x, || {
                let mut rng = self.rng.borrow_mut();
                Ok((random(&mut rng, m * k), random(&mut rng, k * n)))
            })?;
            Ok(Operands {
                a: dev.upload(&ab.0)?,
                b: dev.upload(&ab.1)?,
                c: dev.zeros::<f16>(m * n)?,
                c_cublas: dev.zeros::<f16>(m * n)?,
            })
        })
    }

    /// Adds the lines of `kinds` (each kind on every device that has it) to `bench`, whose
    /// x values are problems `shape(x)` named `problem(x)`; returns each line's device row
    /// and kind.
    fn add_lines<'a>(
        &'a self,
        bench: &mut Benchmark<'a>,
        kinds: &[Kind],
        shape: fn(f64) -> (usize, usize, usize),
        problem: fn(f64) -> String,
    ) -> Vec<(usize, Kind)> {
        let mut lines = Vec::new();
        for &kind in kinds {
            for (r, d) in self.rows.iter().enumerate() {
                let (dev, flush, reps) = (d.dev.as_ref(), d.flush.as_ref(), self.reps);
                let name = format!("{} {}", kind.label(), dev.id());
                match kind {
                    Kind::Rutile | Kind::Leaky => {
                        let tuner = match (kind, &d.leaky) {
                            (Kind::Rutile, _) => &d.tuner,
                            (_, Some(t)) => t,
                            (_, None) => continue,
                        };
                        bench.add_line(name, move |x| {
                            let (m, n, k) = shape(x);
                            let ops = self.operands(r, x, (m, n, k))?;
                            let mut args = vec![(&ops.a).into(), (&ops.b).into(), (&ops.c).into()];
                            args.extend(seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32));
                            let tuned = tuned_matmul(dev, tuner, (m, n, k), kind == Kind::Leaky, &args)?;
                            // Once a point: the sweep runs each line in several rounds.
                            let seen = self.picked.borrow().iter().any(|c| {
                                (c.device.as_str(), c.problem.as_str(), c.line)
                                    == (&dev.id(), &problem(x), kind.label())
                            });
                            if !seen {
                                let chosen = chosen(dev, problem(x), kind.label(), &tuned, &args)?;
                                self.picked.borrow_mut().push(chosen);
                            }
                            Ok(do_bench(dev, flush, 3, reps, &mut || {
                                dev.launch(&tuned.kernel, &tuned.launch, &args)
                            })?)
                        });
                    }
                    Kind::Cublas => {
                        let Some(cublas) = d.cublas() else { continue };
                        bench.add_line(name, move |x| {
                            let (m, n, k) = shape(x);
                            let ops = self.operands(r, x, (m, n, k))?;
                            Ok(do_bench(dev, flush, 3, reps, &mut || {
                                cublas.matmul(&ops.a, &ops.b, &ops.c_cublas, (m, n, k))
                            })?)
                        });
                    }
                }
                lines.push((r, kind));
            }
        }
        lines
    }

    /// After a table: rutile as a percentage of cuBLAS, the configurations chosen (then
    /// forgotten, for the next table), and the CSV rows (`size(x)` their size column).
    fn finish(
        &self,
        report: &Report,
        lines: &[(usize, Kind)],
        x_label: &dyn Fn(f64) -> String,
        csv: &mut String,
        size: &dyn Fn(f64) -> String,
    ) {
        print_percent_of_cublas(report, lines, self.rows, x_label);
        println!();
        print_chosen(&self.picked.take());
        for (r, d) in self.rows.iter().enumerate() {
            append_csv_as(csv, &d.dev.id(), report, None, |line, x| {
                let i = report.lines.iter().position(|l| l.name == line)?;
                let (row, kind) = lines[i];
                (row == r).then(|| (kind.csv().to_string(), size(x)))
            });
        }
    }
}
