//! Cases of the ops along an axis with data from the whole block: `cumsum`, `cumprod` and
//! `associative_scan` (reversed too), `reduce` with a combine, `sort`, `gather` and
//! `histogram`, and the standard library's `flip`, `topk`, `xor_sum`, `softmax` and
//! `swizzle2d`, on f32, i32 and f16, 1-D (ragged: a masked load of [`SCAN_LIVE`] of
//! [`SCAN_BLOCK`] elements) and both axes of 2-D blocks.

use super::*;

/// The 1-D block, and how many of its elements are loaded (the rest are the fill).
const SCAN_BLOCK: u32 = 256;
const SCAN_LIVE: i32 = 200;

/// The element types of these rows.
const SCAN_DTYPES: [ScalarType; 3] = [I32, F16, F32];

/// A block shape of the rows: 1-D ragged, or 2-D along one axis.
#[derive(Clone, Copy)]
struct Shape2 {
    label: &'static str,
    rows: u32,
    cols: u32,
    /// `None`: 1-D.
    axis: Option<u32>,
}

const SHAPES: [Shape2; 3] = [
    Shape2 {
        label: "1d",
        rows: 1,
        cols: SCAN_BLOCK,
        axis: None,
    },
    Shape2 {
        label: "2d,axis0",
        rows: 16,
        cols: 32,
        axis: Some(0),
    },
    Shape2 {
        label: "2d,axis1",
        rows: 16,
        cols: 32,
        axis: Some(1),
    },
];

/// Short lanes, for products that must stay in f16's range.
const SHORT_SHAPES: [Shape2; 3] = [
    Shape2 {
        label: "1d",
        rows: 1,
        cols: 16,
        axis: None,
    },
    Shape2 {
        label: "2d,axis0",
        rows: 8,
        cols: 16,
        axis: Some(0),
    },
    Shape2 {
        label: "2d,axis1",
        rows: 16,
        cols: 8,
        axis: Some(1),
    },
];

impl Shape2 {
    fn axis(self) -> u32 {
        self.axis.unwrap_or(0)
    }
    fn numel(self) -> usize {
        (self.rows * self.cols) as usize
    }
    /// Elements of the input buffer: the live ones in 1-D.
    fn live(self) -> usize {
        match self.axis {
            None => (SCAN_LIVE as usize).min(self.numel()),
            Some(_) => self.numel(),
        }
    }
}

/// Loads the block of `x` (1-D: masked by `n`, `fill` beyond), applies `f`, stores the
/// result's every element densely to `out`.
fn block_kernel(
    name: &str,
    s: Shape2,
    t: ScalarType,
    out_t: ScalarType,
    fill: f64,
    f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>) -> Value<'b>,
) -> Result<Kernel, String> {
    built(Kernel::build(name, |k| {
        let x = k.arg_ptr("x", t);
        let o = k.arg_ptr("out", out_t);
        let v = match s.axis {
            None => {
                let n = k.arg_i32("n");
                let offs = k.arange(0, s.cols as i32);
                let fill = if t.is_float() {
                    k.scalar(fill, t)
                } else {
                    k.scalar(fill as i64, t)
                };
                k.load_masked(x + offs, offs.lt(n), fill)
            }
            Some(_) => {
                let r = k.arange(0, s.rows as i32).expand_dims(1);
                let c = k.arange(0, s.cols as i32).expand_dims(0);
                k.load(x + (r * s.cols as i32 + c))
            }
        };
        let y = f(k, v);
        let offs = match y.shape().as_slice() {
            [] => k.scalar(0, I32),
            [n] => k.arange(0, *n as i32),
            [r, c] => k.arange(0, *r as i32).expand_dims(1) * (*c as i32) + k.arange(0, *c as i32).expand_dims(0),
            _ => unreachable!("blocks of rank 1 and 2 only"),
        };
        k.store(o + offs, y);
    }))
}

