//! The fp8 conversions on every device (the interpreter and each GPU present: lavapipe in
//! CI; CUDA by sm_89's `cvt`, or by integer instructions before sm_89 and wherever
//! `RUTILE_NATIVE_FP8=0` asks), bit for bit against the host's rounding (`rutile::F8E4M3` and
//! `F8E5M2`, whose ties the library's unit tests pin down): every f16 value (so every fp8
//! tie and its neighbours, subnormals, the values past the largest finite one, infinities
//! and NaNs) and f32 values on both sides of every tie of both formats, rounded to E4M3
//! and E5M2; and every fp8 pattern widened to f32 and to f16.

use half::f16;
use rutile::{CpuDevice, Device, DeviceBuffer, DeviceExt, Element, Kernel, LaunchConfig, ScalarType, F8E4M3, F8E5M2};
use std::sync::Arc;

const BLOCK: i32 = 256;

/// `y[i] = x[i] as to` for `i < n`.
fn cast_kernel(from: ScalarType, to: ScalarType) -> Kernel {
    Kernel::build(&format!("cast_{}_{}", from.name(), to.name()), |k| {
        let (x, y, n) = (k.arg_ptr("x", from), k.arg_ptr("y", to), k.arg_i32("n"));
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, k.scalar(0, from));
        k.store_masked(y + offs, v.to(to), mask);
    })
    .unwrap()
}

fn devices() -> Vec<Arc<dyn Device>> {
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    std::iter::once(Arc::new(CpuDevice::new()) as Arc<dyn Device>)
        .chain(gpus)
        .filter(|d| d.properties().supported_types.contains(&ScalarType::F8E4M3))
        .collect()
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::grid1((n as u32).div_ceil(BLOCK as u32))
}

/// `kernel` (`x`, `y`, `n`) on `d` for `n` elements of `x`; `y`'s elements through `f`.
fn run<T: Element, U>(d: &dyn Device, kernel: &Kernel, x: &DeviceBuffer, n: usize, f: impl Fn(T) -> U) -> Vec<U> {
    let y = d.zeros::<T>(n).unwrap();
    d.launch(kernel, &grid(n), &[x.into(), (&y).into(), (n as i32).into()])
        .unwrap_or_else(|e| panic!("{}: {e}", d.id()));
    d.download(&y).unwrap().into_iter().map(f).collect()
}

/// Whether fp8 bits `got` are `want`'s (any NaN for a NaN).
fn same(nan: impl Fn(u8) -> bool, got: u8, want: u8) -> bool {
    got == want || (nan(got) && nan(want))
}

/// f32 values on both sides of every tie of the format whose values are `values`, and the
/// ties themselves.
fn around_ties(values: &[f64]) -> Vec<f32> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let mut out = Vec::new();
    for w in sorted.windows(2) {
        let tie = ((w[0] + w[1]) / 2.0) as f32;
        out.extend([
            tie,
            f32::from_bits(tie.to_bits() - 1),
            f32::from_bits(tie.to_bits() + 1),
        ]);
    }
    out.extend([
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        -1e-30,
        500.0,
        1e5,
    ]);
    out
}

