//! Soak and concurrency: several threads launch mixed kernels (vector add, the softmax in
//! three forms, the matmul on its CUDA-core and tensor-core paths) on one shared device
//! for a bounded time, at random sizes that include tiny and ragged ones; every result is
//! checked against a CPU reference (on outputs poisoned with NaN first), and the device's
//! memory must come back to where it was before the soak.
//!
//! Runs on the interpreter and on every GPU present (each CUDA GPU and wgpu adapter,
//! lavapipe included), one device after the other. Settings:
//!
//! - `RUTILE_SOAK_SECONDS` (default 3): how long each device is soaked; about 60 on a GPU
//!   machine.
//! - `RUTILE_SOAK_THREADS` (default 4): threads launching on the device at once.
//!
//! Memory is read with `Device::memory_in_use` after a warm-up (which compiles the
//! kernels) and after the soak, both after synchronizing. rutile's count of live buffer
//! bytes must return exactly; so must wgpu's allocator's live bytes. CUDA's
//! `cuMemGetInfo` (the whole GPU) must return to within [`CUDA_DRIVER_SLACK`]: kernels of a
//! specialization first met during the soak are loaded then, and the driver rounds to
//! pages. The interpreter counts nothing (host memory).
//!
//! As the other GPU tests, it fails instead of skipping a backend that `RUTILE_REQUIRE`
//! names, and without any GPU under `RUTILE_REQUIRE_TOOLS=1`.

