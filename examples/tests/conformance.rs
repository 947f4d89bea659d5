//! The op conformance matrix (see `rutile_examples::conformance`): every op on every element
//! type it accepts, on the interpreter and on every GPU present (each CUDA GPU and each wgpu
//! adapter, lavapipe included), compared with the interpreter. Fails if any case fails on any
//! device; unsupported combinations and known mismatches are reported, not failures.
//!
//! Run with `--nocapture` to see the matrix. Without any GPU the interpreter alone runs,
//! unless `RUTILE_REQUIRE_TOOLS=1` (CI, with lavapipe) or `RUTILE_REQUIRE_GPU=1`, then the
//! test fails.

use rutile::{Device, DeviceType};
use std::sync::Arc;

/// The devices, opened once for the whole test binary; tests take turns on them (NVIDIA's
/// driver has crashed when devices were opened concurrently).
fn devices() -> (std::sync::MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static DEVICES: std::sync::OnceLock<Vec<Arc<dyn Device>>> = std::sync::OnceLock::new();
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    (turn, DEVICES.get_or_init(open_devices).clone())
}

fn open_devices() -> Vec<Arc<dyn Device>> {
    let found: Vec<Arc<dyn Device>> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id != "cpu")
        .filter_map(|l| match l.device {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("{}: unavailable: {e}", l.id);
                None
            }
        })
        .collect();
    let require = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
    if found.is_empty() && (require("RUTILE_REQUIRE_TOOLS") || require("RUTILE_REQUIRE_GPU")) {
        panic!("no GPU device found (lavapipe missing? install mesa-vulkan-drivers)");
    }
    if require("RUTILE_REQUIRE_GPU") && !found.iter().any(|d| d.properties().device_type != DeviceType::Cpu) {
        panic!("RUTILE_REQUIRE_GPU=1 but only software devices were found");
    }
    if found.is_empty() {
        eprintln!("no GPU device: the interpreter only");
    }
    found
}

#[test]
fn op_conformance_matrix() {
    let (_turn, devices) = devices();
    let start = std::time::Instant::now();
    let matrix = rutile_examples::conformance::run_matrix(&devices);
    println!("{}", matrix.report());
    println!("{} cases on {} devices in {:.1} s", matrix.cases.len(), matrix.devices.len(), start.elapsed().as_secs_f64());
    assert_eq!(matrix.failures(), 0, "cases failed (see the report above)");
}