#[test]
fn fp8_conversions_bit_exact_on_every_device() {
    let halves: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let patterns: Vec<u8> = (0..=255).collect();
    let e4m3_values: Vec<f64> = patterns.iter().map(|&b| F8E4M3::from_bits(b).to_f64()).collect();
    let e5m2_values: Vec<f64> = patterns.iter().map(|&b| F8E5M2::from_bits(b).to_f64()).collect();
    let e4m3_nan = |b: u8| b & 0x7f == 0x7f;
    let e5m2_nan = |b: u8| b & 0x7f > 0x7c;
    for d in devices() {
        let d = d.as_ref();
        // f16 and f32 to each format.
        for (to, ties) in [(ScalarType::F8E4M3, &e4m3_values), (ScalarType::F8E5M2, &e5m2_values)] {
            let nan: &dyn Fn(u8) -> bool = if to == ScalarType::F8E4M3 { &e4m3_nan } else { &e5m2_nan };
            let round = |v: f64| match to {
                ScalarType::F8E4M3 => F8E4M3::from_f64(v).to_bits(),
                _ => F8E5M2::from_f64(v).to_bits(),
            };
            let singles = around_ties(ties);
            let cases: [(ScalarType, Vec<f64>); 2] = [
                (ScalarType::F16, halves.iter().map(|h| h.to_f64()).collect()),
                (ScalarType::F32, singles.iter().map(|&x| x as f64).collect()),
            ];
            for (from, values) in cases {
                let n = values.len();
                let (xh, xs);
                let x: &DeviceBuffer = match from {
                    ScalarType::F16 => {
                        xh = d.upload(&halves).unwrap();
                        xh.raw()
                    }
                    _ => {
                        xs = d.upload(&singles).unwrap();
                        xs.raw()
                    }
                };
                let kernel = cast_kernel(from, to);
                let got: Vec<u8> = match to {
                    ScalarType::F8E4M3 => run(d, &kernel, x, n, F8E4M3::to_bits),
                    _ => run(d, &kernel, x, n, F8E5M2::to_bits),
                };
                for (i, &v) in values.iter().enumerate() {
                    let want = round(v);
                    assert!(
                        same(nan, got[i], want),
                        "{}: {from} {v:e} to {to}: bits {:#04x}, want {want:#04x}",
                        d.id(),
                        got[i]
                    );
                }
            }
        }
        // Every pattern of each format to f32.
        for (from, values) in [(ScalarType::F8E4M3, &e4m3_values), (ScalarType::F8E5M2, &e5m2_values)] {
            let (x4, x5);
            let x: &DeviceBuffer = match from {
                ScalarType::F8E4M3 => {
                    x4 = d
                        .upload(&patterns.iter().map(|&b| F8E4M3::from_bits(b)).collect::<Vec<_>>())
                        .unwrap();
                    x4.raw()
                }
                _ => {
                    x5 = d
                        .upload(&patterns.iter().map(|&b| F8E5M2::from_bits(b)).collect::<Vec<_>>())
                        .unwrap();
                    x5.raw()
                }
            };
            // To f32 and to f16 (which hold every fp8 value; the `dot`s of fp8 blocks that
            // do not run on fp8 MMAs take this conversion), bit for bit: zeros keep their sign.
            let got = run(d, &cast_kernel(from, ScalarType::F32), x, 256, |v: f32| v);
            for (b, (&g, &w)) in got.iter().zip(values.iter()).enumerate() {
                assert!(
                    g.to_bits() == (w as f32).to_bits() || (g.is_nan() && w.is_nan()),
                    "{}: {from} bits {b:#04x} widened to {g}, want {w}",
                    d.id()
                );
            }
            let got = run(d, &cast_kernel(from, ScalarType::F16), x, 256, |v: f16| v);
            for (b, (&g, &w)) in got.iter().zip(values.iter()).enumerate() {
                assert!(
                    g.to_bits() == f16::from_f64(w).to_bits() || (g.is_nan() && w.is_nan()),
                    "{}: {from} bits {b:#04x} to f16 gave {g}, want {w}",
                    d.id()
                );
            }
        }
        println!("{}: fp8 conversions bit-exact", d.id());
    }
}

