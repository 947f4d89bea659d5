//! Storage buffers of elements narrower than a word: `bf16` and 8- and 16-bit integers
//! ([`Holding::Words`], [`Holding::AtomicWords`]).
//!
//! naga's storage buffers have no element type narrower than 32 bits (its `f16` aside), so
//! such a buffer is an `array<u32>` whose words each hold two or four consecutive elements,
//! the first in the low bits, as the bytes lie in memory. A load takes the words its
//! elements lie in and extracts them into their 32-bit registers (sign- or zero-extended,
//! `bf16` as the `f32` of its value). A store that covers whole words (its elements are
//! aligned to their count: `Stmt::Store`) writes them whole. Where every access to a
//! buffer moves 16 or 8 bytes, in a kernel without loops or cooperative matrices, it is an
//! array of `vec4<u32>` or `vec2<u32>` (`SpirvTarget::packed_f16`'s condition): one
//! access per vector, as for packed `f16`, which NVIDIA's driver does not make of four
//! word accesses.
//!
//! A store of part of a word must leave the rest alone while other threads may be writing
//! it at the same moment (neighbouring elements belong to neighbouring threads), so the
//! buffer is then an `array<atomic<u32>>` and the store two atomics: an `and` that clears
//! the elements' bits and an `or` that sets them; loads and whole-word stores of such a
//! buffer are atomic loads and stores. Where the warp is the subgroup, the lanes that
//! store parts of one word first gather them by shuffles, and one lane writes the word
//! ([`Cx::store_part_combined`]).
//!
//! Workgroup arrays need none of this: they hold these types widened to their registers'
//! 32 bits (no one outside the kernel sees their layout).

use super::*;

/// Whether a buffer of `elem` is held in packed words: types narrower than 4 bytes, except
/// `f16`, which naga stores itself, and booleans, which have no storage type (the types
/// whose shared memory the lowering counts in words: `ScalarType::held_in_words`).
pub(super) fn sub_word(elem: ScalarType) -> bool {
    elem.held_in_words()
}

