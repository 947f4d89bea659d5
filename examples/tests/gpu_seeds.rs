//! The seed kernels (vector add, softmax in every form, matmul, transpose) on every GPU
//! present (each CUDA GPU and each wgpu adapter, lavapipe included), compared with the
//! interpreter (the transpose with its exact CPU reference) on random inputs at ragged and
//! large sizes.
//! The errors of bad launches are in `bad_input.rs`.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` (CI sets it, with
//! lavapipe installed) or `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when
//! `RUTILE_REQUIRE` names a backend without a device that opens (`RUTILE_REQUIRE=cuda,vulkan`
//! on a GPU machine).

use rutile::ir::testing::Rng;
use rutile::seeds;
use rutile::{CpuDevice, Device, DeviceExt, LaunchConfig, ScalarType};
use rutile_examples::check::max_relative_error;
use rutile_examples::gpus::is_fast;
use rutile_examples::tutorials::softmax_args;
use std::sync::Arc;

fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    rutile_examples::gpus::gpus_under_test()
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

/// The softmax forms: one row per program (also with read-once input loads, which reach a
/// Vulkan driver as SPIR-V with `Nontemporal` loads, with the row in power-of-two pieces,
/// and with read-once loads and the division without IEEE rounding, `div.full.f32` on
/// CUDA), persistent (its loop over rows pipelined: through CUDA the next rows copied
/// ahead; also with read-once loads and that division), and several rows per program.
#[derive(Clone, Copy, Debug)]
enum Form {
    Simple,
    Streaming,
    Chunked,
    FullDivision,
    ChunkedFullDivision,
    Persistent,
    PersistentFullDivision,
    Rows(u32),
}

fn full_division() -> seeds::SoftmaxOptions {
    seeds::SoftmaxOptions {
        cache: rutile::CacheModifier::Streaming,
        ieee_rounding: false,
    }
}

fn softmax_on(d: &dyn Device, x: &[f32], rows: usize, cols: usize, form: Form) -> rutile::Result<Vec<f32>> {
    let block = seeds::softmax_block(cols as u32);
    let kernel = match form {
        Form::Simple => seeds::softmax(block)?,
        Form::Streaming => seeds::softmax_with(block, rutile::CacheModifier::Streaming)?,
        Form::Chunked => seeds::softmax_chunked(&seeds::softmax_chunks(cols as u32), rutile::CacheModifier::Default)?,
        Form::FullDivision => seeds::softmax_with(block, full_division())?,
        Form::ChunkedFullDivision => seeds::softmax_chunked(&seeds::softmax_chunks(cols as u32), full_division())?,
        Form::Persistent => seeds::softmax_persistent(block)?,
        Form::PersistentFullDivision => seeds::softmax_persistent_with(block, 2, full_division())?,
        Form::Rows(m) => seeds::softmax_rows(m, block)?,
    };
    let (xb, yb) = (d.upload(x)?, d.zeros::<f32>(rows * cols)?);
    let programs = match form {
        Form::Simple | Form::Streaming | Form::Chunked | Form::FullDivision | Form::ChunkedFullDivision => rows as u32,
        Form::Persistent | Form::PersistentFullDivision => (rows as u32).min(132 * 4),
        Form::Rows(m) => (rows as u32).div_ceil(m),
    };
    let config = LaunchConfig::grid1(programs).num_warps(seeds::softmax_num_warps(block));
    d.launch(&kernel, &config, &softmax_args(&yb, &xb, rows, cols))?;
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
            let want: Vec<f64> = softmax_on(&cpu, &x, rows, cols, Form::Simple)
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect();
            for form in [
                Form::Simple,
                Form::Streaming,
                Form::Chunked,
                Form::FullDivision,
                Form::ChunkedFullDivision,
                Form::Persistent,
                Form::PersistentFullDivision,
                Form::Rows(2),
                Form::Rows(4),
            ] {
                if matches!(form, Form::Rows(_)) && cols > 4096 {
                    continue; // a [4, 16384] block is more than a program should hold
                }
                let got = softmax_on(d.as_ref(), &x, rows, cols, form)
                    .unwrap_or_else(|e| panic!("{}: {rows}x{cols} ({form:?}): {e}", d.id()));
                // GPUs compute exp with approximate instructions: a few ulp.
                let (worst, _) = max_relative_error(got.iter().map(|&g| g as f64), &want, 1e-30);
                assert!(
                    worst < 2e-5,
                    "{}: softmax {rows}x{cols} ({form:?}): relative error {worst:.2e}",
                    d.id()
                );
            }
        }
    }
}

