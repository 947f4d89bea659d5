//! `dot_scaled`: the product of two blocks in the OCP microscaling formats (`tl.dot_scaled`),
//! built from ops the IR has, as Triton computes it on GPUs without block-scaled MMAs (every
//! one before Blackwell): each operand is widened to bf16 (f16 where either is given as
//! f16), exactly, multiplied by its scale `2^(s - 127)` broadcast over each 32 elements of
//! K (a NaN where `s` is 255), rounded once to that type, and one `dot` adds the products
//! into f32. So the interpreter, every lowering and both backends run it without knowing
//! it, and `dot` picks the tensor cores for the bf16 or f16 blocks as for any other.

use super::{KernelBuilder, Value};
use crate::ir::SourceLoc;
use crate::types::ScalarType;

/// Elements of K that one scale covers (OCP's MX block size, Triton's `group_size`).
pub const MX_BLOCK: u32 = 32;

/// The element format of a `dot_scaled` operand (Triton's `lhs_format` / `rhs_format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MxFormat {
    /// fp4 E2M1 (`"e2m1"`): values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, two to a
    /// byte along K (a `u8` or `i8` block with half the K elements), the first in the low
    /// four bits.
    E2M1,
    /// fp8 E4M3 (`"e4m3"`): an `F8E4M3` block, or its bits as `u8` / `i8`.
    E4M3,
    /// fp8 E5M2 (`"e5m2"`): an `F8E5M2` block, or its bits as `u8` / `i8`.
    E5M2,
    /// bf16 (`"bf16"`): a `BF16` block.
    Bf16,
    /// f16 (`"fp16"`): an `F16` block; the products are then computed in f16.
    Fp16,
}

impl MxFormat {
    /// Triton's name of the format.
    pub fn name(self) -> &'static str {
        match self {
            MxFormat::E2M1 => "e2m1",
            MxFormat::E4M3 => "e4m3",
            MxFormat::E5M2 => "e5m2",
            MxFormat::Bf16 => "bf16",
            MxFormat::Fp16 => "fp16",
        }
    }

    /// Values a stored element holds along K (two for packed fp4).
    fn per_element(self) -> u32 {
        if self == MxFormat::E2M1 {
            2
        } else {
            1
        }
    }

    /// Whether a block of `t` can hold this format.
    fn holds(self, t: ScalarType) -> bool {
        let bytes = matches!(t, ScalarType::U8 | ScalarType::I8);
        match self {
            MxFormat::E2M1 => bytes,
            MxFormat::E4M3 => bytes || t == ScalarType::F8E4M3,
            MxFormat::E5M2 => bytes || t == ScalarType::F8E5M2,
            MxFormat::Bf16 => t == ScalarType::BF16,
            MxFormat::Fp16 => t == ScalarType::F16,
        }
    }
}

/// One operand of [`KernelBuilder::dot_scaled`]: its block, its scales and its format.
///
/// The left operand's block is `[M, K]` (`[M, K / 2]` bytes for [`MxFormat::E2M1`]) with
/// scales `[M, K / 32]`; the right one's `[K, N]` (`[K / 2, N]`) with scales `[N, K / 32]`
/// (as Triton takes them: by rows of the result's N, not transposed). Scales are E8M0 bytes
/// (`u8`, or `i8` read as its bits): `s` stands for `2^(s - 127)`, 255 for NaN. `None`
/// multiplies by 1.
///
/// fp4 may instead be packed along the other dimension (Triton's `lhs_k_pack=False` /
/// `rhs_k_pack=False`, [`Microscaled::packed_along_m_or_n`]): the left block is then
/// `[M / 2, K]` bytes, byte `[i, k]` holding rows `2i` (low four bits) and `2i + 1`, the
/// right one `[K, N / 2]`, byte `[k, j]` holding columns `2j` and `2j + 1`.
#[derive(Clone, Copy, Debug)]
pub struct Microscaled<'b> {
    /// The elements.
    pub value: Value<'b>,
    /// The E8M0 scales, one for each 32 elements along K.
    pub scale: Option<Value<'b>>,
    /// How the elements are stored.
    pub format: MxFormat,
    /// Whether packed fp4's two values a byte lie along K (Triton's `k_pack`, the default),
    /// or along M (left) or N (right).
    pub k_pack: bool,
}

