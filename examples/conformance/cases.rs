//! Cases: the kernels of the matrix, one per op, type and shape, with their rules.

use super::*;

/// How a case's outputs are compared with the interpreter's.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// Bit-exact (NaN matches NaN).
    Exact,
    /// Element-wise within the bound of [`FLOAT_BOUNDS`] for this op; `arg` is the input
    /// giving `x` of the bound.
    Float { op: &'static str, arg: usize },
    /// Output 0 within `n·eps·Σ|x|` of the interpreter's, where the sum runs over input 0
    /// (reshaped to `[rows, n]`, reduced along the last axis, or along axis 0 if `axis0`).
    Sum { rows: usize, n: usize, axis0: bool },
    /// Output 0 has input 0's `[rows, n]` shape; each element within `n·eps·Σ|x|` of the
    /// interpreter's, the sum running over its lane (its row, or its column if `axis0`):
    /// scans, whose additions are grouped differently on devices.
    Lanes { rows: usize, n: usize, axis0: bool },
    /// Atomics: final memory (output 0) exact against the interpreter's (or the sum
    /// tolerance for `f32` add), then the returned old values (output 1) checked.
    Atomic { op: &'static str },
}

/// A buffer of a case: its type and initial contents; outputs are read back and compared.
#[derive(Clone, Debug)]
pub struct Buf {
    pub dtype: ScalarType,
    pub init: Vec<V>,
    pub output: bool,
}

impl Buf {
    /// An input buffer holding `init`.
    pub fn input(dtype: ScalarType, init: Vec<V>) -> Buf {
        Buf {
            dtype,
            init,
            output: false,
        }
    }

    /// An output buffer of `len` zeros, compared after the launch.
    pub fn zeroed_output(dtype: ScalarType, len: usize) -> Buf {
        Buf {
            dtype,
            init: vec![V::I(0); len],
            output: true,
        }
    }
}

/// One op on one element type at one shape.
pub struct Case {
    /// The row of the matrix (the op, with a variant such as `sum(2d,axis1)`).
    pub op: String,
    /// The column.
    pub dtype: ScalarType,
    /// The shape, for reports: `1`, `1000/256`, `16x32`, ...
    pub shape: String,
    /// The kernel, or why the builder rejects the op on this type (then the op does not
    /// accept the type: listed as "not accepted", not run).
    pub kernel: Result<Kernel, String>,
    pub bufs: Vec<Buf>,
    /// The `i32` scalar parameter after the buffers (the number of elements).
    pub n: Option<i32>,
    pub grid: u32,
    /// Programs a thread-block cluster (`LaunchConfig::cluster`); 1 for all but the
    /// `cluster_reduce` cases.
    pub cluster: u32,
    pub rule: Rule,
    /// Known mismatches: `(backend, reason)`; a failure on that backend is KNOWN.
    pub known: Vec<(Backend, &'static str)>,
}

impl Case {
    /// Marks a known mismatch on `backend`.
    pub fn known_failure(mut self, backend: Backend, reason: &'static str) -> Case {
        self.known.push((backend, reason));
        self
    }
}

pub(super) fn built(r: Result<Kernel, BuildError>) -> Result<Kernel, String> {
    r.map_err(|e| e.to_string())
}

pub(super) fn kname(op: &str, t: &[ScalarType]) -> String {
    let mut s = format!("conf_{}", op.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    for t in t {
        s.push('_');
        s.push_str(t.name());
    }
    s
}

/// An element-wise kernel: loads each input (masked, `i < n`), applies `f`, stores into an
/// output of type `out`.
pub(super) fn elementwise<F>(name: &str, ins: &[ScalarType], out: ScalarType, f: F) -> Result<Kernel, String>
where
    F: for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
{
    built(Kernel::build(name, |k| {
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
        let y = f(k, &xs);
        k.store_masked(o + offs, y, mask);
    }))
}

/// Element-wise cases at the two lengths (1 and ragged), inputs from `domains`.
pub(super) fn elementwise_cases<F>(
    op: &str,
    ins: &[(ScalarType, Domain)],
    out: ScalarType,
    rule: Rule,
    f: F,
) -> Vec<Case>
where
    F: for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
{
    let types: Vec<ScalarType> = ins.iter().map(|p| p.0).collect();
    let mut all = types.clone();
    all.push(out);
    let kernel = elementwise(&kname(op, &all), &types, out, f);
    let column = ins[0].0;
    [1usize, RAGGED]
        .iter()
        .enumerate()
        .map(|(variant, &n)| {
            let mut bufs: Vec<Buf> = ins
                .iter()
                .enumerate()
                .map(|(i, &(t, d))| Buf {
                    dtype: t,
                    init: generate(
                        t,
                        n,
                        d,
                        (variant * 31 + i * 7) as u64 + 2 * (n == 1) as u64 * (i as u64 + 1),
                    ),
                    output: false,
                })
                .collect();
            bufs.push(Buf::zeroed_output(out, n));
            Case {
                op: op.to_string(),
                dtype: column,
                shape: if n == 1 { "1".into() } else { format!("{n}/{BLOCK}") },
                kernel: kernel.clone(),
                bufs,
                n: Some(n as i32),
                grid: (n as u32).div_ceil(BLOCK as u32),
                cluster: 1,
                rule,
                known: Vec::new(),
            }
        })
        .collect()
}

pub(super) fn transcendental_domain(op: &str) -> Domain {
    use std::f64::consts::PI;
    match op {
        "exp" => Domain::Range {
            lo: -87.0,
            hi: 88.0,
            lo2: -20,
            hi2: 6,
        },
        // Results stay normal, with a margin for the approximation: the PTX `exp2` flushes
        // subnormal results to zero, as Triton's does (backend-ptx/src/math.rs).
        "exp2" => Domain::Range {
            lo: -125.0,
            hi: 127.0,
            lo2: -20,
            hi2: 6,
        },
        "log" | "log2" => Domain::Range {
            lo: 0.0,
            hi: 3.0,
            lo2: -20,
            hi2: 20,
        },
        "rsqrt" => Domain::Range {
            lo: 0.0,
            hi: 100.0,
            lo2: -100,
            hi2: 100,
        },
        "sin" | "cos" => Domain::Range {
            lo: -PI,
            hi: PI,
            lo2: -20,
            hi2: 1,
        },
        "erf" => Domain::Range {
            lo: -6.0,
            hi: 6.0,
            lo2: -20,
            hi2: 2,
        },
        "sigmoid" => Domain::Range {
            lo: -80.0,
            hi: 80.0,
            lo2: -20,
            hi2: 6,
        },
        _ => Domain::General,
    }
}

pub(super) type UnaryFn = for<'b> fn(Value<'b>) -> Value<'b>;

pub(super) fn unary_cases() -> Vec<Case> {
    let ops: [(&str, UnaryFn); 21] = [
        ("neg", |x| -x),
        ("not", |x| !x),
        ("abs", |x| x.abs()),
        ("exp", |x| x.exp()),
        ("exp2", |x| x.exp2()),
        ("log", |x| x.log()),
        ("log2", |x| x.log2()),
        ("sqrt", |x| x.sqrt()),
        ("rsqrt", |x| x.rsqrt()),
        ("sin", |x| x.sin()),
        ("cos", |x| x.cos()),
        ("floor", |x| x.floor()),
        ("ceil", |x| x.ceil()),
        ("trunc", |x| x.trunc()),
        ("rint", |x| x.rint()),
        ("erf", |x| x.erf()),
        ("sigmoid", |x| x.sigmoid()),
        ("popc", |x| x.popc()),
        ("clz", |x| x.clz()),
        ("brev", |x| x.brev()),
        ("ffs", |x| x.ffs()),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        for t in DTYPES {
            let exact = matches!(
                op,
                "neg" | "not" | "abs" | "floor" | "ceil" | "trunc" | "rint" | "popc" | "clz" | "brev" | "ffs"
            );
            let rule = if exact || !t.is_float() {
                Rule::Exact
            } else {
                Rule::Float { op, arg: 0 }
            };
            let domain = if t.is_float() {
                transcendental_domain(op)
            } else {
                Domain::General
            };
            cases.extend(elementwise_cases(op, &[(t, domain)], t, rule, move |_, x| f(x[0])));
        }
    }
    cases
}

pub(super) type BinaryFn = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;

pub(super) fn binary_cases() -> Vec<Case> {
    let ops: [(&str, BinaryFn); 14] = [
        ("add", |_, a, b| a + b),
        ("sub", |_, a, b| a - b),
        ("mul", |_, a, b| a * b),
        ("div", |_, a, b| a / b),
        ("div_full", |_, a, b| a.fdiv(b, false)),
        ("rem", |_, a, b| a % b),
        ("cdiv", |k, a, b| k.cdiv(a, b)),
        ("and", |_, a, b| a & b),
        ("or", |_, a, b| a | b),
        ("xor", |_, a, b| a ^ b),
        ("shl", |_, a, b| a << b),
        ("shr", |_, a, b| a >> b),
        ("minimum", |k, a, b| k.minimum(a, b)),
        ("maximum", |k, a, b| k.maximum(a, b)),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        // `div_full` is defined on floats only.
        for t in DTYPES.into_iter().filter(|t| op != "div_full" || t.is_float()) {
            let db = match op {
                "div" | "div_full" | "rem" | "cdiv" => Domain::NonZero,
                "shl" | "shr" => Domain::Shift,
                _ => Domain::General,
            };
            let rule = if t.is_float() {
                Rule::Float { op, arg: 0 }
            } else {
                Rule::Exact
            };
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General), (t, db)],
                t,
                rule,
                move |k, x| f(k, x[0], x[1]),
            ));
        }
    }
    // Integer division and remainder by constants, which a compiler may turn into
    // multiplications by reciprocals (as drivers do): 3, 7, 10 and 1000, and -3 and -7 for
    // the signed types.
    type ByConstant = fn(Value<'_>) -> Value<'_>;
    let by_constants: [(&str, ByConstant, bool); 8] = [
        ("div(3)", |a| a / 3, false),
        ("div(7)", |a| a / 7, false),
        ("div(10)", |a| a / 10, false),
        ("div(1000)", |a| a / 1000, false),
        ("div(-3)", |a| a / -3, true),
        ("div(-7)", |a| a / -7, true),
        ("rem(3)", |a| a % 3, false),
        ("rem(-7)", |a| a % -7, true),
    ];
    for (op, f, signed_only) in by_constants {
        let ints = DTYPES
            .into_iter()
            .filter(|t| t.is_int() && (!signed_only || t.is_signed_int()));
        for t in ints {
            // Divisors that do not fit the type (1000 in 8 bits) are left out.
            if op == "div(1000)" && t.bits() == 8 {
                continue;
            }
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General)],
                t,
                Rule::Exact,
                move |_, x| f(x[0]),
            ));
        }
    }
    // An i32 widened to i64 compared with constants, as 64-bit index arithmetic does.
    type Widened = fn(Value<'_>) -> Value<'_>;
    let widened: [(&str, Widened); 2] = [
        ("cmp(widened)", |a| (a.to(I64).gt(1023) | a.to(I64).lt(-1022)).to(I32)),
        ("cmp(widened, large)", |a| a.to(I64).lt(1i64 << 40).to(I32)),
    ];
    for (op, f) in widened {
        cases.extend(elementwise_cases(
            op,
            &[(I32, Domain::General)],
            I32,
            Rule::Exact,
            move |_, x| f(x[0]),
        ));
    }
    let cmps: [(&str, BinaryFn); 6] = [
        ("lt", |_, a, b| a.lt(b)),
        ("le", |_, a, b| a.le(b)),
        ("gt", |_, a, b| a.gt(b)),
        ("ge", |_, a, b| a.ge(b)),
        ("eq", |_, a, b| a.eq(b)),
        ("ne", |_, a, b| a.ne(b)),
    ];
    for (op, f) in cmps {
        for t in DTYPES {
            // Compare x with a copy of itself shuffled into y half of the time (equal values).
            let mut cs = elementwise_cases(
                op,
                &[(t, Domain::General), (t, Domain::General)],
                I32,
                Rule::Exact,
                move |k, x| f(k, x[0], x[1]),
            );
            for c in &mut cs {
                let x = c.bufs[0].init.clone();
                for (i, y) in c.bufs[1].init.iter_mut().enumerate() {
                    if i % 3 == 0 {
                        *y = x[(i * 7) % x.len()];
                    }
                }
            }
            cases.extend(cs);
        }
    }
    for t in DTYPES {
        cases.extend(elementwise_cases(
            "where",
            &[(t, Domain::General), (t, Domain::General), (I32, Domain::Flag)],
            t,
            Rule::Exact,
            |k, x| k.where_(x[2].ne(0), x[0], x[1]),
        ));
        let rule = if t.is_float() {
            Rule::Float { op: "fma", arg: 0 }
        } else {
            Rule::Exact
        };
        cases.extend(elementwise_cases(
            "fma",
            &[(t, Domain::General), (t, Domain::General), (t, Domain::General)],
            t,
            rule,
            |_, x| x[0].fma(x[1], x[2]),
        ));
    }
    cases
}

