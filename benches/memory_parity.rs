//! Memory-bound kernels beyond the seeds, on every GPU backend, against the copy ceiling
//! measured in the same run: where does Vulkan lose to CUDA, and why?
//!
//!     cargo bench -p rutile-benches --bench memory_parity [-- --quick]
//!
//! - `row loop`: one program per row of a 4096 x 16384 f32 matrix walks the row in
//!   chunks of 4096 columns in a `for` loop (`y = 2x`), at 8 warps.
//! - `row sum`: the same walk summing into a carried block (reads only).
//! - `softmax, stride`: the fused softmax seed at 1000, 4000 and 16000 columns whose rows
//!   lie that many (not a multiple of 16: no 16-byte accesses) or the next power of two
//!   elements apart, at its tutorial warps.
//!
//! Bytes are those read plus written. With `RUTILE_DUMP=DIR` each kernel's per-thread IR,
//! PTX and WGSL land in `DIR`, to compare what each backend was given.

use rutile::{seeds, DeviceExt, Kernel, LaunchConfig, ScalarType::F32};
use rutile_examples::bench::{do_bench, gbps, CacheFlush, CopyTimes, FlushMode};
use rutile_examples::rng::Rng;

const ROWS: usize = 4096;

/// `out[row] = sum(x[row, :])`, the row walked `chunk` columns at a time into a carried
/// block of partial sums (the shape of a layer norm's or an online softmax's first pass).
fn row_sum(chunk: u32) -> rutile::Result<Kernel> {
    Ok(Kernel::build("row_sum", |k| {
        let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
        let (n_cols, stride) = (k.arg_i32("n_cols"), k.arg_i32("stride"));
        let row = k.program_id(0);
        let acc = k.zeros(&[chunk], F32);
        let r = k.for_range(0, n_cols, chunk as i32, &[acc], |c, carried| {
            let offs = c + k.arange(0, chunk as i32);
            let v = k.load_masked(x + row * stride + offs, offs.lt(n_cols), 0.0);
            vec![carried[0] + v]
        });
        k.store(out + row, r[0].sum(0));
    })?)
}

/// `y[row, :] = 2 * x[row, :]`, the row walked `chunk` columns at a time.
fn row_loop(chunk: u32) -> rutile::Result<Kernel> {
    Ok(Kernel::build("row_loop", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let (n_cols, stride) = (k.arg_i32("n_cols"), k.arg_i32("stride"));
        let row = k.program_id(0) * stride;
        k.for_range(0, n_cols, chunk as i32, &[], |c, _| {
            let offs = c + k.arange(0, chunk as i32);
            let mask = offs.lt(n_cols);
            let v = k.load_masked(x + row + offs, mask, 0.0);
            k.store_masked(y + row + offs, v * 2.0, mask);
            vec![]
        });
    })?)
}

fn main() -> rutile::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 5 } else { 50 };
    let devices = rutile_examples::gpus::hardware_gpus();
    if devices.is_empty() {
        println!("no GPU present: nothing to measure");
        return Ok(());
    }
    let mut rng = Rng::new(11);
    for dev in &devices {
        let dev = dev.as_ref();
        let ceiling = CopyTimes::measure(dev, 1 << 28, if quick { 3 } else { 10 })?.gbps();
        let ceiling = ceiling.0.max(ceiling.1);
        let flush = CacheFlush::new(dev, FlushMode::Copy)?;
        println!(
            "\n== {} ({}): ceiling {ceiling:.0} GB/s",
            dev.id(),
            dev.properties().name
        );
        let show = |name: &str, bytes: f64, ms: f64| {
            let g = gbps(bytes, ms);
            println!("{name:<40} {g:>6.0} GB/s ({:.1}%)", 100.0 * g / ceiling);
        };

        // The row loop.
        let cols = if quick { 4096 } else { 16384 };
        let host = rng.f32s(ROWS * cols, 0.5, 1.5);
        let (x, y) = (dev.upload(&host)?, dev.zeros::<f32>(ROWS * cols)?);
        for chunk in [1024u32, 4096] {
            for warps in [4u32, 8] {
                let kernel = row_loop(chunk)?;
                let config = LaunchConfig::grid1(ROWS as u32).num_warps(warps);
                let args = [(&x).into(), (&y).into(), (cols as i32).into(), (cols as i32).into()];
                dev.launch(&kernel, &config, &args)?;
                let got = dev.download(&y)?;
                if let Some(i) = (0..host.len()).find(|&i| got[i] != 2.0 * host[i]) {
                    eprintln!("{}: row loop wrong at {i}: {} for {}", dev.id(), got[i], 2.0 * host[i]);
                    std::process::exit(1);
                }
                let s = do_bench(dev, Some(&flush), 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
                show(
                    &format!("row loop, chunks of {chunk}, {warps} warps"),
                    8.0 * (ROWS * cols) as f64,
                    s.median_ms,
                );
            }
        }

        // The row sum (reads only).
        let sums = dev.zeros::<f32>(ROWS)?;
        for chunk in [1024u32, 4096] {
            for warps in [4u32, 8] {
                let kernel = row_sum(chunk)?;
                let config = LaunchConfig::grid1(ROWS as u32).num_warps(warps);
                let args = [(&x).into(), (&sums).into(), (cols as i32).into(), (cols as i32).into()];
                dev.launch(&kernel, &config, &args)?;
                let got = dev.download(&sums)?;
                let want: f32 = host[..cols].iter().sum();
                if (got[0] - want).abs() > 1e-3 * want {
                    eprintln!("{}: row sum wrong: {} for {want}", dev.id(), got[0]);
                    std::process::exit(1);
                }
                let s = do_bench(dev, Some(&flush), 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
                show(
                    &format!("row sum, chunks of {chunk}, {warps} warps"),
                    4.0 * (ROWS * cols) as f64,
                    s.median_ms,
                );
            }
        }

        // The softmax with rows a multiple of 16 elements apart or not.
        for (n_cols, stride) in [
            (1000usize, 1000usize),
            (1000, 1024),
            (4000, 4000),
            (4000, 4096),
            (16000, 16000),
            (16000, 16384),
        ] {
            let block = (n_cols as u32).next_power_of_two();
            let kernel = seeds::softmax(block)?;
            let host = rng.f32s(ROWS * stride, -2.0, 2.0);
            let (inp, out) = (dev.upload(&host)?, dev.zeros::<f32>(ROWS * stride)?);
            let config = LaunchConfig::grid1(ROWS as u32).num_warps(seeds::softmax_num_warps(block));
            let s = stride as i32;
            let args = [
                (&out).into(),
                (&inp).into(),
                s.into(),
                s.into(),
                (ROWS as i32).into(),
                (n_cols as i32).into(),
            ];
            dev.launch(&kernel, &config, &args)?;
            let got = dev.download(&out)?;
            let row_sum: f32 = got[..n_cols].iter().sum();
            if (row_sum - 1.0).abs() > 1e-3 {
                eprintln!("{}: softmax row 0 sums to {row_sum}", dev.id());
                std::process::exit(1);
            }
            let st = do_bench(dev, Some(&flush), 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
            show(
                &format!("softmax {n_cols} columns, stride {stride}"),
                8.0 * (ROWS * n_cols) as f64,
                st.median_ms,
            );
        }
    }
    Ok(())
}
