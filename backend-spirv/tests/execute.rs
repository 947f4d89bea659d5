//! The generated SPIR-V run on a Vulkan device (lavapipe in CI), checked against the IR's
//! semantics computed here.

mod common;

use common::vk::{bytes, device_or_skip, from_bytes, Vk};
use common::{global_index, reduction, vector_add, vector_add_width};
use rutile_ir::ir::{AtomicOp, BinaryOp, CmpOp, UnaryOp};
use rutile_ir::thread::{Expr, Memory, Reg, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, *};
use rutile_spirv::{emit, ScalarArg};

const THREADS: u32 = 64;

/// A kernel over `n` elements, one per thread: loads `a[i]` and `b[i]` of type `t`,
/// and stores what `f` makes of them (registers of type `out`) at `out[i * k + j]`.
fn pairwise(
    name: &str,
    t: ScalarType,
    out: ScalarType,
    f: impl Fn(&mut ThreadKernelBuilder, Reg, Reg) -> Vec<Reg>,
) -> (ThreadKernel, usize) {
    let mut kb = ThreadKernelBuilder::new(name, THREADS / 32, 32);
    let a_buf = kb.ptr("a", t);
    let b_buf = kb.ptr("b", t);
    let o_buf = kb.ptr("out", out);
    let n = kb.scalar("n", I32);
    let i = global_index(&mut kb, THREADS);
    let n = kb.param(n, I32);
    let inside = kb.cmp(CmpOp::Lt, i, n);
    let mut k = 0;
    kb.if_(
        inside,
        |kb| {
            let a = kb.load(t, 1, Memory::Global { param: a_buf }, i, None)[0];
            let b = kb.load(t, 1, Memory::Global { param: b_buf }, i, None)[0];
            let results = f(kb, a, b);
            k = results.len();
            let kk = kb.int(I32, k as i64);
            let at = kb.bin(BinaryOp::Mul, i, kk);
            for (j, r) in results.into_iter().enumerate() {
                let jj = kb.int(I32, j as i64);
                let at = kb.bin(BinaryOp::Add, at, jj);
                kb.store(vec![r], Memory::Global { param: o_buf }, at, None);
            }
        },
        |_| {},
    );
    (kb.finish(), k)
}

fn run_pairwise<T: Copy + Default, O: Copy + Default>(
    vk: &Vk,
    k: &ThreadKernel,
    per: usize,
    a: &[T],
    b: &[T],
) -> Vec<O> {
    let sk = emit(k, &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let n = a.len();
    let mut bufs = vec![bytes(a), bytes(b), vec![0u8; n * per * std::mem::size_of::<O>()]];
    vk.run(
        &sk,
        &mut bufs,
        &[ScalarArg::I32(n as i32)],
        [(n as u32).div_ceil(THREADS), 1, 1],
    );
    from_bytes(&bufs[2])
}

fn pairs<T: Copy>(xs: &[T], ys: &[T]) -> (Vec<T>, Vec<T>) {
    let mut a = vec![];
    let mut b = vec![];
    for &x in xs {
        for &y in ys {
            a.push(x);
            b.push(y);
        }
    }
    (a, b)
}

const INT_OPS: [BinaryOp; 12] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::CeilDiv,
    BinaryOp::And,
    BinaryOp::Xor,
    BinaryOp::Shl,
    BinaryOp::Shr,
    BinaryOp::Min,
    BinaryOp::Max,
];

fn int_kernel(t: ScalarType) -> (ThreadKernel, usize) {
    pairwise(&format!("int_{t}"), t, t, |kb, a, b| {
        let mut r: Vec<Reg> = INT_OPS.iter().map(|&op| kb.bin(op, a, b)).collect();
        r.push(kb.set(t, Expr::Unary(UnaryOp::Neg, a)));
        r.push(kb.set(t, Expr::Unary(UnaryOp::Abs, a)));
        r.push(kb.set(t, Expr::Unary(UnaryOp::Not, a)));
        for op in [CmpOp::Lt, CmpOp::Ne] {
            let c = kb.cmp(op, a, b);
            r.push(kb.set(t, Expr::Cast(c)));
        }
        r
    })
}

/// The IR's integer semantics on values of `bits` bits, signed or not, held in i128.
fn int_expected(signed: bool, bits: u32, a: i128, b: i128) -> Vec<i128> {
    let m: i128 = (1i128 << bits) - 1;
    let wrap = |v: i128| {
        let v = v & m;
        if signed && v >> (bits - 1) != 0 {
            v - (1i128 << bits)
        } else {
            v
        }
    };
    let div = |a: i128, b: i128| if b == 0 { 0 } else { wrap(a / b) };
    let rem = |a: i128, b: i128| if b == 0 { 0 } else { wrap(a % b) };
    let amount = b & m; // read as unsigned
    let shl = if amount >= bits as i128 {
        0
    } else {
        wrap((a & m) << amount)
    };
    let shr = if amount >= bits as i128 {
        if signed && a < 0 {
            -1
        } else {
            0
        }
    } else {
        wrap(a >> amount)
    };
    vec![
        wrap(a + b),
        wrap(a - b),
        wrap(a.wrapping_mul(b)),
        div(a, b),
        rem(a, b),
        div(wrap(a + b - 1), b),
        wrap(a & b),
        wrap(a ^ b),
        shl,
        shr,
        a.min(b),
        a.max(b),
        wrap(-a),
        if signed { wrap(a.abs()) } else { a },
        wrap(!a),
        (a < b) as i128,
        (a != b) as i128,
    ]
}