/// The softmax tutorial's `naive_softmax` (the fused softmax's baseline: five kernels, every
/// intermediate through memory) on the interpreter and every GPU, against the fused
/// kernel on the interpreter, at ragged shapes (rows narrower than their block, matrices
/// that end inside an element-wise program); and too small a buffer is an error that names
/// it.
#[test]
fn gpu_naive_softmax_matches_the_fused_one() {
    use rutile_examples::sweeps::baselines::{naive_softmax, NaiveSoftmaxBuffers};
    let cpu = CpuDevice::new();
    let (_turn, mut devices) = devices();
    devices.push(Arc::new(CpuDevice::new()));
    for d in devices {
        let d = d.as_ref();
        let mut shapes = vec![(1usize, 1usize), (3, 7), (17, 781), (5, 1025), (2, 16384)];
        if is_fast(d) {
            shapes.extend([(4096, 781), (1000, 12672)]);
        }
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            let x = Rng::new(501 + i as u64).f32s(rows * cols, -30.0, 30.0);
            let want: Vec<f64> = softmax_on(&cpu, &x, rows, cols, Form::Simple)
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect();
            let run = || -> rutile::Result<Vec<f32>> {
                let kernels = seeds::NaiveSoftmax::new(cols as u32)?;
                let buffers = NaiveSoftmaxBuffers::new(d, rows, cols)?;
                let (xb, yb) = (d.upload(&x)?, d.zeros::<f32>(rows * cols)?);
                naive_softmax(d, &kernels, &buffers, &yb, &xb, (rows, cols))?;
                d.download(&yb)
            };
            let got = run().unwrap_or_else(|e| panic!("{}: naive softmax {rows}x{cols}: {e}", d.id()));
            let (worst, _) = max_relative_error(got.iter().map(|&g| g as f64), &want, 1e-30);
            assert!(
                worst < 2e-5,
                "{}: naive softmax {rows}x{cols}: relative error {worst:.2e} against the fused one",
                d.id()
            );
        }
        let kernels = seeds::NaiveSoftmax::new(100).unwrap();
        let buffers = NaiveSoftmaxBuffers::new(d, 4, 100).unwrap();
        let (x, y) = (d.zeros::<f32>(400).unwrap(), d.zeros::<f32>(399).unwrap());
        let e = naive_softmax(d, &kernels, &buffers, &y, &x, (4, 100)).unwrap_err();
        assert!(
            e.to_string()
                .contains("`out` holds 399 elements, a 4 x 100 softmax needs 400"),
            "{}: {e}",
            d.id()
        );
        let y = d.zeros::<f32>(400).unwrap();
        let e = naive_softmax(d, &kernels, &buffers, &y, &x, (2, 200)).unwrap_err();
        assert!(
            e.to_string().contains("at most 128 columns, got 200"),
            "{}: {e}",
            d.id()
        );
    }
}

/// The seed matmul of `a` (`m x k`) and `b` (`k x n`), row-major, into C of the input type.
fn matmul_on(
    d: &dyn Device,
    meta: &seeds::MatmulMeta,
    ab: (&[f32], &[f32]),
    shape: (usize, usize, usize),
) -> rutile::Result<Vec<f32>> {
    matmul_kernel_on(d, seeds::matmul(meta)?, meta, ab, shape)
}

