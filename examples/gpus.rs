//! The GPUs present, as the examples and the GPU test suites use them.

use rutile::{Device, DeviceListing, DeviceType};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Every device except the interpreter that opens — each CUDA GPU and each wgpu adapter,
/// lavapipe included. Devices that fail to open are reported on stderr and left out.
pub fn open_gpus() -> Vec<Arc<dyn Device>> {
    opened(rutile::list_devices())
}

/// [`open_gpus`] without software devices (lavapipe): what the benchmarks time.
pub fn hardware_gpus() -> Vec<Arc<dyn Device>> {
    open_gpus()
        .into_iter()
        .filter(|d| d.properties().device_type != DeviceType::Cpu)
        .collect()
}

fn opened(listings: Vec<DeviceListing>) -> Vec<Arc<dyn Device>> {
    listings
        .into_iter()
        .filter(|l| l.id != "cpu")
        .filter_map(|l| match l.device {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("{}: unavailable: {e}", l.id);
                None
            }
        })
        .collect()
}

/// The GPUs for a test binary: opened once (NVIDIA's driver has crashed when devices were
/// opened concurrently), with a guard that makes the tests take turns on them (a GPU test's
/// timing or memory should not depend on what another runs beside it).
///
/// Without any GPU the list is empty and the test should only use the interpreter. Every
/// test that calls this fails instead (with the same message) when
/// - `RUTILE_REQUIRE` names a backend (`cuda`, `vulkan`) that has no device that opens, or
///   is malformed (`rutile::device::check_required_devices`; GPU machines set
///   `RUTILE_REQUIRE=cuda,vulkan`),
/// - `RUTILE_REQUIRE_TOOLS=1` (CI, which installs lavapipe) and no GPU opens,
/// - `RUTILE_REQUIRE_GPU=1` and no hardware (non-CPU) device opens.
pub fn gpus_under_test() -> (MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    static TURN: Mutex<()> = Mutex::new(());
    // The devices, or why the run's requirements are not met.
    static DEVICES: OnceLock<Result<Vec<Arc<dyn Device>>, String>> = OnceLock::new();
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    match DEVICES.get_or_init(required_gpus) {
        Ok(devices) => (turn, devices.clone()),
        Err(message) => {
            drop(turn);
            panic!("{message}")
        }
    }
}

fn required_gpus() -> Result<Vec<Arc<dyn Device>>, String> {
    let listings = rutile::list_devices();
    rutile::device::check_required_devices(&listings).map_err(|e| e.to_string())?;
    let found = opened(listings);
    let require = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
    if found.is_empty() && (require("RUTILE_REQUIRE_TOOLS") || require("RUTILE_REQUIRE_GPU")) {
        return Err("no GPU device found (lavapipe missing? install mesa-vulkan-drivers)".into());
    }
    if require("RUTILE_REQUIRE_GPU") && !found.iter().any(|d| d.properties().device_type != DeviceType::Cpu) {
        return Err("RUTILE_REQUIRE_GPU=1 but only software devices were found".into());
    }
    if found.is_empty() {
        eprintln!("no GPU device: skipped");
    }
    Ok(found)
}

/// Whether `d` is hardware, which the GPU test suites give their large sizes; software
/// devices (lavapipe) get the small ones only.
pub fn is_fast(d: &dyn Device) -> bool {
    d.properties().device_type != DeviceType::Cpu
}

/// Fails with a tutorial's outcome (its error against the bound) when it did not pass, or
/// with the error when it did not run; prints it when it passed.
pub fn check_outcome(d: &dyn Device, what: &str, outcome: rutile::Result<crate::tutorials::Outcome>) {
    match outcome {
        Ok(o) => {
            println!("{o}");
            assert!(o.passed(), "{}: {what}: {o}", d.id());
        }
        Err(e) => panic!("{}: {what}: {e}", d.id()),
    }
}