#[test]
fn integer_semantics() {
    let Some(vk) = device_or_skip("integer_semantics") else {
        return;
    };
    eprintln!("device: {} {:?}", vk.name, vk.target);
    let xs = [0, 1, -1, 7, -7, 100, i32::MIN, i32::MAX];
    let ys = [0, 1, -1, 2, -3, 31, 32, 33, 1000];
    let (a, b) = pairs(&xs, &ys);
    let (k, per) = int_kernel(I32);
    let got: Vec<i32> = run_pairwise(&vk, &k, per, &a, &b);
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let want = int_expected(true, 32, x as i128, y as i128);
        let got: Vec<i128> = got[i * per..(i + 1) * per].iter().map(|&v| v as i128).collect();
        assert_eq!(got, want, "i32 ops of ({x}, {y}): {:?}", INT_OPS);
    }
    let xs = [0u32, 1, 7, 100, 0x8000_0000, u32::MAX];
    let ys = [0u32, 1, 2, 3, 31, 32, 33, u32::MAX];
    let (a, b) = pairs(&xs, &ys);
    let (k, per) = int_kernel(U32);
    let got: Vec<u32> = run_pairwise(&vk, &k, per, &a, &b);
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let want = int_expected(false, 32, x as i128, y as i128);
        let got: Vec<i128> = got[i * per..(i + 1) * per].iter().map(|&v| v as i128).collect();
        assert_eq!(got, want, "u32 ops of ({x}, {y})");
    }
    if vk.target.shader_i64 {
        let xs = [0i64, 1, -1, 7, -7, i64::MIN, i64::MAX, 1 << 40];
        let ys = [0i64, 1, -1, 3, 63, 64, 65, -(1 << 33)];
        let (a, b) = pairs(&xs, &ys);
        let (k, per) = int_kernel(I64);
        let got: Vec<i64> = run_pairwise(&vk, &k, per, &a, &b);
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let want = int_expected(true, 64, x as i128, y as i128);
            let got: Vec<i128> = got[i * per..(i + 1) * per].iter().map(|&v| v as i128).collect();
            assert_eq!(got, want, "i64 ops of ({x}, {y})");
        }
        let (a, b): (Vec<u64>, Vec<u64>) = (
            a.iter().map(|&v| v as u64).collect(),
            b.iter().map(|&v| v as u64).collect(),
        );
        let (k, per) = int_kernel(U64);
        let got: Vec<u64> = run_pairwise(&vk, &k, per, &a, &b);
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let want = int_expected(false, 64, x as i128, y as i128);
            let got: Vec<i128> = got[i * per..(i + 1) * per].iter().map(|&v| v as i128).collect();
            assert_eq!(got, want, "u64 ops of ({x}, {y})");
        }
    }
}

/// The ops of [`int_kernel`] on 8- and 16-bit integers, which the kernel makes by casting
/// i32 inputs and widens back to i32 for storing.
fn narrow_int_kernel(t: ScalarType) -> (ThreadKernel, usize) {
    pairwise(&format!("narrow_{t}"), I32, I32, |kb, a, b| {
        let a = kb.set(t, Expr::Cast(a));
        let b = kb.set(t, Expr::Cast(b));
        let mut r: Vec<Reg> = INT_OPS.iter().map(|&op| kb.bin(op, a, b)).collect();
        r.push(kb.set(t, Expr::Unary(UnaryOp::Neg, a)));
        r.push(kb.set(t, Expr::Unary(UnaryOp::Abs, a)));
        r.push(kb.set(t, Expr::Unary(UnaryOp::Not, a)));
        for op in [CmpOp::Lt, CmpOp::Ne] {
            let c = kb.cmp(op, a, b);
            r.push(kb.set(t, Expr::Cast(c)));
        }
        // A bitcast to the other signedness and back.
        let other = match t {
            I8 => U8,
            U8 => I8,
            I16 => U16,
            _ => I16,
        };
        let flip = kb.set(other, Expr::Bitcast(a));
        let sum = kb.bin(BinaryOp::Add, flip, flip);
        r.push(kb.set(t, Expr::Bitcast(sum)));
        r.into_iter().map(|v| kb.set(I32, Expr::Cast(v))).collect()
    })
}

