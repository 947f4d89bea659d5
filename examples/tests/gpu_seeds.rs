//! The seed kernels on every GPU present (each CUDA GPU and each wgpu adapter, lavapipe
//! included), compared with the interpreter on random inputs at ragged and large sizes.
//! The errors of bad launches are in `bad_input.rs`.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` (CI sets it, with
//! lavapipe installed) or `RUTILE_REQUIRE_GPU=1` (on a GPU machine), then they fail.

use rutile::ir::testing::Rng;
use rutile::seeds;
use rutile::{CpuDevice, Device, DeviceExt, DeviceType, LaunchConfig, ScalarType};
use std::sync::Arc;

fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    rutile_examples::gpus::gpus_under_test()
}

/// Software devices (lavapipe) get the small sizes only.
fn is_fast(d: &dyn Device) -> bool {
    d.properties().device_type != DeviceType::Cpu
}

fn vector_add_on(d: &dyn Device, x: &[f32], y: &[f32], block: u32) -> rutile::Result<Vec<f32>> {
    let n = x.len();
    let kernel = seeds::vector_add(ScalarType::F32, block)?;
    let (xb, yb, zb) = (d.upload(x)?, d.upload(y)?, d.zeros::<f32>(n)?);
    d.launch(
        &kernel,
        &LaunchConfig::grid1((n as u32).div_ceil(block)),
        &[(&xb).into(), (&yb).into(), (&zb).into(), (n as i32).into()],
    )?;
    d.download(&zb)
}

#[test]
fn gpu_vector_add_matches_the_interpreter() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let mut sizes = vec![1usize, 2, 7, 127, 128, 1000, 98432, 98433, 1 << 20];
        if is_fast(d.as_ref()) {
            sizes.extend([(1 << 24) + 3, 1 << 28]);
        }
        for (i, &n) in sizes.iter().enumerate() {
            let mut rng = Rng::new(0x9E37_79B9 + i as u64);
            let (x, y) = (rng.f32s(n, -2.0, 2.0), rng.f32s(n, -2.0, 2.0));
            for block in [1024, 128] {
                let got = vector_add_on(d.as_ref(), &x, &y, block).unwrap_or_else(|e| panic!("{}: n={n}: {e}", d.id()));
                // The interpreter is the reference; above 2^20 elements its result is x + y
                // in f32, computed here directly (the interpreter is exact).
                let want = if n <= 1 << 20 {
                    vector_add_on(&cpu, &x, &y, block).unwrap()
                } else {
                    x.iter().zip(&y).map(|(a, b)| a + b).collect()
                };
                assert!(
                    got == want,
                    "{}: vector add of {n} (block {block}) differs from the interpreter",
                    d.id()
                );
            }
        }
    }
}

/// The softmax forms: one row per program, persistent, and several rows per program.
#[derive(Clone, Copy, Debug)]
enum Form {
    Simple,
    Persistent,
    Rows(u32),
}

fn softmax_on(d: &dyn Device, x: &[f32], rows: usize, cols: usize, form: Form) -> rutile::Result<Vec<f32>> {
    let block = seeds::softmax_block(cols as u32);
    let kernel = match form {
        Form::Simple => seeds::softmax(block)?,
        Form::Persistent => seeds::softmax_persistent(block)?,
        Form::Rows(m) => seeds::softmax_rows(m, block)?,
    };
    let (xb, yb) = (d.upload(x)?, d.zeros::<f32>(rows * cols)?);
    let programs = match form {
        Form::Simple => rows as u32,
        Form::Persistent => (rows as u32).min(132 * 4),
        Form::Rows(m) => (rows as u32).div_ceil(m),
    };
    let config = LaunchConfig::grid1(programs).num_warps(seeds::softmax_num_warps(block));
    let c = cols as i32;
    d.launch(
        &kernel,
        &config,
        &[
            (&yb).into(),
            (&xb).into(),
            c.into(),
            c.into(),
            (rows as i32).into(),
            c.into(),
        ],
    )?;
    d.download(&yb)
}

