//! Bad input is an error with a message that says what is wrong, never a panic or a hang:
//! malformed kernels, launch arguments of the wrong number or type, buffers smaller than a
//! kernel's unmasked accesses need, empty or too large grids, too many threads, a register
//! limit no GPU gives, clusters a launch or device cannot have, too much shared memory, an
//! absent or lost device, an element type a device lacks; and the bounds-checked debug
//! mode, which runs a launch in the interpreter first.
//!
//! Each case runs on the interpreter and on every GPU present (each CUDA GPU and each wgpu
//! adapter, lavapipe included). Builder errors are asserted in
//! `core-ir/tests/bad_kernels.rs`. A case that needs a device this machine lacks says so on
//! stderr and passes, unless the variable that asks for such a device is set; then it
//! fails: `RUTILE_REQUIRE_TOOLS=1` for a wgpu adapter (lavapipe in CI: element types, device
//! loss, shared memory), `RUTILE_REQUIRE_GPU=1` for a GPU (shared memory), and
//! `RUTILE_REQUIRE` naming the backend a case needs (`cuda` for a device with a grid limit,
//! `vulkan` for a wgpu adapter); a backend `RUTILE_REQUIRE` names without a device that
//! opens fails every test that opens the GPUs.

use rutile::ir::Op;
use rutile::seeds;
use rutile::{
    Arg, Backend, CpuDevice, Device, DeviceExt, DeviceType, Error, Kernel, LaunchConfig, ScalarType, WgpuGpu,
};
use std::sync::{Arc, MutexGuard};

/// The interpreter and every GPU, with the guard that makes GPU tests take turns.
fn devices() -> (MutexGuard<'static, ()>, Vec<Arc<dyn Device>>) {
    let (turn, mut devices) = rutile_examples::gpus::gpus_under_test();
    devices.push(Arc::new(CpuDevice::new()));
    (turn, devices)
}

/// Fails when the case could not run but one of `vars` is `1` or `RUTILE_REQUIRE` names
/// one of `backends`; otherwise says it skipped.
fn require(tested: bool, what: &str, vars: &[&str], backends: &[Backend]) {
    if tested {
        return;
    }
    if let Some(v) = vars.iter().find(|v| std::env::var(v).is_ok_and(|x| x == "1")) {
        panic!("{v}=1, but {what}");
    }
    let required = rutile::device::required_backends().unwrap_or_else(|e| panic!("{e}"));
    if let Some(b) = backends.iter().find(|b| required.contains(b)) {
        panic!("RUTILE_REQUIRE names {b}, but {what}");
    }
    eprintln!("skipped: {what}");
}

#[track_caller]
fn assert_contains(e: &Error, d: &dyn Device, wanted: &str) {
    let text = e.to_string();
    assert!(text.contains(wanted), "{}: expected {wanted:?} in:\n{text}", d.id());
}

/// `out[i] = x[i]` for `block` elements per program, without a mask, and the line of its
/// load and store (as `file:line:`).
fn unmasked_copy(block: u32) -> (Kernel, String) {
    let line = line!() + 4;
    let kernel = Kernel::build("copy_unmasked", |k| {
        let (x, out) = (k.arg_ptr("x", ScalarType::F32), k.arg_ptr("out", ScalarType::F32));
        let offsets = k.program_id(0) * block + k.arange(0, block as i32);
        k.store(out + offsets, k.load(x + offsets));
    })
    .unwrap();
    (kernel, format!("bad_input.rs:{line}:"))
}