use half::f16;
use rutile::device::MemoryInUse;
use rutile::ir::testing::Rng;
use rutile::seeds::{self, Activation, MatmulMeta};
use rutile::{Arg, Backend, CpuDevice, Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use rutile_examples::check::{max_relative_error, softmax_reference};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far CUDA's driver-reported use may end above its start (see the module's
/// documentation).
const CUDA_DRIVER_SLACK: u64 = 64 << 20;

/// A number from the environment, or `default`.
fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

#[derive(Clone, Copy, Debug)]
enum SoftmaxForm {
    Simple,
    Persistent,
    TwoRows,
}

/// The matmul configurations: f32 in 32x32x16 blocks with leaky ReLU (dot on the CUDA
/// cores everywhere), f16 in 64x64x32 and 32x64x16 blocks (tensor cores on CUDA from
/// sm_80; the CUDA cores elsewhere).
fn matmul_meta(variant: usize) -> MatmulMeta {
    match variant {
        0 => MatmulMeta {
            input: ScalarType::F32,
            output: ScalarType::F32,
            activation: Some(Activation::LeakyRelu),
            ..MatmulMeta::fp16(32, 32, 16)
        },
        1 => MatmulMeta::fp16(64, 64, 32),
        _ => MatmulMeta {
            activation: Some(Activation::LeakyRelu),
            ..MatmulMeta::fp16(32, 64, 16)
        },
    }
}

#[derive(Clone, Copy, Debug)]
enum Job {
    Add {
        n: usize,
        block: u32,
    },
    Softmax {
        rows: usize,
        cols: usize,
        form: SoftmaxForm,
    },
    Matmul {
        m: usize,
        n: usize,
        k: usize,
        variant: usize,
    },
}

/// A value from one of `ranges` (inclusive), the range picked first.
fn pick(rng: &mut Rng, ranges: &[(usize, usize)]) -> usize {
    let (lo, hi) = ranges[rng.below(ranges.len() as u64) as usize];
    lo + rng.below((hi - lo + 1) as u64) as usize
}

impl Job {
    /// A random job of kind `kind` (0: vector add, 1: softmax, 2: matmul; taken in turn,
    /// so that every kind runs however few jobs fit in the time): tiny, ragged and (on
    /// hardware, `large`) larger sizes.
    fn random(kind: usize, rng: &mut Rng, large: bool) -> Job {
        match kind % 3 {
            0 => {
                let mut sizes = vec![(1, 8), (100, 3000)];
                if large {
                    sizes.push((10_000, 1_000_000));
                }
                Job::Add {
                    n: pick(rng, &sizes),
                    block: [128, 1024][rng.below(2) as usize],
                }
            }
            1 => {
                let mut cols = vec![(1, 8), (60, 300), (1000, 1100)];
                let mut rows = vec![(1, 4), (5, 40)];
                if large {
                    cols.push((4000, 4200));
                    rows.push((100, 400));
                }
                let cols = pick(rng, &cols);
                let mut form =
                    [SoftmaxForm::Simple, SoftmaxForm::Persistent, SoftmaxForm::TwoRows][rng.below(3) as usize];
                if cols > 2048 {
                    // Two rows of 8192 are more than a program should hold (as in gpu_seeds).
                    form = SoftmaxForm::Simple;
                }
                Job::Softmax {
                    rows: pick(rng, &rows),
                    cols,
                    form,
                }
            }
            _ => {
                let mut sizes = vec![(1, 8), (17, 70)];
                if large {
                    sizes.push((100, 200));
                }
                Job::Matmul {
                    m: pick(rng, &sizes),
                    n: pick(rng, &sizes),
                    k: pick(rng, &sizes),
                    variant: rng.below(3) as usize,
                }
            }
        }
    }
}

/// What one job checked: output bytes compared, and the first disagreement if any.
struct Checked {
    bytes: u64,
    mismatch: Option<String>,
}

fn run(d: &dyn Device, job: Job, rng: &mut Rng) -> rutile::Result<Checked> {
    match job {
        Job::Add { n, block } => {
            let (x, y) = (rng.f32s(n, -2.0, 2.0), rng.f32s(n, -2.0, 2.0));
            let kernel = seeds::vector_add(ScalarType::F32, block)?;
            let (xb, yb, zb) = (d.upload(&x)?, d.upload(&y)?, d.upload(&vec![f32::NAN; n])?);
            let grid = LaunchConfig::grid1((n as u32).div_ceil(block));
            d.launch(
                &kernel,
                &grid,
                &[(&xb).into(), (&yb).into(), (&zb).into(), Arg::I32(n as i32)],
            )?;
            let z = d.download(&zb)?;
            let wrong = (0..n).find(|&i| z[i] != x[i] + y[i]);
            Ok(Checked {
                bytes: 4 * n as u64,
                mismatch: wrong.map(|i| format!("z[{i}] = {}, expected {}", z[i], x[i] + y[i])),
            })
        }
        Job::Softmax { rows, cols, form } => {
            let x = rng.f32s(rows * cols, -4.0, 4.0);
            let block = seeds::softmax_block(cols as u32);
            let (xb, yb) = (d.upload(&x)?, d.upload(&vec![f32::NAN; rows * cols])?);
            let c = cols as i32;
            let args = [
                (&yb).into(),
                (&xb).into(),
                c.into(),
                c.into(),
                (rows as i32).into(),
                c.into(),
            ];
            let warps = seeds::softmax_num_warps(block);
            let (kernel, config) = match form {
                SoftmaxForm::Simple => (
                    seeds::softmax(block)?,
                    LaunchConfig::grid1(rows as u32).num_warps(warps),
                ),
                SoftmaxForm::TwoRows => (
                    seeds::softmax_rows(2, block)?,
                    LaunchConfig::grid1((rows as u32).div_ceil(2)).num_warps(warps),
                ),
                SoftmaxForm::Persistent => {
                    let kernel = seeds::softmax_persistent(block)?;
                    let config = LaunchConfig::grid1(rows as u32).num_warps(warps);
                    let config = d.resident_grid(&kernel, config, &args, rows as u32)?;
                    (kernel, config)
                }
            };
            d.launch(&kernel, &config, &args)?;
            let y = d.download(&yb)?;
            let want = softmax_reference(&x, rows, cols);
            let (worst, at) = max_relative_error(y.iter().map(|&v| v as f64), &want, 1e-30);
            Ok(Checked {
                bytes: 4 * (rows * cols) as u64,
                mismatch: (worst > 2e-5).then(|| {
                    format!(
                        "y[{at}] = {}, expected {} (relative error {worst:.2e})",
                        y[at], want[at]
                    )
                }),
            })
        }
        Job::Matmul { m, n, k, variant } => {
            let meta = matmul_meta(variant);
            let kernel = seeds::matmul(&meta)?;
            let config = LaunchConfig::grid1(seeds::matmul_grid(&meta, m as u32, n as u32)).num_warps(4);
            let strides = seeds::matmul_row_major_args(m, n, k).map(Arg::I32);
            let (mut a, mut b) = (rng.f32s(m * k, -1.0, 1.0), rng.f32s(k * n, -1.0, 1.0));
            let (got, output_bytes) = if meta.input == ScalarType::F16 {
                let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<f16>>();
                let (ah, bh) = (h(&a), h(&b));
                // The reference multiplies the values the device gets.
                a = ah.iter().map(|v| v.to_f32()).collect();
                b = bh.iter().map(|v| v.to_f32()).collect();
                let (ab, bb, cb) = (d.upload(&ah)?, d.upload(&bh)?, d.upload(&vec![f16::NAN; m * n])?);
                let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
                args.extend(strides);
                d.launch(&kernel, &config, &args)?;
                (d.download(&cb)?.iter().map(|v| v.to_f64()).collect::<Vec<_>>(), 2)
            } else {
                let (ab, bb, cb) = (d.upload(&a)?, d.upload(&b)?, d.upload(&vec![f32::NAN; m * n])?);
                let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
                args.extend(strides);
                d.launch(&kernel, &config, &args)?;
                (d.download(&cb)?.iter().map(|&v| v as f64).collect(), 4)
            };
            let mut want = vec![0.0f64; m * n];
            for i in 0..m {
                for p in 0..k {
                    let av = a[i * k + p] as f64;
                    for j in 0..n {
                        want[i * n + j] += av * b[p * n + j] as f64;
                    }
                }
            }
            if meta.activation.is_some() {
                want.iter_mut().filter(|v| **v < 0.0).for_each(|v| *v *= 0.01);
            }
            // Relative to the size of a dot product of k terms in [-1, 1]: f32 sums in
            // another order, and for f16 the output's rounding (2^-11).
            let scale = (k as f64).sqrt() / 3.0;
            let bound = if output_bytes == 2 { 2e-3 } else { 1e-4 };
            let (worst, at) = max_relative_error(got.iter().copied(), &want, scale);
            Ok(Checked {
                bytes: output_bytes * (m * n) as u64,
                mismatch: (worst > bound).then(|| {
                    format!(
                        "c[{at}] = {}, expected {} (error {worst:.2e} of the scale, bound {bound:.0e})",
                        got[at], want[at]
                    )
                }),
            })
        }
    }
}

/// What the threads of one device did.
#[derive(Default)]
struct Tally {
    /// Jobs run: vector add, softmax, matmul.
    launches: [u64; 3],
    bytes: u64,
    mismatches: u64,
    errors: u64,
    /// The first mismatch or error, with its job.
    first_failure: Option<String>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        for (a, b) in self.launches.iter_mut().zip(other.launches) {
            *a += b;
        }
        self.bytes += other.bytes;
        self.mismatches += other.mismatches;
        self.errors += other.errors;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }

    fn record(&mut self, d: &dyn Device, job: Job, outcome: rutile::Result<Checked>) {
        let kind = match job {
            Job::Add { .. } => 0,
            Job::Softmax { .. } => 1,
            Job::Matmul { .. } => 2,
        };
        self.launches[kind] += 1;
        let failure = match outcome {
            Ok(Checked { bytes, mismatch }) => {
                self.bytes += bytes;
                mismatch.inspect(|_| self.mismatches += 1)
            }
            Err(e) => {
                self.errors += 1;
                Some(format!("error: {e}"))
            }
        };
        if let Some(f) = failure {
            eprintln!("{}: {job:?}: {f}", d.id());
            self.first_failure.get_or_insert_with(|| format!("{job:?}: {f}"));
        }
    }
}

