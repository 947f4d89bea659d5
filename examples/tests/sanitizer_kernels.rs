//! The kernels `scripts/sanitize.sh` runs under NVIDIA's compute-sanitizer (memcheck,
//! racecheck, synccheck, initcheck): every seed kernel once at small ragged sizes, the
//! matmul on each of its paths (the CUDA cores in f32; the tensor cores in f16 from sm_80,
//! with and without software pipelining), and a sample of the differential fuzzer's
//! random kernels. Each result is compared with the interpreter's, so that a run under
//! the sanitizer also checks values.
//!
//! Runs on every CUDA GPU and on the interpreter (which checks the cases themselves where
//! there is no GPU); no Vulkan device, whose work the sanitizer does not see. Without a
//! CUDA device the GPU part skips, unless `RUTILE_REQUIRE` names `cuda`.
//! `RUTILE_SANITIZE_KERNELS=N` sets how many random kernels run (default 24).

use half::f16;
use rutile::ir::testing::{random_kernel, Rng};
use rutile::seeds::{self, Activation, MatmulMeta};
use rutile::{Arg, Backend, CacheModifier, CpuDevice, CudaGpu, Device, DeviceExt, Kernel, LaunchConfig, ScalarType};
use rutile_examples::check::max_relative_error;
use std::fmt::Display;

/// The CUDA GPUs, then the interpreter.
fn devices() -> Vec<Box<dyn Device>> {
    let count = CudaGpu::count();
    let opened = if count == 0 {
        Err(rutile::cuda::probe()
            .err()
            .map_or("the driver lists no CUDA device".to_string(), |e| e.to_string()))
    } else {
        Ok(())
    };
    rutile::device::check_required(Backend::Cuda, opened.as_ref().map_err(|e| e as &dyn Display).copied())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut devices: Vec<Box<dyn Device>> = (0..count)
        .map(|i| Box::new(CudaGpu::open(i).unwrap_or_else(|e| panic!("cuda:{i}: {e}"))) as Box<dyn Device>)
        .collect();
    if devices.is_empty() {
        eprintln!("no CUDA device: the cases run on the interpreter only");
    }
    devices.push(Box::new(CpuDevice::new()));
    devices
}