pub(super) fn cast_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for from in DTYPES {
        for to in DTYPES {
            if from == to {
                continue;
            }
            let op = format!("cast->{}", to.name());
            let mut cs = elementwise_cases(&op, &[(from, Domain::General)], to, Rule::Exact, move |_, x| {
                x[0].to(to)
            });
            for c in &mut cs {
                c.dtype = from;
            }
            cases.extend(cs);
        }
    }
    let groups: [&[ScalarType]; 4] = [
        &[I8, U8, F8E4M3, F8E5M2, F8E4M3B15, F8E4M3Fnuz, F8E5M2Fnuz],
        &[I16, U16, F16, BF16],
        &[I32, U32, F32],
        &[I64, U64, F64],
    ];
    for g in groups {
        for &from in g {
            for &to in g {
                if from == to {
                    continue;
                }
                let op = format!("bitcast->{}", to.name());
                cases.extend(elementwise_cases(
                    &op,
                    &[(from, Domain::General)],
                    to,
                    Rule::Exact,
                    move |_, x| x[0].bitcast(to),
                ));
            }
        }
    }
    cases
}

/// Masked loads with `other` and masked stores on ragged lengths: the input has `n`
/// elements; positions `n .. n+100` get `other` (3); the rest of the output keeps its
/// initial contents. Twice: with offsets the analysis follows, and with offsets built by an
/// `|` it does not follow, whose runs `max_contiguous` and `multiple_of` promise back (so
/// that the accesses go as wide as the first kernel's).
pub(super) fn memory_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        for (op, hinted) in [("load/store masked", false), ("load/store hinted", true)] {
            let name = if hinted { "load_store_hinted" } else { "load_store" };
            let kernel = built(Kernel::build(&kname(name, &[t]), |k| {
                let x = k.arg_ptr("x", t);
                let o = k.arg_ptr("out", t);
                let n = k.arg_i32("n");
                let offs = if hinted {
                    ((k.program_id(0) * BLOCK) | k.arange(0, BLOCK))
                        .max_contiguous(BLOCK)
                        .multiple_of(BLOCK)
                } else {
                    k.program_id(0) * BLOCK + k.arange(0, BLOCK)
                };
                let v = k.load_masked(x + offs, offs.lt(n), 3);
                k.store_masked(o + offs, v, offs.lt(n + 100));
            }));
            for (variant, n) in [1usize, RAGGED, 700].into_iter().enumerate() {
                let grid = (n as u32 + 100).div_ceil(BLOCK as u32) + 1;
                let len = grid as usize * BLOCK as usize;
                cases.push(Case {
                    op: op.into(),
                    dtype: t,
                    shape: format!("{n}/{BLOCK}"),
                    kernel: kernel.clone(),
                    bufs: vec![
                        Buf {
                            dtype: t,
                            init: generate(t, n, Domain::General, 100 + variant as u64 * 2),
                            output: false,
                        },
                        Buf {
                            dtype: t,
                            init: generate(t, len, Domain::General, 201 + variant as u64 * 2),
                            output: true,
                        },
                    ],
                    n: Some(n as i32),
                    grid,
                    cluster: 1,
                    rule: Rule::Exact,
                    known: Vec::new(),
                });
            }
        }
    }
    cases
}