#[test]
fn narrow_integer_semantics() {
    let Some(vk) = device_or_skip("narrow_integer_semantics") else {
        return;
    };
    let xs = [
        0,
        1,
        -1,
        7,
        -7,
        100,
        127,
        -128,
        128,
        255,
        300,
        32767,
        -32768,
        65535,
        70000,
        i32::MIN,
    ];
    let ys = [0, 1, -1, 2, -3, 7, 8, 9, 15, 16, 17, 255, -128];
    let (a, b) = pairs(&xs, &ys);
    for t in [I8, U8, I16, U16] {
        let (k, per) = narrow_int_kernel(t);
        common::check(&k, &vk.target);
        let got: Vec<i32> = run_pairwise(&vk, &k, per, &a, &b);
        let bits = t.bits();
        let signed = t.is_signed_int();
        let m = (1i128 << bits) - 1;
        let wrap = |v: i128| {
            let v = v & m;
            if signed && v >> (bits - 1) != 0 {
                v - (1i128 << bits)
            } else {
                v
            }
        };
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let (x, y) = (wrap(x as i128), wrap(y as i128));
            let mut want = int_expected(signed, bits, x, y);
            want.push(wrap(2 * x));
            let got: Vec<i128> = got[i * per..(i + 1) * per].iter().map(|&v| v as i128).collect();
            assert_eq!(got, want, "{t} ops of ({x}, {y})");
        }
    }
    // Floats to and from narrow integers.
    let (k, per) = pairwise("narrow_casts", F32, I32, |kb, a, _| {
        let mut r = vec![];
        for t in [I8, U8, I16, U16] {
            let v = kb.set(t, Expr::Cast(a));
            r.push(kb.set(I32, Expr::Cast(v)));
            let f = kb.set(F32, Expr::Cast(v));
            r.push(kb.set(I32, Expr::Bitcast(f)));
        }
        r
    });
    let a = [
        -300.7f32,
        -129.0,
        -128.9,
        -1.5,
        0.0,
        127.9,
        128.0,
        255.9,
        256.0,
        1e10,
        -1e10,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        65535.9,
        65536.0,
        32767.5,
        -32768.9,
        -32769.0,
    ];
    let got: Vec<i32> = run_pairwise(&vk, &k, per, &a, &a);
    for (i, &x) in a.iter().enumerate() {
        let ints = [x as i8 as i32, x as u8 as i32, x as i16 as i32, x as u16 as i32];
        let want: Vec<i32> = ints.iter().flat_map(|&v| [v, (v as f32).to_bits() as i32]).collect();
        assert_eq!(&got[i * per..(i + 1) * per], &want[..], "narrow casts of {x}");
    }
}

/// The integer ops of [`int_kernel`] on constants only (which the backend folds).
fn const_int_kernel(t: ScalarType, x: i64, y: i64) -> ThreadKernel {
    let mut kb = ThreadKernelBuilder::new("int_consts", 1, 32);
    let narrow = t.bits() < 32;
    let out = kb.ptr("out", if narrow { I32 } else { t });
    let a = kb.int(t, x);
    let b = kb.int(t, y);
    let mut r: Vec<Reg> = INT_OPS.iter().map(|&op| kb.bin(op, a, b)).collect();
    r.push(kb.set(t, Expr::Unary(UnaryOp::Neg, a)));
    r.push(kb.set(t, Expr::Unary(UnaryOp::Abs, a)));
    r.push(kb.set(t, Expr::Unary(UnaryOp::Not, a)));
    for op in [CmpOp::Lt, CmpOp::Ne] {
        let c = kb.cmp(op, a, b);
        r.push(kb.set(t, Expr::Cast(c)));
    }
    for (j, v) in r.into_iter().enumerate() {
        let v = if narrow { kb.set(I32, Expr::Cast(v)) } else { v };
        let at = kb.int(I32, j as i64);
        kb.store(vec![v], Memory::Global { param: out }, at, None);
    }
    kb.finish()
}

#[test]
fn integer_semantics_of_constants() {
    let Some(vk) = device_or_skip("integer_semantics_of_constants") else {
        return;
    };
    let per = INT_OPS.len() + 5;
    for x in [0i64, 1, -1, 7, i32::MIN as i64, i32::MAX as i64] {
        for y in [0i64, -1, 2, 31, 32, 33] {
            let sk = emit(&const_int_kernel(I32, x, y), &vk.target).unwrap_or_else(|e| panic!("{e}"));
            let mut bufs = vec![vec![0u8; per * 4]];
            vk.run(&sk, &mut bufs, &[], [1, 1, 1]);
            let got: Vec<i128> = from_bytes::<i32>(&bufs[0]).iter().map(|&v| v as i128).collect();
            assert_eq!(
                got,
                int_expected(true, 32, x as i128, y as i128),
                "i32 ops of constants ({x}, {y})"
            );
            let (ux, uy) = (x as u32, y as u32);
            let sk = emit(&const_int_kernel(U32, ux as i64, uy as i64), &vk.target).unwrap();
            vk.run(&sk, &mut bufs, &[], [1, 1, 1]);
            let got: Vec<i128> = from_bytes::<u32>(&bufs[0]).iter().map(|&v| v as i128).collect();
            assert_eq!(
                got,
                int_expected(false, 32, ux as i128, uy as i128),
                "u32 ops of constants ({ux}, {uy})"
            );
            for t in [I8, U8, I16, U16] {
                let bits = t.bits();
                let m = (1i128 << bits) - 1;
                let wrap = |v: i128| {
                    let v = v & m;
                    if t.is_signed_int() && v >> (bits - 1) != 0 {
                        v - (1i128 << bits)
                    } else {
                        v
                    }
                };
                let (nx, ny) = (wrap(x as i128), wrap(y as i128));
                let sk = emit(&const_int_kernel(t, nx as i64, ny as i64), &vk.target).unwrap();
                vk.run(&sk, &mut bufs, &[], [1, 1, 1]);
                let got: Vec<i128> = from_bytes::<i32>(&bufs[0]).iter().map(|&v| v as i128).collect();
                assert_eq!(
                    got,
                    int_expected(t.is_signed_int(), bits, nx, ny),
                    "{t} ops of constants ({nx}, {ny})"
                );
            }
        }
    }
}

