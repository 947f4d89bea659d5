//! The matmul tutorial's kernel on every GPU present, against an f64 reference by relative
//! Frobenius error: square and ragged shapes (a K that is not a multiple of `BLOCK_K`, M or N
//! smaller than a block, skinny products), row- and column-major A and B, with and without
//! leaky ReLU, f16 and bf16 inputs, in several of the tutorial's autotuning configurations.
//! On CUDA (sm_80 and later) this is the tensor-core path with its `cp.async` pipeline;
//! elsewhere the CUDA-core path. Software devices (lavapipe) run the small shapes only.
//!
//! The bound is the output's rounding (f16: 2^-11, bf16: 2^-8 relative) plus f32
//! accumulation: the inputs are exactly representable, so the reference is exact.
//!
//! fp8 inputs (E5M2 and E4M3, f16 output: the tutorial's fp8 run) are checked the same way;
//! a `dot` of fp8 blocks multiplies their exact f16 conversions.
//!
//! f32 inputs at input precision tf32 (f32 output) are checked against the product of the
//! unrounded inputs, within tf32's operand rounding (2^-11 relative each). On CUDA from
//! sm_80 that is `mma.m16n8k8` on tf32; on other devices the CUDA-core path, which rounds the
//! operands to tf32 too, so every device gives the same products.

use half::{bf16, f16};
use rutile::ir::testing::Rng;
use rutile::seeds::{self, Activation, MatmulMeta};
use rutile::{CpuDevice, Device, DeviceExt, DeviceType, DotPrecision, LaunchConfig, ScalarType, F8E4M3, F8E5M2};

fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<std::sync::Arc<dyn Device>>) {
    rutile_examples::gpus::gpus_under_test()
}

/// A matrix as stored: row- or column-major.
#[derive(Clone, Copy, Debug)]
enum Order {
    Row,
    Col,
}

/// `x` (`rows x cols`, row-major) stored in `order`, and its (row, column) strides.
fn stored(x: &[f64], rows: usize, cols: usize, order: Order) -> (Vec<f64>, [usize; 2]) {
    match order {
        Order::Row => (x.to_vec(), [cols, 1]),
        Order::Col => {
            let mut t = vec![0.0; x.len()];
            for r in 0..rows {
                for c in 0..cols {
                    t[c * rows + r] = x[r * cols + c];
                }
            }
            (t, [1, rows])
        }
    }
}

/// Values in [-1, 1] rounded to `input` (so that the f64 reference sees what the device sees).
fn random(rng: &mut Rng, n: usize, input: ScalarType) -> Vec<f64> {
    rng.f32s(n, -1.0, 1.0)
        .into_iter()
        .map(|v| match input {
            ScalarType::BF16 => bf16::from_f32(v).to_f64(),
            ScalarType::F8E4M3 => F8E4M3::from_f32(v).to_f64(),
            ScalarType::F8E5M2 => F8E5M2::from_f32(v).to_f64(),
            _ => f16::from_f32(v).to_f64(),
        })
        .collect()
}

fn reference(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), leaky: bool) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j];
            }
        }
    }
    if leaky {
        c.iter_mut().filter(|v| **v < 0.0).for_each(|v| *v *= 0.01);
    }
    c
}

