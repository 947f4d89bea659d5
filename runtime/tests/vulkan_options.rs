//! The Vulkan runtime's on/off switches from the environment (`WgpuOptions::from_env`) take
//! `0` or `1`; any other value is an error naming the variable, as the CUDA runtime's
//! switches are, not taken silently for one way or the other. Each case runs in a child
//! process of its own, with the variable set only there.

use std::process::Command;

/// Names the part a child process plays; without it, [`child_process`] does nothing.
const CHILD_ENV: &str = "RUTILE_TEST_VULKAN_OPTIONS_CHILD";

/// Not a test of its own: reads the options in a child process whose environment sets the
/// switch named by [`CHILD_ENV`] to `off`, and checks the error.
#[test]
fn child_process() {
    let Ok(variable) = std::env::var(CHILD_ENV) else { return };
    let e = rutile::WgpuOptions::from_env()
        .err()
        .unwrap_or_else(|| panic!("{variable}=off was taken"));
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{variable}: ")) && text.contains("0 (off) or 1 (on)") && text.contains("\"off\""),
        "{text}"
    );
}

#[test]
fn switches_other_than_0_or_1_are_errors_naming_the_variable() {
    for variable in [
        "RUTILE_COOP_MATRIX",
        "RUTILE_VULKAN_IMMEDIATES",
        "RUTILE_VULKAN_PACKED_F16",
        "RUTILE_COOP_SCALE",
        "RUTILE_COOP_LOAD_FENCE",
        "RUTILE_WIDE_PRODUCTS",
    ] {
        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args(["child_process", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, variable)
            .env(variable, "off");
        let out = child.output().unwrap();
        assert!(
            out.status.success(),
            "{variable}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Unset or 0/1: options, each as asked.
    assert!(rutile::WgpuOptions::from_env().is_ok());
}