#[test]
fn malformed_kernels_are_errors() {
    let (_turn, devices) = devices();
    // A kernel's fields are public; one edited into something the builder never makes is
    // rejected by the verifier before any backend sees it.
    let mut kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    kernel.body.insts.swap(1, 2); // `%6 = mul %4, %5` before `%5 = constant 256`
    let mut dangling = seeds::vector_add(ScalarType::F32, 256).unwrap();
    let store = *dangling.body.insts.last().unwrap();
    if let Op::Store { value, .. } = &mut dangling.insts[store].op {
        *value = rutile::ir::Handle::from_index(9999);
    }
    for d in devices {
        let d = d.as_ref();
        let x = d.upload(&[1.0f32; 256]).unwrap();
        let args = [(&x).into(), (&x).into(), (&x).into(), 256i32.into()];
        let e = d.launch(&kernel, &LaunchConfig::grid1(1), &args).unwrap_err();
        assert!(matches!(e, Error::Build(_)), "{}: {e:?}", d.id());
        assert_contains(&e, d, "kernel `add_kernel`: 1 error");
        assert_contains(&e, d, "`mul` at ");
        assert_contains(&e, d, "vector_add.rs:12:");
        assert_contains(&e, d, "operand %5 is not defined before this use, or not in scope");
        let e = d.launch(&dangling, &LaunchConfig::grid1(1), &args).unwrap_err();
        assert_contains(&e, d, "`store` at ");
        assert_contains(&e, d, "operand %9999 is not defined before this use, or not in scope");
    }
}

/// Arguments of the wrong number or type, and a buffer of another device.
#[test]
fn launch_arguments_are_checked() {
    let (_turn, devices) = devices();
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    let grid = LaunchConfig::grid1(2);
    for d in devices {
        let d = d.as_ref();
        let x = d.upload(&[1.0f32; 300]).unwrap();
        let ints = d.upload(&[1i32; 300]).unwrap();

        let e = d.launch(&kernel, &grid, &[(&x).into(), (&x).into()]).unwrap_err();
        assert_contains(
            &e,
            d,
            "kernel `add_kernel`: expected 4 arguments (x_ptr, y_ptr, output_ptr, n_elements), got 2",
        );
        let e = d
            .launch(
                &kernel,
                &grid,
                &[(&x).into(), (&ints).into(), (&x).into(), 300i32.into()],
            )
            .unwrap_err();
        assert_contains(
            &e,
            d,
            "argument 1 (`y_ptr`): expected a buffer of f32, got a buffer of i32",
        );
        let e = d
            .launch(
                &kernel,
                &grid,
                &[(&x).into(), (&x).into(), (&x).into(), 300.0f32.into()],
            )
            .unwrap_err();
        assert_contains(&e, d, "argument 3 (`n_elements`): expected i32, got f32");
        let e = d
            .launch(
                &kernel,
                &grid,
                &[(&x).into(), (&x).into(), 300i32.into(), 300i32.into()],
            )
            .unwrap_err();
        assert_contains(&e, d, "argument 2 (`output_ptr`): expected a buffer of f32, got i32");
        // A 16-bit float scalar parameter: no argument can carry one, and the error says
        // what to declare instead.
        let scaled = Kernel::build("scale_f16", |k| {
            let (x, s) = (k.arg_ptr("x", ScalarType::F16), k.arg_scalar("s", ScalarType::F16));
            let offsets = k.arange(0, 16);
            k.store(x + offsets, k.load(x + offsets) * s);
        })
        .unwrap();
        let halves = d.upload(&[half::f16::ONE; 16]).unwrap();
        let e = d
            .launch(&scaled, &LaunchConfig::grid1(1), &[(&halves).into(), 2.0f32.into()])
            .unwrap_err();
        assert_contains(
            &e,
            d,
            "argument 1 (`s`): a f16 scalar parameter cannot be passed at launch (arguments carry \
             32- and 64-bit floats); declare it f32 and convert it in the kernel",
        );

        let other = CpuDevice::new();
        let foreign = other.upload(&[1.0f32; 300]).unwrap();
        let e = d
            .launch(
                &kernel,
                &grid,
                &[(&x).into(), (&foreign).into(), (&x).into(), 300i32.into()],
            )
            .unwrap_err();
        assert_contains(&e, d, "argument 1 (`y_ptr`): the buffer belongs to another device");
        let e = d.download(&foreign).unwrap_err();
        assert_contains(&e, d, "buffer: the buffer belongs to another device");
    }
}

