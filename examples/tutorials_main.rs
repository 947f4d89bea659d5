//! The seed tutorials end to end — vector add, fused softmax (simple, persistent, and with
//! `num_warps` autotuned as the tutorial suggests) and matmul with grouped ordering — and
//! the next ones (layer norm, long rows, fused attention forward) on the best device
//! present, each checked against a CPU reference:
//!
//!     cargo run --release --example tutorials
//!
//! `RUTILE_DEVICE=cuda:0|vulkan:N|cpu` picks the device. A tutorial the device cannot run
//! yet runs in the interpreter instead, and says so.

use rutile::{CpuDevice, Device};
use rutile_examples::tutorials::{self, Outcome, SoftmaxForm};

/// One tutorial, run on a device.
type Tutorial = Box<dyn Fn(&dyn Device) -> rutile::Result<Outcome>>;

fn main() {
    let device = match rutile::default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("device: {}\n", device.properties());
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
    ];
    for (name, run) in runs {
        let outcome = match run(device.as_ref()) {
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
    if failed {
        std::process::exit(1);
    }
}