/// The fp8, f16, bf16 and f32 elements the cases run on.
trait Input: rutile::Element + Copy {
    fn from(v: f64) -> Self;
    fn to(self) -> f64;
}
impl Input for f16 {
    fn from(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
}
impl Input for bf16 {
    fn from(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
}
impl Input for F8E4M3 {
    fn from(v: f64) -> Self {
        F8E4M3::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
}
impl Input for F8E5M2 {
    fn from(v: f64) -> Self {
        F8E5M2::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
}
impl Input for f32 {
    fn from(v: f64) -> Self {
        v as f32
    }
    fn to(self) -> f64 {
        self as f64
    }
}

/// How a case launches: warps, stages, and the schedule (persistent, warp-specialized).
#[derive(Clone, Copy)]
struct Launch {
    warps: u32,
    stages: u32,
    persistent: bool,
    warp_specialize: bool,
}

impl From<(u32, u32)> for Launch {
    fn from((warps, stages): (u32, u32)) -> Launch {
        Launch {
            warps,
            stages,
            persistent: false,
            warp_specialize: false,
        }
    }
}

/// One f16 or bf16 case (`meta.input`; `meta.output` the same or f32) within `bound` of
/// `want`, or a panic naming it.
#[allow(clippy::too_many_arguments)]
fn check_case(
    d: &dyn Device,
    meta: &MatmulMeta,
    launch: Launch,
    inputs: (&[f64], &[f64]),
    (m, n, k): (usize, usize, usize),
    orders: (Order, Order),
    want: &[f64],
    bound: f64,
) {
    let Launch {
        warps,
        stages,
        persistent,
        warp_specialize,
    } = launch;
    let case = format!(
        "{}: {m}x{n}x{k} {} -> {} A {:?} B {:?} leaky_relu {}, {}x{}x{} w{warps} s{stages}{}{}",
        d.id(),
        meta.input,
        meta.output,
        orders.0,
        orders.1,
        meta.activation.is_some(),
        meta.block_m,
        meta.block_n,
        meta.block_k,
        if persistent { " persistent" } else { "" },
        if warp_specialize { " warp-specialized" } else { "" },
    );
    let run = match (meta.input, meta.output) {
        (ScalarType::BF16, ScalarType::F32) => relative_error::<bf16, f32>,
        (ScalarType::BF16, _) => relative_error::<bf16, bf16>,
        (ScalarType::F8E4M3, _) => relative_error::<F8E4M3, f16>,
        (ScalarType::F8E5M2, _) => relative_error::<F8E5M2, f16>,
        (_, ScalarType::F32) => relative_error::<f16, f32>,
        _ => relative_error::<f16, f16>,
    };
    let err = run(d, meta, launch, inputs, (m, n, k), orders, want).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert!(
        err <= bound,
        "{case}: relative Frobenius error {err:.2e} above {bound:.0e}"
    );
}

/// One case: the kernel of `meta` (inputs of type `T`, output of type `U`) on `d` launched
/// as `config`; the relative Frobenius error against `want`.
fn relative_error<T: Input, U: Input>(
    d: &dyn Device,
    meta: &MatmulMeta,
    config: impl Into<Launch>,
    inputs: (&[f64], &[f64]),
    shape: (usize, usize, usize),
    orders: (Order, Order),
    want: &[f64],
) -> rutile::Result<f64> {
    let got = run_matmul::<T, U>(d, meta, config, inputs, shape, orders)?;
    Ok(frobenius(&got, want))
}

use rutile_examples::check::relative_frobenius as frobenius;

/// The kernel of `meta` (inputs of type `T`, output of type `U`) on `d` launched as
/// `config`: C.
fn run_matmul<T: Input, U: Input>(
    d: &dyn Device,
    meta: &MatmulMeta,
    config: impl Into<Launch>,
    (a, b): (&[f64], &[f64]),
    (m, n, k): (usize, usize, usize),
    (ao, bo): (Order, Order),
) -> rutile::Result<Vec<f64>> {
    let (a_s, [sam, sak]) = stored(a, m, k, ao);
    let (b_s, [sbk, sbn]) = stored(b, k, n, bo);
    let typed = |x: &[f64]| x.iter().map(|&v| T::from(v)).collect::<Vec<T>>();
    let (ab, bb) = (d.upload(&typed(&a_s))?, d.upload(&typed(&b_s))?);
    // Poisoned: an element the kernel does not write fails the check.
    let cb = d.upload(&vec![U::from(f64::NAN); m * n])?;
    let ints = [m, n, k, sam, sak, sbk, sbn, n, 1].map(|v| rutile::Arg::I32(v as i32));
    let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
    args.extend(ints);
    let kernel = seeds::matmul(meta)?;
    let launch = config.into();
    let config = LaunchConfig::grid1(seeds::matmul_grid(meta, m as u32, n as u32))
        .num_warps(launch.warps)
        .num_stages(launch.stages)
        .persistent(launch.persistent)
        .warp_specialize(launch.warp_specialize);
    d.launch(&kernel, &config, &args)?;
    Ok(d.download(&cb)?.into_iter().map(U::to).collect())
}

/// The acceptance shapes, in three tests so that each runs within a GPU session's limit on
/// one backend (through NVIDIA's Vulkan driver every configuration and layout is a kernel
/// the driver compiles, seconds each; a shape's cases run on several threads): square and
/// ragged shapes here (and on software devices a smaller set), the wide K = 77 one and the
/// skinny ones in the tests after it.
#[test]
fn gpu_matmul_on_the_acceptance_shapes() {
    acceptance(&[(0, (512, 512, 512)), (2, (17, 33, 129)), (5, (300, 200, 100))], true);
}

#[test]
fn gpu_matmul_on_the_wide_acceptance_shape() {
    acceptance(&[(1, (1000, 3000, 77))], false);
}

#[test]
fn gpu_matmul_on_the_skinny_acceptance_shapes() {
    acceptance(&[(3, (4096, 16, 4096)), (4, (1, 4096, 4096))], false);
}

/// `shapes` (each with the index that seeds its inputs) on every GPU, and where
/// `with_software` a smaller set on software devices, in the tutorial's configurations.
fn acceptance(shapes: &[(u64, (usize, usize, usize))], with_software: bool) {
    let (_turn, devices) = devices();
    // (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), from the tutorial's autotuning list.
    let configs = [
        (128, 128, 32, 4, 4),
        (64, 32, 32, 2, 5),
        (128, 256, 64, 8, 3),
        (64, 128, 32, 4, 4),
        // The 16-wide K steps on 16 warps that cooperative-matrix devices add
        // (`with_cooperative_shapes`), two iterations ahead and with one stage; and the
        // 32-wide ones whose single workgroup stage is refilled between two barriers.
        (128, 256, 16, 16, 3),
        (128, 256, 16, 16, 1),
        (128, 256, 32, 16, 2),
        (128, 256, 32, 8, 2),
    ];
    for d in devices {
        let software = d.properties().device_type == DeviceType::Cpu;
        let shapes: Vec<(u64, (usize, usize, usize))> = match (software, with_software) {
            (true, true) => vec![(2, (17, 33, 129)), (6, (64, 48, 80))],
            (true, false) => continue,
            (false, _) => shapes.to_vec(),
        };
        for &(si, shape) in &shapes {
            let (m, n, k) = shape;
            // (bf16 where the device has it: every device since Vulkan holds it in f32
            // registers and packed words.)
            let inputs = [ScalarType::F16, ScalarType::BF16];
            for input in inputs
                .into_iter()
                .filter(|t| d.properties().supported_types.contains(t))
            {
                let mut rng = Rng::new(900 + si);
                let (a, b) = (random(&mut rng, m * k, input), random(&mut rng, k * n, input));
                let plain = reference(&a, &b, shape, false);
                let leaky = reference(&a, &b, shape, true);
                // Output rounding plus f32 accumulation over k.
                let bound = if input == ScalarType::BF16 { 8e-3 } else { 1.5e-3 };
                let mut cases = Vec::new();
                for (ci, &(bm, bn, bk, warps, stages)) in configs.iter().enumerate() {
                    if software && bm * bn > 64 * 128 {
                        continue;
                    }
                    // bf16 through Vulkan runs on the FMA units, its operand tiles in shared
                    // memory as 4-byte words: a configuration whose tiles do not fit is
                    // refused (core-ir's lowering tests), and not one to run here.
                    let vulkan = d.properties().backend != rutile::Backend::Cuda;
                    let words = (bm * bk + bk * bn) * 4;
                    let limit = d.properties().shared_memory_per_block.unwrap_or(48 * 1024);
                    if input == ScalarType::BF16 && vulkan && words > limit {
                        continue;
                    }
                    for (li, orders) in [
                        (Order::Row, Order::Row),
                        (Order::Col, Order::Row),
                        (Order::Row, Order::Col),
                        (Order::Col, Order::Col),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        // Every layout with the first two configurations; the others on
                        // row-major operands (enough to cover their warp grids and stages);
                        // software devices: both row- or both column-major.
                        if (ci >= 2 && li > 0) || (software && (li == 1 || li == 2)) {
                            continue;
                        }
                        for with_relu in [false, true] {
                            let meta = MatmulMeta {
                                input,
                                output: input,
                                activation: with_relu.then_some(Activation::LeakyRelu),
                                ..MatmulMeta::fp16(bm, bn, bk)
                            };
                            let want = if with_relu { &leaky } else { &plain };
                            cases.push((meta, Launch::from((warps, stages)), orders, want));
                        }
                    }
                }
                // (One at a time where the device's errors would not come back to the call
                // that caused them: under Vulkan's validation layer.)
                let threads = if d.compiles_in_parallel() { 8 } else { 1 };
                in_parallel(&cases, threads, |(meta, launch, orders, want)| {
                    check_case(d.as_ref(), meta, *launch, (&a, &b), shape, *orders, want, bound)
                });
            }
        }
        println!("{}: every matmul case within its bound", d.id());
    }
}

/// The matmul tutorial's fp8 run: E5M2 (the tutorial's) and E4M3 operands, B stored
/// column-major as the tutorial passes it (`b.T`) and row-major, an f16 output, on every
/// device (a smaller set on software ones), square and ragged shapes.
#[test]
fn gpu_fp8_matmul() {
    let (_turn, devices) = devices();
    let devices = std::iter::once(std::sync::Arc::new(CpuDevice::new()) as std::sync::Arc<dyn Device>).chain(devices);
    for d in devices {
        let software = d.properties().device_type == DeviceType::Cpu;
        let shapes: &[(usize, usize, usize)] = if software {
            &[(17, 33, 129)]
        } else {
            &[(512, 512, 512), (300, 200, 100), (17, 33, 129)]
        };
        let configs: &[(u32, u32, u32, u32, u32)] = if software {
            &[(64, 32, 32, 2, 5)]
        } else {
            &[(128, 128, 32, 4, 4), (64, 32, 32, 2, 5), (128, 256, 64, 8, 3)]
        };
        for input in [ScalarType::F8E5M2, ScalarType::F8E4M3] {
            if !d.properties().supported_types.contains(&input) {
                println!("{}: no {input}", d.id());
                continue;
            }
            for (si, &shape) in shapes.iter().enumerate() {
                let (m, n, k) = shape;
                let mut rng = Rng::new(950 + si as u64);
                let (a, b) = (random(&mut rng, m * k, input), random(&mut rng, k * n, input));
                let want = reference(&a, &b, shape, false);
                let mut cases = Vec::new();
                for &(bm, bn, bk, warps, stages) in configs {
                    // The operand tiles of a software or Vulkan device's FMA path as 4-byte words.
                    let limit = d.properties().shared_memory_per_block.unwrap_or(48 * 1024);
                    if d.properties().backend != rutile::Backend::Cuda && (bm * bk + bk * bn) * 4 > limit {
                        continue;
                    }
                    for orders in [(Order::Row, Order::Col), (Order::Row, Order::Row)] {
                        let meta = MatmulMeta {
                            input,
                            output: ScalarType::F16,
                            ..MatmulMeta::fp16(bm, bn, bk)
                        };
                        cases.push((meta, Launch::from((warps, stages)), orders));
                    }
                }
                let threads = if d.compiles_in_parallel() { 8 } else { 1 };
                in_parallel(&cases, threads, |(meta, launch, orders)| {
                    check_case(d.as_ref(), meta, *launch, (&a, &b), shape, *orders, &want, 1.5e-3)
                });
            }
        }
        println!("{}: every fp8 matmul case within its bound", d.id());
    }
}

/// `check` on every case, on as many threads as the host has cores, at most `most`: each
/// case is a kernel its driver compiles, seconds each through NVIDIA's Vulkan driver, and
/// devices take launches from several threads. A failing case panics its thread, which
/// fails the test.
fn in_parallel<C: Sync>(cases: &[C], most: usize, check: impl Fn(&C) + Sync) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, most.max(1));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(cases.len()) {
            s.spawn(|| {
                while let Some(case) = cases.get(next.fetch_add(1, Ordering::Relaxed)) {
                    check(case);
                }
            });
        }
    });
}

