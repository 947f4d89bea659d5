//! The op conformance matrix (see `rutile_examples::conformance`): every op on every element
//! type it accepts, on the interpreter and on every GPU present (each CUDA GPU and each wgpu
//! adapter, lavapipe included), compared with the interpreter. Fails if any case fails on any
//! device; unsupported combinations and known mismatches are reported, not failures.
//!
//! Run with `--nocapture` to see the matrix. Without any GPU the interpreter alone runs,
//! unless `RUTILE_REQUIRE_TOOLS=1` (CI, with lavapipe) or `RUTILE_REQUIRE_GPU=1`, then the
//! test fails.

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