/// [`matmul_on`] with `kernel`, one of the matmul seed's forms for `meta`.
fn matmul_kernel_on(
    d: &dyn Device,
    kernel: rutile::Kernel,
    meta: &seeds::MatmulMeta,
    (a, b): (&[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
) -> rutile::Result<Vec<f32>> {
    use half::f16;
    let strides = seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32);
    let config = LaunchConfig::grid1(seeds::matmul_grid(meta, m as u32, n as u32)).num_warps(4);
    if meta.input == ScalarType::F16 {
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<f16>>();
        let (ab, bb, cb) = (d.upload(&h(a))?, d.upload(&h(b))?, d.zeros::<f16>(m * n)?);
        let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
        args.extend(strides);
        d.launch(&kernel, &config, &args)?;
        Ok(d.download(&cb)?.iter().map(|v| v.to_f32()).collect())
    } else {
        let (ab, bb, cb) = (d.upload(a)?, d.upload(b)?, d.zeros::<f32>(m * n)?);
        let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
        args.extend(strides);
        d.launch(&kernel, &config, &args)?;
        d.download(&cb)
    }
}

/// A matmul configuration of the tests: element type, blocks, leaky ReLU.
type MatmulCase = (ScalarType, (u32, u32, u32), bool);

/// Matmul shapes `(m, n, k)`.
type Shapes<'a> = &'a [(usize, usize, usize)];

/// The matmul kernel of `form` (`seeds::matmul` or `seeds::matmul_block_ptr`) on every
/// device, against the interpreter's plain matmul, at `sizes` (and `fast` ones too on a
/// hardware device), in each of `cases`; `seed` tells the runs apart.
fn check_matmul_form(
    what: &str,
    form: fn(&seeds::MatmulMeta) -> Result<rutile::Kernel, rutile::ir::BuildError>,
    seed: u64,
    (sizes, fast): (Shapes<'_>, Shapes<'_>),
    cases: &[MatmulCase],
) {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let mut all = sizes.to_vec();
        if is_fast(d.as_ref()) {
            all.extend(fast);
        }
        for (si, &(m, n, k)) in all.iter().enumerate() {
            let mut rng = Rng::new(seed + si as u64);
            let (a, b) = (rng.f32s(m * k, -1.0, 1.0), rng.f32s(k * n, -1.0, 1.0));
            for &(input, (bm, bn, bk), leaky) in cases {
                let meta = seeds::MatmulMeta {
                    input,
                    output: input,
                    activation: leaky.then_some(seeds::Activation::LeakyRelu),
                    ..seeds::MatmulMeta::fp16(bm, bn, bk)
                };
                let want = matmul_on(&cpu, &meta, (&a, &b), (m, n, k)).unwrap();
                let got = matmul_kernel_on(d.as_ref(), form(&meta).unwrap(), &meta, (&a, &b), (m, n, k))
                    .unwrap_or_else(|e| panic!("{}: {what} {m}x{n}x{k} {input}: {e}", d.id()));
                // The same sums in the same order; a device may round an f32 fma as a multiply
                // and an add (Vulkan) or flush subnormals, and an f16 result may then round to
                // its neighbour: within an f16 ulp of the sums' magnitude.
                let scale = (k as f64).sqrt() / 3.0;
                let want: Vec<f64> = want.iter().map(|&w| w as f64).collect();
                let (worst, _) = max_relative_error(got.iter().map(|&g| g as f64), &want, scale);
                assert!(
                    worst <= 1e-3,
                    "{}: {what} {m}x{n}x{k} {input} blocks {bm}x{bn}x{bk}: relative error {worst:.2e}",
                    d.id()
                );
            }
        }
    }
}

#[test]
fn gpu_matmul_matches_the_interpreter() {
    check_matmul_form(
        "matmul",
        seeds::matmul,
        500,
        (
            &[(16, 16, 16), (37, 50, 19), (64, 64, 64), (100, 70, 130)],
            &[(512, 512, 512), (1000, 300, 77)],
        ),
        &[
            (ScalarType::F16, (64, 64, 32), false),
            (ScalarType::F16, (32, 64, 16), true),
            (ScalarType::F32, (32, 32, 16), true),
        ],
    );
}

