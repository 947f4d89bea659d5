//! Launching a kernel: grid and block checks against the device, argument marshalling.

use std::ffi::c_void;

use cudarc::driver::result;

use super::context::CudaDevice;
use super::error::{CudaError, DriverResultExt};
use super::function::{CudaFunction, CudaKernelInfo};
use super::properties::CudaDeviceProperties;
use super::tensor_map::CudaTensorMap;

/// Grid and block shape of a launch, and its dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y and z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y and z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_shared_bytes: u32,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, with no dynamic shared memory.
    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> Self {
        LaunchConfig {
            grid,
            block,
            dynamic_shared_bytes: 0,
        }
    }

    /// A 1-D launch with enough blocks of `block_size` threads to cover `n` elements.
    /// Counts past `u32::MAX` blocks saturate, and are then refused at launch.
    pub fn for_elements(n: usize, block_size: u32) -> Self {
        let blocks = n.div_ceil(block_size.max(1) as usize);
        Self::new((u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1), (block_size, 1, 1))
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn with_dynamic_shared(mut self, bytes: u32) -> Self {
        self.dynamic_shared_bytes = bytes;
        self
    }

    /// Threads per block.
    pub fn threads_per_block(&self) -> u64 {
        u64::from(self.block.0) * u64::from(self.block.1) * u64::from(self.block.2)
    }
}

/// One kernel argument, passed by value as the kernel's parameter of the same size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// A device address (a `.u64` pointer parameter).
    Ptr(u64),
    /// `.s8`
    I8(i8),
    /// `.u8`
    U8(u8),
    /// `.s16`
    I16(i16),
    /// `.u16`
    U16(u16),
    /// `.s32`
    I32(i32),
    /// `.u32`
    U32(u32),
    /// `.s64`
    I64(i64),
    /// `.u64` (a number, not an address)
    U64(u64),
    /// `.f16` / `.b16` holding a half.
    F16(half::f16),
    /// `.b16` holding a bfloat16.
    BF16(half::bf16),
    /// `.f32`
    F32(f32),
    /// `.f64`
    F64(f64),
    /// A `.param .align 64 .b8 [128]`: an encoded tensor map, by value.
    TensorMap(CudaTensorMap),
}

impl KernelArg {
    /// Size of the value in bytes, as the kernel parameter must have.
    pub fn size_bytes(&self) -> usize {
        match self {
            KernelArg::I8(_) | KernelArg::U8(_) => 1,
            KernelArg::I16(_) | KernelArg::U16(_) | KernelArg::F16(_) | KernelArg::BF16(_) => 2,
            KernelArg::I32(_) | KernelArg::U32(_) | KernelArg::F32(_) => 4,
            KernelArg::Ptr(_) | KernelArg::I64(_) | KernelArg::U64(_) | KernelArg::F64(_) => 8,
            KernelArg::TensorMap(_) => CudaTensorMap::BYTES,
        }
    }

    /// The variant's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            KernelArg::Ptr(_) => "Ptr",
            KernelArg::I8(_) => "I8",
            KernelArg::U8(_) => "U8",
            KernelArg::I16(_) => "I16",
            KernelArg::U16(_) => "U16",
            KernelArg::I32(_) => "I32",
            KernelArg::U32(_) => "U32",
            KernelArg::I64(_) => "I64",
            KernelArg::U64(_) => "U64",
            KernelArg::F16(_) => "F16",
            KernelArg::BF16(_) => "BF16",
            KernelArg::F32(_) => "F32",
            KernelArg::F64(_) => "F64",
            KernelArg::TensorMap(_) => "TensorMap",
        }
    }

    /// Address of the value inside `self`, as `cuLaunchKernel`'s parameter array wants.
    fn value_ptr(&self) -> *mut c_void {
        let p: *const c_void = match self {
            KernelArg::Ptr(v) | KernelArg::U64(v) => (v as *const u64).cast(),
            KernelArg::I8(v) => (v as *const i8).cast(),
            KernelArg::U8(v) => (v as *const u8).cast(),
            KernelArg::I16(v) => (v as *const i16).cast(),
            KernelArg::U16(v) => (v as *const u16).cast(),
            KernelArg::I32(v) => (v as *const i32).cast(),
            KernelArg::U32(v) => (v as *const u32).cast(),
            KernelArg::I64(v) => (v as *const i64).cast(),
            KernelArg::F16(v) => (v as *const half::f16).cast(),
            KernelArg::BF16(v) => (v as *const half::bf16).cast(),
            KernelArg::F32(v) => (v as *const f32).cast(),
            KernelArg::F64(v) => (v as *const f64).cast(),
            KernelArg::TensorMap(v) => (v as *const CudaTensorMap).cast(),
        };
        // The driver only reads through these pointers.
        p.cast_mut()
    }
}

