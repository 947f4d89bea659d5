//! Scans (`cumsum`, `associative_scan` on tuples, reversed too), reductions with a
//! combine, `sort`, `gather` and `histogram` on every GPU present (each CUDA GPU and each
//! wgpu adapter, lavapipe included), compared with the interpreter: several programs,
//! ragged (masked) rows, 1 to 8 warps, and longer blocks than the conformance matrix's on
//! hardware devices.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` or
//! `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when `RUTILE_REQUIRE` names a
//! backend without a device that opens.

use rutile::ir::testing::Rng;
use rutile::{
    CpuDevice, Device, DeviceExt, DeviceType, Element, Kernel, KernelBuilder, LaunchConfig, ScalarType, Value,
};
use std::sync::Arc;

use ScalarType::{F32, I32};

fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    rutile_examples::gpus::gpus_under_test()
}

/// Programs per launch: each handles one row of `block` elements, of which the first
/// `live` are loaded.
const PROGRAMS: u32 = 3;

/// A kernel whose program `p` loads row `p` of `x` (`block` elements, masked to `live`,
/// `fill` beyond), applies `f`, and stores the result's `out_len` elements as row `p` of
/// `y`.
fn row_kernel(
    name: &str,
    elem: ScalarType,
    block: u32,
    fill: f64,
    f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>) -> Value<'b>,
) -> (Kernel, u32, ScalarType) {
    let mut out_len = 0;
    let mut out_elem = elem;
    let kernel = Kernel::build(name, |k| {
        let x = k.arg_ptr("x", elem);
        let live = k.arg_i32("live");
        let p = k.program_id(0);
        let offs = k.arange(0, block as i32);
        let fill = if elem.is_float() {
            k.scalar(fill, elem)
        } else {
            k.scalar(fill as i64, elem)
        };
        let v = k.load_masked(x + p * block as i32 + offs, offs.lt(live), fill);
        let r = f(k, v);
        out_len = r.shape().iter().product::<u32>();
        out_elem = r.dtype().unwrap();
        let y = k.arg_ptr("y", out_elem);
        let dense = if r.shape().is_empty() {
            k.scalar(0, I32)
        } else {
            k.arange(0, out_len as i32)
        };
        k.store(y + p * out_len as i32 + dense, r);
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    (kernel, out_len.max(1), out_elem)
}

/// Runs a row kernel on `d` with `num_warps`; returns `y`.
fn run<T: Element, U: Element>(
    d: &dyn Device,
    kernel: &Kernel,
    x: &[T],
    live: i32,
    out_len: u32,
    num_warps: u32,
) -> rutile::Result<Vec<U>> {
    let xb = d.upload(x)?;
    let yb = d.zeros::<U>((out_len * PROGRAMS) as usize)?;
    d.launch(
        kernel,
        &LaunchConfig::grid1(PROGRAMS).num_warps(num_warps),
        &[(&xb).into(), live.into(), (&yb).into()],
    )?;
    d.download(&yb)
}

/// Block lengths and warp counts. Software devices (lavapipe) get one short block: LLVM
/// splits their shaders at every barrier, and compiling a network of dozens of barriers
/// takes minutes there.
fn configurations(d: &dyn Device) -> Vec<(u32, u32)> {
    if d.properties().device_type == DeviceType::Cpu {
        return vec![(128, 2)];
    }
    vec![(256, 1), (1024, 1), (1024, 4), (2048, 8), (4096, 4)]
}

/// Compares `got` with `want`: exactly, or for f32 within `tol` of each element.
fn check_f32(what: &str, got: &[f32], want: &[f32], tol: impl Fn(usize) -> f32) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol(i);
        assert!(ok, "{what}: element {i}: got {g}, expected {w}");
    }
}

