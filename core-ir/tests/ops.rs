//! Every op family of the kernel language, written with the builder and run by the CPU
//! interpreter, against Rust references of the semantics documented in `ir.rs`: integer
//! and float arithmetic, comparisons, `where`, casts and bitcasts, math functions,
//! broadcasting and shape ops, masked memory, reductions, `dot`, atomics and control flow.
//!
//! Inputs are random (splitmix64) with the edge cases of each op mixed in. Element-wise ops
//! go through one table-driven harness: [`elementwise`] builds `out = f(inputs...)` over
//! blocks of [`BLOCK`] lanes with a ragged last block, runs it, and returns the output.

use half::{bf16, f16};
use rutile_ir::interp::{self, ArgValue, Element, HostBuffer};
use rutile_ir::ir::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, *};
use rutile_ir::{Kernel, KernelBuilder, Operand, Value};
use std::fmt::Debug;

// ---------------------------------------------------------------------------------------
// Inputs, launches and the element-wise harness
// ---------------------------------------------------------------------------------------

/// Integers of every magnitude: random bits shifted right by a random amount, negated half
/// the time (as an i128, to be wrapped to the type under test).
fn any_int(rng: &mut Rng) -> i128 {
    let v = (rng.next_u64() >> rng.below(64)) as i128;
    if rng.next_u64() & 1 == 1 {
        -v
    } else {
        v
    }
}

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Lanes per program of the element-wise harness.
const BLOCK: u32 = 64;

/// Builds and runs `out[i] = f(k, [in_0[i], in_1[i], ...])` for every `i` below the inputs'
/// length, over programs of [`BLOCK`] lanes (the last one masked), and returns `out`.
/// `f`'s result must have element type `out` (no implicit conversion at the store).
fn elementwise(
    inputs: &[HostBuffer],
    out: ScalarType,
    f: impl for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
) -> HostBuffer {
    let n = inputs[0].len();
    assert!(inputs.iter().all(|b| b.len() == n));
    let kernel = Kernel::build("elementwise", |k| {
        let ins: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, b)| k.arg_ptr(&format!("in{i}"), b.elem()))
            .collect();
        let out_ptr = k.arg_ptr("out", out);
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i32);
        let mask = offs.lt(n);
        let xs: Vec<Value> = ins.iter().map(|&p| k.load_masked(p + offs, mask, 0)).collect();
        let r = f(k, &xs);
        assert_eq!(r.dtype(), Some(out), "the op gives {:?}", r.ty());
        assert_eq!(r.shape(), vec![BLOCK]);
        k.store_masked(out_ptr + offs, r, mask);
    })
    .unwrap();
    let mut buffers: Vec<HostBuffer> = inputs.to_vec();
    buffers.push(HostBuffer::zeros(out, n));
    let mut args: Vec<ArgValue> = (0..=inputs.len()).map(ptr).collect();
    args.push(ArgValue::Int(n as i64));
    interp::run(&kernel, [n.div_ceil(BLOCK as usize) as u32, 1, 1], &args, &mut buffers).unwrap();
    buffers.pop().unwrap()
}

type Build1 = for<'b> fn(Value<'b>) -> Value<'b>;
type Build2 = for<'b> fn(Value<'b>, Value<'b>) -> Value<'b>;
/// A row of an op table: the op's name, how the kernel builds it, and the reference.
type Case<B, R> = (&'static str, B, R);
type IntOp1 = fn(i128) -> i128;
type IntOp2 = fn(i128, i128) -> i128;
type FloatOp2 = fn(f64, f64) -> f64;
type BoolOp2 = fn(bool, bool) -> bool;

/// Host integer types, with references computed in i128 and wrapped to the type.
trait Int: Element + Copy + Debug + PartialEq {
    const BITS: u32;
    const SIGNED: bool;
    /// The value of `v` modulo 2^BITS (Rust's `as`).
    fn wrap(v: i128) -> Self;
    fn wide(self) -> i128;
    /// Rust's `as` from f64: truncation toward zero, saturating, NaN to 0.
    fn from_f64_as(v: f64) -> Self;
}

macro_rules! int_impl {
    ($($t:ty: $signed:expr),*) => {$(
        impl Int for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = $signed;
            fn wrap(v: i128) -> Self { v as $t }
            fn wide(self) -> i128 { self as i128 }
            fn from_f64_as(v: f64) -> Self { v as $t }
        }
    )*};
}
int_impl!(i8: true, i16: true, i32: true, i64: true, u8: false, u16: false, u32: false, u64: false);

/// A binary float format: `p` significand bits (with the implicit one), exponent range.
#[derive(Clone, Copy, Debug)]
struct Fmt {
    p: i32,
    emin: i32,
    emax: i32,
}

const FMT_F16: Fmt = Fmt {
    p: 11,
    emin: -14,
    emax: 15,
};
const FMT_BF16: Fmt = Fmt {
    p: 8,
    emin: -126,
    emax: 127,
};
const FMT_F32: Fmt = Fmt {
    p: 24,
    emin: -126,
    emax: 127,
};
const FMT_F64: Fmt = Fmt {
    p: 53,
    emin: -1022,
    emax: 1023,
};

/// 2^k as an f64, for k in [-1074, 1023].
fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (k + 1074))
    }
}

/// The exponent of a finite non-zero f64 (floor(log2 |v|), -1023 for f64 subnormals).
fn exponent(v: f64) -> i32 {
    ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

impl Fmt {
    fn max(self) -> f64 {
        (2.0 - pow2(1 - self.p)) * pow2(self.emax)
    }
    /// The spacing of the format's values at `v`.
    fn ulp(self, v: f64) -> f64 {
        let e = if v == 0.0 {
            self.emin
        } else {
            exponent(v.abs()).max(self.emin)
        };
        pow2(e - self.p + 1)
    }
}

/// The reference rounding of an f64 to a format: to nearest, ties to even, overflowing to
/// infinity, through subnormals. Independent of the interpreter's own conversions: `v`
/// divided by the spacing of its binade is rounded to an integer, which is exact in f64.
fn round_f64(v: f64, f: Fmt) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    let ulp = f.ulp(v);
    let r = (v.abs() / ulp).round_ties_even() * ulp;
    let r = if r > f.max() { f64::INFINITY } else { r };
    r.copysign(v)
}

/// The reference rounding of an integer to a format, exactly, in integer arithmetic.
fn round_int(v: i128, f: Fmt) -> f64 {
    if v == 0 {
        return 0.0;
    }
    let m = v.unsigned_abs();
    let e = 127 - m.leading_zeros() as i32;
    let shift = e - (f.p - 1);
    let r = if shift <= 0 {
        m
    } else {
        let q = m >> shift;
        let rest = m - (q << shift);
        let half = 1u128 << (shift - 1);
        let q = if rest > half || (rest == half && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        q << shift
    };
    // `r` has at most `p` significant bits, so the conversion is exact.
    let x = r as f64;
    let x = if x > f.max() { f64::INFINITY } else { x };
    if v < 0 {
        -x
    } else {
        x
    }
}

/// Host float types.
trait Float: Element + Copy + Debug {
    const FMT: Fmt;
    /// `v`, which must be a value of the type (checked).
    fn exact(v: f64) -> Self;
    fn f64(self) -> f64;
    /// `v` rounded to the type by the reference rounding.
    fn round(v: f64) -> Self {
        Self::exact(round_f64(v, Self::FMT))
    }
}

impl Float for f32 {
    const FMT: Fmt = FMT_F32;
    fn exact(v: f64) -> Self {
        assert!(v.is_nan() || v as f32 as f64 == v, "{v} is not an f32");
        v as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
}
impl Float for f64 {
    const FMT: Fmt = FMT_F64;
    fn exact(v: f64) -> Self {
        v
    }
    fn f64(self) -> f64 {
        self
    }
}
impl Float for f16 {
    const FMT: Fmt = FMT_F16;
    fn exact(v: f64) -> Self {
        let x = f16::from_f64(v);
        assert!(v.is_nan() || x.to_f64() == v, "{v} is not an f16");
        x
    }
    fn f64(self) -> f64 {
        self.to_f64()
    }
}
impl Float for bf16 {
    const FMT: Fmt = FMT_BF16;
    fn exact(v: f64) -> Self {
        let x = bf16::from_f64(v);
        assert!(v.is_nan() || x.to_f64() == v, "{v} is not a bf16");
        x
    }
    fn f64(self) -> f64 {
        self.to_f64()
    }
}

/// Values of a float type: the special ones first, then random values of every magnitude
/// the type holds (with both signs), rounded to the type.
fn float_inputs<T: Float>(rng: &mut Rng, n: usize) -> Vec<T> {
    let f = T::FMT;
    let mut v: Vec<f64> = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        f.max(),
        -f.max(),
        pow2(f.emin),
        pow2(f.emin - f.p + 1),
        -pow2(f.emin - f.p + 1),
    ];
    while v.len() < n {
        let e = rng.below((f.emax - f.emin) as u64) as i32 + f.emin;
        let x = rng.uniform(1.0, 2.0) * pow2(e);
        v.push(if rng.next_u64() & 1 == 1 { -x } else { x });
    }
    v.into_iter().map(T::round).collect()
}

/// Whether `got` and `want` are the same float: both NaN, or the same bits (so the sign
/// of zero counts).
fn same_float(got: f64, want: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
}

// ---------------------------------------------------------------------------------------
// Integer arithmetic
// ---------------------------------------------------------------------------------------

/// Random pairs for binary integer ops, with edge cases first; `y` is never zero.
fn int_pairs<T: Int>(rng: &mut Rng, n: usize) -> (Vec<T>, Vec<T>) {
    let (min, max) = if T::SIGNED {
        (-(1i128 << (T::BITS - 1)), (1i128 << (T::BITS - 1)) - 1)
    } else {
        (0, (1i128 << T::BITS) - 1)
    };
    let mut pairs: Vec<(i128, i128)> = vec![
        (min, -1),
        (max, 1),
        (min, 1),
        (max, max),
        (min, min),
        (max, -1),
        (7, 2),
        (-7, 2),
        (7, -2),
        (-7, -2),
    ];
    while pairs.len() < n {
        pairs.push((any_int(rng), any_int(rng)));
    }
    let x = pairs.iter().map(|p| T::wrap(p.0)).collect();
    let y = pairs
        .iter()
        .map(|p| {
            if T::wrap(p.1).wide() == 0 {
                T::wrap(3)
            } else {
                T::wrap(p.1)
            }
        })
        .collect();
    (x, y)
}

/// Each binary integer op on one type against its i128 reference wrapped to the type.
fn int_binary_ops<T: Int>(rng: &mut Rng) {
    let (x, y) = int_pairs::<T>(rng, 300);
    let bits = T::BITS as i128;
    let ops: [Case<Build2, IntOp2>; 10] = [
        ("add", |a, b| a + b, |a, b| a + b),
        ("sub", |a, b| a - b, |a, b| a - b),
        ("mul", |a, b| a * b, |a, b| a.wrapping_mul(b)),
        // i128 division truncates toward zero, as C; MIN / -1 wraps to MIN.
        ("div", |a, b| a / b, |a, b| a / b),
        ("rem", |a, b| a % b, |a, b| a % b),
        ("and", |a, b| a & b, |a, b| a & b),
        ("or", |a, b| a | b, |a, b| a | b),
        ("xor", |a, b| a ^ b, |a, b| a ^ b),
        ("minimum", |a, b| a.minimum(b), |a, b| a.min(b)),
        ("maximum", |a, b| a.maximum(b), |a, b| a.max(b)),
    ];
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    for (name, build, reference) in ops {
        let got: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| build(v[0], v[1]))
            .to_vec()
            .unwrap();
        for i in 0..x.len() {
            let want = T::wrap(reference(x[i].wide(), y[i].wide()));
            assert_eq!(got[i], want, "{name} of {:?} and {:?} in {}", x[i], y[i], T::TYPE);
        }
    }
    // Shifts: amounts below the width, at or above it, and (for signed types) negative
    // ones, which count as above the width.
    let amounts: Vec<T> = (0..x.len())
        .map(|i| match i % 4 {
            0 => T::wrap(bits + rng.below(bits as u64) as i128),
            1 if T::SIGNED => T::wrap(-1 - rng.below(bits as u64) as i128),
            _ => T::wrap(rng.below(bits as u64) as i128),
        })
        .collect();
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&amounts)];
    let shl: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| v[0] << v[1]).to_vec().unwrap();
    let shr: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| v[0] >> v[1]).to_vec().unwrap();
    for i in 0..x.len() {
        let (a, b) = (x[i].wide(), amounts[i].wide());
        let out_of_range = !(0..bits).contains(&b);
        let want_shl = if out_of_range { 0 } else { a << b };
        // `a` is sign-extended for signed types and non-negative for unsigned ones, so an
        // i128 shift is arithmetic or logical as the type's.
        let want_shr = if out_of_range { a >> 127 } else { a >> b };
        assert_eq!(
            shl[i],
            T::wrap(want_shl),
            "{:?} << {:?} in {}",
            x[i],
            amounts[i],
            T::TYPE
        );
        assert_eq!(
            shr[i],
            T::wrap(want_shr),
            "{:?} >> {:?} in {}",
            x[i],
            amounts[i],
            T::TYPE
        );
    }
    // Unary ops wrap too: -MIN is MIN, |MIN| is MIN; `!` is bitwise.
    let inputs = [HostBuffer::from_slice(&x)];
    let unary: [Case<Build1, IntOp1>; 3] = [
        ("neg", |a| -a, |a| -a),
        ("not", |a| !a, |a| !a),
        ("abs", |a| a.abs(), |a| a.abs()),
    ];
    for (name, build, reference) in unary {
        let got: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| build(v[0])).to_vec().unwrap();
        for i in 0..x.len() {
            assert_eq!(
                got[i],
                T::wrap(reference(x[i].wide())),
                "{name} of {:?} in {}",
                x[i],
                T::TYPE
            );
        }
    }
}