/// Float literals of fp8 type round as values do: infinities saturate in E4M3 (which has
/// none) and stay in E5M2, past the largest finite value saturates, ties go to even; on
/// every device, against the host's rounding.
#[test]
fn fp8_literals_round_as_values_do() {
    let literals = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e6,
        -500.0,
        1.0625,
        3.0 * 2f64.powi(-10),
        0.1,
    ];
    for d in devices() {
        let d = d.as_ref();
        for to in [ScalarType::F8E4M3, ScalarType::F8E5M2] {
            let kernel = Kernel::build(&format!("literals_{}", to.name()), |k| {
                let y = k.arg_ptr("y", to);
                for (i, &v) in literals.iter().enumerate() {
                    let offs = k.arange(0, 16) + (16 * i) as i32;
                    k.store(y + offs, k.full(&[16], v, to));
                }
            })
            .unwrap();
            let n = 16 * literals.len();
            let got: Vec<u8> = match to {
                ScalarType::F8E4M3 => {
                    let y = d.zeros::<F8E4M3>(n).unwrap();
                    d.launch(&kernel, &LaunchConfig::grid1(1), &[(&y).into()]).unwrap();
                    d.download(&y).unwrap().into_iter().map(F8E4M3::to_bits).collect()
                }
                _ => {
                    let y = d.zeros::<F8E5M2>(n).unwrap();
                    d.launch(&kernel, &LaunchConfig::grid1(1), &[(&y).into()]).unwrap();
                    d.download(&y).unwrap().into_iter().map(F8E5M2::to_bits).collect()
                }
            };
            for (i, &v) in literals.iter().enumerate() {
                let want = match to {
                    ScalarType::F8E4M3 => F8E4M3::from_f64(v).to_bits(),
                    _ => F8E5M2::from_f64(v).to_bits(),
                };
                assert_eq!(got[16 * i], want, "{}: literal {v} as {to}", d.id());
            }
        }
    }
}

/// A `dot` of E4M3 by E5M2 blocks (the two formats mix, as fp8 training's gradient
/// products do): on Hopper one fp8 warpgroup MMA of both types, elsewhere their f16
/// conversions; on every device against the exact products summed in f64, B along K and
/// along N. Hopper's fp8 MMAs add into their accumulator with fewer bits than f32 has (one
/// element came out 1.6e-4 off, relative, on an H200; as with Triton's default on sm_90
/// and cuBLASLt's fast accumulation), so each element is held to 2^-10 of the sum of its
/// products' magnitudes: a wrong layout or operand is off by the products themselves.
#[test]
fn mixed_fp8_dot_on_every_device() {
    const M: usize = 64;
    const N: usize = 64;
    const K: usize = 64;
    let mut rng = rutile_examples::rng::Rng::new(41);
    let a: Vec<F8E4M3> = rng.f32s(M * K, -2.0, 2.0).into_iter().map(F8E4M3::from_f32).collect();
    let b: Vec<F8E5M2> = rng.f32s(K * N, -2.0, 2.0).into_iter().map(F8E5M2::from_f32).collect();
    for b_along_k in [true, false] {
        // B's element (k, n) at `k * sbk + n * sbn`.
        let (sbk, sbn) = if b_along_k { (1, K) } else { (N, 1) };
        let kernel = rutile::ir::testing::mixed_fp8_dot(b_along_k);
        let mut want = vec![0.0f64; M * N];
        for i in 0..M {
            for p in 0..K {
                for j in 0..N {
                    want[i * N + j] += a[i * K + p].to_f64() * b[p * sbk + j * sbn].to_f64();
                }
            }
        }
        let mut scale = vec![0.0f64; M * N];
        for i in 0..M {
            for p in 0..K {
                for j in 0..N {
                    scale[i * N + j] += (a[i * K + p].to_f64() * b[p * sbk + j * sbn].to_f64()).abs();
                }
            }
        }
        for d in devices() {
            let d = d.as_ref();
            let (ab, bb, cb) = (
                d.upload(&a).unwrap(),
                d.upload(&b).unwrap(),
                d.zeros::<f32>(M * N).unwrap(),
            );
            d.launch(
                &kernel,
                &LaunchConfig::grid1(1).num_warps(4),
                &[(&ab).into(), (&bb).into(), (&cb).into()],
            )
            .unwrap_or_else(|e| panic!("{}: {e}", d.id()));
            let got = d.download(&cb).unwrap();
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= scale[i] / 1024.0,
                    "{}: B along K {b_along_k}: element {i}: {g} against {w}",
                    d.id()
                );
            }
        }
    }
}

