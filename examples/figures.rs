//! The seed tutorials' performance figures, measured with rutile on every GPU present
//! (one line per device and backend) against the alternatives the seeds' figures show:
//! vector add (GB/s over 2^12..2^27 elements) and fused softmax (GB/s over N = 256..12672
//! columns of 4096 rows; the tutorial's kernel at its `num_warps` heuristic and autotuned:
//! `num_warps`, load hint and split of the row, dividing as Triton's `/` does for f32)
//! against the copy ceiling, and the softmax also against the tutorial's `naive_softmax`
//! (five unfused kernels); matmul (fp16 TFLOPS over M = N = K = 128..4096, autotuned over
//! the tutorial's configurations) against cuBLAS's `cublasGemmEx` on each CUDA GPU (see
//! `rutile::cublas`, and `RUTILE_CUBLAS` to point at it; a line of gaps where it is not
//! found). The sweeps are `rutile_examples::sweeps`, run with `rutile::bench::Benchmark`:
//! each figure is printed as a table and written to `DIR/<figure>.csv` and
//! `DIR/<figure>.svg`.
//!
//!     cargo run --release --example figures -- [DIR] [--quick | --replot] [--only vector-add,softmax,matmul]
//!
//! `--only` measures and writes the figures whose names start with those given (the others'
//! files stay as they are). `--replot` draws the SVG files again from the CSV files already
//! in `DIR`, measuring nothing. `DIR` defaults to `figures`. Times are medians of 30
//! device-timed runs with the L2 emptied before each (`rutile::bench::Timing::flushed`).
//! `--quick` measures a few small sizes three times each without emptying the cache, and
//! also on software devices (lavapipe): to try the program without a GPU, not to measure.

use rutile::DeviceType;
use rutile_examples::sweeps::{Scope, SweepDevice};
use rutile_examples::tutorials::sweeps;
use std::path::PathBuf;

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
    let sweeps: Vec<_> = sweeps().into_iter().filter(|s| wanted(s.name)).collect();
    if sweeps.is_empty() {
        let names: Vec<_> = rutile_examples::tutorials::sweeps().iter().map(|s| s.name).collect();
        return Err(format!("--only matches no figure (the figures: {})", names.join(", ")).into());
    }
    if args.iter().any(|a| a == "--replot") {
        for sweep in &sweeps {
            let path = dir.join(format!("{}.csv", sweep.name));
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let report = sweep
                .empty_report(Scope::Full)
                .read_csv(&text)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            report.write_svg(&dir.join(format!("{}.svg", sweep.name)))?;
        }
        println!("replotted {}", dir.display());
        return Ok(());
    }
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id != "cpu")
        .filter_map(|l| l.device.map_err(|e| eprintln!("{}: unavailable: {e}", l.id)).ok())
        .filter(|d| quick || d.properties().device_type != DeviceType::Cpu)
        .collect();
    if devices.is_empty() {
        return Err("no GPU found (`--quick` also runs on software devices)".into());
    }
    let scope = if quick { Scope::Small } else { Scope::Full };
    let alone = devices.len() == 1;
    let sweep_devices = devices
        .iter()
        .map(|d| SweepDevice::new(d.as_ref(), scope, alone))
        .collect::<rutile::Result<Vec<_>>>()?;
    for d in &sweep_devices {
        eprintln!("measuring on {}", d.label);
    }
    for sweep in &sweeps {
        let report = sweep.run(scope, &sweep_devices)?;
        println!();
        report.print();
        report.save(&dir)?;
    }
    println!("wrote {}", dir.display());
    Ok(())
}
