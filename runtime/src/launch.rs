//! Launch arguments and configuration, and their checks against a kernel's parameters.

use crate::buffer::{Buffer, DeviceBuffer, Element};
use crate::compiled::CompiledKernel;
use crate::error::{Error, Result};
use rutile_ir::analysis::extent::LaunchExtent;
use rutile_ir::interp::ArgValue;
use rutile_ir::target::Specialization;
use rutile_ir::{Elem, Kernel, ScalarType};

/// One argument of a launch: a buffer for a pointer parameter, or a scalar of exactly the
/// parameter's type.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A buffer, for a pointer parameter: its element type must be the pointee type, and it
    /// must belong to the device that launches.
    Buffer(&'a DeviceBuffer),
    /// A scalar for a parameter of type `bool`.
    Bool(bool),
    /// A scalar for a parameter of type `i8`.
    I8(i8),
    /// A scalar for a parameter of type `i16`.
    I16(i16),
    /// A scalar for a parameter of type `i32`.
    I32(i32),
    /// A scalar for a parameter of type `i64`.
    I64(i64),
    /// A scalar for a parameter of type `u8`.
    U8(u8),
    /// A scalar for a parameter of type `u16`.
    U16(u16),
    /// A scalar for a parameter of type `u32`.
    U32(u32),
    /// A scalar for a parameter of type `u64` (the interpreter takes at most `i64::MAX`).
    U64(u64),
    /// A scalar for a parameter of type `f32`.
    F32(f32),
    /// A scalar for a parameter of type `f64`.
    F64(f64),
}

impl Arg<'_> {
    /// The parameter type this argument fits, `None` for buffers.
    pub fn scalar_type(&self) -> Option<ScalarType> {
        Some(match self {
            Arg::Buffer(_) => return None,
            Arg::Bool(_) => ScalarType::Bool,
            Arg::I8(_) => ScalarType::I8,
            Arg::I16(_) => ScalarType::I16,
            Arg::I32(_) => ScalarType::I32,
            Arg::I64(_) => ScalarType::I64,
            Arg::U8(_) => ScalarType::U8,
            Arg::U16(_) => ScalarType::U16,
            Arg::U32(_) => ScalarType::U32,
            Arg::U64(_) => ScalarType::U64,
            Arg::F32(_) => ScalarType::F32,
            Arg::F64(_) => ScalarType::F64,
        })
    }
    /// The integer value, for specialization.
    pub(crate) fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Arg::I8(v) => v as i128,
            Arg::I16(v) => v as i128,
            Arg::I32(v) => v as i128,
            Arg::I64(v) => v as i128,
            Arg::U8(v) => v as i128,
            Arg::U16(v) => v as i128,
            Arg::U32(v) => v as i128,
            Arg::U64(v) => v as i128,
            _ => return None,
        })
    }
    fn describe(&self) -> String {
        match self {
            Arg::Buffer(b) => format!("a buffer of {} ({} elements)", b.elem, b.len),
            other => other.scalar_type().map(|t| t.name().to_string()).unwrap_or_default(),
        }
    }
}

impl<'a> From<&'a DeviceBuffer> for Arg<'a> {
    fn from(b: &'a DeviceBuffer) -> Self {
        Arg::Buffer(b)
    }
}
impl<'a, T: Element> From<&'a Buffer<T>> for Arg<'a> {
    fn from(b: &'a Buffer<T>) -> Self {
        Arg::Buffer(b.raw())
    }
}
macro_rules! scalar_args {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(x: $t) -> Self { Arg::$v(x) }
        }
    )*};
}
scalar_args!(bool => Bool, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, f32 => F32, f64 => F64);

