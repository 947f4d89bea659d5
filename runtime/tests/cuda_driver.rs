//! End-to-end tests of the CUDA driver layer on a real GPU.
//!
//! Without a CUDA driver or device each test prints "no CUDA device: skipped" and passes,
//! unless `RUTILE_REQUIRE` names `cuda` (`RUTILE_REQUIRE=cuda,vulkan` on GPU machines, where
//! silently skipping would hide a broken setup), which turns a missing device into a
//! failure naming why it did not open.

mod cuda_support;

use cuda_support::gpu_or_skip;
use rutile::cuda::{CudaBuffer, CudaError, KernelArg, LaunchConfig};
use rutile_ir::testing::Rng;

const VEC_ADD_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry vec_add(
    .param .u64 a,
    .param .u64 b,
    .param .u64 c,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}
"#;

/// One block fills `words` u32 of dynamic shared memory with `3 i + 1`, then writes them
/// out reversed: `out[i] = 3 (words - 1 - i) + 1`.
const SMEM_REVERSE_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 smem[];

.visible .entry smem_reverse(
    .param .u64 out,
    .param .u32 words
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [words];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, smem;
    mov.u32 %r5, %r2;
FILL:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra FILLED;
    mad.lo.u32 %r6, %r5, 3, 1;
    shl.b32 %r7, %r5, 2;
    add.u32 %r8, %r4, %r7;
    st.shared.u32 [%r8], %r6;
    add.u32 %r5, %r5, %r3;
    bra FILL;
FILLED:
    bar.sync 0;
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r5, %r2;
COPY:
    setp.ge.u32 %p2, %r5, %r1;
    @%p2 bra DONE;
    sub.u32 %r9, %r1, 1;
    sub.u32 %r9, %r9, %r5;
    shl.b32 %r7, %r9, 2;
    add.u32 %r8, %r4, %r7;
    ld.shared.u32 %r10, [%r8];
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r10;
    add.u32 %r5, %r5, %r3;
    bra COPY;
DONE:
    ret;
}
"#;

/// PTX with an unknown instruction on line 8.
const BROKEN_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry broken()
{
    .reg .f32 %f<2>;
    bogus.instruction.f32 %f1, %f0;
    ret;
}
"#;

/// Non-zero pseudo-random floats in ±[0.5, 1.5), from a fixed seed.
fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let magnitudes = rng.f32s(n, 0.5, 1.5);
    magnitudes
        .into_iter()
        .map(|m| if rng.next_u64() & 1 == 0 { m } else { -m })
        .collect()
}

#[test]
fn gpu_vector_add_matches_cpu() {
    let Some(device) = gpu_or_skip("gpu_vector_add_matches_cpu") else {
        return;
    };
    println!("{}", device.properties());
    let module = device.load_ptx(VEC_ADD_PTX).expect("vec_add PTX loads");
    println!("JIT log:\n{}", module.jit_log());
    let kernel = module.function("vec_add").unwrap();
    let info = *kernel.info();
    println!("vec_add: {info}");
    assert!(info.num_regs > 0, "{info}");
    assert_eq!(info.local_size_bytes, 0, "no spills expected: {info}");
    assert_eq!(info.ptx_version, 80);
    assert_eq!(info.binary_version, device.properties().sm_version());
    if let Some(sizes) = kernel.param_sizes() {
        assert_eq!(sizes, &[8, 8, 8, 4]);
    }

    let n = 98_433;
    let a = random_f32(n, 0x9e37_79b9_7f4a_7c15);
    let b = random_f32(n, 0xd1b5_4a32_d192_ed03);
    assert!(a.iter().chain(&b).all(|&x| x != 0.0));
    let da = CudaBuffer::from_slice(&device, &a).unwrap();
    let db = CudaBuffer::from_slice(&device, &b).unwrap();
    let dc = CudaBuffer::<f32>::zeroed(&device, n).unwrap();
    assert_eq!((dc.len(), dc.size_bytes()), (n, 4 * n));
    let config = LaunchConfig::for_elements(n, 256);
    let args = [da.arg(), db.arg(), (&dc).into(), KernelArg::U32(n as u32)];
    // SAFETY: a, b and c hold n f32 each; the kernel touches indices below n only.
    unsafe { device.launch(&kernel, &config, &args) }.unwrap();
    let c = dc.download().unwrap();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let wrong = c
        .iter()
        .zip(&expected)
        .filter(|(g, e)| g.to_bits() != e.to_bits())
        .count();
    assert_eq!(wrong, 0, "{wrong} of {n} sums differ from the CPU's");

    let occupancy = kernel.occupancy(256, 0).unwrap();
    println!("occupancy at 256 threads: {occupancy:?}");
    assert!(occupancy.blocks_per_multiprocessor >= 1);
    assert!(occupancy.fraction() > 0.0 && occupancy.fraction() <= 1.0);
}

