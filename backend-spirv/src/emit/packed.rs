//! Loads and stores of `f16` storage buffers held as `vec4<u32>` ([`Holding::PackedF16`]).
//!
//! NVIDIA's Vulkan driver moves a `vec4<f16>` (8 bytes) in an 8-byte access and does not
//! merge two of them into one 16-byte access: an `f16` copy kernel moving 16 bytes a thread
//! reached 76.5% of the copy ceiling on an H100 where the same bytes in `f32` (one `vec4<f32>`
//! a thread) reached 94% (docs/performance.md, "f16 buffers on Vulkan"). Held as `vec4<u32>`,
//! each 16-byte access is one load or store; each word is a pair of `f16`, its halves
//! reinterpreted through 16-bit integers where the device has them (bit operations, which
//! measured 2–4 points faster in the layer norm) or else unpacked to and packed from `f32`
//! (`unpack2x16float`, `pack2x16float`), which holds every `f16` value exactly: either way
//! the registers see the same bits.

use super::*;

impl Cx<'_> {
    /// `dsts.len()` (a multiple of eight, see `Scan::whole_16`) consecutive `f16` elements
    /// from element `base` of `mem` (aligned, see `Stmt::Load`) as whole vectors.
    pub(super) fn load_packed(&mut self, mem: Memory, base: H, dsts: &[Reg]) {
        for (c, chunk) in dsts.chunks(8).enumerate() {
            let p = self.vector_at(mem, base, c as u32);
            let v = self.load(p);
            for (w, pair) in chunk.chunks(2).enumerate() {
                let word = self.index(v, w as u32);
                let halves = self.unpack_pair(word);
                for (&d, x) in pair.iter().zip(halves) {
                    self.write(d, x);
                }
            }
        }
    }

    /// The two `f16` of `word` (the lower first): its 16-bit halves reinterpreted where the
    /// device has 16-bit integers, else `unpack2x16float` and conversions.
    fn unpack_pair(&mut self, word: H) -> [H; 2] {
        if self.int16 {
            let sixteen = self.u32c(16);
            let high = self.bin(Bo::ShiftRight, word, sixteen);
            return [word, high].map(|w| self.of_bits_16(ScalarType::F16, w));
        }
        let halves = self.math(Mf::Unpack2x16float, &[word]);
        [0, 1].map(|h| {
            let x = self.index(halves, h);
            self.as_(x, ScalarKind::Float, Some(2))
        })
    }

    /// The word holding `f16` registers `pair` (the first in the lower half).
    fn pack_pair(&mut self, pair: &[Reg]) -> H {
        if self.int16 {
            let [low, high] = [pair[0], pair[1]].map(|r| {
                let x = self.read(r);
                self.bits_16(ScalarType::F16, x)
            });
            let sixteen = self.u32c(16);
            let high = self.bin(Bo::ShiftLeft, high, sixteen);
            return self.bin(Bo::InclusiveOr, low, high);
        }
        let pair_ty = self.ty(TypeInner::Vector {
            size: naga::VectorSize::Bi,
            scalar: Scalar::F32,
        });
        let components = pair
            .iter()
            .map(|&r| {
                let x = self.read(r);
                self.as_(x, ScalarKind::Float, Some(4))
            })
            .collect();
        let halves = self.e(Expression::Compose {
            ty: pair_ty,
            components,
        });
        self.math(Mf::Pack2x16float, &[halves])
    }

    /// `values` (a multiple of eight `f16`, see `Scan::whole_16`) stored from element
    /// `base` of `mem` as whole vectors.
    pub(super) fn store_packed(&mut self, mem: Memory, base: H, values: &[Reg]) {
        let vector_ty = self.buffer(mem).elem_ty;
        for (c, chunk) in values.chunks(8).enumerate() {
            let words: Vec<H> = chunk.chunks(2).map(|pair| self.pack_pair(pair)).collect();
            let value = self.e(Expression::Compose {
                ty: vector_ty,
                components: words,
            });
            let pointer = self.vector_at(mem, base, c as u32);
            self.stmt(Statement::Store { pointer, value });
        }
    }
}