/// One case: input `init` for `x`, an output of `out_len` elements of `out_t`.
#[allow(clippy::too_many_arguments)] // one case's whole description, as `Case` holds it
fn block_case(
    op: String,
    t: ScalarType,
    out_t: ScalarType,
    s: Shape2,
    kernel: Result<Kernel, String>,
    init: Vec<V>,
    out_len: usize,
    rule: Rule,
) -> Case {
    Case {
        op,
        dtype: t,
        shape: match s.axis {
            None => format!("{SCAN_LIVE}/{}", s.cols),
            Some(_) => format!("{}x{}", s.rows, s.cols),
        },
        kernel,
        bufs: vec![Buf::input(t, init), Buf::zeroed_output(out_t, out_len)],
        n: s.axis.is_none().then_some(SCAN_LIVE),
        grid: 1,
        cluster: 1,
        rule,
        known: Vec::new(),
    }
}

/// The comparison of a float scan or reduction: within `n·eps·Σ|x|` of each lane.
fn lanes_rule(s: Shape2) -> Rule {
    Rule::Lanes {
        rows: s.rows as usize,
        n: s.cols as usize,
        axis0: s.axis == Some(0),
    }
}

/// Floats whose sums stay far inside f16's range; integers of every magnitude (their sums
/// wrap, exactly).
fn sum_inputs(t: ScalarType, n: usize, seed: u64) -> Vec<V> {
    let v = generate(t, n, Domain::Moderate, seed);
    if t == F16 {
        v.into_iter().map(|x| quantize(t, V::F(x.f() / 16.0))).collect()
    } else {
        v
    }
}

/// ±1, ±2 and ±1/2: products that are exact, so that any grouping gives the same result.
fn product_inputs(t: ScalarType, n: usize, seed: u64) -> Vec<V> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let m = [1.0, 2.0, 0.5][rng.below(3) as usize];
            let x = if rng.below(2) == 0 { m } else { -m };
            if t.is_float() {
                V::F(x)
            } else {
                V::I(x.round() as i128 + rng.below(5) as i128 - 2)
            }
        })
        .collect()
}

/// Finite values with ties, and (floats, where `specials`) ±0, ±inf and NaN sprinkled in.
fn sort_inputs(t: ScalarType, n: usize, seed: u64, specials: bool) -> Vec<V> {
    let mut v = generate(t, n, Domain::Moderate, seed);
    if t.is_float() && !specials {
        // Moderate values include zeros of either sign: make them nonzero.
        for x in v.iter_mut() {
            if x.f() == 0.0 {
                *x = V::F(0.5);
            }
        }
    }
    for i in (0..n).step_by(7) {
        v[i] = v[(i * 5 + 3) % n];
    }
    if t.is_float() && specials {
        let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
        for (j, i) in (3..n).step_by(17).enumerate() {
            v[i] = V::F(specials[j % specials.len()]);
        }
    }
    v
}