pub(super) type ReduceFn = for<'b> fn(Value<'b>, u32) -> Value<'b>;

pub(super) fn reduction_cases() -> Vec<Case> {
    let ops: [(&str, ReduceFn); 5] = [
        ("sum", |x, a| x.sum(a)),
        ("max", |x, a| x.max(a)),
        ("min", |x, a| x.min(a)),
        ("argmax", |x, a| x.argmax(a)),
        ("argmin", |x, a| x.argmin(a)),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        for t in DTYPES {
            let out_t = if op.starts_with("arg") { I32 } else { t };
            let domain = if op == "sum" && t.is_float() {
                Domain::Moderate
            } else {
                Domain::General
            };
            // (label, rows, cols, axis): 1-D blocks are [1, cols] reduced along axis 1.
            let shapes: [(&str, u32, u32, Option<u32>); 5] = [
                ("(1d)", 1, 1, None),
                ("(1d)", 1, 256, None),
                ("(2d,axis0)", 16, 32, Some(0)),
                ("(2d,axis1)", 16, 32, Some(1)),
                ("(2d,axis0)", 4, 1, Some(0)),
            ];
            for (variant, (label, rows, cols, axis)) in shapes.into_iter().enumerate() {
                let name = kname(&format!("{op}{label}_{rows}x{cols}"), &[t]);
                let kernel = built(Kernel::build(&name, |k| {
                    let x = k.arg_ptr("x", t);
                    let o = k.arg_ptr("out", out_t);
                    match axis {
                        None => {
                            let v = k.load(x + k.arange(0, cols as i32));
                            k.store(o, f(v, 0));
                        }
                        Some(a) => {
                            let r = k.arange(0, rows as i32);
                            let c = k.arange(0, cols as i32);
                            let v = k.load(x + (r.expand_dims(1) * cols as i32 + c.expand_dims(0)));
                            let len = if a == 0 { cols } else { rows };
                            k.store(o + k.arange(0, len as i32), f(v, a));
                        }
                    }
                }));
                let n = (rows * cols) as usize;
                let out_len = match axis {
                    None => 1,
                    Some(0) => cols as usize,
                    _ => rows as usize,
                };
                let mut init = generate(t, n, domain, 300 + variant as u64 * 2 + (op == "sum") as u64);
                if op.starts_with("arg") && n > 4 {
                    // Ties: the first index wins.
                    for i in (0..n).step_by(5) {
                        init[i] = init[(i * 3) % n];
                    }
                }
                let rule = if op == "sum" && t.is_float() {
                    let (r, c) = (rows as usize, cols as usize);
                    match axis {
                        Some(0) => Rule::Sum {
                            rows: r,
                            n: c,
                            axis0: true,
                        },
                        _ => Rule::Sum {
                            rows: r,
                            n: c,
                            axis0: false,
                        },
                    }
                } else {
                    Rule::Exact
                };
                cases.push(Case {
                    op: format!("{op}{label}"),
                    dtype: t,
                    shape: format!("{rows}x{cols}"),
                    kernel,
                    bufs: vec![Buf::input(t, init), Buf::zeroed_output(out_t, out_len)],
                    n: None,
                    grid: 1,
                    cluster: 1,
                    rule,
                    known: Vec::new(),
                });
            }
        }
    }
    cases
}

