//! Global memory: loads, stores and atomics through pointer blocks, with bounds checks.
//!
//! Every pointer traces to a pointer parameter, which names one of the launch's buffers.
//! Lanes whose mask is false are never touched (their pointers may be anything). A lane
//! outside its buffer (negative, or at or past its end) is an out-of-bounds fault.
//!
//! Stores and atomics apply element by element in row-major order, so when two lanes of one
//! op hit the same element, the later lane's write wins and an atomic's later lane sees the
//! earlier one's result. A fault stops the op where it happens (earlier lanes stay written).
//! Atomic `max`/`min` of floats propagate NaN as `maximum`/`minimum`; `atomic_cas` of floats
//! compares bit patterns, as the hardware does. Loads quiet signaling NaNs (keeping the
//! rest of the payload); stores write a NaN's bits as they are, so that a NaN made by a
//! bitcast reaches memory unchanged.

use super::buffer::HostBuffer;
use super::cluster::SharedBuffers;
use super::elementwise::{fmax, fmin};
use super::error::{invalid, Fault, FaultKind};
use super::tensor::{float_to_bits, round_float, wrap_int, Data, Pointer};
use crate::ir::AtomicOp;
use crate::types::ScalarType;
use half::{bf16, f16};

/// The buffers of a launch and the parameters that point into them.
pub(crate) struct Memory<'a> {
    pub buffers: Buffers<'a>,
    /// Per kernel parameter: its buffer and that buffer's length in elements for pointer
    /// parameters, `None` for scalars.
    pub param_buffer: Vec<Option<(usize, usize)>>,
    /// Per kernel parameter: its name.
    pub param_names: Vec<&'a str>,
}

/// A program's access to the launch's buffers: the exclusive borrow of a launch whose
/// programs run one after another, or a share of it for a program of a cluster, whose
/// programs take turns ([`super::cluster`]). Either way it derefs to the buffers.
pub(crate) enum Buffers<'a> {
    Exclusive(&'a mut [HostBuffer]),
    Shared(SharedBuffers<'a>),
}

impl<'a> From<&'a mut [HostBuffer]> for Buffers<'a> {
    fn from(buffers: &'a mut [HostBuffer]) -> Self {
        Buffers::Exclusive(buffers)
    }
}

impl std::ops::Deref for Buffers<'_> {
    type Target = [HostBuffer];
    #[inline]
    fn deref(&self) -> &[HostBuffer] {
        match self {
            Buffers::Exclusive(b) => b,
            Buffers::Shared(b) => b.get(),
        }
    }
}

impl std::ops::DerefMut for Buffers<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [HostBuffer] {
        match self {
            Buffers::Exclusive(b) => b,
            Buffers::Shared(b) => b.get_mut(),
        }
    }
}

impl Memory<'_> {
    /// The elements of the buffer behind pointer parameter `param`, if it is one.
    pub(crate) fn param_len(&self, param: u32) -> Option<usize> {
        self.param_buffer
            .get(param as usize)
            .copied()
            .flatten()
            .map(|(_, len)| len)
    }

    /// The buffer and element index of a pointer, or an out-of-bounds fault.
    #[inline]
    pub(crate) fn locate(&self, p: Pointer) -> Result<(usize, usize), Fault> {
        let Some(&Some((b, len))) = self.param_buffer.get(p.param as usize) else {
            return Err(invalid!(
                "pointer derived from parameter {}, which is not a pointer",
                p.param
            ));
        };
        if p.offset < 0 || p.offset as u64 >= len as u64 {
            return Err(Fault {
                kind: FaultKind::OutOfBounds,
                message: format!(
                    "element offset {} is outside buffer {b} (`{}`, {len} elements)",
                    p.offset, self.param_names[p.param as usize]
                ),
            });
        }
        Ok((b, p.offset as usize))
    }
}

type Read<T> = fn(&[u8]) -> T;
type Write<T> = fn(&mut [u8], T);

/// Reads and writes one element's bytes as the interpreter's representation `T`.
struct Codec<T> {
    read: Read<T>,
    write: Write<T>,
    size: usize,
}

fn int_codec(s: ScalarType) -> Codec<i64> {
    fn b<const N: usize>(x: &[u8]) -> [u8; N] {
        x.try_into().expect("callers pass one element's bytes")
    }
    let (read, write): (Read<i64>, Write<i64>) = match s {
        ScalarType::I8 => (|x| x[0] as i8 as i64, |x, v| x[0] = v as u8),
        ScalarType::U8 => (|x| x[0] as i64, |x, v| x[0] = v as u8),
        ScalarType::I16 => (
            |x| i16::from_ne_bytes(b(x)) as i64,
            |x, v| x.copy_from_slice(&(v as i16).to_ne_bytes()),
        ),
        ScalarType::U16 => (
            |x| u16::from_ne_bytes(b(x)) as i64,
            |x, v| x.copy_from_slice(&(v as u16).to_ne_bytes()),
        ),
        ScalarType::I32 => (
            |x| i32::from_ne_bytes(b(x)) as i64,
            |x, v| x.copy_from_slice(&(v as i32).to_ne_bytes()),
        ),
        ScalarType::U32 => (
            |x| u32::from_ne_bytes(b(x)) as i64,
            |x, v| x.copy_from_slice(&(v as u32).to_ne_bytes()),
        ),
        _ => (|x| i64::from_ne_bytes(b(x)), |x, v| x.copy_from_slice(&v.to_ne_bytes())),
    };
    Codec {
        read,
        write,
        size: s.size_bytes(),
    }
}