/// A kernel compiled assuming an argument divisible by 16 (Triton's specialization) and
/// launched with one that is not is an error, not a launch without the masks it needs; a
/// `Launcher` compiles a second form for such arguments instead, and both are right.
#[test]
fn launches_keep_to_the_specialization_they_were_compiled_for() {
    let (_turn, devices) = devices();
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    let config = LaunchConfig::grid1(2);
    let xs: Vec<f32> = (0..512).map(|i| (i as f32 * 0.37).sin()).collect();
    for d in devices {
        let d = d.as_ref();
        let (x, out) = (d.upload(&xs).unwrap(), d.zeros::<f32>(512).unwrap());
        let args = |n: i32| [Arg::from(&x), (&x).into(), (&out).into(), n.into()];
        let compiled = d.compile_for(&kernel, &config, &args(512)).unwrap();
        let e = d.launch_compiled(&compiled, config.grid, &args(500)).unwrap_err();
        assert_contains(
            &e,
            d,
            "argument 3 (`n_elements`): the kernel was compiled assuming it is divisible by 16, got 500",
        );

        let add = d.launcher(&kernel, &config).unwrap();
        for n in [512, 500, 512, 1] {
            d.upload_into(&out, &vec![-7.0; 512]).unwrap();
            add.launch(&args(n)).unwrap();
            let got = d.download(&out).unwrap();
            for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
                let want = if i < n as usize { 2.0 * x } else { -7.0 };
                assert_eq!(*g, want, "{}: n = {n}, element {i}", d.id());
            }
        }
        // 512 and 500 differ in divisibility, 1 is also `equal_to_1`: three forms.
        let forms = [512, 500, 1].map(|n| add.compiled_for(&args(n)).unwrap());
        assert!(!Arc::ptr_eq(&forms[0], &forms[1]) && !Arc::ptr_eq(&forms[1], &forms[2]));
        assert!(Arc::ptr_eq(&forms[0], &add.compiled_for(&args(512)).unwrap()));
    }
}

/// An unmasked access past the end of a buffer, known from the grid and the arguments, is
/// an error before anything runs.
#[test]
fn buffers_smaller_than_the_kernel_needs() {
    let (_turn, devices) = devices();
    let (kernel, line) = unmasked_copy(256);
    let shifted = Kernel::build("shifted_copy", |k| {
        let (x, out) = (k.arg_ptr("x", ScalarType::F32), k.arg_ptr("out", ScalarType::F32));
        let offsets = k.program_id(0) * 256 + k.arange(0, 256);
        k.store(out + offsets, k.load(x + (offsets + k.arg_i32("shift"))));
    })
    .unwrap();
    for d in devices {
        let d = d.as_ref();
        let x = d.upload(&[1.0f32; 1024]).unwrap();
        let short = d.upload(&[5.0f32; 1000]).unwrap();
        let grid = LaunchConfig::grid1(4);
        let e = d.launch(&kernel, &grid, &[(&x).into(), (&short).into()]).unwrap_err();
        assert!(matches!(e, Error::Argument { .. }), "{}: {e:?}", d.id());
        assert_contains(
            &e,
            d,
            "kernel `copy_unmasked`: argument 1 (`out`): the unmasked store at ",
        );
        assert_contains(&e, d, &line);
        assert_contains(
            &e,
            d,
            "reaches element 1023 with grid [4, 1, 1], so the buffer needs 1024 elements; it has 1000",
        );
        assert!(d.download(&short).unwrap().iter().all(|&v| v == 5.0), "{}", d.id());
        let e = d.launch(&kernel, &grid, &[(&short).into(), (&x).into()]).unwrap_err();
        assert_contains(&e, d, "argument 0 (`x`): the unmasked load at ");
        // The grid that fits runs.
        let out = d.zeros::<f32>(1024).unwrap();
        d.launch(&kernel, &grid, &[(&x).into(), (&out).into()]).unwrap();
        assert!(d.download(&out).unwrap().iter().all(|&v| v == 1.0), "{}", d.id());
        // An offset below zero is before the buffer's start, whatever its length.
        let e = d
            .launch(
                &shifted,
                &LaunchConfig::grid1(2),
                &[(&x).into(), (&out).into(), Arg::I32(-5)],
            )
            .unwrap_err();
        assert_contains(&e, d, "kernel `shifted_copy`: argument 0 (`x`): the unmasked load at ");
        assert_contains(
            &e,
            d,
            "reaches element -5 with grid [2, 1, 1], before the start of the buffer",
        );
        assert!(d.download(&out).unwrap().iter().all(|&v| v == 1.0), "{}", d.id());
    }
}