#[test]
fn integer_arithmetic_bitwise_and_shifts_wrap_on_every_type() {
    let mut rng = Rng::new(0x0b5_0001);
    int_binary_ops::<i8>(&mut rng);
    int_binary_ops::<i16>(&mut rng);
    int_binary_ops::<i32>(&mut rng);
    int_binary_ops::<i64>(&mut rng);
    int_binary_ops::<u8>(&mut rng);
    int_binary_ops::<u16>(&mut rng);
    int_binary_ops::<u32>(&mut rng);
    int_binary_ops::<u64>(&mut rng);
}

#[test]
fn integer_division_and_remainder_truncate_toward_zero() {
    let x: Vec<i32> = vec![-7, 7, -7, 7, -1, 1, i32::MIN, i32::MIN, 0, -8];
    let y: Vec<i32> = vec![2, -2, -2, 2, 2, -2, -1, 1, -5, 4];
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    let div: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0] / v[1]).to_vec().unwrap();
    let rem: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0] % v[1]).to_vec().unwrap();
    assert_eq!(div, [-3, -3, 3, 3, 0, 0, i32::MIN, i32::MIN, 0, -2]);
    assert_eq!(rem, [-1, 1, -1, 1, -1, 1, 0, 0, 0, 0]);
    // With literal divisors, which take the other operand's type.
    let inputs = [HostBuffer::from_slice(&x)];
    let div2: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0] / 2).to_vec().unwrap();
    let rem_neg2: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0] % -2).to_vec().unwrap();
    let seven_div: Vec<i32> = elementwise(&inputs, I32, |_, v| -7 / (v[0] - v[0] + 2))
        .to_vec()
        .unwrap();
    assert_eq!(div2, x.iter().map(|a| a / 2).collect::<Vec<_>>());
    assert_eq!(rem_neg2, x.iter().map(|a| a % -2).collect::<Vec<_>>());
    assert!(seven_div.iter().all(|&q| q == -3));
    // The same in i8 and i64: the result keeps the operands' type.
    let x8: Vec<i8> = vec![-7, 7, -128, 127];
    let y8: Vec<i8> = vec![2, -2, -1, -2];
    let inputs = [HostBuffer::from_slice(&x8), HostBuffer::from_slice(&y8)];
    let q8: Vec<i8> = elementwise(&inputs, I8, |_, v| v[0] / v[1]).to_vec().unwrap();
    let r8: Vec<i8> = elementwise(&inputs, I8, |_, v| v[0] % v[1]).to_vec().unwrap();
    assert_eq!((q8, r8), (vec![-3, -3, -128, -63], vec![-1, 1, 0, 1]));
    let x64: Vec<i64> = vec![-7_000_000_000_007, 7, i64::MIN];
    let y64: Vec<i64> = vec![2, -2, -1];
    let inputs = [HostBuffer::from_slice(&x64), HostBuffer::from_slice(&y64)];
    let q64: Vec<i64> = elementwise(&inputs, I64, |_, v| v[0] / v[1]).to_vec().unwrap();
    let r64: Vec<i64> = elementwise(&inputs, I64, |_, v| v[0] % v[1]).to_vec().unwrap();
    assert_eq!((q64, r64), (vec![-3_500_000_000_003, -3, i64::MIN], vec![-1, 1, 0]));
}

#[test]
fn cdiv_is_a_plus_b_minus_one_over_b() {
    let mut rng = Rng::new(0x0b5_0002);
    let n = 500;
    let a: Vec<i32> = (0..n)
        .map(|i| {
            if i < 250 {
                rng.below(1 << 20) as i32
            } else {
                rng.below(2000) as i32 - 1000
            }
        })
        .collect();
    let b: Vec<i32> = (0..n).map(|_| rng.below(1000) as i32 + 1).collect();
    let inputs = [HostBuffer::from_slice(&a), HostBuffer::from_slice(&b)];
    let got: Vec<i32> = elementwise(&inputs, I32, |k, v| k.cdiv(v[0], v[1])).to_vec().unwrap();
    let method: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0].cdiv(v[1])).to_vec().unwrap();
    let by_128: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0].cdiv(128)).to_vec().unwrap();
    for i in 0..n {
        // Triton's `cdiv(a, b) = (a + b - 1) // b` with C division: the ceiling for a ≥ 0.
        let want = (a[i] + b[i] - 1) / b[i];
        if a[i] >= 0 {
            assert_eq!(want, (a[i] as u32).div_ceil(b[i] as u32) as i32);
        }
        assert_eq!((got[i], method[i]), (want, want), "cdiv({}, {})", a[i], b[i]);
        assert_eq!(by_128[i], (a[i] + 127) / 128, "cdiv({}, 128)", a[i]);
    }
    // Unsigned, near the top of the range (the sum wraps in the type, as documented).
    let a: Vec<u32> = vec![0, 1, 4096, 4097, u32::MAX - 5, 3_000_000_000];
    let b: Vec<u32> = vec![7, 7, 64, 64, 2, 1_000_000_000];
    let inputs = [HostBuffer::from_slice(&a), HostBuffer::from_slice(&b)];
    let got: Vec<u32> = elementwise(&inputs, U32, |k, v| k.cdiv(v[0], v[1])).to_vec().unwrap();
    let want: Vec<u32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| a.wrapping_add(b).wrapping_sub(1) / b)
        .collect();
    assert_eq!(got, want);
    assert_eq!(&got[..4], [0, 1, 64, 65]);
}

/// Float arithmetic is correctly rounded: the f64 result of two values of the type rounded
/// once to the type is (innocuous double rounding: 53 ≥ 2p + 2 for f32, f16 and bf16), and
/// `%` is the exact `fmod`.
fn float_arithmetic<T: Float>(rng: &mut Rng) {
    let x: Vec<T> = float_inputs(rng, 300);
    let mut y: Vec<T> = float_inputs(rng, 300);
    y.rotate_left(5); // specials against each other: inf - inf, 0 / 0, x / 0, ...
                      // Operands of similar magnitude too, where cancellation and rounding ties happen.
    let close: Vec<T> = (0..300).map(|_| T::round(rng.uniform(-4.0, 4.0))).collect();
    let ops: [Case<Build2, FloatOp2>; 5] = [
        ("add", |a, b| a + b, |a, b| a + b),
        ("sub", |a, b| a - b, |a, b| a - b),
        ("mul", |a, b| a * b, |a, b| a * b),
        ("div", |a, b| a / b, |a, b| a / b),
        ("rem", |a, b| a % b, |a, b| a % b),
    ];
    for (x, y) in [(&x, &y), (&close, &close.iter().rev().copied().collect::<Vec<T>>())] {
        let inputs = [HostBuffer::from_slice(x), HostBuffer::from_slice(y)];
        for (name, build, reference) in ops {
            let got: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| build(v[0], v[1]))
                .to_vec()
                .unwrap();
            for i in 0..x.len() {
                let (a, b) = (x[i].f64(), y[i].f64());
                let want = round_f64(reference(a, b), T::FMT);
                assert!(
                    same_float(got[i].f64(), want),
                    "{name}({a:e}, {b:e}) = {:?} in {}, expected {want:e}",
                    got[i],
                    T::TYPE
                );
            }
        }
    }
    // Unary minus flips the sign bit, also of zeros and NaNs' signs.
    let neg: Vec<T> = elementwise(&[HostBuffer::from_slice(&x)], T::TYPE, |_, v| -v[0])
        .to_vec()
        .unwrap();
    for i in 0..x.len() {
        assert!(same_float(neg[i].f64(), -x[i].f64()), "-{:?}", x[i]);
    }
}

#[test]
fn float_arithmetic_is_correctly_rounded() {
    let mut rng = Rng::new(0x0b5_001a);
    float_arithmetic::<f32>(&mut rng);
    float_arithmetic::<f64>(&mut rng);
    float_arithmetic::<f16>(&mut rng);
    float_arithmetic::<bf16>(&mut rng);
}

#[test]
fn program_ids_and_grid_sizes_on_three_axes() {
    let kernel = Kernel::build("ids", |k| {
        let out = k.arg_ptr("out", I32);
        let (x, y, z) = (k.program_id(0), k.program_id(1), k.program_id(2));
        let (nx, ny, nz) = (k.num_programs(0), k.num_programs(1), k.num_programs(2));
        let linear = (z * ny + y) * nx + x;
        let value = x + y * 10 + z * 100 + nx * 1000 + ny * 10_000 + nz * 100_000;
        // Constants of the builder: a block of twos, reduced, is the lane count times two.
        let twos = k.full(&[4], 2, I32).sum(0) + k.zeros(&[4], I32).sum(0);
        k.store(out + linear * 2, value);
        k.store(out + linear * 2 + 1, twos);
    })
    .unwrap();
    let grid = [3u32, 4, 2];
    let n = 24;
    let mut buffers = [HostBuffer::zeros(I32, 2 * n)];
    interp::run(&kernel, grid, &[ptr(0)], &mut buffers).unwrap();
    let got: Vec<i32> = buffers[0].to_vec().unwrap();
    for z in 0..2 {
        for y in 0..4 {
            for x in 0..3 {
                let linear = (z * 4 + y) * 3 + x;
                assert_eq!(
                    got[linear * 2],
                    (x + y * 10 + z * 100 + 3_000 + 40_000 + 200_000) as i32
                );
                assert_eq!(got[linear * 2 + 1], 8);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Booleans, comparisons, minimum/maximum, where
// ---------------------------------------------------------------------------------------

#[test]
fn boolean_logic() {
    let mut rng = Rng::new(0x0b5_0003);
    let n = 300;
    let p: Vec<bool> = (0..n).map(|_| rng.next_u64() & 1 == 1).collect();
    let q: Vec<bool> = (0..n).map(|_| rng.next_u64() & 1 == 1).collect();
    let inputs = [HostBuffer::from_bools(&p), HostBuffer::from_bools(&q)];
    let ops: [Case<Build2, BoolOp2>; 8] = [
        ("and", |a, b| a & b, |a, b| a & b),
        ("or", |a, b| a | b, |a, b| a | b),
        ("xor", |a, b| a ^ b, |a, b| a ^ b),
        ("not", |a, _| !a, |a, _| !a),
        ("and true", |a, _| a & true, |a, _| a),
        ("or false", |a, _| a | false, |a, _| a),
        ("eq", |a, b| a.eq(b), |a, b| a == b),
        ("lt", |a, b| a.lt(b), |a, b| !a & b),
    ];
    for (name, build, reference) in ops {
        let got = elementwise(&inputs, Bool, |_, v| build(v[0], v[1])).to_bools().unwrap();
        for i in 0..n {
            assert_eq!(got[i], reference(p[i], q[i]), "{name} of {} and {}", p[i], q[i]);
        }
    }
    // Masks from comparisons combine the same way.
    let x: Vec<i32> = (0..n).map(|_| rng.below(100) as i32 - 50).collect();
    let got = elementwise(&[HostBuffer::from_slice(&x)], Bool, |_, v| {
        (v[0].gt(-10) & v[0].lt(10)) | v[0].eq(42)
    })
    .to_bools()
    .unwrap();
    for i in 0..n {
        assert_eq!(got[i], (x[i] > -10 && x[i] < 10) || x[i] == 42);
    }
}

type Cmp = fn(f64, f64) -> bool;
const COMPARISONS: [Case<Build2, Cmp>; 6] = [
    ("eq", |a, b| a.eq(b), |a, b| a == b),
    ("ne", |a, b| a.ne(b), |a, b| a != b),
    ("lt", |a, b| a.lt(b), |a, b| a < b),
    ("le", |a, b| a.le(b), |a, b| a <= b),
    ("gt", |a, b| a.gt(b), |a, b| a > b),
    ("ge", |a, b| a.ge(b), |a, b| a >= b),
];

/// The six comparisons of a float type, with NaN, infinities and signed zeros among the
/// inputs: ordered comparisons are false with a NaN, `ne` is true.
fn float_comparisons<T: Float>(rng: &mut Rng) {
    let x: Vec<T> = float_inputs(rng, 200);
    let mut y: Vec<T> = float_inputs(rng, 200);
    // Shuffle the specials against each other, and make some pairs equal.
    y.rotate_left(3);
    for i in (0..y.len()).step_by(7) {
        y[i] = x[i];
    }
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    for (name, build, reference) in COMPARISONS {
        let got = elementwise(&inputs, Bool, |_, v| build(v[0], v[1])).to_bools().unwrap();
        for i in 0..x.len() {
            let (a, b) = (x[i].f64(), y[i].f64());
            assert_eq!(got[i], reference(a, b), "{name}({a}, {b}) in {}", T::TYPE);
        }
    }
}

/// The six comparisons of an integer type (unsigned ones compare as unsigned).
fn int_comparisons<T: Int>(rng: &mut Rng) {
    let (x, mut y) = int_pairs::<T>(rng, 200);
    for i in (0..y.len()).step_by(5) {
        y[i] = x[i];
    }
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    for (name, build, _) in COMPARISONS {
        let got = elementwise(&inputs, Bool, |_, v| build(v[0], v[1])).to_bools().unwrap();
        for i in 0..x.len() {
            let (a, b) = (x[i].wide(), y[i].wide());
            let want = match name {
                "eq" => a == b,
                "ne" => a != b,
                "lt" => a < b,
                "le" => a <= b,
                "gt" => a > b,
                _ => a >= b,
            };
            assert_eq!(got[i], want, "{name}({a}, {b}) in {}", T::TYPE);
        }
    }
}

#[test]
fn comparisons_of_floats_with_nan_and_of_integers() {
    let mut rng = Rng::new(0x0b5_0004);
    float_comparisons::<f32>(&mut rng);
    float_comparisons::<f64>(&mut rng);
    float_comparisons::<f16>(&mut rng);
    float_comparisons::<bf16>(&mut rng);
    int_comparisons::<i8>(&mut rng);
    int_comparisons::<i32>(&mut rng);
    int_comparisons::<i64>(&mut rng);
    int_comparisons::<u8>(&mut rng);
    int_comparisons::<u32>(&mut rng);
    int_comparisons::<u64>(&mut rng);
}

/// IEEE 754-2019 `minimum`/`maximum`: NaN if either operand is NaN, -0 below +0.
fn ieee_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else {
        a.min(b)
    }
}

fn ieee_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_positive() {
            a
        } else {
            b
        }
    } else {
        a.max(b)
    }
}

fn float_min_max<T: Float>(rng: &mut Rng) {
    let x: Vec<T> = float_inputs(rng, 200);
    let mut y: Vec<T> = float_inputs(rng, 200);
    y.rotate_left(1); // NaN against inf, inf against -inf, -0 against 1, ...
                      // +0 against +0 and -0 (x[3] is +0, x[4] is -0).
    y[3] = T::exact(0.0);
    y[4] = T::exact(0.0);
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    let ops: [Case<Build2, FloatOp2>; 2] = [
        ("minimum", |a, b| a.minimum(b), ieee_min),
        ("maximum", |a, b| a.maximum(b), ieee_max),
    ];
    for (name, build, reference) in ops {
        let got: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| build(v[0], v[1]))
            .to_vec()
            .unwrap();
        for i in 0..x.len() {
            let (a, b) = (x[i].f64(), y[i].f64());
            let (g, w) = (got[i].f64(), reference(a, b));
            assert!(same_float(g, w), "{name}({a}, {b}) = {g}, expected {w} in {}", T::TYPE);
        }
        // Symmetric, also for NaN and signed zeros.
        let swapped: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| build(v[1], v[0]))
            .to_vec()
            .unwrap();
        for i in 0..x.len() {
            assert!(
                same_float(swapped[i].f64(), got[i].f64()),
                "{name} is not symmetric at {i}"
            );
        }
    }
}