#[test]
fn gpu_invalid_launches_are_refused() {
    let Some(device) = gpu_or_skip("gpu_invalid_launches_are_refused") else {
        return;
    };
    let module = device.load_ptx(VEC_ADD_PTX).unwrap();
    let kernel = module.function("vec_add").unwrap();
    let out = CudaBuffer::<f32>::zeroed(&device, 16).unwrap();
    let args = [out.arg(), out.arg(), out.arg(), KernelArg::U32(0)];

    let grid_zero = LaunchConfig::new((0, 1, 1), (128, 1, 1));
    // SAFETY: refused before reaching the driver.
    match unsafe { device.launch(&kernel, &grid_zero, &args) } {
        Err(CudaError::InvalidLaunch { what }) => assert!(what.contains("grid.x"), "{what}"),
        other => panic!("grid of 0 blocks: expected InvalidLaunch, got {other:?}"),
    }
    let big_block = LaunchConfig::new((1, 1, 1), (2048, 1, 1));
    // SAFETY: refused before reaching the driver.
    match unsafe { device.launch(&kernel, &big_block, &args) } {
        Err(CudaError::InvalidLaunch { what }) => {
            assert!(what.contains("2048") && what.contains("1024"), "{what}")
        }
        other => panic!("2048-thread block: expected InvalidLaunch, got {other:?}"),
    }
    let too_many_blocks = LaunchConfig::new((1, 1 << 20, 1), (32, 1, 1));
    assert!(matches!(
        device.check_launch(&kernel, &too_many_blocks, &args),
        Err(CudaError::InvalidLaunch { .. })
    ));
    if kernel.param_sizes().is_some() {
        let ok = LaunchConfig::new((1, 1, 1), (32, 1, 1));
        match device.check_launch(&kernel, &ok, &args[..3]) {
            Err(CudaError::InvalidLaunch { what }) => {
                assert!(what.contains("4 parameters"), "{what}")
            }
            other => panic!("missing argument: expected InvalidLaunch, got {other:?}"),
        }
        let wrong_type = [out.arg(), KernelArg::U32(1), out.arg(), KernelArg::U32(0)];
        match device.check_launch(&kernel, &ok, &wrong_type) {
            Err(CudaError::InvalidLaunch { what }) => {
                assert!(what.contains("argument 1"), "{what}")
            }
            other => panic!("u32 for a pointer: expected InvalidLaunch, got {other:?}"),
        }
    }
    // The device is still usable after refused launches.
    device.synchronize().unwrap();
    assert!(matches!(
        module.function("no_such_kernel"),
        Err(CudaError::FunctionNotFound { .. })
    ));
}

#[test]
fn gpu_malformed_ptx_returns_jit_log() {
    let Some(device) = gpu_or_skip("gpu_malformed_ptx_returns_jit_log") else {
        return;
    };
    match device.load_ptx(BROKEN_PTX) {
        Err(CudaError::JitFailed { code, log }) => {
            println!("JIT failed with {code}; log:\n{log}");
            assert!(!log.is_empty());
            assert!(log.contains("bogus") || log.contains("line"), "{log}");
        }
        other => panic!("expected JitFailed, got {other:?}"),
    }
    assert!(matches!(
        device.load_ptx("bad\0ptx"),
        Err(CudaError::InvalidArgument { .. })
    ));
    // A failed load leaves the context usable.
    device.load_ptx(VEC_ADD_PTX).unwrap();
}