fn fmin(a: f64, b: f64) -> f64 {
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

fn fmax(a: f64, b: f64) -> f64 {
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

/// The same float, bit for bit (all NaNs alike).
fn same_float(x: f64, y: f64) -> bool {
    (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
}

/// Minimum and maximum (as f32 bits), four comparisons, and casts to i32, u32 and bool.
fn float_kernel(t: ScalarType) -> (ThreadKernel, usize) {
    pairwise(&format!("float_{t}"), t, I32, |kb, a, b| {
        let mut r = vec![];
        for op in [BinaryOp::Min, BinaryOp::Max] {
            let v = kb.bin(op, a, b);
            // Compare in the kernel's precision: store the bits of the f32 conversion.
            let v = kb.set(F32, Expr::Cast(v));
            r.push(kb.set(I32, Expr::Bitcast(v)));
        }
        for op in [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Ge] {
            let c = kb.cmp(op, a, b);
            r.push(kb.set(I32, Expr::Cast(c)));
        }
        r.push(kb.set(I32, Expr::Cast(a)));
        let u = kb.set(U32, Expr::Cast(a));
        r.push(kb.set(I32, Expr::Bitcast(u)));
        let bo = kb.set(Bool, Expr::Cast(a));
        r.push(kb.set(I32, Expr::Cast(bo)));
        r
    })
}

fn float_expected(a: f64, b: f64) -> Vec<i32> {
    vec![
        (fmin(a, b) as f32).to_bits() as i32,
        (fmax(a, b) as f32).to_bits() as i32,
        (a == b) as i32,
        (a != b) as i32,
        (a < b) as i32,
        (a >= b) as i32,
        a as i32,
        a as u32 as i32,
        (a != 0.0) as i32,
    ]
}

fn check_floats(what: &str, a: &[f64], b: &[f64], got: &[i32], per: usize) {
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let want = float_expected(x, y);
        let g = &got[i * per..(i + 1) * per];
        for j in 0..2 {
            let (w, g) = (
                f32::from_bits(want[j] as u32) as f64,
                f32::from_bits(g[j] as u32) as f64,
            );
            assert!(
                same_float(w, g),
                "{what} {} of ({x}, {y}) = {g}, expected {w}",
                ["minimum", "maximum"][j]
            );
        }
        assert_eq!(
            &g[2..],
            &want[2..],
            "{what}: eq, ne, lt, ge, as i32, as u32, as bool of ({x}, {y})"
        );
    }
}

#[test]
fn float_semantics() {
    let Some(vk) = device_or_skip("float_semantics") else {
        return;
    };
    let xs = [
        0.0,
        -0.0,
        1.5,
        -2.5,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        3e9,
        -3e9,
        5e9,
        1e-3,
        2147483520.0,
        4294967040.0,
    ];
    let ys = [0.0, -0.0, f64::NAN, 2.0, -1.0];
    let (a, b) = pairs(&xs, &ys);
    let (k, per) = float_kernel(F32);
    let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
    let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
    let got: Vec<i32> = run_pairwise(&vk, &k, per, &a32, &b32);
    let a_: Vec<f64> = a32.iter().map(|&v| v as f64).collect();
    let b_: Vec<f64> = b32.iter().map(|&v| v as f64).collect();
    check_floats("f32", &a_, &b_, &got, per);
    if vk.target.shader_f64 {
        let xs = [
            0.0,
            -0.0,
            1.5,
            -2.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            3e9,
            -3e9,
            2147483647.5,
            -2147483648.5,
            1e300,
        ];
        let (a, b) = pairs(&xs, &ys);
        let (k, per) = float_kernel(F64);
        let got: Vec<i32> = run_pairwise(&vk, &k, per, &a, &b);
        check_floats("f64", &a, &b, &got, per);
    }
    if vk.target.shader_f16 {
        let xs = [
            0.0,
            -0.0,
            1.5,
            -2.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            65504.0,
            -65504.0,
        ];
        let (a, b) = pairs(&xs, &ys);
        let (k, per) = float_kernel(F16);
        let ah: Vec<half::f16> = a.iter().map(|&v| half::f16::from_f64(v)).collect();
        let bh: Vec<half::f16> = b.iter().map(|&v| half::f16::from_f64(v)).collect();
        let got: Vec<i32> = run_pairwise(&vk, &k, per, &ah, &bh);
        check_floats("f16", &a, &b, &got, per);
    }
}

/// Float→integer casts to 64-bit integers (saturation at the exact bounds, NaN to 0).
#[test]
fn float_to_64_bit_integer_casts() {
    let Some(vk) = device_or_skip("float_to_64_bit_integer_casts") else {
        return;
    };
    if !(vk.target.shader_i64 && vk.target.shader_f64) {
        eprintln!("note: the device lacks i64 or f64");
        return;
    }
    let (k, per) = pairwise("f2l", F64, I64, |kb, a, _| {
        let s = kb.set(I64, Expr::Cast(a));
        let u = kb.set(U64, Expr::Cast(a));
        let u = kb.set(I64, Expr::Bitcast(u));
        let f = kb.set(F32, Expr::Cast(a));
        let s32 = kb.set(I64, Expr::Cast(f));
        vec![s, u, s32]
    });
    let a = [
        0.0,
        -1.5,
        1e300,
        -1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        9.3e18,
        1.9e19,
        -9.3e18,
        12345.75,
    ];
    let got: Vec<i64> = run_pairwise(&vk, &k, per, &a, &a);
    for (i, &x) in a.iter().enumerate() {
        let want = [x as i64, x as u64 as i64, x as f32 as i64];
        assert_eq!(&got[i * per..(i + 1) * per], &want, "casts of {x}");
    }
}

/// `(x, erf(x))` with `x` an f32 and erf to double precision.
const ERF: &[(f64, f64)] = &[
    (-3.5, -0.9999992569016276),
    (-2.5, -0.999593047982555),
    (-1.5, -0.9661051464753108),
    (-1.0, -0.8427007929497149),
    (-0.5, -0.5204998778130465),
    (-0.10000000149011612, -0.11246291768297051),
    (0.0, 0.0),
    (9.999999974752427e-07, 1.1283791642462529e-06),
    (0.10000000149011612, 0.11246291768297051),
    (0.5, 0.5204998778130465),
    (0.8999999761581421, 0.7969082004549685),
    (1.0, 0.8427007929497149),
    (1.2000000476837158, 0.9103139909776066),
    (1.5, 0.9661051464753108),
    (1.899999976158142, 0.9927904285074909),
    (2.0, 0.9953222650189527),
    (2.5, 0.999593047982555),
    (3.0, 0.9999779095030014),
    (3.5, 0.9999992569016276),
    (3.9000000953674316, 0.9999999652077781),
    (4.0, 0.9999999845827421),
    (5.0, 0.9999999999984626),
];

#[test]
fn transcendental_functions() {
    let Some(vk) = device_or_skip("transcendental_functions") else {
        return;
    };
    let (k, per) = pairwise("unary", F32, F32, |kb, a, _| {
        [
            UnaryOp::Erf,
            UnaryOp::Sigmoid,
            UnaryOp::Sqrt,
            UnaryOp::Floor,
            UnaryOp::Ceil,
            UnaryOp::Abs,
            UnaryOp::Neg,
            UnaryOp::Trunc,
            UnaryOp::Rint,
        ]
        .iter()
        .map(|&op| kb.set(F32, Expr::Unary(op, a)))
        .collect()
    });
    let mut a: Vec<f32> = ERF.iter().map(|&(x, _)| x as f32).collect();
    a.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]);
    let got: Vec<f32> = run_pairwise(&vk, &k, per, &a, &a);
    let ulp = |y: f32| {
        let y = y.abs();
        (f32::from_bits(y.to_bits() + 1) - y).max(f32::from_bits(1)) as f64
    };
    for (i, &x) in a.iter().enumerate() {
        let g = &got[i * per..(i + 1) * per];
        let x64 = x as f64;
        if let Some(&(_, e)) = ERF.get(i) {
            let err = (g[0] as f64 - e).abs() / ulp(e as f32);
            assert!(err <= 4.0, "erf({x}) = {}, expected {e} ({err} ulp)", g[0]);
        }
        let sig = 1.0 / (1.0 + (-x64).exp());
        assert!(
            same_float(g[1] as f64, sig as f32 as f64) || (g[1] as f64 - sig).abs() <= 4.0 * ulp(sig as f32),
            "sigmoid({x}) = {}",
            g[1]
        );
        // Vulkan defines sqrt as 1 / inversesqrt (2.5 + 2 ulp, "Precision of GLSL.std.450
        // Instructions"): NVIDIA's driver is not correctly rounded, lavapipe is.
        let root = x64.sqrt();
        assert!(
            same_float(g[2] as f64, root as f32 as f64) || (g[2] as f64 - root).abs() <= 3.0 * ulp(root as f32),
            "sqrt({x}) = {}",
            g[2]
        );
        for (j, w) in [x.floor(), x.ceil(), x.abs(), -x, x.trunc(), x.round_ties_even()]
            .into_iter()
            .enumerate()
        {
            assert!(
                same_float(g[3 + j] as f64, w as f64),
                "unary op {} of {x} = {}, expected {w}",
                3 + j,
                g[3 + j]
            );
        }
    }
    assert!(got[ERF.len() * per].is_nan(), "erf(NaN)");
    assert_eq!(got[(ERF.len() + 1) * per], 1.0, "erf(inf)");
    assert_eq!(got[(ERF.len() + 2) * per], -1.0, "erf(-inf)");
    assert!(got[(ERF.len() + 3) * per].to_bits() == (-0.0f32).to_bits(), "erf(-0)");
}

