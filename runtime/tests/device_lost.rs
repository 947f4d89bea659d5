//! A lost device, and opening it again in the same process.
//!
//! On CUDA, a kernel that reads far outside its buffer (reachable only with bounds checking
//! off: a masked load whose mask the launch checks cannot bound) faults on the device. The
//! fault is `Error::DeviceLost`; every later operation on that device, its buffers and its
//! compiled kernels fails the same way at once; and `CudaGpu::open` gives a working device
//! again (the lost primary context is reset). With bounds checking on, the same launch is
//! an `Error::BoundsCheck` and never reaches the device.
//!
//! On wgpu, a kernel's out-of-bounds access does not fault (wgpu enables the driver's
//! robust buffer access where it has it), so the loss is simulated by destroying a device
//! of its own; a new device of the same adapter then opens and works.
//!
//! This binary holds these tests alone: a fault loses the CUDA context of every handle of
//! the process on that GPU. Without a CUDA device (or a wgpu adapter) the case skips,
//! unless `RUTILE_REQUIRE` names `cuda` (or `vulkan`, or `RUTILE_REQUIRE_TOOLS=1` for
//! lavapipe); then it fails.

use rutile::{Arg, Backend, CudaGpu, Device, DeviceExt, Error, Kernel, LaunchConfig, ScalarType, WgpuGpu};
use std::fmt::Display;

/// `x + x` for 1000 elements on `d`, checked.
fn vector_add_works(d: &dyn Device) {
    let kernel = rutile::seeds::vector_add(ScalarType::F32, 256).unwrap();
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let (xs, out) = (d.upload(&x).unwrap(), d.upload(&[f32::NAN; 1000]).unwrap());
    let args = [(&xs).into(), (&xs).into(), (&out).into(), Arg::I32(1000)];
    d.launch(&kernel, &LaunchConfig::grid1(4), &args).unwrap();
    let sum = d.download(&out).unwrap();
    assert!(
        sum.iter().zip(&x).all(|(&s, &x)| s == 2.0 * x),
        "{}: wrong sums",
        d.id()
    );
}

/// `out[i] = x[i + shift]` for 64 elements where `i + shift < n`: with `shift` past the end
/// of `x` and `n` above it, the load reads outside `x`. The mask depends on an argument,
/// so the launch's extent check (which bounds unmasked accesses) lets it through.
fn far_load() -> Kernel {
    Kernel::build("far_load", |k| {
        let (x, out) = (k.arg_ptr("x", ScalarType::F32), k.arg_ptr("out", ScalarType::F32));
        let (shift, n) = (k.arg_i32("shift"), k.arg_i32("n"));
        let offsets = k.arange(0, 64);
        let far = offsets + shift;
        k.store(out + offsets, k.load_masked(x + far, far.lt(n), 0.0));
    })
    .unwrap()
}