impl<'b> Microscaled<'b> {
    /// `value` in `format`, scaled by `scale`; fp4 packed along K.
    pub fn new(value: Value<'b>, scale: Option<Value<'b>>, format: MxFormat) -> Microscaled<'b> {
        Microscaled {
            value,
            scale,
            format,
            k_pack: true,
        }
    }

    /// The same operand with its fp4 bytes packed along M (left) or N (right) rather than
    /// K (Triton's `k_pack=False`; only [`MxFormat::E2M1`] packs values).
    pub fn packed_along_m_or_n(self) -> Microscaled<'b> {
        Microscaled { k_pack: false, ..self }
    }

    /// Values a stored element holds along K.
    fn per_k(&self) -> u32 {
        if self.k_pack {
            self.format.per_element()
        } else {
            1
        }
    }

    /// Values a stored element holds along M or N.
    fn per_outer(&self) -> u32 {
        if self.k_pack {
            1
        } else {
            self.format.per_element()
        }
    }
}

/// How [`KernelBuilder::dot_scaled_with`] computes (Triton's keyword arguments of
/// `tl.dot_scaled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DotScaledOptions {
    /// Triton's `fast_math`: a scale of 255 is not made NaN. The caller promises none
    /// occurs; one that does multiplies its values by infinity (E8M0 255 read as an
    /// exponent), as Triton's emulation without the check does.
    pub fast_math: bool,
}

/// Which side of the product an operand is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Lhs,
    Rhs,
}

impl KernelBuilder {
    /// `(lhs * lhs_scale) @ (rhs * rhs_scale) + acc` for blocks in microscaling formats, as
    /// `tl.dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc)`: an f32
    /// `[M, N]` result (`acc` is an f32 `[M, N]` accumulator, zeros when `None`). Computed
    /// as Triton does without block-scaled MMAs (see the module comment): the products of
    /// the scaled values, rounded to bf16 (f16 when either format is [`MxFormat::Fp16`]),
    /// added in f32. A scale of 255 makes its 32 values NaN (Triton's default, without
    /// `fast_math`); a scale of 0 stands for `2^-127` (OCP's E8M0, which Triton's emulation
    /// flushes to zero). K must be a multiple of 32 where an operand has scales; fp4 is
    /// packed along K unless its operand says otherwise ([`Microscaled::packed_along_m_or_n`]).
    #[track_caller]
    pub fn dot_scaled<'b>(&'b self, lhs: Microscaled<'b>, rhs: Microscaled<'b>, acc: Option<Value<'b>>) -> Value<'b> {
        self.dot_scaled_at(lhs, rhs, acc, DotScaledOptions::default(), SourceLoc::caller())
    }