/// Atomics: 8 programs of 128 lanes, `n = 1000` lanes active, into 4 addresses.
pub(super) fn atomic_cases() -> Vec<Case> {
    pub(crate) const B: i32 = 128;
    pub(crate) const ADDRS: i32 = 4;
    use rutile::{AtomicOp, AtomicOrder, MemScope, MemSem};
    // Each op with Triton's default ordering, and the adds and compare-and-swaps with others
    // (`sem` and `scope`), which change what a GPU may reorder around them, not the result.
    let ordered = [
        ("atomic_add", "", AtomicOrder::default()),
        ("atomic_max", "", AtomicOrder::default()),
        ("atomic_min", "", AtomicOrder::default()),
        ("atomic_xchg", "", AtomicOrder::default()),
        ("atomic_cas", "", AtomicOrder::default()),
        ("atomic_add", "(relaxed)", AtomicOrder::relaxed()),
        (
            "atomic_add",
            "(release,cta)",
            AtomicOrder::new(MemSem::Release, MemScope::Cta),
        ),
        (
            "atomic_cas",
            "(acquire,sys)",
            AtomicOrder::new(MemSem::Acquire, MemScope::Sys),
        ),
    ];
    let mut cases = Vec::new();
    for (op, label, order) in ordered {
        for t in [I32, U32, I64, U64, F32, F64] {
            let kernel = built(Kernel::build(&kname(&format!("{op}{label}"), &[t]), |k| {
                let p = k.arg_ptr("p", t);
                let v = k.arg_ptr("v", t);
                let old = k.arg_ptr("old", t);
                let n = k.arg_i32("n");
                let offs = k.program_id(0) * B + k.arange(0, B);
                let mask = offs.lt(n);
                let x = k.load_masked(v + offs, mask, 0);
                let addr = p + offs % ADDRS;
                let rmw = |op| k.atomic_rmw_ordered(op, addr, x, Some(mask), order);
                let r = match op {
                    "atomic_add" => rmw(AtomicOp::Add),
                    "atomic_max" => rmw(AtomicOp::Max),
                    "atomic_min" => rmw(AtomicOp::Min),
                    "atomic_xchg" => rmw(AtomicOp::Xchg),
                    _ => k.atomic_cas_ordered(addr, k.zeros(&[B as u32], t), x, Some(mask), order),
                };
                k.store_masked(old + offs, r, mask);
            }));
            for (variant, n) in [1usize, RAGGED].into_iter().enumerate() {
                let grid = (n as u32).div_ceil(B as u32);
                let (init, vals) = match op {
                    // Distinct non-zero values; the memory starts at 0.
                    "atomic_cas" | "atomic_xchg" => (
                        vec![quantize(t, V::I(0)); ADDRS as usize],
                        (0..n).map(|i| quantize(t, V::I(i as i128 + 1))).collect(),
                    ),
                    "atomic_add" if t.is_float() => (
                        generate(t, 4, Domain::Moderate, 1),
                        generate(t, n, Domain::Moderate, 400 + variant as u64),
                    ),
                    // Floats without NaN: the order of NaN-propagating CAS loops is free.
                    _ if t.is_float() => {
                        let mut g = generate(t, n + 4, Domain::General, 402 + variant as u64 * 2);
                        g.iter_mut().filter(|v| v.is_nan()).for_each(|v| *v = V::F(-0.0));
                        (g[n..].to_vec(), g[..n].to_vec())
                    }
                    _ => (
                        generate(t, 4, Domain::General, 3),
                        generate(t, n, Domain::General, 404 + variant as u64 * 2),
                    ),
                };
                cases.push(Case {
                    op: format!("{op}{label}"),
                    dtype: t,
                    shape: format!("{n}/{B}->{ADDRS}"),
                    kernel: kernel.clone(),
                    bufs: vec![
                        Buf {
                            dtype: t,
                            init,
                            output: true,
                        },
                        Buf {
                            dtype: t,
                            init: vals,
                            output: false,
                        },
                        Buf::zeroed_output(t, n),
                    ],
                    n: Some(n as i32),
                    grid,
                    cluster: 1,
                    rule: Rule::Atomic { op },
                    known: Vec::new(),
                });
            }
        }
    }
    cases
}

