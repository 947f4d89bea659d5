//! End-to-end tests of the wgpu device layer on a real adapter (Mesa's lavapipe on
//! machines without a GPU).
//!
//! Without an adapter each test prints "no wgpu adapter: skipped" and passes, unless
//! `RUTILE_REQUIRE_TOOLS=1` (set by scripts/test.sh and CI, which install lavapipe) or
//! `RUTILE_REQUIRE` names `vulkan` (on GPU machines), which turn a missing adapter into a
//! failure.

use std::sync::OnceLock;

use rutile::vulkan::{
    adapters, best_adapter, split_grid, AdapterKind, BindingLayout, KernelSource, PipelineCache, WgpuBuffer,
    WgpuDevice, WgpuError,
};
use rutile_ir::testing::Rng;

/// One device shared by all tests (they run on several threads, which also exercises
/// wgpu's thread-local error scopes).
fn device() -> Option<&'static WgpuDevice> {
    // The device, or why there is none.
    static DEVICE: OnceLock<Result<WgpuDevice, String>> = OnceLock::new();
    let device = DEVICE.get_or_init(|| match WgpuDevice::open(None) {
        Ok(device) => Ok(device),
        Err(e) if e.is_unavailable() => Err(e.to_string()),
        Err(e) => panic!("an adapter exists but opening it failed: {e}"),
    });
    let opened = device.as_ref().map(|_| ()).map_err(|why| why as &dyn std::fmt::Display);
    if let Err(e) = rutile::device::check_required(rutile::Backend::Vulkan, opened) {
        panic!("{e}");
    }
    if device.is_err() {
        if std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!(
                "lavapipe missing: install mesa-vulkan-drivers (and libvulkan1); \
                 RUTILE_REQUIRE_TOOLS=1 makes a missing wgpu adapter a failure"
            );
        }
        eprintln!("no wgpu adapter: skipped");
    }
    device.as_ref().ok()
}

/// A normal, non-zero f32 of either sign with magnitude in [2^-20, 2^20).
fn normal_f32(rng: &mut Rng) -> f32 {
    let r = rng.next_u64();
    let mantissa = (r & 0x7f_ffff) as u32;
    let exponent = 127 - 20 + ((r >> 23) % 40) as u32;
    let sign = ((r >> 40) & 1) as u32;
    f32::from_bits(sign << 31 | exponent << 23 | mantissa)
}

const ADD_WGSL: &str = "
struct Launch {
    n: u32,
}

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> launch: Launch;

@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < launch.n {
        c[i] = a[i] + b[i];
    }
}
";

/// Counts, for each program of a `grid` split into several dispatches, how often it ran.
const COVER_WGSL: &str = "
struct Launch {
    offset: vec3<u32>,
    grid: vec3<u32>,
}

@group(0) @binding(0) var<storage, read_write> hits: array<atomic<u32>>;
@group(0) @binding(1) var<uniform> launch: Launch;

@compute @workgroup_size(1)
fn cover(@builtin(workgroup_id) wg: vec3<u32>) {
    let p = wg + launch.offset;
    let i = (p.z * launch.grid.y + p.y) * launch.grid.x + p.x;
    atomicAdd(&hits[i], 1u);
}
";

fn add_layout() -> BindingLayout {
    BindingLayout::new(3, true)
}