    /// [`KernelBuilder::dot_scaled`] with Triton's options: `tl.dot_scaled(...,
    /// fast_math=True)` is `dot_scaled_with(lhs, rhs, acc, DotScaledOptions { fast_math:
    /// true })`.
    #[track_caller]
    pub fn dot_scaled_with<'b>(
        &'b self,
        lhs: Microscaled<'b>,
        rhs: Microscaled<'b>,
        acc: Option<Value<'b>>,
        options: DotScaledOptions,
    ) -> Value<'b> {
        self.dot_scaled_at(lhs, rhs, acc, options, SourceLoc::caller())
    }

    fn dot_scaled_at<'b>(
        &'b self,
        lhs: Microscaled<'b>,
        rhs: Microscaled<'b>,
        acc: Option<Value<'b>>,
        options: DotScaledOptions,
        loc: SourceLoc,
    ) -> Value<'b> {
        let adopt = |m: Microscaled<'b>| Microscaled {
            value: self.adopt("dot_scaled", m.value, loc),
            scale: m.scale.map(|s| self.adopt("dot_scaled", s, loc)),
            ..m
        };
        let (lhs, rhs) = (adopt(lhs), adopt(rhs));
        let acc = acc.map(|a| self.adopt("dot_scaled", a, loc));
        let ty = lhs.value.ty();
        let operands = [Some(lhs.value), lhs.scale, Some(rhs.value), rhs.scale, acc];
        if operands.iter().flatten().any(|v| self.is_poisoned(v.id)) {
            return self.poison(ty);
        }
        let (m, n, k) = match self.scaled_shapes(&lhs, &rhs) {
            Ok(shape) => shape,
            Err(message) => return self.fail("dot_scaled", loc, message, ty),
        };
        let compute = if lhs.format == MxFormat::Fp16 || rhs.format == MxFormat::Fp16 {
            ScalarType::F16
        } else {
            ScalarType::BF16
        };
        let a = self.scaled_operand(lhs, Side::Lhs, compute, options, (m, n, k));
        let b = self.scaled_operand(rhs, Side::Rhs, compute, options, (m, n, k));
        match acc {
            Some(acc) => self.dot_acc(a, b, acc),
            None => self.dot(a, b),
        }
    }

    /// `(M, N, K)` of a `dot_scaled`, or what is wrong with its operands.
    fn scaled_shapes(&self, lhs: &Microscaled<'_>, rhs: &Microscaled<'_>) -> Result<(u32, u32, u32), String> {
        let dims = |m: &Microscaled<'_>, side: &str| -> Result<[u32; 2], String> {
            let t = m.value.ty();
            let elem = t.elem.scalar().filter(|&s| m.format.holds(s));
            match (<[u32; 2]>::try_from(t.shape.dims()), elem) {
                (Ok(d), Some(_)) => Ok(d),
                (Err(_), _) => Err(format!("the {side} operand must be a 2-D block, got {t}")),
                (_, None) => Err(format!(
                    "the {side} operand in format {} must be {}, got {t}",
                    m.format.name(),
                    match m.format {
                        MxFormat::E2M1 => "u8 or i8 (two fp4 values a byte along K)",
                        MxFormat::E4M3 => "f8e4m3, or its bits as u8 or i8",
                        MxFormat::E5M2 => "f8e5m2, or its bits as u8 or i8",
                        MxFormat::Bf16 => "bf16",
                        MxFormat::Fp16 => "f16",
                    }
                )),
            }
        };
        for (operand, side, outer) in [(lhs, "left", "M"), (rhs, "right", "N")] {
            if !operand.k_pack && operand.format != MxFormat::E2M1 {
                return Err(format!(
                    "the {side} operand is packed along {outer}, but only e2m1 packs values (it is {})",
                    operand.format.name()
                ));
            }
        }
        let ([lm, lk], [rk, rn]) = (dims(lhs, "left")?, dims(rhs, "right")?);
        let (m, n) = (lm * lhs.per_outer(), rn * rhs.per_outer());
        let (k, k_rhs) = (lk * lhs.per_k(), rk * rhs.per_k());
        if k != k_rhs {
            return Err(format!(
                "K differs: the left operand ({}) holds {k} values a row, the right one ({}) {k_rhs} a column",
                lhs.format.name(),
                rhs.format.name()
            ));
        }
        // (As `dot`'s; the fp4 decoding also relies on it: two bytes a lookup.)
        if m.min(n).min(k) < 16 {
            return Err(format!(
                "every dimension of the product must be at least 16, as `dot`'s, got M={m}, N={n}, K={k}"
            ));
        }
        for (operand, side, rows) in [(lhs, "left", m), (rhs, "right", n)] {
            let Some(scale) = operand.scale else { continue };
            let t = scale.ty();
            if k % MX_BLOCK != 0 {
                return Err(format!(
                    "K ({k}) must be a multiple of {MX_BLOCK} where an operand has scales"
                ));
            }
            let want = [rows, k / MX_BLOCK];
            let bytes = matches!(t.scalar_type(), Some(ScalarType::U8 | ScalarType::I8));
            if t.shape.dims() != want || !bytes {
                return Err(format!(
                    "the {side} operand's scales must be u8 (E8M0) of shape [{}, {}], got {t}",
                    want[0], want[1]
                ));
            }
        }
        Ok((m, n, k))
    }

    /// An operand of `dot_scaled` as a `[M, K]` or `[K, N]` block of `compute` values: its
    /// elements widened, times their scales, NaN where a scale is 255 (unless `fast_math`).
    fn scaled_operand<'b>(
        &'b self,
        operand: Microscaled<'b>,
        side: Side,
        compute: ScalarType,
        options: DotScaledOptions,
        (m, n, k): (u32, u32, u32),
    ) -> Value<'b> {
        let v = operand.value;
        let bytes = |v: Value<'b>| match v.dtype() {
            Some(ScalarType::I8) => v.bitcast(ScalarType::U8),
            _ => v,
        };
        let widened = match operand.format {
            MxFormat::E2M1 => {
                // The packed dimension: K of the left operand's columns or the right one's
                // rows, or (not `k_pack`) the other one. Decoded along the last axis: rows
                // are transposed there and back (renamings of the layout).
                let along_columns = (side == Side::Lhs) == operand.k_pack;
                if along_columns {
                    fp4_decode(self, bytes(v), compute)
                } else {
                    fp4_decode(self, bytes(v).trans(), compute).trans()
                }
            }
            MxFormat::E4M3 | MxFormat::E5M2 => {
                let fp8 = if operand.format == MxFormat::E4M3 {
                    ScalarType::F8E4M3
                } else {
                    ScalarType::F8E5M2
                };
                let v = if v.dtype() == Some(fp8) {
                    v
                } else {
                    bytes(v).bitcast(fp8)
                };
                v.to(compute)
            }
            // (An operand loaded in the compute type stays the load, as `to` keeps a value
            // of its own type: the pipeline then copies it into the MMA's tile.)
            MxFormat::Bf16 | MxFormat::Fp16 => v.to(compute),
        };
        let Some(scale) = operand.scale else {
            return widened.to(compute);
        };
        // Each scale's factor, computed once on the small block and then spread: E8M0 to
        // f32 by its bits (the byte is the exponent field; 0 stands for 2^-127, an f32
        // subnormal), NaN for 255; exact in bf16, rounded to f16 (where it overflows or
        // underflows). The right operand's scales come by rows of N: along K first.
        let s = bytes(scale).to(ScalarType::I32);
        let bits = self.where_(s.eq(0), 1 << 22, s << 23).bitcast(ScalarType::F32);
        let factor = if options.fast_math {
            bits
        } else {
            self.where_(s.eq(255), f64::NAN, bits)
        }
        .to(compute);
        let factor = match side {
            Side::Lhs => factor,
            Side::Rhs => factor.trans(),
        };
        // Spread over the operand by a gather along K: it keeps only the small block of
        // factors in shared memory, where reshaping a broadcast of 32 would exchange the
        // whole widened operand. Its index is made of `arange`s, so the lowering takes
        // the gather in the widened operand's layout (`lower/gather.rs`) and the product
        // below needs no exchange.
        let group = self.arange(0, k as i32) / MX_BLOCK as i32;
        let spread = match side {
            Side::Lhs => self.gather(factor, group.expand_dims(0).broadcast_to(&[m, k]), 1),
            Side::Rhs => self.gather(factor, group.expand_dims(1).broadcast_to(&[k, n]), 0),
        };
        (widened * spread).to(compute)
    }
}