/// How to launch a kernel: the grid of programs, the compilation options, and whether to
/// check the launch in the interpreter first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Programs along x, y and z.
    pub grid: [u32; 3],
    /// Warps per program (Triton's `num_warps`).
    pub num_warps: u32,
    /// Software-pipelining depth of loops (Triton's `num_stages`); a hint.
    pub num_stages: u32,
    /// The persistent schedule: the device runs as many programs as it holds at once and
    /// each walks the grid's programs in order (`program_id` and `num_programs` are those
    /// of the grid asked for), instead of one program per grid entry. The results are the
    /// same, except for a kernel whose programs wait for each other (a spin lock on a flag
    /// a later program sets), which may then wait forever. CUDA and Vulkan; the
    /// interpreter runs the plain grid.
    pub persistent: bool,
    /// Warp specialization: where a loop's `dot` operands all come through the tensor
    /// memory accelerator (Hopper), a producer warpgroup of four more warps issues the
    /// copies and the `num_warps` warps only compute. A hint: elsewhere the kernel is
    /// compiled as without it.
    pub warp_specialize: bool,
    /// Where the tensor memory accelerator feeds a loop (Hopper), whether its boxes may also
    /// span a pointer's outer dimensions and unmasked ones (`Target::tma_outer` in
    /// rutile-ir: attention's K and V tiles, whose pointers carry a head offset, then go
    /// through it). Off by default: on an H200 attention ran no faster with it
    /// (`docs/performance.md`); `RUTILE_TMA_OUTER=1` turns it on for every launch.
    /// Elsewhere it changes nothing.
    pub tma_outer: bool,
    /// The most registers a thread may use (Triton's `maxnreg`), 16 to 255: fewer let more
    /// programs share a multiprocessor (two programs of 256 threads need at most 128
    /// each), at the price of spills where the kernel needs more. Through CUDA it is the
    /// PTX's `.maxnreg`; Vulkan has no such control and ignores it, as the interpreter
    /// does. `None` (the default): the compiler's choice.
    pub maxnreg: Option<u32>,
    /// Programs per thread-block cluster, consecutive along grid axis 0, 1 to 16: the
    /// programs a `cluster_reduce` combines over (through their shared memory on CUDA,
    /// sm_90 and later; the interpreter runs a cluster's programs together). The grid's x
    /// must be a multiple of it, and the device must have clusters that large
    /// ([`DeviceProperties::max_cluster`](crate::DeviceProperties::max_cluster)): Vulkan has
    /// none and refuses more than 1. 1 (the default): no cluster.
    pub cluster: u32,
    /// Programs one thread block runs, consecutive along grid axis 0 (1, the default: one).
    /// With [`warp_specialize`](Self::warp_specialize) on CUDA (Hopper), that many groups of
    /// `num_warps` warps, each its own program, share one producer warpgroup that copies the
    /// loop's operands once for all of them: attention's K and V, the same for every query
    /// block of a head (FlashAttention-3's three consumer warpgroups). The kernel must load
    /// its pipelined operands independently of `program_id(0)` (attention without the
    /// causal mask does; a kernel that does not is refused when compiled, naming the
    /// reason). The grid stays the program grid: the runtime launches `grid[0] /
    /// programs_per_block` blocks, rounded up, and programs past the grid's end store
    /// nothing. Vulkan accepts only 1; the interpreter runs one program at a time, whatever
    /// it is.
    pub programs_per_block: u32,
    /// Run the launch in the bounds-checked interpreter before the device, and launch on
    /// the device only if it does not fault ([`LaunchConfig::check_bounds`]).
    pub check_bounds: bool,
}