#[test]
fn minimum_and_maximum_propagate_nan_and_order_infinities_and_zeros() {
    let mut rng = Rng::new(0x0b5_0005);
    float_min_max::<f32>(&mut rng);
    float_min_max::<f64>(&mut rng);
    float_min_max::<f16>(&mut rng);
    float_min_max::<bf16>(&mut rng);
    // A NaN in a block operand against a scalar.
    let x: Vec<f32> = vec![f32::NAN, 1.0, -1.0, f32::INFINITY, f32::NEG_INFINITY];
    let got: Vec<f32> = elementwise(&[HostBuffer::from_slice(&x)], F32, |_, v| v[0].maximum(0.0))
        .to_vec()
        .unwrap();
    assert!(got[0].is_nan());
    assert_eq!(&got[1..], [1.0, 0.0, f32::INFINITY, 0.0]);
    let got: Vec<f32> = elementwise(&[HostBuffer::from_slice(&x)], F32, |k, v| k.minimum(0.0, v[0]))
        .to_vec()
        .unwrap();
    assert!(got[0].is_nan());
    assert_eq!(&got[1..], [0.0, -1.0, 0.0, f32::NEG_INFINITY]);
}

#[test]
fn where_selects_with_broadcasting() {
    let mut rng = Rng::new(0x0b5_0006);
    let n = 300;
    let c: Vec<bool> = (0..n).map(|_| rng.next_u64() & 1 == 1).collect();
    let x: Vec<f32> = (0..n).map(|_| rng.uniform(-10.0, 10.0) as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.uniform(-10.0, 10.0) as f32).collect();
    let inputs = [
        HostBuffer::from_bools(&c),
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
    ];
    let got: Vec<f32> = elementwise(&inputs, F32, |k, v| k.where_(v[0], v[1], v[2]))
        .to_vec()
        .unwrap();
    let lit: Vec<f32> = elementwise(&inputs, F32, |k, v| k.where_(v[0], v[1], f32::NEG_INFINITY))
        .to_vec()
        .unwrap();
    let scalar: Vec<f32> = elementwise(&inputs, F32, |k, v| k.where_(v[0], k.scalar(2.5, F32), v[2]))
        .to_vec()
        .unwrap();
    let from_cmp: Vec<f32> = elementwise(&inputs, F32, |k, v| k.where_(v[1].gt(v[2]), v[1], v[2]))
        .to_vec()
        .unwrap();
    for i in 0..n {
        assert_eq!(got[i], if c[i] { x[i] } else { y[i] });
        assert_eq!(lit[i], if c[i] { x[i] } else { f32::NEG_INFINITY });
        assert_eq!(scalar[i], if c[i] { 2.5 } else { y[i] });
        assert_eq!(from_cmp[i], x[i].max(y[i]));
    }
    // Integers, and a number as the condition (non-zero is true).
    let a: Vec<i32> = (0..n).map(|_| rng.below(3) as i32 - 1).collect();
    let b: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
    let inputs = [HostBuffer::from_slice(&a), HostBuffer::from_slice(&b)];
    let got: Vec<i32> = elementwise(&inputs, I32, |k, v| k.where_(v[0], v[1], -7))
        .to_vec()
        .unwrap();
    for i in 0..n {
        assert_eq!(got[i], if a[i] != 0 { b[i] } else { -7 });
    }
}

// ---------------------------------------------------------------------------------------
// Casts and bitcasts
// ---------------------------------------------------------------------------------------

/// Float to integer casts from `F` to every integer type: truncation toward zero,
/// saturation, NaN to 0 (Rust's `as`).
fn float_to_int_casts<F: Float>(rng: &mut Rng) {
    let mut x: Vec<F> = float_inputs(rng, 120);
    // Values near every integer type's limits and fractional values, where they exist.
    for v in [
        0.5,
        -0.5,
        1.9999,
        -1.9999,
        127.5,
        128.0,
        -128.5,
        -129.0,
        255.9,
        256.0,
        32767.9,
        -32768.9,
        65535.5,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        4294967040.0,
        4294967296.0,
        9.223372036854775e18,
        -9.223372036854775e18,
        1.8446744073709552e19,
        1e30,
        -1e30,
    ] {
        if round_f64(v, F::FMT).is_finite() {
            x.push(F::round(v));
        }
    }
    for _ in 0..100 {
        // Moderate values with fractions.
        x.push(F::round(rng.uniform(-300.0, 300.0)));
    }
    let inputs = [HostBuffer::from_slice(&x)];
    fn check<F: Float, T: Int>(x: &[F], inputs: &[HostBuffer]) {
        let got: Vec<T> = elementwise(inputs, T::TYPE, |_, v| v[0].to(T::TYPE)).to_vec().unwrap();
        for i in 0..x.len() {
            assert_eq!(
                got[i],
                T::from_f64_as(x[i].f64()),
                "{:?} ({}) to {}",
                x[i],
                F::TYPE,
                T::TYPE
            );
        }
    }
    check::<F, i8>(&x, &inputs);
    check::<F, i16>(&x, &inputs);
    check::<F, i32>(&x, &inputs);
    check::<F, i64>(&x, &inputs);
    check::<F, u8>(&x, &inputs);
    check::<F, u16>(&x, &inputs);
    check::<F, u32>(&x, &inputs);
    check::<F, u64>(&x, &inputs);
}

#[test]
fn float_to_int_casts_truncate_saturate_and_send_nan_to_zero() {
    let mut rng = Rng::new(0x0b5_0007);
    float_to_int_casts::<f32>(&mut rng);
    float_to_int_casts::<f64>(&mut rng);
    float_to_int_casts::<f16>(&mut rng);
    float_to_int_casts::<bf16>(&mut rng);
}

/// Integer to float casts from `T` to every float type: the nearest value, ties to even,
/// overflowing to infinity (f16's range ends at 65504).
fn int_to_float_casts<T: Int>(rng: &mut Rng) {
    let mut x: Vec<T> = int_pairs::<T>(rng, 200).0;
    // Ties and near-ties of each format: 2^p + 1 and neighbours, at several scales.
    for p in [8, 11, 24, 53] {
        for scale in [0, 3, 9] {
            for d in [-1i128, 1, 3] {
                x.push(T::wrap(((1i128 << p) + d) << scale));
            }
        }
    }
    x.extend([65504, 65519, 65520, 65535, 70000].map(T::wrap));
    let inputs = [HostBuffer::from_slice(&x)];
    fn check<T: Int, F: Float>(x: &[T], inputs: &[HostBuffer]) {
        let got: Vec<F> = elementwise(inputs, F::TYPE, |_, v| v[0].to(F::TYPE)).to_vec().unwrap();
        for i in 0..x.len() {
            let want = round_int(x[i].wide(), F::FMT);
            assert!(
                same_float(got[i].f64(), want),
                "{:?} ({}) to {}: {:?}, expected {want}",
                x[i],
                T::TYPE,
                F::TYPE,
                got[i]
            );
        }
    }
    check::<T, f16>(&x, &inputs);
    check::<T, bf16>(&x, &inputs);
    check::<T, f32>(&x, &inputs);
    check::<T, f64>(&x, &inputs);
}

#[test]
fn int_to_float_casts_round_to_nearest_even() {
    let mut rng = Rng::new(0x0b5_0008);
    int_to_float_casts::<i8>(&mut rng);
    int_to_float_casts::<i16>(&mut rng);
    int_to_float_casts::<i32>(&mut rng);
    int_to_float_casts::<i64>(&mut rng);
    int_to_float_casts::<u8>(&mut rng);
    int_to_float_casts::<u16>(&mut rng);
    int_to_float_casts::<u32>(&mut rng);
    int_to_float_casts::<u64>(&mut rng);
}

/// Float to float casts from `S` to `D`: one rounding to nearest even.
fn float_to_float<S: Float, D: Float>(x: &[S]) {
    let got: Vec<D> = elementwise(&[HostBuffer::from_slice(x)], D::TYPE, |_, v| v[0].to(D::TYPE))
        .to_vec()
        .unwrap();
    for i in 0..x.len() {
        let want = round_f64(x[i].f64(), D::FMT);
        assert!(
            same_float(got[i].f64(), want),
            "{:?} ({}) to {}: {:?}, expected {want:e}",
            x[i],
            S::TYPE,
            D::TYPE,
            got[i]
        );
    }
}

#[test]
fn float_casts_round_once_to_nearest_even() {
    let mut rng = Rng::new(0x0b5_0009);
    // f64 sources: random values of every range, and the traps of double rounding: just
    // above or below a tie of f16 or bf16 by less than f32 can hold, and exact ties.
    let mut x: Vec<f64> = float_inputs::<f64>(&mut rng, 100);
    for _ in 0..200 {
        x.push(rng.uniform(-70000.0, 70000.0));
        x.push(rng.uniform(-1.0, 1.0) * pow2(-(rng.below(30) as i32)));
    }
    for (fmt_p, e) in [(11, 0), (11, -14), (11, 15), (8, 0), (8, -126), (8, 100), (24, 0)] {
        let one = pow2(e);
        let half_ulp = pow2(e - fmt_p);
        for tiny in [0.0, pow2(e - 40), -pow2(e - 40)] {
            for m in [1.0, 3.0] {
                x.push(one + m * half_ulp + tiny);
                x.push(-(one + m * half_ulp + tiny));
            }
        }
    }
    x.extend([
        65504.0,
        65519.99,
        65520.0,
        1e-8,
        2.9802322387695312e-8,
        5.960464477539063e-8,
        3e-8,
    ]);
    float_to_float::<f64, f32>(&x);
    float_to_float::<f64, f16>(&x);
    float_to_float::<f64, bf16>(&x);
    float_to_float::<f64, f64>(&x);
    let x32: Vec<f32> = float_inputs(&mut rng, 300);
    let x32: Vec<f32> = x32.into_iter().chain(x.iter().map(|&v| v as f32)).collect();
    float_to_float::<f32, f16>(&x32);
    float_to_float::<f32, bf16>(&x32);
    float_to_float::<f32, f64>(&x32);
    let x16: Vec<f16> = float_inputs(&mut rng, 300);
    float_to_float::<f16, f32>(&x16);
    float_to_float::<f16, bf16>(&x16);
    float_to_float::<f16, f64>(&x16);
    let xb: Vec<bf16> = float_inputs(&mut rng, 300);
    float_to_float::<bf16, f16>(&xb);
    float_to_float::<bf16, f32>(&xb);
}

