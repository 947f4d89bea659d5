//! `hadd`, `rhadd`, `mulhi`, `sad` and `mul24` (built from ops in `builder/integer_math.rs`): against
//! their definitions in wide integers, on random and extreme values of every integer type
//! they take, in the interpreter and lowered through the simulator, and their mistakes as
//! errors that name them.

mod f32_functions;

use f32_functions::interpreted_and_lowered_agree;
use rutile_ir::interp::{ArgValue, HostBuffer};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F32, I16, I32, I64, I8, U16, U32, U64, U8};
use rutile_ir::{Kernel, KernelBuilder, Value};

const BLOCK: i32 = 128;
type Binary = for<'b> fn(Value<'b>, Value<'b>) -> Value<'b>;

/// The type's range.
fn range(t: ScalarType) -> (i128, i128) {
    let bits = t.bits();
    if t.is_signed_int() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Random values of `t` with its extremes first (a ragged count).
fn values(t: ScalarType, rng: &mut Rng) -> Vec<i128> {
    let (lo, hi) = range(t);
    let mut v = vec![lo, hi, lo + 1, hi - 1, 0, 1, (-1i128).max(lo), 2];
    v.extend((0..1000).map(|_| {
        let r = (rng.next_u64() as i128) & ((1i128 << t.bits()) - 1);
        r + lo
    }));
    v
}

fn buffer(t: ScalarType, v: &[i128]) -> HostBuffer {
    match t {
        I8 => HostBuffer::from_slice(&v.iter().map(|&x| x as i8).collect::<Vec<_>>()),
        U8 => HostBuffer::from_slice(&v.iter().map(|&x| x as u8).collect::<Vec<_>>()),
        I16 => HostBuffer::from_slice(&v.iter().map(|&x| x as i16).collect::<Vec<_>>()),
        U16 => HostBuffer::from_slice(&v.iter().map(|&x| x as u16).collect::<Vec<_>>()),
        I32 => HostBuffer::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        U32 => HostBuffer::from_slice(&v.iter().map(|&x| x as u32).collect::<Vec<_>>()),
        I64 => HostBuffer::from_slice(&v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
        _ => HostBuffer::from_slice(&v.iter().map(|&x| x as u64).collect::<Vec<_>>()),
    }
}

fn read(t: ScalarType, b: &HostBuffer) -> Vec<i128> {
    match t {
        I8 => b.to_vec::<i8>().unwrap().into_iter().map(i128::from).collect(),
        U8 => b.to_vec::<u8>().unwrap().into_iter().map(i128::from).collect(),
        I16 => b.to_vec::<i16>().unwrap().into_iter().map(i128::from).collect(),
        U16 => b.to_vec::<u16>().unwrap().into_iter().map(i128::from).collect(),
        I32 => b.to_vec::<i32>().unwrap().into_iter().map(i128::from).collect(),
        U32 => b.to_vec::<u32>().unwrap().into_iter().map(i128::from).collect(),
        I64 => b.to_vec::<i64>().unwrap().into_iter().map(i128::from).collect(),
        _ => b.to_vec::<u64>().unwrap().into_iter().map(i128::from).collect(),
    }
}

fn kernel(t: ScalarType, f: Binary) -> Kernel {
    Kernel::build("integer_math", |k| {
        let (pa, pb, out) = (k.arg_ptr("a", t), k.arg_ptr("b", t), k.arg_ptr("out", t));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let (a, b) = (k.load_masked(pa + offs, mask, 0), k.load_masked(pb + offs, mask, 0));
        k.store_masked(out + offs, f(a, b), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `f` on `t` in the interpreter and on two targets in the simulator, checks the
/// three agree, and returns `(a, b, result)`.
fn run(t: ScalarType, f: Binary, rng: &mut Rng) -> Vec<(i128, i128, i128)> {
    let a = values(t, rng);
    let mut b = values(t, rng);
    b.rotate_left(3);
    let k = kernel(t, f);
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Int(a.len() as i64)];
    let bufs = vec![buffer(t, &a), buffer(t, &b), buffer(t, &vec![0; a.len()])];
    let grid = [(a.len() as u32).div_ceil(BLOCK as u32), 1, 1];
    let want = interpreted_and_lowered_agree(&t.to_string(), &k, grid, &args, &bufs, 2);
    let r = read(t, &want[2]);
    a.into_iter().zip(b).zip(r).map(|((a, b), r)| (a, b, r)).collect()
}

#[test]
fn halving_adds_are_the_floor_and_ceiling_of_the_mean() {
    let mut rng = Rng::new(211);
    for t in [I8, U8, I16, U16, I32, U32, I64, U64] {
        for (a, b, r) in run(t, |a, b| a.hadd(b), &mut rng) {
            assert_eq!(r, (a + b).div_euclid(2), "hadd({a}, {b}) on {t}");
        }
        for (a, b, r) in run(t, |a, b| a.rhadd(b), &mut rng) {
            assert_eq!(r, (a + b + 1).div_euclid(2), "rhadd({a}, {b}) on {t}");
        }
    }
}

/// `v` wrapped into `t`'s range.
fn wrap(t: ScalarType, v: i128) -> i128 {
    let (lo, _) = range(t);
    let m = 1i128 << t.bits();
    (v - lo).rem_euclid(m) + lo
}

#[test]
fn sad_and_mul24_are_their_definitions() {
    let mut rng = Rng::new(213);
    for t in [I8, U8, I16, U16, I32, U32, I64, U64] {
        // c = b: |a - b| + b, wrapped into the type.
        for (a, b, r) in run(t, |a, b| a.builder().sad(a, b, b), &mut rng) {
            assert_eq!(r, wrap(t, (a - b).abs() + b), "sad({a}, {b}, {b}) on {t}");
        }
    }
    for t in [I32, U32] {
        for (a, b, r) in run(t, |a, b| a.mul24(b), &mut rng) {
            let low = |v: i128| {
                let l = v & 0xFF_FFFF;
                if t == I32 && l >= 1 << 23 {
                    l - (1 << 24)
                } else {
                    l
                }
            };
            assert_eq!(r, wrap(t, low(a) * low(b)), "mul24({a}, {b}) on {t}");
        }
    }
}

#[test]
fn mulhi_is_the_high_half_of_the_signed_product() {
    let mut rng = Rng::new(212);
    for t in [I32, I64] {
        for (a, b, r) in run(t, |a, b| a.mulhi(b), &mut rng) {
            // The high half of the exact product (i64 products fit i128; i32's too).
            let want = if t == I32 {
                (a * b) >> 32
            } else {
                let (lo_a, hi_a) = (a & 0xFFFF_FFFF, a >> 32);
                let (lo_b, hi_b) = (b & 0xFFFF_FFFF, b >> 32);
                // a·b = hi_a·hi_b·2^64 + (hi_a·lo_b + lo_a·hi_b)·2^32 + lo_a·lo_b.
                let mid = hi_a * lo_b + lo_a * hi_b + ((lo_a * lo_b) >> 32);
                hi_a * hi_b + (mid >> 32)
            };
            assert_eq!(r, want, "mulhi({a}, {b}) on {t}");
        }
    }
}

#[test]
fn mistakes_are_errors_that_name_them() {
    type Make = for<'b> fn(&'b KernelBuilder);
    let cases: [(&str, Make, &str); 6] = [
        (
            "mul24",
            |k| {
                let _ = k.zeros(&[16], I64).mul24(k.zeros(&[16], I64));
            },
            "two i32 or two u32",
        ),
        (
            "sad",
            |k| {
                let _ = k.sad(k.zeros(&[16], I32), k.zeros(&[16], I32), k.zeros(&[16], U32));
            },
            "u32",
        ),
        (
            "hadd",
            |k| {
                let _ = k.zeros(&[16], F32).hadd(k.zeros(&[16], F32));
            },
            "f32",
        ),
        (
            "rhadd",
            |k| {
                let _ = k.zeros(&[16], I32).rhadd(k.zeros(&[16], U32));
            },
            "u32",
        ),
        (
            "mulhi",
            |k| {
                let _ = k.zeros(&[16], U32).mulhi(k.zeros(&[16], U32));
            },
            "i32 or two i64",
        ),
        (
            "hadd",
            |k| {
                let _ = k.zeros(&[16], I32).hadd(k.zeros(&[8], I32));
            },
            "broadcast",
        ),
    ];
    for (name, make, word) in cases {
        let e = Kernel::build("bad", make).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains(word), "{e}");
    }
}
