//! The functions of Triton's standard library built from other ops (`flip`, `topk`,
//! `xor_sum`, `swizzle2d`, `softmax`, `ravel`, `zeros_like`, `div_rn`): the interpreter
//! against Rust references of Triton's definitions on random, ragged inputs, the shared
//! lowering (run by the SIMT simulator) against the interpreter, and their mistakes as
//! errors that name them.

use rutile_ir::interp::{self, simt, ArgValue, Element, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F32, I32};
use rutile_ir::{Kernel, KernelBuilder, ScalarType, Value};

/// Row-major offsets of every element of `shape` (rank 1 to 3).
fn dense<'b>(k: &'b KernelBuilder, shape: &[u32]) -> Value<'b> {
    match *shape {
        [n] => k.arange(0, n as i32),
        [r, c] => k.arange(0, r as i32).expand_dims(1) * c as i32 + k.arange(0, c as i32).expand_dims(0),
        [a, b, c] => {
            let i = k.arange(0, a as i32).expand_dims(1).expand_dims(2) * (b * c) as i32;
            let j = k.arange(0, b as i32).expand_dims(0).expand_dims(2) * c as i32;
            i + j + k.arange(0, c as i32).expand_dims(0).expand_dims(1)
        }
        _ => unreachable!("ranks 1 to 3"),
    }
}