#[test]
fn integer_casts_wrap_and_bool_casts_test_for_zero() {
    let mut rng = Rng::new(0x0b5_000a);
    let x: Vec<i64> = int_pairs::<i64>(&mut rng, 300).0;
    let inputs = [HostBuffer::from_slice(&x)];
    let to_i8: Vec<i8> = elementwise(&inputs, I8, |_, v| v[0].to(I8)).to_vec().unwrap();
    let to_u16: Vec<u16> = elementwise(&inputs, U16, |_, v| v[0].to(U16)).to_vec().unwrap();
    let to_u32: Vec<u32> = elementwise(&inputs, U32, |_, v| v[0].to(U32)).to_vec().unwrap();
    let to_u64: Vec<u64> = elementwise(&inputs, U64, |_, v| v[0].to(U64)).to_vec().unwrap();
    let to_bool = elementwise(&inputs, Bool, |_, v| v[0].to(Bool)).to_bools().unwrap();
    // Through i8 and back: sign extension.
    let via_i8: Vec<i64> = elementwise(&inputs, I64, |_, v| v[0].to(I8).to(I64)).to_vec().unwrap();
    // Through u8 to u64 and i8 to u64: zero and sign extension.
    let via_u8: Vec<u64> = elementwise(&inputs, U64, |_, v| v[0].to(U8).to(U64)).to_vec().unwrap();
    let i8_to_u64: Vec<u64> = elementwise(&inputs, U64, |_, v| v[0].to(I8).to(U64)).to_vec().unwrap();
    for i in 0..x.len() {
        let a = x[i];
        assert_eq!(to_i8[i], a as i8);
        assert_eq!(to_u16[i], a as u16);
        assert_eq!(to_u32[i], a as u32);
        assert_eq!(to_u64[i], a as u64);
        assert_eq!(to_bool[i], a != 0);
        assert_eq!(via_i8[i], a as i8 as i64);
        assert_eq!(via_u8[i], a as u8 as u64);
        assert_eq!(i8_to_u64[i], a as i8 as u64);
    }
    // u64 above i64::MAX to signed and float types.
    let big: Vec<u64> = vec![u64::MAX, 1 << 63, (1 << 63) + 1025, 12345];
    let inputs = [HostBuffer::from_slice(&big)];
    let to_i64: Vec<i64> = elementwise(&inputs, I64, |_, v| v[0].to(I64)).to_vec().unwrap();
    let to_i32: Vec<i32> = elementwise(&inputs, I32, |_, v| v[0].to(I32)).to_vec().unwrap();
    assert_eq!(to_i64, big.iter().map(|&a| a as i64).collect::<Vec<_>>());
    assert_eq!(to_i32, big.iter().map(|&a| a as i32).collect::<Vec<_>>());
    // Floats to booleans: NaN and -0.0.
    let f: Vec<f32> = vec![0.0, -0.0, f32::NAN, 1e-45, -3.0, f32::INFINITY];
    let got = elementwise(&[HostBuffer::from_slice(&f)], Bool, |_, v| v[0].to(Bool))
        .to_bools()
        .unwrap();
    assert_eq!(got, [false, false, true, true, true, true]);
    // Booleans to numbers.
    let b = vec![true, false, true];
    let as_f32: Vec<f32> = elementwise(&[HostBuffer::from_bools(&b)], F32, |_, v| v[0].to(F32))
        .to_vec()
        .unwrap();
    let as_i16: Vec<i16> = elementwise(&[HostBuffer::from_bools(&b)], I16, |_, v| v[0].to(I16))
        .to_vec()
        .unwrap();
    let as_u64: Vec<u64> = elementwise(&[HostBuffer::from_bools(&b)], U64, |_, v| v[0].to(U64))
        .to_vec()
        .unwrap();
    assert_eq!(
        (as_f32, as_i16, as_u64),
        (vec![1.0, 0.0, 1.0], vec![1, 0, 1], vec![1, 0, 1])
    );
}

/// Random bit patterns of `bits` bits for a float with `mantissa` stored mantissa bits,
/// with its special values (zeros, infinities, quiet NaNs with payloads) first, and
/// signaling NaNs when `signaling` (the interpreter quiets those when it loads them from
/// memory, so tests that load floats leave them out).
fn bit_patterns(rng: &mut Rng, bits: u32, mantissa: u32, n: usize, signaling: bool) -> Vec<u64> {
    let mask = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
    let sign = 1u64 << (bits - 1);
    let exp_mask = (mask >> 1) & !((1u64 << mantissa) - 1);
    let quiet = 1u64 << (mantissa - 1);
    let mut v: Vec<u64> = vec![
        0,
        sign,
        1,
        exp_mask,
        exp_mask | sign,
        exp_mask | quiet,
        exp_mask | quiet | 5,
        mask,
    ];
    if signaling {
        v.extend([exp_mask | 1, exp_mask | sign | (quiet - 1), exp_mask | (quiet >> 1)]);
    }
    while v.len() < n {
        let b = rng.next_u64() & mask;
        let snan = (b & exp_mask) == exp_mask && b & quiet == 0 && b & (quiet - 1) != 0;
        if signaling || !snan {
            v.push(b);
        }
    }
    v
}

/// Bitcasts between a float type `F` and the integer types `U` (unsigned) and `S` (signed)
/// of its width: integer bits to floats (stored), floats (loaded) to integer bits, and
/// integer to float to integer inside the kernel, which keeps even signaling NaNs.
fn bitcasts<F: Float, U: Int, S: Int>(rng: &mut Rng, mantissa: u32, to_float: fn(&F) -> u64) {
    let with_snan: Vec<U> = bit_patterns(rng, U::BITS, mantissa, 300, true)
        .into_iter()
        .map(|b| U::wrap(b as i128))
        .collect();
    let bits = |v: &[U]| -> Vec<u64> { v.iter().map(|b| b.wide() as u64).collect() };
    let inputs = [HostBuffer::from_slice(&with_snan)];
    let f: Vec<F> = elementwise(&inputs, F::TYPE, |_, v| v[0].bitcast(F::TYPE))
        .to_vec()
        .unwrap();
    assert_eq!(
        f.iter().map(to_float).collect::<Vec<_>>(),
        bits(&with_snan),
        "{} to {}",
        U::TYPE,
        F::TYPE
    );
    let roundtrip: Vec<U> = elementwise(&inputs, U::TYPE, |_, v| {
        v[0].bitcast(F::TYPE).bitcast(S::TYPE).bitcast(U::TYPE)
    })
    .to_vec()
    .unwrap();
    assert_eq!(
        roundtrip,
        with_snan,
        "{} to {} to {} to {}",
        U::TYPE,
        F::TYPE,
        S::TYPE,
        U::TYPE
    );
    // From floats in memory (no signaling NaNs, which loads quiet).
    let quiet: Vec<U> = bit_patterns(rng, U::BITS, mantissa, 300, false)
        .into_iter()
        .map(|b| U::wrap(b as i128))
        .collect();
    let floats: Vec<F> = elementwise(&[HostBuffer::from_slice(&quiet)], F::TYPE, |_, v| v[0].bitcast(F::TYPE))
        .to_vec()
        .unwrap();
    let back: Vec<S> = elementwise(&[HostBuffer::from_slice(&floats)], S::TYPE, |_, v| {
        v[0].bitcast(S::TYPE)
    })
    .to_vec()
    .unwrap();
    assert_eq!(
        bits(&quiet),
        back.iter()
            .map(|b| (b.wide() as u64) & (u64::MAX >> (64 - U::BITS)))
            .collect::<Vec<_>>()
    );
}

#[test]
fn bitcasts_keep_the_bits() {
    let mut rng = Rng::new(0x0b5_000b);
    bitcasts::<f32, u32, i32>(&mut rng, 23, |x| x.to_bits() as u64);
    bitcasts::<f64, u64, i64>(&mut rng, 52, |x| x.to_bits());
    bitcasts::<f16, u16, i16>(&mut rng, 10, |x| x.to_bits() as u64);
    bitcasts::<bf16, u16, i16>(&mut rng, 7, |x| x.to_bits() as u64);
    // Between integer types of one width: i32 <-> u32.
    let x: Vec<i32> = (0..300).map(|_| rng.next_u64() as i32).collect();
    let u: Vec<u32> = elementwise(&[HostBuffer::from_slice(&x)], U32, |_, v| v[0].bitcast(U32))
        .to_vec()
        .unwrap();
    assert_eq!(u, x.iter().map(|&a| a as u32).collect::<Vec<_>>());
}

/// A conversion or bitcast to the value's own type is the value (as Triton's `to`): no op
/// is emitted, so a loaded `dot` operand written `a.to(F16)` stays the load the lowering
/// pipelines.
#[test]
fn conversions_to_the_own_type_are_the_value() {
    let kernel = Kernel::build("own_type", |k| {
        let (px, py) = (k.arg_ptr("x", F16), k.arg_ptr("y", F16));
        let offs = k.arange(0, 64);
        let x = k.load(px + offs);
        k.store(py + offs, x.to(F16).bitcast(F16).to(F32).to(F32).to(F16));
    })
    .unwrap();
    let ops: Vec<&str> = kernel.insts.iter().map(|(_, inst)| inst.op.name()).collect();
    assert_eq!(ops.iter().filter(|&&o| o == "cast").count(), 2, "{ops:?}");
    assert!(!ops.contains(&"bitcast"), "{ops:?}");
}

// ---------------------------------------------------------------------------------------
// Math functions
// ---------------------------------------------------------------------------------------

/// Whether `got` is within one unit in the last place of the format of the exact `want`
/// (NaN for NaN; the signed infinity where `want` rounds beyond the format's range).
fn within_one_ulp(got: f64, want: f64, f: Fmt) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    let rounded = round_f64(want, f);
    if rounded.is_infinite() {
        return got == rounded;
    }
    (got - want).abs() <= f.ulp(want)
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

type Unary = fn(f64) -> f64;

/// The math functions: name, builder, f64 reference (std, or libm for erf), and the range
/// of the random inputs (specials are added to every range).
const MATH: [(&str, Build1, Unary, (f64, f64)); 13] = [
    ("exp", |x| x.exp(), f64::exp, (-100.0, 100.0)),
    ("exp2", |x| x.exp2(), f64::exp2, (-160.0, 160.0)),
    ("log", |x| x.log(), f64::ln, (-1.0, 1e6)),
    ("log2", |x| x.log2(), f64::log2, (-1.0, 1e6)),
    ("sqrt", |x| x.sqrt(), f64::sqrt, (-1.0, 1e6)),
    ("rsqrt", |x| x.rsqrt(), |x| 1.0 / x.sqrt(), (-1.0, 1e6)),
    ("sin", |x| x.sin(), f64::sin, (-100.0, 100.0)),
    ("cos", |x| x.cos(), f64::cos, (-100.0, 100.0)),
    ("abs", |x| x.abs(), f64::abs, (-1e4, 1e4)),
    ("floor", |x| x.floor(), f64::floor, (-1e3, 1e3)),
    ("ceil", |x| x.ceil(), f64::ceil, (-1e3, 1e3)),
    ("erf", |x| x.erf(), libm::erf, (-5.0, 5.0)),
    ("sigmoid", |x| x.sigmoid(), sigmoid, (-50.0, 50.0)),
];

