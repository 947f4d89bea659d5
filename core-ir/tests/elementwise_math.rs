//! `tanh`, `pow`, `umulhi` and `clamp`: the interpreter against references computed here
//! on random inputs (never zeros, plus the special values) at a ragged length, the
//! lowering through the SIMT simulator against the interpreter, and the builder's errors.

use half::f16;
use rutile_ir::interp::{self, simt, ArgValue, Element, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, *};
use rutile_ir::{Kernel, KernelBuilder, Value};

/// Lanes per program; the inputs' length is ragged against it.
const BLOCK: i32 = 64;
const N: usize = 1000;

fn elementwise_kernel(
    ins: &[ScalarType],
    out: ScalarType,
    f: impl for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
) -> Kernel {
    Kernel::build("math", |k| {
        let ptrs: Vec<Value> = ins
            .iter()
            .enumerate()
            .map(|(i, &t)| k.arg_ptr(&format!("in{i}"), t))
            .collect();
        let o = k.arg_ptr("out", out);
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let xs: Vec<Value> = ptrs.iter().map(|&p| k.load_masked(p + offs, mask, 0)).collect();
        k.store_masked(o + offs, f(k, &xs), mask);
    })
    .unwrap()
}

/// Runs the kernel on the interpreter and, lowered for two targets, on the SIMT simulator;
/// the simulator must give the interpreter's bits. Returns the interpreter's output.
fn run(kernel: &Kernel, inputs: &[HostBuffer], out: ScalarType) -> HostBuffer {
    let n = inputs[0].len();
    let mut args: Vec<ArgValue> = (0..=inputs.len())
        .map(|b| ArgValue::Ptr { buffer: b, offset: 0 })
        .collect();
    args.push(ArgValue::Int(n as i64));
    let grid = [n.div_ceil(BLOCK as usize) as u32, 1, 1];
    let mut want: Vec<HostBuffer> = inputs.to_vec();
    want.push(HostBuffer::zeros(out, n));
    interp::run(kernel, grid, &args, &mut want).unwrap();
    for target in [Target::nvidia(2, 48 * 1024), Target::nvidia(1, 48 * 1024)] {
        let tk = lower(kernel, &target, &Specialization::none(args.len())).unwrap();
        let mut got: Vec<HostBuffer> = inputs.to_vec();
        got.push(HostBuffer::zeros(out, n));
        simt::run_threads(&tk, grid, &args, &mut got).unwrap();
        assert_eq!(got.last().unwrap().as_bytes(), want.last().unwrap().as_bytes());
    }
    want.pop().unwrap()
}

fn unary<T: Element>(x: &[T], out: ScalarType, f: for<'b> fn(Value<'b>) -> Value<'b>) -> HostBuffer {
    let b = HostBuffer::from_slice(x);
    run(&elementwise_kernel(&[b.elem()], out, |_, v| f(v[0])), &[b], out)
}

