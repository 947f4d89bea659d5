//! The op conformance matrix (see `rutile_examples::conformance`): every op on every element
//! type it accepts, on the interpreter and on every GPU present (each CUDA GPU and each wgpu
//! adapter, lavapipe included), compared with the interpreter. Fails if any case fails on any
//! device; unsupported combinations and known mismatches are reported, not failures.
//!
//! Run with `--nocapture` to see the matrix. Without any GPU the interpreter alone runs,
//! unless `RUTILE_REQUIRE_TOOLS=1` (CI, with lavapipe) or `RUTILE_REQUIRE_GPU=1`, then the
//! test fails; so it does when `RUTILE_REQUIRE` names a backend without a device that opens.

use rutile::Device;
use std::sync::Arc;

fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    rutile_examples::gpus::gpus_under_test()
}

#[test]
fn op_conformance_matrix() {
    let (_turn, devices) = devices();
    let start = std::time::Instant::now();
    let matrix = rutile_examples::conformance::run_matrix(&devices);
    println!("{}", matrix.report());
    println!(
        "{} cases on {} devices in {:.1} s",
        matrix.cases.len(),
        matrix.devices.len(),
        start.elapsed().as_secs_f64()
    );
    assert_eq!(matrix.failures(), 0, "cases failed (see the report above)");
}

/// The directed-rounding ops (`add_rd`, `div_ru`, `sqrt_rz`, `fma_rn`, ...), the matrix's
/// cases of them alone: every op and direction on f32 and f64, bit for bit the
/// interpreter's on every device (through Vulkan f64's `add`, `sub` and conversions from
/// 64-bit integers; its other ops are refused there, unsupported cases).
#[test]
fn directed_rounding_on_every_device() {
    let (_turn, devices) = devices();
    let matrix = rutile_examples::conformance::run_cases(&devices, rutile_examples::conformance::rounded_cases());
    println!("{}", matrix.report());
    assert_eq!(matrix.failures(), 0, "cases failed (see the report above)");
}

/// Pointers into one buffer compare by their offsets, as Triton's pointers compare by
/// address: all six comparisons of `x + i` against `x + n` and against `x + (i + 3) / 2`
/// (a pointer advanced by an `i64` offset, so that one side's offsets are 64-bit), and a
/// mask `x + i < x + n` guarding a load and a store, across several programs at a ragged
/// `n`: on every device equal to the CPU's comparisons of the offsets.
#[test]
fn pointer_comparisons_on_every_device() {
    use rutile::{CpuDevice, DeviceExt, Kernel, LaunchConfig, ScalarType};
    const BLOCK: i32 = 128;
    let (_turn, gpus) = devices();
    let cpu: Arc<dyn Device> = Arc::new(CpuDevice::new());
    let kernel = Kernel::build("pointer_compares", |k| {
        let x = k.arg_ptr("x", ScalarType::F32);
        let flags = k.arg_ptr("flags", ScalarType::I32);
        let y = k.arg_ptr("y", ScalarType::F32);
        let n = k.arg_i32("n");
        let i = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let (p, end) = (x + i, x + n);
        let half = x + ((i + 3) / 2).to(ScalarType::I64);
        let mask = p.lt(end);
        k.store_masked(y + i, k.load_masked(p, mask, 0.0) + 1.0, mask);
        let cmps = [p.lt(end), p.le(half), p.gt(end), p.ge(half), p.eq(half), p.ne(end)];
        for (slot, c) in cmps.into_iter().enumerate() {
            k.store(flags + (i * 6 + slot as i32), k.where_(c, 1, 0));
        }
    })
    .unwrap();
    let (programs, n) = (3usize, 301usize);
    let len = programs * BLOCK as usize;
    let x: Vec<f32> = (0..len).map(|j| j as f32 * 0.5 - 7.0).collect();
    let want_flags: Vec<i32> = (0..len as i64)
        .flat_map(|j| {
            let (end, half) = (n as i64, (j + 3) / 2);
            [j < end, j <= half, j > end, j >= half, j == half, j != end].map(i32::from)
        })
        .collect();
    let want_y: Vec<f32> = (0..len).map(|j| if j < n { x[j] + 1.0 } else { -2.0 }).collect();
    for d in std::iter::once(&cpu).chain(&gpus) {
        let d = d.as_ref();
        let xb = d.upload(&x).unwrap();
        let fb = d.upload(&vec![-1i32; 6 * len]).unwrap();
        let yb = d.upload(&vec![-2.0f32; len]).unwrap();
        let args = [(&xb).into(), (&fb).into(), (&yb).into(), (n as i32).into()];
        d.launch(&kernel, &LaunchConfig::grid1(programs as u32), &args)
            .unwrap_or_else(|e| panic!("{}: {e}", d.id()));
        let (flags, y) = (d.download::<i32>(&fb).unwrap(), d.download::<f32>(&yb).unwrap());
        if let Some(j) = (0..want_flags.len()).find(|&j| flags[j] != want_flags[j]) {
            panic!(
                "{}: element {} comparison {}: {} where {}",
                d.id(),
                j / 6,
                j % 6,
                flags[j],
                want_flags[j]
            );
        }
        assert_eq!(y, want_y, "{}: the masked copy", d.id());
    }
}