/// Every math function on the float type `T`, within one ulp of the f64 reference (f64's
/// sigmoid two).
fn math_functions<T: Float>(rng: &mut Rng) {
    for (name, build, reference, (lo, hi)) in MATH {
        let mut x: Vec<f64> = vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.5,
            -2.5,
        ];
        for i in 0..300 {
            // Half uniform over the range, half log-uniform (small magnitudes too).
            let v = if i % 2 == 0 {
                rng.uniform(lo, hi)
            } else {
                rng.uniform(-1.0, 1.0) * hi.abs().max(lo.abs()) * pow2(-(rng.below(40) as i32))
            };
            x.push(v);
        }
        let x: Vec<T> = x.into_iter().map(T::round).collect();
        let got: Vec<T> = elementwise(&[HostBuffer::from_slice(&x)], T::TYPE, |_, v| build(v[0]))
            .to_vec()
            .unwrap();
        for i in 0..x.len() {
            let (a, g) = (x[i].f64(), got[i].f64());
            let want = reference(a);
            // f64's sigmoid is written out (an exponential, a sum and a division,
            // builder/f64_math.rs): within two ulp, its own test says.
            let close = if T::TYPE == F64 && name == "sigmoid" {
                (g - want).abs() <= 2.0 * T::FMT.ulp(want) || within_one_ulp(g, want, T::FMT)
            } else {
                within_one_ulp(g, want, T::FMT)
            };
            assert!(close, "{name}({a:e}) = {g:e} in {}, expected {want:e}", T::TYPE);
            if matches!(name, "abs" | "floor" | "ceil") {
                assert!(same_float(g, want), "{name}({a}) = {g} must be exact");
            }
        }
    }
    // fma: one rounding of a·b + c (in f64, the product of two values of T is exact; the
    // sum may round once more, which stays within one ulp of T).
    let n = 300;
    let abc: Vec<Vec<T>> = (0..3)
        .map(|_| {
            let mut v: Vec<T> = (0..n).map(|_| T::round(rng.uniform(-10.0, 10.0))).collect();
            v[0] = T::round(f64::NAN);
            v[1] = T::round(f64::INFINITY);
            v
        })
        .collect();
    let inputs: Vec<HostBuffer> = abc.iter().map(|v| HostBuffer::from_slice(v)).collect();
    let got: Vec<T> = elementwise(&inputs, T::TYPE, |_, v| v[0].fma(v[1], v[2]))
        .to_vec()
        .unwrap();
    for i in 0..n {
        let (a, b, c) = (abc[0][i].f64(), abc[1][i].f64(), abc[2][i].f64());
        let want = a.mul_add(b, c);
        assert!(
            within_one_ulp(got[i].f64(), want, T::FMT),
            "fma({a}, {b}, {c}) = {:?} in {}",
            got[i],
            T::TYPE
        );
        if T::TYPE == F64 {
            assert!(same_float(got[i].f64(), want));
        }
    }
}

#[test]
fn math_functions_within_one_ulp() {
    let mut rng = Rng::new(0x0b5_000c);
    math_functions::<f32>(&mut rng);
    math_functions::<f16>(&mut rng);
    math_functions::<bf16>(&mut rng);
    math_functions::<f64>(&mut rng);
}

#[test]
fn truediv_converts_integers_to_f32() {
    let x: Vec<i32> = vec![7, -7, 1, 0, 1 << 30];
    let y: Vec<i32> = vec![2, 2, 3, 5, 3];
    let inputs = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&y)];
    let got: Vec<f32> = elementwise(&inputs, F32, |_, v| v[0].truediv(v[1])).to_vec().unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(&a, &b)| a as f32 / b as f32).collect();
    assert_eq!(got, want);
    let got: Vec<f32> = elementwise(&inputs, F32, |_, v| v[0].truediv(4)).to_vec().unwrap();
    assert_eq!(got, x.iter().map(|&a| a as f32 / 4.0).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------
// Broadcasting and shape ops
// ---------------------------------------------------------------------------------------

/// Row-major element offsets of a block of shape `dims` (rank 1 to 3), as an i32 block of
/// that shape.
fn row_major<'b>(k: &'b KernelBuilder, dims: &[u32]) -> Value<'b> {
    let r = |d: u32| k.arange(0, d as i32);
    match *dims {
        [a] => r(a),
        [a, b] => r(a).expand_dims(1) * b as i32 + r(b).expand_dims(0),
        [a, b, c] => {
            r(a).expand_dims(1).expand_dims(2) * (b * c) as i32
                + r(b).expand_dims(0).expand_dims(2) * c as i32
                + r(c).expand_dims(0).expand_dims(0)
        }
        _ => panic!("rank 1 to 3"),
    }
}

/// Runs a kernel whose parameters are one pointer per buffer, on one program.
fn run_once(kernel: &Kernel, buffers: &mut [HostBuffer]) {
    let args: Vec<ArgValue> = (0..buffers.len()).map(ptr).collect();
    interp::run(kernel, [1, 1, 1], &args, buffers).unwrap();
}

#[test]
fn numpy_broadcasting_and_promotion() {
    let mut rng = Rng::new(0x0b5_000d);
    let a: Vec<f32> = (0..4).map(|_| rng.uniform(-5.0, 5.0) as f32).collect();
    let b: Vec<f32> = (0..8).map(|_| rng.uniform(-5.0, 5.0) as f32).collect();
    let m: Vec<f32> = (0..32).map(|_| rng.uniform(-5.0, 5.0) as f32).collect();
    let s = rng.uniform(-5.0, 5.0) as f32;
    let small: Vec<i16> = (0..4).map(|_| rng.next_u64() as i16).collect();
    let wide: Vec<i32> = (0..8).map(|_| rng.next_u64() as i32).collect();
    let kernel = Kernel::build("broadcasting", |k| {
        let (pa, pb, pm, ps) = (
            k.arg_ptr("a", F32),
            k.arg_ptr("b", F32),
            k.arg_ptr("m", F32),
            k.arg_ptr("s", F32),
        );
        let (psmall, pwide) = (k.arg_ptr("small", I16), k.arg_ptr("wide", I32));
        let outs: Vec<Value> = (0..4).map(|i| k.arg_ptr(&format!("out{i}"), F32)).collect();
        let out_int = k.arg_ptr("out_int", I32);
        let col = k.load(pa + k.arange(0, 4).expand_dims(1)); // [4, 1]
        let row = k.load(pb + k.arange(0, 8).expand_dims(0)); // [1, 8]
        let vec8 = k.load(pb + k.arange(0, 8)); // [8]
        let mat = k.load(pm + row_major(k, &[4, 8])); // [4, 8]
        let scalar = k.load(ps); // []
        let offs = row_major(k, &[4, 8]);
        let outer = col + row;
        assert_eq!(outer.shape(), [4, 8]);
        k.store(outs[0] + offs, outer);
        let shifted = scalar + mat;
        k.store(outs[1] + offs, shifted);
        let rows = vec8 + mat;
        assert_eq!(rows.shape(), [4, 8]);
        k.store(outs[2] + offs, rows);
        // Broadcasting on both sides with a literal: [4, 1] * 2 - [8].
        k.store(outs[3] + offs, col * 2 - vec8);
        // i16 [4, 1] + i32 [1, 8] promotes to i32 [4, 8].
        let si = k.load(psmall + k.arange(0, 4).expand_dims(1));
        let wi = k.load(pwide + k.arange(0, 8).expand_dims(0));
        let sum = si + wi;
        assert_eq!((sum.dtype(), sum.shape()), (Some(I32), vec![4, 8]));
        k.store(out_int + offs, sum);
    })
    .unwrap();
    let mut buffers = vec![
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&m),
        HostBuffer::from_slice(&[s]),
        HostBuffer::from_slice(&small),
        HostBuffer::from_slice(&wide),
    ];
    buffers.extend((0..4).map(|_| HostBuffer::zeros(F32, 32)));
    buffers.push(HostBuffer::zeros(I32, 32));
    run_once(&kernel, &mut buffers);
    let out = |i: usize| -> Vec<f32> { buffers[6 + i].to_vec().unwrap() };
    let (o0, o1, o2, o3) = (out(0), out(1), out(2), out(3));
    let oi: Vec<i32> = buffers[10].to_vec().unwrap();
    for i in 0..4 {
        for j in 0..8 {
            let at = i * 8 + j;
            assert_eq!(o0[at], a[i] + b[j]);
            assert_eq!(o1[at], s + m[at]);
            assert_eq!(o2[at], b[j] + m[at]);
            assert_eq!(o3[at], a[i] * 2.0 - b[j]);
            assert_eq!(oi[at], (small[i] as i32).wrapping_add(wide[j]));
        }
    }
}