#[test]
fn gpu_timer_measures_kernel_time() {
    let Some(device) = gpu_or_skip("gpu_timer_measures_kernel_time") else {
        return;
    };
    let kernel = device.load_ptx(VEC_ADD_PTX).unwrap().function("vec_add").unwrap();
    let n = 1 << 24;
    let a = CudaBuffer::<f32>::zeroed(&device, n).unwrap();
    let b = CudaBuffer::<f32>::zeroed(&device, n).unwrap();
    let c = CudaBuffer::<f32>::zeroed(&device, n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let args = [a.arg(), b.arg(), c.arg(), KernelArg::U32(n as u32)];
    let timer = device.timer().unwrap();
    assert!(matches!(timer.elapsed_ms(), Err(CudaError::InvalidArgument { .. })));
    timer.start().unwrap();
    for _ in 0..10 {
        // SAFETY: a, b and c hold n f32 each.
        unsafe { device.launch(&kernel, &config, &args) }.unwrap();
    }
    timer.stop().unwrap();
    let ms = timer.elapsed_ms().unwrap();
    let gbps = 10.0 * 3.0 * 4.0 * n as f64 / (ms as f64 * 1e-3) / 1e9;
    println!("10 x vec_add of 2^24 f32: {ms:.3} ms ({gbps:.0} GB/s moved)");
    assert!(ms > 0.0 && ms.is_finite());
}

#[test]
fn gpu_dynamic_shared_memory_above_48k() {
    let Some(device) = gpu_or_skip("gpu_dynamic_shared_memory_above_48k") else {
        return;
    };
    let props = device.properties().clone();
    let kernel = device
        .load_ptx(SMEM_REVERSE_PTX)
        .unwrap()
        .function("smem_reverse")
        .unwrap();
    assert_eq!(kernel.info().static_shared_bytes, 0);
    let bytes = (100 * 1024).min(props.shared_memory_per_block_optin) as u32;
    let words = bytes as usize / 4;
    let out = CudaBuffer::<u32>::zeroed(&device, words).unwrap();
    let config = LaunchConfig::new((1, 1, 1), (256, 1, 1)).with_dynamic_shared(bytes);
    let args = [out.arg(), KernelArg::U32(words as u32)];
    // SAFETY: out holds `words` u32, the kernel writes exactly those.
    unsafe { device.launch(&kernel, &config, &args) }.unwrap();
    assert!(kernel.max_dynamic_shared_memory() >= bytes as usize);
    let got = out.download().unwrap();
    for (i, &v) in got.iter().enumerate() {
        assert_eq!(v, 3 * (words - 1 - i) as u32 + 1, "element {i}");
    }
    let occupancy = kernel.occupancy(256, bytes as usize).unwrap();
    println!("smem_reverse with {bytes} B dynamic shared: {occupancy:?}");
    assert!(occupancy.blocks_per_multiprocessor >= 1);

    let too_much = props.shared_memory_per_block_optin + 1;
    match kernel.set_max_dynamic_shared_memory(too_much) {
        Err(CudaError::OutOfSharedMemory { requested, limit }) => {
            assert_eq!((requested, limit), (too_much, props.shared_memory_per_block_optin))
        }
        other => panic!("expected OutOfSharedMemory, got {other:?}"),
    }
    let config = config.with_dynamic_shared(too_much as u32);
    // SAFETY: refused before reaching the driver.
    let refused = unsafe { device.launch(&kernel, &config, &args) };
    assert!(
        matches!(refused, Err(CudaError::OutOfSharedMemory { .. })),
        "{refused:?}"
    );
}

#[test]
fn gpu_buffer_copies_check_sizes() {
    let Some(device) = gpu_or_skip("gpu_buffer_copies_check_sizes") else {
        return;
    };
    let mut buffer = CudaBuffer::<u16>::zeroed(&device, 5).unwrap();
    assert_eq!(buffer.download().unwrap(), vec![0; 5]);
    assert_eq!(
        buffer.upload(&[1, 2, 3]),
        Err(CudaError::BufferSize { expected: 5, got: 3 })
    );
    buffer.upload(&[1, 2, 3, 4, 5]).unwrap();
    let mut short = [0u16; 4];
    assert_eq!(
        buffer.download_into(&mut short),
        Err(CudaError::BufferSize { expected: 5, got: 4 })
    );
    assert_eq!(buffer.download().unwrap(), vec![1, 2, 3, 4, 5]);
    buffer.fill_zero().unwrap();
    assert_eq!(buffer.download().unwrap(), vec![0; 5]);
    let empty = CudaBuffer::<f64>::from_slice(&device, &[]).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.download().unwrap(), Vec::<f64>::new());
}