/// Both halves of 32-bit products where a kernel takes both of the same operands, as
/// Philox does (`umulhi(a, b)` and `a * b`, which the backends compute as one 64-bit
/// product: `rutile_ir::thread::product_pairs`), the high half first and the low half
/// first, of `u32` and of `i32` (negative ones too), and a product whose operand changed
/// in between: on every device, equal to the interpreter and to the CPU's arithmetic.
#[test]
fn both_halves_of_products_on_every_device() {
    use rutile::{CpuDevice, DeviceExt, Kernel, LaunchConfig, ScalarType};
    const BLOCK: i32 = 256;
    let (_turn, gpus) = devices();
    let cpu: Arc<dyn Device> = Arc::new(CpuDevice::new());
    for elem in [ScalarType::U32, ScalarType::I32] {
        let kernel = Kernel::build("products", |k| {
            let a = k.arg_ptr("a", elem);
            let b = k.arg_ptr("b", elem);
            let out = k.arg_ptr("out", elem);
            let n = k.arg_i32("n");
            let i = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
            let mask = i.lt(n);
            let (x, y) = (k.load_masked(a + i, mask, 0), k.load_masked(b + i, mask, 0));
            // High half first, then low; low first, then high; then an operand changed
            // between the two.
            let hi = k.umulhi(x, y);
            let lo = x * y;
            let x1 = x + 1;
            let lo1 = x1 * y;
            let hi1 = k.umulhi(x1, y);
            let hi2 = k.umulhi(x, y);
            let x2 = x ^ hi2;
            let lo2 = x2 * y;
            for (slot, v) in [hi, lo, lo1, hi1, lo2].into_iter().enumerate() {
                k.store_masked(out + (i * 5 + slot as i32), v, mask);
            }
        })
        .unwrap();
        let n = 1000usize;
        let mut rng = rutile::ir::testing::Rng::new(elem.size_bytes() as u64);
        let (a, b): (Vec<u32>, Vec<u32>) = (0..n)
            .map(|_| (rng.next_u64() as u32, (rng.next_u64() >> 32) as u32))
            .unzip();
        let want: Vec<u32> = a
            .iter()
            .zip(&b)
            .flat_map(|(&x, &y)| {
                let hi = |x: u32, y: u32| ((x as u64 * y as u64) >> 32) as u32;
                let x1 = x.wrapping_add(1);
                let x2 = x ^ hi(x, y);
                [
                    hi(x, y),
                    x.wrapping_mul(y),
                    x1.wrapping_mul(y),
                    hi(x1, y),
                    x2.wrapping_mul(y),
                ]
            })
            .collect();
        for d in std::iter::once(&cpu).chain(&gpus) {
            let d = d.as_ref();
            let config = LaunchConfig::grid1((n as u32).div_ceil(BLOCK as u32));
            let got: Vec<u32> = if elem == ScalarType::U32 {
                let (ab, bb, ob) = (
                    d.upload(&a).unwrap(),
                    d.upload(&b).unwrap(),
                    d.zeros::<u32>(5 * n).unwrap(),
                );
                d.launch(
                    &kernel,
                    &config,
                    &[(&ab).into(), (&bb).into(), (&ob).into(), (n as i32).into()],
                )
                .unwrap();
                d.download(&ob).unwrap()
            } else {
                let signed = |v: &[u32]| v.iter().map(|&x| x as i32).collect::<Vec<i32>>();
                let (ab, bb) = (d.upload(&signed(&a)).unwrap(), d.upload(&signed(&b)).unwrap());
                let ob = d.zeros::<i32>(5 * n).unwrap();
                d.launch(
                    &kernel,
                    &config,
                    &[(&ab).into(), (&bb).into(), (&ob).into(), (n as i32).into()],
                )
                .unwrap();
                d.download(&ob).unwrap().into_iter().map(|x| x as u32).collect()
            };
            if let Some(j) = (0..want.len()).find(|&j| got[j] != want[j]) {
                panic!(
                    "{} {elem}: element {} output {}: {:#x} where {:#x}",
                    d.id(),
                    j / 5,
                    j % 5,
                    got[j],
                    want[j]
                );
            }
            println!("{} {elem}: both halves of {n} products right", d.id());
        }
    }
}