impl LaunchConfig {
    /// A launch of `grid` programs with 4 warps each.
    pub fn new(grid: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            num_warps: 4,
            num_stages: 3,
            persistent: false,
            warp_specialize: false,
            tma_outer: false,
            maxnreg: None,
            cluster: 1,
            programs_per_block: 1,
            check_bounds: false,
        }
    }
    /// A 1-D grid.
    pub fn grid1(programs: u32) -> Self {
        Self::new([programs, 1, 1])
    }
    /// Sets the warps per program, [`LaunchConfig::num_warps`](#structfield.num_warps)
    /// (4 by default).
    pub fn num_warps(mut self, num_warps: u32) -> Self {
        self.num_warps = num_warps;
        self
    }
    /// Sets the software-pipelining depth of loops,
    /// [`LaunchConfig::num_stages`](#structfield.num_stages) (3 by default).
    pub fn num_stages(mut self, num_stages: u32) -> Self {
        self.num_stages = num_stages;
        self
    }
    /// See [`LaunchConfig::persistent`](#structfield.persistent).
    pub fn persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }
    /// See [`LaunchConfig::warp_specialize`](#structfield.warp_specialize).
    pub fn warp_specialize(mut self, warp_specialize: bool) -> Self {
        self.warp_specialize = warp_specialize;
        self
    }
    /// See [`LaunchConfig::tma_outer`](#structfield.tma_outer).
    pub fn tma_outer(mut self, tma_outer: bool) -> Self {
        self.tma_outer = tma_outer;
        self
    }
    /// See [`LaunchConfig::maxnreg`](#structfield.maxnreg).
    pub fn maxnreg(mut self, maxnreg: Option<u32>) -> Self {
        self.maxnreg = maxnreg;
        self
    }
    /// See [`LaunchConfig::cluster`](#structfield.cluster).
    pub fn cluster(mut self, programs: u32) -> Self {
        self.cluster = programs;
        self
    }
    /// See [`LaunchConfig::programs_per_block`](#structfield.programs_per_block).
    pub fn programs_per_block(mut self, programs: u32) -> Self {
        self.programs_per_block = programs;
        self
    }
    /// A debugging aid: run this launch in the interpreter with bounds checks before the
    /// device. [`DeviceExt::launch`](crate::DeviceExt::launch) then copies the argument
    /// buffers to the host, runs the same grid and arguments in the interpreter, and
    /// returns its first fault ([`Error::BoundsCheck`]: the op, the author's source line,
    /// the program and the offset) without launching on the device, so no buffer is
    /// written; without a fault it launches on the device as usual. It costs a copy of
    /// every buffer and an interpreter run, and waits for the device's earlier work.
    ///
    /// `RUTILE_CHECK_BOUNDS=1` ([`crate::CHECK_BOUNDS_ENV`]) turns it on for every launch.
    pub fn check_bounds(mut self, check: bool) -> Self {
        self.check_bounds = check;
        self
    }
}