#[test]
fn lists_adapters_and_opens_the_best() {
    let Some(device) = device() else { return };
    let list = adapters();
    assert!(!list.is_empty());
    for a in &list {
        println!("{a}");
    }
    let best = best_adapter().unwrap();
    println!("best: {best}");
    assert_eq!(best.index, device.adapter_index());
    let props = device.properties();
    println!("{props}");
    println!("enabled features: {:?}", device.features());
    assert_eq!(props.name, best.name);
    assert!(props.max_workgroups_per_dimension >= 65535);
    assert!(props.max_invocations_per_workgroup >= 256);
    assert!(props.max_workgroup_storage_bytes >= 16384);
    assert!(props.max_storage_buffers_per_stage >= 8);
    if best.kind == AdapterKind::Cpu && props.vendor_id == 0x10005 {
        assert_eq!(props.vendor_name(), Some("Mesa"));
    }
    // Enabled features are the adapter's, without the experimental one.
    let (adapter, enabled) = (&props.features, device.features());
    assert_eq!(enabled.f16, adapter.f16);
    assert_eq!(enabled.i64, adapter.i64);
    assert_eq!(enabled.f64, adapter.f64);
    assert_eq!(enabled.subgroups, adapter.subgroups);
    assert_eq!(enabled.timestamp_query, adapter.timestamp_query);
    assert!(!enabled.cooperative_matrix);

    match WgpuDevice::open(Some(list.len() + 3)) {
        Err(WgpuError::AdapterNotFound { index, count }) => {
            assert_eq!((index, count), (list.len() + 3, list.len()))
        }
        other => panic!("expected AdapterNotFound, got {other:?}"),
    }
}

#[test]
fn buffers_round_trip() {
    let Some(device) = device() else { return };
    let mut rng = Rng::new(1);
    for len in [1usize, 3, 4, 1000, 1_000_003] {
        let data = rng.bytes(len);
        let buffer = WgpuBuffer::from_bytes(device, &data).unwrap();
        assert_eq!(buffer.len(), len);
        assert_eq!(buffer.allocated_bytes() % 4, 0);
        assert_eq!(buffer.read().unwrap(), data, "length {len}");
        let again = rng.bytes(len);
        buffer.write(&again).unwrap();
        assert_eq!(buffer.read().unwrap(), again, "length {len}");
    }

    let empty = WgpuBuffer::zeroed(device, 0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.allocated_bytes(), 16);
    assert_eq!(empty.read().unwrap(), Vec::<u8>::new());
    empty.write(&[]).unwrap();

    let zeros = WgpuBuffer::zeroed(device, 4097).unwrap();
    assert_eq!(zeros.read().unwrap(), vec![0u8; 4097]);
    match zeros.write(&[1, 2, 3]) {
        Err(WgpuError::BufferSize { expected, got }) => assert_eq!((expected, got), (4097, 3)),
        other => panic!("expected BufferSize, got {other:?}"),
    }

    let values: Vec<u32> = (0..777).map(|_| rng.next_u64() as u32).collect();
    let typed = WgpuBuffer::from_slice(device, &values).unwrap();
    assert_eq!(typed.read_as::<u32>().unwrap(), values);
    let halves: Vec<u16> = typed.read_as().unwrap();
    assert_eq!(halves.len(), 2 * values.len());
    assert!(matches!(
        typed.read_as::<[u8; 5]>(),
        Err(WgpuError::InvalidArgument { .. })
    ));

    let too_large = device.properties().max_storage_buffer_bytes() as usize + 1;
    match WgpuBuffer::zeroed(device, too_large) {
        Err(e @ WgpuError::BufferTooLarge { .. }) => println!("{e}"),
        other => panic!("expected BufferTooLarge, got {other:?}"),
    }
    // So large that rounding the allocation up to 16 bytes would wrap it to 0.
    match WgpuBuffer::zeroed(device, usize::MAX) {
        Err(e @ WgpuError::BufferTooLarge { .. }) => assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}"),
        other => panic!("expected BufferTooLarge, got {other:?}"),
    }
}

fn random_inputs(n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(42);
    let a: Vec<f32> = (0..n).map(|_| normal_f32(&mut rng)).collect();
    let b: Vec<f32> = (0..n).map(|_| normal_f32(&mut rng)).collect();
    let c = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    (a, b, c)
}

/// Runs the add kernel of `source` on a ragged length and compares bit for bit.
fn check_add(device: &WgpuDevice, source: KernelSource<'_>) {
    let pipeline = device.create_pipeline(source, "add", add_layout()).unwrap();
    check_add_pipeline(device, &pipeline);
}

