//! What an atomic's `sem` costs: a histogram (every element an `atomic_add` into one of
//! 1024 bins, contended, or of 2^20, nearly not), alone and after a copy of its input (a store pending at each atomic, which a
//! releasing atomic waits for at a barrier), with Triton's default ordering (acquire-release
//! at device scope) and relaxed, on every GPU present. Each run's bins are checked against
//! a CPU count first.
//!
//!     cargo run --release -p rutile-benches --example atomic_order_study
//!
//! `STUDY_REPS=N` sets the timed runs per kernel (30 by default); `STUDY_LOG2=L` times
//! 2^L elements (26 by default).

use rutile::bench::{do_bench, CacheFlush, FlushMode};
use rutile::{AtomicOp, AtomicOrder, DeviceExt, Kernel, LaunchConfig, ScalarType};
use rutile_examples::rng::Rng;

/// Elements per program.
const BLOCK: i32 = 1024;

/// `counts[x % bins] += 1` for each element of `x` (`bins` a power of two), with `order`;
/// with `copy`, `out = x` first.
fn histogram(order: AtomicOrder, copy: bool, bins: i32) -> rutile::Result<Kernel> {
    Ok(Kernel::build("histogram", |k| {
        let (x, out, counts) = (
            k.arg_ptr("x", ScalarType::I32),
            k.arg_ptr("out", ScalarType::I32),
            k.arg_ptr("counts", ScalarType::I32),
        );
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, 0);
        if copy {
            k.store_masked(out + offs, v, mask);
        }
        k.atomic_rmw_ordered(AtomicOp::Add, counts + (v & (bins - 1)), 1, Some(mask), order);
    })?)
}

fn main() -> rutile::Result<()> {
    let reps: usize = rutile_examples::bench::study_setting("STUDY_REPS").unwrap_or(30);
    let log2: u32 = rutile_examples::bench::study_setting("STUDY_LOG2").unwrap_or(26);
    let n = 1usize << log2;
    let mut rng = Rng::new(11);
    let x = rng.i32s(n, 0, 1 << 20);
    let count = |bins: i32| {
        let mut want = vec![0i32; bins as usize];
        for &v in &x {
            want[(v & (bins - 1)) as usize] += 1;
        }
        want
    };
    let orders = [
        ("acq_rel (default)", AtomicOrder::default()),
        ("relaxed", AtomicOrder::relaxed()),
    ];
    for dev in rutile_examples::gpus::open_gpus() {
        let dev = dev.as_ref();
        if dev.properties().device_type == rutile::DeviceType::Cpu {
            continue;
        }
        println!("\n{} ({}), 2^{log2} elements", dev.id(), dev.properties().name);
        let flush = CacheFlush::new(dev, FlushMode::Copy).ok();
        if flush.is_none() {
            println!("(no L2 flush: the device cannot hold its buffers)");
        }
        let xb = dev.upload(&x)?;
        let out = dev.zeros::<i32>(n)?;
        println!("kernel | bins | sem | ms (median) | G elements/s");
        for bins in [1024, 1 << 20] {
            let want = count(bins);
            let counts = dev.zeros::<i32>(bins as usize)?;
            let args = [
                (&xb).into(),
                (&out).into(),
                (&counts).into(),
                rutile::Arg::I32(n as i32),
            ];
            let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK as u32)).num_warps(4);
            for copy in [false, true] {
                for (name, order) in orders {
                    let kernel = histogram(order, copy, bins)?;
                    let what = if copy { "copy, then histogram" } else { "histogram" };
                    let label = format!("{what} | {bins} | {name}");
                    dev.upload_into(&counts, &vec![0i32; bins as usize])?;
                    dev.launch(&kernel, &config, &args)?;
                    if dev.download(&counts)? != want {
                        println!("{label} | WRONG: the bins differ from the CPU's count");
                        continue;
                    }
                    let t = do_bench(dev, flush.as_ref(), 3, reps, &mut || {
                        dev.launch(&kernel, &config, &args)
                    })?;
                    println!("{label} | {:.4} | {:.1}", t.median_ms, n as f64 / t.median_ms / 1e6);
                }
            }
        }
    }
    Ok(())
}