/// The schedules the autotuner may choose on CUDA devices, each against the f64 reference
/// on the acceptance shapes: the persistent grid (every device), warp specialization and
/// both (Hopper: a producer warpgroup feeding the consumers through TMA; elsewhere the
/// hint leaves the kernel as it is). Ragged, skinny and many-tiled shapes (more tiles than
/// programs, so that each persistent program walks several), f16 and bf16, row- and
/// column-major operands, leaky ReLU; and f32 results of the same inputs in every schedule,
/// the plain one too (on Hopper stored through TMA, a thread's columns spanning two 16-byte
/// chunks of the staging tile). In two tests of some 150 kernels each (about half a minute
/// each on an H200).
#[test]
fn gpu_matmul_schedules_ragged_and_skinny() {
    check_schedules(0..3);
}

/// The rest of [`gpu_matmul_schedules_ragged_and_skinny`]'s shapes. At 2048 x 2048 x 256
/// the persistent warp-specialized 64 x 64 tiles walk several tiles a program: launched four
/// programs a multiprocessor they hung in about one run of four on an H200, and the runtime
/// now launches such kernels one a multiprocessor (`occupancy::persistent_programs`).
#[test]
fn gpu_matmul_schedules_small_and_square() {
    check_schedules(3..5);
}

/// The schedules on the shapes `which` of the list below.
fn check_schedules(which: std::ops::Range<usize>) {
    let (_turn, devices) = devices();
    let configs = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (64, 64, 32, 4, 4)];
    let schedules = [(true, false), (false, true), (true, true), (false, false)];
    let shapes = [
        (1000, 3000, 77),
        (17, 33, 129),
        (4096, 16, 4096),
        (300, 200, 100),
        (2048, 2048, 256),
    ];
    for d in devices.iter().filter(|d| d.id().starts_with("cuda")) {
        for (si, &shape) in shapes.iter().enumerate().filter(|(i, _)| which.contains(i)) {
            let (m, n, k) = shape;
            for input in [ScalarType::F16, ScalarType::BF16] {
                let mut rng = Rng::new(700 + si as u64);
                let (a, b) = (random(&mut rng, m * k, input), random(&mut rng, k * n, input));
                for (with_relu, output) in [(false, input), (true, input), (true, ScalarType::F32)] {
                    // The output's rounding (f32's far below the accumulation's).
                    let bound = match output {
                        ScalarType::F32 => 1e-4,
                        ScalarType::BF16 => 8e-3,
                        _ => 1.5e-3,
                    };
                    let want = reference(&a, &b, shape, with_relu);
                    for (ci, &(bm, bn, bk, warps, stages)) in configs.iter().enumerate() {
                        // The plain schedule is the acceptance test's, but for f32 results.
                        let plain = output == ScalarType::F32;
                        for &(persistent, warp_specialize) in
                            schedules.iter().filter(|s| plain || **s != (false, false))
                        {
                            let orders = match (ci + si) % 3 {
                                0 => (Order::Row, Order::Row),
                                1 => (Order::Col, Order::Row),
                                _ => (Order::Row, Order::Col),
                            };
                            let meta = MatmulMeta {
                                input,
                                output,
                                activation: with_relu.then_some(Activation::LeakyRelu),
                                ..MatmulMeta::fp16(bm, bn, bk)
                            };
                            // An f32 tile of 128 x 256 (128 KiB to leave by) fits beside
                            // a ring that the producer keeps filling for the next tile only
                            // at 2 stages (`core-ir/tests/tma.rs`).
                            let deep_ring_too_big =
                                output == ScalarType::F32 && bm * bn >= 128 * 256 && persistent && warp_specialize;
                            let launch = Launch {
                                warps,
                                stages: if deep_ring_too_big { 2 } else { stages },
                                persistent,
                                warp_specialize,
                            };
                            check_case(d.as_ref(), &meta, launch, (&a, &b), shape, orders, &want, bound);
                        }
                    }
                }
                // (Progress: the whole test compiles some 300 kernels.)
                println!("{}: {m}x{n}x{k}, {input:?}: every schedule within its bound", d.id());
            }
        }
        println!("{}: every scheduled matmul case within its bound", d.id());
    }
}