fn check_add_pipeline(device: &WgpuDevice, pipeline: &rutile::vulkan::WgpuPipeline) {
    let n = 98433usize;
    let (a, b, expected) = random_inputs(n);
    let da = WgpuBuffer::from_slice(device, &a).unwrap();
    let db = WgpuBuffer::from_slice(device, &b).unwrap();
    let dc = WgpuBuffer::zeroed(device, n * 4).unwrap();
    let uniform = (n as u32).to_le_bytes();
    let groups = (n as u32).div_ceil(256);
    device
        .dispatch(pipeline, &[&da, &db, &dc], Some(&uniform), [groups, 1, 1])
        .unwrap();
    let got: Vec<f32> = dc.read_as().unwrap();
    let mismatches = got
        .iter()
        .zip(&expected)
        .filter(|(g, e)| g.to_bits() != e.to_bits())
        .count();
    assert_eq!(mismatches, 0, "{mismatches} of {n} sums differ");
}

#[test]
fn adds_ragged_f32_arrays_from_wgsl() {
    let Some(device) = device() else { return };
    check_add(device, KernelSource::Wgsl(ADD_WGSL.into()));
}

/// Threads sharing a device record and submit work at once; each must read back what its
/// own dispatch wrote. (A batch taken by one thread and submitted after another thread's
/// later batch once ran a read-back before the dispatch it reads.)
#[test]
fn threads_sharing_a_device_read_their_own_results() {
    let Some(device) = device() else { return };
    let pipeline = device
        .create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "add", add_layout())
        .unwrap();
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                for _ in 0..40 {
                    check_add_pipeline(device, &pipeline);
                }
            });
        }
    });
}

#[test]
fn adds_ragged_f32_arrays_from_a_naga_module() {
    let Some(device) = device() else { return };
    let module = naga::front::wgsl::parse_str(ADD_WGSL).unwrap();
    check_add(device, KernelSource::Naga(Box::new(module)));
}

#[test]
fn adds_ragged_f32_arrays_from_spirv() {
    let Some(device) = device() else { return };
    let module = naga::front::wgsl::parse_str(ADD_WGSL).unwrap();
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
        .validate(&module)
        .unwrap();
    let words = naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None).unwrap();
    check_add(device, KernelSource::SpirV(words.into()));
}

/// SPIR-V handed to the driver as it is: only on the trusted path, and only on a device
/// that takes it (lavapipe and NVIDIA's driver do).
#[test]
fn adds_ragged_f32_arrays_from_passed_through_spirv() {
    let Some(device) = device() else { return };
    let module = naga::front::wgsl::parse_str(ADD_WGSL).unwrap();
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
        .validate(&module)
        .unwrap();
    let options = naga::back::spv::Options {
        lang_version: (1, 4),
        ..Default::default()
    };
    let words = naga::back::spv::write_vec(&module, &info, &options, None).unwrap();
    let source = || KernelSource::SpirVPassthrough {
        words: words.clone().into(),
        module: Box::new(module.clone()),
    };
    match device.create_pipeline(source(), "add", add_layout()) {
        Err(WgpuError::InvalidArgument { what }) => assert!(what.contains("create_pipeline_trusted"), "{what}"),
        other => panic!("an unchecked pipeline from passed-through SPIR-V: {other:?}"),
    }
    // SAFETY: the add kernel's accesses are guarded by its length check.
    let trusted = unsafe { device.create_pipeline_trusted(source(), "add", add_layout()) };
    if device.features().spirv_passthrough {
        check_add_pipeline(device, &trusted.unwrap());
        // SAFETY: refused before anything reaches the driver.
        match unsafe { device.create_pipeline_trusted(source(), "sub", add_layout()) } {
            Err(WgpuError::InvalidArgument { what }) => assert!(what.contains("`sub`"), "{what}"),
            other => panic!("a passed-through module without the entry point: {other:?}"),
        }
    } else {
        match trusted {
            Err(WgpuError::MissingFeature { feature }) => assert!(feature.contains("PASSTHROUGH"), "{feature}"),
            other => panic!("passed-through SPIR-V on a device without the feature: {other:?}"),
        }
    }
}