fn float_codec(s: ScalarType) -> Codec<f64> {
    fn b<const N: usize>(x: &[u8]) -> [u8; N] {
        x.try_into().expect("callers pass one element's bytes")
    }
    // (A codec holds plain function pointers, so each fp8 format gets its own pair.)
    macro_rules! fp8 {
        ($format:ident) => {
            (
                |x| crate::fp8::$format.decode(x[0]),
                |x, v| x[0] = crate::fp8::$format.encode(v),
            )
        };
    }
    let (read, write): (Read<f64>, Write<f64>) = match s {
        ScalarType::F16 => (
            |x| f16::from_bits(u16::from_ne_bytes(b(x))).to_f64(),
            |x, v| x.copy_from_slice(&(float_to_bits(ScalarType::F16, v) as u16).to_ne_bytes()),
        ),
        ScalarType::BF16 => (
            |x| bf16::from_bits(u16::from_ne_bytes(b(x))).to_f64(),
            |x, v| x.copy_from_slice(&(float_to_bits(ScalarType::BF16, v) as u16).to_ne_bytes()),
        ),
        ScalarType::F8E4M3 => fp8!(E4M3),
        ScalarType::F8E5M2 => fp8!(E5M2),
        ScalarType::F8E4M3B15 => fp8!(E4M3B15),
        ScalarType::F8E4M3Fnuz => fp8!(E4M3FNUZ),
        ScalarType::F8E5M2Fnuz => fp8!(E5M2FNUZ),
        ScalarType::F32 => (
            |x| f32::from_ne_bytes(b(x)) as f64,
            |x, v| x.copy_from_slice(&(float_to_bits(ScalarType::F32, v) as u32).to_ne_bytes()),
        ),
        _ => (|x| f64::from_ne_bytes(b(x)), |x, v| x.copy_from_slice(&v.to_ne_bytes())),
    };
    Codec {
        read,
        write,
        size: s.size_bytes(),
    }
}

fn bool_codec() -> Codec<bool> {
    Codec {
        read: |x| x[0] != 0,
        write: |x, v| x[0] = v as u8,
        size: 1,
    }
}

fn masked(mask: Option<&[bool]>, i: usize) -> bool {
    mask.is_some_and(|m| !m[i])
}

fn load_with<T: Copy>(
    mem: &Memory,
    codec: Codec<T>,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    other: Option<&[T]>,
    zero: T,
) -> Result<Vec<T>, Fault> {
    let mut out = Vec::with_capacity(ptrs.len());
    for (i, &p) in ptrs.iter().enumerate() {
        if masked(mask, i) {
            out.push(other.map_or(zero, |o| o[i]));
            continue;
        }
        let (b, at) = mem.locate(p)?;
        let bytes = mem.buffers[b].as_bytes();
        out.push((codec.read)(&bytes[at * codec.size..(at + 1) * codec.size]));
    }
    Ok(out)
}

/// Reads the elements of type `s` at `ptrs` where `mask` holds, `other` (or 0) elsewhere.
pub(crate) fn load(
    mem: &Memory,
    s: ScalarType,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    other: Option<&Data>,
) -> Result<Data, Fault> {
    Ok(match other {
        None if s.is_bool() => Data::Bool(load_with(mem, bool_codec(), ptrs, mask, None, false)?),
        None if s.is_float() => Data::Float(load_with(mem, float_codec(s), ptrs, mask, None, 0.0)?),
        None => Data::Int(load_with(mem, int_codec(s), ptrs, mask, None, 0)?),
        Some(Data::Bool(o)) => Data::Bool(load_with(mem, bool_codec(), ptrs, mask, Some(o), false)?),
        Some(Data::Float(o)) => Data::Float(load_with(mem, float_codec(s), ptrs, mask, Some(o), 0.0)?),
        Some(Data::Int(o)) => Data::Int(load_with(mem, int_codec(s), ptrs, mask, Some(o), 0)?),
        Some(Data::Ptr(_)) => return Err(invalid!("a load's `other` cannot be pointers")),
    })
}

fn store_with<T: Copy>(
    mem: &mut Memory,
    codec: Codec<T>,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    values: &[T],
) -> Result<(), Fault> {
    for (i, &p) in ptrs.iter().enumerate() {
        if masked(mask, i) {
            continue;
        }
        let (b, at) = mem.locate(p)?;
        let bytes = mem.buffers[b].as_bytes_mut();
        (codec.write)(&mut bytes[at * codec.size..(at + 1) * codec.size], values[i]);
    }
    Ok(())
}