/// f32 inputs at input precision tf32 with f32 outputs, against the f64 product of the
/// unrounded inputs: square, ragged and skinny shapes up to K = 4096, row- and column-major
/// operands, pipelined or not, in configurations whose f32 tiles fit 99 KiB of shared
/// memory (every sm_80+ GPU). And against the interpreter, which rounds the operands as the
/// device does: within the f32 accumulation's rounding, far below the rounding of the
/// operands (which a device that truncated them, say, would show).
#[test]
fn gpu_tf32_matmul_within_the_operand_rounding() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    // (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages).
    let configs = [
        (64, 64, 32, 4, 3),
        (128, 64, 16, 4, 3),
        (64, 32, 32, 2, 4),
        (64, 64, 32, 4, 1),
    ];
    // Per (shape, seed): the operands, the f64 product and the interpreter's, made once for
    // every device (the interpreter's at K = 4096 takes a while).
    type Case = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut cases: std::collections::HashMap<((usize, usize, usize), u64), Case> = Default::default();
    for d in devices {
        let software = d.properties().device_type == DeviceType::Cpu;
        let shapes: Vec<(usize, usize, usize)> = if software {
            vec![(17, 33, 129), (64, 48, 80)]
        } else {
            vec![
                (512, 512, 512),
                (1000, 300, 77),
                (17, 33, 129),
                (4096, 16, 4096),
                (1, 2048, 4096),
            ]
        };
        for (si, &shape) in shapes.iter().enumerate() {
            let (m, n, k) = shape;
            let seed = 950 + si as u64;
            let (a, b, want, interpreted) = cases.entry((shape, seed)).or_insert_with(|| {
                let mut rng = Rng::new(seed);
                // Full f32 mantissas: every operand is rounded.
                let f32s =
                    |rng: &mut Rng, len| -> Vec<f64> { rng.f32s(len, -1.0, 1.0).into_iter().map(f64::from).collect() };
                let (a, b) = (f32s(&mut rng, m * k), f32s(&mut rng, k * n));
                let want = reference(&a, &b, shape, false);
                let row = (Order::Row, Order::Row);
                let interpreted =
                    run_matmul::<f32, f32>(&cpu, &tf32_meta(configs[0]), (1, 1), (&a, &b), shape, row).unwrap();
                (a, b, want, interpreted)
            });
            let (a, b, want, interpreted) = (&*a, &*b, &*want, &*interpreted);
            // Each product within about 2^-10 relative (two roundings of 2^-11), the errors
            // of different products independent: about 2^-12 relative in the Frobenius norm
            // (measured on an H100: 2.5e-4 to 2.7e-4), plus f32 accumulation.
            let bound = 1e-3;
            // The same products summed in another order, with another rounding: bit for bit
            // on the CUDA cores; the tensor cores' sums are not rounded to nearest, so their
            // differences grow with K as a bias does (measured on an H100: 1.3e-6 at K = 512,
            // 1e-5 at 4096). K · 2^-27 (3e-5 at 4096) stays 8 times below the operands'
            // rounding.
            let interpreter_bound = (k as f64 * 2f64.powi(-27)).max(1e-6);
            for (ci, &(bm, bn, bk, warps, stages)) in configs.iter().enumerate() {
                if software && bm * bn > 64 * 64 {
                    continue;
                }
                for (li, orders) in [
                    (Order::Row, Order::Row),
                    (Order::Col, Order::Row),
                    (Order::Row, Order::Col),
                    (Order::Col, Order::Col),
                ]
                .into_iter()
                .enumerate()
                {
                    if (ci >= 2 && li > 0) || (software && (li == 1 || li == 2)) {
                        continue;
                    }
                    let meta = tf32_meta((bm, bn, bk, warps, stages));
                    let case = format!(
                        "{}: {m}x{n}x{k} tf32 A {:?} B {:?}, {bm}x{bn}x{bk} w{warps} s{stages}",
                        d.id(),
                        orders.0,
                        orders.1
                    );
                    let got = run_matmul::<f32, f32>(d.as_ref(), &meta, (warps, stages), (a, b), shape, orders)
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let (err, off) = (frobenius(&got, want), frobenius(&got, interpreted));
                    println!("{case}: relative Frobenius error {err:.2e}, {off:.1e} from the interpreter");
                    assert!(
                        err <= bound,
                        "{case}: relative Frobenius error {err:.2e} above {bound:.0e}"
                    );
                    // Not the f32 product: the operands were rounded (a K of a few terms
                    // could come close by chance; these have at least 77).
                    assert!(
                        err > 1e-5,
                        "{case}: relative Frobenius error {err:.2e}: tf32 not applied"
                    );
                    assert!(
                        off <= interpreter_bound,
                        "{case}: {off:.2e} from the interpreter, above {interpreter_bound:.0e}"
                    );
                }
            }
        }
        println!("{}: every tf32 matmul case within its bound", d.id());
    }
}