/// Empty grids on each axis, grids above the device's limit, and programs of more threads
/// than the device runs.
#[test]
fn grids_and_threads_beyond_the_device() {
    let (_turn, devices) = devices();
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    let mut over_limit_tested = false;
    for d in devices {
        let d = d.as_ref();
        let x = d.upload(&[1.0f32; 300]).unwrap();
        let args = [(&x).into(), (&x).into(), (&x).into(), Arg::I32(300)];
        for (axis, grid) in [("x", [0, 1, 1]), ("y", [2, 0, 1]), ("z", [2, 1, 0])] {
            let e = d.launch(&kernel, &LaunchConfig::new(grid), &args).unwrap_err();
            assert_contains(
                &e,
                d,
                &format!(
                    "kernel `add_kernel`: invalid launch: grid {axis} is 0; every dimension needs at least one program"
                ),
            );
        }
        let max = d.properties().max_grid.unwrap_or([u32::MAX; 3]);
        if let Some(axis) = max.iter().position(|&m| m < u32::MAX) {
            let mut grid = [1; 3];
            grid[axis] = max[axis] + 1;
            let e = d.launch(&kernel, &LaunchConfig::new(grid), &args).unwrap_err();
            let name = ["x", "y", "z"][axis];
            assert_contains(
                &e,
                d,
                &format!(
                    "invalid launch: grid {name} is {}, above the device's limit of {}",
                    grid[axis], max[axis]
                ),
            );
            over_limit_tested = true;
        }
        if let Some(limit) = d.properties().max_threads_per_block {
            let e = d
                .launch(&kernel, &LaunchConfig::grid1(2).num_warps(256), &args)
                .unwrap_err();
            assert_contains(&e, d, "kernel `add_kernel`: invalid launch: num_warps = 256 makes ");
            assert_contains(&e, d, &format!("the device allows {limit}"));
        }
        // A register limit no GPU gives is refused on every device, also where it would be
        // ignored; one within reason runs, with the same results.
        for bad in [8, 256] {
            let e = d
                .launch(&kernel, &LaunchConfig::grid1(2).maxnreg(Some(bad)), &args)
                .unwrap_err();
            assert_contains(
                &e,
                d,
                &format!(
                    "kernel `add_kernel`: invalid launch: maxnreg = {bad}: a thread's register limit must be 16 to 255"
                ),
            );
        }
        let out = d.upload(&[f32::NAN; 300]).unwrap();
        let limited = [(&x).into(), (&x).into(), (&out).into(), Arg::I32(300)];
        d.launch(&kernel, &LaunchConfig::grid1(2).maxnreg(Some(32)), &limited)
            .unwrap();
        assert!(
            d.download(&out).unwrap().iter().all(|&v| v == 2.0),
            "{}: maxnreg 32",
            d.id()
        );
        if d.properties().backend == Backend::Vulkan {
            // Vulkan has no register limit: the launch shares the unlimited one's compile.
            let plain = d.compile_for(&kernel, &LaunchConfig::grid1(2), &limited).unwrap();
            let capped = d
                .compile_for(&kernel, &LaunchConfig::grid1(2).maxnreg(Some(32)), &limited)
                .unwrap();
            assert!(Arc::ptr_eq(&plain, &capped), "{}: maxnreg compiled again", d.id());
        }
    }
    // Only CUDA limits grids: wgpu splits large grids into several dispatches, and the
    // interpreter runs any grid (the check itself is unit-tested in the runtime).
    require(
        over_limit_tested,
        "no device with a grid limit (CUDA) to launch above it",
        &[],
        &[Backend::Cuda],
    );
}

