//! `device_assert` through the runtime: the CPU device and the bounds-checked mode run it
//! (an error naming the message), GPU code leaves it out (the launch runs). On every device
//! present, lavapipe included.

use rutile::{CpuDevice, Device, DeviceExt, Kernel, LaunchConfig, ScalarType};

fn kernel() -> Kernel {
    Kernel::build("checked_copy", |k| {
        let (x, out) = (k.arg_ptr("x", ScalarType::F32), k.arg_ptr("out", ScalarType::F32));
        let n = k.arg_i32("n");
        let i = k.program_id(0) * 128 + k.arange(0, 128);
        let mask = i.lt(n);
        let v = k.load_masked(x + i, mask, 0.0f32);
        k.device_assert(v.ge(0.0f32), "x must not be negative");
        k.device_print("x", &[v]);
        k.store_masked(out + i, v, mask);
    })
    .unwrap()
}

fn launch(d: &dyn Device, x: &[f32], checked: bool) -> rutile::Result<Vec<f32>> {
    let (xb, ob) = (d.upload(x)?, d.zeros::<f32>(x.len())?);
    let config = LaunchConfig::grid1((x.len() as u32).div_ceil(128)).check_bounds(checked);
    d.launch(
        &kernel(),
        &config,
        &[(&xb).into(), (&ob).into(), (x.len() as i32).into()],
    )?;
    d.download(&ob)
}

#[test]
fn device_assert_fails_in_the_interpreter_and_is_compiled_out_on_gpus() {
    let mut x: Vec<f32> = (0..300).map(|i| i as f32 * 0.5 + 0.25).collect();
    let cpu = CpuDevice::new();
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    let mut devices: Vec<&dyn Device> = vec![&cpu];
    devices.extend(gpus.iter().map(|d| d.as_ref()));
    let (ok, printed) = rutile::ir::interp::capture_prints(|| launch(&cpu, &x, false));
    assert_eq!(ok.unwrap(), x);
    assert!(printed.contains("pid (2, 0, 0) idx (43) x: 149.75"), "{printed}");
    x[170] = -1.0;
    for d in devices {
        // The interpreter's lines before the fault are printed (the device never runs).
        let (err, printed) = rutile::ir::interp::capture_prints(|| launch(d, &x, true));
        let err = err.unwrap_err().to_string();
        assert!(
            printed.contains("pid (0, 0, 0) idx (0) x: 0.25"),
            "{}: {printed}",
            d.id()
        );
        assert!(
            err.contains("device_assert failed at element (42): x must not be negative")
                && err.contains("program (1, 0, 0)"),
            "{}: {err}",
            d.id()
        );
        if d.id() != "cpu" {
            // Compiled out: the GPU copies the negative element too.
            assert_eq!(launch(d, &x, false).unwrap(), x, "{}", d.id());
        }
    }
}

/// A kernel printing an f32, an i32 and a boolean, and the same converted to `extra`
/// types, some elements masked off; and a line per program.
fn printing_kernel(extra: &[ScalarType]) -> Kernel {
    Kernel::build("printing", |k| {
        let x = k.arg_ptr("x", ScalarType::F32);
        let n = k.arg_i32("n");
        let i = k.program_id(0) * 16 + k.arange(0, 16);
        let mask = i.lt(n);
        let v = k.load_masked(x + i, mask, 0.0f32);
        k.device_print("v", &[v, i, mask]);
        let wide: Vec<_> = extra
            .iter()
            .map(|&t| if t.is_float() { v.to(t) } else { (i - 20).to(t) })
            .collect();
        if !wide.is_empty() {
            k.device_print("wide", &wide);
        }
        k.device_print("block", &[]);
    })
    .unwrap()
}

/// `device_print` through Vulkan (a print buffer the runtime reads back) prints the
/// interpreter's lines, line for line (in the device's order: compared sorted), for values
/// of every type the device has (8- to 64-bit integers, f16, f64). Every Vulkan device
/// present, lavapipe included; CUDA's `vprintf` writes to the process's stdout, which a
/// test cannot capture, and its floats read `%.9g`.
#[test]
fn device_print_through_vulkan_prints_the_interpreters_lines() {
    let x: Vec<f32> = (0..40).map(|i| i as f32 * 0.75 - 3.0).collect();
    let n = 37;
    let run_checked = |d: &dyn Device, kernel: &Kernel, checked: bool| {
        rutile::ir::interp::capture_prints(|| -> rutile::Result<()> {
            let xb = d.upload(&x)?;
            let config = LaunchConfig::grid1(3).check_bounds(checked);
            d.launch(kernel, &config, &[(&xb).into(), n.into()])?;
            d.synchronize()
        })
    };
    let run = |d: &dyn Device, kernel: &Kernel| run_checked(d, kernel, false);
    let sorted = |text: &str| {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    let cpu = CpuDevice::new();
    let (ok, want) = run(&cpu, &printing_kernel(&[]));
    ok.unwrap();
    assert_eq!(want.lines().count(), 3 * 16 + 3, "{want}");
    assert!(want.contains("pid (2, 0, 0) idx (4) v: 24.0, 36, true"), "{want}");
    assert!(want.contains("pid (2, 0, 0) idx (5) v: 0.0, 37, false"), "{want}");
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    for d in gpus
        .iter()
        .filter(|d| d.properties().backend == rutile::Backend::Vulkan)
    {
        use ScalarType::*;
        let types = &d.properties().supported_types;
        let extra: Vec<ScalarType> = [I8, U16, I64, U64, F16, F64]
            .into_iter()
            .filter(|t| types.contains(t))
            .collect();
        let kernel = printing_kernel(&extra);
        let (ok, want) = run(&cpu, &kernel);
        ok.unwrap();
        let (ok, got) = run(d.as_ref(), &kernel);
        ok.unwrap_or_else(|e| panic!("{}: {e}", d.id()));
        assert_eq!(sorted(&got), sorted(&want), "{} printing {extra:?}", d.id());
        // Checked in the interpreter first, the launch still prints each line once.
        let (ok, got) = run_checked(d.as_ref(), &kernel, true);
        ok.unwrap_or_else(|e| panic!("{}: {e}", d.id()));
        assert_eq!(sorted(&got), sorted(&want), "{}, bounds-checked", d.id());
    }
}
