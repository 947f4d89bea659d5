//! Times hand-edited WGSL versions of a kernel against each other on a Vulkan device: the
//! way to find out what the driver's compiler makes of a construct before changing
//! rutile's code generator. Dump a kernel's WGSL with `RUTILE_DUMP=DIR`, edit copies, and
//! time them here.
//!
//!     cargo run --release -p rutile-benches --example wgsl_variants -- DIR [ADAPTER]
//!
//! times every `DIR/*.wgsl` (entry point `softmax_kernel`, bindings as rutile emits them
//! for the softmax: output, input, launch uniform) on a 4096 x 1024 f32 softmax, after a
//! 256 MiB copy that empties the L2 (as the benchmark does), and checks each result:
//! against the input for files whose name holds `copy`, against a CPU softmax otherwise.
//! `benches/softmax-wgsl` holds the variants that docs/performance.md reports.

use rutile::vulkan::{BindingLayout, KernelSource, WgpuBuffer};
use rutile_examples::check::{max_abs_error, softmax_reference};
use rutile_examples::rng::{normal_f32s, Rng};

const ROWS: usize = 4096;
const COLS: usize = 1024;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: wgsl_variants DIR [ADAPTER]")?;
    let index = args.next().map(|s| s.parse()).transpose()?;
    let gpu = rutile::WgpuGpu::open(index)?;
    let device = gpu.wgpu();
    println!("{}", device.properties().name);
    let x = normal_f32s(&mut Rng::new(5), ROWS * COLS);
    let expected = softmax_reference(&x, ROWS, COLS);
    let input = WgpuBuffer::from_slice(device, &x)?;
    let output = WgpuBuffer::zeroed(device, ROWS * COLS * 4)?;
    let flush_bytes = (256usize << 20).min(device.properties().max_storage_buffer_binding_size as usize);
    let (flush_src, flush_dst) = (
        WgpuBuffer::zeroed(device, flush_bytes)?,
        WgpuBuffer::zeroed(device, flush_bytes)?,
    );
    let launch = launch_block();
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "wgsl"));
    files.sort();
    for path in &files {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path)?;
        // SAFETY: the variants index within the buffers (n_cols = 1024 = the block).
        let pipeline = unsafe {
            device.create_pipeline_trusted(
                KernelSource::Wgsl(text.into()),
                "softmax_kernel",
                BindingLayout::new(2, true),
            )
        };
        let pipeline = match pipeline {
            Ok(p) => p,
            Err(e) => {
                println!("{name}: {e}");
                continue;
            }
        };
        let mut times = Vec::new();
        for rep in 0..60 {
            flush_dst.copy_from(&flush_src)?;
            device.synchronize()?;
            let ms = device.dispatch_timed(&pipeline, &[&output, &input], Some(&launch), [ROWS as u32, 1, 1])?;
            if rep >= 10 {
                times.push(ms.unwrap_or(f64::NAN) * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        let got: Vec<f32> = output.read_as()?;
        let err = if name.contains("copy") {
            max_abs_error(got.iter().map(|&v| v as f64), x.iter().map(|&v| v as f64))
        } else {
            max_abs_error(got.iter().map(|&v| v as f64), expected.iter().copied())
        };
        let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
        println!(
            "{name:<18} median {:.2} us (p20 {:.2}, p80 {:.2})  {:.0} GB/s  max abs error {err:.1e}",
            q(0.5),
            q(0.2),
            q(0.8),
            (ROWS * COLS * 8) as f64 / (q(0.5) * 1e-6) / 1e9
        );
        output.write(&vec![0u8; ROWS * COLS * 4])?;
    }
    Ok(())
}

/// The softmax's launch block as rutile lays it out: grid, program offset, then the
/// row strides, rows and columns.
fn launch_block() -> Vec<u8> {
    let mut block = vec![0u8; 48];
    let words = [
        (0, ROWS),
        (4, 1),
        (8, 1),
        (28, COLS),
        (32, COLS),
        (36, ROWS),
        (40, COLS),
    ];
    for (at, v) in words {
        block[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
    }
    block
}
