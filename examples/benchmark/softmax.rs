//! The benchmark's softmax section: the fused softmax's forms as a `perf_report` over the
//! row width, each at the tutorial's `num_warps` and at the best of 1..16, beside the
//! copies of the same bytes.

use super::{append_csv_as, subset, PerX, Run, SoftmaxSizes};
use rutile::bench::{Benchmark, Stats};
use rutile::{seeds, CacheModifier, Device, DeviceExt, Kernel, LaunchConfig};
use rutile_examples::bench::{copy_kernel, do_bench, gbps, CacheFlush, COPY_BLOCK};
use rutile_examples::rng::{normal_f32s, Rng};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The forms in the order of the table's columns.
const FORMS: [&str; 12] = [
    "simple",
    "persistent",
    "simple-cs",
    "persistent-cs",
    "simple-cs-fd",
    "persistent-cs-fd",
    "rows2",
    "rows4",
    "rows2-cs",
    "chunked",
    "chunked-cs",
    "chunked-cs-fd",
];

/// The `num_warps` each form is timed at, besides the tutorial's.
const WARPS: [u32; 5] = [1, 2, 4, 8, 16];

/// One form of the softmax at one width: its kernel and the rows each program takes (0:
/// persistent, as many programs as fit on the device at once).
struct Form {
    name: &'static str,
    kernel: Kernel,
    rows_per_program: u32,
}

/// The forms of the softmax that apply to rows of `n` elements.
fn forms(n: usize) -> rutile::Result<Vec<Form>> {
    let blk = seeds::softmax_block(n as u32);
    let full_division = seeds::SoftmaxOptions {
        cache: CacheModifier::Streaming,
        ieee_rounding: false,
    };
    let form = |name, kernel, rows_per_program| Form {
        name,
        kernel,
        rows_per_program,
    };
    // One row per program, persistent, and several rows per program (short rows only:
    // a program should not hold more than 8192 elements).
    let mut forms = vec![
        form("simple", seeds::softmax(blk)?, 1),
        form("persistent", seeds::softmax_persistent(blk)?, 0),
        // The simple form with its input loads marked read-once (Triton's
        // `cache_modifier=".cs"`).
        form("simple-cs", seeds::softmax_with(blk, CacheModifier::Streaming)?, 1),
        // The persistent form with read-once loads: with fewer rows in flight than the
        // simple form, evict-first lines can make room for each other in L2.
        form(
            "persistent-cs",
            seeds::softmax_persistent_with(blk, 2, CacheModifier::Streaming)?,
            0,
        ),
        // `simple-cs` dividing as Triton's `/` compiles for f32 (`div.full.f32`, within
        // 2 ulp) instead of correctly rounded: fewer registers, more programs resident.
        form("simple-cs-fd", seeds::softmax_with(blk, full_division)?, 1),
        // The persistent form with read-once loads and Triton's division.
        form(
            "persistent-cs-fd",
            seeds::softmax_persistent_with(blk, 2, full_division)?,
            0,
        ),
    ];
    for rows in [2u32, 4] {
        if rows * blk <= 8192 {
            let name = if rows == 2 { "rows2" } else { "rows4" };
            forms.push(form(name, seeds::softmax_rows(rows, blk)?, rows));
        }
    }
    if 2 * blk <= 8192 {
        forms.push(form(
            "rows2-cs",
            seeds::softmax_rows_with(2, blk, CacheModifier::Streaming)?,
            2,
        ));
    }
    // The row in power-of-two pieces, where it does not fill one block.
    let chunks = seeds::softmax_chunks(n as u32);
    if chunks.len() > 1 {
        forms.push(form(
            "chunked",
            seeds::softmax_chunked(&chunks, CacheModifier::Default)?,
            1,
        ));
        forms.push(form(
            "chunked-cs",
            seeds::softmax_chunked(&chunks, CacheModifier::Streaming)?,
            1,
        ));
        forms.push(form(
            "chunked-cs-fd",
            seeds::softmax_chunked(&chunks, full_division)?,
            1,
        ));
    }
    Ok(forms)
}