macro_rules! kernel_arg_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for KernelArg {
            fn from(v: $t) -> Self {
                KernelArg::$variant(v)
            }
        })*
    };
}

kernel_arg_from!(
    i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64,
    u64 => U64, half::f16 => F16, half::bf16 => BF16, f32 => F32, f64 => F64,
);

impl<T: bytemuck::Pod> From<&super::buffer::CudaBuffer<T>> for KernelArg {
    fn from(buffer: &super::buffer::CudaBuffer<T>) -> Self {
        buffer.arg()
    }
}

impl CudaDevice {
    /// Checks a launch against the device's and the kernel's limits without launching:
    /// every grid and block dimension, threads per block, shared memory, and (on drivers
    /// that report parameter sizes) the number and sizes of the arguments.
    pub fn check_launch(
        &self,
        function: &CudaFunction,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<(), CudaError> {
        // A kernel of a lost context is lost with it, even where a new context happens to
        // have the old one's handle.
        function.module().health.check()?;
        if **function.module().ctx != **self.ctx() {
            return Err(CudaError::InvalidLaunch {
                what: format!(
                    "kernel `{}` was loaded on device {} but is launched on device {}",
                    function.name(),
                    function.module().props.ordinal,
                    self.ordinal()
                ),
            });
        }
        check_launch(
            self.properties(),
            function.name(),
            function.info(),
            function.param_sizes(),
            config,
            args,
        )
    }

    /// Launches `function` on this device's stream and returns without waiting.
    ///
    /// The launch is checked first (see [`Self::check_launch`]); a check that fails returns
    /// [`CudaError::InvalidLaunch`] or [`CudaError::OutOfSharedMemory`] and nothing runs.
    /// More than 48 KiB of dynamic shared memory is opted into automatically. Faults inside
    /// the kernel are reported by the next [`Self::synchronize`] or download.
    ///
    /// # Safety
    ///
    /// The kernel runs with the given arguments as they are: every [`KernelArg::Ptr`] must
    /// be the address of live device memory (e.g. [`super::CudaBuffer::device_ptr`]) large
    /// enough for every access the kernel makes, the memory must not be freed before the
    /// kernel finishes except by buffers dropped after the launch (frees are ordered on the
    /// stream), and each argument must have the type the kernel's parameter expects.
    pub unsafe fn launch(
        &self,
        function: &CudaFunction,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<(), CudaError> {
        self.check_launch(function, config, args)?;
        function.allow_dynamic_shared_memory(config.dynamic_shared_bytes as usize)?;
        self.bind()?;
        let mut params: Vec<*mut c_void> = args.iter().map(KernelArg::value_ptr).collect();
        let LaunchConfig {
            grid,
            block,
            dynamic_shared_bytes,
        } = *config;
        // SAFETY: the function belongs to this context (checked), the shape and shared
        // memory were checked against the limits, `params` points into `args`, which
        // outlives the call (the driver copies the values before returning); the caller
        // vouches for the pointer arguments.
        let launched = unsafe {
            result::launch_kernel(
                function.cu_function(),
                grid,
                block,
                dynamic_shared_bytes,
                self.stream().cu_stream(),
                &mut params,
            )
        }
        .call("cuLaunchKernel");
        self.health().note(launched)
    }
}

fn invalid(what: String) -> CudaError {
    CudaError::InvalidLaunch { what }
}

/// The launch checks, on plain data so that they can be tested without a device.
pub(crate) fn check_launch(
    props: &CudaDeviceProperties,
    name: &str,
    info: &CudaKernelInfo,
    param_sizes: Option<&[usize]>,
    config: &LaunchConfig,
    args: &[KernelArg],
) -> Result<(), CudaError> {
    let (gx, gy, gz) = config.grid;
    let (bx, by, bz) = config.block;
    let dims = [
        ("grid.x", gx, props.max_grid_dim[0]),
        ("grid.y", gy, props.max_grid_dim[1]),
        ("grid.z", gz, props.max_grid_dim[2]),
        ("block.x", bx, props.max_block_dim[0]),
        ("block.y", by, props.max_block_dim[1]),
        ("block.z", bz, props.max_block_dim[2]),
    ];
    for (dim, value, limit) in dims {
        if value == 0 {
            return Err(invalid(format!(
                "{dim} of `{name}` is 0; every grid and block dimension must be at least 1"
            )));
        }
        if value > limit {
            return Err(invalid(format!(
                "{dim} of `{name}` is {value}, above the device limit of {limit}"
            )));
        }
    }
    let threads = config.threads_per_block();
    if threads > u64::from(props.max_threads_per_block) {
        return Err(invalid(format!(
            "block {bx}x{by}x{bz} of `{name}` has {threads} threads, above the device limit \
             of {} threads per block",
            props.max_threads_per_block
        )));
    }
    if threads > u64::from(info.max_threads_per_block) {
        return Err(invalid(format!(
            "block {bx}x{by}x{bz} of `{name}` has {threads} threads, above this kernel's \
             limit of {} threads per block (it uses {} registers per thread)",
            info.max_threads_per_block, info.num_regs
        )));
    }
    let shared = info.static_shared_bytes + config.dynamic_shared_bytes as usize;
    if shared > props.shared_memory_per_block_optin {
        return Err(CudaError::OutOfSharedMemory {
            requested: shared,
            limit: props.shared_memory_per_block_optin,
        });
    }
    if let Some(sizes) = param_sizes {
        if sizes.len() != args.len() {
            return Err(invalid(format!(
                "`{name}` takes {} parameters but {} arguments were given",
                sizes.len(),
                args.len()
            )));
        }
        for (i, (arg, &size)) in args.iter().zip(sizes).enumerate() {
            if arg.size_bytes() != size {
                return Err(invalid(format!(
                    "argument {i} of `{name}` is {}({} bytes) but the kernel's parameter {i} \
                     is {size} bytes",
                    arg.kind(),
                    arg.size_bytes()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::properties::tests::h100_like;

    fn info() -> CudaKernelInfo {
        CudaKernelInfo {
            num_regs: 16,
            local_size_bytes: 0,
            static_shared_bytes: 1024,
            const_size_bytes: 0,
            max_threads_per_block: 1024,
            ptx_version: 80,
            binary_version: 90,
        }
    }

    fn check(config: LaunchConfig, args: &[KernelArg]) -> Result<(), CudaError> {
        check_launch(&h100_like(), "k", &info(), Some(&[8, 8, 4]), &config, args)
    }

    fn what(r: Result<(), CudaError>) -> String {
        match r {
            Err(CudaError::InvalidLaunch { what }) => what,
            other => panic!("expected InvalidLaunch, got {other:?}"),
        }
    }

    const ARGS: [KernelArg; 3] = [KernelArg::Ptr(0x1000), KernelArg::Ptr(0x2000), KernelArg::U32(7)];

    #[test]
    fn accepts_a_valid_launch() {
        check(LaunchConfig::new((4, 1, 1), (256, 1, 1)), &ARGS).unwrap();
        check(LaunchConfig::for_elements(98433, 128), &ARGS).unwrap();
        check(LaunchConfig::new((1, 1, 1), (32, 32, 1)), &ARGS).unwrap();
    }

    #[test]
    fn names_the_bad_dimension_value_and_limit() {
        let w = what(check(LaunchConfig::new((0, 1, 1), (128, 1, 1)), &ARGS));
        assert!(w.contains("grid.x") && w.contains("is 0"), "{w}");
        let w = what(check(LaunchConfig::new((1, 70000, 1), (128, 1, 1)), &ARGS));
        assert!(
            w.contains("grid.y") && w.contains("70000") && w.contains("65535"),
            "{w}"
        );
        let w = what(check(LaunchConfig::new((1, 1, 1), (1, 1, 65)), &ARGS));
        assert!(w.contains("block.z") && w.contains("65") && w.contains("64"), "{w}");
        let w = what(check(LaunchConfig::new((1, 1, 1), (1024, 2, 1)), &ARGS));
        assert!(w.contains("2048 threads") && w.contains("1024"), "{w}");
        let w = what(check(LaunchConfig::new((1, 1, 1), (2048, 1, 1)), &ARGS));
        assert!(w.contains("block.x") && w.contains("2048") && w.contains("1024"), "{w}");
    }

    #[test]
    fn kernel_thread_limit_is_checked() {
        let mut i = info();
        i.max_threads_per_block = 640;
        i.num_regs = 96;
        let cfg = LaunchConfig::new((1, 1, 1), (1024, 1, 1));
        let w = what(check_launch(&h100_like(), "k", &i, None, &cfg, &[]));
        assert!(w.contains("640") && w.contains("96 registers"), "{w}");
    }

    #[test]
    fn shared_memory_over_the_opt_in_limit() {
        let cfg = LaunchConfig::new((1, 1, 1), (128, 1, 1)).with_dynamic_shared(232448);
        match check(cfg, &ARGS) {
            Err(CudaError::OutOfSharedMemory { requested, limit }) => {
                assert_eq!(requested, 232448 + 1024);
                assert_eq!(limit, 232448);
            }
            other => panic!("expected OutOfSharedMemory, got {other:?}"),
        }
        // Above 48 KiB but within the opt-in maximum: allowed (opted into at launch).
        check(cfg.with_dynamic_shared(100 * 1024), &ARGS).unwrap();
    }

    #[test]
    fn argument_count_and_sizes() {
        let cfg = LaunchConfig::new((1, 1, 1), (32, 1, 1));
        let w = what(check(cfg, &ARGS[..2]));
        assert!(w.contains("3 parameters") && w.contains("2 arguments"), "{w}");
        let w = what(check(cfg, &[KernelArg::Ptr(1), KernelArg::I32(2), KernelArg::U32(3)]));
        assert!(
            w.contains("argument 1") && w.contains("I32(4 bytes)") && w.contains("8 bytes"),
            "{w}"
        );
        // Without parameter sizes from the driver, arguments are not checked.
        check_launch(&h100_like(), "k", &info(), None, &cfg, &[]).unwrap();
    }

    #[test]
    fn args_point_at_their_values() {
        let args = [KernelArg::F32(1.5), KernelArg::Ptr(0xdead_beef), KernelArg::I8(-3)];
        // SAFETY: the pointers point into `args`, which is alive, at values of these types.
        unsafe {
            assert_eq!(*(args[0].value_ptr() as *const f32), 1.5);
            assert_eq!(*(args[1].value_ptr() as *const u64), 0xdead_beef);
            assert_eq!(*(args[2].value_ptr() as *const i8), -3);
        }
        assert_eq!(KernelArg::from(half::f16::ONE).size_bytes(), 2);
        let map = KernelArg::TensorMap(CudaTensorMap::default());
        assert_eq!((map.size_bytes(), map.kind()), (128, "TensorMap"));
        // The driver copies the 128 bytes from the map itself, which is 64-byte aligned.
        assert_eq!(map.value_ptr() as usize % 64, 0);
        assert_eq!(KernelArg::from(7u64), KernelArg::U64(7));
    }

    #[test]
    fn for_elements_covers_ragged_sizes() {
        let c = LaunchConfig::for_elements(98433, 256);
        assert_eq!(c.grid, (385, 1, 1));
        assert_eq!(c.block, (256, 1, 1));
        assert_eq!(LaunchConfig::for_elements(0, 256).grid.0, 0);
    }
}