/// The matmul seed on E4M3 operands with a long K (4000, ragged against the 64-wide K
/// blocks), all products positive so that the running sum grows with K, B column-major
/// (the tutorial's `b.T`), against the f64 product. Hopper's fp8 MMAs add into an
/// accumulator narrower than f32, so their error grows with the sum over the whole K; with
/// `max_num_imprecise_acc = 64` each K block's sum starts from zero and is added in f32,
/// so an element is held to 2^-12 of its value, as an f32 accumulation easily is. (Each
/// device's error with and without the limit is printed: on the other devices both add
/// in f32.)
#[test]
fn promoted_fp8_sums_hold_a_long_k_on_every_device() {
    use rutile::seeds::MatmulMeta;
    let (m, n, k) = (100usize, 120usize, 4000usize);
    let mut rng = rutile_examples::rng::Rng::new(44);
    let a: Vec<F8E4M3> = rng.f32s(m * k, 0.5, 1.5).into_iter().map(F8E4M3::from_f32).collect();
    // B column-major: element (p, j) at j * k + p.
    let b: Vec<F8E4M3> = rng.f32s(k * n, 0.5, 1.5).into_iter().map(F8E4M3::from_f32).collect();
    let mut want = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64()).sum();
        }
    }
    let ints = [m, n, k, k, 1, 1, k, n, 1].map(|v| rutile::Arg::I32(v as i32));
    for d in devices() {
        let d = d.as_ref();
        let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
        let mut errors = Vec::new();
        for limit in [None, Some(64)] {
            let meta = MatmulMeta {
                input: ScalarType::F8E4M3,
                output: ScalarType::F32,
                max_num_imprecise_acc: limit,
                ..MatmulMeta::fp16(64, 64, 64)
            };
            let got = run_matmul_seed(
                d,
                &meta,
                [(&ab).into(), (&bb).into()],
                (m, n),
                ints,
                &format!("limit {limit:?}"),
            );
            let error = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| (g as f64 - w).abs() / w)
                .fold(0.0, f64::max);
            errors.push(error);
        }
        println!(
            "{}: largest relative error {:.2e} adding the whole K in the MMAs, {:.2e} promoted every 64",
            d.id(),
            errors[0],
            errors[1]
        );
        assert!(
            errors[1] <= 2f64.powi(-12),
            "{}: promoted every 64, an element {:.2e} off, relative",
            d.id(),
            errors[1]
        );
    }
}

