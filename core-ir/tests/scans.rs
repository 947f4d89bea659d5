//! Scans (`cumsum`, `cumprod`, `associative_scan`, reversed too), reductions with a
//! combine, `gather`, `sort` and `histogram`: the interpreter against Rust references of
//! the semantics in `ir.rs`, and the shared lowering, run by the SIMT simulator, against
//! the interpreter on random inputs (ragged, masked tiles; 1-D and both axes of 2-D; one to
//! sixteen warps, warps of 8 to 64, with and without shuffles).

use half::f16;
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F16, F32, I32, I64, U8};
use rutile_ir::{Kernel, KernelBuilder, Value};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn target(warp_size: u32, num_warps: u32, shuffles: bool) -> Target {
    Target {
        shuffles,
        native_float_minmax: warp_size == 32 && shuffles,
        ..Target::vulkan(warp_size, num_warps, 96 * 1024)
    }
}

fn targets() -> Vec<Target> {
    vec![
        target(32, 1, true),
        target(32, 4, true),
        target(32, 8, true),
        target(8, 2, true),
        target(32, 2, false),
        target(64, 2, true),
        target(16, 16, true),
    ]
}

/// A tile of `rows x cols` (1-D of `cols` when `rows` is 0).
#[derive(Clone, Copy, Debug)]
struct Tile {
    rows: u32,
    cols: u32,
}

impl Tile {
    fn dims(self) -> Vec<u32> {
        if self.rows == 0 {
            vec![self.cols]
        } else {
            vec![self.rows, self.cols]
        }
    }
    fn numel(self) -> usize {
        (self.rows.max(1) * self.cols) as usize
    }
    fn axes(self) -> Vec<u32> {
        if self.rows == 0 {
            vec![0]
        } else {
            vec![0, 1]
        }
    }
}

const TILES: [Tile; 7] = [
    Tile { rows: 0, cols: 16 },
    Tile { rows: 0, cols: 1024 },
    Tile { rows: 0, cols: 2 },
    Tile { rows: 16, cols: 16 },
    Tile { rows: 4, cols: 64 },
    Tile { rows: 32, cols: 4 },
    Tile { rows: 1, cols: 8 },
];

/// Row-major offsets of a whole tile with row stride `stride`, and the mask of the
/// `n_rows x n_cols` corner (the matrix in memory is ragged).
fn tile_offsets<'b>(
    k: &'b KernelBuilder,
    t: Tile,
    stride: Value<'b>,
    n_rows: Value<'b>,
    n_cols: Value<'b>,
) -> (Value<'b>, Value<'b>) {
    let c = k.arange(0, t.cols as i32);
    if t.rows == 0 {
        return (c, c.lt(n_cols));
    }
    let r = k.arange(0, t.rows as i32).expand_dims(1);
    let c = c.expand_dims(0);
    (r * stride + c, r.lt(n_rows) & c.lt(n_cols))
}

/// Row-major offsets of every element of `shape`.
fn dense_offsets<'b>(k: &'b KernelBuilder, shape: &[u32]) -> Value<'b> {
    match shape {
        [] => k.scalar(0, I32),
        [n] => k.arange(0, *n as i32),
        [r, c] => k.arange(0, *r as i32).expand_dims(1) * (*c as i32) + k.arange(0, *c as i32).expand_dims(0),
        _ => unreachable!(),
    }
}