/// The matmul written with block pointers (`seeds::matmul_block_ptr`, the edges masked on
/// both dimensions) on every device, against the interpreter's plain matmul, at ragged
/// shapes (K shorter than a block too), f16 and f32, with and without leaky ReLU.
#[test]
fn gpu_block_pointer_matmul_matches_the_interpreter() {
    check_matmul_form(
        "block-pointer matmul",
        seeds::matmul_block_ptr,
        520,
        (&[(37, 50, 19), (100, 70, 130)], &[(1000, 300, 77), (512, 512, 512)]),
        &[
            (ScalarType::F16, (64, 64, 32), false),
            (ScalarType::F32, (32, 32, 16), true),
        ],
    );
}

/// The transpose seed of `x` (`m x n`, row-major) in `tiles` with `num_warps`, into an
/// `n x m` output poisoned with `poison` first.
fn transpose_on<T: rutile::Element>(
    d: &dyn Device,
    x: &[T],
    (m, n): (usize, usize),
    (block_m, block_n): (u32, u32),
    num_warps: u32,
    poison: T,
) -> rutile::Result<Vec<T>> {
    let kernel = seeds::transpose(T::TYPE, block_m, block_n)?;
    let (xb, out) = (d.upload(x)?, d.upload(&vec![poison; m * n])?);
    let config = LaunchConfig::new(seeds::transpose_grid(m as u32, n as u32, block_m, block_n)).num_warps(num_warps);
    let (mi, ni) = (m as i32, n as i32);
    d.launch(
        &kernel,
        &config,
        &[(&xb).into(), (&out).into(), mi.into(), ni.into(), ni.into(), mi.into()],
    )?;
    d.download(&out)
}

