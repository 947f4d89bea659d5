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
}