#[test]
fn expand_dims_reshape_permute_and_broadcast_to() {
    let mut rng = Rng::new(0x0b5_000e);
    let x: Vec<i32> = (0..64).map(|_| rng.next_u64() as i32).collect();
    // Each case: a name, the result's shape, the source index of each result element, and
    // the op on the [2, 4, 8] block `x3`, its [4, 8] slice `x2` (the first 32 elements) or
    // its [8] slice `x1`.
    type Shaper = for<'b> fn(Value<'b>, Value<'b>, Value<'b>) -> Value<'b>;
    type Source = Box<dyn Fn(&[usize]) -> usize>;
    let cases: Vec<(&str, Vec<u32>, Source, Shaper)> = vec![
        ("expand_dims(0)", vec![1, 8], Box::new(|i| i[1]), |_, _, x1| {
            x1.expand_dims(0)
        }),
        ("expand_dims(1)", vec![8, 1], Box::new(|i| i[0]), |_, _, x1| {
            x1.expand_dims(1)
        }),
        (
            "expand_dims(2)",
            vec![4, 8, 1],
            Box::new(|i| i[0] * 8 + i[1]),
            |_, x2, _| x2.expand_dims(2),
        ),
        (
            "expand_dims(1) of 2-D",
            vec![4, 1, 8],
            Box::new(|i| i[0] * 8 + i[2]),
            |_, x2, _| x2.expand_dims(1),
        ),
        (
            "reshape [8, 4]",
            vec![8, 4],
            Box::new(|i| i[0] * 4 + i[1]),
            |_, x2, _| x2.reshape(&[8, 4]),
        ),
        (
            "reshape [2, 4, 4]",
            vec![2, 4, 4],
            Box::new(|i| i[0] * 16 + i[1] * 4 + i[2]),
            |_, x2, _| x2.reshape(&[2, 4, 4]),
        ),
        ("reshape [64]", vec![64], Box::new(|i| i[0]), |x3, _, _| {
            x3.reshape(&[64])
        }),
        ("trans", vec![8, 4], Box::new(|i| i[1] * 8 + i[0]), |_, x2, _| {
            x2.trans()
        }),
        (
            "permute [2, 0, 1]",
            vec![8, 2, 4],
            Box::new(|i| i[1] * 32 + i[2] * 8 + i[0]),
            |x3, _, _| x3.permute(&[2, 0, 1]),
        ),
        (
            "permute [1, 2, 0]",
            vec![4, 8, 2],
            Box::new(|i| i[2] * 32 + i[0] * 8 + i[1]),
            |x3, _, _| x3.permute(&[1, 2, 0]),
        ),
        (
            "permute [0, 2, 1]",
            vec![2, 8, 4],
            Box::new(|i| i[0] * 32 + i[2] * 8 + i[1]),
            |x3, _, _| x3.permute(&[0, 2, 1]),
        ),
        (
            "broadcast_to [4, 8] of [8]",
            vec![4, 8],
            Box::new(|i| i[1]),
            |_, _, x1| x1.broadcast_to(&[4, 8]),
        ),
        (
            "broadcast_to [2, 4, 8] of [8]",
            vec![2, 4, 8],
            Box::new(|i| i[2]),
            |_, _, x1| x1.broadcast_to(&[2, 4, 8]),
        ),
        (
            "broadcast_to [8, 8] of [8, 1]",
            vec![8, 8],
            Box::new(|i| i[0]),
            |_, _, x1| x1.expand_dims(1).broadcast_to(&[8, 8]),
        ),
        (
            "trans of trans",
            vec![4, 8],
            Box::new(|i| i[0] * 8 + i[1]),
            |_, x2, _| x2.trans().trans(),
        ),
    ];
    for (name, shape, source, op) in cases {
        let kernel = Kernel::build("shape", |k| {
            let (px, out) = (k.arg_ptr("x", I32), k.arg_ptr("out", I32));
            let x3 = k.load(px + row_major(k, &[2, 4, 8]));
            let x2 = k.load(px + row_major(k, &[4, 8]));
            let x1 = k.load(px + k.arange(0, 8));
            let y = op(x3, x2, x1);
            assert_eq!(y.shape(), shape, "{name}");
            k.store(out + row_major(k, &shape), y);
        })
        .unwrap();
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let mut buffers = [HostBuffer::from_slice(&x), HostBuffer::zeros(I32, n)];
        run_once(&kernel, &mut buffers);
        let got: Vec<i32> = buffers[1].to_vec().unwrap();
        // Walk the result's indices in row-major order.
        let mut index = vec![0usize; shape.len()];
        for &g in &got {
            assert_eq!(g, x[source(&index)], "{name} at {index:?}");
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] as usize {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Masked memory
// ---------------------------------------------------------------------------------------

#[test]
fn masked_loads_give_other_and_masked_stores_skip_on_ragged_sizes() {
    let mut rng = Rng::new(0x0b5_000f);
    let (n, block) = (1000usize, 256u32);
    let x: Vec<f32> = (0..n).map(|_| rng.uniform(-100.0, 100.0) as f32).collect();
    let kernel = Kernel::build("masked_1d", |k| {
        let (px, padded, sparse) = (k.arg_ptr("x", F32), k.arg_ptr("padded", F32), k.arg_ptr("sparse", F32));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
        let mask = offs.lt(n);
        let v = k.load_masked(px + offs, mask, f32::NEG_INFINITY);
        // Every lane of the last block, masked or not, is stored.
        k.store(padded + offs, v);
        // Only lanes in range and not multiples of 3.
        k.store_masked(sparse + offs, v * 2.0, mask & (offs % 3).ne(0));
    })
    .unwrap();
    let grid = n.div_ceil(block as usize);
    let total = grid * block as usize;
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::zeros(F32, total),
        HostBuffer::from_slice(&vec![7.0f32; total]),
    ];
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(n as i64)];
    interp::run(&kernel, [grid as u32, 1, 1], &args, &mut buffers).unwrap();
    let padded: Vec<f32> = buffers[1].to_vec().unwrap();
    let sparse: Vec<f32> = buffers[2].to_vec().unwrap();
    for i in 0..total {
        assert_eq!(padded[i], if i < n { x[i] } else { f32::NEG_INFINITY }, "padded[{i}]");
        assert_eq!(
            sparse[i],
            if i < n && i % 3 != 0 { x[i] * 2.0 } else { 7.0 },
            "sparse[{i}]"
        );
    }

    // A 37 x 21 matrix with row stride 24, read in [8, 32] tiles with a 2-D mask and an
    // integer `other`, and copied into a dense 40 x 32 output.
    let (rows, cols, stride) = (37usize, 21usize, 24usize);
    let m: Vec<i32> = (0..rows * stride).map(|_| rng.below(1000) as i32).collect();
    let kernel = Kernel::build("masked_2d", |k| {
        let (pm, out) = (k.arg_ptr("m", I32), k.arg_ptr("out", I32));
        let (nr, nc, st) = (k.arg_i32("rows"), k.arg_i32("cols"), k.arg_i32("stride"));
        let r = (k.program_id(0) * 8 + k.arange(0, 8)).expand_dims(1);
        let c = k.arange(0, 32).expand_dims(0);
        let mask = r.lt(nr) & c.lt(nc);
        let tile = k.load_masked(pm + r * st + c, mask, -1);
        k.store(out + r * 32 + c, tile);
    })
    .unwrap();
    let mut buffers = [HostBuffer::from_slice(&m), HostBuffer::zeros(I32, 40 * 32)];
    let args = [
        ptr(0),
        ptr(1),
        ArgValue::Int(rows as i64),
        ArgValue::Int(cols as i64),
        ArgValue::Int(stride as i64),
    ];
    interp::run(&kernel, [5, 1, 1], &args, &mut buffers).unwrap();
    let got: Vec<i32> = buffers[1].to_vec().unwrap();
    for i in 0..40 {
        for j in 0..32 {
            let want = if i < rows && j < cols { m[i * stride + j] } else { -1 };
            assert_eq!(got[i * 32 + j], want, "[{i}, {j}]");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------

/// The block and the valid part of it: an `R x C` matrix in an `[8, 16]` block.
const RED_BLOCK: (u32, u32) = (8, 16);
const RED_VALID: (usize, usize) = (5, 11);

/// Reduces the valid `R x C` part of an `[8, 16]` block along `axis`, the masked lanes
/// loaded as `other` (the op's identity), and returns the valid results: `R` values for
/// axis 1, `C` for axis 0, through `keep_dims` or not.
fn reduce_block<T: Element>(x: &[T], op: ReduceOp, axis: u32, keep_dims: bool, other: f64) -> HostBuffer {
    let (br, bc) = RED_BLOCK;
    let (vr, vc) = RED_VALID;
    let s = T::TYPE;
    let out_type = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
        I32
    } else {
        s
    };
    let kernel = Kernel::build("reduce", |k| {
        let (px, out) = (k.arg_ptr("x", s), k.arg_ptr("out", out_type));
        let r = k.arange(0, br as i32).expand_dims(1);
        let c = k.arange(0, bc as i32).expand_dims(0);
        let mask = r.lt(vr as i32) & c.lt(vc as i32);
        let other = if s.is_float() {
            Operand::Float(other)
        } else {
            Operand::Int(other as i128)
        };
        let block = k.load_masked(px + r * vc as i32 + c, mask, other);
        let y = block.reduce_with(op, axis, keep_dims);
        let (n, valid) = if axis == 1 { (br, vr) } else { (bc, vc) };
        let expected: Vec<u32> = match (keep_dims, axis) {
            (false, _) => vec![n],
            (true, 0) => vec![1, n],
            (true, _) => vec![n, 1],
        };
        assert_eq!(
            (y.shape(), y.dtype()),
            (expected, Some(out_type)),
            "{op:?} along {axis}"
        );
        let lanes = k.arange(0, n as i32);
        let lanes = match (keep_dims, axis) {
            (false, _) => lanes,
            (true, 0) => lanes.expand_dims(0),
            (true, _) => lanes.expand_dims(1),
        };
        k.store_masked(out + lanes, y, lanes.lt(valid as i32));
    })
    .unwrap();
    let n = if axis == 1 { vr } else { vc };
    let mut buffers = [HostBuffer::from_slice(x), HostBuffer::zeros(out_type, n)];
    run_once(&kernel, &mut buffers);
    buffers[1].clone()
}

/// The lanes of the valid matrix along `axis`: for axis 1 the rows, for axis 0 the columns.
fn lanes<T: Copy>(x: &[T], axis: u32) -> Vec<Vec<T>> {
    let (vr, vc) = RED_VALID;
    if axis == 1 {
        (0..vr).map(|i| x[i * vc..(i + 1) * vc].to_vec()).collect()
    } else {
        (0..vc).map(|j| (0..vr).map(|i| x[i * vc + j]).collect()).collect()
    }
}

/// Reference argmax/argmin: the first index of the extreme, NaN beating everything.
fn arg_extreme(lane: &[f64], max: bool) -> i32 {
    if let Some(i) = lane.iter().position(|v| v.is_nan()) {
        return i as i32;
    }
    let mut best = 0;
    for (i, &v) in lane.iter().enumerate() {
        if (max && v > lane[best]) || (!max && v < lane[best]) {
            best = i;
        }
    }
    best as i32
}

#[test]
fn float_reductions_along_each_axis_with_masks_ties_and_nan() {
    let mut rng = Rng::new(0x0b5_0010);
    let (vr, vc) = RED_VALID;
    // Half-integers from a small set, so that ties are frequent; then the same with NaNs.
    let ties: Vec<f32> = (0..vr * vc).map(|_| (rng.below(9) as f32 - 4.0) * 0.5).collect();
    let mut with_nan = ties.clone();
    with_nan[2 * vc + 4] = f32::NAN; // row 2, column 4
    with_nan[3 * vc + 7] = f32::NAN; // row 3, column 7
    with_nan[4 * vc + 7] = f32::NAN; // a second NaN in column 7
    let random: Vec<f32> = (0..vr * vc).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    for (data_name, x) in [("ties", &ties), ("nan", &with_nan), ("random", &random)] {
        for axis in [0, 1] {
            for keep_dims in [false, true] {
                let at = |op| format!("{op:?} of {data_name} along {axis}, keep_dims {keep_dims}");
                let lanes: Vec<Vec<f64>> = lanes(x, axis)
                    .into_iter()
                    .map(|l| l.into_iter().map(f64::from).collect())
                    .collect();
                // Sums, in any order: within (n - 1)·u·Σ|x| of the exact sum.
                let sum: Vec<f32> = reduce_block(x, ReduceOp::Sum, axis, keep_dims, 0.0).to_vec().unwrap();
                for (l, lane) in lanes.iter().enumerate() {
                    let exact: f64 = lane.iter().sum();
                    let bound = lane.len() as f64 * 2f64.powi(-24) * lane.iter().map(|v| v.abs()).sum::<f64>();
                    let g = sum[l] as f64;
                    if exact.is_nan() {
                        assert!(g.is_nan(), "{} [{l}]", at(ReduceOp::Sum));
                    } else {
                        assert!(
                            (g - exact).abs() <= bound,
                            "{} [{l}]: {g} vs {exact}",
                            at(ReduceOp::Sum)
                        );
                    }
                }
                let max: Vec<f32> = reduce_block(x, ReduceOp::Max, axis, keep_dims, f64::NEG_INFINITY)
                    .to_vec()
                    .unwrap();
                let min: Vec<f32> = reduce_block(x, ReduceOp::Min, axis, keep_dims, f64::INFINITY)
                    .to_vec()
                    .unwrap();
                let argmax: Vec<i32> = reduce_block(x, ReduceOp::ArgMax, axis, keep_dims, f64::NEG_INFINITY)
                    .to_vec()
                    .unwrap();
                let argmin: Vec<i32> = reduce_block(x, ReduceOp::ArgMin, axis, keep_dims, f64::INFINITY)
                    .to_vec()
                    .unwrap();
                for (l, lane) in lanes.iter().enumerate() {
                    let want_max = lane.iter().copied().fold(f64::NEG_INFINITY, ieee_max);
                    let want_min = lane.iter().copied().fold(f64::INFINITY, ieee_min);
                    assert!(
                        same_float(max[l] as f64, want_max),
                        "{} [{l}]: {}",
                        at(ReduceOp::Max),
                        max[l]
                    );
                    assert!(
                        same_float(min[l] as f64, want_min),
                        "{} [{l}]: {}",
                        at(ReduceOp::Min),
                        min[l]
                    );
                    assert_eq!(
                        argmax[l],
                        arg_extreme(lane, true),
                        "{} [{l}] of {lane:?}",
                        at(ReduceOp::ArgMax)
                    );
                    assert_eq!(
                        argmin[l],
                        arg_extreme(lane, false),
                        "{} [{l}] of {lane:?}",
                        at(ReduceOp::ArgMin)
                    );
                }
            }
        }
    }
    // The data has ties for the maximum along both axes, where the first index must win.
    for axis in [0, 1] {
        let tied = lanes(&ties, axis).iter().any(|lane| {
            let top = lane.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            lane.iter().filter(|&&v| v == top).count() > 1
        });
        assert!(tied, "the data should have a tie along axis {axis}");
    }
}

#[test]
fn integer_reductions_wrap_and_compare_by_signedness() {
    let mut rng = Rng::new(0x0b5_0011);
    let (vr, vc) = RED_VALID;
    // i32: sums that wrap, and ties for the maximum and the minimum.
    let x: Vec<i32> = (0..vr * vc)
        .map(|i| {
            if i % 3 == 0 {
                i32::MAX - rng.below(2) as i32
            } else {
                rng.below(3) as i32
            }
        })
        .collect();
    for axis in [0, 1] {
        let lanes = lanes(&x, axis);
        let tied = |f: fn(&[i32]) -> i32| lanes.iter().any(|l| l.iter().filter(|&&v| v == f(l)).count() > 1);
        assert!(
            tied(|l| *l.iter().max().unwrap()) && tied(|l| *l.iter().min().unwrap()),
            "ties along {axis}"
        );
    }
    for axis in [0, 1] {
        for keep_dims in [false, true] {
            let lanes = lanes(&x, axis);
            let sum: Vec<i32> = reduce_block(&x, ReduceOp::Sum, axis, keep_dims, 0.0).to_vec().unwrap();
            let max: Vec<i32> = reduce_block(&x, ReduceOp::Max, axis, keep_dims, i32::MIN as f64)
                .to_vec()
                .unwrap();
            let min: Vec<i32> = reduce_block(&x, ReduceOp::Min, axis, keep_dims, i32::MAX as f64)
                .to_vec()
                .unwrap();
            let argmax: Vec<i32> = reduce_block(&x, ReduceOp::ArgMax, axis, keep_dims, i32::MIN as f64)
                .to_vec()
                .unwrap();
            let argmin: Vec<i32> = reduce_block(&x, ReduceOp::ArgMin, axis, keep_dims, i32::MAX as f64)
                .to_vec()
                .unwrap();
            for (l, lane) in lanes.iter().enumerate() {
                assert_eq!(sum[l], lane.iter().fold(0i32, |a, &b| a.wrapping_add(b)));
                assert_eq!(max[l], *lane.iter().max().unwrap());
                assert_eq!(min[l], *lane.iter().min().unwrap());
                let first = |v: i32| lane.iter().position(|&a| a == v).unwrap() as i32;
                assert_eq!(argmax[l], first(max[l]), "argmax of {lane:?}");
                assert_eq!(argmin[l], first(min[l]), "argmin of {lane:?}");
            }
        }
    }
    // u32 above 2^31: compared as unsigned.
    let x: Vec<u32> = (0..vr * vc).map(|_| rng.next_u64() as u32).collect();
    for axis in [0, 1] {
        let lanes = lanes(&x, axis);
        let max: Vec<u32> = reduce_block(&x, ReduceOp::Max, axis, false, 0.0).to_vec().unwrap();
        let min: Vec<u32> = reduce_block(&x, ReduceOp::Min, axis, true, u32::MAX as f64)
            .to_vec()
            .unwrap();
        let argmax: Vec<i32> = reduce_block(&x, ReduceOp::ArgMax, axis, false, 0.0).to_vec().unwrap();
        let sum: Vec<u32> = reduce_block(&x, ReduceOp::Sum, axis, true, 0.0).to_vec().unwrap();
        for (l, lane) in lanes.iter().enumerate() {
            assert_eq!(max[l], *lane.iter().max().unwrap());
            assert_eq!(min[l], *lane.iter().min().unwrap());
            assert_eq!(argmax[l], lane.iter().position(|&a| a == max[l]).unwrap() as i32);
            assert_eq!(sum[l], lane.iter().fold(0u32, |a, &b| a.wrapping_add(b)));
        }
    }
}

#[test]
fn reductions_of_a_3d_block_along_each_axis() {
    let mut rng = Rng::new(0x0b5_0012);
    let x: Vec<i64> = (0..64).map(|_| rng.below(1000) as i64 - 500).collect();
    for axis in 0..3u32 {
        let kernel = Kernel::build("reduce3", |k| {
            let (px, out) = (k.arg_ptr("x", I64), k.arg_ptr("out", I64));
            let v = k.load(px + row_major(k, &[2, 4, 8]));
            let s = v.sum(axis);
            let shape = s.shape();
            k.store(out + row_major(k, &shape), s);
        })
        .unwrap();
        let dims = [2usize, 4, 8];
        let n = 64 / dims[axis as usize];
        let mut buffers = [HostBuffer::from_slice(&x), HostBuffer::zeros(I64, n)];
        run_once(&kernel, &mut buffers);
        let got: Vec<i64> = buffers[1].to_vec().unwrap();
        let mut want = vec![0i64; n];
        for a in 0..2 {
            for b in 0..4 {
                for c in 0..8 {
                    let at = match axis {
                        0 => b * 8 + c,
                        1 => a * 8 + c,
                        _ => a * 4 + b,
                    };
                    want[at] += x[a * 32 + b * 8 + c];
                }
            }
        }
        assert_eq!(got, want, "sum along {axis}");
    }
}

// ---------------------------------------------------------------------------------------
// dot
// ---------------------------------------------------------------------------------------

/// Runs `a @ b (+ acc)` on one `[M, K] x [K, N]` block product and checks it against a naive
/// f64 loop within the accumulation bound `(K + 1)·u·(Σ|a·b| + |acc|)`, u the unit
/// roundoff of the accumulator, which holds for any summation order (with or without fused
/// multiply-adds). With `transpose_a`, A is stored `[K, M]` and transposed in the kernel.
fn check_dot<T: Float, C: Float>(rng: &mut Rng, (m, k, n): (usize, usize, usize), with_acc: bool, transpose_a: bool) {
    let a: Vec<T> = (0..m * k).map(|_| T::round(rng.uniform(-2.0, 2.0))).collect();
    let b: Vec<T> = (0..k * n).map(|_| T::round(rng.uniform(-2.0, 2.0))).collect();
    let acc: Vec<C> = (0..m * n).map(|_| C::round(rng.uniform(-10.0, 10.0))).collect();
    let stored_a: Vec<T> = if transpose_a {
        (0..k * m).map(|at| a[(at % m) * k + at / m]).collect()
    } else {
        a.clone()
    };
    let kernel = Kernel::build("dot", |kb| {
        let (pa, pb, pc, out) = (
            kb.arg_ptr("a", T::TYPE),
            kb.arg_ptr("b", T::TYPE),
            kb.arg_ptr("acc", C::TYPE),
            kb.arg_ptr("out", C::TYPE),
        );
        let (m, k, n) = (m as u32, k as u32, n as u32);
        let av = if transpose_a {
            kb.load(pa + row_major(kb, &[k, m])).trans()
        } else {
            kb.load(pa + row_major(kb, &[m, k]))
        };
        let bv = kb.load(pb + row_major(kb, &[k, n]));
        let c = if with_acc {
            kb.dot_acc(av, bv, kb.load(pc + row_major(kb, &[m, n])))
        } else {
            kb.dot(av, bv)
        };
        assert_eq!((c.shape(), c.dtype()), (vec![m, n], Some(C::TYPE)));
        kb.store(out + row_major(kb, &[m, n]), c);
    })
    .unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&stored_a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&acc),
        HostBuffer::zeros(C::TYPE, m * n),
    ];
    run_once(&kernel, &mut buffers);
    let got: Vec<C> = buffers[3].to_vec().unwrap();
    let u = pow2(-C::FMT.p);
    for i in 0..m {
        for j in 0..n {
            let c0 = if with_acc { acc[i * n + j].f64() } else { 0.0 };
            let (mut exact, mut abs) = (c0, c0.abs());
            for kk in 0..k {
                let p = a[i * k + kk].f64() * b[kk * n + j].f64();
                exact += p;
                abs += p.abs();
            }
            let bound = (k + 1) as f64 * u * abs;
            let g = got[i * n + j].f64();
            assert!(
                (g - exact).abs() <= bound,
                "{} @ {} into {}: c[{i}, {j}] = {g}, exact {exact}",
                T::TYPE,
                T::TYPE,
                C::TYPE
            );
        }
    }
}