/// Thread-block clusters: a size outside 1..=8, a persistent grid in clusters, and a grid
/// that is not whole clusters are errors on every device; a device without clusters
/// (Vulkan) refuses any; where they exist a valid clustered launch then runs and agrees
/// with the CPU.
#[test]
fn cluster_launches_are_checked() {
    let (_turn, devices) = devices();
    let (rows, cols, cluster) = (3usize, 300usize, 2u32);
    let kernel = seeds::softmax_cluster(256, cluster, seeds::SoftmaxOptions::default()).unwrap();
    let mut clustered = false;
    for d in devices {
        let d = d.as_ref();
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let xb = d.upload(&x).unwrap();
        let yb = d.upload(&vec![f32::NAN; rows * cols]).unwrap();
        let c = Arg::I32(cols as i32);
        let args = [(&yb).into(), (&xb).into(), c, c, Arg::I32(rows as i32), c];
        let grid = LaunchConfig::grid1(rows as u32 * cluster).num_warps(2);
        for bad in [0, 17] {
            let e = d.launch(&kernel, &grid.cluster(bad), &args).unwrap_err();
            assert_contains(&e, d, &format!("cluster = {bad}: a cluster groups 1 to 16 programs"));
        }
        let e = d
            .launch(&kernel, &grid.cluster(cluster).persistent(true), &args)
            .unwrap_err();
        assert_contains(&e, d, "cluster = 2 with a persistent grid");
        if d.properties().max_cluster() < cluster {
            let e = d.launch(&kernel, &grid.cluster(cluster), &args).unwrap_err();
            assert_contains(&e, d, "cluster = 2: the device has no thread-block clusters");
            continue;
        }
        let e = d
            .launch(&kernel, &LaunchConfig::grid1(5).num_warps(2).cluster(cluster), &args)
            .unwrap_err();
        assert_contains(&e, d, "grid x is 5, not a multiple of the cluster's 2 programs");
        d.launch(&kernel, &grid.cluster(cluster), &args).unwrap();
        let y = d.download(&yb).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            for (i, &v) in row.iter().enumerate() {
                let want = (v as f64 - m).exp() / s;
                let got = y[r * cols + i] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs() + 1e-30,
                    "{}: row {r} column {i}: {got} against {want}",
                    d.id()
                );
            }
        }
        clustered |= d.properties().backend != Backend::Interpreter;
    }
    require(
        clustered,
        "no GPU with thread-block clusters (CUDA, sm_90 on)",
        &[],
        &[Backend::Cuda],
    );
}

/// A program that needs more shared memory than the device gives (a 256 x 256 f32
/// transpose: 256 KiB) is an error naming both sizes.
#[test]
fn shared_memory_over_the_limit() {
    let (_turn, devices) = devices();
    let big = Kernel::build("transpose_big", |k| {
        let p = k.arg_ptr("p", ScalarType::F32);
        let r = k.arange(0, 256);
        let offs = r.expand_dims(1) * 256 + r.expand_dims(0);
        let v = k.load(p + offs);
        k.store(p + offs, v.trans());
    })
    .unwrap();
    let mut tested = false;
    for d in devices {
        let d = d.as_ref();
        let Some(limit) = d.properties().shared_memory_per_block_optin else {
            continue; // the interpreter has no shared memory
        };
        let buf = d.zeros::<f32>(256 * 256).unwrap();
        let e = d.launch(&big, &LaunchConfig::grid1(1), &[(&buf).into()]).unwrap_err();
        assert_contains(&e, d, "kernel `transpose_big` needs ");
        assert_contains(
            &e,
            d,
            &format!("bytes of shared memory per program; the device allows {limit}"),
        );
        // The device still works after all of these.
        let out = d.zeros::<f32>(256 * 256).unwrap();
        d.launch(
            &unmasked_copy(256).0,
            &LaunchConfig::grid1(256),
            &[(&buf).into(), (&out).into()],
        )
        .unwrap();
        tested = true;
    }
    require(
        tested,
        "no GPU to exceed the shared memory of",
        &["RUTILE_REQUIRE_TOOLS", "RUTILE_REQUIRE_GPU"],
        &[Backend::Cuda, Backend::Vulkan],
    );
}