#[test]
fn vector_add_over_several_dispatches() {
    let Some(vk) = device_or_skip("vector_add_over_several_dispatches") else {
        return;
    };
    let k = vector_add(F32);
    let sk = emit(&k, &vk.target).unwrap();
    // 512 elements per program; 5 programs, run as dispatches of 2, 2 and 1.
    let n = 5 * 512 - 6;
    let x: Vec<f32> = (0..2560).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..2560).map(|i| 0.5 * i as f32).collect();
    let mut bufs = vec![bytes(&x), bytes(&y), bytes(&vec![-1.0f32; 2560])];
    vk.run_parts(
        &sk,
        &mut bufs,
        &[ScalarArg::I32(n)],
        [5, 1, 1],
        &[([0, 0, 0], [2, 1, 1]), ([2, 0, 0], [2, 1, 1]), ([4, 0, 0], [1, 1, 1])],
    );
    let out: Vec<f32> = from_bytes(&bufs[2]);
    for (i, &got) in out.iter().enumerate() {
        // Groups of four that reach past n are masked off whole.
        let want = if (i / 4) * 4 + 4 <= n as usize {
            1.5 * i as f32
        } else {
            -1.0
        };
        assert_eq!(got, want, "out[{i}]");
    }
    for t in [F16, I64, F64] {
        let ok = match t {
            F16 => vk.target.shader_f16,
            I64 => vk.target.shader_i64,
            _ => vk.target.shader_f64,
        };
        if !ok {
            continue;
        }
        let sk = emit(&vector_add(t), &vk.target).unwrap();
        let (xb, yb, want): (Vec<u8>, Vec<u8>, Vec<u8>) = match t {
            F16 => {
                let f = |i: usize| half::f16::from_f32((i % 100) as f32);
                let x: Vec<_> = (0..512).map(f).collect();
                let w: Vec<_> = (0..512).map(|i| half::f16::from_f32(2.0 * (i % 100) as f32)).collect();
                (bytes(&x), bytes(&x), bytes(&w))
            }
            I64 => {
                let x: Vec<i64> = (0..512).map(|i| (i as i64) << 33).collect();
                let w: Vec<i64> = x.iter().map(|v| v * 2).collect();
                (bytes(&x), bytes(&x), bytes(&w))
            }
            _ => {
                let x: Vec<f64> = (0..512).map(|i| i as f64 * 1e-10).collect();
                let w: Vec<f64> = x.iter().map(|v| v + v).collect();
                (bytes(&x), bytes(&x), bytes(&w))
            }
        };
        let mut bufs = vec![xb, yb, vec![0u8; want.len()]];
        vk.run(&sk, &mut bufs, &[ScalarArg::I32(512)], [1, 1, 1]);
        assert_eq!(bufs[2], want, "vector add of {t}");
    }
}