fn binary<T: Element>(
    x: &[T],
    y: &[T],
    out: ScalarType,
    f: for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
) -> HostBuffer {
    let (a, b) = (HostBuffer::from_slice(x), HostBuffer::from_slice(y));
    run(
        &elementwise_kernel(&[a.elem(), b.elem()], out, |k, v| f(k, v[0], v[1])),
        &[a, b],
        out,
    )
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

const SPECIALS: [f64; 7] = [0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];

#[test]
fn tanh_is_the_f64_function_rounded_once() {
    let mut rng = Rng::new(0x7a);
    let mut x: Vec<f32> = rng.f32s(N - SPECIALS.len(), -12.0, 12.0);
    x.extend(SPECIALS.iter().map(|&v| v as f32));
    let got: Vec<f32> = unary(&x, F32, |v| v.tanh()).to_vec().unwrap();
    for (a, g) in x.iter().zip(&got) {
        assert!(same(*g as f64, (*a as f64).tanh() as f32 as f64), "tanh({a}) = {g}");
    }
    let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    let got: Vec<f16> = unary(&h, F16, |v| v.tanh()).to_vec().unwrap();
    for (a, g) in h.iter().zip(&got) {
        assert!(
            same(g.to_f64(), f16::from_f64(a.to_f64().tanh()).to_f64()),
            "tanh({a}) = {g}"
        );
    }
}

#[test]
fn pow_follows_c_including_negative_bases_and_special_values() {
    let mut rng = Rng::new(0x90);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..N {
        let base = if i % 5 == 0 {
            SPECIALS[i / 5 % SPECIALS.len()]
        } else {
            rng.uniform(-4.0, 4.0)
        };
        // Integer exponents half of the time, so that negative bases give numbers.
        let e = match i % 7 {
            0 => SPECIALS[i / 7 % SPECIALS.len()],
            1..=3 => rng.uniform(-5.0, 5.0).round(),
            _ => rng.uniform(-5.0, 5.0),
        };
        x.push(base as f32);
        y.push(e as f32);
    }
    let got: Vec<f32> = binary(&x, &y, F32, |k, a, b| k.pow(a, b)).to_vec().unwrap();
    let mut negative_odd = 0;
    for i in 0..N {
        let want = (x[i] as f64).powf(y[i] as f64) as f32;
        assert!(
            same(got[i] as f64, want as f64),
            "pow({}, {}) = {}, expected {want}",
            x[i],
            y[i],
            got[i]
        );
        negative_odd += (x[i] < 0.0 && got[i] < 0.0) as usize;
    }
    assert!(negative_odd > 20, "negative bases with odd exponents: {negative_odd}");
    // C's special cases, written out.
    let cases: [(f32, f32, f32); 8] = [
        (-2.0, 3.0, -8.0),
        (-2.0, 0.5, f32::NAN),
        (f32::NAN, 0.0, 1.0),
        (1.0, f32::NAN, 1.0),
        (-1.0, f32::INFINITY, 1.0),
        (-0.0, -3.0, f32::NEG_INFINITY),
        (0.0, -0.5, f32::INFINITY),
        (f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY),
    ];
    let (a, b): (Vec<f32>, Vec<f32>) = cases.iter().map(|c| (c.0, c.1)).unzip();
    let got: Vec<f32> = binary(&a, &b, F32, |k, a, b| k.pow(a, b)).to_vec().unwrap();
    for (c, g) in cases.iter().zip(&got) {
        assert!(
            same(*g as f64, c.2 as f64),
            "pow({}, {}) = {g}, expected {}",
            c.0,
            c.1,
            c.2
        );
    }
}

#[test]
fn umulhi_is_the_high_half_of_the_unsigned_product() {
    let mut rng = Rng::new(0x4b);
    let a: Vec<u32> = (0..N).map(|_| rng.next_u64() as u32 | 1).collect();
    let b: Vec<u32> = (0..N).map(|_| rng.next_u64() as u32 | 1).collect();
    let got: Vec<u32> = binary(&a, &b, U32, |k, x, y| k.umulhi(x, y)).to_vec().unwrap();
    for i in 0..N {
        assert_eq!(got[i], ((a[i] as u64 * b[i] as u64) >> 32) as u32);
    }
    // Signed operands are read as their unsigned bits.
    let sa: Vec<i32> = a.iter().map(|&v| v as i32).collect();
    let sb: Vec<i32> = b.iter().map(|&v| v as i32).collect();
    let got: Vec<i32> = binary(&sa, &sb, I32, |_, x, y| x.umulhi(y)).to_vec().unwrap();
    for i in 0..N {
        assert_eq!(got[i] as u32, ((a[i] as u64 * b[i] as u64) >> 32) as u32);
    }
    let a: Vec<u64> = (0..N).map(|_| rng.next_u64() | 1).collect();
    let b: Vec<u64> = (0..N).map(|_| rng.next_u64() | 1).collect();
    let got: Vec<u64> = binary(&a, &b, U64, |k, x, y| k.umulhi(x, y)).to_vec().unwrap();
    for i in 0..N {
        assert_eq!(got[i], ((a[i] as u128 * b[i] as u128) >> 64) as u64);
    }
    let sa: Vec<i64> = a.iter().map(|&v| v as i64).collect();
    let sb: Vec<i64> = b.iter().map(|&v| v as i64).collect();
    let got: Vec<i64> = binary(&sa, &sb, I64, |k, x, y| k.umulhi(x, y)).to_vec().unwrap();
    for i in 0..N {
        assert_eq!(got[i] as u64, ((a[i] as u128 * b[i] as u128) >> 64) as u64);
    }
}

#[test]
fn clamp_limits_integers_and_floats_and_propagates_nan() {
    let mut rng = Rng::new(0xc1);
    let x = rng.i32s(N, -1000, 1000);
    let lo = rng.i32s(N, -600, 0);
    let hi = rng.i32s(N, 1, 600);
    let (bx, bl, bh) = (
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&lo),
        HostBuffer::from_slice(&hi),
    );
    let k = elementwise_kernel(&[I32, I32, I32], I32, |k, v| k.clamp(v[0], v[1], v[2]));
    let got: Vec<i32> = run(&k, &[bx, bl, bh], I32).to_vec().unwrap();
    for i in 0..N {
        assert_eq!(got[i], x[i].max(lo[i]).min(hi[i]));
    }
    let mut x = rng.f32s(N, -2.0, 2.0);
    x[3] = f32::NAN;
    x[4] = f32::INFINITY;
    x[5] = f32::NEG_INFINITY;
    let got: Vec<f32> = unary(&x, F32, |v| v.clamp(-0.5f32, 0.75f32)).to_vec().unwrap();
    for i in 0..N {
        let want = if x[i].is_nan() {
            f32::NAN
        } else {
            x[i].clamp(-0.5, 0.75)
        };
        assert!(same(got[i] as f64, want as f64), "clamp({}) = {}", x[i], got[i]);
    }
}