/// `x + x` on `d` for 1000 elements, checked: the device works.
fn vector_add_works(d: &dyn Device) {
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
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

/// Asking for more memory than the device has is an error naming the size asked for (and
/// what the device has, where its API says), never a panic or an abort, and the device
/// keeps working: just over its memory where it reports it, and 2^50 bytes everywhere
/// (more than any device, and than a process's address space). On a hardware wgpu
/// adapter, where one buffer is capped below the memory, buffers are allocated until the
/// memory runs out.
#[test]
fn allocations_beyond_the_device_are_errors() {
    let (_turn, devices) = devices();
    let mut filled = false;
    for d in devices {
        let d = d.as_ref();
        let total = d.properties().total_memory_bytes;
        for bytes in total.map(|t| t + (1 << 20)).into_iter().chain([1 << 50]) {
            let len = (bytes / 4) as usize;
            let e = match d.alloc(ScalarType::F32, len) {
                Ok(_) => panic!("{}: allocating {bytes} bytes succeeded", d.id()),
                Err(e) => e,
            };
            eprintln!("{e}");
            assert!(matches!(e, Error::OutOfMemory { .. }), "{}: {e:?}", d.id());
            assert_contains(&e, d, &format!("{}: cannot allocate {bytes} bytes", d.id()));
            assert_contains(&e, d, &format!("for {len} elements of f32: "));
            if let Some(total) = total {
                assert_contains(&e, d, &format!("the device has {total} bytes"));
            }
        }
        vector_add_works(d);
        // A device of its own, so that the shared one never holds the memory.
        let (Some(index), DeviceType::DiscreteGpu | DeviceType::IntegratedGpu, Some(total)) = (
            d.id().strip_prefix("vulkan:").map(|i| i.parse().unwrap()),
            d.properties().device_type,
            total,
        ) else {
            continue;
        };
        let gpu = WgpuGpu::open(Some(index)).unwrap();
        // Buffers are padded to 16 bytes: a multiple of 16 is allocated as it is.
        let chunk = gpu.wgpu().properties().max_storage_buffer_bytes().min(total / 4) / 16 * 16;
        let mut held = Vec::new();
        let e = loop {
            match gpu.alloc(ScalarType::F32, (chunk / 4) as usize) {
                Ok(b) => held.push(b),
                Err(e) => break e,
            }
            let allocated = held.len() as u64 * chunk;
            assert!(
                allocated <= 2 * total,
                "{}: {allocated} bytes allocated in buffers of {chunk} without an error; the device has {total}",
                d.id()
            );
        };
        eprintln!("after {} buffers of {chunk} bytes: {e}", held.len());
        assert!(matches!(e, Error::OutOfMemory { .. }), "{}: {e:?}", d.id());
        assert_contains(&e, d, &format!("cannot allocate {chunk} bytes"));
        assert_contains(&e, d, &format!("out of device memory: the device has {total} bytes"));
        assert_contains(&e, d, "; wgpu: ");
        drop(held);
        gpu.synchronize().unwrap();
        vector_add_works(&gpu);
        filled = true;
    }
    if !filled {
        eprintln!("skipped: no hardware wgpu adapter to fill the memory of");
    }
}

/// A kernel of an element type the device lacks is an error naming the type and the device:
/// on every device for the types it lacks, and on every Vulkan device opened with types
/// turned off (`WgpuOptions::types_off`, as a device without f64, bf16 or i8 would be).
#[test]
fn element_types_a_device_lacks() {
    let (_turn, devices) = devices();
    let mut tested = false;
    let mut lacking: Vec<Arc<dyn Device>> = devices.clone();
    for d in &devices {
        if let Some(i) = d.id().strip_prefix("vulkan:") {
            let options = rutile::WgpuOptions {
                types_off: vec![ScalarType::F64, ScalarType::BF16, ScalarType::I8],
                ..rutile::WgpuOptions::from_env().unwrap()
            };
            lacking.push(Arc::new(
                rutile::WgpuGpu::open_with(Some(i.parse().unwrap()), options).unwrap(),
            ));
        }
    }
    for d in lacking {
        let d = d.as_ref();
        let p = d.properties();
        for &t in ScalarType::ALL.iter().filter(|t| !p.supported_types.contains(t)) {
            let kernel = Kernel::build(&format!("copy_{}", t.name()), |k| {
                let (x, y) = (k.arg_ptr("x", t), k.arg_ptr("y", t));
                let offs = k.arange(0, 64);
                k.store(y + offs, k.load(x + offs));
            })
            .unwrap();
            let (x, y) = (d.alloc(t, 64).unwrap(), d.alloc(t, 64).unwrap());
            let e = d
                .launch(&kernel, &LaunchConfig::grid1(1), &[(&x).into(), (&y).into()])
                .unwrap_err();
            assert_contains(
                &e,
                d,
                &format!(
                    "code generation for kernel `copy_{}` failed: the kernel uses {}, which {} does not support",
                    t.name(),
                    t.name(),
                    p.name
                ),
            );
            tested = true;
        }
    }
    require(
        tested,
        "no device lacks an element type (no wgpu adapter)",
        &["RUTILE_REQUIRE_TOOLS"],
        &[Backend::Vulkan],
    );
}

/// Asking for a device that is not there is an error naming what is there.
#[test]
fn absent_devices_are_errors() {
    // Devices are opened (here, and in the child) while no other test opens or uses one.
    let (_turn, _) = rutile_examples::gpus::gpus_under_test();
    let e = rutile::open_device("vulkan:99").err().unwrap();
    let text = e.to_string();
    let adapters = rutile::vulkan::adapters().len();
    if adapters == 0 {
        assert!(
            text.contains("no device: no wgpu adapter found: install a Vulkan driver"),
            "{text}"
        );
    } else {
        assert!(
            text.contains(&format!(
                "no device: wgpu adapter 99 does not exist: {adapters} adapter(s) found, indices 0..{adapters}"
            )),
            "{text}"
        );
    }
    let e = rutile::open_device("cuda:99").err().unwrap();
    let text = e.to_string();
    match rutile::cuda::probe() {
        Err(rutile::cuda::CudaError::NoDriver { .. }) => {
            assert!(text.starts_with("CUDA driver not available: "), "{text}")
        }
        Err(_) => assert!(text.contains("no CUDA device found"), "{text}"),
        Ok(info) => assert!(
            text.contains(&format!(
                "CUDA device 99 does not exist: the driver reports {} device(s)",
                info.device_count
            )),
            "{text}"
        ),
    }
    let e = rutile::open_device("tpu").err().unwrap();
    assert_eq!(
        e.to_string(),
        "no device: unknown device `tpu`; use cuda[:N], vulkan[:N] or cpu"
    );
    let e = rutile::open_device("cuda:first").err().unwrap();
    assert_eq!(
        e.to_string(),
        "no device: `cuda:first`: the index after `:` must be a number"
    );
    // RUTILE_DEVICE naming an absent device: an error, not a fallback to another device.
    let out = child("default_device_env_child", &[("RUTILE_DEVICE", "vulkan:99")]);
    assert!(out.contains("child done: no device: "), "{out}");
}

/// The child of `absent_devices_are_errors`, run with `RUTILE_DEVICE` set.
#[test]
fn default_device_env_child() {
    if !is_child() {
        return;
    }
    let e = rutile::default_device()
        .err()
        .expect("RUTILE_DEVICE names an absent device");
    println!("child done: {e}");
}

/// After a wgpu device is lost, every operation on it is an error saying so.
#[test]
fn lost_devices_are_errors() {
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    let mut tested = false;
    for id in gpus.iter().map(|d| d.id()) {
        let Some(index) = id.strip_prefix("vulkan:") else {
            continue; // CUDA's lost context is unit-tested in the runtime (it cannot be provoked safely)
        };
        // A device of its own: the shared one must survive for the other tests.
        let gpu = WgpuGpu::open(Some(index.parse().unwrap())).unwrap();
        let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
        let x = gpu.upload(&[1.0f32; 300]).unwrap();
        let args = [(&x).into(), (&x).into(), (&x).into(), Arg::I32(300)];
        gpu.launch(&kernel, &LaunchConfig::grid1(2), &args).unwrap();
        gpu.simulate_device_loss();
        let lost = "the wgpu device was lost (it was destroyed); its buffers and compiled kernels can no \
                    longer be used: open the device again";
        let check = |what: &str, r: rutile::Result<()>| {
            let e = r.expect_err(what);
            assert!(matches!(e, Error::DeviceLost { .. }), "{id}: {what}: {e:?}");
            assert_eq!(e.to_string(), lost, "{id}: {what}");
        };
        check("alloc", gpu.zeros::<f32>(10).map(drop));
        check("write", gpu.upload_into(&x, &[2.0; 300]));
        check("read", gpu.download(&x).map(drop));
        check("launch", gpu.launch(&kernel, &LaunchConfig::grid1(2), &args));
        let other = seeds::vector_add(ScalarType::F32, 128).unwrap();
        check("compile", gpu.launch(&other, &LaunchConfig::grid1(3), &args));
        check("copy", gpu.copy(x.raw(), x.raw()));
        check("synchronize", gpu.synchronize());
        check("time", gpu.time(&mut || Ok(())).map(drop));
        tested = true;
    }
    require(
        tested,
        "no wgpu adapter to lose",
        &["RUTILE_REQUIRE_TOOLS"],
        &[Backend::Vulkan],
    );
}

/// The debug mode runs a launch in the interpreter first: an access out of bounds (here one
/// the masks allow, which the extent check cannot see) is an error naming the op, the line,
/// the program and the offset, and the device's buffers are left as they were.
#[test]
fn check_bounds_runs_the_launch_in_the_interpreter_first() {
    let (_turn, devices) = devices();
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    for d in devices {
        let d = d.as_ref();
        let (x, out) = (d.upload(&[1.0f32; 256]).unwrap(), d.upload(&[7.0f32; 256]).unwrap());
        // n_elements says 300, but the buffers hold 256.
        let args = [(&x).into(), (&x).into(), (&out).into(), Arg::I32(300)];
        let config = LaunchConfig::grid1(2).check_bounds(true);
        let e = d.launch(&kernel, &config, &args).unwrap_err();
        assert!(matches!(e, Error::BoundsCheck { .. }), "{}: {e:?}", d.id());
        assert_contains(
            &e,
            d,
            &format!(
                "kernel `add_kernel`: the bounds-checked run in the interpreter faulted, so it was not launched on {}: load at ",
                d.id()
            ),
        );
        assert_contains(&e, d, "vector_add.rs:14:");
        assert_contains(
            &e,
            d,
            ", program (1, 0, 0): element offset 256 is outside buffer 0 (`x_ptr`, 256 elements)",
        );
        assert!(d.download(&out).unwrap().iter().all(|&v| v == 7.0), "{}", d.id());
        // Without a fault, the launch runs on the device.
        let args = [(&x).into(), (&x).into(), (&out).into(), Arg::I32(256)];
        d.launch(&kernel, &config, &args).unwrap();
        assert!(d.download(&out).unwrap().iter().all(|&v| v == 2.0), "{}", d.id());
    }
}

/// `RUTILE_CHECK_BOUNDS=1` turns the debug mode on for every launch.
#[test]
fn check_bounds_from_the_environment() {
    let (_turn, _) = rutile_examples::gpus::gpus_under_test();
    let out = child("check_bounds_env_child", &[("RUTILE_CHECK_BOUNDS", "1")]);
    assert!(out.contains("child done"), "{out}");
}

/// The child of `check_bounds_from_the_environment`, run with `RUTILE_CHECK_BOUNDS=1`.
#[test]
fn check_bounds_env_child() {
    if !is_child() {
        return;
    }
    let (_turn, devices) = devices();
    let kernel = seeds::vector_add(ScalarType::F32, 256).unwrap();
    for d in devices {
        let d = d.as_ref();
        let x = d.upload(&[1.0f32; 256]).unwrap();
        let args = [(&x).into(), (&x).into(), (&x).into(), Arg::I32(300)];
        let e = d.launch(&kernel, &LaunchConfig::grid1(2), &args).unwrap_err();
        assert!(matches!(e, Error::BoundsCheck { .. }), "{}: {e:?}", d.id());
        assert_contains(&e, d, "element offset 256 is outside buffer 0 (`x_ptr`, 256 elements)");
    }
    println!("child done");
}

/// The marker of a child process of this test binary.
const CHILD_ENV: &str = "RUTILE_BAD_INPUT_CHILD";

fn is_child() -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == "1")
}

/// Runs test `name` of this binary in a child process with `env` set (settings read once per
/// process, such as `RUTILE_CHECK_BOUNDS`, need a process of their own); its output.
fn child(name: &str, env: &[(&str, &str)]) -> String {
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
    assert!(out.status.success(), "child {name} failed:\n{text}");
    text
}