/// The tiled transpose (its load contiguous along one axis of the tile, its store along the
/// other), f32 and f16, at ragged shapes (partial tiles on both axes) and square ones, in
/// square and oblong tiles at several `num_warps`: exactly the CPU's transpose, every
/// element of the NaN-poisoned output written.
#[test]
fn gpu_transpose_matches_the_reference() {
    use half::f16;
    use rutile_examples::check::{first_difference, transpose_reference};
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        let mut shapes = vec![(1usize, 1usize), (3, 70), (100, 77), (256, 256), (1000, 777)];
        if is_fast(d) {
            shapes.extend([(2048, 2048), (4097, 3001)]);
        }
        for (i, &(m, n)) in shapes.iter().enumerate() {
            let mut rng = Rng::new(0x7_2A5E + i as u64);
            let x = rng.f32s(m * n, -100.0, 100.0);
            let h = rng.f16s(m * n, -2.0, 2.0);
            let (want, want_h) = (transpose_reference(&x, m, n), transpose_reference(&h, m, n));
            for (tiles, warps) in [
                ((64, 64), 4),
                ((64, 64), 8),
                ((32, 32), 4),
                ((32, 64), 2),
                ((128, 16), 4),
            ] {
                let what = |t: &str| format!("{}: transpose {t} {m}x{n}, tiles {tiles:?}, num_warps {warps}", d.id());
                let got = transpose_on(d, &x, (m, n), tiles, warps, f32::NAN)
                    .unwrap_or_else(|e| panic!("{}: {e}", what("f32")));
                if let Some((r, c)) = first_difference(&got, &want, m) {
                    panic!(
                        "{}: out[{r}, {c}] = {} where x[{c}, {r}] = {}",
                        what("f32"),
                        got[r * m + c],
                        want[r * m + c]
                    );
                }
                let got = transpose_on(d, &h, (m, n), tiles, warps, f16::NAN)
                    .unwrap_or_else(|e| panic!("{}: {e}", what("f16")));
                if let Some((r, c)) = first_difference(&got, &want_h, m) {
                    panic!(
                        "{}: out[{r}, {c}] = {} where x[{c}, {r}] = {}",
                        what("f16"),
                        got[r * m + c],
                        want_h[r * m + c]
                    );
                }
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

/// The persistent softmax's occupancy inputs: the compiled kernel's registers where the
/// driver reports them (CUDA always; Vulkan through NVIDIA's driver, from its pipeline
/// statistics), and then the tutorial's formula for the grid; through CUDA the driver's
/// count of resident programs, which is at most the formula's.
#[test]
fn gpu_register_counts_and_the_persistent_grid() {
    let (_turn, devices) = devices();
    for d in devices {
        let p = d.properties();
        let kernel = seeds::softmax_persistent(1024).unwrap();
        let config = LaunchConfig::grid1(1).num_warps(4);
        let (x, y) = (d.zeros::<f32>(1024).unwrap(), d.zeros::<f32>(1024).unwrap());
        let args = [
            (&y).into(),
            (&x).into(),
            1024.into(),
            1024.into(),
            1.into(),
            1024.into(),
        ];
        let compiled = d.compile_for(&kernel, &config, &args).unwrap();
        let m = &compiled.metadata;
        println!("{}: {} threads, registers {:?}", d.id(), m.threads, m.registers);
        let reports = p.backend == rutile::Backend::Cuda || (p.multiprocessors.is_some() && p.vendor == "NVIDIA");
        if !reports {
            continue;
        }
        let regs = m
            .registers
            .unwrap_or_else(|| panic!("{}: no register count for the softmax", d.id()));
        assert!((1..=255).contains(&regs), "{}: {regs} registers", d.id());
        // The tutorial's formula, with the registers in their allocation unit and the
        // threads a multiprocessor holds as a second bound (`occupancy::programs_per_multiprocessor`).
        let per_sm = p.registers_per_multiprocessor.unwrap();
        let allocated = regs.next_multiple_of(rutile::occupancy::REGISTER_ALLOCATION_UNIT);
        let mut occupancy = per_sm / (allocated * m.threads);
        if let Some(by_threads) = p.max_threads_per_multiprocessor.map(|t| t / m.threads) {
            occupancy = occupancy.min(by_threads);
        }
        if let Some(by_shared) = p
            .shared_memory_per_multiprocessor
            .and_then(|s| s.checked_div(m.shared_bytes))
        {
            occupancy = occupancy.min(by_shared);
        }
        // Through CUDA the driver's count (`cuOccupancyMaxActiveBlocksPerMultiprocessor`)
        // decides: the formula, less the shared memory the driver reserves, so never more
        // than it.
        if p.backend == rutile::Backend::Cuda {
            let driver = m
                .resident_programs
                .unwrap_or_else(|| panic!("{}: the driver gave no resident programs", d.id()));
            assert!(
                (1..=occupancy).contains(&driver),
                "{}: the driver holds {driver} programs a multiprocessor, the formula {occupancy}",
                d.id()
            );
            occupancy = driver;
        }
        let resident = rutile::occupancy::persistent_programs(p, m).unwrap();
        assert_eq!(resident, (p.multiprocessors.unwrap() * occupancy).max(1), "{}", d.id());
        // A grid over rows walks them in as few rounds as the resident programs do.
        for rows in [1u32, resident, resident + 1, 1 << 20] {
            let grid = rutile::occupancy::persistent_grid(p, m, rows);
            assert!(
                grid <= resident.min(rows),
                "{}: {grid} programs for {rows} rows",
                d.id()
            );
            assert_eq!(rows.div_ceil(grid), rows.div_ceil(resident), "{}: {rows} rows", d.id());
        }
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

/// `out[i] = i * sum(s_j)` for a kernel with `scalars` i32 parameters `s_j`.
fn scalar_sum_on(d: &dyn Device, values: &[i32]) -> rutile::Result<Vec<i32>> {
    let kernel = rutile::Kernel::build("scalar_sum", |k| {
        let out = k.arg_ptr("out", ScalarType::I32);
        let mut sum = k.arg_i32("s0");
        for j in 1..values.len() {
            sum = sum + k.arg_i32(&format!("s{j}"));
        }
        let i = k.arange(0, 128);
        k.store(out + i, i * sum);
    })?;
    let out = d.zeros::<i32>(128)?;
    let mut args: Vec<rutile::Arg<'_>> = vec![(&out).into()];
    args.extend(values.iter().map(|&v| rutile::Arg::I32(v)));
    d.launch(&kernel, &LaunchConfig::grid1(1), &args)?;
    d.download(&out)
}

/// The buffers a kernel only reads reach a Vulkan driver declared read-only by default
/// (`WgpuOptions::read_only`: `NonWritable` in SPIR-V words the driver takes as they are);
/// without the declaration the kernels go to wgpu as naga modules. Both ways the softmax
/// forms compute what the interpreter does, on ragged rows.
#[test]
fn gpu_softmax_with_and_without_read_only_buffers() {
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    let vulkan: Vec<usize> = devices
        .iter()
        .filter_map(|d| d.id().strip_prefix("vulkan:").map(|i| i.parse::<usize>().unwrap()))
        .collect();
    let mut rng = Rng::new(0x0EAD);
    for i in vulkan {
        for read_only in [true, false] {
            let options = rutile::WgpuOptions {
                read_only: if read_only {
                    rutile::ReadOnlyBuffers::All
                } else {
                    rutile::ReadOnlyBuffers::None
                },
                ..rutile::WgpuOptions::from_env().unwrap()
            };
            let d = rutile::WgpuGpu::open_with(Some(i), options).unwrap();
            for (rows, cols) in [(17usize, 781usize), (5, 1025)] {
                let x = rng.f32s(rows * cols, -3.0, 3.0);
                for form in [Form::Simple, Form::Streaming, Form::Persistent, Form::Rows(2)] {
                    let want: Vec<f64> = softmax_on(&cpu, &x, rows, cols, form)
                        .unwrap()
                        .into_iter()
                        .map(f64::from)
                        .collect();
                    let got = softmax_on(&d, &x, rows, cols, form).unwrap();
                    let (worst, _) = max_relative_error(got.iter().map(|&g| g as f64), &want, 1e-30);
                    assert!(
                        worst < 2e-5,
                        "vulkan:{i}, read-only {read_only}: softmax {form:?} {rows}x{cols}: relative error {worst:.2e}"
                    );
                }
            }
        }
    }
}

/// Scalar arguments reach the kernel whichever way the device passes them: on Vulkan in a
/// uniform buffer by default, and with `WgpuOptions::immediates` in immediates where they
/// fit (more than the device's immediates hold still go in a uniform buffer).
#[test]
fn gpu_scalar_arguments_in_immediates_and_uniform_buffers() {
    let cpu = CpuDevice::new();
    let (_turn, mut devices) = devices();
    let with_immediates: Vec<Arc<dyn Device>> = devices
        .iter()
        .filter_map(|d| d.id().strip_prefix("vulkan:").map(|i| i.parse::<usize>().unwrap()))
        .map(|i| {
            let options = rutile::WgpuOptions {
                immediates: true,
                ..rutile::WgpuOptions::from_env().unwrap()
            };
            Arc::new(rutile::WgpuGpu::open_with(Some(i), options).unwrap()) as Arc<dyn Device>
        })
        .collect();
    devices.extend(with_immediates);
    let mut rng = Rng::new(0x5CA1A);
    for d in devices {
        // 32 bytes of launch information + 4 bytes each: 2 fit any device's immediates,
        // 60 (272 bytes) fit none that wgpu reports (128 or 256 on Vulkan).
        for count in [2usize, 60] {
            let values: Vec<i32> = (0..count).map(|_| rng.below(2000) as i32 - 1000).collect();
            let got = scalar_sum_on(d.as_ref(), &values).unwrap_or_else(|e| panic!("{}: {count} scalars: {e}", d.id()));
            assert_eq!(
                got,
                scalar_sum_on(&cpu, &values).unwrap(),
                "{}: {count} scalars",
                d.id()
            );
        }
    }
}

/// Every configuration the softmax autotuner may choose (`num_warps` 1..16, plain and
/// read-once loads, the row in one to four pieces) computes the softmax at a ragged width,
/// and the configuration the autotuner picks is one of them and is launched as it was
/// timed.
#[test]
fn gpu_autotuned_softmax_matches_the_interpreter() {
    use rutile::autotune::Autotuner;
    use rutile_examples::tutorials::{softmax_args, softmax_configs, tuned_softmax};
    let cpu = CpuDevice::new();
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        let (rows, cols) = if is_fast(d) { (4096, 1152) } else { (37, 1152) };
        let x = Rng::new(91).f32s(rows * cols, -3.0, 3.0);
        let want: Vec<f64> = softmax_on(&cpu, &x, rows, cols, Form::Simple)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let (xb, yb) = (d.upload(&x).unwrap(), d.zeros::<f32>(rows * cols).unwrap());
        let args = softmax_args(&yb, &xb, rows, cols);
        let check = |what: &str| {
            let got = d.download(&yb).unwrap();
            // NaN, left by a program that did not write, counts as an infinite error.
            let (worst, _) = max_relative_error(got.iter().map(|&g| g as f64), &want, 1e-30);
            assert!(
                worst < 2e-5,
                "{}: softmax {rows}x{cols} ({what}): relative error {worst:.2e}",
                d.id()
            );
        };
        let poison = vec![f32::NAN; rows * cols];
        for config in softmax_configs(cols) {
            let tuner = Autotuner::new("softmax", vec![config.clone()])
                .unwrap()
                .cache_file(None);
            let tuned = tuned_softmax(d, &tuner, rows, cols, &args).unwrap();
            d.upload_into(&yb, &poison).unwrap();
            d.launch(&tuned.kernel, &tuned.launch, &args).unwrap();
            check(&config.to_string());
        }
        let tuner = Autotuner::new("softmax", softmax_configs(cols))
            .unwrap()
            .cache_file(None);
        let tuned = tuned_softmax(d, &tuner, rows, cols, &args).unwrap();
        assert!(
            tuner.configs().contains(&tuned.choice.config),
            "{}",
            tuned.choice.config
        );
        d.upload_into(&yb, &poison).unwrap();
        d.launch(&tuned.kernel, &tuned.launch, &args).unwrap();
        check(&format!("chosen: {}", tuned.choice.config));
    }
}

/// An autotuned kernel that adds into its output with atomics (as a split-K matmul
/// does), tuned with the output in `reset_to_zero`: its tuned launch gives one launch's
/// sums on every device, exactly (integers), though the tuning launched it many times.
#[test]
fn gpu_autotuned_atomic_sums_start_from_zeros() {
    use rutile::autotune::{Autotuner, Config};
    let (_turn, devices) = devices();
    let (n, bins) = (100_003usize, 61usize);
    let mut rng = Rng::new(17);
    let x: Vec<i32> = (0..n).map(|_| rng.below(2001) as i32 - 1000).collect();
    let mut want = vec![0i32; bins];
    for (i, v) in x.iter().enumerate() {
        want[i % bins] = want[i % bins].wrapping_add(*v);
    }
    let kernel = |block: u32| {
        rutile::Kernel::build("binned_sums", |k| {
            let (out, xs) = (k.arg_ptr("out", ScalarType::I32), k.arg_ptr("x", ScalarType::I32));
            let n = k.arg_i32("n");
            let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
            let mask = offs.lt(n);
            let v = k.load_masked(xs + offs, mask, 0);
            k.atomic_add(out + offs % bins as i32, v, Some(mask));
        })
        .map_err(rutile::Error::from)
    };
    for d in devices {
        let d = d.as_ref();
        let (out, xs) = (d.zeros::<i32>(bins).unwrap(), d.upload(&x).unwrap());
        let args = [(&out).into(), (&xs).into(), (n as i32).into()];
        let configs = vec![
            Config::new(&[("BLOCK", 256)]).num_warps(2),
            Config::new(&[("BLOCK", 1024)]).num_warps(4),
        ];
        Autotuner::new("binned_sums", configs)
            .unwrap()
            .cache_file(None)
            .reset_to_zero(&["out"])
            .launch(
                d,
                &n.to_string(),
                &|c| kernel(c.value("BLOCK")? as u32),
                &|c| Ok([(n as u32).div_ceil(c.value("BLOCK")? as u32), 1, 1]),
                &args,
            )
            .unwrap();
        assert_eq!(d.download(&out).unwrap(), want, "{}", d.id());
        eprintln!("{}: tuned atomic sums equal one launch's", d.id());
    }
}

/// The persistent schedule (`LaunchConfig::persistent`) on every device: the device runs as
/// many programs as it holds and each walks the grid asked for, so every program id and
/// grid size a kernel reads must be the grid's (a 3-D grid of more programs than any device
/// here holds at once: each launched program walks several), and kernels with shared
/// memory and barriers (the softmax's reductions; the matmul's operand staging, on FMAs,
/// cooperative matrices or tensor cores) give exactly what the plain grid gives.
#[test]
fn gpu_persistent_schedule_walks_the_grid() {
    let (_turn, devices) = devices();
    let ids = rutile::Kernel::build("grid_ids", |k| {
        let out = k.arg_ptr("out", ScalarType::I32);
        let (x, y, z) = (k.program_id(0), k.program_id(1), k.program_id(2));
        let (gx, gy, gz) = (k.num_programs(0), k.num_programs(1), k.num_programs(2));
        let at = x + gx * (y + gy * z);
        k.store(out + at, x + y * 10_000 + z * 100_000 + (gx + gy + gz) * 1_000_000);
    })
    .unwrap();
    for d in devices {
        let grid = [if is_fast(d.as_ref()) { 4000 } else { 300 }, 3, 2];
        let n = grid.iter().product::<u32>() as usize;
        let out = d.zeros::<i32>(n).unwrap();
        let config = LaunchConfig::new(grid).num_warps(1).persistent(true);
        d.launch(&ids, &config, &[(&out).into()]).unwrap();
        let got = d.download(&out).unwrap();
        let sum = (grid[0] + grid[1] + grid[2]) as i32;
        for (i, &g) in got.iter().enumerate() {
            let (x, y, z) = (
                i % grid[0] as usize,
                i / grid[0] as usize % 3,
                i / (grid[0] as usize * 3),
            );
            let want = x as i32 + y as i32 * 10_000 + z as i32 * 100_000 + sum * 1_000_000;
            assert_eq!(g, want, "{}: program ({x}, {y}, {z}) of {grid:?}", d.id());
        }

        let (rows, cols) = if is_fast(d.as_ref()) { (3000, 781) } else { (300, 100) };
        let x = Rng::new(5).f32s(rows * cols, -2.0, 2.0);
        let block = seeds::softmax_block(cols as u32);
        let kernel = seeds::softmax(block).unwrap();
        let softmax = |persistent: bool| {
            let (xb, yb) = (d.upload(&x).unwrap(), d.zeros::<f32>(rows * cols).unwrap());
            let config = LaunchConfig::grid1(rows as u32)
                .num_warps(seeds::softmax_num_warps(block))
                .persistent(persistent);
            d.launch(&kernel, &config, &softmax_args(&yb, &xb, rows, cols)).unwrap();
            d.download(&yb).unwrap()
        };
        assert_eq!(softmax(true), softmax(false), "{}: softmax {rows}x{cols}", d.id());

        // 16x16 blocks: more tiles than the programs a software device gets.
        let (m, n, k) = (272, 288, 40);
        let meta = seeds::MatmulMeta {
            output: ScalarType::F32,
            ..seeds::MatmulMeta::fp16(16, 16, 16)
        };
        let mut rng = Rng::new(6);
        let (a, b) = (rng.f32s(m * k, -1.0, 1.0), rng.f32s(k * n, -1.0, 1.0));
        let kernel = seeds::matmul(&meta).unwrap();
        let matmul = |persistent: bool| {
            let h = |v: &[f32]| v.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>();
            let (ab, bb, cb) = (
                d.upload(&h(&a)).unwrap(),
                d.upload(&h(&b)).unwrap(),
                d.zeros::<f32>(m * n).unwrap(),
            );
            let mut args = vec![(&ab).into(), (&bb).into(), (&cb).into()];
            args.extend(seeds::matmul_row_major_args(m, n, k).map(rutile::Arg::I32));
            let config = LaunchConfig::grid1(seeds::matmul_grid(&meta, m as u32, n as u32))
                .num_warps(4)
                .persistent(persistent);
            d.launch(&kernel, &config, &args).unwrap();
            d.download(&cb).unwrap()
        };
        assert_eq!(matmul(true), matmul(false), "{}: matmul {m}x{n}x{k}", d.id());
        println!("{}: the persistent schedule walks the grid", d.id());
    }
}