// The classification of results seen on an H100 through NVIDIA's Vulkan driver, which the
// Vulkan specification allows (see `vulkan_allowances` in the conformance module), and of
// clearly wrong results, which must still fail.
mod vulkan_allowances {
    use rutile::{Backend, ScalarType};
    use rutile_examples::conformance::{classify_element, Outcome};
    use ScalarType::{F16, F32};

    /// Classifies on `backend`, checking that the interpreter's reference is `want`.
    fn classify(backend: Backend, op: &str, t: ScalarType, inputs: &[f64], want: f64, got: f64) -> Outcome {
        let (reference, outcome) = classify_element(backend, op, t, inputs, got);
        assert!(
            reference.to_bits() == want.to_bits() || (reference.is_nan() && want.is_nan()),
            "{op} {}: reference {reference:e}, expected {want:e}",
            t.name()
        );
        outcome
    }

    fn vulkan(op: &str, t: ScalarType, inputs: &[f64], want: f64, got: f64) -> Outcome {
        classify(Backend::Vulkan, op, t, inputs, want, got)
    }

    fn assert_pass(o: Outcome) {
        assert!(matches!(o, Outcome::Pass), "expected pass, got {o:?}");
    }

    fn assert_known(o: Outcome, reason: &str) {
        assert!(
            matches!(&o, Outcome::Known(m) if m.contains(reason)),
            "expected KNOWN ({reason}), got {o:?}"
        );
    }

    fn assert_fail(o: Outcome) {
        assert!(matches!(o, Outcome::Fail(_)), "expected FAIL, got {o:?}");
    }

    // vulkan:0 sin f16 [1000/256]: element 34: input (-2.33984375e0) expected -7.1875e-1,
    // got -7.177734375e-1: within the half-precision bound 2^-7.
    #[test]
    fn sin_f16_within_half_precision_bound() {
        assert_pass(vulkan("sin", F16, &[-2.33984375], -0.71875, -0.7177734375));
        assert_fail(vulkan("sin", F16, &[-2.33984375], -0.71875, -0.71875 + 0.05));
        assert_fail(classify(
            Backend::Cuda,
            "sin",
            F16,
            &[-2.33984375],
            -0.71875,
            -0.7177734375,
        ));
    }

    // vulkan:0 cos f16 [1000/256]: element 16: input (1.6298828125e0) expected
    // -5.9051513671875e-2, got -5.9783935546875e-2.
    #[test]
    fn cos_f16_within_half_precision_bound() {
        assert_pass(vulkan(
            "cos",
            F16,
            &[1.6298828125],
            -5.9051513671875e-2,
            -5.9783935546875e-2,
        ));
        assert_fail(vulkan(
            "cos",
            F16,
            &[1.6298828125],
            -5.9051513671875e-2,
            -5.9051513671875e-2 - 0.05,
        ));
        // f32 keeps the single-precision bound 2^-11.
        let (r, _) = classify_element(Backend::Vulkan, "sin", F32, &[1.0], 0.0);
        assert_pass(classify_element(Backend::Vulkan, "sin", F32, &[1.0], r - 0.0004).1);
        assert_fail(classify_element(Backend::Vulkan, "sin", F32, &[1.0], r - 0.004).1);
    }

