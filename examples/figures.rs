//! The seed tutorials' performance figures, measured with rutile on every GPU present, one
//! line per device and backend: vector add (GB/s over 2^12..2^27 elements), fused softmax
//! (GB/s over N = 256..12672 columns of 4096 rows, the tutorial's kernel at its `num_warps`
//! heuristic, and autotuned: `num_warps`, load hint and split of the row, dividing as
//! Triton's `/` does for f32) and matmul (fp16
//! TFLOPS over M = N = K = 128..4096, autotuned over the tutorial's configurations, with
//! cuBLAS's `cublasGemmEx` on each CUDA GPU beside it as the tutorial's figure has it, when
//! cuBLAS is found: see `rutile::cublas`, and `RUTILE_CUBLAS` to point at it). Each
//! figure is printed as a table and written to `DIR/<figure>.csv` and `DIR/<figure>.svg`.
//!
//!     cargo run --release --example figures -- [DIR] [--quick | --replot] [--only vector-add,softmax,matmul]
//!
//! `--only` measures and writes the figures named (the others' files stay as they are).
//! `--replot` draws the SVG files again from the CSV files already in `DIR`, measuring
//! nothing.
//! `DIR` defaults to `figures`. Times are medians of 30 device-timed launches (20 for the
//! matmul) with the L2 emptied before each (`rutile::bench::do_bench`). `--quick` measures
//! a few small sizes three times each without emptying the cache, and also on software
//! devices (lavapipe): to try the program without a GPU, not to measure.