/// The checks of every launch, on every device: the arguments fit the kernel's parameters
/// and belong to `device`, the grid is within `max_grid`, and no unmasked access whose
/// extent the launch determines goes past the end of its buffer.
pub(crate) fn check_launch(
    compiled: &CompiledKernel,
    grid: [u32; 3],
    args: &[Arg<'_>],
    device: u64,
    max_grid: [u32; 3],
) -> Result<()> {
    let kernel = &compiled.kernel;
    check_args(kernel, args, device)?;
    check_specialization(compiled, args)?;
    check_grid(kernel, grid, max_grid)?;
    check_cluster_grid(kernel, grid, compiled.options.cluster)?;
    check_extent(compiled, grid, args)
}

/// Checks a launch's cluster ([`LaunchConfig::cluster`]) on every device, before anything
/// is compiled: its size, that the device (whose largest is `device_max`) has such
/// clusters, and that it goes with a plain grid.
pub(crate) fn check_cluster(kernel: &Kernel, config: &LaunchConfig, device_max: u32) -> Result<()> {
    let max = rutile_ir::lower::MAX_CLUSTER;
    let fail = |message: String| {
        Err(Error::Launch {
            kernel: kernel.name.clone(),
            message,
        })
    };
    if !(1..=max).contains(&config.cluster) {
        return fail(format!(
            "cluster = {}: a cluster groups 1 to {max} programs",
            config.cluster
        ));
    }
    if config.cluster > 1 && config.persistent {
        return fail(format!(
            "cluster = {} with a persistent grid: a persistent program walks tiles, not a cluster's share",
            config.cluster
        ));
    }
    if config.cluster > device_max {
        return fail(if device_max <= 1 {
            format!(
                "cluster = {}: the device has no thread-block clusters (they need CUDA, sm_90 on); launch with a cluster of 1 program",
                config.cluster
            )
        } else {
            format!(
                "cluster = {}: the device's clusters group at most {device_max} programs",
                config.cluster
            )
        });
    }
    Ok(())
}

/// Checks a launch's [`LaunchConfig::programs_per_block`] before anything is compiled: 1 to
/// `rutile_ir::lower::MAX_PROGRAMS_PER_BLOCK`, and more than 1 only through CUDA (the
/// interpreter runs one program at a time whatever it is: the results are the same).
pub(crate) fn check_programs_per_block(kernel: &Kernel, config: &LaunchConfig, backend: crate::Backend) -> Result<()> {
    let max = rutile_ir::lower::MAX_PROGRAMS_PER_BLOCK;
    let programs = config.programs_per_block;
    let message = if !(1..=max).contains(&programs) {
        format!("programs_per_block = {programs}: a thread block runs 1 to {max} programs")
    } else if programs > 1 && !matches!(backend, crate::Backend::Cuda | crate::Backend::Interpreter) {
        format!("programs_per_block = {programs}: {backend:?} runs one program a workgroup (several share a producer warpgroup only through CUDA, on Hopper); launch with 1")
    } else {
        return Ok(());
    };
    Err(Error::Launch {
        kernel: kernel.name.clone(),
        message,
    })
}

/// The grid's x is a whole number of clusters.
fn check_cluster_grid(kernel: &Kernel, grid: [u32; 3], cluster: u32) -> Result<()> {
    if cluster > 1 && grid[0] % cluster != 0 {
        return Err(Error::Launch {
            kernel: kernel.name.clone(),
            message: format!(
                "grid x is {}, not a multiple of the cluster's {cluster} programs",
                grid[0]
            ),
        });
    }
    Ok(())
}

/// The arguments satisfy what the kernel was compiled assuming of them (Triton's
/// specialization: integers divisible by 16, integers equal to 1). A kernel compiled for
/// `n = 4096` and launched with `n = 4000` would otherwise skip the masks its code dropped:
/// a silent wrong result, which is an error here instead.
fn check_specialization(compiled: &CompiledKernel, args: &[Arg<'_>]) -> Result<()> {
    let spec = &compiled.specialization;
    for (i, arg) in args.iter().enumerate() {
        // Buffers start at 256-byte boundaries on every backend.
        let (div, one) = arg_facts(arg, |_| true);
        let assumed = if spec.divisible_by_16.get(i) == Some(&true) && !div {
            "divisible by 16"
        } else if spec.equal_to_1.get(i) == Some(&true) && !one {
            "equal to 1"
        } else {
            continue;
        };
        let got = arg.as_i128().map_or_else(|| arg.describe(), |v| v.to_string());
        let kernel = &compiled.kernel;
        return Err(Error::Argument {
            kernel: kernel.name.clone(),
            message: format!(
                "argument {i} (`{}`): the kernel was compiled assuming it is {assumed}, got {got}; \
                 compile it for these arguments (`DeviceExt::compile_for`), or launch through \
                 `DeviceExt::launch` or a `Launcher`, which do",
                kernel.params[i].name
            ),
        });
    }
    Ok(())
}

/// Buffers too small for the kernel's unmasked accesses over this grid
/// ([`rutile_ir::analysis::extent`]).
fn check_extent(compiled: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
    let plan = &compiled.extent;
    if plan.is_empty() {
        return Ok(());
    }
    let ints: Vec<Option<i128>> = args.iter().map(Arg::as_i128).collect();
    let buffer_lens: Vec<Option<u64>> = args
        .iter()
        .map(|a| match a {
            Arg::Buffer(b) => Some(b.len as u64),
            _ => None,
        })
        .collect();
    let launch = LaunchExtent {
        grid,
        ints: &ints,
        buffer_lens: &buffer_lens,
    };
    let Some(o) = plan.check(&launch) else {
        return Ok(());
    };
    let kernel = &compiled.kernel;
    let reaches = format!(
        "argument {} (`{}`): the unmasked {} at {} reaches element",
        o.param, kernel.params[o.param as usize].name, o.op, o.loc
    );
    let grid = format!("grid [{}, {}, {}]", grid[0], grid[1], grid[2]);
    let message = if o.before_start() {
        format!("{reaches} {} with {grid}, before the start of the buffer", o.first)
    } else {
        format!(
            "{reaches} {} with {grid}, so the buffer needs {} elements; it has {}",
            o.last,
            o.needed(),
            o.len
        )
    };
    Err(Error::Argument {
        kernel: kernel.name.clone(),
        message,
    })
}

/// Checks that `args` fit `kernel`'s parameters, and that buffers belong to `device`.
pub(crate) fn check_args(kernel: &Kernel, args: &[Arg<'_>], device: u64) -> Result<()> {
    let err = |message: String| Error::Argument {
        kernel: kernel.name.clone(),
        message,
    };
    if args.len() != kernel.params.len() {
        let names: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
        return Err(err(format!(
            "expected {} arguments ({}), got {}",
            kernel.params.len(),
            names.join(", "),
            args.len()
        )));
    }
    for (i, (p, a)) in kernel.params.iter().zip(args).enumerate() {
        let ok = match (p.ty.elem, a) {
            (Elem::Ptr(pointee), Arg::Buffer(b)) => {
                if b.device != device {
                    return Err(err(format!(
                        "argument {i} (`{}`): the buffer belongs to another device",
                        p.name
                    )));
                }
                b.elem == pointee
            }
            (Elem::Scalar(s), a) => a.scalar_type() == Some(s),
            _ => false,
        };
        // No `Arg` carries a 16- or 8-bit float: say so, and what to do, rather than ask for one.
        if let (
            false,
            Elem::Scalar(
                s @ (ScalarType::F16
                | ScalarType::BF16
                | ScalarType::F8E4M3
                | ScalarType::F8E5M2
                | ScalarType::F8E4M3B15
                | ScalarType::F8E4M3Fnuz
                | ScalarType::F8E5M2Fnuz),
            ),
        ) = (ok, p.ty.elem)
        {
            return Err(err(format!(
                "argument {i} (`{}`): a {s} scalar parameter cannot be passed at launch (arguments \
                 carry 32- and 64-bit floats); declare it f32 and convert it in the kernel",
                p.name
            )));
        }
        if !ok {
            return Err(err(format!(
                "argument {i} (`{}`): expected {}, got {}",
                p.name,
                expected(p.ty.elem),
                a.describe()
            )));
        }
    }
    Ok(())
}

/// The interpreter's values for `args`; `buffer` gives the index, in the interpreter's list
/// of host buffers, of the copy of a buffer argument.
pub(crate) fn interpreter_args<'a>(
    kernel: &Kernel,
    args: &[Arg<'a>],
    mut buffer: impl FnMut(&'a DeviceBuffer) -> Result<usize>,
) -> Result<Vec<ArgValue>> {
    args.iter()
        .map(|a| {
            Ok(match *a {
                Arg::Buffer(b) => ArgValue::Ptr {
                    buffer: buffer(b)?,
                    offset: 0,
                },
                Arg::Bool(v) => ArgValue::Bool(v),
                Arg::F32(v) => ArgValue::Float(v as f64),
                Arg::F64(v) => ArgValue::Float(v),
                Arg::U64(v) => ArgValue::Int(i64::try_from(v).map_err(|_| Error::Argument {
                    kernel: kernel.name.clone(),
                    message: format!("u64 argument {v} is above the interpreter's limit of i64::MAX"),
                })?),
                // Every other argument is an integer of at most 64 bits (u64 is above).
                other => ArgValue::Int(other.as_i128().expect("an integer") as i64),
            })
        })
        .collect()
}

fn expected(e: Elem) -> String {
    match e {
        Elem::Ptr(s) => format!("a buffer of {s}"),
        Elem::Scalar(s) => s.name().to_string(),
    }
}

/// What Triton's specialization says of one argument: whether it is divisible by 16 (a
/// buffer: whether its base address is, which `aligned` tells) and whether it is the
/// integer 1.
fn arg_facts(arg: &Arg<'_>, aligned: impl Fn(&DeviceBuffer) -> bool) -> (bool, bool) {
    match arg {
        Arg::Buffer(b) => (aligned(b), false),
        a => {
            let v = a.as_i128();
            (v.is_some_and(|v| v % 16 == 0), v == Some(1))
        }
    }
}

/// Triton's specialization of these arguments ([`arg_facts`] of each).
pub(crate) fn specialization(args: &[Arg<'_>], aligned: impl Fn(&DeviceBuffer) -> bool) -> Specialization {
    let (divisible_by_16, equal_to_1) = args.iter().map(|a| arg_facts(a, &aligned)).unzip();
    Specialization {
        divisible_by_16,
        equal_to_1,
    }
}

/// Whether `spec` is exactly the specialization of `args` (what [`specialization`] would
/// build with every buffer aligned, as they are), compared without allocating.
pub(crate) fn specialized_for(spec: &Specialization, args: &[Arg<'_>]) -> bool {
    spec.divisible_by_16.len() == args.len()
        && spec.equal_to_1.len() == args.len()
        && args.iter().enumerate().all(|(i, a)| {
            let (div, one) = arg_facts(a, |_| true);
            spec.divisible_by_16[i] == div && spec.equal_to_1[i] == one
        })
}

/// Threads per program for `num_warps` warps of `warp_size`, or an error when they are more
/// than the device's `limit`; `unit` names them as the device does ("threads per program",
/// "invocations per workgroup"). Counted in `u64`, so that no `num_warps` wraps below the
/// limit.
pub(crate) fn threads_per_program(
    kernel: &Kernel,
    num_warps: u32,
    warp_size: u32,
    limit: u32,
    unit: &str,
) -> Result<u32> {
    let threads = num_warps as u64 * warp_size as u64;
    if threads > limit as u64 {
        return Err(Error::Launch {
            kernel: kernel.name.clone(),
            message: format!("num_warps = {num_warps} makes {threads} {unit}; the device allows {limit}"),
        });
    }
    Ok(threads as u32)
}

/// Checks a launch's register limit ([`LaunchConfig::maxnreg`]) against what NVIDIA GPUs
/// give (`PtxTarget::MAX_REGISTERS`) on every device, one that ignores it too, so that a
/// launch valid on one backend is valid on all.
pub(crate) fn check_maxnreg(kernel: &Kernel, maxnreg: Option<u32>) -> Result<()> {
    let range = rutile_ptx::PtxTarget::MAX_REGISTERS;
    match maxnreg {
        Some(n) if !range.contains(&n) => Err(Error::Launch {
            kernel: kernel.name.clone(),
            message: format!(
                "maxnreg = {n}: a thread's register limit must be {} to {}",
                range.start(),
                range.end()
            ),
        }),
        _ => Ok(()),
    }
}

/// Checks a grid against per-dimension limits.
pub(crate) fn check_grid(kernel: &Kernel, grid: [u32; 3], max: [u32; 3]) -> Result<()> {
    for (d, (&g, &m)) in grid.iter().zip(&max).enumerate() {
        let axis = ["x", "y", "z"][d];
        if g == 0 {
            return Err(Error::Launch {
                kernel: kernel.name.clone(),
                message: format!("grid {axis} is 0; every dimension needs at least one program"),
            });
        }
        if g > m {
            return Err(Error::Launch {
                kernel: kernel.name.clone(),
                message: format!("grid {axis} is {g}, above the device's limit of {m}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CUDA's limits, without a GPU: 2^31 - 1 programs along x, 65535 along y and z.
    #[test]
    fn grids_above_the_limit_name_the_axis_and_the_limit() {
        let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
        let max = [i32::MAX as u32, 65535, 65535];
        assert!(check_grid(&kernel, [i32::MAX as u32, 65535, 65535], max).is_ok());
        let e = check_grid(&kernel, [1, 65536, 1], max).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `add_kernel`: invalid launch: grid y is 65536, above the device's limit of 65535"
        );
        let e = check_grid(&kernel, [1, 1, 0], max).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `add_kernel`: invalid launch: grid z is 0; every dimension needs at least one program"
        );
    }

    #[test]
    fn register_limits_outside_what_gpus_give_are_refused() {
        let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
        for ok in [None, Some(16), Some(128), Some(255)] {
            assert!(check_maxnreg(&kernel, ok).is_ok(), "{ok:?}");
        }
        for bad in [0, 15, 256] {
            let e = check_maxnreg(&kernel, Some(bad)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "kernel `add_kernel`: invalid launch: maxnreg = {bad}: a thread's register limit must be 16 to 255"
                )
            );
        }
    }

    #[test]
    fn clusters_are_checked_before_compiling_and_at_launch() {
        let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
        let config = LaunchConfig::grid1(8);
        for ok in [1, 2, 3, 8, 16] {
            assert!(check_cluster(&kernel, &config.cluster(ok), 16).is_ok(), "{ok}");
        }
        for bad in [0, 17] {
            let e = check_cluster(&kernel, &config.cluster(bad), 16).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("kernel `add_kernel`: invalid launch: cluster = {bad}: a cluster groups 1 to 16 programs")
            );
        }
        let e = check_cluster(&kernel, &config.cluster(9), 8).unwrap_err();
        assert!(
            e.to_string()
                .contains("cluster = 9: the device's clusters group at most 8 programs"),
            "{e}"
        );
        assert!(check_cluster(&kernel, &config, 1).is_ok());
        let e = check_cluster(&kernel, &config.cluster(2), 1).unwrap_err();
        assert!(e.to_string().contains("the device has no thread-block clusters"), "{e}");
        let e = check_cluster(&kernel, &config.cluster(2).persistent(true), 16).unwrap_err();
        assert!(e.to_string().contains("with a persistent grid"), "{e}");
        assert!(check_cluster_grid(&kernel, [8, 3, 1], 4).is_ok());
        assert!(check_cluster_grid(&kernel, [7, 1, 1], 1).is_ok());
        let e = check_cluster_grid(&kernel, [6, 1, 1], 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `add_kernel`: invalid launch: grid x is 6, not a multiple of the cluster's 4 programs"
        );
    }

    /// Several programs a block: 1 to 8, more than 1 only through CUDA (and the
    /// interpreter, which runs one program at a time anyway), the reason in the error.
    #[test]
    fn programs_per_block_is_checked_before_compiling() {
        use crate::Backend::{Cuda, Interpreter, Vulkan};
        let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
        let config = LaunchConfig::grid1(8);
        for (programs, backend) in [(1, Vulkan), (3, Cuda), (8, Cuda), (3, Interpreter)] {
            let c = config.programs_per_block(programs);
            assert!(
                check_programs_per_block(&kernel, &c, backend).is_ok(),
                "{programs} {backend:?}"
            );
        }
        for bad in [0, 9] {
            let e = check_programs_per_block(&kernel, &config.programs_per_block(bad), Cuda).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("kernel `add_kernel`: invalid launch: programs_per_block = {bad}: a thread block runs 1 to 8 programs")
            );
        }
        let e = check_programs_per_block(&kernel, &config.programs_per_block(2), Vulkan).unwrap_err();
        assert!(e.to_string().contains("Vulkan runs one program a workgroup"), "{e}");
    }

    /// 2^27 warps of 32 are 2^32 threads, which a `u32` product wraps to 0: below any limit.
    #[test]
    fn threads_beyond_the_limit_do_not_wrap() {
        let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
        assert_eq!(
            threads_per_program(&kernel, 32, 32, 1024, "threads per program").unwrap(),
            1024
        );
        let e = threads_per_program(&kernel, 1 << 27, 32, 1024, "threads per program").unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `add_kernel`: invalid launch: num_warps = 134217728 makes 4294967296 threads per program; \
             the device allows 1024"
        );
        let e = threads_per_program(&kernel, u32::MAX, 32, 1024, "invocations per workgroup").unwrap_err();
        assert!(
            e.to_string().contains("makes 137438953440 invocations per workgroup"),
            "{e}"
        );
    }
}