/// `f16` buffers held as packed words (16-byte accesses): every value survives the trip
/// through `f32` bit for bit (subnormals, signed zeros, infinities, the largest finite),
/// and a group of eight reaching past `n` is masked off whole.
#[test]
fn packed_f16_vector_add() {
    let Some(vk) = device_or_skip("packed_f16_vector_add") else {
        return;
    };
    if !vk.target.shader_f16 {
        eprintln!("note: the device has no f16");
        return;
    }
    // Both ways out of a word: 16-bit integers where the device has them, `f32` where not.
    for shader_i16 in [vk.target.shader_i16, false] {
        let target = rutile_spirv::SpirvTarget {
            shader_i16,
            ..vk.target
        };
        let sk = emit(&vector_add_width(F16, 8), &target).unwrap_or_else(|e| panic!("{e}"));
        let len = 1024;
        let n = len - 12;
        let special = [
            half::f16::from_bits(0x0001),
            half::f16::from_bits(0x83ff),
            half::f16::NEG_ZERO,
            half::f16::INFINITY,
            half::f16::NEG_INFINITY,
            half::f16::MAX,
            half::f16::MIN_POSITIVE,
        ];
        let mut rng = 0x9e3779b9u32;
        let x: Vec<half::f16> = (0..len)
            .map(|i| {
                rng = rng.wrapping_mul(1664525).wrapping_add(1013904223);
                special
                    .get(i % 64)
                    .copied()
                    .unwrap_or(half::f16::from_f32((rng >> 8) as f32 / (1 << 20) as f32 - 8.0))
            })
            .collect();
        let zero: Vec<half::f16> = vec![half::f16::ZERO; len];
        let poison = half::f16::from_f32(-7.0);
        let mut bufs = vec![bytes(&x), bytes(&zero), bytes(&vec![poison; len])];
        vk.run(&sk, &mut bufs, &[ScalarArg::I32(n as i32)], [1, 1, 1]);
        let out: Vec<half::f16> = from_bytes(&bufs[2]);
        for (i, (&got, &x)) in out.iter().zip(&x).enumerate() {
            // x + 0 is x, but -0 + +0 is +0.
            let want = if (i / 8) * 8 + 8 <= n {
                x + half::f16::ZERO
            } else {
                poison
            };
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "out[{i}] (x {x}, 16-bit integers {shader_i16})"
            );
        }
    }
}