use half::f16;
use plotters::prelude::*;
use rutile::autotune::Autotuner;
use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode};
use rutile::cublas::Cublas;
use rutile::{seeds, Backend, CudaGpu, Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use rutile_examples::rng::{normal_f32s, Rng};
use rutile_examples::tutorials::{matmul_configs_for, softmax_args, softmax_configs, tuned_matmul, tuned_softmax};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How each point is timed.
struct Timing {
    flush: Option<CacheFlush>,
    warmup: usize,
    reps: usize,
}

impl Timing {
    /// Timing on `dev`: `reps` timed runs after 3 untimed, each after a 256 MiB copy empties
    /// the L2; with `quick`, 3 after 1, with no flush.
    fn new(dev: &dyn Device, quick: bool, reps: usize) -> rutile::Result<Timing> {
        Ok(if quick {
            Timing {
                flush: None,
                warmup: 1,
                reps: 3,
            }
        } else {
            Timing {
                flush: Some(CacheFlush::new(dev, FlushMode::Copy)?),
                warmup: 3,
                reps,
            }
        })
    }

    fn median_ms(&self, dev: &dyn Device, f: &mut dyn FnMut() -> rutile::Result<()>) -> rutile::Result<f64> {
        Ok(do_bench(dev, self.flush.as_ref(), self.warmup, self.reps, f)?.median_ms)
    }
}

/// One figure: what it plots, and a line of points per device.
struct Figure {
    name: &'static str,
    title: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    log_x: bool,
    lines: Vec<(String, Vec<(f64, f64)>)>,
}

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only a,b`: the figures whose names start with one of these.
    let only: Option<Vec<String>> = args.iter().position(|a| a == "--only").map(|i| {
        args.get(i + 1)
            .map_or(Vec::new(), |v| v.split(',').map(str::to_string).collect())
    });
    let wanted = |name: &str| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|w| name.starts_with(w.as_str())))
    };
    let dir = PathBuf::from(
        args.iter()
            .enumerate()
            .find(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--only"))
            .map_or("figures", |(_, s)| s),
    );
    if args.iter().any(|a| a == "--replot") {
        return replot(&dir);
    }
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id != "cpu")
        .filter_map(|l| l.device.ok())
        .filter(|d| quick || d.properties().device_type != DeviceType::Cpu)
        .collect();
    if devices.is_empty() {
        return Err("no GPU found (`--quick` also runs on software devices)".into());
    }
    // The tutorials' sizes; with --quick every fourth, and only small ones.
    let (every, max_add, max_cols, max_dim) = if quick {
        (4, 1 << 20, 2048, 512)
    } else {
        (1, usize::MAX, usize::MAX, usize::MAX)
    };
    let mut figures = empty_figures();
    for dev in &devices {
        let dev = dev.as_ref();
        let line = format!("rutile, {} ({})", dev.properties().name, dev.properties().backend);
        eprintln!("measuring on {line}");
        let timing = |reps| Timing::new(dev, quick, reps);
        let sizes: Vec<usize> = (12..28)
            .step_by(every)
            .map(|p| 1usize << p)
            .filter(|&n| n <= max_add)
            .collect();
        if wanted(figures[0].name) {
            figures[0]
                .lines
                .push((line.clone(), vector_add(dev, &timing(30)?, &sizes)?));
        }
        let cols: Vec<usize> = (2..100)
            .step_by(every)
            .map(|i| 128 * i)
            .filter(|&n| n <= max_cols)
            .collect();
        if wanted(figures[1].name) {
            let softmax_timing = timing(30)?;
            figures[1]
                .lines
                .push((line.clone(), softmax(dev, &softmax_timing, &cols, false)?));
            figures[1].lines.push((
                format!("{line}, autotuned"),
                softmax(dev, &softmax_timing, &cols, true)?,
            ));
        }
        if !wanted(figures[2].name) {
            continue;
        }
        let dims: Vec<usize> = (1..33)
            .step_by(every)
            .map(|i| 128 * i)
            .filter(|&n| n <= max_dim)
            .collect();
        figures[2].lines.push((line, matmul(dev, &timing(20)?, &dims)?));
        if let Some(ordinal) = cuda_ordinal(dev) {
            // cuBLAS runs on a driver-level device of the same GPU (and context), timed by
            // its events as rutile's launches are.
            let gpu = CudaGpu::open(ordinal)?;
            match Cublas::new(&gpu) {
                Ok(cublas) => {
                    eprintln!("measuring {} on {}", cublas.library(), gpu.id());
                    let points = cublas_matmul(&gpu, &cublas, &Timing::new(&gpu, quick, 20)?, &dims)?;
                    figures[2]
                        .lines
                        .push((format!("cuBLAS, {} (cuda)", gpu.properties().name), points));
                }
                Err(e) => {
                    let reason = match e {
                        rutile::Error::Device { message, .. } => message,
                        e => e.to_string(),
                    };
                    eprintln!(
                        "{}: cuBLAS: not available ({reason}); the matmul figure has no cuBLAS line",
                        dev.id()
                    )
                }
            }
        }
    }
    std::fs::create_dir_all(&dir)?;
    for figure in figures.iter().filter(|f| wanted(f.name)) {
        print_table(figure);
        write_csv(figure, &dir.join(format!("{}.csv", figure.name)))?;
        plot(figure, &dir.join(format!("{}.svg", figure.name)))?;
    }
    println!("wrote {}", dir.display());
    Ok(())
}

/// The three figures, with no lines yet.
fn empty_figures() -> [Figure; 3] {
    [
        Figure {
            name: "vector-add-performance",
            title: "vector add, f32",
            x_label: "elements",
            y_label: "GB/s",
            log_x: true,
            lines: Vec::new(),
        },
        Figure {
            name: "softmax-performance",
            title: "fused softmax, f32, M = 4096",
            x_label: "N",
            y_label: "GB/s",
            log_x: false,
            lines: Vec::new(),
        },
        Figure {
            name: "matmul-performance",
            title: "matmul, fp16 inputs, f32 accumulation, M = N = K",
            x_label: "M = N = K",
            y_label: "TFLOPS",
            log_x: false,
            lines: Vec::new(),
        },
    ]
}

/// Draws the figures again from the CSV files of an earlier run in `dir`.
fn replot(dir: &Path) -> Result<(), Error> {
    for mut figure in empty_figures() {
        let path = dir.join(format!("{}.csv", figure.name));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        let header = lines.next().ok_or_else(|| format!("{}: empty", path.display()))?;
        figure.lines = header
            .split(',')
            .skip(1)
            .map(|n| (n.replace(';', ","), Vec::new()))
            .collect();
        for (row, line) in lines.enumerate() {
            let values: Vec<f64> = line
                .split(',')
                .map(|v| v.parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{} line {}: {e}", path.display(), row + 2))?;
            if values.len() != figure.lines.len() + 1 {
                return Err(format!(
                    "{} line {}: expected {} values",
                    path.display(),
                    row + 2,
                    figure.lines.len() + 1
                )
                .into());
            }
            for (series, &y) in figure.lines.iter_mut().zip(&values[1..]) {
                series.1.push((values[0], y));
            }
        }
        plot(&figure, &dir.join(format!("{}.svg", figure.name)))?;
    }
    println!("replotted {}", dir.display());
    Ok(())
}

/// GB/s of `x + y` for each size (12 bytes per element), the tutorial's 1024-element blocks.
fn vector_add(dev: &dyn Device, timing: &Timing, sizes: &[usize]) -> rutile::Result<Vec<(f64, f64)>> {
    let block = 1024;
    let kernel = seeds::vector_add(ScalarType::F32, block)?;
    let mut rng = Rng::new(1);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let (x, y) = (
        dev.upload(&rng.f32s(largest, 0.0, 1.0))?,
        dev.upload(&rng.f32s(largest, 0.0, 1.0))?,
    );
    let z = dev.zeros::<f32>(largest)?;
    let mut points = Vec::new();
    for &n in sizes {
        let config = LaunchConfig::grid1((n as u32).div_ceil(block));
        let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
        let ms = timing.median_ms(dev, &mut || dev.launch(&kernel, &config, &args))?;
        points.push((n as f64, gbps(12.0 * n as f64, ms)));
    }
    Ok(points)
}

/// GB/s of the one-row-per-program softmax on 4096 rows of each width (8 bytes per
/// element): at the tutorial's `num_warps` heuristic, or autotuned per width over
/// `tutorials::softmax_configs` (on a GPU, timed 20 launches per configuration; not
/// remembered in a file).
fn softmax(dev: &dyn Device, timing: &Timing, cols: &[usize], autotuned: bool) -> rutile::Result<Vec<(f64, f64)>> {
    let m = 4096usize;
    let widest = cols.iter().copied().max().unwrap_or(0);
    let x = dev.upload(&normal_f32s(&mut Rng::new(2), m * widest))?;
    let y = dev.zeros::<f32>(m * widest)?;
    let mut points = Vec::new();
    for &n in cols {
        let args = softmax_args(&y, &x, m, n);
        let (kernel, config) = if autotuned {
            let mut tuner = Autotuner::new("softmax", softmax_configs(n))?.cache_file(None);
            if timing.flush.is_some() {
                tuner = tuner.repetitions(3, 20);
            }
            let tuned = tuned_softmax(dev, &tuner, m, n, &args)?;
            (tuned.kernel, tuned.launch)
        } else {
            let block = seeds::softmax_block(n as u32);
            let config = LaunchConfig::grid1(m as u32).num_warps(seeds::softmax_num_warps(block));
            (seeds::softmax(block)?, config)
        };
        let ms = timing.median_ms(dev, &mut || dev.launch(&kernel, &config, &args))?;
        points.push((n as f64, gbps(8.0 * (m * n) as f64, ms)));
    }
    Ok(points)
}

/// TFLOPS of the fp16 matmul at each size, autotuned per size as the tutorial does.
fn matmul(dev: &dyn Device, timing: &Timing, dims: &[usize]) -> rutile::Result<Vec<(f64, f64)>> {
    let largest = dims.iter().copied().max().unwrap_or(0);
    let mut rng = Rng::new(3);
    let mut half = |len| -> Vec<f16> { rng.f32s(len, -1.0, 1.0).into_iter().map(f16::from_f32).collect() };
    let (a, b) = (
        dev.upload(&half(largest * largest))?,
        dev.upload(&half(largest * largest))?,
    );
    let c = dev.zeros::<f16>(largest * largest)?;
    let tuner = Autotuner::new("matmul", matmul_configs_for(dev))?;
    let mut points = Vec::new();
    for &n in dims {
        let mut args = vec![(&a).into(), (&b).into(), (&c).into()];
        args.extend(seeds::matmul_row_major_args(n, n, n).map(rutile::Arg::I32));
        let tuned = tuned_matmul(dev, &tuner, (n, n, n), false, &args)?;
        let ms = timing.median_ms(dev, &mut || dev.launch(&tuned.kernel, &tuned.launch, &args))?;
        points.push((n as f64, 2.0 * (n * n * n) as f64 / (ms * 1e-3) / 1e12));
    }
    Ok(points)
}

/// The ordinal of a CUDA device (`cuda:N`); `None` for another backend.
fn cuda_ordinal(dev: &dyn Device) -> Option<usize> {
    if dev.properties().backend != Backend::Cuda {
        return None;
    }
    dev.id().strip_prefix("cuda:")?.parse().ok()
}

/// TFLOPS of cuBLAS's fp16 matmul (`cublasGemmEx`: fp16 in and out, f32 accumulation, its
/// default algorithm) on the same inputs as [`matmul`], timed the same way.
fn cublas_matmul(gpu: &CudaGpu, cublas: &Cublas, timing: &Timing, dims: &[usize]) -> rutile::Result<Vec<(f64, f64)>> {
    let largest = dims.iter().copied().max().unwrap_or(0);
    let mut rng = Rng::new(3);
    let mut half = |len| -> Vec<f16> { rng.f32s(len, -1.0, 1.0).into_iter().map(f16::from_f32).collect() };
    let (a, b) = (
        gpu.upload(&half(largest * largest))?,
        gpu.upload(&half(largest * largest))?,
    );
    let c = gpu.zeros::<f16>(largest * largest)?;
    let mut points = Vec::new();
    for &n in dims {
        let ms = timing.median_ms(gpu, &mut || cublas.matmul(&a, &b, &c, (n, n, n)))?;
        points.push((n as f64, 2.0 * (n * n * n) as f64 / (ms * 1e-3) / 1e12));
    }
    Ok(points)
}

fn print_table(figure: &Figure) {
    println!("\n{} ({})", figure.title, figure.y_label);
    let mut header = format!("{:>12}", figure.x_label);
    for (name, _) in &figure.lines {
        let _ = write!(header, "  {name:>40}");
    }
    println!("{header}");
    let Some((_, first)) = figure.lines.first() else { return };
    for (i, (x, _)) in first.iter().enumerate() {
        let mut row = format!("{x:>12}");
        for (_, points) in &figure.lines {
            let _ = write!(row, "  {:>40.1}", points[i].1);
        }
        println!("{row}");
    }
}

fn write_csv(figure: &Figure, path: &Path) -> std::io::Result<()> {
    let mut text = String::from(figure.x_label);
    for (name, _) in &figure.lines {
        let _ = write!(text, ",{}", name.replace(',', ";"));
    }
    text.push('\n');
    if let Some((_, first)) = figure.lines.first() {
        for (i, (x, _)) in first.iter().enumerate() {
            let _ = write!(text, "{x}");
            for (_, points) in &figure.lines {
                let _ = write!(text, ",{:.2}", points[i].1);
            }
            text.push('\n');
        }
    }
    std::fs::write(path, text)
}

/// A line chart of the figure, as the tutorials draw theirs.
fn plot(figure: &Figure, path: &Path) -> Result<(), Error> {
    let points = figure.lines.iter().flat_map(|(_, p)| p.iter());
    let (x_min, x_max) = points
        .clone()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &(x, _)| (lo.min(x), hi.max(x)));
    let y_max = points.fold(0.0f64, |m, &(_, y)| m.max(y)) * 1.1;
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(figure.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(figure.x_label)
                .y_desc(figure.y_label)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y}"))
                .label_style(("sans-serif", 13))
                .draw()?;
            for (i, (name, line)) in figure.lines.iter().enumerate() {
                let color = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()?;
        }};
    }
    if figure.log_x {
        draw!(builder.build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max)?);
    } else {
        draw!(builder.build_cartesian_2d(x_min..x_max, 0.0..y_max)?);
    }
    root.present()?;
    Ok(())
}
