//! Memory: how each storage buffer holds its elements ([`Holding`]), and pointers to the
//! elements of storage buffers and workgroup arrays that loads, stores and atomics address.

use super::*;

/// How a storage buffer holds its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holding {
    Plain,
    /// `array<vec4<T>>` of a 4-byte `T` or of `f16` ([`vector_element`]): 16-byte loads and
    /// stores move one whole vector (two of `f16`), single elements are vector components
    /// (the buffer is a multiple of 16 bytes).
    Vec4,
    /// `array<vec4<u32>>` holding `f16` pairs ([`SpirvTarget::packed_f16`]): 16-byte loads
    /// and stores move one whole vector, each word's halves reinterpreted as 16-bit integers
    /// (or, without them, unpacked to and packed from `f32`). Only for buffers that every
    /// access moves in whole vectors (a store of one `f16` would rewrite its neighbour in
    /// the word), and only in kernels without loops or cooperative matrices: measured
    /// through NVIDIA's driver on an H100, an `f16` copy went from 76% to 93% of the copy
    /// ceiling and the one-pass layer norm gained 5–7 points, but the long-row layer norm
    /// (a loop) lost up to 8 and the cooperative-matrix matmul (in its main loop) a quarter
    /// or more, whether the halves went through `f32` or not (16-byte accesses in loops
    /// measured slower on that driver before: `runtime/src/backends/vulkan.rs`).
    PackedF16,
    /// `array<u32>` words holding two or four elements of a type narrower than a word
    /// (`bf16`, 8- and 16-bit integers: `sub_word.rs`), or `array<vec2<u32>>` or
    /// `array<vec4<u32>>` of them where every access moves whole such vectors: the number
    /// of words an array element holds (1, 2 or 4).
    Words(u32),
    /// As [`Holding::Words`], `array<atomic<u32>>`: some store writes part of a word.
    AtomicWords,
    /// `atomic<i32>` / `atomic<u32>`.
    Atomic,
    /// `atomic<u32>` holding `f32` bits.
    AtomicF32Bits,
}

/// Whether a buffer of `elem` can be held as `vec4`s: 4-byte types, and `f16`, whose
/// 16-byte accesses (eight elements) would otherwise be eight 2-byte loads or stores. The
/// other types narrower than a word are held in words ([`Holding::Words`]).
pub(super) fn vector_element(elem: ScalarType) -> bool {
    (elem.size_bytes() == 4 && elem != ScalarType::Bool) || elem == ScalarType::F16
}

pub(super) struct Buffer {
    pub(super) ptr: H,
    pub(super) holding: Holding,
    /// The element type of the array (the `vec4` of a [`Holding::Vec4`] buffer).
    pub(super) elem_ty: Handle<Type>,
}

impl Cx<'_> {
    /// An element index register as `u32` (buffers hold fewer than 2^32 elements).
    pub(super) fn index_u32(&mut self, r: Reg) -> H {
        let v = self.read(r);
        match self.k.reg_type(r) {
            ScalarType::U32 => v,
            ScalarType::I32 => self.as_(v, ScalarKind::Uint, None),
            ScalarType::U64 => self.as_(v, ScalarKind::Uint, Some(4)),
            ScalarType::I64 => {
                let t = self.as_(v, ScalarKind::Sint, Some(4));
                self.as_(t, ScalarKind::Uint, None)
            }
            t => unreachable!("verified index type {t}"),
        }
    }

    /// The storage buffer of a global access.
    pub(super) fn buffer(&self, mem: Memory) -> &Buffer {
        let Memory::Global { param } = mem else {
            unreachable!("shared memory is not a storage buffer")
        };
        self.buffers[param as usize].as_ref().expect("verified pointer")
    }

    pub(super) fn holding(&self, mem: Memory) -> Holding {
        match mem {
            Memory::Global { .. } => self.buffer(mem).holding,
            Memory::Shared { .. } => Holding::Plain,
        }
    }

    /// A pointer to element `base + offset` of `mem`.
    pub(super) fn element(&mut self, mem: Memory, base: H, offset: u32) -> H {
        let offset = match mem {
            Memory::Shared { alloc } => offset + self.shared[alloc as usize].1,
            Memory::Global { .. } => offset,
        };
        let index = if offset == 0 {
            base
        } else {
            let o = self.u32c(offset);
            self.bin(Bo::Add, base, o)
        };
        let buf = match mem {
            Memory::Global { .. } => self.buffer(mem).ptr,
            Memory::Shared { alloc } => self.shared[alloc as usize].0,
        };
        if self.holding(mem) == Holding::Vec4 {
            let (two, three) = (self.u32c(2), self.u32c(3));
            let vector = self.bin(Bo::ShiftRight, index, two);
            let lane = self.bin(Bo::And, index, three);
            let v = self.e(Expression::Access {
                base: buf,
                index: vector,
            });
            return self.e(Expression::Access { base: v, index: lane });
        }
        self.e(Expression::Access { base: buf, index })
    }

    /// A pointer to the `chunk`-th whole array element from element `base` (a multiple of
    /// the elements each holds: 4 in a [`Holding::Vec4`] buffer, 8 in a
    /// [`Holding::PackedF16`] one).
    pub(super) fn vector_at(&mut self, mem: Memory, base: H, chunk: u32) -> H {
        let buffer = self.buffer(mem);
        let (buf, per_vector) = (buffer.ptr, if buffer.holding == Holding::PackedF16 { 8 } else { 4 });
        let shift = self.u32c(u32::trailing_zeros(per_vector));
        let mut vector = self.bin(Bo::ShiftRight, base, shift);
        if chunk > 0 {
            let c = self.u32c(chunk);
            vector = self.bin(Bo::Add, vector, c);
        }
        self.e(Expression::Access {
            base: buf,
            index: vector,
        })
    }
}
