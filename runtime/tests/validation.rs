//! The Khronos validation layer under the Vulkan devices (`RUTILE_VALIDATION=1`): with it
//! on, a Vulkan call the specification forbids is an error of the next call of rutile's
//! device layer, naming the layer's VUID, and the device keeps working; asked for and not
//! installed, opening a device is an error instead of running unvalidated.
//!
//! Each case runs in a child process of this binary, since the variable is read once,
//! when the process's wgpu instance is made. Without a wgpu adapter the cases skip, unless
//! `RUTILE_REQUIRE_TOOLS=1` (CI, with lavapipe and the layer installed),
//! `RUTILE_VALIDATION=1` (the layer is expected) or `RUTILE_REQUIRE` names `vulkan`; then
//! they fail.

use rutile::vulkan::{self, wgpu, WgpuDevice, WgpuError};
use rutile::{Backend, DeviceExt, LaunchConfig, ScalarType, WgpuGpu};

/// The marker of a child process of this test binary.
const CHILD_ENV: &str = "RUTILE_VALIDATION_TEST_CHILD";

fn is_child() -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == "1")
}

/// Whether this run expects the layer and an adapter: a missing one fails instead of
/// skipping.
fn required() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
    set("RUTILE_REQUIRE_TOOLS")
        || set(vulkan::VALIDATION_ENV)
        || rutile::device::required_backends()
            .unwrap_or_else(|e| panic!("{e}"))
            .contains(&Backend::Vulkan)
}

/// Runs test `name` of this binary in a child process with `env` set; its output, and
/// whether it passed.
fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A misuse the layer reports and every driver tolerates: a push-constant range of size 0
/// in a pipeline layout (`VUID-VkPushConstantRange-size-00296`), made through the raw
/// Vulkan device under `device`, as rutile's own raw calls are.
fn misuse(device: &WgpuDevice) {
    use ash::vk;
    // SAFETY: the raw device is used while `device` is borrowed, for one object made and
    // destroyed here.
    let hal = unsafe { device.raw().as_hal::<wgpu::hal::api::Vulkan>() }.expect("a Vulkan device");
    let raw = hal.raw_device();
    let ranges = [vk::PushConstantRange::default()
        .stage_flags(vk::ShaderStageFlags::COMPUTE)
        .offset(0)
        .size(0)];
    // SAFETY: a live device; the layout is destroyed right away and never used.
    unsafe {
        let layout = raw
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&ranges),
                None,
            )
            .expect("creating the pipeline layout");
        raw.destroy_pipeline_layout(layout, None);
    }
}

/// `x + x` for 1000 elements on `gpu`, checked.
fn vector_add_works(gpu: &WgpuGpu) -> rutile::Result<()> {
    let kernel = rutile::seeds::vector_add(ScalarType::F32, 256)?;
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let (xs, out) = (gpu.upload(&x)?, gpu.zeros::<f32>(1000)?);
    let args = [(&xs).into(), (&xs).into(), (&out).into(), 1000i32.into()];
    gpu.launch(&kernel, &LaunchConfig::grid1(4), &args)?;
    let sum = gpu.download(&out)?;
    assert!(sum.iter().zip(&x).all(|(&s, &x)| s == 2.0 * x), "wrong sums");
    Ok(())
}

#[test]
fn the_layer_turns_misuse_into_errors() {
    if vulkan::adapters().is_empty() {
        assert!(
            !required(),
            "no wgpu adapter (lavapipe missing? install mesa-vulkan-drivers)"
        );
        eprintln!("skipped: no wgpu adapter to validate");
        return;
    }
    let (passed, out) = child("misuse_child", &[(vulkan::VALIDATION_ENV, "1")]);
    if !passed && out.contains("is not installed") && !required() {
        eprintln!("skipped: the validation layer is not installed:\n{out}");
        return;
    }
    assert!(passed, "child failed:\n{out}");
    assert!(out.contains("child done"), "{out}");
}

/// The child of `the_layer_turns_misuse_into_errors`, with `RUTILE_VALIDATION=1`.
#[test]
fn misuse_child() {
    if !is_child() {
        return;
    }
    let report = vulkan::validation_report();
    assert!(report.requested, "{report:?}");
    let layer = report.layer.unwrap_or_else(|why| panic!("the layer is not on: {why}"));
    println!("validation layer: {layer}");
    for adapter in vulkan::adapters() {
        let gpu = WgpuGpu::open(Some(adapter.index)).unwrap_or_else(|e| panic!("{}: {e}", adapter.name));
        // Rutile's own work is valid.
        vector_add_works(&gpu).unwrap_or_else(|e| panic!("{}: {e}", adapter.name));
        misuse(gpu.wgpu());
        let e = gpu.wgpu().synchronize().unwrap_err();
        assert!(
            matches!(e, WgpuError::ValidationLayer { .. }),
            "{}: {e:?}",
            adapter.name
        );
        let text = e.to_string();
        assert!(
            text.starts_with("the Vulkan validation layer reported an error: "),
            "{}: {text}",
            adapter.name
        );
        assert!(
            text.contains("VUID-VkPushConstantRange-size-00296"),
            "{}: {text}",
            adapter.name
        );
        // Reported once; the device keeps working.
        gpu.wgpu()
            .synchronize()
            .unwrap_or_else(|e| panic!("{}: {e}", adapter.name));
        vector_add_works(&gpu).unwrap_or_else(|e| panic!("{}: {e}", adapter.name));
        println!("{}: {text}", adapter.name);
    }
    let report = vulkan::validation_report();
    assert_eq!(report.errors, vulkan::adapters().len() as u64, "{report:?}");
    println!("child done");
}

#[test]
fn a_missing_layer_is_an_error() {
    if vulkan::adapters().is_empty() {
        assert!(
            !required(),
            "no wgpu adapter (lavapipe missing? install mesa-vulkan-drivers)"
        );
        eprintln!("skipped: no wgpu adapter");
        return;
    }
    // The loader looks for explicit layers in VK_LAYER_PATH instead of the system's folders.
    let (passed, out) = child(
        "missing_layer_child",
        &[(vulkan::VALIDATION_ENV, "1"), ("VK_LAYER_PATH", "/nonexistent")],
    );
    assert!(passed, "child failed:\n{out}");
    assert!(out.contains("child done"), "{out}");
}

/// The child of `a_missing_layer_is_an_error`: asked for, the layer is not found.
#[test]
fn missing_layer_child() {
    if !is_child() {
        return;
    }
    let e = WgpuDevice::open(None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "RUTILE_VALIDATION=1 asks for the Khronos validation layer, but the Khronos validation layer \
         (VK_LAYER_KHRONOS_validation) is not installed (Debian and Ubuntu: the vulkan-validationlayers package)"
    );
    let e = rutile::open_device("vulkan").err().unwrap();
    assert!(e.to_string().contains("RUTILE_VALIDATION=1 asks for"), "{e}");
    assert!(vulkan::validation_report().layer.is_err());
    println!("child done");
}