#[test]
fn a_fault_loses_the_cuda_device_and_it_opens_again() {
    let opened = CudaGpu::open(0);
    rutile::device::check_required(Backend::Cuda, opened.as_ref().map(drop).map_err(|e| e as &dyn Display))
        .unwrap_or_else(|e| panic!("{e}"));
    let Ok(gpu) = opened else {
        eprintln!("skipped: no CUDA device to fault on");
        return;
    };
    if std::env::var(rutile::CHECK_BOUNDS_ENV).is_ok_and(|v| v == "1") {
        eprintln!("skipped: {}=1 keeps the fault off the device", rutile::CHECK_BOUNDS_ENV);
        return;
    }
    vector_add_works(&gpu);
    let kernel = far_load();
    let (x, out) = (gpu.upload(&[1.0f32; 64]).unwrap(), gpu.zeros::<f32>(64).unwrap());
    // 2^30 elements (4 GiB) past a 256-byte buffer: memory no allocation of the process
    // has.
    let args = [(&x).into(), (&out).into(), Arg::I32(1 << 30), Arg::I32(i32::MAX)];

    // Bounds-checked, the launch runs in the interpreter first and stops there.
    let e = gpu
        .launch(&kernel, &LaunchConfig::grid1(1).check_bounds(true), &args)
        .unwrap_err();
    assert!(matches!(e, Error::BoundsCheck { .. }), "{e:?}");
    vector_add_works(&gpu);

    // Unchecked, it reaches the device and faults there; the fault is reported by the
    // launch or by the next synchronization.
    let e = gpu
        .launch(&kernel, &LaunchConfig::grid1(1), &args)
        .and_then(|()| gpu.synchronize())
        .unwrap_err();
    println!("the fault: {e}");
    assert!(matches!(e, Error::DeviceLost { backend: "cuda", .. }), "{e:?}");
    let first = e.to_string();
    assert!(first.starts_with("the cuda device was lost ("), "{first}");
    assert!(first.contains("CUDA_ERROR_"), "{first}");
    assert!(
        first.ends_with(
            "its buffers and compiled kernels can no longer be used: open the device again (after a fault on \
             the device, the CUDA driver may refuse until the process restarts)"
        ),
        "{first}"
    );
    assert!(gpu.cuda().is_lost());

    // Every operation on the lost device fails the same way, without reaching the driver.
    let check = |what: &str, r: rutile::Result<()>| {
        let e = r.expect_err(what);
        assert!(matches!(e, Error::DeviceLost { backend: "cuda", .. }), "{what}: {e:?}");
        assert_eq!(e.to_string(), first, "{what}");
    };
    check("alloc", gpu.zeros::<f32>(10).map(drop));
    check("write", gpu.upload_into(&x, &[2.0; 64]));
    check("read", gpu.download(&x).map(drop));
    check("launch", gpu.launch(&kernel, &LaunchConfig::grid1(1), &args));
    let other = rutile::seeds::vector_add(ScalarType::F32, 128).unwrap();
    let add_args = [(&x).into(), (&x).into(), (&out).into(), Arg::I32(64)];
    check("compile", gpu.launch(&other, &LaunchConfig::grid1(1), &add_args));
    check("copy", gpu.copy(x.raw(), out.raw()));
    check("synchronize", gpu.synchronize());
    check("time", gpu.time(&mut || Ok(())).map(drop));

    // Opening the GPU again in the same process: NVIDIA documents that after such a fault
    // the process must restart, and the 580 driver on an H100 refuses the new context
    // (`cuDevicePrimaryCtxRetain` gives the same error). Either it opens and works, or the
    // open is this same kind of error, naming the call; never a panic or another error.
    match CudaGpu::open(0) {
        Ok(again) => {
            assert!(!again.cuda().is_lost());
            vector_add_works(&again);
            check("read after reopening", gpu.download(&x).map(drop));
            // Dropping the lost device's objects leaves the new one alone.
            drop((x, out, gpu));
            vector_add_works(&again);
            println!("reopened: the driver recovered in this process, and the new device works");
        }
        Err(e) => {
            assert!(matches!(e, Error::DeviceLost { backend: "cuda", .. }), "{e:?}");
            assert!(e.to_string().contains("failed with CUDA_ERROR_"), "{e}");
            println!("reopening in this process: {e}");
            // The lost device's objects still fail cleanly and drop without crashing.
            check("read after the failed reopen", gpu.download(&x).map(drop));
            drop((x, out, gpu));
        }
    }
}

#[test]
fn a_lost_wgpu_device_opens_again() {
    let adapters = rutile::vulkan::adapters();
    let why = rutile::vulkan::WgpuError::NoAdapter;
    let opened = if adapters.is_empty() {
        Err(&why as &dyn Display)
    } else {
        Ok(())
    };
    rutile::device::check_required(Backend::Vulkan, opened).unwrap_or_else(|e| panic!("{e}"));
    if adapters.is_empty() {
        assert!(
            std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "RUTILE_REQUIRE_TOOLS=1, but no wgpu adapter (lavapipe) opens"
        );
        eprintln!("skipped: no wgpu adapter to lose");
        return;
    }
    for adapter in adapters {
        let gpu = WgpuGpu::open(Some(adapter.index)).unwrap();
        vector_add_works(&gpu);
        let x = gpu.upload(&[1.0f32; 64]).unwrap();
        gpu.simulate_device_loss();
        let e = gpu.download(&x).unwrap_err();
        assert!(matches!(e, Error::DeviceLost { backend: "wgpu", .. }), "{e:?}");
        let again = WgpuGpu::open(Some(adapter.index))
            .unwrap_or_else(|e| panic!("{}: opening it again after the loss: {e}", adapter.name));
        vector_add_works(&again);
        drop((x, gpu));
        vector_add_works(&again);
    }
}
