//! The seed tutorials end to end — vector add, fused softmax (simple, persistent, and with
//! `num_warps` autotuned as the tutorial suggests), matmul with grouped ordering (and
//! written with block pointers, as Triton's block-pointer tutorial, on a ragged shape) and
//! the tutorials after them (the seeded dropout, layer norm, fused attention, long rows,
//! `asin` as the libdevice tutorial calls it) — on the best device present, each checked
//! against a CPU reference; then, as each seed ends,
//! its performance table: a few sizes of rutile's kernel on that device against the
//! tutorial's alternative (the copy ceiling, the unfused `naive_softmax`, cuBLAS):
//!
//!     cargo run --release --example tutorials [-- --full [DIR]]
//!
//! `--full` runs the seeds' whole sweeps instead and writes their figures (CSV and SVG)
//! under `DIR/<device>` (`DIR` defaults to `figures`). `RUTILE_DEVICE=cuda:0|vulkan:N|cpu`
//! picks the device. A tutorial the device cannot run yet runs in the interpreter instead,
//! and says so. Without a GPU (the interpreter or a software Vulkan driver) the tables
//! keep to small sizes.

use rutile::{CpuDevice, Device, DeviceType};
use rutile_examples::sweeps::{Scope, SweepDevice};
use rutile_examples::tutorials::{self, Outcome, SoftmaxForm};
use std::path::PathBuf;

/// One tutorial, run on a device.
type Tutorial = Box<dyn Fn(&dyn Device) -> rutile::Result<Outcome>>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let full = args.iter().position(|a| a == "--full");
    let out_dir = PathBuf::from(
        full.and_then(|i| args.get(i + 1))
            .filter(|a| !a.starts_with("--"))
            .map_or("figures", String::as_str),
    );
    let device = match rutile::default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("device: {}", device.properties());
    if device.properties().device_type == DeviceType::Cpu {
        println!(
            "no GPU: running on {} ({}), the performance tables at small sizes",
            device.id(),
            device.properties().name
        );
    }
    println!();
    let mut failed = check_tutorials(device.as_ref());
    failed |= performance_tables(device.as_ref(), full.is_some(), &out_dir);
    if failed {
        std::process::exit(1);
    }
}

/// Runs every tutorial once and prints its correctness line; whether one failed.
fn check_tutorials(device: &dyn Device) -> bool {
    let cpu = CpuDevice::new();
    let on_cpu = device.id() == "cpu";
    let rows = if on_cpu { 1823 } else { 4096 };
    let mut failed = false;
    let runs: Vec<(&str, Tutorial)> = vec![
        ("vector add", Box::new(|d| tutorials::vector_add(d, 98432, 1))),
        (
            "softmax",
            Box::new(move |d| tutorials::softmax(d, rows, 781, SoftmaxForm::Simple, 2)),
        ),
        (
            "persistent softmax",
            Box::new(move |d| tutorials::softmax(d, rows, 781, SoftmaxForm::Persistent, 3)),
        ),
        (
            "autotuned softmax",
            Box::new(move |d| tutorials::softmax(d, rows, 781, SoftmaxForm::Autotuned, 6)),
        ),
        ("matmul", Box::new(|d| tutorials::matmul(d, 512, 512, 512, false, 4))),
        (
            "matmul fp8 (e5m2)",
            Box::new(|d| {
                // A device without fp8 types (a Vulkan device with them switched off by
                // `RUTILE_VULKAN_TYPES_OFF`): the interpreter runs it.
                if d.properties().supported_types.contains(&rutile::ScalarType::F8E5M2) {
                    tutorials::fp8_matmul(d, (509, 381, 263), 15)
                } else {
                    tutorials::fp8_matmul(&CpuDevice::new(), (509, 381, 263), 15)
                }
            }),
        ),
        (
            "block-pointer matmul",
            Box::new(|d| tutorials::matmul_form(d, (509, 381, 263), false, tutorials::MatmulForm::BlockPointers, 12)),
        ),
        (
            "layer norm",
            Box::new(move |d| tutorials::layer_norm::layer_norm(d, rows, 1000, 7)),
        ),
        (
            "long-row softmax",
            Box::new(move |d| tutorials::long_rows::softmax(d, rows / 16, 100_000, 8)),
        ),
        (
            "long-row layer norm",
            Box::new(move |d| tutorials::long_rows::layer_norm(d, rows / 16, 100_000, 9)),
        ),
        (
            "attention forward",
            Box::new(|d| tutorials::attention::attention(d, tutorials::attention::tutorial_problem(d, 64, true), 10)),
        ),
        (
            "attention forward",
            Box::new(|d| tutorials::attention::attention(d, tutorials::attention::tutorial_problem(d, 128, false), 11)),
        ),
        (
            "matmul + leaky_relu",
            Box::new(|d| tutorials::matmul(d, 512, 512, 512, true, 5)),
        ),
        (
            "seeded dropout",
            Box::new(|d| tutorials::dropout::dropout(d, 98431, 0.5, 123, 7)),
        ),
        (
            "asin (libdevice)",
            Box::new(|d| tutorials::math_functions::asin(d, 98431, 13)),
        ),
        (
            "grouped matmul",
            Box::new(|d| {
                tutorials::grouped_matmul::grouped_matmul(d, tutorials::grouped_matmul::tutorial_problems(d), 14)
            }),
        ),
    ];
    for (name, run) in runs {
        let outcome = match run(device) {
            Ok(o) => Ok(o),
            Err(rutile::Error::Lower(e)) if !on_cpu => {
                println!(
                    "{name}: not supported on {} yet ({e}); running it in the interpreter",
                    device.id()
                );
                run(&cpu)
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(o) => {
                failed |= !o.passed();
                println!("{o}");
            }
            Err(e) => {
                failed = true;
                println!("{name}: error: {e}");
            }
        }
    }
    failed
}

/// Each tutorial's performance table on `device` (its whole sweep, written under
/// `out_dir`, with `full`); whether one could not run. A provider that fails at a size is
/// a gap in its table, not a failure.
fn performance_tables(device: &dyn Device, full: bool, out_dir: &std::path::Path) -> bool {
    let scope = Scope::on(device, if full { Scope::Full } else { Scope::Short });
    let mut sweep_device = match SweepDevice::new(device, scope, true) {
        Ok(d) => d,
        Err(e) => {
            println!("performance tables: error: {e}");
            return true;
        }
    };
    // The device is printed once, at the top: the lines are named by provider alone.
    sweep_device.label.clear();
    let dir = out_dir.join(device.id().replace(':', "-"));
    let mut failed = false;
    for sweep in tutorials::sweeps() {
        println!();
        match sweep.run(scope, std::slice::from_ref(&sweep_device)) {
            Ok(report) => {
                report.print();
                if full {
                    match report.save(&dir) {
                        Ok(paths) => paths.iter().for_each(|p| println!("wrote {}", p.display())),
                        Err(e) => {
                            failed = true;
                            println!("{}: writing the figure: {e}", sweep.name);
                        }
                    }
                }
            }
            Err(e) => {
                failed = true;
                println!("{}: error: {e}", sweep.name);
            }
        }
    }
    failed
}