#[test]
fn pipeline_cache_reuses_pipelines() {
    let Some(device) = device() else { return };
    let cache = PipelineCache::new();
    let mut created = 0;
    for _ in 0..3 {
        let p = cache
            .get_or_create(7, || {
                created += 1;
                device.create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "add", add_layout())
            })
            .unwrap();
        assert_eq!(p.entry_point(), "add");
        assert_eq!(p.layout(), add_layout());
    }
    assert_eq!(created, 1);
    assert_eq!(cache.len(), 1);
    assert!(cache.get(8).is_none());
    // A failed creation caches nothing.
    let failed = cache.get_or_create(8, || {
        device.create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "nope", add_layout())
    });
    assert!(failed.is_err());
    assert_eq!(cache.len(), 1);
}

#[test]
fn split_dispatches_cover_every_program_once() {
    let Some(device) = device() else { return };
    let grid = [20u32, 9, 3];
    let programs = grid.iter().product::<u32>() as usize;
    let pipeline = device
        .create_pipeline(
            KernelSource::Wgsl(COVER_WGSL.into()),
            "cover",
            BindingLayout::new(1, true),
        )
        .unwrap();
    let hits = WgpuBuffer::zeroed(device, programs * 4).unwrap();
    let pieces = split_grid(grid, 7);
    // x: 7 + 7 + 6, y: 7 + 2, z: 3.
    assert_eq!(pieces.len(), 6);
    for (offset, count) in pieces {
        // vec3<u32> members are 16-byte aligned in a uniform struct.
        let words = [offset[0], offset[1], offset[2], 0, grid[0], grid[1], grid[2], 0];
        device
            .dispatch(&pipeline, &[&hits], Some(bytemuck::cast_slice(&words)), count)
            .unwrap();
    }
    let counts: Vec<u32> = hits.read_as().unwrap();
    let bad: Vec<usize> = (0..programs).filter(|&i| counts[i] != 1).collect();
    assert!(bad.is_empty(), "programs not run exactly once: {bad:?}");
}

#[test]
fn invalid_shaders_are_errors_not_panics() {
    let Some(device) = device() else { return };
    let broken = "
        @group(0) @binding(0) var<storage, read_write> x: array<f32>;
        @compute @workgroup_size(64)
        fn main(@builtin(global_invocation_id) id: vec3<u32>) {
            x[id.x] = undefined_name + 1.0;
        }";
    match device.create_pipeline(KernelSource::Wgsl(broken.into()), "main", BindingLayout::new(1, false)) {
        Err(WgpuError::Validation { message }) => {
            println!("{message}");
            assert!(message.contains("main"), "{message}");
            assert!(message.contains("undefined_name"), "{message}");
        }
        other => panic!("expected Validation, got {other:?}"),
    }
    // An entry point that does not exist.
    let result = device.create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "sub", add_layout());
    assert!(matches!(result, Err(WgpuError::Validation { .. })), "{result:?}");
    // A shader whose bindings do not match the layout (binding 3 missing).
    let result = device.create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "add", BindingLayout::new(3, false));
    assert!(matches!(result, Err(WgpuError::Validation { .. })), "{result:?}");
    // Garbage SPIR-V.
    let words = vec![0x0723_0203u32, 0x0001_0000, 0, 1, 0, 17, 1];
    let result = device.create_pipeline(KernelSource::SpirV(words.into()), "main", BindingLayout::new(1, false));
    assert!(matches!(result, Err(WgpuError::Validation { .. })), "{result:?}");
    // The device still works.
    check_add(device, KernelSource::Wgsl(ADD_WGSL.into()));
}

