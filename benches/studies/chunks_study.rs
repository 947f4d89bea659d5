//! How many pieces should the chunked softmax split a row into? Times the softmax of
//! 4096 rows at widths just past a power of two, with the row as one block of the next
//! power of two (1 piece) or as at most 2, 3 or 4 power-of-two pieces
//! (`seeds::softmax_chunks_at_most`), at 4, 8 and 16 warps, against the device-to-device
//! copy ceiling measured in the same run, on each GPU present. Every result is checked
//! against a CPU softmax.
//!
//!     cargo run --release -p rutile-benches --example chunks_study -- [N...]
//!
//! Medians of 50 device-timed launches, the L2 emptied by a 256 MiB copy before each.

use rutile::bench::{do_bench, gbps, CacheFlush, FlushMode};
use rutile::{seeds, CacheModifier, Device, DeviceExt, DeviceType, LaunchConfig};
use rutile_examples::bench::CopyTimes;
use rutile_examples::check::{max_relative_error, softmax_reference};
use rutile_examples::rng::{normal_f32s, Rng};
use rutile_examples::tutorials::softmax_args;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut widths: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    if widths.is_empty() {
        widths = vec![1152, 4224, 8320, 10368, 10880, 12416, 12672];
    }
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter_map(|l| l.device.ok())
        .filter(|d| d.properties().device_type != DeviceType::Cpu)
        .collect();
    if devices.is_empty() {
        return Err("no GPU found".into());
    }
    for dev in &devices {
        study(dev.as_ref(), &widths)?;
    }
    Ok(())
}

fn study(dev: &dyn Device, widths: &[usize]) -> rutile::Result<()> {
    // The ceiling: a 1 GiB copy, as the benchmark measures it.
    let ceiling = CopyTimes::measure(dev, 1 << 28, 20)?.ceiling_gbps();
    println!("\n{} ({}): ceiling {ceiling:.0} GB/s", dev.id(), dev.properties().name);
    println!("{:>7} {:<28} {:>15} {:>15} {:>15}", "N", "pieces", "w4", "w8", "w16");
    let flush = CacheFlush::new(dev, FlushMode::Copy)?;
    let m = 4096usize;
    for &n in widths {
        let x = normal_f32s(&mut Rng::new(n as u64), m * n);
        let want = softmax_reference(&x, m, n);
        let (xb, yb) = (dev.upload(&x)?, dev.zeros::<f32>(m * n)?);
        let args = softmax_args(&yb, &xb, m, n);
        let mut seen = Vec::new();
        for pieces in 1..=4 {
            let chunks = seeds::softmax_chunks_at_most(n as u32, pieces);
            if seen.contains(&chunks) {
                continue;
            }
            seen.push(chunks.clone());
            let kernel = seeds::softmax_chunked(&chunks, CacheModifier::Default)?;
            let mut row = format!("{n:>7} {:<28}", format!("{chunks:?}"));
            for warps in [4, 8, 16] {
                let config = LaunchConfig::grid1(m as u32).num_warps(warps);
                dev.upload_into(&yb, &vec![f32::NAN; m * n])?;
                let s = do_bench(dev, Some(&flush), 3, 50, &mut || dev.launch(&kernel, &config, &args))?;
                let y = dev.download(&yb)?;
                let (error, _) = max_relative_error(y.iter().map(|&v| v as f64), &want, 1e-30);
                let g = gbps(8.0 * (m * n) as f64, s.median_ms);
                let mark = if error < 2e-5 { "" } else { " WRONG" };
                row += &format!(" {:>15}", format!("{g:.0} ({:.1}%){mark}", 100.0 * g / ceiling));
            }
            println!("{row}");
        }
    }
    Ok(())
}