impl Cx<'_> {
    fn param_elem(&self, mem: Memory) -> ScalarType {
        let Memory::Global { param } = mem else {
            unreachable!("workgroup arrays hold narrow types widened")
        };
        match &self.k.params[param as usize] {
            ThreadParam::Ptr { elem, .. } => *elem,
            ThreadParam::Scalar { .. } => unreachable!("verified pointer"),
        }
    }

    /// The words an array element of `mem`'s buffer holds (1, 2 or 4), and pointers to the
    /// array elements that hold `words` whole words from element `base` (aligned to them:
    /// every access to a buffer of vectors moves whole ones).
    fn vectors(&mut self, mem: Memory, base: H, words: u32) -> (u32, Vec<H>) {
        let w = match self.holding(mem) {
            Holding::Words(w) => w,
            _ => 1,
        };
        let per_word = 4 / self.param_elem(mem).size_bytes() as u32;
        let s = self.u32c((per_word * w).trailing_zeros());
        let first = self.bin(Bo::ShiftRight, base, s);
        let pointers = (0..words / w)
            .map(|v| {
                let index = if v == 0 {
                    first
                } else {
                    let v = self.u32c(v);
                    self.bin(Bo::Add, first, v)
                };
                self.word_at(mem, index)
            })
            .collect();
        (w, pointers)
    }

    /// A pointer to array element `word` of `mem`'s buffer (a word where it holds words
    /// alone).
    fn word_at(&mut self, mem: Memory, word: H) -> H {
        let base = self.buffer(mem).ptr;
        self.e(Expression::Access { base, index: word })
    }

    /// The word that holds element `base` (and the `per_word` elements from its word's
    /// first), and the bit position of `base` in it.
    fn word_of(&mut self, base: H, per_word: u32, bits: u32) -> (H, H) {
        let s = self.u32c(per_word.trailing_zeros());
        let word = self.bin(Bo::ShiftRight, base, s);
        let m = self.u32c(per_word - 1);
        let lane = self.bin(Bo::And, base, m);
        let s = self.u32c(bits.trailing_zeros());
        let shift = self.bin(Bo::ShiftLeft, lane, s);
        (word, shift)
    }

    /// `dsts.len()` consecutive elements from element `base` of sub-word buffer `mem`
    /// (aligned to their count, see `Stmt::Load`).
    pub(super) fn load_words(&mut self, mem: Memory, base: H, dsts: &[Reg]) {
        let elem = self.param_elem(mem);
        let bits = 8 * elem.size_bytes() as u32;
        let per_word = 32 / bits;
        let n = dsts.len() as u32;
        if n.is_multiple_of(per_word) {
            let (w, vectors) = self.vectors(mem, base, n * bits / 32);
            for (v, chunk) in dsts.chunks((w * per_word) as usize).enumerate() {
                let value = self.load(vectors[v]);
                for (k, elements) in chunk.chunks(per_word as usize).enumerate() {
                    let word = if w == 1 { value } else { self.index(value, k as u32) };
                    for (e, &d) in elements.iter().enumerate() {
                        let x = self.extract(elem, word, e as u32 * bits);
                        self.write(d, x);
                    }
                }
            }
            return;
        }
        // Part of one word.
        let (word, shift) = self.word_of(base, per_word, bits);
        let p = self.word_at(mem, word);
        let w = self.load(p);
        let w = self.bin(Bo::ShiftRight, w, shift);
        for (e, &d) in dsts.iter().enumerate() {
            let v = self.extract(elem, w, e as u32 * bits);
            self.write(d, v);
        }
    }

    /// The element of `elem` at bit `at` of word `w`, as its register holds it.
    fn extract(&mut self, elem: ScalarType, w: H, at: u32) -> H {
        let bits = 8 * elem.size_bytes() as u32;
        if elem == ScalarType::BF16 && at == 16 {
            let m = self.u32c(0xffff_0000);
            let high = self.bin(Bo::And, w, m);
            return self.as_(high, ScalarKind::Float, None);
        }
        let x = if at == 0 {
            w
        } else {
            let s = self.u32c(at);
            self.bin(Bo::ShiftRight, w, s)
        };
        match elem {
            ScalarType::BF16 => self.of_bits_16(elem, x),
            _ if elem.is_fp8() => self.fp8_of_bits(elem, x),
            _ if elem.is_signed_int() => {
                let x = self.as_(x, ScalarKind::Sint, None);
                self.narrow(elem, x)
            }
            _ => {
                let m = self.u32c((1u32 << bits) - 1);
                self.bin(Bo::And, x, m)
            }
        }
    }

    /// The bits of register value `x` of `elem`, in the low bits of a `u32` (the rest zero).
    fn encode(&mut self, elem: ScalarType, x: H) -> H {
        if elem == ScalarType::BF16 {
            return self.bits_16(elem, x);
        }
        if elem.is_fp8() {
            return self.fp8_bits(elem, x);
        }
        let bits = 8 * elem.size_bytes() as u32;
        let u = self.as_(x, ScalarKind::Uint, None);
        let m = self.u32c((1u32 << bits) - 1);
        self.bin(Bo::And, u, m)
    }

    /// The word holding `values` from its bit `first` on (each `bits` wide), zero elsewhere;
    /// `first` a bit position (a run-time value) or `None` for 0.
    fn assemble(&mut self, elem: ScalarType, values: &[Reg], first: Option<H>) -> H {
        let bits = 8 * elem.size_bytes() as u32;
        let mut word: Option<H> = None;
        for (e, &r) in values.iter().enumerate() {
            let x = self.read(r);
            let mut v = self.encode(elem, x);
            let at = e as u32 * bits;
            if at > 0 {
                let s = self.u32c(at);
                v = self.bin(Bo::ShiftLeft, v, s);
            }
            word = Some(match word {
                None => v,
                Some(w) => self.bin(Bo::InclusiveOr, w, v),
            });
        }
        let word = word.expect("a store writes at least one element");
        match first {
            Some(s) => self.bin(Bo::ShiftLeft, word, s),
            None => word,
        }
    }

    /// `values` stored from element `base` of sub-word buffer `mem` (aligned to their count,
    /// see `Stmt::Store`).
    pub(super) fn store_words(&mut self, mem: Memory, base: H, values: &[Reg]) {
        let elem = self.param_elem(mem);
        let bits = 8 * elem.size_bytes() as u32;
        let per_word = 32 / bits;
        let n = values.len() as u32;
        if n.is_multiple_of(per_word) {
            let (w, vectors) = self.vectors(mem, base, n * bits / 32);
            for (v, chunk) in values.chunks((w * per_word) as usize).enumerate() {
                let words: Vec<H> = chunk
                    .chunks(per_word as usize)
                    .map(|elements| self.assemble(elem, elements, None))
                    .collect();
                let value = if w == 1 {
                    words[0]
                } else {
                    let ty = self.buffer(mem).elem_ty;
                    self.e(Expression::Compose { ty, components: words })
                };
                self.stmt(Statement::Store {
                    pointer: vectors[v],
                    value,
                });
            }
            return;
        }
        debug_assert_eq!(
            self.holding(mem),
            Holding::AtomicWords,
            "scanned: a store of part of a word"
        );
        let (word, shift) = self.word_of(base, per_word, bits);
        let value = self.assemble(elem, values, Some(shift));
        let ones = self.u32c((1u32 << (n * bits)) - 1);
        let mask = self.bin(Bo::ShiftLeft, ones, shift);
        let keep = self.un(Uo::BitwiseNot, mask);
        let pointer = self.word_at(mem, word);
        for (fun, operand) in [(AtomicFunction::And, keep), (AtomicFunction::InclusiveOr, value)] {
            self.stmt(Statement::Atomic {
                pointer,
                fun,
                value: operand,
                result: None,
            });
        }
    }

    /// Whether a store of `n` elements of `mem` covers whole words.
    pub(super) fn covers_words(&self, mem: Memory, n: usize) -> bool {
        (n * self.param_elem(mem).size_bytes()).is_multiple_of(4)
    }

    /// A store of part of a word (`values` from element `index` where `pred` holds) in a
    /// kernel whose lanes can shuffle: where the lanes of an aligned group, as many as a
    /// word has such stores, write parts of one word (neighbouring elements to neighbouring
    /// lanes, as a blocked layout deals them), the lowest of them writes the word's parts
    /// together: a plain (atomic) store where they make the whole word, else the two
    /// atomics on the parts alone. Lanes whose word no lower lane of the group writes,
    /// write their own. A lane learns the others' first elements and parts by `xor`
    /// shuffles, two a partner. Every lane takes part in them, the predicate only in what
    /// it contributes (the per-thread IR's control flow is uniform across a program).
    pub(super) fn store_part_combined(&mut self, mem: Memory, index: Reg, values: &[Reg], pred: Option<Reg>) -> R<()> {
        let elem = self.param_elem(mem);
        let bits = 8 * elem.size_bytes() as u32;
        let per_word = 32 / bits;
        let n = values.len() as u32;
        let group = per_word / n;
        let base = self.index_u32(index);
        let (word, shift) = self.word_of(base, per_word, bits);
        let value = self.assemble(elem, values, Some(shift));
        let ones = self.u32c((1u32 << (n * bits)) - 1);
        let mask = self.bin(Bo::ShiftLeft, ones, shift);
        // What a lane tells the others: its first element (u32::MAX where it stores
        // nothing: no element of a buffer under 4 GiB has that index) and its parts.
        let (value, mask, told) = match pred {
            None => (value, mask, base),
            Some(p) => {
                let active = self.read(p);
                let z = self.u32c(0);
                let value = self.select(active, value, z);
                let z = self.u32c(0);
                let mask = self.select(active, mask, z);
                let none = self.u32c(u32::MAX);
                (value, mask, self.select(active, base, none))
            }
        };
        let writer = match pred {
            None => self.lit(naga::Literal::Bool(true)),
            Some(p) => self.read(p),
        };
        let lane = self.subgroup.expect("scanned: combining stores shuffles").1;
        let (mut union, mut covered, mut writer) = (value, mask, writer);
        // The other lanes of the aligned group, by their lane number's difference.
        for m in 1..group {
            let m = self.u32c(m);
            let [b, v] = [told, value].map(|x| self.shuffle(ScalarType::U32, x, GatherMode::ShuffleXor(m)));
            let s = self.u32c(per_word.trailing_zeros());
            let w = self.bin(Bo::ShiftRight, b, s);
            let same_word = self.bin(Bo::Equal, w, word);
            let none = self.u32c(u32::MAX);
            let stores = self.bin(Bo::NotEqual, b, none);
            let same = self.bin(Bo::LogicalAnd, same_word, stores);
            let z = self.u32c(0);
            let v = self.select(same, v, z);
            union = self.bin(Bo::InclusiveOr, union, v);
            let (_, at) = self.word_of(b, per_word, bits);
            let ones = self.u32c((1u32 << (n * bits)) - 1);
            let m_parts = self.bin(Bo::ShiftLeft, ones, at);
            let z = self.u32c(0);
            let m_parts = self.select(same, m_parts, z);
            covered = self.bin(Bo::InclusiveOr, covered, m_parts);
            let other = self.bin(Bo::ExclusiveOr, lane, m);
            let lower = self.bin(Bo::Less, other, lane);
            let deferred = self.bin(Bo::LogicalAnd, same, lower);
            let own = self.un(Uo::LogicalNot, deferred);
            writer = self.bin(Bo::LogicalAnd, writer, own);
        }
        let pointer = self.word_at(mem, word);
        let all = self.u32c(u32::MAX);
        let whole = self.bin(Bo::Equal, covered, all);
        let plain = self.nested(|cx| {
            cx.stmt(Statement::Store { pointer, value: union });
            Ok(())
        })?;
        let parts = self.nested(|cx| {
            let keep = cx.un(Uo::BitwiseNot, covered);
            for (fun, operand) in [(AtomicFunction::And, keep), (AtomicFunction::InclusiveOr, union)] {
                cx.stmt(Statement::Atomic {
                    pointer,
                    fun,
                    value: operand,
                    result: None,
                });
            }
            Ok(())
        })?;
        let write = self.nested(|cx| {
            cx.stmt(Statement::If {
                condition: whole,
                accept: plain,
                reject: parts,
            });
            Ok(())
        })?;
        self.stmt(Statement::If {
            condition: writer,
            accept: write,
            reject: Block::new(),
        });
        Ok(())
    }
}