/// A kernel that loads `x` (a ragged `n_rows x n_cols` matrix, `fill` elsewhere in the
/// tile) and, for the tests of `gather`, `idx` alike; computes `f`; and stores every
/// element of the result densely to `y`.
fn tile_kernel(
    name: &str,
    t: Tile,
    elem: ScalarType,
    index: Option<(ScalarType, Tile)>,
    fill: f64,
    f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>, Option<Value<'b>>) -> Value<'b>,
) -> (Kernel, Vec<u32>, ScalarType) {
    let mut out_shape = Vec::new();
    let mut out_elem = elem;
    let kernel = Kernel::build(name, |k| {
        let x = k.arg_ptr("x", elem);
        let idx_ptr = index.map(|(s, _)| k.arg_ptr("idx", s));
        let y_elem_probe = k.arg_i32("n_rows");
        let n_cols = k.arg_i32("n_cols");
        let (offs, mask) = tile_offsets(k, t, n_cols, y_elem_probe, n_cols);
        let fill_value = if elem.is_float() {
            k.scalar(fill, elem)
        } else {
            k.scalar(fill as i64, elem)
        };
        let v = k.load_masked(x + offs, mask, fill_value);
        let i = match (idx_ptr, index) {
            (Some(p), Some((s, it))) => {
                // Indices are dense: their tile has no ragged part.
                Some(k.load(p + dense_offsets(k, &it.dims()).to(I32)).to(s))
            }
            _ => None,
        };
        let out = f(k, v, i);
        out_shape = out.shape();
        out_elem = out.dtype().unwrap();
        let y = k.arg_ptr("y", out_elem);
        k.store(y + dense_offsets(k, &out_shape), out);
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    (kernel, out_shape, out_elem)
}

/// Random inputs of `elem`: small integers (so that sums and products stay exact where
/// the test needs it) or floats in `[lo, hi)`.
fn random(rng: &mut Rng, elem: ScalarType, n: usize, lo: f64, hi: f64) -> HostBuffer {
    match elem {
        F32 => HostBuffer::from_slice(&rng.f32s(n, lo as f32, hi as f32)),
        F16 => HostBuffer::from_slice(&rng.f16s(n, lo as f32, hi as f32)),
        I32 => HostBuffer::from_slice(&rng.i32s(n, lo as i32, hi as i32)),
        I64 => HostBuffer::from_slice(
            &rng.i32s(n, lo as i32, hi as i32)
                .iter()
                .map(|&v| v as i64)
                .collect::<Vec<_>>(),
        ),
        U8 => HostBuffer::from_slice(
            &rng.i32s(n, lo as i32, hi as i32)
                .iter()
                .map(|&v| v as u8)
                .collect::<Vec<_>>(),
        ),
        _ => unreachable!("{elem}"),
    }
}

/// One launch: the kernel, its buffers (`y` last) and tolerances for float results.
struct Case {
    name: String,
    kernel: Kernel,
    args: Vec<ArgValue>,
    buffers: Vec<HostBuffer>,
    rel: f64,
}

fn case(
    name: String,
    (kernel, out_shape, out_elem): (Kernel, Vec<u32>, ScalarType),
    mut inputs: Vec<HostBuffer>,
    n_rows: u32,
    n_cols: u32,
    rel: f64,
) -> Case {
    let out_len = out_shape.iter().product::<u32>().max(1) as usize;
    let mut args: Vec<ArgValue> = (0..inputs.len()).map(ptr).collect();
    args.push(ArgValue::Int(n_rows as i64));
    args.push(ArgValue::Int(n_cols as i64));
    args.push(ptr(inputs.len()));
    inputs.push(HostBuffer::zeros(out_elem, out_len));
    Case {
        name,
        kernel,
        args,
        buffers: inputs,
        rel,
    }
}

fn as_f64s(b: &HostBuffer) -> Vec<f64> {
    match b.elem() {
        F32 => b.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        F16 => b.to_vec::<f16>().unwrap().into_iter().map(f64::from).collect(),
        I32 => b.to_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        I64 => b.to_vec::<i64>().unwrap().into_iter().map(|v| v as f64).collect(),
        U8 => b.to_vec::<u8>().unwrap().into_iter().map(f64::from).collect(),
        e => unreachable!("{e}"),
    }
}

/// Runs `c` in the interpreter and, lowered for every target, in the SIMT simulator;
/// returns the failures.
fn run_case(c: &Case) -> Vec<String> {
    let mut want = c.buffers.clone();
    if let Err(e) = interp::run(&c.kernel, [1, 1, 1], &c.args, &mut want) {
        return vec![format!("{}: the interpreter fails: {e}", c.name)];
    }
    let mut failures = Vec::new();
    for t in targets() {
        let at = format!(
            "{} [warp {} x {} warps, shuffles {}]",
            c.name, t.warp_size, t.num_warps, t.shuffles
        );
        let tk = match lower(&c.kernel, &t, &Specialization::none(c.args.len())) {
            Ok(tk) => tk,
            Err(e) => {
                failures.push(format!("{at}: lowering fails: {e}"));
                continue;
            }
        };
        let mut got = c.buffers.clone();
        if let Err(e) = simt::run_threads(&tk, [1, 1, 1], &c.args, &mut got) {
            failures.push(format!("{at}: {e}"));
            continue;
        }
        let (g, w) = (as_f64s(got.last().unwrap()), as_f64s(want.last().unwrap()));
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let close = a == b || (a - b).abs() <= c.rel * a.abs().max(b.abs()).max(1.0);
            if !close {
                failures.push(format!("{at}: element {i}: got {a}, expected {b}"));
                break;
            }
        }
    }
    failures
}

fn check_all(cases: &[Case]) {
    let failures: Vec<String> = cases.iter().flat_map(run_case).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The ragged corner of a tile: every dimension cut short (but at least 1).
fn ragged(t: Tile, rng: &mut Rng) -> (u32, u32) {
    let cut = |n: u32, rng: &mut Rng| (n - rng.below(n as u64 / 2 + 1) as u32).max(1);
    (cut(t.rows.max(1), rng), cut(t.cols, rng))
}

// ---- the interpreter against Rust references ----

/// Row-major `(outer, n, inner)` around `axis` of `dims`.
fn around(dims: &[u32], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product::<u32>() as usize;
    let inner = dims[axis + 1..].iter().product::<u32>() as usize;
    (outer, dims[axis] as usize, inner)
}

/// Interprets `c` and returns its input tile (with the fill in place) and its output.
fn interpret(c: &Case, t: Tile, fill: i64) -> (Vec<i64>, Vec<i64>) {
    let mut bufs = c.buffers.clone();
    interp::run(&c.kernel, [1, 1, 1], &c.args, &mut bufs).unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let x = bufs[0].to_vec::<i32>().unwrap();
    let (n_rows, n_cols) = match (&c.args[c.args.len() - 3], &c.args[c.args.len() - 2]) {
        (ArgValue::Int(r), ArgValue::Int(cc)) => (*r as usize, *cc as usize),
        _ => unreachable!(),
    };
    let rows = t.rows.max(1) as usize;
    let mut tile = vec![fill; t.numel()];
    for r in 0..rows.min(n_rows) {
        for col in 0..(t.cols as usize).min(n_cols) {
            tile[r * t.cols as usize + col] = x[r * n_cols + col] as i64;
        }
    }
    let out = bufs
        .last()
        .unwrap()
        .to_vec::<i32>()
        .unwrap()
        .into_iter()
        .map(i64::from)
        .collect();
    (tile, out)
}

#[test]
fn interpreter_scans_follow_the_definition() {
    let mut rng = Rng::new(11);
    for t in TILES {
        for axis in t.axes() {
            for reverse in [false, true] {
                let (n_rows, n_cols) = ragged(t, &mut rng);
                let x = random(&mut rng, I32, (n_rows * n_cols) as usize, -9.0, 9.0);
                // Composition of affine maps `h -> m h + c`: associative, not commutative
                // (wrapping i32 is a ring), a tuple of two.
                let k = tile_kernel("scan", t, I32, None, 3.0, |k, v, _| {
                    k.associative_scan_n(&[v, v + 1], axis, reverse, |_, a, b| {
                        vec![a[0] * b[0], a[1] * b[0] + b[1]]
                    })[1]
                });
                let c = case(
                    format!("{t:?} axis {axis} reverse {reverse}"),
                    k,
                    vec![x],
                    n_rows,
                    n_cols,
                    0.0,
                );
                let (tile, out) = interpret(&c, t, 3);
                let (outer, n, inner) = around(&t.dims(), axis as usize);
                for o in 0..outer {
                    for i in 0..inner {
                        let at = |j: usize| o * n * inner + j * inner + i;
                        let order: Vec<usize> = if reverse {
                            (0..n).rev().collect()
                        } else {
                            (0..n).collect()
                        };
                        let mut acc: Option<(i32, i32)> = None;
                        for &j in &order {
                            let (m, c1) = (tile[at(j)] as i32, tile[at(j)] as i32 + 1);
                            let next = match acc {
                                None => (m, c1),
                                Some((am, ac)) => (am.wrapping_mul(m), ac.wrapping_mul(m).wrapping_add(c1)),
                            };
                            acc = Some(next);
                            assert_eq!(out[at(j)], next.1 as i64, "{}: element {}", c.name, at(j));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn interpreter_reduce_sort_gather_histogram_follow_the_definitions() {
    let mut rng = Rng::new(12);
    for t in TILES {
        for axis in t.axes() {
            let (n_rows, n_cols) = ragged(t, &mut rng);
            let x = random(&mut rng, I32, (n_rows * n_cols) as usize, -50.0, 50.0);
            let (outer, n, inner) = around(&t.dims(), axis as usize);
            // reduce with a non-commutative combine: the fold in order.
            let k = tile_kernel("reduce", t, I32, None, -7.0, |_, v, _| {
                v.reduce(axis, false, |_, a, b| a * 3 - b)
            });
            let c = case(
                format!("reduce {t:?} axis {axis}"),
                k,
                vec![x.clone()],
                n_rows,
                n_cols,
                0.0,
            );
            let (tile, out) = interpret(&c, t, -7);
            for o in 0..outer {
                for i in 0..inner {
                    let at = |j: usize| o * n * inner + j * inner + i;
                    let want = (1..n).fold(tile[at(0)] as i32, |a, j| {
                        a.wrapping_mul(3).wrapping_sub(tile[at(j)] as i32)
                    });
                    assert_eq!(out[o * inner + i], want as i64, "{}", c.name);
                }
            }
            // sort, both ways: sorted lanes that are permutations of the input's.
            for descending in [false, true] {
                let k = tile_kernel("sort", t, I32, None, 100.0, |_, v, _| v.sort(axis, descending));
                let c = case(
                    format!("sort {t:?} axis {axis}"),
                    k,
                    vec![x.clone()],
                    n_rows,
                    n_cols,
                    0.0,
                );
                let (tile, out) = interpret(&c, t, 100);
                for o in 0..outer {
                    for i in 0..inner {
                        let lane = |v: &[i64]| (0..n).map(|j| v[o * n * inner + j * inner + i]).collect::<Vec<_>>();
                        let mut want = lane(&tile);
                        want.sort();
                        if descending {
                            want.reverse();
                        }
                        assert_eq!(lane(&out), want, "{} descending {descending}", c.name);
                    }
                }
            }
            // gather along the axis with random in-range indices.
            let m = n.max(2) / 2;
            let mut it_dims = t.dims();
            it_dims[axis as usize] = m as u32;
            let it = if t.rows == 0 {
                Tile {
                    rows: 0,
                    cols: it_dims[0],
                }
            } else {
                Tile {
                    rows: it_dims[0],
                    cols: it_dims[1],
                }
            };
            let idx = random(&mut rng, I32, it.numel(), 0.0, n as f64);
            let k = tile_kernel("gather", t, I32, Some((I32, it)), 5.0, |_, v, i| {
                v.gather(i.unwrap(), axis)
            });
            let c = case(
                format!("gather {t:?} axis {axis}"),
                k,
                vec![x.clone(), idx.clone()],
                n_rows,
                n_cols,
                0.0,
            );
            let (tile, out) = interpret(&c, t, 5);
            let idx = idx.to_vec::<i32>().unwrap();
            for o in 0..outer {
                for j in 0..m {
                    for i in 0..inner {
                        let at = o * m * inner + j * inner + i;
                        let want = tile[o * n * inner + idx[at] as usize * inner + i];
                        assert_eq!(out[at], want, "{}", c.name);
                    }
                }
            }
        }
        if t.rows == 0 {
            let (_, n_cols) = ragged(t, &mut rng);
            let x = random(&mut rng, I32, n_cols as usize, -3.0, 20.0);
            let k = tile_kernel("histogram", t, I32, None, -1.0, |_, v, _| v.histogram(16));
            let c = case(format!("histogram {t:?}"), k, vec![x], 1, n_cols, 0.0);
            let (tile, out) = interpret(&c, t, -1);
            let want: Vec<i64> = (0..16)
                .map(|b| tile.iter().filter(|&&v| v == b).count() as i64)
                .collect();
            assert_eq!(out, want, "{}", c.name);
        }
    }
}

#[test]
fn interpreter_gather_out_of_range_is_an_error() {
    let t = Tile { rows: 0, cols: 8 };
    let k = tile_kernel("gather", t, I32, Some((I32, t)), 0.0, |_, v, i| v.gather(i.unwrap(), 0));
    let idx = HostBuffer::from_slice(&[0i32, 1, 2, 8, 3, 4, 5, 6]);
    let c = case(
        "gather".into(),
        k,
        vec![HostBuffer::from_slice(&[1i32; 8]), idx],
        1,
        8,
        0.0,
    );
    let mut bufs = c.buffers.clone();
    let e = interp::run(&c.kernel, [1, 1, 1], &c.args, &mut bufs)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gather") && e.contains("index 8") && e.contains("[0, 8)"),
        "{e}"
    );
}

// ---- the lowering, in the SIMT simulator, against the interpreter ----

/// Integer-valued f16 inputs, whose sums stay exact whatever the grouping.
fn small_f16s(rng: &mut Rng, n: usize) -> HostBuffer {
    HostBuffer::from_slice(
        &rng.i32s(n, -4, 5)
            .iter()
            .map(|&v| f16::from_f32(v as f32))
            .collect::<Vec<_>>(),
    )
}

#[test]
fn lowered_scans_match_the_interpreter() {
    let mut rng = Rng::new(21);
    let mut cases = Vec::new();
    for t in TILES {
        for axis in t.axes() {
            for reverse in [false, true] {
                let (n_rows, n_cols) = ragged(t, &mut rng);
                let n = (n_rows * n_cols) as usize;
                let tag = format!("{t:?} axis {axis} reverse {reverse}");
                let xi = random(&mut rng, I32, n, -100.0, 100.0);
                let xf = random(&mut rng, F32, n, -2.0, 2.0);
                let xp = random(&mut rng, F32, n, 0.9, 1.1);
                let xh = small_f16s(&mut rng, n);
                let k = tile_kernel("cumsum_i32", t, I32, None, 7.0, |_, v, _| v.cumsum(axis, reverse));
                cases.push(case(
                    format!("cumsum i32 {tag}"),
                    k,
                    vec![xi.clone()],
                    n_rows,
                    n_cols,
                    0.0,
                ));
                let k = tile_kernel("cumsum_f32", t, F32, None, 0.5, |_, v, _| v.cumsum(axis, reverse));
                // Sums of up to 1024 terms grouped differently: within a few ulps of the
                // partial sums' magnitudes (which reach ~30), not of the (cancelling) result.
                cases.push(case(
                    format!("cumsum f32 {tag}"),
                    k,
                    vec![xf.clone()],
                    n_rows,
                    n_cols,
                    2e-4,
                ));
                let k = tile_kernel("cumsum_f16", t, F16, None, 1.0, |_, v, _| v.cumsum(axis, reverse));
                cases.push(case(format!("cumsum f16 {tag}"), k, vec![xh], n_rows, n_cols, 0.0));
                let k = tile_kernel("cumprod_f32", t, F32, None, 1.0, |_, v, _| v.cumprod(axis, reverse));
                cases.push(case(format!("cumprod f32 {tag}"), k, vec![xp], n_rows, n_cols, 1e-5));
                let k = tile_kernel("affine", t, I32, None, 3.0, |k, v, _| {
                    k.associative_scan_n(&[v, v + 1], axis, reverse, |_, a, b| {
                        vec![a[0] * b[0], a[1] * b[0] + b[1]]
                    })[1]
                });
                cases.push(case(
                    format!("affine i32 {tag}"),
                    k,
                    vec![xi.clone()],
                    n_rows,
                    n_cols,
                    0.0,
                ));
                // The combine may give an argument back as it is.
                let k = tile_kernel("first", t, F32, None, -1.0, |_, v, _| {
                    v.associative_scan(axis, reverse, |_, a, _| a)
                });
                cases.push(case(
                    format!("first f32 {tag}"),
                    k,
                    vec![xf.clone()],
                    n_rows,
                    n_cols,
                    0.0,
                ));
                let k = tile_kernel("running_max", t, I32, None, -1000.0, |_, v, _| {
                    v.associative_scan(axis, reverse, |k, a, b| k.maximum(a, b))
                });
                cases.push(case(format!("running max i32 {tag}"), k, vec![xi], n_rows, n_cols, 0.0));
            }
        }
    }
    check_all(&cases);
}

#[test]
fn lowered_combine_reductions_match_the_interpreter() {
    let mut rng = Rng::new(22);
    let mut cases = Vec::new();
    for t in TILES {
        for axis in t.axes() {
            let (n_rows, n_cols) = ragged(t, &mut rng);
            let n = (n_rows * n_cols) as usize;
            let tag = format!("{t:?} axis {axis}");
            let xi = random(&mut rng, I32, n, -100.0, 100.0);
            let xf = random(&mut rng, F32, n, -2.0, 2.0);
            let xh = small_f16s(&mut rng, n);
            let k = tile_kernel("sum_i32", t, I32, None, 7.0, |_, v, _| {
                v.reduce(axis, false, |_, a, b| a + b)
            });
            cases.push(case(format!("sum i32 {tag}"), k, vec![xi.clone()], n_rows, n_cols, 0.0));
            let k = tile_kernel("sum_f32", t, F32, None, 0.5, |_, v, _| {
                v.reduce(axis, true, |_, a, b| a + b)
            });
            cases.push(case(
                format!("sum f32 keep_dims {tag}"),
                k,
                vec![xf.clone()],
                n_rows,
                n_cols,
                1e-5,
            ));
            let k = tile_kernel("max_f16", t, F16, None, -8.0, |_, v, _| {
                v.reduce(axis, false, |k, a, b| k.maximum(a, b))
            });
            cases.push(case(format!("max f16 {tag}"), k, vec![xh], n_rows, n_cols, 0.0));
            // argmax as a tuple reduction: the larger value, the smaller index on ties.
            let k = tile_kernel("argmax", t, I32, None, 100.0, |k, v, _| {
                let dims = v.shape();
                let idx = if dims.len() == 1 {
                    k.arange(0, dims[0] as i32)
                } else if axis == 0 {
                    k.arange(0, dims[0] as i32).expand_dims(1).broadcast_to(&dims)
                } else {
                    k.arange(0, dims[1] as i32).expand_dims(0).broadcast_to(&dims)
                };
                k.reduce_n(&[v / 10, idx], axis, false, |k, a, b| {
                    let take_b = b[0].gt(a[0]) | (b[0].eq(a[0]) & b[1].lt(a[1]));
                    vec![k.where_(take_b, b[0], a[0]), k.where_(take_b, b[1], a[1])]
                })[1]
            });
            cases.push(case(format!("argmax i32 {tag}"), k, vec![xi], n_rows, n_cols, 0.0));
        }
    }
    check_all(&cases);
}

#[test]
fn lowered_sorts_match_the_interpreter() {
    let mut rng = Rng::new(23);
    let mut cases = Vec::new();
    for t in TILES {
        for axis in t.axes() {
            for descending in [false, true] {
                let (n_rows, n_cols) = ragged(t, &mut rng);
                let n = (n_rows * n_cols) as usize;
                let tag = format!("{t:?} axis {axis} descending {descending}");
                let xi = random(&mut rng, I32, n, -20.0, 20.0);
                let xf = random(&mut rng, F32, n, -2.0, 2.0);
                let xh = random(&mut rng, F16, n, -2.0, 2.0);
                let k = tile_kernel("sort_i32", t, I32, None, 0.0, |_, v, _| v.sort(axis, descending));
                cases.push(case(format!("sort i32 {tag}"), k, vec![xi], n_rows, n_cols, 0.0));
                let k = tile_kernel("sort_f32", t, F32, None, 9.0, |_, v, _| v.sort(axis, descending));
                cases.push(case(format!("sort f32 {tag}"), k, vec![xf], n_rows, n_cols, 0.0));
                let k = tile_kernel("sort_f16", t, F16, None, -9.0, |_, v, _| v.sort(axis, descending));
                cases.push(case(format!("sort f16 {tag}"), k, vec![xh], n_rows, n_cols, 0.0));
            }
        }
    }
    check_all(&cases);
}

#[test]
fn lowered_gathers_and_histograms_match_the_interpreter() {
    let mut rng = Rng::new(24);
    let mut cases = Vec::new();
    for t in TILES {
        for axis in t.axes() {
            let (n_rows, n_cols) = ragged(t, &mut rng);
            let n = (n_rows * n_cols) as usize;
            let len = t.dims()[axis as usize];
            // Index tiles as long as the source along the axis, and half as long.
            for m in [len, (len / 2).max(1)] {
                let mut dims = t.dims();
                dims[axis as usize] = m;
                let it = if t.rows == 0 {
                    Tile { rows: 0, cols: dims[0] }
                } else {
                    Tile {
                        rows: dims[0],
                        cols: dims[1],
                    }
                };
                let tag = format!("{t:?} axis {axis} index {dims:?}");
                let xf = random(&mut rng, F32, n, -2.0, 2.0);
                let xi = random(&mut rng, I32, n, -50.0, 50.0);
                let idx = random(&mut rng, I32, it.numel(), 0.0, len as f64);
                let idx64 = random(&mut rng, I64, it.numel(), 0.0, len as f64);
                let k = tile_kernel("gather_f32", t, F32, Some((I32, it)), 0.25, |_, v, i| {
                    v.gather(i.unwrap(), axis)
                });
                cases.push(case(format!("gather f32 {tag}"), k, vec![xf, idx], n_rows, n_cols, 0.0));
                let k = tile_kernel("gather_i32_by_i64", t, I32, Some((I64, it)), 3.0, |_, v, i| {
                    v.gather(i.unwrap(), axis)
                });
                cases.push(case(
                    format!("gather i32 by i64 {tag}"),
                    k,
                    vec![xi, idx64],
                    n_rows,
                    n_cols,
                    0.0,
                ));
            }
        }
        if t.rows == 0 {
            for bins in [1, 8, 64] {
                let (_, n_cols) = ragged(t, &mut rng);
                let xi = random(&mut rng, I32, n_cols as usize, -4.0, bins as f64 + 4.0);
                let k = tile_kernel("histogram_i32", t, I32, None, -1.0, |_, v, _| v.histogram(bins));
                cases.push(case(
                    format!("histogram i32 {t:?} {bins} bins"),
                    k,
                    vec![xi],
                    1,
                    n_cols,
                    0.0,
                ));
            }
            let (_, n_cols) = ragged(t, &mut rng);
            let xb = random(&mut rng, U8, n_cols as usize, 0.0, 256.0);
            let k = tile_kernel("histogram_u8", t, U8, None, 255.0, |_, v, _| v.histogram(512));
            cases.push(case(
                format!("histogram u8 {t:?} 512 bins"),
                k,
                vec![xb],
                1,
                n_cols,
                0.0,
            ));
        }
    }
    check_all(&cases);
}

// ---- bad input: clear errors, no panics ----

/// Builds a kernel over a 1-D f32 block `v` and an i32 block `i` of 16 elements, and
/// returns the build error's text.
fn build_error(f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>, Value<'b>)) -> String {
    Kernel::build("bad", |k| {
        let x = k.arg_ptr("x", F32);
        let v = k.load(x + k.arange(0, 16));
        let i = k.arange(0, 16);
        f(k, v, i);
    })
    .expect_err("the kernel is invalid")
    .to_string()
}

#[test]
fn bad_scans_sorts_gathers_and_histograms_are_clear_errors() {
    let cases: Vec<(String, &str)> = vec![
        (
            build_error(|_, v, _| {
                let _ = v.cumsum(1, false);
            }),
            "axis 1 is out of range",
        ),
        (
            build_error(|k, _, _| {
                let _ = k.scalar(1.0, F32).cumsum(0, false);
            }),
            "must be a block",
        ),
        (
            build_error(|_, v, _| {
                let _ = v.lt(0.0).sort(0, false);
            }),
            "cannot be booleans",
        ),
        (
            build_error(|k, v, i| {
                let _ = k.associative_scan_n(&[v, i.expand_dims(0)], 0, false, |_, a, _| a.to_vec());
            }),
            "operand 1 has shape",
        ),
        (
            build_error(|k, v, _| {
                let x = k.arg_ptr("y", F32);
                let _ = v.associative_scan(0, false, move |k, a, _| a + k.load(x));
            }),
            "a combine may hold only element-wise ops on scalars, not `load`",
        ),
        (
            build_error(|_, v, i| {
                let _ = v.reduce(0, false, move |_, a, _| a + i.to(F32));
            }),
            "a combine works on scalars",
        ),
        (
            build_error(|k, v, _| {
                let _ = k.reduce_n(&[v], 0, false, |_, a, b| vec![a[0], b[0]]);
            }),
            "the body gives 2 values, expected 1",
        ),
        (
            build_error(|_, v, _| {
                let _ = v.reduce(0, false, |_, a, _| a.to(I32));
            }),
            "changes type from f32 to i32",
        ),
        (
            build_error(|_, v, i| {
                let _ = v.gather(i.to(F32), 0);
            }),
            "the index must be a block of integers",
        ),
        (
            build_error(|_, v, i| {
                let _ = v.gather(i.expand_dims(0), 0);
            }),
            "the index must have the source's rank",
        ),
        (
            build_error(|_, v, _| {
                let _ = v.histogram(16);
            }),
            "needs a block of integers",
        ),
        (
            build_error(|_, _, i| {
                let _ = i.histogram(12);
            }),
            "power of two",
        ),
        (
            build_error(|_, _, i| {
                let _ = i.expand_dims(0).histogram(16);
            }),
            "needs a 1-D block",
        ),
    ];
    for (got, want) in cases {
        assert!(got.contains(want), "expected an error containing `{want}`, got: {got}");
    }
}

#[test]
fn printed_kernels_show_the_combine_region() {
    let (k, _, _) = tile_kernel("print", Tile { rows: 0, cols: 16 }, I32, None, 0.0, |k, v, _| {
        let s = v.associative_scan(0, true, |k, a, b| k.maximum(a, b));
        let r = v.reduce(0, true, |_, a, b| a + b);
        let h = (s + r).histogram(16);
        h.sort(0, true).gather(k.arange(0, 16), 0)
    });
    let text = k.to_string();
    for want in [
        "scan %",
        "axis=0, reverse combine(",
        "maximum",
        "reduce %",
        "histogram %",
        "num_bins=16",
        "sort %",
        "descending",
        "gather %",
    ] {
        assert!(text.contains(want), "`{want}` missing from\n{text}");
    }
    rutile_ir::verify::verify(&k).unwrap();
}

#[test]
fn a_scan_too_large_for_shared_memory_is_a_lowering_error() {
    let (k, _, _) = tile_kernel("big", Tile { rows: 0, cols: 8192 }, F32, None, 0.0, |_, v, _| {
        v.cumsum(0, false)
    });
    let t = Target {
        max_shared_bytes: 48 * 1024,
        ..target(32, 4, true)
    };
    let e = lower(&k, &t, &Specialization::none(k.params.len()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("shared memory") || e.contains("shared"), "{e}");
}

#[test]
fn lowered_3d_scans_sorts_gathers_and_reductions_match_the_interpreter() {
    let dims = [4u32, 8, 16];
    let n: u32 = dims.iter().product();
    let mut rng = Rng::new(25);
    let mut cases = Vec::new();
    for axis in 0..3u32 {
        // `one` is the `n_rows` argument, 1 in these cases.
        let kernel = |name: &str, f: &dyn for<'b> Fn(Value<'b>, Value<'b>) -> Value<'b>| {
            Kernel::build(name, |k| {
                let x = k.arg_ptr("x", I32);
                let (one, _) = (k.arg_i32("n_rows"), k.arg_i32("n_cols"));
                let offs = k.arange(0, n as i32).reshape(&dims);
                let y = f(k.load(x + offs), one);
                let out = k.arg_ptr("y", I32);
                let out_offs = k
                    .arange(0, y.shape().iter().product::<u32>() as i32)
                    .reshape(&y.shape());
                k.store(out + out_offs, y);
            })
            .unwrap()
        };
        let out = |shape: &[u32]| (shape.to_vec(), I32);
        let x = random(&mut rng, I32, n as usize, -50.0, 50.0);
        let mut reduced = dims.to_vec();
        reduced.remove(axis as usize);
        let built: Vec<(&str, Kernel, Vec<u32>)> = vec![
            (
                "cumsum",
                kernel("cumsum3", &|v, _| v.cumsum(axis, axis == 1)),
                dims.to_vec(),
            ),
            ("sort", kernel("sort3", &|v, _| v.sort(axis, axis == 2)), dims.to_vec()),
            (
                "gather",
                kernel("gather3", &|v, _| {
                    v.gather((v & 0x7fff) % dims[axis as usize] as i32, axis)
                }),
                dims.to_vec(),
            ),
            // The combine may use scalars from outside it: here a 0 computed from a
            // parameter (1), which no pass can fold away.
            (
                "reduce",
                kernel("reduce3", &|v, one| {
                    let zero = one - 1;
                    v.reduce(axis, false, move |k, a, b| k.minimum(a, b) + zero)
                }),
                reduced,
            ),
        ];
        for (what, k, shape) in built {
            let (s, e) = out(&shape);
            cases.push(case(
                format!("{what} 4x8x16 axis {axis}"),
                (k, s, e),
                vec![x.clone()],
                1,
                1,
                0.0,
            ));
        }
    }
    check_all(&cases);
}

#[test]
fn lowered_unsigned_sorts_and_wide_scans_match_the_interpreter() {
    let mut rng = Rng::new(26);
    let mut cases = Vec::new();
    for t in [Tile { rows: 0, cols: 128 }, Tile { rows: 8, cols: 16 }] {
        for axis in t.axes() {
            let (n_rows, n_cols) = ragged(t, &mut rng);
            let n = (n_rows * n_cols) as usize;
            // u32 values above 2^31 sort above small ones only if compared unsigned.
            let xu: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
            let xu = HostBuffer::from_slice(&xu);
            let k = tile_kernel("sort_u32", t, ScalarType::U32, None, 0.0, |_, v, _| {
                v.sort(axis, false).to(I64)
            });
            cases.push(case(
                format!("sort u32 {t:?} axis {axis}"),
                k,
                vec![xu],
                n_rows,
                n_cols,
                0.0,
            ));
            let xl = random(&mut rng, I64, n, -1e9, 1e9);
            let k = tile_kernel("cumsum_i64", t, I64, None, 0.0, |_, v, _| v.cumsum(axis, true));
            cases.push(case(
                format!("cumsum i64 {t:?} axis {axis}"),
                k,
                vec![xl],
                n_rows,
                n_cols,
                0.0,
            ));
        }
    }
    check_all(&cases);
}

/// Random (often wrong) shapes, types, axes and bin counts for every new op: building
/// gives a kernel or an error, and a kernel verifies, interprets and lowers (or reports an
/// error), never panicking.
#[test]
fn wild_scans_sorts_gathers_and_histograms_never_panic() {
    let mut rng = Rng::new(27);
    let types = [
        ScalarType::Bool,
        ScalarType::I8,
        U8,
        I32,
        I64,
        ScalarType::U64,
        F16,
        ScalarType::BF16,
        F32,
        ScalarType::F64,
    ];
    let mut lowered = 0;
    for round in 0..400 {
        let rank = rng.below(4) as usize;
        let dims: Vec<u32> = (0..rank).map(|_| 1 << rng.below(6)).collect();
        let elem = types[rng.below(types.len() as u64) as usize];
        let index_elem = types[rng.below(types.len() as u64) as usize];
        let axis = rng.below(4) as u32;
        let bins = [0, 3, 16, 1 << 21][rng.below(4) as usize];
        let which = round % 7;
        let built = Kernel::build("wild", |k| {
            let x = k.arg_ptr("x", elem);
            let numel: u32 = dims.iter().product();
            let offs = if rank == 0 {
                k.scalar(0, I32)
            } else {
                k.arange(0, numel as i32).reshape(&dims)
            };
            let v = k.load(x + offs);
            let i = k.load(k.arg_ptr("i", index_elem) + offs);
            let y = match which {
                0 => v.cumsum(axis, rng.below(2) == 0),
                1 => v.cumprod(axis, true),
                2 => v.reduce(axis, rng.below(2) == 0, |k, a, b| k.maximum(a, b)),
                3 => k.associative_scan_n(&[v, i], axis, false, |_, a, b| vec![b[0], a[1]])[0],
                4 => v.sort(axis, false),
                5 => v.gather(i, axis),
                _ => v.histogram(bins),
            };
            let out = k.arg_ptr("y", y.dtype().unwrap_or(I32));
            let shape = y.shape();
            let n: u32 = shape.iter().product();
            let dense = if shape.is_empty() {
                k.scalar(0, I32)
            } else {
                k.arange(0, n as i32).reshape(&shape)
            };
            k.store(out + dense, y);
        });
        let Ok(kernel) = built else { continue };
        lowered += 1;
        rutile_ir::verify::verify(&kernel).unwrap();
        let _ = lower(
            &kernel,
            &target(32, 4, true),
            &Specialization::none(kernel.params.len()),
        );
    }
    assert!(lowered > 40, "only {lowered} of the random kernels were valid");
}

/// Kernels edited after building: the verifier finds a combine region that is missing,
/// or that holds an op other than an element-wise one on scalars.
#[test]
fn the_verifier_checks_combine_regions() {
    let (k, _, _) = tile_kernel("edited", Tile { rows: 0, cols: 16 }, I32, None, 0.0, |_, v, _| {
        v.associative_scan(0, false, |_, a, b| a + b)
    });
    let scan = k
        .insts
        .iter()
        .find(|(_, i)| matches!(i.op, rutile_ir::Op::Scan { .. }))
        .map(|(h, _)| h)
        .unwrap();
    let mut without = k.clone();
    without.insts[scan].regions.clear();
    let e = rutile_ir::verify::verify(&without).unwrap_err().to_string();
    assert!(e.contains("expects 1 regions, has 0"), "{e}");

    // The `arange` of the body, listed in the combine as well.
    let mut with_block = k.clone();
    let arange = k.body.insts[0..]
        .iter()
        .copied()
        .find(|&i| matches!(k.insts[i].op, rutile_ir::Op::Arange { .. }))
        .unwrap();
    let region = &mut with_block.insts[scan].regions[0];
    region.insts.insert(0, arange);
    let e = rutile_ir::verify::verify(&with_block).unwrap_err().to_string();
    assert!(
        e.contains("a combine may hold only element-wise ops on scalars, not `arange`"),
        "{e}"
    );
}

/// A gather of factors spread along an axis (`dot_scaled`'s scales), multiplied by a block
/// loaded in another layout (contiguous along the other axis): the spread is gathered in
/// the product's other operand's layout, its index recomputed there, so that no
/// full-block exchange follows; the results are the interpreter's on every target.
#[test]
fn gathers_take_their_users_layout() {
    let (rows, cols, group) = (32u32, 64u32, 16u32);
    let kernel = Kernel::build("spread", |k| {
        let (x, f, y) = (k.arg_ptr("x", F32), k.arg_ptr("f", F32), k.arg_ptr("y", F32));
        let r = k.arange(0, rows as i32).expand_dims(1);
        let c = k.arange(0, cols as i32).expand_dims(0);
        // Column-major: contiguous along the rows, where the default layout runs along
        // the columns.
        let v = k.load(x + (r + c * rows as i32));
        let factors = k.load(f + (r * (cols / group) as i32 + k.arange(0, (cols / group) as i32).expand_dims(0)));
        let index = (k.arange(0, cols as i32) / group as i32)
            .expand_dims(0)
            .broadcast_to(&[rows, cols]);
        let spread = factors.gather(index, 1);
        k.store(y + (r * cols as i32 + c), v * spread);
    })
    .unwrap();
    let mut rng = Rng::new(61);
    let n = (rows * cols) as usize;
    let buffers = vec![
        random(&mut rng, F32, n, -2.0, 2.0),
        random(&mut rng, F32, n / group as usize, -2.0, 2.0),
        HostBuffer::zeros(F32, n),
    ];
    let args: Vec<ArgValue> = (0..3).map(ptr).collect();
    let mut want = buffers.clone();
    interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
    for t in targets() {
        let at = format!("warp {} x {} warps", t.warp_size, t.num_warps);
        let tk = lower(&kernel, &t, &Specialization::none(args.len())).unwrap();
        // The gather's two barriers (the factors written, then read) and the two of the
        // store's exchange of the product into its row-major layout; exchanging the
        // spread into the loaded block's layout would add two more.
        let barriers = count_barriers(&tk);
        assert!(barriers <= 4, "{at}: {barriers} barriers");
        let mut got = buffers.clone();
        simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(as_f64s(&got[2]), as_f64s(&want[2]), "{at}");
    }
}

/// Index arithmetic on coordinates taken once per thread (`lower/affine_index.rs`): a
/// coordinate plus a constant and its quotient by a power of two are set once where the
/// thread's base and the offset give them (`arange(0, K) / 16`, `dot_scaled`'s groups), and
/// computed as written where the offset may carry past a group (an offset of 3, a start of
/// 5, a group of 2 smaller than a thread's run, 32 with an offset of 1). A gather by such
/// an index, its block in another layout, gives the interpreter's results on every target.
#[test]
fn quotients_of_coordinates_match_the_interpreter() {
    let (rows, cols) = (32u32, 64u32);
    // (group, the index's offset added to the `arange`, or as its start)
    for (group, added, start) in [(16u32, 0i32, 0i32), (16, 3, 0), (2, 0, 0), (16, 0, 5), (32, 1, 0)] {
        let kernel = Kernel::build("spread_by_rows", |k| {
            let (x, f, y) = (k.arg_ptr("x", U8), k.arg_ptr("f", F32), k.arg_ptr("y", F32));
            let r = k.arange(0, rows as i32).expand_dims(1);
            let c = k.arange(0, cols as i32).expand_dims(0);
            let groups = (2 * cols / group) as i32;
            // Bytes, 16 a thread in a row (as `dot_scaled`'s fp4 and fp8 operands come).
            let v = k.load(x + (r * cols as i32 + c)).to(F32);
            let factors = k.load(f + (r * groups + k.arange(0, groups).expand_dims(0)));
            let index = ((k.arange(start, start + cols as i32) + added) / group as i32)
                .expand_dims(0)
                .broadcast_to(&[rows, cols]);
            let spread = factors.gather(index, 1);
            k.store(y + (r * cols as i32 + c), v * spread);
        })
        .unwrap();
        let at_case = format!("group {group}, offset {added}, start {start}");
        let mut rng = Rng::new(62);
        let n = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&(0..n).map(|_| (rng.next_u64() & 0xff) as u8).collect::<Vec<u8>>()),
            random(&mut rng, F32, (rows * 2 * cols / group) as usize, -2.0, 2.0),
            HostBuffer::zeros(F32, n),
        ];
        let args: Vec<ArgValue> = (0..3).map(ptr).collect();
        let mut want = buffers.clone();
        interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
        for t in targets() {
            let at = format!("{at_case}, warp {} x {} warps", t.warp_size, t.num_warps);
            let tk = lower(&kernel, &t, &Specialization::none(args.len())).unwrap();
            let mut got = buffers.clone();
            simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(as_f64s(&got[2]), as_f64s(&want[2]), "{at}");
        }
    }
}

fn count_barriers(tk: &rutile_ir::thread::ThreadKernel) -> usize {
    let mut n = 0;
    tk.walk(&mut |s| n += usize::from(matches!(s, rutile_ir::thread::Stmt::Barrier)));
    n
}