#[test]
fn dot_against_a_naive_loop() {
    let mut rng = Rng::new(0x0b5_0013);
    check_dot::<f16, f32>(&mut rng, (32, 64, 16), false, false);
    check_dot::<f16, f32>(&mut rng, (16, 32, 64), true, true);
    check_dot::<bf16, f32>(&mut rng, (16, 16, 32), true, false);
    check_dot::<f32, f32>(&mut rng, (32, 32, 32), false, false);
    check_dot::<f32, f32>(&mut rng, (16, 64, 32), true, true);
    check_dot::<f64, f64>(&mut rng, (16, 32, 16), true, false);
}

#[test]
fn dot_of_f16_is_exact_per_product_and_accumulates_in_f32() {
    // Products of f16s are exact in f32, and sums of small integers are exact: the result
    // must equal the exact product, whatever the order.
    let mut rng = Rng::new(0x0b5_0014);
    let (m, k, n) = (16usize, 16usize, 16usize);
    let a: Vec<f16> = (0..m * k).map(|_| f16::from_f32(rng.below(33) as f32 - 16.0)).collect();
    let b: Vec<f16> = (0..k * n).map(|_| f16::from_f32(rng.below(33) as f32 - 16.0)).collect();
    let kernel = Kernel::build("dot_exact", |kb| {
        let (pa, pb, out) = (kb.arg_ptr("a", F16), kb.arg_ptr("b", F16), kb.arg_ptr("out", F32));
        let c = kb.dot(
            kb.load(pa + row_major(kb, &[16, 16])),
            kb.load(pb + row_major(kb, &[16, 16])),
        );
        kb.store(out + row_major(kb, &[16, 16]), c);
    })
    .unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::zeros(F32, m * n),
    ];
    run_once(&kernel, &mut buffers);
    let got: Vec<f32> = buffers[2].to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|kk| a[i * k + kk].to_f32() * b[kk * n + j].to_f32()).sum();
            assert_eq!(got[i * n + j], want);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Atomics
// ---------------------------------------------------------------------------------------

#[test]
fn atomic_add_from_many_programs_into_one_counter() {
    let (n, block) = (3000usize, 64u32);
    let grid = n.div_ceil(block as usize);
    let mut rng = Rng::new(0x0b5_0015);
    // Integer-valued floats, so that the float sum is exact in any order.
    let values: Vec<f32> = (0..n).map(|_| rng.below(201) as f32 - 100.0).collect();
    let kernel = Kernel::build("tickets", |k| {
        let (counter, tickets) = (k.arg_ptr("counter", I32), k.arg_ptr("tickets", I32));
        let (fsum, pv) = (k.arg_ptr("fsum", F32), k.arg_ptr("values", F32));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
        let mask = offs.lt(n);
        // Every lane in range takes a ticket: the old value of the counter.
        let old = k.atomic_add(counter, 1, Some(mask));
        k.store_masked(tickets + offs, old, mask);
        k.atomic_add(fsum, k.load_masked(pv + offs, mask, 0.0), Some(mask));
    })
    .unwrap();
    let mut buffers = [
        HostBuffer::zeros(I32, 1),
        HostBuffer::from_slice(&vec![-1i32; n]),
        HostBuffer::zeros(F32, 1),
        HostBuffer::from_slice(&values),
    ];
    let args = [ptr(0), ptr(1), ptr(2), ptr(3), ArgValue::Int(n as i64)];
    interp::run(&kernel, [grid as u32, 1, 1], &args, &mut buffers).unwrap();
    assert_eq!(buffers[0].to_vec::<i32>().unwrap(), [n as i32]);
    // The tickets are a permutation of 0..n, whatever order the lanes ran in.
    let mut tickets: Vec<i32> = buffers[1].to_vec().unwrap();
    tickets.sort_unstable();
    assert_eq!(tickets, (0..n as i32).collect::<Vec<_>>());
    assert_eq!(buffers[2].to_vec::<f32>().unwrap(), [values.iter().sum::<f32>()]);
}

#[test]
fn atomic_max_and_min_with_masks() {
    let (n, block, slots) = (500usize, 64u32, 16usize);
    let grid = n.div_ceil(block as usize);
    let mut rng = Rng::new(0x0b5_0016);
    let vi: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
    let vu: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let vf: Vec<f32> = (0..n).map(|_| rng.uniform(-1e3, 1e3) as f32).collect();
    let init_i: Vec<i32> = (0..slots).map(|_| rng.next_u64() as i32 >> 4).collect();
    let init_u: Vec<u32> = (0..slots).map(|_| rng.next_u64() as u32 >> 4).collect();
    let init_f: Vec<f32> = (0..slots).map(|_| rng.uniform(-500.0, 500.0) as f32).collect();
    let kernel = Kernel::build("extremes", |k| {
        let (pvi, pvu, pvf) = (k.arg_ptr("vi", I32), k.arg_ptr("vu", U32), k.arg_ptr("vf", F32));
        let (max_i, min_i) = (k.arg_ptr("max_i", I32), k.arg_ptr("min_i", I32));
        let (max_u, min_u) = (k.arg_ptr("max_u", U32), k.arg_ptr("min_u", U32));
        let (max_f, min_f) = (k.arg_ptr("max_f", F32), k.arg_ptr("min_f", F32));
        let olds = k.arg_ptr("olds", I32);
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
        let in_range = offs.lt(n);
        let slot = offs % slots as i32;
        let xi = k.load_masked(pvi + offs, in_range, 0);
        let xu = k.load_masked(pvu + offs, in_range, 0);
        let xf = k.load_masked(pvf + offs, in_range, 0.0);
        // Only the lanes in range whose value is even take part.
        let mask = in_range & (xi % 2).eq(0);
        let old = k.atomic_max(max_i + slot, xi, Some(mask));
        k.atomic_min(min_i + slot, xi, Some(mask));
        k.atomic_max(max_u + slot, xu, Some(mask));
        k.atomic_min(min_u + slot, xu, Some(mask));
        k.atomic_max(max_f + slot, xf, Some(mask));
        k.atomic_min(min_f + slot, xf, Some(mask));
        // Masked-off lanes return 0.
        k.store_masked(olds + offs, old, in_range);
    })
    .unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&vi),
        HostBuffer::from_slice(&vu),
        HostBuffer::from_slice(&vf),
        HostBuffer::from_slice(&init_i),
        HostBuffer::from_slice(&init_i),
        HostBuffer::from_slice(&init_u),
        HostBuffer::from_slice(&init_u),
        HostBuffer::from_slice(&init_f),
        HostBuffer::from_slice(&init_f),
        HostBuffer::from_slice(&vec![-1i32; n]),
    ];
    let mut args: Vec<ArgValue> = (0..10).map(ptr).collect();
    args.push(ArgValue::Int(n as i64));
    interp::run(&kernel, [grid as u32, 1, 1], &args, &mut buffers).unwrap();
    let (mut want_max_i, mut want_min_i) = (init_i.clone(), init_i.clone());
    let (mut want_max_u, mut want_min_u) = (init_u.clone(), init_u.clone());
    let (mut want_max_f, mut want_min_f) = (init_f.clone(), init_f.clone());
    for i in (0..n).filter(|&i| vi[i] % 2 == 0) {
        let s = i % slots;
        want_max_i[s] = want_max_i[s].max(vi[i]);
        want_min_i[s] = want_min_i[s].min(vi[i]);
        want_max_u[s] = want_max_u[s].max(vu[i]);
        want_min_u[s] = want_min_u[s].min(vu[i]);
        want_max_f[s] = want_max_f[s].max(vf[i]);
        want_min_f[s] = want_min_f[s].min(vf[i]);
    }
    assert_eq!(buffers[3].to_vec::<i32>().unwrap(), want_max_i);
    assert_eq!(buffers[4].to_vec::<i32>().unwrap(), want_min_i);
    assert_eq!(buffers[5].to_vec::<u32>().unwrap(), want_max_u);
    assert_eq!(buffers[6].to_vec::<u32>().unwrap(), want_min_u);
    assert_eq!(buffers[7].to_vec::<f32>().unwrap(), want_max_f);
    assert_eq!(buffers[8].to_vec::<f32>().unwrap(), want_min_f);
    let olds: Vec<i32> = buffers[9].to_vec().unwrap();
    for i in 0..n {
        if vi[i] % 2 != 0 {
            assert_eq!(olds[i], 0, "masked-off lane {i} returns 0");
        }
    }
}