#[test]
fn bad_dispatches_are_refused() {
    let Some(device) = device() else { return };
    let pipeline = device
        .create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "add", add_layout())
        .unwrap();
    let a = WgpuBuffer::zeroed(device, 16).unwrap();
    let n = 4u32.to_le_bytes();
    let what = |r: Result<(), WgpuError>| match r {
        Err(WgpuError::InvalidDispatch { what }) => what,
        other => panic!("expected InvalidDispatch, got {other:?}"),
    };
    let w = what(device.dispatch(&pipeline, &[&a, &a, &a], Some(&n), [0, 1, 1]));
    assert!(w.contains("in x is 0"), "{w}");
    let w = what(device.dispatch(&pipeline, &[&a, &a, &a], Some(&n), [1, 1, 0]));
    assert!(w.contains("in z is 0"), "{w}");
    let max = device.properties().max_workgroups_per_dimension;
    let w = what(device.dispatch(&pipeline, &[&a, &a, &a], Some(&n), [1, max + 1, 1]));
    assert!(w.contains("in y") && w.contains(&max.to_string()), "{w}");
    let w = what(device.dispatch(&pipeline, &[&a, &a], Some(&n), [1, 1, 1]));
    assert!(w.contains("3 storage buffers, 2 were given"), "{w}");
    let w = what(device.dispatch(&pipeline, &[&a, &a, &a], None, [1, 1, 1]));
    assert!(w.contains("uniform"), "{w}");
    assert!(matches!(
        device.dispatch_timed(&pipeline, &[&a, &a, &a], Some(&n), [0, 0, 0]),
        Err(WgpuError::InvalidDispatch { .. })
    ));
    // A buffer of another device.
    let other = WgpuDevice::open(Some(device.adapter_index())).unwrap();
    let foreign = WgpuBuffer::zeroed(&other, 16).unwrap();
    let w = what(device.dispatch(&pipeline, &[&a, &foreign, &a], Some(&n), [1, 1, 1]));
    assert!(w.contains("storage buffer 1 belongs to another device"), "{w}");

    // The uniform struct of `cover` is 32 bytes, 4 are given (padded to 16): wgpu would
    // only see it when the batch is submitted; the dispatch is refused on its own.
    let cover = device
        .create_pipeline(
            KernelSource::Wgsl(COVER_WGSL.into()),
            "cover",
            BindingLayout::new(1, true),
        )
        .unwrap();
    let w = what(device.dispatch(&cover, &[&a], Some(&n), [1, 1, 1]));
    assert!(
        w.contains("`cover` reads 32 bytes of uniforms at binding 1; 4 were given"),
        "{w}"
    );
    // The device still works afterwards.
    check_add(device, KernelSource::Wgsl(ADD_WGSL.into()));
}

#[test]
fn timing_matches_the_timestamp_feature() {
    let Some(device) = device() else { return };
    let n = 1 << 20;
    let (a, b, expected) = random_inputs(n);
    let pipeline = device
        .create_pipeline(KernelSource::Wgsl(ADD_WGSL.into()), "add", add_layout())
        .unwrap();
    let da = WgpuBuffer::from_slice(device, &a).unwrap();
    let db = WgpuBuffer::from_slice(device, &b).unwrap();
    let dc = WgpuBuffer::zeroed(device, n * 4).unwrap();
    let uniform = (n as u32).to_le_bytes();
    let ms = device
        .dispatch_timed(&pipeline, &[&da, &db, &dc], Some(&uniform), [(n as u32) / 256, 1, 1])
        .unwrap();
    println!(
        "timestamp queries: {}, dispatch time: {ms:?} ms",
        device.features().timestamp_query
    );
    match ms {
        Some(ms) => {
            assert!(device.features().timestamp_query);
            assert!(ms > 0.0 && ms.is_finite(), "{ms}");
        }
        None => assert!(!device.features().timestamp_query),
    }
    // The work ran either way.
    assert_eq!(dc.read_as::<f32>().unwrap(), expected);
}