pub(super) fn scan_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in SCAN_DTYPES {
        for (si, s) in SHAPES.into_iter().enumerate() {
            let axis = s.axis();
            let n = s.numel();
            for reverse in [false, true] {
                let rev = if reverse { ",reverse" } else { "" };
                // cumsum
                let op = format!("cumsum({}{rev})", s.label);
                let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| v.cumsum(axis, reverse));
                let rule = if t.is_float() { lanes_rule(s) } else { Rule::Exact };
                let init = sum_inputs(t, s.live(), 500 + si as u64 * 2 + reverse as u64);
                cases.push(block_case(op, t, t, s, k, init, n, rule));
                // associative_scan with a combine that is associative but not commutative:
                // composition of affine maps h -> m h + c on integers (exact, wrapping).
                if t == I32 {
                    let op = format!("associative_scan(affine,{}{rev})", s.label);
                    let k = block_kernel(&kname(&op, &[t]), s, t, t, 1.0, |k, v| {
                        k.associative_scan_n(&[v, v * 3 + 1], axis, reverse, |_, a, b| {
                            vec![a[0] * b[0], a[1] * b[0] + b[1]]
                        })[1]
                    });
                    let init = generate(t, s.live(), Domain::General, 520 + si as u64 * 2 + reverse as u64);
                    cases.push(block_case(op, t, t, s, k, init, n, Rule::Exact));
                }
                // A running maximum: exact on every type (NaN-propagating `maximum`).
                let op = format!("associative_scan(maximum,{}{rev})", s.label);
                let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| {
                    v.associative_scan(axis, reverse, |k, a, b| k.maximum(a, b))
                });
                let init = sort_inputs(t, s.live(), 540 + si as u64 * 2 + reverse as u64, true);
                cases.push(block_case(op, t, t, s, k, init, n, Rule::Exact));
            }
            // reduce with a combine: a sum (float: within the reduction bound) and an
            // argmax as a reduction of (value, index) tuples.
            let out_len = match s.axis {
                None => 1,
                Some(0) => s.cols as usize,
                Some(_) => s.rows as usize,
            };
            let op = format!("reduce(add,{})", s.label);
            let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| {
                v.reduce(axis, false, |_, a, b| a + b)
            });
            let rule = if t.is_float() {
                // 1-D: the live elements (the fill is 0).
                let n = if s.axis.is_none() { s.live() } else { s.cols as usize };
                Rule::Sum {
                    rows: s.rows as usize,
                    n,
                    axis0: s.axis == Some(0),
                }
            } else {
                Rule::Exact
            };
            cases.push(block_case(
                op,
                t,
                t,
                s,
                k,
                sum_inputs(t, s.live(), 560 + si as u64),
                out_len,
                rule,
            ));
            let op = format!("reduce(argmax_tuple,{})", s.label);
            let k = block_kernel(&kname(&op, &[t]), s, t, I32, 0.0, |k, v| {
                let dims = v.shape();
                let idx = match (dims.len(), axis) {
                    (1, _) => k.arange(0, dims[0] as i32),
                    (_, 0) => k.arange(0, dims[0] as i32).expand_dims(1).broadcast_to(&dims),
                    _ => k.arange(0, dims[1] as i32).expand_dims(0).broadcast_to(&dims),
                };
                k.reduce_n(&[v, idx], axis, false, |k, a, b| {
                    let take_b = b[0].gt(a[0]) | (b[0].eq(a[0]) & b[1].lt(a[1]));
                    vec![k.where_(take_b, b[0], a[0]), k.where_(take_b, b[1], a[1])]
                })[1]
            });
            cases.push(block_case(
                op,
                t,
                I32,
                s,
                k,
                sort_inputs(t, s.live(), 580 + si as u64, true),
                out_len,
                Rule::Exact,
            ));
            // sort, both ways: the interpreter runs the same network, so exact. With ±0,
            // ±inf and NaN too where the device keeps IEEE comparisons; Vulkan may assume
            // that none occurs and signed zeros do not matter (without the
            // SignedZeroInfNanPreserve execution mode), and NVIDIA's driver then orders
            // them otherwise, so inputs without them are a case of their own.
            for descending in [false, true] {
                for nan in [false, true] {
                    if nan && !t.is_float() {
                        continue;
                    }
                    let op = format!(
                        "sort({}{}{})",
                        s.label,
                        if descending { ",descending" } else { "" },
                        if nan { ",specials" } else { "" }
                    );
                    let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| v.sort(axis, descending));
                    let seed = 600 + si as u64 * 4 + descending as u64 * 2 + nan as u64;
                    let init = sort_inputs(t, s.live(), seed, nan);
                    let case = block_case(op, t, t, s, k, init, n, Rule::Exact);
                    cases.push(if nan {
                        case.known_failure(
                            Backend::Vulkan,
                            "the order of ±0, ±inf and NaN in a sort: Vulkan may ignore them without SignedZeroInfNanPreserve",
                        )
                    } else {
                        case
                    });
                }
            }
            // gather along the axis, by indices computed from the data (so every device
            // sees the same ones): |x| mod the axis length.
            let op = format!("gather({})", s.label);
            let len = if s.axis == Some(0) { s.rows } else { s.cols } as i32;
            let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| {
                let bits = match t {
                    F32 => v.bitcast(I32),
                    // Through a float-to-integer cast: i16 is not on every device.
                    F16 => v.to(I32),
                    _ => v,
                };
                let idx = (bits & 0x7fff_ffff) % len;
                v.gather(idx, axis)
            });
            cases.push(block_case(
                op,
                t,
                t,
                s,
                k,
                generate(t, s.live(), Domain::General, 620 + si as u64),
                n,
                Rule::Exact,
            ));
            // Triton's standard library composed of ops: `flip` (a gather by reversed
            // indices) on every type, `xor_sum` (a reduction with a combine) on integers,
            // `softmax` on f32 (the 1-D lane ragged: its tail is the -inf fill, as in the
            // softmax tutorial).
            // topk: the largest 4 along the axis, largest first (a sort and a gather).
            let op = format!("topk({},k=4)", s.label);
            let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| v.topk(4, axis));
            let init = sort_inputs(t, s.live(), 760 + si as u64, false);
            let top_len = n / (if s.axis == Some(0) { s.rows } else { s.cols }) as usize * 4;
            cases.push(block_case(op, t, t, s, k, init, top_len, Rule::Exact));
            let op = format!("flip({})", s.label);
            let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| v.flip(axis));
            let init = generate(t, s.live(), Domain::General, 680 + si as u64);
            cases.push(block_case(op, t, t, s, k, init, n, Rule::Exact));
            if t == I32 {
                let op = format!("xor_sum({})", s.label);
                let k = block_kernel(&kname(&op, &[t]), s, t, t, 0.0, |_, v| v.xor_sum(axis, false));
                let init = generate(t, s.live(), Domain::General, 700 + si as u64);
                cases.push(block_case(op, t, t, s, k, init, out_len, Rule::Exact));
            }
            if t == F32 {
                let op = format!("softmax({})", s.label);
                let k = block_kernel(&kname(&op, &[t]), s, t, t, f64::NEG_INFINITY, |_, v| {
                    v.softmax(axis, false)
                });
                // A whole block of inputs (the rule reads one per output), of which a 1-D
                // lane loads the first `SCAN_LIVE`.
                let mut rng = Rng::new(720 + si as u64);
                let init = (0..n).map(|_| V::F(rng.range(-4.0, 4.0) as f32 as f64)).collect();
                cases.push(block_case(
                    op,
                    t,
                    t,
                    s,
                    k,
                    init,
                    n,
                    Rule::Float { op: "softmax", arg: 0 },
                ));
            }
        }
        // cumprod on short lanes of ±1, ±2, ±1/2 (exact products, also in f16).
        for (si, s) in SHORT_SHAPES.into_iter().enumerate() {
            for reverse in [false, true] {
                let op = format!("cumprod({}{})", s.label, if reverse { ",reverse" } else { "" });
                let k = block_kernel(&kname(&op, &[t]), s, t, t, 1.0, |_, v| v.cumprod(s.axis(), reverse));
                let init = product_inputs(t, s.live(), 640 + si as u64 * 2 + reverse as u64);
                cases.push(block_case(op, t, t, s, k, init, s.numel(), Rule::Exact));
            }
        }
    }
    // histogram: i32 values around [0, num_bins), some outside.
    for bins in [32u32, 256] {
        let s = SHAPES[0];
        let op = format!("histogram({bins}bins)");
        let k = block_kernel(&kname(&op, &[I32]), s, I32, I32, -1.0, |_, v| v.histogram(bins));
        let mut rng = Rng::new(660 + bins as u64);
        let init = (0..s.live())
            .map(|_| V::I(rng.range(-4.0, bins as f64 + 4.0).floor() as i128))
            .collect();
        cases.push(block_case(op, I32, I32, s, k, init, bins as usize, Rule::Exact));
    }
    // swizzle2d of every (i, j) of a 16 x 32 block, group sizes 1 to 8 taken from the data
    // (a block operand): the new indices as one row-major index, exact.
    let s = SHAPES[1];
    let op = "swizzle2d(16x32)".to_string();
    let k = block_kernel(&kname(&op, &[I32]), s, I32, I32, 0.0, |k, v| {
        let i = k.arange(0, s.rows as i32).expand_dims(1);
        let j = k.arange(0, s.cols as i32).expand_dims(0);
        let (new_i, new_j) = k.swizzle2d(i, j, s.rows as i32, s.cols as i32, (v & 7) + 1);
        new_i * s.cols as i32 + new_j
    });
    let init = generate(I32, s.live(), Domain::General, 740);
    cases.push(block_case(op, I32, I32, s, k, init, s.numel(), Rule::Exact));
    cases
}
