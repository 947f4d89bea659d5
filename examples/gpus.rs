//! The GPUs present, as the examples and the GPU test suites use them.

use rutile::{Device, DeviceType};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Every device except the interpreter that opens — each CUDA GPU and each wgpu adapter,
/// lavapipe included. Devices that fail to open are reported on stderr and left out.
pub fn open_gpus() -> Vec<Arc<dyn Device>> {
    rutile::list_devices()
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
/// Without any GPU the list is empty and the test should only use the interpreter, unless
/// `RUTILE_REQUIRE_TOOLS=1` (CI, which installs lavapipe) or `RUTILE_REQUIRE_GPU=1` (on a
/// GPU machine: a hardware device is then required), which panic instead.
pub fn gpus_under_test() -> (MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    static TURN: Mutex<()> = Mutex::new(());
    static DEVICES: OnceLock<Vec<Arc<dyn Device>>> = OnceLock::new();
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    (turn, DEVICES.get_or_init(required_gpus).clone())
}

fn required_gpus() -> Vec<Arc<dyn Device>> {
    let found = open_gpus();
    let require = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
    if found.is_empty() && (require("RUTILE_REQUIRE_TOOLS") || require("RUTILE_REQUIRE_GPU")) {
        panic!("no GPU device found (lavapipe missing? install mesa-vulkan-drivers)");
    }
    if require("RUTILE_REQUIRE_GPU") && !found.iter().any(|d| d.properties().device_type != DeviceType::Cpu) {
        panic!("RUTILE_REQUIRE_GPU=1 but only software devices were found");
    }
    if found.is_empty() {
        eprintln!("no GPU device: skipped");
    }
    found
}
