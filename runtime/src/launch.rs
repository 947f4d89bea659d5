//! Launch arguments and configuration, and their checks against a kernel's parameters.

use crate::buffer::{Buffer, DeviceBuffer, Element};
use crate::error::{Error, Result};
use rutile_ir::target::Specialization;
use rutile_ir::{Elem, Kernel, ScalarType};

/// One argument of a launch: a buffer for a pointer parameter, or a scalar of exactly the
/// parameter's type.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Buffer(&'a DeviceBuffer),
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F32(f32),
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

/// How to launch a kernel: the grid of programs and the compilation options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Programs along x, y and z.
    pub grid: [u32; 3],
    /// Warps per program (Triton's `num_warps`).
    pub num_warps: u32,
    /// Software-pipelining depth of loops (Triton's `num_stages`); a hint.
    pub num_stages: u32,
}

impl LaunchConfig {
    /// A launch of `grid` programs with 4 warps each.
    pub fn new(grid: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            num_warps: 4,
            num_stages: 3,
        }
    }
    /// A 1-D grid.
    pub fn grid1(programs: u32) -> Self {
        Self::new([programs, 1, 1])
    }
    pub fn num_warps(mut self, num_warps: u32) -> Self {
        self.num_warps = num_warps;
        self
    }
    pub fn num_stages(mut self, num_stages: u32) -> Self {
        self.num_stages = num_stages;
        self
    }
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

fn expected(e: Elem) -> String {
    match e {
        Elem::Ptr(s) => format!("a buffer of {s}"),
        Elem::Scalar(s) => s.name().to_string(),
    }
}

/// Triton's specialization: which integer arguments are divisible by 16, and which buffers
/// start at a 16-byte boundary (`aligned` says whether a buffer's base address is).
pub(crate) fn specialization(args: &[Arg<'_>], aligned: impl Fn(&DeviceBuffer) -> bool) -> Specialization {
    Specialization {
        divisible_by_16: args
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => aligned(b),
                a => a.as_i128().is_some_and(|v| v % 16 == 0),
            })
            .collect(),
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