/// Runs `kernel` over `grid` on `d` with f32 buffers holding `inputs` (in order) and
/// `outputs` buffers of the given lengths poisoned with NaN, then `scalars`; the outputs.
fn run_f32(
    d: &dyn Device,
    kernel: &Kernel,
    config: &LaunchConfig,
    inputs: &[&[f32]],
    outputs: &[usize],
    scalars: &[Arg<'static>],
) -> rutile::Result<Vec<Vec<f32>>> {
    let ins = inputs.iter().map(|x| d.upload(x)).collect::<rutile::Result<Vec<_>>>()?;
    let outs = outputs
        .iter()
        .map(|&n| d.upload(&vec![f32::NAN; n]))
        .collect::<rutile::Result<Vec<_>>>()?;
    let mut args: Vec<Arg<'_>> = outs.iter().chain(&ins).map(Arg::from).collect();
    args.extend_from_slice(scalars);
    d.launch(kernel, config, &args)?;
    outs.iter().map(|b| d.download(b)).collect()
}

/// Asserts that `got` is within `bound` (relative, over `floor`) of `want`.
#[track_caller]
fn assert_close(what: &str, got: &[f32], want: &[f32], floor: f64, bound: f64) {
    let want: Vec<f64> = want.iter().map(|&w| w as f64).collect();
    let (worst, at) = max_relative_error(got.iter().map(|&g| g as f64), &want, floor);
    assert!(
        worst <= bound,
        "{what}: element {at} is {}, the interpreter's {} (relative error {worst:.2e})",
        got[at],
        want[at]
    );
}

#[test]
fn seed_kernels() {
    let cpu = CpuDevice::new();
    for d in devices() {
        let d = d.as_ref();
        // Vector add: the output first, as `run_f32` orders buffers, is the third parameter
        // here, so it is launched directly.
        for (n, block) in [(1usize, 128u32), (1000, 128), (98433, 1024)] {
            let mut rng = Rng::new(n as u64);
            let (x, y) = (rng.f32s(n, -2.0, 2.0), rng.f32s(n, -2.0, 2.0));
            let kernel = seeds::vector_add(ScalarType::F32, block).unwrap();
            let (xb, yb, zb) = (
                d.upload(&x).unwrap(),
                d.upload(&y).unwrap(),
                d.upload(&vec![f32::NAN; n]).unwrap(),
            );
            let args = [(&xb).into(), (&yb).into(), (&zb).into(), Arg::I32(n as i32)];
            d.launch(&kernel, &LaunchConfig::grid1((n as u32).div_ceil(block)), &args)
                .unwrap();
            let z = d.download(&zb).unwrap();
            assert!(
                (0..n).all(|i| z[i] == x[i] + y[i]),
                "{}: vector add of {n} (block {block})",
                d.id()
            );
        }
        // The softmax forms, each row ragged against its block.
        let read_once = seeds::SoftmaxOptions {
            cache: CacheModifier::Streaming,
            ieee_rounding: false,
        };
        for (rows, cols) in [(3usize, 7usize), (17, 781), (5, 1025)] {
            let x = Rng::new(7 + cols as u64).f32s(rows * cols, -3.0, 3.0);
            let block = seeds::softmax_block(cols as u32);
            let warps = seeds::softmax_num_warps(block);
            let chunks = seeds::softmax_chunks(cols as u32);
            let forms: [(&str, Kernel, u32); 6] = [
                ("simple", seeds::softmax(block).unwrap(), rows as u32),
                (
                    "read-once",
                    seeds::softmax_with(block, CacheModifier::Streaming).unwrap(),
                    rows as u32,
                ),
                (
                    "chunked, full division",
                    seeds::softmax_chunked(&chunks, read_once).unwrap(),
                    rows as u32,
                ),
                (
                    "persistent",
                    seeds::softmax_persistent(block).unwrap(),
                    (rows as u32).min(8),
                ),
                (
                    "persistent, 2 stages",
                    seeds::softmax_persistent_staged(block, 2).unwrap(),
                    (rows as u32).min(8),
                ),
                (
                    "two rows",
                    seeds::softmax_rows(2, block).unwrap(),
                    (rows as u32).div_ceil(2),
                ),
            ];
            for (form, kernel, programs) in forms {
                let c = cols as i32;
                let scalars = [c.into(), c.into(), (rows as i32).into(), c.into()];
                let config = LaunchConfig::grid1(programs).num_warps(warps);
                let run = |dev: &dyn Device| run_f32(dev, &kernel, &config, &[&x], &[rows * cols], &scalars);
                let want = run(&cpu).unwrap().remove(0);
                let got = run(d)
                    .unwrap_or_else(|e| panic!("{}: softmax {rows}x{cols} {form}: {e}", d.id()))
                    .remove(0);
                assert_close(
                    &format!("{}: softmax {rows}x{cols} {form}", d.id()),
                    &got,
                    &want,
                    1e-30,
                    2e-5,
                );
            }
        }
        // The transpose, f32 and f16, in partial tiles on both axes.
        let (m, n) = (100usize, 77usize);
        for ((bm, bn), warps) in [((64, 64), 4), ((32, 64), 2)] {
            let config = LaunchConfig::new(seeds::transpose_grid(m as u32, n as u32, bm, bn)).num_warps(warps);
            let (mi, ni) = (m as i32, n as i32);
            let x = Rng::new(3).f32s(m * n, -100.0, 100.0);
            let kernel = seeds::transpose(ScalarType::F32, bm, bn).unwrap();
            let (xb, out) = (d.upload(&x).unwrap(), d.upload(&vec![f32::NAN; m * n]).unwrap());
            let args = [(&xb).into(), (&out).into(), mi.into(), ni.into(), ni.into(), mi.into()];
            d.launch(&kernel, &config, &args).unwrap();
            let got = d.download(&out).unwrap();
            assert_eq!(
                got,
                rutile_examples::check::transpose_reference(&x, m, n),
                "{}: transpose f32",
                d.id()
            );
            let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            let kernel = seeds::transpose(ScalarType::F16, bm, bn).unwrap();
            let (hb, out) = (d.upload(&h).unwrap(), d.upload(&vec![f16::NAN; m * n]).unwrap());
            let args = [(&hb).into(), (&out).into(), mi.into(), ni.into(), ni.into(), mi.into()];
            d.launch(&kernel, &config, &args).unwrap();
            let got = d.download(&out).unwrap();
            assert_eq!(
                got,
                rutile_examples::check::transpose_reference(&h, m, n),
                "{}: transpose f16",
                d.id()
            );
        }
    }
}

/// The matmul of `a` (`m x k`) and `b` (`k x n`), row-major, in `meta`'s types, on `d`.
fn matmul_on(
    d: &dyn Device,
    meta: &MatmulMeta,
    stages: u32,
    (a, b): (&[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
) -> rutile::Result<Vec<f32>> {
    let kernel = seeds::matmul(meta)?;
    let config = LaunchConfig::grid1(seeds::matmul_grid(meta, m as u32, n as u32))
        .num_warps(4)
        .num_stages(stages);
    let strides = seeds::matmul_row_major_args(m, n, k).map(Arg::I32);
    if meta.input == ScalarType::F16 {
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<f16>>();
        let (ab, bb, cb) = (d.upload(&h(a))?, d.upload(&h(b))?, d.upload(&vec![f16::NAN; m * n])?);
        let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
        args.extend(strides);
        d.launch(&kernel, &config, &args)?;
        Ok(d.download(&cb)?.iter().map(|v| v.to_f32()).collect())
    } else {
        let (ab, bb, cb) = (d.upload(a)?, d.upload(b)?, d.upload(&vec![f32::NAN; m * n])?);
        let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
        args.extend(strides);
        d.launch(&kernel, &config, &args)?;
        d.download(&cb)
    }
}

#[test]
fn matmul_paths() {
    let cpu = CpuDevice::new();
    let f32_fma = MatmulMeta {
        input: ScalarType::F32,
        output: ScalarType::F32,
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(32, 32, 16)
    };
    let leaky = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(32, 64, 16)
    };
    // (configuration, num_stages): the CUDA cores in f32; the tensor cores in f16 (from
    // sm_80), also pipelined over 3 stages as the tutorial's configurations are.
    let paths = [
        (f32_fma, 1),
        (MatmulMeta::fp16(64, 64, 32), 1),
        (leaky, 1),
        (MatmulMeta::fp16(64, 64, 32), 3),
        (MatmulMeta::fp16(128, 64, 32), 4),
    ];
    for d in devices() {
        let d = d.as_ref();
        for (si, (m, n, k)) in [(37usize, 50usize, 19usize), (100, 70, 130), (128, 128, 64)]
            .into_iter()
            .enumerate()
        {
            let mut rng = Rng::new(900 + si as u64);
            let (a, b) = (rng.f32s(m * k, -1.0, 1.0), rng.f32s(k * n, -1.0, 1.0));
            for (meta, stages) in &paths {
                let what = format!(
                    "{}: matmul {m}x{n}x{k} {} {}x{}x{}, {stages} stages",
                    d.id(),
                    meta.input,
                    meta.block_m,
                    meta.block_n,
                    meta.block_k
                );
                let want = matmul_on(&cpu, meta, *stages, (&a, &b), (m, n, k)).unwrap();
                let got = matmul_on(d, meta, *stages, (&a, &b), (m, n, k)).unwrap_or_else(|e| panic!("{what}: {e}"));
                // Sums in another order, and an f16 result rounding to its neighbour.
                assert_close(&what, &got, &want, (k as f64).sqrt() / 3.0, 1e-3);
            }
        }
    }
}

/// Elements of the random kernels' buffers (as the differential fuzzer).
const LEN: usize = 1024;

#[test]
fn random_kernels() {
    let kernels: u64 = std::env::var("RUTILE_SANITIZE_KERNELS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let cpu = CpuDevice::new();
    let run = |d: &dyn Device, kernel: &Kernel, seed: u64| -> rutile::Result<(Vec<f32>, Vec<i32>, Vec<f16>)> {
        let mut rng = Rng::new(seed ^ 0xd1ff);
        let a = rng.f32s(LEN, -2.0, 2.0);
        let b = rng.i32s(LEN, 0, 1000);
        let n = 1 + rng.below(LEN as u64) as i32;
        let x = rng.uniform(-1.0, 1.0) as f32;
        let c = rng.f16s(LEN, -1.0, 1.0);
        let (ab, bb, cb) = (d.upload(&a)?, d.upload(&b)?, d.upload(&c)?);
        let args = [(&ab).into(), (&bb).into(), (&cb).into(), Arg::I32(n), Arg::F32(x)];
        d.launch(kernel, &LaunchConfig::grid1((LEN / 16) as u32), &args)?;
        Ok((d.download(&ab)?, d.download(&bb)?, d.download(&cb)?))
    };
    let close =
        |g: f32, w: f32, rel: f32| g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= rel * w.abs().max(1.0);
    for d in devices() {
        let d = d.as_ref();
        let mut ran = 0;
        // Every third seed: a spread sample of what the fuzzer runs.
        for seed in (0..).step_by(3).take(kernels as usize) {
            let Ok(kernel) = random_kernel(seed) else { continue };
            let (wa, wb, wc) = run(&cpu, &kernel, seed).unwrap();
            let (ga, gb, gc) = run(d, &kernel, seed).unwrap_or_else(|e| panic!("{}: seed {seed}: {e}", d.id()));
            for i in 0..LEN {
                assert!(
                    gb[i] == wb[i] && close(ga[i], wa[i], 1e-4) && close(gc[i].to_f32(), wc[i].to_f32(), 2e-3),
                    "{}: random_kernel({seed}) differs from the interpreter at element {i}:\n{kernel}",
                    d.id()
                );
            }
            ran += 1;
        }
        println!("{}: {ran} random kernels agree with the interpreter", d.id());
    }
}