/// A kernel that loads a block of `shape` from `x` (the first `n` elements, `fill` past
/// them), applies `f`, and stores the result's every element densely to `y`.
fn block_kernel(
    shape: &[u32],
    elem: ScalarType,
    fill: f64,
    f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>) -> Value<'b>,
) -> Kernel {
    Kernel::build("standard", |k| {
        let x = k.arg_ptr("x", elem);
        let n = k.arg_i32("n");
        let offs = dense(k, shape);
        let fill = if elem.is_float() {
            k.scalar(fill, elem)
        } else {
            k.scalar(fill as i64, elem)
        };
        let out = f(k, k.load_masked(x + offs, offs.lt(n), fill));
        let y = k.arg_ptr("y", out.dtype().unwrap());
        let out_offs = match out.shape().as_slice() {
            [] => k.scalar(0, I32),
            s => dense(k, s),
        };
        k.store(y + out_offs, out);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The kernel's output on input `x` with `n` live elements (`out` its zeroed buffer): from
/// the interpreter, after checking that the lowering for a few targets computes the same in
/// the SIMT simulator (the same bits, but for floats within `rel` of the larger: sums
/// there add in another order).
fn run<T: Element>(kernel: &Kernel, x: HostBuffer, n: usize, out: HostBuffer, rel: f64) -> Vec<T> {
    let args = [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Int(n as i64),
        ArgValue::Ptr { buffer: 1, offset: 0 },
    ];
    let mut want = vec![x, out];
    interp::run(kernel, [1, 1, 1], &args, &mut want).unwrap_or_else(|e| panic!("interpreter: {e}"));
    let targets = [
        Target::vulkan(32, 1, 96 * 1024),
        Target::vulkan(32, 4, 96 * 1024),
        Target::vulkan(16, 2, 96 * 1024),
        Target::nvidia(4, 48 * 1024),
    ];
    for target in targets {
        let (warp_size, num_warps) = (target.warp_size, target.num_warps);
        let lowered = lower(kernel, &target, &Specialization::none(args.len()))
            .unwrap_or_else(|e| panic!("lowering for {num_warps} warps of {warp_size}: {e}\n{kernel}"));
        let mut got = vec![want[0].clone(), HostBuffer::zeros(want[1].elem(), want[1].len())];
        simt::run_threads(&lowered, [1, 1, 1], &args, &mut got)
            .unwrap_or_else(|e| panic!("simulated for {num_warps} warps of {warp_size}: {e}"));
        let same = match want[1].elem() {
            F32 => {
                let (g, w) = (got[1].to_vec::<f32>().unwrap(), want[1].to_vec::<f32>().unwrap());
                g.iter().zip(&w).all(|(&a, &b)| {
                    let (a, b) = (a as f64, b as f64);
                    a.to_bits() == b.to_bits() || (a - b).abs() <= rel * a.abs().max(b.abs())
                })
            }
            _ => got[1].as_bytes() == want[1].as_bytes(),
        };
        assert!(
            same,
            "the lowering for {num_warps} warps of {warp_size} differs from the interpreter\n{kernel}"
        );
    }
    want[1].to_vec::<T>().unwrap()
}

/// Row-major `(outer, n, inner)` around `axis` of `dims`.
fn around(dims: &[u32], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product::<u32>() as usize;
    let inner = dims[axis + 1..].iter().product::<u32>() as usize;
    (outer, dims[axis] as usize, inner)
}

/// The shapes and axes of the tests: 1-D, both axes of 2-D, the middle axis of 3-D.
const SHAPES: [(&[u32], u32); 5] = [
    (&[64], 0),
    (&[16, 32], 0),
    (&[16, 32], 1),
    (&[4, 8, 16], 1),
    (&[4, 8, 16], 2),
];

#[test]
fn flip_reverses_the_axis() {
    let mut rng = Rng::new(31);
    for (shape, axis) in SHAPES {
        let numel = shape.iter().product::<u32>() as usize;
        // Ragged: the last elements are the fill, -7.
        let n = numel - rng.below(numel as u64 / 3) as usize;
        let x = rng.i32s(n, -1000, 1000);
        let mut tile = vec![-7; numel];
        tile[..n].copy_from_slice(&x);
        let k = block_kernel(shape, I32, -7.0, |_, v| v.flip(axis));
        let got: Vec<i32> = run(&k, HostBuffer::from_slice(&x), n, HostBuffer::zeros(I32, numel), 0.0);
        let (outer, len, inner) = around(shape, axis as usize);
        for o in 0..outer {
            for j in 0..len {
                for i in 0..inner {
                    let at = |j: usize| (o * len + j) * inner + i;
                    assert_eq!(
                        got[at(j)],
                        tile[at(len - 1 - j)],
                        "{shape:?} axis {axis}: element {}",
                        at(j)
                    );
                }
            }
        }
    }
    // Floats keep their bits (a gather moves them, computes nothing).
    let x = [
        -0.0f32,
        1.5,
        f32::NAN,
        f32::INFINITY,
        -2.25,
        0.0,
        7.0,
        f32::MIN_POSITIVE,
    ];
    let k = block_kernel(&[8], F32, 0.0, |_, v| v.flip(0));
    let got: Vec<f32> = run(&k, HostBuffer::from_slice(&x), 8, HostBuffer::zeros(F32, 8), 0.0);
    let want: Vec<u32> = x.iter().rev().map(|v| v.to_bits()).collect();
    assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
}

#[test]
fn xor_sum_folds_the_axis_by_exclusive_or() {
    let mut rng = Rng::new(32);
    for (shape, axis) in SHAPES {
        for keep_dims in [false, true] {
            let numel = shape.iter().product::<u32>() as usize;
            let n = numel - rng.below(numel as u64 / 3) as usize;
            let x: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
            let mut tile = vec![0x5a5a; numel];
            tile[..n].copy_from_slice(&x);
            let k = block_kernel(shape, I32, 0x5a5a as f64, |_, v| v.xor_sum(axis, keep_dims));
            let (outer, len, inner) = around(shape, axis as usize);
            let got: Vec<i32> = run(
                &k,
                HostBuffer::from_slice(&x),
                n,
                HostBuffer::zeros(I32, outer * inner),
                0.0,
            );
            for o in 0..outer {
                for i in 0..inner {
                    let want = (0..len).fold(0, |acc, j| acc ^ tile[(o * len + j) * inner + i]);
                    assert_eq!(got[o * inner + i], want, "{shape:?} axis {axis} keep_dims {keep_dims}");
                }
            }
        }
    }
}

/// Triton's `swizzle2d`, as its `standard.py` writes it, in Rust.
fn swizzle2d(i: i32, j: i32, size_i: i32, size_j: i32, size_g: i32) -> (i32, i32) {
    let ij = i * size_j + j;
    let size_gj = size_g * size_j;
    let off_i = ij / size_gj * size_g;
    let size_g = (size_i - off_i).min(size_g);
    let ij = ij % size_gj;
    (off_i + ij % size_g, ij / size_g)
}

/// `swizzle2d` of every `(i, j)` of a `size_i x size_j` block (`size_i`, `size_j` powers of
/// two), the new indices stored as `new_i * size_j + new_j`; `size_g` from `x[0]` (a
/// value) or a literal.
fn swizzled(size_i: u32, size_j: u32, size_g: i32, as_value: bool) -> Vec<i32> {
    let k = Kernel::build("swizzle", |k| {
        let x = k.arg_ptr("x", I32);
        let _n = k.arg_i32("n");
        let y = k.arg_ptr("y", I32);
        let i = k.arange(0, size_i as i32).expand_dims(1);
        let j = k.arange(0, size_j as i32).expand_dims(0);
        let (new_i, new_j) = if as_value {
            k.swizzle2d(i, j, size_i as i32, size_j as i32, k.load(x))
        } else {
            k.swizzle2d(i, j, size_i as i32, size_j as i32, size_g)
        };
        k.store(y + dense(k, &[size_i, size_j]), new_i * size_j as i32 + new_j);
    })
    .unwrap();
    let numel = (size_i * size_j) as usize;
    run(
        &k,
        HostBuffer::from_slice(&[size_g]),
        1,
        HostBuffer::zeros(I32, numel),
        0.0,
    )
}

#[test]
fn swizzle2d_orders_indices_as_triton() {
    // The example of Triton's documentation of `swizzle2d`: the row-major index of each
    // element, written where the element goes.
    let want = [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15];
    for as_value in [false, true] {
        let mut moved = [0; 16];
        for (old, new) in swizzled(4, 4, 2, as_value).into_iter().enumerate() {
            moved[new as usize] = old as i32;
        }
        assert_eq!(moved, want);
    }
    // Groups that do not divide the rows (the last group shorter), and one group of all.
    for (size_i, size_j, size_g) in [(16, 32, 3), (8, 4, 5), (8, 8, 8), (4, 16, 1)] {
        let got = swizzled(size_i, size_j, size_g, true);
        for i in 0..size_i as i32 {
            for j in 0..size_j as i32 {
                let (ni, nj) = swizzle2d(i, j, size_i as i32, size_j as i32, size_g);
                assert_eq!(got[(i * size_j as i32 + j) as usize], ni * size_j as i32 + nj);
            }
        }
        // A permutation of the indices.
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, (0..(size_i * size_j) as i32).collect::<Vec<_>>());
    }
}

#[test]
fn softmax_matches_the_reference_along_every_axis() {
    let mut rng = Rng::new(33);
    for (shape, axis) in SHAPES {
        for ieee_rounding in [false, true] {
            let numel = shape.iter().product::<u32>() as usize;
            let n = numel - rng.below(numel as u64 / 3) as usize;
            let x = rng.f32s(n, -6.0, 6.0);
            // Past `n`, -inf: those elements weigh nothing. A lane of fill alone gives NaN
            // (exp(-inf - -inf)), as in Triton; the reference skips those.
            let mut tile = vec![f64::NEG_INFINITY; numel];
            for (t, &v) in tile.iter_mut().zip(&x) {
                *t = v as f64;
            }
            let k = block_kernel(shape, F32, f64::NEG_INFINITY, |_, v| v.softmax(axis, ieee_rounding));
            let got: Vec<f32> = run(&k, HostBuffer::from_slice(&x), n, HostBuffer::zeros(F32, numel), 1e-5);
            let (outer, len, inner) = around(shape, axis as usize);
            for o in 0..outer {
                for i in 0..inner {
                    let at = |j: usize| (o * len + j) * inner + i;
                    let max = (0..len).map(|j| tile[at(j)]).fold(f64::NEG_INFINITY, f64::max);
                    if max == f64::NEG_INFINITY {
                        continue;
                    }
                    let sum: f64 = (0..len).map(|j| (tile[at(j)] - max).exp()).sum();
                    for j in 0..len {
                        let want = (tile[at(j)] - max).exp() / sum;
                        let g = got[at(j)] as f64;
                        assert!(
                            (g - want).abs() <= 1e-5 * want + 1e-30,
                            "{shape:?} axis {axis}: element {} is {g}, expected {want}",
                            at(j)
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn ravel_zeros_like_and_div_rn() {
    let mut rng = Rng::new(34);
    let x = rng.f32s(128, -3.0, 3.0);
    // ravel: the row-major order; zeros_like: zeros of the shape and type; div_rn: the
    // correctly rounded quotient, bit for bit.
    let k = block_kernel(&[8, 16], F32, 0.0, |k, v| {
        let flat = v.ravel();
        assert_eq!(flat.shape(), [128]);
        let zeros = k.zeros_like(v);
        assert_eq!((zeros.shape(), zeros.dtype()), (vec![8, 16], Some(F32)));
        (zeros.ravel() + flat).div_rn(flat + 3.5)
    });
    let got: Vec<f32> = run(&k, HostBuffer::from_slice(&x), 128, HostBuffer::zeros(F32, 128), 0.0);
    for (g, v) in got.iter().zip(&x) {
        assert_eq!(g.to_bits(), (v / (v + 3.5)).to_bits());
    }
    let k = Kernel::build("scalar", |k| {
        let s = k.zeros_like(k.arg_i32("n"));
        assert_eq!((s.shape(), s.dtype()), (vec![], Some(I32)));
    });
    assert!(k.is_ok());
}

/// The build error of a kernel over a 1-D f32 block `v` and an i32 block `i` of 16.
fn build_error(f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>, Value<'b>)) -> String {
    Kernel::build("bad", |k| {
        let x = k.arg_ptr("x", F32);
        let v = k.load(x + k.arange(0, 16));
        f(k, v, k.arange(0, 16));
    })
    .expect_err("the kernel is invalid")
    .to_string()
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    let cases: Vec<(String, &[&str])> = vec![
        (
            build_error(|_, v, _| {
                let _ = v.topk(3, 0);
            }),
            &["topk", "power of two", "got 3"],
        ),
        (
            build_error(|_, v, _| {
                let _ = v.topk(32, 0);
            }),
            &["topk", "at most the axis's 16 elements"],
        ),
        (
            build_error(|_, v, _| {
                let _ = v.flip(1);
            }),
            &["flip", "axis 1 is out of range"],
        ),
        (
            build_error(|k, _, _| {
                let _ = k.scalar(1, I32).flip(0);
            }),
            &["flip", "axis 0 is out of range", "i32"],
        ),
        (
            build_error(|_, v, _| {
                let _ = v.xor_sum(0, false);
            }),
            &["xor_sum", "f32", "integers"],
        ),
        (
            build_error(|_, _, i| {
                let _ = i.xor_sum(2, true);
            }),
            &["xor_sum", "axis 2"],
        ),
        (
            build_error(|_, _, i| {
                let _ = i.softmax(0, false);
            }),
            &["softmax", "i32", "floats"],
        ),
        (
            build_error(|_, v, _| {
                let _ = v.softmax(1, true);
            }),
            &["softmax", "axis 1"],
        ),
        (
            build_error(|k, v, i| {
                let _ = k.swizzle2d(i, v, 4, 4, 2);
            }),
            &["swizzle2d", "`j` must be an integer", "f32"],
        ),
        (
            build_error(|k, _, i| {
                let _ = k.swizzle2d(i, i, 4.0, 4, 2);
            }),
            &["swizzle2d", "`size_i` must be an integer"],
        ),
        (
            build_error(|k, _, _| {
                let _ = k.zeros_like(k.arg_ptr("p", F32) + 1);
            }),
            &["zeros_like", "not pointers"],
        ),
    ];
    for (message, parts) in cases {
        for part in parts {
            assert!(message.contains(part), "{message:?} does not say {part:?}");
        }
    }
}

#[test]
fn topk_keeps_the_largest_first() {
    let mut rng = Rng::new(35);
    for (shape, axis) in SHAPES {
        for k in [1u32, 4] {
            let numel = shape.iter().product::<u32>() as usize;
            let n = numel - rng.below(numel as u64 / 3) as usize;
            // Ties on purpose: values from a short range.
            let x = rng.i32s(n, -20, 20);
            let mut tile = vec![-99; numel];
            tile[..n].copy_from_slice(&x);
            let kernel = block_kernel(shape, I32, -99.0, |_, v| v.topk(k, axis));
            let (outer, len, inner) = around(shape, axis as usize);
            let out = outer * k as usize * inner;
            let got: Vec<i32> = run(&kernel, HostBuffer::from_slice(&x), n, HostBuffer::zeros(I32, out), 0.0);
            for o in 0..outer {
                for i in 0..inner {
                    let mut lane: Vec<i32> = (0..len).map(|j| tile[(o * len + j) * inner + i]).collect();
                    lane.sort_unstable_by(|a, b| b.cmp(a));
                    for j in 0..k as usize {
                        assert_eq!(
                            got[(o * k as usize + j) * inner + i],
                            lane[j],
                            "{shape:?} axis {axis} k {k}"
                        );
                    }
                }
            }
        }
    }
}

/// The directed-rounding ops take f32 and f64 alone, each with its own count of operands;
/// anything else is an error naming the op, never a panic.
#[test]
fn directed_rounding_refuses_other_types_and_counts() {
    use rutile_ir::{RoundedOp, Rounding};
    let err = Kernel::build("r", |k| {
        let x = k.arange(0, 16).to(ScalarType::F16);
        let _ = x.add_rounded(x, Rounding::Down);
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("add_rd") && err.contains("f32 or f64") && err.contains("f16"),
        "{err}"
    );
    let err = Kernel::build("r", |k| {
        let x = k.arange(0, 16);
        let _ = x.sqrt_rounded(Rounding::Up);
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("sqrt_ru") && err.contains("i32"), "{err}");
    let err = Kernel::build("r", |k| {
        let x = k.arange(0, 16).to(ScalarType::F32);
        let _ = k.rounded(RoundedOp::Fma, Rounding::TowardZero, &[x.into(), x.into()]);
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("fma_rz") && err.contains("takes 3 operands, got 2"),
        "{err}"
    );
    // Literals take the value's type, f64 blocks stay f64.
    let kernel = Kernel::build("r", |k| {
        let x = k.arange(0, 16).to(ScalarType::F64);
        let y = x
            .fma_rounded(0.1, x, Rounding::NearestEven)
            .div_rounded(3, Rounding::Up);
        assert_eq!(y.dtype(), Some(ScalarType::F64));
    });
    assert!(kernel.is_ok(), "{:?}", kernel.err());
}

/// `to_rounded`: the inexact conversions are one op (f32 to f16 among them), float to
/// integer rounds to an integral value first, exact ones are casts; integer to integer and
/// conversions from the narrow floats are refused.
#[test]
fn conversions_with_a_rounding_direction() {
    use rutile_ir::{Op, RoundedOp, Rounding};
    let kernel = Kernel::build("r", |k| {
        let i = k.arange(0, 16);
        let _ = i.to(ScalarType::I64).to_rounded(ScalarType::F64, Rounding::Down);
        let _ = i.to(ScalarType::F64).to_rounded(ScalarType::F32, Rounding::Up);
        let _ = i.to(ScalarType::F32).to_rounded(ScalarType::I32, Rounding::Down);
        let _ = i.to_rounded(ScalarType::F64, Rounding::Up);
        let _ = i.to(ScalarType::F32).to_rounded(ScalarType::F16, Rounding::TowardZero);
    })
    .unwrap();
    let converts = kernel
        .insts
        .iter()
        .filter(|(_, inst)| {
            matches!(
                inst.op,
                Op::Rounded {
                    op: RoundedOp::Convert,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        converts, 3,
        "i64 to f64, f64 to f32 and f32 to f16; f32 to i32 is floor then cast, i32 to f64 exact"
    );
    for (from, to) in [
        (ScalarType::I32, ScalarType::I64),
        (ScalarType::F16, ScalarType::F32),
        (ScalarType::I32, ScalarType::F16),
        (ScalarType::F32, ScalarType::F8E4M3),
    ] {
        let err = Kernel::build("r", |k| {
            let _ = k.arange(0, 16).to(from).to_rounded(to, Rounding::Down);
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("convert_rd") && err.contains(&format!("got {from} to {to}")),
            "{err}"
        );
    }
}