/// The matmul seed of `meta` on `d` (4 warps, 3 stages) with operands `ab` and the
/// integer arguments `ints`, into an `m x n` f32 C: C (`what` names the case in a failure).
fn run_matmul_seed(
    d: &dyn Device,
    meta: &rutile::seeds::MatmulMeta,
    ab: [rutile::Arg<'_>; 2],
    (m, n): (usize, usize),
    ints: [rutile::Arg<'_>; 9],
    what: &str,
) -> Vec<f32> {
    use rutile::seeds::{matmul, matmul_grid};
    let cb = d.zeros::<f32>(m * n).unwrap();
    let mut args = ab.to_vec();
    args.push((&cb).into());
    args.extend(ints);
    let launch = LaunchConfig::grid1(matmul_grid(meta, m as u32, n as u32))
        .num_warps(4)
        .num_stages(3);
    d.launch(&matmul(meta).unwrap(), &launch, &args)
        .unwrap_or_else(|e| panic!("{}: {what}: {e}", d.id()));
    d.download(&cb).unwrap()
}

/// Triton's other fp8 formats: `float8e4b15` (`F8E4M3B15`), `float8e4b8` (`F8E4M3Fnuz`)
/// and `float8e5b16` (`F8E5M2Fnuz`).
const OTHER_FORMATS: [ScalarType; 3] = [ScalarType::F8E4M3B15, ScalarType::F8E4M3Fnuz, ScalarType::F8E5M2Fnuz];

/// `kernel` (`x`, `y`, `n`) on `d` for the `n` elements of `x` (of `from`, as bytes), `y`
/// of `to` read back as bytes.
fn run_bytes(d: &dyn Device, kernel: &Kernel, from: ScalarType, x: &[u8], to: ScalarType) -> Vec<u8> {
    let n = x.len() / from.size_bytes();
    let xb = d.alloc(from, n).unwrap();
    d.write(&xb, x).unwrap();
    let y = d.alloc(to, n).unwrap();
    d.launch(kernel, &grid(n), &[(&xb).into(), (&y).into(), (n as i32).into()])
        .unwrap_or_else(|e| panic!("{}: {}: {e}", d.id(), kernel.name));
    d.read(&y).unwrap()
}

/// `y[i] = op(x[i])` for `i < n`, on fp8 type `t`.
fn unary_kernel(t: ScalarType, negate: bool) -> Kernel {
    Kernel::build(&format!("sign_{}_{negate}", t.name()), |k| {
        let (x, y, n) = (k.arg_ptr("x", t), k.arg_ptr("y", t), k.arg_i32("n"));
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, k.scalar(0, t));
        k.store_masked(y + offs, if negate { -v } else { v.abs() }, mask);
    })
    .unwrap()
}

/// The three other formats on every device, bit for bit against `rutile::ir::fp8`'s
/// rounding (whose limits the library's unit tests pin down): every f16 value and f32
/// values on both sides of every tie rounded to each (saturating; NaN to the `fnuz` NaN
/// `0x80`, to +0 in `float8e4b15`, which has none; no negative zero in the `fnuz` ones),
/// every pattern widened to f32 and f16, and negated and made absolute (where the sign bit
/// of an `fnuz` zero would make it NaN, and of its NaN a zero).
#[test]
fn other_fp8_formats_bit_exact_on_every_device() {
    let halves: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    let patterns: Vec<u8> = (0..=255).collect();
    for d in devices() {
        let d = d.as_ref();
        for t in OTHER_FORMATS {
            let format = rutile::ir::fp8::format_of(t).unwrap();
            let values: Vec<f64> = patterns.iter().map(|&b| format.decode(b)).collect();
            let singles = around_ties(&values);
            let single_bytes: Vec<u8> = singles.iter().flat_map(|x| x.to_le_bytes()).collect();
            let from_halves = (0..=u16::MAX).map(|h| f16::from_bits(h).to_f64());
            for (from, x, inputs) in [
                (ScalarType::F16, &halves, from_halves.collect::<Vec<_>>()),
                (
                    ScalarType::F32,
                    &single_bytes,
                    singles.iter().map(|&x| x as f64).collect(),
                ),
            ] {
                let got = run_bytes(d, &cast_kernel(from, t), from, x, t);
                for (i, &v) in inputs.iter().enumerate() {
                    let want = format.encode(v);
                    assert_eq!(
                        got[i],
                        want,
                        "{}: {from} {v:e} to {t}: bits {:#04x}, want {want:#04x}",
                        d.id(),
                        got[i]
                    );
                }
            }
            let got = run_bytes(d, &cast_kernel(t, ScalarType::F32), t, &patterns, ScalarType::F32);
            for (b, (g, &w)) in got.chunks_exact(4).zip(&values).enumerate() {
                let g = f32::from_le_bytes(g.try_into().unwrap());
                assert!(
                    g.to_bits() == (w as f32).to_bits() || (g.is_nan() && w.is_nan()),
                    "{}: {t} bits {b:#04x} widened to {g}, want {w}",
                    d.id()
                );
            }
            let got = run_bytes(d, &cast_kernel(t, ScalarType::F16), t, &patterns, ScalarType::F16);
            for (b, (g, &w)) in got.chunks_exact(2).zip(&values).enumerate() {
                let g = f16::from_le_bytes([g[0], g[1]]);
                assert!(
                    g.to_bits() == f16::from_f64(w).to_bits() || (g.is_nan() && w.is_nan()),
                    "{}: {t} bits {b:#04x} to f16 gave {g}, want {w}",
                    d.id()
                );
            }
            for negate in [true, false] {
                let got = run_bytes(d, &unary_kernel(t, negate), t, &patterns, t);
                for (b, &v) in values.iter().enumerate() {
                    let want = format.encode(if negate { -v } else { v.abs() });
                    assert_eq!(
                        got[b],
                        want,
                        "{}: {t} bits {b:#04x}, negate {negate}: {:#04x}",
                        d.id(),
                        got[b]
                    );
                }
            }
            // Literals round as values do.
            let literals = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0, 1e6, -1e-30, 0.1, 1.0];
            let kernel = Kernel::build(&format!("literals_{}", t.name()), |k| {
                let y = k.arg_ptr("y", t);
                for (i, &v) in literals.iter().enumerate() {
                    let offs = k.arange(0, 16) + (16 * i) as i32;
                    k.store(y + offs, k.full(&[16], v, t));
                }
            })
            .unwrap();
            let y = d.alloc(t, 16 * literals.len()).unwrap();
            d.launch(&kernel, &LaunchConfig::grid1(1), &[(&y).into()]).unwrap();
            let got = d.read(&y).unwrap();
            for (i, &v) in literals.iter().enumerate() {
                assert_eq!(got[16 * i], format.encode(v), "{}: literal {v} as {t}", d.id());
            }
        }
        println!("{}: float8e4b15, e4m3fnuz and e5m2fnuz conversions bit-exact", d.id());
    }
}

