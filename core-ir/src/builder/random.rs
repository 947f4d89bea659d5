//! Counter-based random numbers, as `triton.language.random`: Philox4x32-10 (Salmon et al.,
//! "Parallel random numbers: as easy as 1, 2, 3", SC 2011) keyed by a seed and counted by
//! each element's offset, and the uniform and normal distributions Triton derives from it.
//!
//! Philox is built here from existing integer ops (`umulhi`, `mul`, `xor`, `add` on `u32`),
//! so the interpreter, the lowering and every backend run it without knowing it, and the
//! streams equal Triton's for the same seed and offsets: `randint` and `rand` bit for bit
//! (integer ops, an exact int-to-float conversion and one correctly rounded product),
//! `randn` within the accuracy of the device's `log`, `sin` and `cos`.

use super::{KernelBuilder, Operand, Value};
use crate::ir::{BinaryOp, CmpOp, Op, SourceLoc, UnaryOp};
use crate::types::{Elem, ScalarType, Type};

/// The rounds of Philox4x32 that Triton (and Random123's default) uses.
pub const PHILOX_ROUNDS: u32 = 10;
/// The Weyl constant added to the first key word (the seed's low 32 bits) after each round.
pub const PHILOX_KEY_A: u32 = 0x9E37_79B9;
/// The Weyl constant added to the second key word (the seed's high 32 bits) after each
/// round.
pub const PHILOX_KEY_B: u32 = 0xBB67_AE85;
/// The multiplier of counter word 0 in the round function.
pub const PHILOX_ROUND_A: u32 = 0xD251_1F53;
/// The multiplier of counter word 2 in the round function.
pub const PHILOX_ROUND_B: u32 = 0xCD9E_8D57;

/// What `uint_to_uniform_float` scales a 31-bit integer by (about 2^-31): Triton's Python
/// float, which becomes an `f32` constant as here.
const UNIFORM_SCALE: f64 = 4.6566127342e-10;

/// The helpers below emit with the caller's location, so that every op of an expansion
/// points at the kernel author's line.
struct Emit<'b> {
    k: &'b KernelBuilder,
    loc: SourceLoc,
}