    // vulkan:0 div f16 [1000/256]: element 51: input (-3.5762786865234375e-7,
    // -1.9073486328125e-6) expected 1.875e-1, got inf: the divisor is below 2^-14.
    #[test]
    fn div_f16_divisor_out_of_range_is_known() {
        assert_known(
            vulkan(
                "div",
                F16,
                &[-3.5762786865234375e-7, -1.9073486328125e-6],
                0.1875,
                f64::INFINITY,
            ),
            "OpFDiv",
        );
        assert_fail(classify(
            Backend::Cuda,
            "div",
            F16,
            &[-3.5762786865234375e-7, -1.9073486328125e-6],
            0.1875,
            f64::INFINITY,
        ));
        // A divisor inside [2^-14, 2^14] keeps the 2.5 ulp bound.
        assert_fail(vulkan("div", F16, &[1.0, 3.0], 0.333251953125, 0.3));
    }

    // vulkan:0 div f32 [1000/256]: element 1: input (-1.401298464324817e-45, -0e0) expected
    // inf, got NaN: the subnormal dividend may be flushed to zero, and 0/0 is NaN.
    #[test]
    fn div_f32_subnormal_by_zero_is_accepted() {
        // Passes as flushing (the flushed reference is -0/-0 = NaN); without flushing the zero
        // divisor with a subnormal dividend is out of OpFDiv's range, KNOWN.
        assert_pass(vulkan(
            "div",
            F32,
            &[-1.401298464324817e-45, -0.0],
            f64::INFINITY,
            f64::NAN,
        ));
        assert_fail(classify(
            Backend::Cuda,
            "div",
            F32,
            &[-1.401298464324817e-45, -0.0],
            f64::INFINITY,
            f64::NAN,
        ));
        // A normal non-zero divided by zero must be the signed infinity.
        assert_fail(vulkan("div", F32, &[-1.5, -0.0], f64::INFINITY, f64::NAN));
        // Divisors above 2^126 leave the result undefined (a flushed subnormal result, 0,
        // passes as flushing).
        assert_pass(vulkan("div", F32, &[1.0, 2f64.powi(127)], 2f64.powi(-127), 0.0));
        assert_known(
            vulkan("div", F32, &[1.0, 2f64.powi(127)], 2f64.powi(-127), 0.5),
            "OpFDiv",
        );
    }

    // vulkan:0 minimum / maximum f32 [1000/256]: element 65: input (5.734253445863584e-41,
    // 1.1754942106924411e-38): both subnormal, so either operand is accepted.
    #[test]
    fn min_max_of_subnormals_accept_either_operand() {
        let (a, b) = (5.734253445863584e-41, 1.1754942106924411e-38);
        assert_pass(vulkan("minimum", F32, &[a, b], a, b));
        assert_pass(vulkan("maximum", F32, &[a, b], b, a));
        assert_fail(vulkan("minimum", F32, &[a, b], a, 1.0));
        assert_fail(vulkan("maximum", F32, &[a, b], b, 1.5e-38));
        assert_fail(classify(Backend::Cuda, "minimum", F32, &[a, b], a, b));
        // A normal operand: the order is defined.
        assert_fail(vulkan("minimum", F32, &[a, 1.0], a, 1.0));
    }

    // vulkan:0 remainder f32 [1000/256] on an H200: element 18: input (9.195011138916016e0,
    // 1.8853704327230428e-38) expected -8.313658561607883e-39, got 0e0: the subnormal
    // intermediate flushed, and the zero's sign is the later steps'.
    #[test]
    fn remainder_with_a_subnormal_result_accepts_either_zero() {
        let (x, y, want) = (9.195011138916016, 1.8853704327230428e-38, -8.313658561607883e-39);
        assert_pass(vulkan("remainder", F32, &[x, y], want, 0.0));
        assert_pass(vulkan("remainder", F32, &[x, y], want, -0.0));
        assert_fail(vulkan("remainder", F32, &[x, y], want, y));
        assert_fail(classify(Backend::Cuda, "remainder", F32, &[x, y], want, 0.0));
        // A normal result keeps its sign.
        assert_fail(vulkan("remainder", F32, &[5.0, 2.0], 1.0, -1.0));
    }
}