/// Memory in use after the device's queued work is done.
fn settled_memory(d: &dyn Device) -> MemoryInUse {
    d.synchronize().unwrap_or_else(|e| panic!("{}: {e}", d.id()));
    // wgpu frees what a finished submission used at the next poll.
    d.synchronize().unwrap_or_else(|e| panic!("{}: {e}", d.id()));
    d.memory_in_use().unwrap_or_else(|e| panic!("{}: {e}", d.id()))
}

/// Soaks `d` with `threads` threads for `duration`; panics on any failure.
fn soak(d: &Arc<dyn Device>, threads: usize, duration: Duration, seed: u64) {
    let large = d.properties().device_type != DeviceType::Cpu;
    // Warm-up: compile the kernels (most specializations) before the memory is read.
    let mut warm = Tally::default();
    let mut rng = Rng::new(seed);
    for i in 0..60 {
        let job = Job::random(i, &mut rng, false);
        warm.record(d.as_ref(), job, run(d.as_ref(), job, &mut rng));
    }
    assert!(
        warm.first_failure.is_none(),
        "{}: warm-up: {}",
        d.id(),
        warm.first_failure.unwrap()
    );
    let before = settled_memory(d.as_ref());

    let start = Instant::now();
    let deadline = start + duration;
    let mut tally = Tally::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let d = Arc::clone(d);
                s.spawn(move || {
                    let mut rng = Rng::new(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut tally = Tally::default();
                    // Threads start at different kinds.
                    let mut kind = t;
                    while Instant::now() < deadline {
                        let job = Job::random(kind, &mut rng, large);
                        kind += 1;
                        tally.record(d.as_ref(), job, run(d.as_ref(), job, &mut rng));
                    }
                    tally
                })
            })
            .collect();
        for h in handles {
            tally.add(h.join().expect("a soak thread panicked"));
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let after = settled_memory(d.as_ref());
    let [adds, softmaxes, matmuls] = tally.launches;
    println!(
        "soak {}: {threads} threads for {elapsed:.1} s: {} launches (vector add {adds}, softmax {softmaxes}, \
         matmul {matmuls}), {} bytes checked, {} mismatches, {} errors; memory in use before: {before}; after: {after}",
        d.id(),
        adds + softmaxes + matmuls,
        tally.bytes,
        tally.mismatches,
        tally.errors,
    );
    if let Some(f) = tally.first_failure {
        panic!(
            "{}: {} mismatches and {} errors; the first: {f}",
            d.id(),
            tally.mismatches,
            tally.errors
        );
    }
    // Each thread runs one job at least, and they start at different kinds.
    assert!(
        adds > 0 && (softmaxes > 0 || threads < 2) && (matmuls > 0 || threads < 3),
        "{}: a kind of job never ran",
        d.id()
    );
    assert_eq!(after.buffers, before.buffers, "{}: live buffer bytes", d.id());
    match d.properties().backend {
        Backend::Cuda => {
            let (b, a) = (before.device.unwrap(), after.device.unwrap());
            assert!(
                a <= b + CUDA_DRIVER_SLACK,
                "{}: the driver reports {a} bytes in use after the soak, {b} before",
                d.id()
            );
        }
        _ => assert_eq!(after.device, before.device, "{}: the device's allocations", d.id()),
    }
}

#[test]
fn soak_mixed_kernels_from_several_threads() {
    let seconds: f64 = setting("RUTILE_SOAK_SECONDS", 3.0);
    let threads: usize = setting("RUTILE_SOAK_THREADS", 4);
    assert!(threads > 0, "RUTILE_SOAK_THREADS must be at least 1");
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    let mut devices = gpus;
    devices.push(Arc::new(CpuDevice::new()));
    for (i, d) in devices.iter().enumerate() {
        soak(d, threads, Duration::from_secs_f64(seconds), 0x50A4 + i as u64);
    }
    let validation = rutile::vulkan::validation_report();
    if validation.requested {
        println!("{validation:?}");
        assert_eq!(
            validation.errors, 0,
            "the Vulkan validation layer reported errors (on stderr)"
        );
    }
}