/// f32 inputs at input precision tf32x3 (three tf32 MMAs on NVIDIA's tensor cores, the IEEE
/// `dot` elsewhere) against the f64 product: ragged, skinny and square shapes up to K =
/// 4096, row- and column-major operands, pipelined or not, within 4e-6 relative in the
/// Frobenius norm: f32's accumulation (on an H200 at most 3.2e-7 through CUDA, 1.2e-6 for
/// Vulkan's IEEE `dot`), where tf32's operand rounding alone is 2.5e-4
/// (`gpu_tf32_matmul_within_the_operand_rounding`) and the MMAs' own sums over the whole
/// K, before each dot's were summed from zero, were 2.9e-5 at K = 4096.
#[test]
fn gpu_tf32x3_matmul_near_f32_accuracy() {
    let (_turn, devices) = devices();
    let configs = [(64, 64, 32, 4, 3), (128, 64, 16, 4, 3), (64, 64, 32, 4, 1)];
    for d in devices {
        let software = d.properties().device_type == DeviceType::Cpu;
        let shapes: Vec<(usize, usize, usize)> = if software {
            vec![(17, 33, 129)]
        } else {
            vec![(512, 512, 512), (1000, 300, 77), (17, 33, 129), (4096, 16, 4096)]
        };
        for (si, &shape) in shapes.iter().enumerate() {
            let (m, n, k) = shape;
            let mut rng = Rng::new(970 + si as u64);
            let f32s =
                |rng: &mut Rng, len| -> Vec<f64> { rng.f32s(len, -1.0, 1.0).into_iter().map(f64::from).collect() };
            let (a, b) = (f32s(&mut rng, m * k), f32s(&mut rng, k * n));
            let want = reference(&a, &b, shape, false);
            for (ci, &(bm, bn, bk, warps, stages)) in configs.iter().enumerate() {
                if software && ci > 0 {
                    continue;
                }
                for orders in [(Order::Row, Order::Row), (Order::Col, Order::Col)] {
                    let meta = MatmulMeta {
                        input_precision: DotPrecision::Tf32x3,
                        ..tf32_meta((bm, bn, bk, warps, stages))
                    };
                    let case = format!(
                        "{}: {m}x{n}x{k} tf32x3 A {:?} B {:?}, {bm}x{bn}x{bk} w{warps} s{stages}",
                        d.id(),
                        orders.0,
                        orders.1
                    );
                    let got = run_matmul::<f32, f32>(d.as_ref(), &meta, (warps, stages), (&a, &b), shape, orders)
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let err = frobenius(&got, &want);
                    println!("{case}: relative Frobenius error {err:.2e}");
                    assert!(err <= 4e-6, "{case}: relative Frobenius error {err:.2e} above 4e-6");
                }
            }
        }
        println!("{}: every tf32x3 matmul case within its bound", d.id());
    }
}

/// The matmul seed on f32 inputs and output at input precision tf32, for a configuration
/// `(BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)`.
fn tf32_meta((bm, bn, bk, _, _): (u32, u32, u32, u32, u32)) -> MatmulMeta {
    MatmulMeta {
        input: ScalarType::F32,
        output: ScalarType::F32,
        input_precision: DotPrecision::Tf32,
        ..MatmulMeta::fp16(bm, bn, bk)
    }
}