/// The matmul seed on each of the three other formats (multiplied as their exact f16
/// values: no MMA takes them), ragged sizes against 64-wide blocks, against the products
/// summed in f64: each element within 2^-12 of the sum of its products' magnitudes.
#[test]
fn matmul_of_other_fp8_formats_on_every_device() {
    use rutile::seeds::MatmulMeta;
    let (m, n, k) = (100usize, 120usize, 200usize);
    let mut rng = rutile_examples::rng::Rng::new(45);
    for t in OTHER_FORMATS {
        let format = rutile::ir::fp8::format_of(t).unwrap();
        // Inside `float8e4b15`'s range (±1.875), both signs.
        let a: Vec<u8> = rng
            .f32s(m * k, -1.8, 1.8)
            .into_iter()
            .map(|x| format.encode(x as f64))
            .collect();
        let b: Vec<u8> = rng
            .f32s(k * n, -1.8, 1.8)
            .into_iter()
            .map(|x| format.encode(x as f64))
            .collect();
        let (mut want, mut scale) = (vec![0.0f64; m * n], vec![0.0f64; m * n]);
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let product = format.decode(a[i * k + p]) * format.decode(b[p * n + j]);
                    want[i * n + j] += product;
                    scale[i * n + j] += product.abs();
                }
            }
        }
        let meta = MatmulMeta {
            input: t,
            output: ScalarType::F32,
            ..MatmulMeta::fp16(64, 64, 64)
        };
        let ints = [m, n, k, k, 1, n, 1, n, 1].map(|v| rutile::Arg::I32(v as i32));
        for d in devices() {
            let d = d.as_ref();
            let (ab, bb) = (d.alloc(t, m * k).unwrap(), d.alloc(t, k * n).unwrap());
            d.write(&ab, &a).unwrap();
            d.write(&bb, &b).unwrap();
            let got = run_matmul_seed(d, &meta, [(&ab).into(), (&bb).into()], (m, n), ints, &t.to_string());
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= scale[i] * 2f64.powi(-12),
                    "{}: {t}: element {i}: {g} against {w}",
                    d.id()
                );
            }
            println!("{}: matmul of {t} matches", d.id());
        }
    }
}