#[test]
fn gpu_softmax_matches_the_interpreter() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let mut shapes = vec![
            (1usize, 1usize),
            (3, 7),
            (17, 781),
            (64, 1024),
            (5, 1025),
            (33, 2048),
            (4, 4096),
            (2, 16384),
        ];
        if is_fast(d.as_ref()) {
            shapes.extend([(1823, 781), (4096, 1024), (1000, 16384)]);
        }
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            let x = Rng::new(77 + i as u64).f32s(rows * cols, -2.0, 2.0);
            let want = softmax_on(&cpu, &x, rows, cols, Form::Simple).unwrap();
            for form in [Form::Simple, Form::Persistent, Form::Rows(2), Form::Rows(4)] {
                if matches!(form, Form::Rows(_)) && cols > 4096 {
                    continue; // a [4, 16384] block is more than a program should hold
                }
                let got = softmax_on(d.as_ref(), &x, rows, cols, form)
                    .unwrap_or_else(|e| panic!("{}: {rows}x{cols} ({form:?}): {e}", d.id()));
                // GPUs compute exp with approximate instructions: a few ulp.
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| ((g - w).abs() / w.abs().max(1e-30)) as f64)
                    .fold(0.0, f64::max);
                assert!(
                    worst < 2e-5,
                    "{}: softmax {rows}x{cols} ({form:?}): relative error {worst:.2e}",
                    d.id()
                );
            }
        }
    }
}

#[test]
fn gpu_copy_and_properties() {
    let (_turn, devices) = devices();
    for d in devices {
        let p = d.properties();
        println!("{}: {p}", d.id());
        assert!(p.warp_size.is_none_or(|w| w.is_power_of_two()));
        let x = Rng::new(5).f32s(1000, -2.0, 2.0);
        let (a, b) = (d.upload(&x).unwrap(), d.zeros::<f32>(1000).unwrap());
        d.copy(a.raw(), b.raw()).unwrap();
        assert_eq!(d.download(&b).unwrap(), x);
        let c = d.zeros::<f32>(10).unwrap();
        assert!(d.copy(a.raw(), c.raw()).is_err());
    }
}

/// A transpose through 64 KiB of shared memory: above CUDA's 48 KiB default, so it runs
/// where the device lets a program opt in to that much (and must then be right), and is a
/// clear error elsewhere.
#[test]
fn gpu_large_shared_memory_opts_in_or_errs() {
    let (_turn, devices) = devices();
    let n = 128u32;
    let kernel = rutile::Kernel::build("transpose_64k", |k| {
        let (src, dst) = (k.arg_ptr("src", ScalarType::F32), k.arg_ptr("dst", ScalarType::F32));
        let r = k.arange(0, n as i32);
        let offs = r.expand_dims(1) * n as i32 + r.expand_dims(0);
        k.store(dst + offs, k.load(src + offs).trans());
    })
    .unwrap();
    let x = Rng::new(9).f32s((n * n) as usize, -2.0, 2.0);
    for d in devices {
        let d = d.as_ref();
        let (src, dst) = (d.upload(&x).unwrap(), d.zeros::<f32>((n * n) as usize).unwrap());
        let result = d.launch(&kernel, &LaunchConfig::grid1(1), &[(&src).into(), (&dst).into()]);
        let limit = d.properties().shared_memory_per_block_optin.unwrap_or(0);
        if limit >= 64 * 1024 {
            result.unwrap_or_else(|e| panic!("{}: {e}", d.id()));
            let y = d.download(&dst).unwrap();
            for i in 0..n as usize {
                for j in 0..n as usize {
                    assert_eq!(
                        y[i * n as usize + j],
                        x[j * n as usize + i],
                        "{}: element ({i}, {j})",
                        d.id()
                    );
                }
            }
        } else {
            let e = result.unwrap_err().to_string();
            assert!(e.contains("shared memory"), "{}: {e}", d.id());
        }
    }
}