/// The fp4 E2M1 values of `x`, a `[rows, bytes]` block of `u8`, exactly: `[rows, 2 *
/// bytes]` of `compute` (bf16 or f16), each byte's two values side by side along the last
/// axis, the low nibble first. The magnitudes' bits are looked up by byte permutes (one
/// `prmt` each on PTX) in tables of their low and high bytes, four values a lookup (two
/// neighbouring bytes' four nibbles in the selector: a row's bytes are a power of two of
/// at least 8, as `dot`'s blocks are at least 16 along each dimension); each byte's two
/// values are then made in one 32-bit word, as the matrix instructions take a pair of
/// 16-bit operands, and read as its halves (`thread/halves.rs`). The values of `s e e m`
/// are `±m/2` where `e` is 0, else `±2^(e - 1) (1 + m/2)`.
fn fp4_decode<'b>(k: &'b KernelBuilder, x: Value<'b>, compute: ScalarType) -> Value<'b> {
    let [rows, bytes] = <[u32; 2]>::try_from(x.ty().shape.dims()).expect("a 2-D block of bytes");
    let tables = Fp4Tables::new(k, compute);
    // Neighbouring bytes (held by one thread, as its loads are) in one selector.
    let (first, second) = k.split(x.reshape(&[rows, bytes / 2, 2]));
    let (first, second) = (first.to(ScalarType::I32), second.to(ScalarType::I32));
    let (lows, highs) = tables.lookup(first | (second << 8));
    let (v0, v1) = tables.values(lows, highs, 0, first);
    let (v2, v3) = tables.values(lows, highs, 1, second);
    // The four side by side on a new axis held in each thread (its selects fold, as the
    // lowering knows each register's place on it), merged into the row.
    let quads = [rows, bytes / 2, 4];
    let place = k.arange(0, 4).expand_dims(0).expand_dims(1).broadcast_to(&quads);
    let spread = |v: Value<'b>| v.expand_dims(2).broadcast_to(&quads);
    let last_two = k.where_(place.eq(2), spread(v2), spread(v3));
    let last_three = k.where_(place.eq(1), spread(v1), last_two);
    k.where_(place.eq(0), spread(v0), last_three)
        .reshape(&[rows, 2 * bytes])
}