/// Writes `values` (of type `s`) at `ptrs` where `mask` holds.
pub(crate) fn store(
    mem: &mut Memory,
    s: ScalarType,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    values: &Data,
) -> Result<(), Fault> {
    match values {
        Data::Bool(v) => store_with(mem, bool_codec(), ptrs, mask, v),
        Data::Float(v) => store_with(mem, float_codec(s), ptrs, mask, v),
        Data::Int(v) => store_with(mem, int_codec(s), ptrs, mask, v),
        Data::Ptr(_) => Err(invalid!("pointers cannot be stored")),
    }
}

/// Read-modify-write of each unmasked lane in order: `new = f(old, value)`, or no write when
/// `f` gives `None`. Returns the old values (`zero` for masked-off lanes).
fn rmw<T: Copy>(
    mem: &mut Memory,
    codec: Codec<T>,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    zero: T,
    f: &dyn Fn(usize, T) -> Option<T>,
) -> Result<Vec<T>, Fault> {
    let mut out = Vec::with_capacity(ptrs.len());
    for (i, &p) in ptrs.iter().enumerate() {
        if masked(mask, i) {
            out.push(zero);
            continue;
        }
        let (b, at) = mem.locate(p)?;
        let bytes = &mut mem.buffers[b].as_bytes_mut()[at * codec.size..(at + 1) * codec.size];
        let old = (codec.read)(bytes);
        if let Some(new) = f(i, old) {
            (codec.write)(bytes, new);
        }
        out.push(old);
    }
    Ok(out)
}

/// An atomic read-modify-write of elements of type `s`; returns the old values.
pub(crate) fn atomic(
    mem: &mut Memory,
    op: AtomicOp,
    s: ScalarType,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    values: &Data,
) -> Result<Data, Fault> {
    let unsupported = || invalid!("{} is not defined for {s}", op.name());
    Ok(match values {
        Data::Int(v) => {
            let unsigned = s.is_unsigned_int();
            let f: &dyn Fn(i64, i64) -> i64 = match op {
                AtomicOp::Add => &|a, b| wrap_int(s, a.wrapping_add(b)),
                AtomicOp::Max if unsigned => &|a, b| (a as u64).max(b as u64) as i64,
                AtomicOp::Max => &|a, b| a.max(b),
                AtomicOp::Min if unsigned => &|a, b| (a as u64).min(b as u64) as i64,
                AtomicOp::Min => &|a, b| a.min(b),
                AtomicOp::Xchg => &|_, b| b,
                AtomicOp::And => &|a, b| a & b,
                AtomicOp::Or => &|a, b| a | b,
                AtomicOp::Xor => &|a, b| a ^ b,
            };
            Data::Int(rmw(mem, int_codec(s), ptrs, mask, 0, &|i, old| Some(f(old, v[i])))?)
        }
        Data::Float(v) => {
            let f: &dyn Fn(f64, f64) -> f64 = match op {
                AtomicOp::Add => &|a, b| round_float(s, a + b),
                AtomicOp::Max => &fmax,
                AtomicOp::Min => &fmin,
                AtomicOp::Xchg => &|_, b| b,
                _ => return Err(unsupported()),
            };
            Data::Float(rmw(mem, float_codec(s), ptrs, mask, 0.0, &|i, old| Some(f(old, v[i])))?)
        }
        Data::Bool(v) => {
            let f: &dyn Fn(bool, bool) -> bool = match op {
                AtomicOp::Xchg => &|_, b| b,
                AtomicOp::And | AtomicOp::Min => &|a, b| a & b,
                AtomicOp::Or | AtomicOp::Max => &|a, b| a | b,
                AtomicOp::Xor => &|a, b| a ^ b,
                AtomicOp::Add => return Err(unsupported()),
            };
            Data::Bool(rmw(mem, bool_codec(), ptrs, mask, false, &|i, old| Some(f(old, v[i])))?)
        }
        Data::Ptr(_) => return Err(invalid!("atomics cannot operate on pointers")),
    })
}

/// Compare-and-swap: where the element's bits equal `cmp`'s, writes `value`. Returns the old
/// values.
pub(crate) fn atomic_cas(
    mem: &mut Memory,
    s: ScalarType,
    ptrs: &[Pointer],
    mask: Option<&[bool]>,
    cmp: &Data,
    values: &Data,
) -> Result<Data, Fault> {
    Ok(match (cmp, values) {
        (Data::Int(c), Data::Int(v)) => Data::Int(rmw(mem, int_codec(s), ptrs, mask, 0, &|i, old| {
            (old == c[i]).then_some(v[i])
        })?),
        (Data::Float(c), Data::Float(v)) => {
            // Values of the element type compare bit for bit through their f64 images.
            Data::Float(rmw(mem, float_codec(s), ptrs, mask, 0.0, &|i, old| {
                (old.to_bits() == c[i].to_bits()).then_some(v[i])
            })?)
        }
        (Data::Bool(c), Data::Bool(v)) => Data::Bool(rmw(mem, bool_codec(), ptrs, mask, false, &|i, old| {
            (old == c[i]).then_some(v[i])
        })?),
        _ => {
            return Err(invalid!(
                "atomic_cas operands must be integers, floats or booleans of one type"
            ))
        }
    })
}