/// Every case of the matrix, with the known mismatches marked.
pub fn cases() -> Vec<Case> {
    let mut all = Vec::new();
    all.extend(unary_cases());
    all.extend(binary_cases());
    all.extend(cast_cases());
    all.extend(memory_cases());
    all.extend(reduction_cases());
    all.extend(atomic_cases());
    all.extend(scan_cases());
    all.extend(super::math_cases::math_cases());
    all.extend(super::random_cases::random_cases());
    all.extend(super::rounded_cases::rounded_cases());
    all.extend(super::join_cases::join_cases());
    all.extend(super::block_ptr_cases::block_ptr_cases());
    all.extend(super::cluster_cases::cluster_cases());
    all.into_iter().map(mark_known).collect()
}

/// The known mismatches: failures that are understood, shown as KNOWN in the matrix.
pub(super) fn mark_known(c: Case) -> Case {
    let float = c.dtype.is_float();
    match c.op.as_str() {
        // Vulkan lets `fma` be a multiply then an add (two roundings); lavapipe does that.
        "fma" if float => c.known_failure(
            Backend::Vulkan,
            "Vulkan's fma may round twice (precision inherited from OpFMul and OpFAdd); lavapipe does not fuse",
        ),
        // Seen on lavapipe (the CI's device): a well-formed `OpSConvert` to 64 bits then
        // `OpSGreaterThan` with the constant 1023 gave true for -10 in a workgroup of many
        // elements (every other device and the one-element case right).
        "cmp(widened)" => c.known_failure(
            Backend::Vulkan,
            "lavapipe compares an i32 widened to i64 with a small constant wrongly (-10 > 1023 came out true); \
             the SPIR-V (OpSConvert, OpSGreaterThan) is the comparison asked for",
        ),
        // f64's pow keeps log2 x and y times it in two parts, whose second parts are fused
        // multiply-adds' rounding errors: where fma rounds twice they are lost, and the
        // result is off by about a third of an ulp per unit of |y·log2 x|.
        "pow(wide)" => c.known_failure(
            Backend::Vulkan,
            "f64 pow's second parts come from fused multiply-adds, and Vulkan's fma may round twice \
             (lavapipe does not fuse): about 0.35 ulp per unit of |y·log2 x|",
        ),
        _ => c,
    }
}