/// The eight fp4 magnitudes' bits in `compute` (bf16 or f16), as two tables of bytes for
/// `byte_perm`: their low bytes and their high bytes, magnitudes 0 to 3 in the first word
/// of each and 4 to 7 in the second.
struct Fp4Tables<'b> {
    low: (Value<'b>, Value<'b>),
    high: (Value<'b>, Value<'b>),
    compute: ScalarType,
    k: &'b KernelBuilder,
}

impl<'b> Fp4Tables<'b> {
    fn new(k: &'b KernelBuilder, compute: ScalarType) -> Fp4Tables<'b> {
        let bits: [u16; 8] = std::array::from_fn(|c| {
            let v = FP4_MAGNITUDES[c];
            if compute == ScalarType::F16 {
                half::f16::from_f32(v).to_bits()
            } else {
                half::bf16::from_f32(v).to_bits()
            }
        });
        let table = |byte: usize| {
            let word = |first: usize| {
                (0..4).fold(0i32, |w, i| {
                    w | (((bits[first + i] >> (8 * byte)) & 0xFF) as i32) << (8 * i)
                })
            };
            (k.scalar(word(0), ScalarType::I32), k.scalar(word(4), ScalarType::I32))
        };
        Fp4Tables {
            low: table(0),
            high: table(1),
            compute,
            k,
        }
    }

    /// The low and high bytes of the magnitudes whose codes are the low three bits of the
    /// selector nibbles of `picks` (byte `n` of each for nibble `n`).
    fn lookup(&self, picks: Value<'b>) -> (Value<'b>, Value<'b>) {
        (
            self.low.0.byte_perm(self.low.1, picks),
            self.high.0.byte_perm(self.high.1, picks),
        )
    }

    /// The two values of byte `x` (i32, 0 to 255), whose nibbles were selector nibbles
    /// `2n` and `2n + 1` of the lookup that gave `lows` and `highs`: one word holding the
    /// low nibble's value in its low half (its low byte from `lows`, its high byte from
    /// `highs`) and the high nibble's in its high half, the signs (bits 3 and 7 of `x`) put
    /// on at bits 15 and 31 by `x << 12` and `x << 24` added (they do not overlap, as `x`
    /// is below 256); then its halves, as `compute` values.
    fn values(&self, lows: Value<'b>, highs: Value<'b>, n: i32, x: Value<'b>) -> (Value<'b>, Value<'b>) {
        let selector = if n == 0 { 0x5140 } else { 0x7362 };
        let magnitudes = lows.byte_perm(highs, self.k.scalar(selector, ScalarType::I32));
        let signs = (x * 0x0100_1000) & (0x8000_8000u32 as i32);
        let word = magnitudes | signs;
        let half = |w: Value<'b>| w.to(ScalarType::U16).bitcast(self.compute);
        (half(word), half(word >> 16))
    }
}

/// The magnitudes of fp4 E2M1's codes 0 to 7.
const FP4_MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