#[test]
fn the_builder_rejects_what_the_ops_do_not_define() {
    let err = |f: for<'b> fn(&'b KernelBuilder, Value<'b>) -> Value<'b>, t: ScalarType| {
        Kernel::build("bad", |k| {
            let p = k.arg_ptr("p", t);
            let v = k.load(p + k.arange(0, 16));
            k.store(p + k.arange(0, 16), f(k, v));
        })
        .unwrap_err()
        .to_string()
    };
    let e = err(|k, v| k.umulhi(v, v), I16);
    assert!(
        e.contains("umulhi") && e.contains("32- or 64-bit integer") && e.contains("i16"),
        "{e}"
    );
    let e = err(|k, v| k.umulhi(v, v), F32);
    assert!(e.contains("umulhi") && e.contains("integer"), "{e}");
    let e = err(|k, v| k.pow(v, v), I32);
    assert!(e.contains("pow") && e.contains("float"), "{e}");
    let e = err(|_, v| v.tanh(), I32);
    assert!(e.contains("tanh") && e.contains("float"), "{e}");
}

/// `exp2` on the FMA units (`Target::exp2_on_fma`): through the SIMT simulator, within 3e-7
/// of `2^x` wherever that is a normal f32, 0 below the normal range (as a flush-to-zero
/// `ex2`), inf above it, NaN for NaN; on random inputs over the whole range that matters
/// (-140 to 140), the clamp's ends, integers and half-integers near them, and the specials.
/// With 1 of 8 and two registers a thread, one of each thread's stays on `exp2`.
#[test]
fn exp2_on_the_fma_units_matches_the_function() {
    let mut rng = Rng::new(0xe2);
    let edges = [
        -126.5f32, -126.0, -125.9, -126.49, -126.51, -127.0, -127.5, -149.0, -1.0e6, 127.0, 127.5, 127.99, 128.0,
        128.01, 0.5, -0.5, 1.0e-10, -1.0e-10, 3.0, -3.0,
    ];
    let mut x: Vec<f32> = rng.f32s(N - SPECIALS.len() - edges.len() - 100, -140.0, 140.0);
    x.extend(rng.f32s(100, -1.0, 1.0));
    x.extend(edges);
    x.extend(SPECIALS.iter().map(|&v| v as f32));
    let b = HostBuffer::from_slice(&x);
    let kernel = elementwise_kernel(&[F32], F32, |_, v| v[0].exp2());
    let mut args: Vec<ArgValue> = (0..2).map(|b| ArgValue::Ptr { buffer: b, offset: 0 }).collect();
    args.push(ArgValue::Int(N as i64));
    let grid = [N.div_ceil(BLOCK as usize) as u32, 1, 1];
    for (share, warps) in [(8, 2), (8, 1), (1, 1)] {
        let target = Target {
            exp2_on_fma: share,
            ..Target::nvidia(warps, 48 * 1024)
        };
        let tk = lower(&kernel, &target, &Specialization::none(args.len())).unwrap();
        let text = tk.to_string();
        let left = text.matches("= exp2 ").count();
        assert_eq!(left > 0, share < 8, "share {share}: {left} exp2 left in\n{text}");
        assert!(text.contains("= shl "), "share {share}: no polynomial in\n{text}");
        let mut bufs = vec![b.clone(), HostBuffer::zeros(F32, N)];
        simt::run_threads(&tk, grid, &args, &mut bufs).unwrap();
        let got: Vec<f32> = bufs[1].to_vec().unwrap();
        for (&a, &g) in x.iter().zip(&got) {
            let want = (a as f64).exp2();
            let ok = if a.is_nan() {
                g.is_nan()
            } else if want < f32::MIN_POSITIVE as f64 {
                g == 0.0 || (g as f64 - want).abs() <= 1e-45
            } else if want > f32::MAX as f64 {
                g == f32::INFINITY
            } else {
                ((g as f64 - want) / want).abs() <= 3e-7
            };
            assert!(ok, "share {share}: exp2({a}) = {g}, expected {want}");
        }
    }
}