/// The times of each form at each width, per `num_warps`.
type Times = BTreeMap<(&'static str, usize), Vec<(u32, Stats)>>;

/// The input and output of one width.
struct Inputs {
    x: rutile::Buffer<f32>,
    y: rutile::Buffer<f32>,
}

/// The fused softmax on f32, M rows of N (`sizes`), in GB/s of 8 bytes per element: a
/// `perf_report` over N with the driver's copy of the same bytes (`copy`, measured with the
/// ceiling, the fastest of the devices of this GPU), one launch of the copy kernel moving
/// them through this backend, and two lines per form: at the tutorial's `num_warps`, and at
/// the best of 1..16 and it (the latter printed as a second table, with the `num_warps`
/// that won at each width after it). Every `num_warps` timed has its CSV row
/// (`softmax_<form>_w<warps>`); a `num_warps` the device cannot launch is skipped.
pub fn softmax(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    sizes: &SoftmaxSizes,
    same_bytes: &[Stats],
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, ceiling) = (dev.id(), run.ceiling);
    let reps = run.reps();
    let m = sizes.rows;
    let cols = &sizes.cols;
    let forms_at: Vec<Vec<Form>> = cols.iter().map(|&n| forms(n)).collect::<rutile::Result<_>>()?;
    let at = |n: f64| cols.iter().position(|&c| c as f64 == n).expect("a width of the sweep");
    let rng = RefCell::new(rng);
    let inputs = PerX::new();
    let inputs_at = |n: usize| {
        inputs.get(n as f64, || {
            Ok(Inputs {
                x: dev.upload(&normal_f32s(&mut rng.borrow_mut(), m * n))?,
                y: dev.zeros::<f32>(m * n)?,
            })
        })
    };
    // Every time measured, per (form, N) and num_warps; the rows of the CSV they make.
    let times: RefCell<Times> = RefCell::default();
    let csv = RefCell::new(csv);
    // Times `form` at `n` with `warps`, once: `None` where the device cannot launch it.
    let time = |form: &Form, n: usize, warps: u32| -> rutile::Result<Option<Stats>> {
        if let Some(&(_, s)) = times
            .borrow()
            .get(&(form.name, n))
            .and_then(|t| t.iter().find(|(w, _)| *w == warps))
        {
            return Ok(Some(s));
        }
        let t = inputs_at(n)?;
        let c = n as i32;
        let args = [
            (&t.y).into(),
            (&t.x).into(),
            c.into(),
            c.into(),
            (m as i32).into(),
            c.into(),
        ];
        let mut config = LaunchConfig::grid1((m as u32).div_ceil(form.rows_per_program.max(1))).num_warps(warps);
        if form.rows_per_program == 0 {
            config = dev.resident_grid(&form.kernel, config, &args, m as u32)?;
        }
        let s = match do_bench(dev, flush, 3, reps, &mut || dev.launch(&form.kernel, &config, &args)) {
            Ok(s) => s,
            // Configurations the device cannot run (too many threads) are skipped.
            Err(rutile::Error::Launch { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let g = gbps(8.0 * (m * n) as f64, s.median_ms);
        let _ = writeln!(
            csv.borrow_mut(),
            "{id},softmax_{}_w{warps},{m}x{n},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
            form.name,
            s.median_ms,
            s.p20_ms,
            s.p80_ms,
            g / ceiling
        );
        times.borrow_mut().entry((form.name, n)).or_default().push((warps, s));
        Ok(Some(s))
    };
    // The num_warps that won, per (form, N).
    let won: RefCell<BTreeMap<(&str, usize), u32>> = RefCell::default();
    let copy = copy_kernel(0)?;
    let mut bench = Benchmark::new("softmax", "N", cols.iter().map(|&n| n as f64))
        .title(format!("softmax f32, M={m}, on {id} (ceiling {ceiling:.0} GB/s)"))
        .gbps(|n| 8.0 * m as f64 * n)
        .line("copy", |n| Ok(same_bytes[at(n)]))
        .line("copy kernel", |n| {
            let n = n as usize;
            let t = inputs_at(n)?;
            let config = LaunchConfig::grid1(((m * n) as u32).div_ceil(COPY_BLOCK));
            let args = [(&t.x).into(), (&t.y).into(), ((m * n) as i32).into()];
            Ok(do_bench(dev, flush, 3, reps, &mut || {
                dev.launch(&copy, &config, &args)
            })?)
        });
    // Only the forms that apply to some width of this run.
    let present = FORMS
        .into_iter()
        .filter(|f| forms_at.iter().flatten().any(|form| form.name == *f));
    for name in present {
        let (forms_at, at, time, won) = (&forms_at, &at, &time, &won);
        let form_at = move |n: f64| -> Result<&Form, String> {
            forms_at[at(n)]
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| format!("no {name} form for rows of {n}"))
        };
        bench.add_line(name, move |n| {
            let form = form_at(n)?;
            let warps = seeds::softmax_num_warps(seeds::softmax_block(n as u32));
            time(form, n as usize, warps)?.ok_or_else(|| format!("num_warps {warps} does not launch here").into())
        });
        bench.add_line(format!("{name} (best)"), move |n| {
            let form = form_at(n)?;
            let heuristic = seeds::softmax_num_warps(seeds::softmax_block(n as u32));
            let mut best: Option<(u32, Stats)> = None;
            for warps in WARPS
                .into_iter()
                .chain((!WARPS.contains(&heuristic)).then_some(heuristic))
            {
                if let Some(s) = time(form, n as usize, warps)? {
                    if best.is_none_or(|(_, b)| s.median_ms < b.median_ms) {
                        best = Some((warps, s));
                    }
                }
            }
            let (warps, s) = best.ok_or("no num_warps of 1..16 launches")?;
            won.borrow_mut().insert((name, n as usize), warps);
            Ok(s)
        });
    }
    let report = bench.run();
    let tutorial = subset(
        &report,
        format!("softmax f32, M={m}, on {id}, at the tutorial's num_warps (ceiling {ceiling:.0} GB/s)"),
        |line| (!line.ends_with(" (best)")).then(|| line.to_string()),
    );
    let best = subset(
        &report,
        format!("softmax f32, M={m}, on {id}, at the best num_warps of 1..16 (ceiling {ceiling:.0} GB/s)"),
        |line| line.strip_suffix(" (best)").map(str::to_string),
    );
    println!();
    tutorial.print();
    println!();
    best.print();
    // The num_warps behind the second table.
    let won = won.into_inner();
    let names: Vec<&str> = best.lines.iter().map(|l| l.name.as_str()).collect();
    let widths: Vec<usize> = names.iter().map(|n| n.len().max(10)).collect();
    let mut header = format!("{:>8}  {:>9}", "N", "tutorial");
    for (name, width) in names.iter().zip(&widths) {
        let _ = write!(header, "  {name:>width$}");
    }
    println!();
    println!("the num_warps of each form's best (`tutorial`: the tutorial's num_warps at that width):");
    println!("{header}");
    for &n in cols {
        let heuristic = seeds::softmax_num_warps(seeds::softmax_block(n as u32));
        let mut row = format!("{n:>8}  {:>9}", format!("w{heuristic}"));
        for (name, width) in names.iter().zip(&widths) {
            let cell = won.get(&(*name, n)).map_or("-".to_string(), |w| format!("w{w}"));
            let _ = write!(row, "  {cell:>width$}");
        }
        println!("{row}");
    }
    append_csv_as(csv.into_inner(), &id, &report, Some(ceiling), |line, n| {
        (line == "copy kernel").then(|| ("copy_kernel".to_string(), format!("{m}x{n}")))
    });
    Ok(())
}