#[test]
fn shuffle_reduction() {
    let Some(vk) = device_or_skip("shuffle_reduction") else {
        return;
    };
    let Some(warp) = vk.target.subgroup_size.filter(|_| vk.target.subgroups) else {
        eprintln!("note: the device has no subgroup shuffles");
        return;
    };
    if !(warp.is_power_of_two() && (4..=128).contains(&warp)) {
        eprintln!("note: subgroup size {warp} is not one the test uses");
        return;
    }
    let k = reduction(warp);
    let sk = emit(&k, &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let programs = 3;
    let x: Vec<f32> = (0..256 * programs).map(|i| (i % 7) as f32 + (i / 256) as f32).collect();
    let mut bufs = vec![bytes(&x), vec![0u8; 4 * programs]];
    vk.run(&sk, &mut bufs, &[], [programs as u32, 1, 1]);
    let out: Vec<f32> = from_bytes(&bufs[1]);
    for p in 0..programs {
        let want: f32 = x[p * 256..(p + 1) * 256].iter().sum();
        assert_eq!(out[p], want, "program {p} (subgroups of {warp})");
    }
}

#[test]
fn atomic_semantics() {
    let Some(vk) = device_or_skip("atomic_semantics") else {
        return;
    };
    let mut kb = ThreadKernelBuilder::new("atomics_run", THREADS / 32, 32);
    let facc = kb.ptr("facc", F32);
    let iacc = kb.ptr("iacc", I32);
    let fcas = kb.ptr("fcas", F32);
    let olds = kb.ptr("olds", I32);
    let g = global_index(&mut kb, THREADS);
    let gf = kb.set(F32, Expr::Cast(g));
    let ngf = kb.set(F32, Expr::Unary(UnaryOp::Neg, gf));
    let ng = kb.set(I32, Expr::Unary(UnaryOp::Neg, g));
    let one = kb.float(F32, 1.0);
    let half = kb.float(F32, 0.5);
    let ione = kb.int(I32, 1);
    let two = kb.int(I32, 2);
    let zero = kb.int(I32, 0);
    let fzero = kb.float(F32, 0.0);
    let odd = kb.bin(BinaryOp::Rem, g, two);
    let even = kb.cmp(CmpOp::Eq, odd, zero);
    let idx: Vec<Reg> = (0..8).map(|i| kb.int(I32, i)).collect();
    let atomic = |kb: &mut ThreadKernelBuilder, t: ScalarType, op, param, i: usize, value, pred| {
        let dst = kb.reg(t);
        kb.push(Stmt::Atomic {
            dst,
            op,
            param,
            index: idx[i],
            value,
            pred,
            order: Default::default(),
        });
        dst
    };
    atomic(&mut kb, F32, AtomicOp::Add, facc, 0, one, None);
    atomic(&mut kb, F32, AtomicOp::Add, facc, 1, half, Some(even));
    atomic(&mut kb, F32, AtomicOp::Max, facc, 2, gf, None);
    atomic(&mut kb, F32, AtomicOp::Min, facc, 3, ngf, None);
    atomic(&mut kb, F32, AtomicOp::Xchg, facc, 4, gf, None);
    atomic(&mut kb, I32, AtomicOp::Add, iacc, 0, ione, None);
    atomic(&mut kb, I32, AtomicOp::Max, iacc, 1, g, None);
    atomic(&mut kb, I32, AtomicOp::Min, iacc, 2, ng, None);
    atomic(&mut kb, I32, AtomicOp::Xor, iacc, 3, g, None);
    atomic(&mut kb, I32, AtomicOp::Or, iacc, 4, g, None);
    atomic(&mut kb, I32, AtomicOp::And, iacc, 5, g, None);
    atomic(&mut kb, I32, AtomicOp::Xchg, iacc, 6, g, None);
    // Compare-and-swap: exactly one thread finds 0.
    let gp1 = kb.bin(BinaryOp::Add, g, ione);
    let old = kb.reg(I32);
    kb.push(Stmt::AtomicCas {
        dst: old,
        param: iacc,
        index: idx[7],
        cmp: zero,
        value: gp1,
        pred: None,
        order: Default::default(),
    });
    let gp1f = kb.set(F32, Expr::Cast(gp1));
    let fold = kb.reg(F32);
    kb.push(Stmt::AtomicCas {
        dst: fold,
        param: fcas,
        index: idx[0],
        cmp: fzero,
        value: gp1f,
        pred: None,
        order: Default::default(),
    });
    let fold_i = kb.set(I32, Expr::Cast(fold));
    let at = kb.bin(BinaryOp::Mul, g, two);
    kb.store(vec![old, fold_i], Memory::Global { param: olds }, at, None);
    let k = kb.finish();
    let sk = emit(&k, &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let programs = 4usize;
    let total = programs * THREADS as usize;
    let init_f = [0.0f32, 0.0, f32::NEG_INFINITY, f32::INFINITY, -1.0, 0.0, 0.0, 0.0];
    let init_i = [0i32, i32::MIN, i32::MAX, 0, 0, -1, -1, 0];
    let mut bufs = vec![
        bytes(&init_f),
        bytes(&init_i),
        bytes(&[0.0f32; 4]),
        vec![0u8; total * 8],
    ];
    vk.run(&sk, &mut bufs, &[], [programs as u32, 1, 1]);
    let f: Vec<f32> = from_bytes(&bufs[0]);
    let i: Vec<i32> = from_bytes(&bufs[1]);
    let fc: Vec<f32> = from_bytes(&bufs[2]);
    let olds: Vec<i32> = from_bytes(&bufs[3]);
    let n = total as i32;
    assert_eq!(f[0], total as f32, "f32 atomic add");
    assert_eq!(f[1], 0.5 * (total / 2) as f32, "predicated f32 atomic add");
    assert_eq!(f[2], (n - 1) as f32, "f32 atomic max");
    assert_eq!(f[3], -(n - 1) as f32, "f32 atomic min");
    assert!(
        f[4] >= 0.0 && f[4] < n as f32 && f[4].fract() == 0.0,
        "f32 exchange: {}",
        f[4]
    );
    assert_eq!(i[0], n, "atomic add");
    assert_eq!(i[1], n - 1, "atomic max");
    assert_eq!(i[2], -(n - 1), "atomic min");
    assert_eq!(i[3], (0..n).fold(0, |a, b| a ^ b), "atomic xor");
    assert_eq!(i[4], (0..n).fold(0, |a, b| a | b), "atomic or");
    assert_eq!(i[5], 0, "atomic and");
    assert!((0..n).contains(&i[6]), "atomic exchange: {}", i[6]);
    let winners: Vec<usize> = (0..total).filter(|&t| olds[2 * t] == 0).collect();
    assert_eq!(winners.len(), 1, "one compare-and-swap succeeds");
    assert_eq!(i[7], winners[0] as i32 + 1, "the winner's value is stored");
    assert!(
        (0..total).all(|t| olds[2 * t] == 0 || olds[2 * t] == i[7]),
        "losers see the winner's value"
    );
    let fwinners = (0..total).filter(|&t| olds[2 * t + 1] == 0).count();
    assert_eq!(fwinners, 1, "one f32 compare-and-swap succeeds");
    assert!(fc[0] >= 1.0, "f32 compare-and-swap stored {}", fc[0]);
}

/// `popc`, `clz`, `brev` and `ffs` of 32-bit integers, of 8- and 16-bit ones (held in
/// 32 bits, converted from the loaded words and back), and of 64-bit ones where the
/// device has them, against Rust's counts of the same bits.
#[test]
fn bit_counts_and_reversals() {
    let Some(vk) = device_or_skip("bit_counts_and_reversals") else {
        return;
    };
    const OPS: [UnaryOp; 4] = [UnaryOp::Popc, UnaryOp::Clz, UnaryOp::Brev, UnaryOp::Ffs];
    fn want(op: UnaryOp, width: u32, v: u64) -> u64 {
        let bits = v & (u64::MAX >> (64 - width));
        match op {
            UnaryOp::Popc => bits.count_ones() as u64,
            UnaryOp::Clz => (bits.leading_zeros() - (64 - width)) as u64,
            UnaryOp::Brev => bits.reverse_bits() >> (64 - width),
            _ if bits == 0 => 0,
            _ => bits.trailing_zeros() as u64 + 1,
        }
    }
    let words: Vec<i32> = vec![
        0,
        -1,
        i32::MIN,
        1,
        0x1234_5678,
        -0x1234_5678,
        0x80,
        0x7F,
        0x8000,
        0x00F0_0F00,
    ];
    for t in [I32, U32, I8, U8, I16, U16] {
        let (k, per) = pairwise("bits", I32, I32, |kb, a, _| {
            let x = if t == I32 { a } else { kb.set(t, Expr::Cast(a)) };
            OPS.iter()
                .map(|&op| {
                    let r = kb.set(t, Expr::Unary(op, x));
                    if t == I32 {
                        r
                    } else {
                        kb.set(I32, Expr::Cast(r))
                    }
                })
                .collect()
        });
        let got: Vec<i32> = run_pairwise(&vk, &k, per, &words, &words);
        for (i, &w) in words.iter().enumerate() {
            for (j, &op) in OPS.iter().enumerate() {
                let bits = want(op, t.bits(), w as u32 as u64);
                // The result in `t`, then as the i32 the kernel stored.
                let expected = match t {
                    I8 => bits as u8 as i8 as i32,
                    I16 => bits as u16 as i16 as i32,
                    _ => bits as u32 as i32,
                };
                assert_eq!(got[i * per + j], expected, "{} of {w:#x} as {t}", op.name());
            }
        }
    }
    if !vk.target.shader_i64 {
        eprintln!("note: the device lacks i64");
        return;
    }
    let longs: Vec<i64> = vec![
        0,
        -1,
        i64::MIN,
        1,
        1 << 32,
        0x1234_5678_9ABC_DEF0,
        0xFFFF_FFFF,
        -(1 << 40),
    ];
    for t in [I64, U64] {
        let (k, per) = pairwise("bits64", t, t, |kb, a, _| {
            OPS.iter().map(|&op| kb.set(t, Expr::Unary(op, a))).collect()
        });
        let got: Vec<i64> = run_pairwise(&vk, &k, per, &longs, &longs);
        for (i, &w) in longs.iter().enumerate() {
            for (j, &op) in OPS.iter().enumerate() {
                assert_eq!(
                    got[i * per + j] as u64,
                    want(op, 64, w as u64),
                    "{} of {w:#x} as {t}",
                    op.name()
                );
            }
        }
    }
}