impl<'b> Emit<'b> {
    fn bin(&self, op: BinaryOp, a: Value<'b>, b: impl Into<Operand<'b>>) -> Value<'b> {
        self.k.binary(op, a.into(), b.into(), self.loc)
    }
    fn bitcast(&self, v: Value<'b>, s: ScalarType) -> Value<'b> {
        self.k.emit1(
            Op::Bitcast { value: v.id },
            Some(v.ty().with_elem(Elem::Scalar(s))),
            self.loc,
        )
    }
    fn cast(&self, v: Value<'b>, s: ScalarType) -> Value<'b> {
        self.k.cast_to(v, s, self.loc)
    }
    fn unary(&self, op: UnaryOp, v: Value<'b>) -> Value<'b> {
        self.k.unary(op, v.id, self.loc)
    }
    fn less_than_zero(&self, v: Value<'b>) -> Value<'b> {
        self.k.compare(CmpOp::Lt, v.into(), Operand::Int(0), self.loc)
    }
    fn select(&self, cond: Value<'b>, a: Value<'b>, b: Value<'b>) -> Value<'b> {
        self.k.emit1(
            Op::Select {
                cond: cond.id,
                on_true: a.id,
                on_false: b.id,
            },
            None,
            self.loc,
        )
    }
}

impl KernelBuilder {
    /// The seed as Philox's two 32-bit key words `(low, high)` of its value converted to
    /// `u64` (sign-extended from signed types, as Triton's `seed.to(tl.uint64)`), or `None`
    /// after reporting a seed that is not an integer.
    fn philox_key<'b>(&'b self, op: &str, seed: Operand<'b>, loc: SourceLoc) -> Option<(Value<'b>, Value<'b>)> {
        let e = Emit { k: self, loc };
        let seed = match seed {
            // Integer literals take the narrowest of i32, i64 and u64 that holds them, as a
            // Python int seed does in Triton.
            Operand::Int(i) => {
                let s = if i32::try_from(i).is_ok() {
                    ScalarType::I32
                } else if i64::try_from(i).is_ok() {
                    ScalarType::I64
                } else {
                    ScalarType::U64
                };
                self.literal_as(op, seed, s, crate::types::Shape::SCALAR, loc)
            }
            other => self.operand_value(op, other, loc),
        };
        if self.is_poisoned(seed.id) {
            return None;
        }
        let s = match seed.dtype() {
            Some(s) if s.is_int() => s,
            _ => {
                let message = format!("the seed must be an integer, got {}", seed.ty());
                self.report(op, loc, message);
                return None;
            }
        };
        if s.bits() == 64 {
            let bits = e.bitcast(seed, ScalarType::U64);
            let hi = e.bin(BinaryOp::Shr, bits, 32);
            return Some((e.cast(bits, ScalarType::U32), e.cast(hi, ScalarType::U32)));
        }
        // Narrower seeds need no 64-bit arithmetic: the high word is the sign extension.
        if s.is_signed_int() {
            let wide = e.cast(seed, ScalarType::I32);
            let sign = e.bin(BinaryOp::Shr, wide, 31);
            Some((e.bitcast(wide, ScalarType::U32), e.bitcast(sign, ScalarType::U32)))
        } else {
            let lo = e.cast(seed, ScalarType::U32);
            let hi = self.literal_as(op, Operand::Int(0), ScalarType::U32, seed.ty().shape, loc);
            Some((lo, hi))
        }
    }

    /// `n_rounds` rounds of Philox4x32 on the counter `c` (four `u32` blocks of one shape)
    /// with the key `(k0, k1)`, as Triton's `philox_impl`.
    fn philox_rounds<'b>(
        &'b self,
        c: [Value<'b>; 4],
        key: (Value<'b>, Value<'b>),
        n_rounds: u32,
        loc: SourceLoc,
    ) -> [Value<'b>; 4] {
        let e = Emit { k: self, loc };
        let [mut c0, mut c1, mut c2, mut c3] = c;
        let (mut k0, mut k1) = key;
        for _ in 0..n_rounds {
            let (a, b) = (c0, c2);
            let hi_b = e.bin(BinaryOp::UMulHi, b, PHILOX_ROUND_B);
            let hi_a = e.bin(BinaryOp::UMulHi, a, PHILOX_ROUND_A);
            c0 = e.bin(BinaryOp::Xor, e.bin(BinaryOp::Xor, hi_b, c1), k0);
            c2 = e.bin(BinaryOp::Xor, e.bin(BinaryOp::Xor, hi_a, c3), k1);
            c1 = e.bin(BinaryOp::Mul, b, PHILOX_ROUND_B);
            c3 = e.bin(BinaryOp::Mul, a, PHILOX_ROUND_A);
            k0 = e.bin(BinaryOp::Add, k0, PHILOX_KEY_A);
            k1 = e.bin(BinaryOp::Add, k1, PHILOX_KEY_B);
        }
        [c0, c1, c2, c3]
    }

    /// A counter word as `u32`: 32-bit integers are reinterpreted; anything else is
    /// reported (64-bit counters would need Philox4x64, which rutile does not have).
    fn philox_counter<'b>(&'b self, op: &str, c: Operand<'b>, loc: SourceLoc) -> Option<Value<'b>> {
        let v = self.operand_value(op, c, loc);
        if self.is_poisoned(v.id) {
            return None;
        }
        match v.dtype() {
            Some(ScalarType::U32) => Some(v),
            Some(ScalarType::I32) => Some(Emit { k: self, loc }.bitcast(v, ScalarType::U32)),
            _ => {
                let message = format!("offsets and counters must be i32 or u32 (Philox4x32), got {}", v.ty());
                self.report(op, loc, message);
                None
            }
        }
    }

    /// Philox4x32 with `n_rounds` rounds of the counter `(c0, c1, c2, c3)` (i32 or u32
    /// blocks, broadcast together) under `seed`, as Triton's `tl.philox`: four `u32` blocks.
    #[track_caller]
    pub fn philox<'b>(&'b self, seed: impl Into<Operand<'b>>, c: [Value<'b>; 4], n_rounds: u32) -> [Value<'b>; 4] {
        let loc = SourceLoc::caller();
        self.philox_at("philox", seed.into(), c, n_rounds, loc)
    }

    fn philox_at<'b>(
        &'b self,
        op: &str,
        seed: Operand<'b>,
        c: [Value<'b>; 4],
        n_rounds: u32,
        loc: SourceLoc,
    ) -> [Value<'b>; 4] {
        let fallback = |k: &'b KernelBuilder| {
            let shape = c[0].ty().shape;
            [(); 4].map(|_| k.poison(Type::block(Elem::Scalar(ScalarType::U32), shape)))
        };
        let key = self.philox_key(op, seed, loc);
        let words: Vec<Option<Value>> = c.iter().map(|&w| self.philox_counter(op, w.into(), loc)).collect();
        let (Some(key), Some(w)) = (key, words.into_iter().collect::<Option<Vec<Value>>>()) else {
            return fallback(self);
        };
        // One shape for the four words (scalars and blocks broadcast as in arithmetic).
        let mut shape = w[0].ty().shape;
        for x in &w[1..] {
            match crate::types::Shape::broadcast(shape, x.ty().shape) {
                Some(s) => shape = s,
                None => {
                    let message = format!(
                        "counter shapes {shape} and {} cannot be broadcast together",
                        x.ty().shape
                    );
                    self.report(op, loc, message);
                    return fallback(self);
                }
            }
        }
        let w: Vec<Value> = w.into_iter().map(|x| self.broadcast_to(op, x, shape, loc)).collect();
        self.philox_rounds([w[0], w[1], w[2], w[3]], key, n_rounds, loc)
    }

    /// Four blocks of random `u32`s for each element of `offset` (i32 or u32), as Triton's
    /// `tl.randint4x(seed, offset)`: Philox4x32-10 of the counter `(offset, 0, 0, 0)`.
    #[track_caller]
    pub fn randint4x<'b>(&'b self, seed: impl Into<Operand<'b>>, offset: Value<'b>) -> [Value<'b>; 4] {
        self.randint4x_at("randint4x", seed.into(), offset, SourceLoc::caller())
    }

    fn randint4x_at<'b>(&'b self, op: &str, seed: Operand<'b>, offset: Value<'b>, loc: SourceLoc) -> [Value<'b>; 4] {
        let offset = self.adopt(op, offset, loc);
        let shape = offset.ty().shape;
        let zero = self.literal_as(op, Operand::Int(0), ScalarType::U32, shape, loc);
        self.philox_at(op, seed, [offset, zero, zero, zero], PHILOX_ROUNDS, loc)
    }

    /// One block of random `u32`s, as Triton's `tl.randint(seed, offset)`: the first word
    /// of [`Self::randint4x`].
    #[track_caller]
    pub fn randint<'b>(&'b self, seed: impl Into<Operand<'b>>, offset: Value<'b>) -> Value<'b> {
        self.randint4x_at("randint", seed.into(), offset, SourceLoc::caller())[0]
    }

    /// Uniform `f32`s in `[0, 1)`, as Triton's `tl.rand(seed, offset)`:
    /// [`Self::uint_to_uniform_float`] of [`Self::randint`].
    #[track_caller]
    pub fn rand<'b>(&'b self, seed: impl Into<Operand<'b>>, offset: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let r = self.randint4x_at("rand", seed.into(), offset, loc)[0];
        self.uniform_at(r, loc)
    }

    /// Standard normal `f32`s, as Triton's `tl.randn(seed, offset)`: the first result of
    /// [`Self::pair_uniform_to_normal`] of the uniform floats of the first two words of
    /// [`Self::randint4x`].
    #[track_caller]
    pub fn randn<'b>(&'b self, seed: impl Into<Operand<'b>>, offset: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let [i1, i2, _, _] = self.randint4x_at("randn", seed.into(), offset, loc);
        let (u1, u2) = (self.uniform_at(i1, loc), self.uniform_at(i2, loc));
        self.normal_at(u1, u2, loc).0
    }

    /// A random `u32` (or `i32`) block as uniform `f32`s in `[0, 1)`, as Triton's
    /// `uint_to_uniform_float`: the bits as `i32`, negative values `v` mapped to `-v - 1`,
    /// times 4.6566127342e-10 (about 2^-31) in `f32`.
    #[track_caller]
    pub fn uint_to_uniform_float<'b>(&'b self, x: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("uint_to_uniform_float", x, loc);
        match x.dtype() {
            Some(ScalarType::U32 | ScalarType::I32) => self.uniform_at(x, loc),
            _ => {
                let message = format!("needs i32 or u32 random bits, got {}", x.ty());
                self.fail(
                    "uint_to_uniform_float",
                    loc,
                    message,
                    x.ty().with_elem(Elem::Scalar(ScalarType::F32)),
                )
            }
        }
    }

    fn uniform_at<'b>(&'b self, x: Value<'b>, loc: SourceLoc) -> Value<'b> {
        let e = Emit { k: self, loc };
        if self.is_poisoned(x.id) {
            return self.poison(x.ty().with_elem(Elem::Scalar(ScalarType::F32)));
        }
        let i = if x.dtype() == Some(ScalarType::I32) {
            x
        } else {
            e.bitcast(x, ScalarType::I32)
        };
        let neg = e.less_than_zero(i);
        let flipped = e.bin(BinaryOp::Sub, e.unary(UnaryOp::Neg, i), 1);
        let v = e.select(neg, flipped, i);
        let f = e.cast(v, ScalarType::F32);
        e.bin(BinaryOp::Mul, f, UNIFORM_SCALE)
    }

    /// Two independent standard normal `f32` blocks from two uniform ones (Box-Muller), as
    /// Triton's `pair_uniform_to_normal`: `u1` is raised to at least 1e-7, then
    /// `r = sqrt(-2 log u1)` and `θ = 2π u2` give `(r cos θ, r sin θ)`.
    #[track_caller]
    pub fn pair_uniform_to_normal<'b>(&'b self, u1: Value<'b>, u2: Value<'b>) -> (Value<'b>, Value<'b>) {
        let loc = SourceLoc::caller();
        let (u1, u2) = (
            self.adopt("pair_uniform_to_normal", u1, loc),
            self.adopt("pair_uniform_to_normal", u2, loc),
        );
        self.normal_at(u1, u2, loc)
    }

    fn normal_at<'b>(&'b self, u1: Value<'b>, u2: Value<'b>, loc: SourceLoc) -> (Value<'b>, Value<'b>) {
        let e = Emit { k: self, loc };
        let u1 = e.bin(BinaryOp::Max, u1, 1.0e-7f64);
        let th = e.bin(BinaryOp::Mul, u2, std::f64::consts::TAU);
        let l = e.unary(UnaryOp::Log, u1);
        let r = e.unary(UnaryOp::Sqrt, e.bin(BinaryOp::Mul, l, -2.0f64));
        let c = e.unary(UnaryOp::Cos, th);
        let s = e.unary(UnaryOp::Sin, th);
        (e.bin(BinaryOp::Mul, r, c), e.bin(BinaryOp::Mul, r, s))
    }
}