#[test]
fn atomic_xchg_and_cas_with_masks() {
    let mut rng = Rng::new(0x0b5_0017);
    let n = 64usize;
    let init: Vec<i32> = (0..n).map(|_| rng.below(3) as i32).collect();
    let initf: Vec<f32> = (0..n).map(|_| rng.below(3) as f32 - 1.0).collect();
    let kernel = Kernel::build("xchg_cas", |k| {
        let (px, pc, pf) = (k.arg_ptr("x", I32), k.arg_ptr("c", I32), k.arg_ptr("f", F32));
        let (old_x, old_c, old_f) = (
            k.arg_ptr("old_x", I32),
            k.arg_ptr("old_c", I32),
            k.arg_ptr("old_f", F32),
        );
        let lanes = k.arange(0, n as i32);
        let old = k.atomic_xchg(px + lanes, lanes * 10, Some((lanes % 3).ne(0)));
        k.store(old_x + lanes, old);
        // Where the slot holds 1, lanes below 50 write 100 + lane.
        let old = k.atomic_cas(pc + lanes, 1, lanes + 100, Some(lanes.lt(50)));
        k.store(old_c + lanes, old);
        // Floats compare bit patterns: -0.0 is not 0.0.
        let old = k.atomic_cas(pf + lanes, 0.0, 9.5, Some(lanes.ge(8)));
        k.store(old_f + lanes, old);
    })
    .unwrap();
    let mut f = initf.clone();
    f[1] = -0.0;
    f[9] = -0.0;
    let mut buffers = [
        HostBuffer::from_slice(&init),
        HostBuffer::from_slice(&init),
        HostBuffer::from_slice(&f),
        HostBuffer::zeros(I32, n),
        HostBuffer::zeros(I32, n),
        HostBuffer::zeros(F32, n),
    ];
    run_once(&kernel, &mut buffers);
    let (x, c, fx): (Vec<i32>, Vec<i32>, Vec<f32>) = (
        buffers[0].to_vec().unwrap(),
        buffers[1].to_vec().unwrap(),
        buffers[2].to_vec().unwrap(),
    );
    let (ox, oc, of): (Vec<i32>, Vec<i32>, Vec<f32>) = (
        buffers[3].to_vec().unwrap(),
        buffers[4].to_vec().unwrap(),
        buffers[5].to_vec().unwrap(),
    );
    for i in 0..n {
        let on = i % 3 != 0;
        assert_eq!(
            (x[i], ox[i]),
            if on { (i as i32 * 10, init[i]) } else { (init[i], 0) },
            "xchg lane {i}"
        );
        let on = i < 50;
        let swapped = on && init[i] == 1;
        assert_eq!(c[i], if swapped { 100 + i as i32 } else { init[i] }, "cas lane {i}");
        assert_eq!(oc[i], if on { init[i] } else { 0 }, "cas old lane {i}");
        let on = i >= 8;
        let swapped = on && f[i].to_bits() == 0;
        assert_eq!(
            fx[i].to_bits(),
            if swapped { 9.5f32 } else { f[i] }.to_bits(),
            "float cas lane {i}"
        );
        assert_eq!(
            of[i].to_bits(),
            if on { f[i] } else { 0.0 }.to_bits(),
            "float cas old lane {i}"
        );
    }
}

#[test]
fn a_spin_lock_from_cas_and_xchg_in_a_while_loop() {
    let grid = 20u32;
    let kernel = Kernel::build("lock", |k| {
        let (lock, counter) = (k.arg_ptr("lock", I32), k.arg_ptr("counter", I32));
        let pid = k.program_id(0);
        // Acquire: spin until the CAS finds the lock free (0) and takes it (1).
        k.while_loop(
            &[k.scalar(1, I32)],
            |c| c[0].ne(0),
            |_| vec![k.atomic_cas(lock, 0, 1, None)],
        );
        // A non-atomic read-modify-write, safe under the lock.
        let c = k.load(counter);
        k.store(counter, c * 3 + pid);
        k.atomic_xchg(lock, 0, None);
    })
    .unwrap();
    let mut buffers = [HostBuffer::zeros(I32, 1), HostBuffer::zeros(I32, 1)];
    let args = [ptr(0), ptr(1)];
    interp::run(&kernel, [grid, 1, 1], &args, &mut buffers).unwrap();
    let want = (0..grid as i32).fold(0i32, |c, pid| c.wrapping_mul(3).wrapping_add(pid));
    assert_eq!(buffers[1].to_vec::<i32>().unwrap(), [want]);
    assert_eq!(buffers[0].to_vec::<i32>().unwrap(), [0], "the lock is released");
}

// ---------------------------------------------------------------------------------------
// Control flow
// ---------------------------------------------------------------------------------------

#[test]
fn for_loops_with_carried_values_and_any_step() {
    let kernel = Kernel::build("for", |k| {
        let (out_i, out_f) = (k.arg_ptr("out_i", I32), k.arg_ptr("out_f", F32));
        let (start, end, step) = (k.arg_i32("start"), k.arg_i32("end"), k.arg_i32("step"));
        let zero = k.scalar(0, I32);
        let init = [zero, zero, k.scalar(-999, I32), k.zeros(&[8], F32)];
        let r = k.for_range(start, end, step, &init, |i, c| {
            let lanes = k.arange(0, 8);
            // A branch inside the loop, with results.
            let sq = k.if_else((i % 3).eq(0), || vec![c[0] + i * i], || vec![c[0] - 1]);
            vec![sq[0], c[1] + 1, i, c[3] * 0.5 + (lanes + i).to(F32)]
        });
        k.store(out_i, r[0]);
        k.store(out_i + 1, r[1]);
        k.store(out_i + 2, r[2]);
        k.store(out_f + k.arange(0, 8), r[3]);
    })
    .unwrap();
    for (start, end, step) in [
        (10, -5, -3),
        (-5, 10, 3),
        (0, 0, 1),
        (5, 0, 1),
        (0, 5, -1),
        (7, -8, -1),
        (100, 3, -7),
        (-20, 21, 20),
        (3, 4, 100),
    ] {
        let mut buffers = [HostBuffer::zeros(I32, 3), HostBuffer::zeros(F32, 8)];
        let args = [
            ptr(0),
            ptr(1),
            ArgValue::Int(start),
            ArgValue::Int(end),
            ArgValue::Int(step),
        ];
        interp::run(&kernel, [1, 1, 1], &args, &mut buffers).unwrap();
        let (mut sum, mut count, mut last, mut acc) = (0i32, 0i32, -999i32, [0f32; 8]);
        let mut i = start as i32;
        while (step > 0 && i < end as i32) || (step < 0 && i > end as i32) {
            sum = if i % 3 == 0 { sum + i * i } else { sum - 1 };
            count += 1;
            last = i;
            for (l, a) in acc.iter_mut().enumerate() {
                *a = *a * 0.5 + (l as i32 + i) as f32;
            }
            i += step as i32;
        }
        let case = format!("range({start}, {end}, {step})");
        assert_eq!(buffers[0].to_vec::<i32>().unwrap(), [sum, count, last], "{case}");
        assert_eq!(buffers[1].to_vec::<f32>().unwrap(), acc, "{case}");
    }
}

#[test]
fn for_loops_over_i64_bounds() {
    let kernel = Kernel::build("for64", |k| {
        let out = k.arg_ptr("out", I64);
        let (start, end, step) = (
            k.arg_scalar("start", I64),
            k.arg_scalar("end", I64),
            k.arg_scalar("step", I64),
        );
        let r = k.for_range(start, end, step, &[k.scalar(0, I64), k.scalar(0, I32)], |i, c| {
            assert_eq!(i.dtype(), Some(I64));
            vec![c[0] + i, c[1] + 1]
        });
        k.store(out, r[0]);
        k.store(out + 1, r[1].to(I64));
    })
    .unwrap();
    for (start, end, step) in [
        (5_000_000_000i64, -5_000_000_000, -1_234_567_891),
        (-(1 << 40), 1 << 40, 1 << 37),
    ] {
        let mut buffers = [HostBuffer::zeros(I64, 2)];
        let args = [ptr(0), ArgValue::Int(start), ArgValue::Int(end), ArgValue::Int(step)];
        interp::run(&kernel, [1, 1, 1], &args, &mut buffers).unwrap();
        let (mut sum, mut count, mut i) = (0i64, 0i64, start);
        while (step > 0 && i < end) || (step < 0 && i > end) {
            sum += i;
            count += 1;
            i += step;
        }
        assert_eq!(buffers[0].to_vec::<i64>().unwrap(), [sum, count]);
    }
}

#[test]
fn if_else_with_results_and_if_then() {
    let mut rng = Rng::new(0x0b5_0018);
    let grid = 12usize;
    let x: Vec<f32> = (0..grid)
        .map(|i| if i == 3 { 0.0 } else { rng.uniform(-4.0, 4.0) as f32 })
        .collect();
    let kernel = Kernel::build("if", |k| {
        let (px, out, flags) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32), k.arg_ptr("flags", I32));
        let pid = k.program_id(0);
        let x = k.load(px + pid);
        let lanes = k.arange(0, 8).to(F32);
        let r = k.if_else(x.gt(0.0), || vec![lanes * x, x * 2.0], || vec![lanes - x, -x]);
        assert_eq!((r[0].shape(), r[1].shape()), (vec![8], vec![]));
        k.store(out + pid * 9 + k.arange(0, 8), r[0]);
        k.store(out + pid * 9 + 8, r[1]);
        // Side effects only in the taken branch.
        k.if_then((pid % 4).eq(1), || k.store(flags + pid, pid + 100));
    })
    .unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::zeros(F32, grid * 9),
        HostBuffer::from_slice(&vec![-1i32; grid]),
    ];
    let args = [ptr(0), ptr(1), ptr(2)];
    interp::run(&kernel, [grid as u32, 1, 1], &args, &mut buffers).unwrap();
    let out: Vec<f32> = buffers[1].to_vec().unwrap();
    let flags: Vec<i32> = buffers[2].to_vec().unwrap();
    for p in 0..grid {
        for l in 0..8 {
            let want = if x[p] > 0.0 { l as f32 * x[p] } else { l as f32 - x[p] };
            assert_eq!(out[p * 9 + l], want, "program {p} lane {l}");
        }
        assert_eq!(out[p * 9 + 8], if x[p] > 0.0 { x[p] * 2.0 } else { -x[p] });
        assert_eq!(flags[p], if p % 4 == 1 { p as i32 + 100 } else { -1 });
    }
}

#[test]
fn while_loops_count_collatz_steps() {
    let mut rng = Rng::new(0x0b5_0019);
    let grid = 40usize;
    let x: Vec<i32> = (0..grid)
        .map(|i| if i == 0 { 1 } else { rng.below(10_000) as i32 + 1 })
        .collect();
    let kernel = Kernel::build("collatz", |k| {
        let (px, out) = (k.arg_ptr("x", I32), k.arg_ptr("steps", I32));
        let pid = k.program_id(0);
        let r = k.while_loop(
            &[k.load(px + pid), k.scalar(0, I32)],
            |c| c[0].ne(1),
            |c| {
                let next = k.where_((c[0] % 2).eq(0), c[0] / 2, c[0] * 3 + 1);
                vec![next, c[1] + 1]
            },
        );
        k.store(out + pid, r[1]);
    })
    .unwrap();
    let mut buffers = [HostBuffer::from_slice(&x), HostBuffer::zeros(I32, grid)];
    interp::run(&kernel, [grid as u32, 1, 1], &[ptr(0), ptr(1)], &mut buffers).unwrap();
    let got: Vec<i32> = buffers[1].to_vec().unwrap();
    for p in 0..grid {
        let (mut v, mut steps) = (x[p] as i64, 0);
        while v != 1 {
            v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
            steps += 1;
        }
        assert_eq!(got[p], steps, "collatz({})", x[p]);
    }
    assert_eq!(
        got[0], 0,
        "a while loop whose condition fails at once runs no iteration"
    );
}

/// The op lists the backends' tests sweep hold each op once, in declaration order, up to
/// the last one declared.
#[test]
fn op_lists_hold_every_op_once() {
    assert!(UnaryOp::ALL.iter().enumerate().all(|(i, &op)| op as usize == i));
    assert_eq!(UnaryOp::ALL.len(), UnaryOp::Ffs as usize + 1);
    assert!(BinaryOp::ALL.iter().enumerate().all(|(i, &op)| op as usize == i));
    assert_eq!(BinaryOp::ALL.len(), BinaryOp::UMulHi as usize + 1);
    assert!(CmpOp::ALL.iter().enumerate().all(|(i, &op)| op as usize == i));
    assert_eq!(CmpOp::ALL.len(), CmpOp::Ge as usize + 1);
}