#[test]
fn gpu_scans_match_the_interpreter() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        for (block, warps) in configurations(d) {
            let mut rng = Rng::new(block as u64 * 31 + warps as u64);
            let live = block as i32 - 5;
            let n = (block * PROGRAMS) as usize;
            let xf = rng.f32s(n, -2.0, 2.0);
            let xi = rng.i32s(n, -1000, 1000);
            let at = format!("{} block {block} x {warps} warps", d.id());
            for reverse in [false, true] {
                let (k, len, _) = row_kernel("cumsum_f32", F32, block, 0.0, |_, v| v.cumsum(0, reverse));
                let want: Vec<f32> = run(&cpu, &k, &xf, live, len, warps).unwrap();
                let got: Vec<f32> = run(d, &k, &xf, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
                // The sums are grouped differently: within n·eps·Σ|x| of the row.
                let bound: Vec<f32> = xf
                    .chunks(block as usize)
                    .map(|row| block as f32 * f32::EPSILON * row.iter().map(|v| v.abs()).sum::<f32>())
                    .collect();
                check_f32(&format!("cumsum f32 reverse {reverse} {at}"), &got, &want, |i| {
                    bound[i / block as usize]
                });

                // Two i32 operands, double-buffered: 16 bytes an element of shared memory,
                // more than CUDA's 48 KiB above 3072 elements.
                if block > 2048 {
                    continue;
                }
                let (k, len, _) = row_kernel("affine_scan", I32, block, 1.0, |k, v| {
                    k.associative_scan_n(&[v, v * 3 + 1], 0, reverse, |_, a, b| {
                        vec![a[0] * b[0], a[1] * b[0] + b[1]]
                    })[1]
                });
                let want: Vec<i32> = run(&cpu, &k, &xi, live, len, warps).unwrap();
                let got: Vec<i32> = run(d, &k, &xi, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(got, want, "affine scan reverse {reverse} {at}");
            }
            if block > 2048 {
                continue;
            }
            let (k, len, _) = row_kernel("argmax_tuple", I32, block, -5000.0, |k, v| {
                let idx = k.arange(0, block as i32);
                k.reduce_n(&[v / 8, idx], 0, false, |k, a, b| {
                    let take = b[0].gt(a[0]) | (b[0].eq(a[0]) & b[1].lt(a[1]));
                    vec![k.where_(take, b[0], a[0]), k.where_(take, b[1], a[1])]
                })[1]
            });
            let want: Vec<i32> = run(&cpu, &k, &xi, live, len, warps).unwrap();
            let got: Vec<i32> = run(d, &k, &xi, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(got, want, "argmax as a tuple reduction {at}");
        }
    }
}

#[test]
fn gpu_sorts_gathers_and_histograms_match_the_interpreter() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        for (block, warps) in configurations(d) {
            let mut rng = Rng::new(block as u64 * 37 + warps as u64);
            let live = block as i32 - 3;
            let n = (block * PROGRAMS) as usize;
            let mut xf = rng.f32s(n, -100.0, 100.0);
            for i in (0..n).step_by(9) {
                xf[i] = xf[(i * 7 + 1) % n];
            }
            let xi = rng.i32s(n, -8, 300);
            let at = format!("{} block {block} x {warps} warps", d.id());
            for descending in [false, true] {
                let (k, len, _) = row_kernel("sort_f32", F32, block, f64::INFINITY, |_, v| v.sort(0, descending));
                let want: Vec<f32> = run(&cpu, &k, &xf, live, len, warps).unwrap();
                let got: Vec<f32> = run(d, &k, &xf, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
                check_f32(&format!("sort descending {descending} {at}"), &got, &want, |_| 0.0);
            }
            let (k, len, _) = row_kernel("gather_f32", F32, block, 0.5, |_, v| {
                let idx = (v.abs() * 97.0).to(I32) % block as i32;
                v.gather(idx, 0)
            });
            let want: Vec<f32> = run(&cpu, &k, &xf, live, len, warps).unwrap();
            let got: Vec<f32> = run(d, &k, &xf, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
            check_f32(&format!("gather {at}"), &got, &want, |_| 0.0);
            let (k, len, _) = row_kernel("histogram", I32, block, -1.0, |_, v| v.histogram(256));
            let want: Vec<i32> = run(&cpu, &k, &xi, live, len, warps).unwrap();
            let got: Vec<i32> = run(d, &k, &xi, live, len, warps).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(got, want, "histogram {at}");
        }
    }
}