const SCALE_IMMEDIATE_WGSL: &str = "
struct Launch {
    n: u32,
    factor: f32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> launch: Launch;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < launch.n {
        x[id.x] = x[id.x] * launch.factor;
    }
}
";

/// The launch bytes of `SCALE_IMMEDIATE_WGSL`.
fn scale_launch(n: u32, factor: f32) -> Vec<u8> {
    [n.to_le_bytes(), factor.to_le_bytes()].concat()
}

#[test]
fn immediates_carry_the_launch_data() {
    let Some(device) = device() else { return };
    let room = device.properties().max_immediate_size;
    if !device.features().immediates {
        // Then a layout with immediates is refused, not silently dropped.
        let r = device.create_pipeline(
            KernelSource::Wgsl(SCALE_IMMEDIATE_WGSL.into()),
            "scale",
            BindingLayout::with_immediates(1, 8),
        );
        assert!(
            r.is_err(),
            "a device without immediates took a layout with 8 bytes of them"
        );
        return;
    }
    assert!(room >= 8, "IMMEDIATES with max_immediate_size {room}");
    let pipeline = device
        .create_pipeline(
            KernelSource::Wgsl(SCALE_IMMEDIATE_WGSL.into()),
            "scale",
            BindingLayout::with_immediates(1, 8),
        )
        .unwrap();
    let mut rng = Rng::new(77);
    let n = 1000u32;
    let data: Vec<f32> = (0..n + 3).map(|_| normal_f32(&mut rng)).collect();
    let x = WgpuBuffer::from_bytes(device, bytemuck::cast_slice(&data)).unwrap();
    // Two dispatches with different immediates: each sees its own.
    device
        .dispatch(&pipeline, &[&x], Some(&scale_launch(n, 2.0)), [n.div_ceil(64), 1, 1])
        .unwrap();
    device
        .dispatch(
            &pipeline,
            &[&x],
            Some(&scale_launch(n / 2, 3.0)),
            [n.div_ceil(64), 1, 1],
        )
        .unwrap();
    let got: Vec<f32> = bytemuck::cast_slice(&x.read().unwrap()).to_vec();
    for (i, (&g, &d)) in got.iter().zip(&data).enumerate() {
        let want = if i < (n / 2) as usize {
            d * 2.0 * 3.0
        } else if i < n as usize {
            d * 2.0
        } else {
            d
        };
        assert_eq!(g.to_bits(), want.to_bits(), "element {i}");
    }

    // Wrong byte counts are errors naming the pipeline and both sizes.
    match device.dispatch(&pipeline, &[&x], Some(&[0u8; 4]), [1, 1, 1]) {
        Err(WgpuError::InvalidDispatch { what }) => {
            assert!(
                what.contains("`scale` reads 8 bytes of immediates; 4 were given"),
                "{what}"
            )
        }
        other => panic!("expected InvalidDispatch, got {other:?}"),
    }
    match device.dispatch(&pipeline, &[&x], None, [1, 1, 1]) {
        Err(WgpuError::InvalidDispatch { what }) => assert!(what.contains("no launch bytes"), "{what}"),
        other => panic!("expected InvalidDispatch, got {other:?}"),
    }
    // More immediates than the device has room for, or a size that is not a multiple of 4.
    for bytes in [room + 4, 6] {
        match device.create_pipeline(
            KernelSource::Wgsl(SCALE_IMMEDIATE_WGSL.into()),
            "scale",
            BindingLayout::with_immediates(1, bytes),
        ) {
            Err(WgpuError::InvalidArgument { what }) => {
                assert!(what.contains(&format!("{bytes} bytes of immediates")), "{what}")
            }
            other => panic!("expected InvalidArgument for {bytes} bytes, got {other:?}"),
        }
    }
}
