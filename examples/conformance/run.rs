//! Running: each case on each device, judged against the interpreter, into a matrix.

use super::*;

/// The outcome of one case on one device.
#[derive(Clone, Debug)]
pub enum Outcome {
    Pass,
    Fail(String),
    Unsupported(String),
    Known(String),
}

pub(super) fn run_on(d: &dyn Device, c: &Case, kernel: &Kernel) -> rutile::Result<Vec<Vec<V>>> {
    let mut raws = Vec::new();
    for b in &c.bufs {
        let raw = d.alloc(b.dtype, b.init.len().max(1))?;
        if !b.init.is_empty() {
            d.write(&raw, &encode(b.dtype, &b.init))?;
        }
        raws.push(raw);
    }
    let mut args: Vec<Arg> = raws.iter().map(Arg::Buffer).collect();
    if let Some(n) = c.n {
        args.push(Arg::I32(n));
    }
    rutile::DeviceExt::launch(d, kernel, &LaunchConfig::grid1(c.grid).cluster(c.cluster), &args)?;
    let mut outs = Vec::new();
    for (b, raw) in c.bufs.iter().zip(&raws) {
        if b.output {
            let mut v = decode(b.dtype, &d.read(raw)?);
            v.truncate(b.init.len());
            outs.push(v);
        }
    }
    Ok(outs)
}

/// Whether `t` is a float type whose subnormals Vulkan drivers may flush (`bf16` is
/// computed in `f32` there, whose subnormals its own are).
pub(super) fn flushable(t: ScalarType) -> bool {
    matches!(t, F16 | BF16 | F32)
}

/// Zero (of the same sign) for a subnormal of `t`, the value itself otherwise.
pub(super) fn flush(t: ScalarType, v: V) -> V {
    let min_normal = match t {
        F16 => 6.103515625e-5,
        BF16 | F32 => f32::MIN_POSITIVE as f64,
        _ => return v,
    };
    match v {
        V::F(x) if x != 0.0 && x.abs() < min_normal => V::F(0.0f64.copysign(x)),
        v => v,
    }
}

/// The results a device that flushes subnormals may give: the reference with its outputs
/// flushed, and the interpreter's result on flushed inputs, flushed. `None` when the case
/// involves no flushable type.
pub(super) fn flushed_reference(
    cpu: &CpuDevice,
    c: &Case,
    kernel: &Kernel,
    want: &[Vec<V>],
) -> Option<Vec<Vec<Vec<V>>>> {
    if !c.bufs.iter().any(|b| flushable(b.dtype)) {
        return None;
    }
    let out_types: Vec<ScalarType> = c.bufs.iter().filter(|b| b.output).map(|b| b.dtype).collect();
    let flush_outputs = |outs: &[Vec<V>]| -> Vec<Vec<V>> {
        outs.iter()
            .zip(&out_types)
            .map(|(o, &t)| o.iter().map(|&v| flush(t, v)).collect())
            .collect()
    };
    let mut candidates = vec![flush_outputs(want)];
    let flushed_case = Case {
        op: c.op.clone(),
        dtype: c.dtype,
        shape: c.shape.clone(),
        kernel: Err(String::new()),
        bufs: c
            .bufs
            .iter()
            .map(|b| Buf {
                dtype: b.dtype,
                init: b.init.iter().map(|&v| flush(b.dtype, v)).collect(),
                output: b.output,
            })
            .collect(),
        n: c.n,
        grid: c.grid,
        cluster: c.cluster,
        rule: c.rule,
        known: Vec::new(),
    };
    if let Ok(outs) = run_on(cpu, &flushed_case, kernel) {
        candidates.push(flush_outputs(&outs));
    }
    Some(candidates)
}

pub(super) fn is_unsupported(e: &Error) -> bool {
    let text = e.to_string();
    let device_lacks = matches!(e, Error::Codegen { .. } | Error::Lower(_) | Error::Device { .. })
        && (text.contains("not supported")
            || text.contains("unsupported")
            || text.contains("no storage type")
            || text.contains("does not support"));
    // A launch in clusters on a device without them (`DeviceProperties::max_cluster`).
    device_lacks || matches!(e, Error::Launch { .. }) && text.contains("has no thread-block clusters")
}

pub(super) fn same(a: V, b: V) -> bool {
    match (a, b) {
        (V::F(x), V::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

pub(super) fn describe(c: &Case, i: usize, want: V, got: V) -> String {
    let inputs: Vec<String> = c
        .bufs
        .iter()
        .filter(|b| !b.output)
        .map(|b| b.init.get(i).map_or("-".into(), |v| v.to_string()))
        .collect();
    format!("element {i}: input ({}) expected {want}, got {got}", inputs.join(", "))
}

/// Excused elements of one comparison: the first one's description and how many.
#[derive(Default)]
pub(super) struct Excused {
    first: Option<String>,
    count: usize,
}

impl Excused {
    /// Element `i` missed the reference: whether the Vulkan specification allows it
    /// ([`vulkan_allowances`], Vulkan devices only). `false`: the element fails.
    #[allow(clippy::too_many_arguments)] // one element's whole context, passed through
    pub(crate) fn allows(
        &mut self,
        c: &Case,
        backend: Backend,
        op: &str,
        t: ScalarType,
        i: usize,
        want: V,
        got: V,
    ) -> bool {
        if backend != Backend::Vulkan {
            return false;
        }
        let inputs: Vec<V> = c
            .bufs
            .iter()
            .filter(|b| !b.output)
            .filter_map(|b| b.init.get(i).copied())
            .collect();
        match vulkan_allowances::element(op, t, &inputs, got) {
            None => false,
            Some(vulkan_allowances::Allowance::Accepted) => true,
            Some(vulkan_allowances::Allowance::Known(reason)) => {
                self.count += 1;
                self.first
                    .get_or_insert_with(|| format!("{reason}: {}", describe(c, i, want, got)));
                true
            }
        }
    }

    /// `Ok(None)`: pass; `Ok(Some(message))`: KNOWN (elements excused, none failed).
    pub(crate) fn verdict(self) -> Result<Option<String>, String> {
        Ok(self.first.map(|m| match self.count {
            1 => m,
            n => format!("{m} (and {} more such elements)", n - 1),
        }))
    }
}

/// Compares a device's outputs with the reference: `Ok(None)` if they conform, `Ok(Some(m))`
/// if they conform except for elements whose result the Vulkan specification leaves
/// undefined (KNOWN), `Err(m)` on the first element that does not conform.
pub(super) fn compare(c: &Case, backend: Backend, want: &[Vec<V>], got: &[Vec<V>]) -> Result<Option<String>, String> {
    let t = c.bufs.iter().rfind(|b| b.output).map_or(c.dtype, |b| b.dtype);
    let mut excused = Excused::default();
    match c.rule {
        Rule::Exact => {
            for (w, g) in want.iter().zip(got) {
                for i in 0..w.len() {
                    if !same(w[i], g[i]) && !excused.allows(c, backend, &c.op, t, i, w[i], g[i]) {
                        return Err(describe(c, i, w[i], g[i]));
                    }
                }
            }
            excused.verdict()
        }
        Rule::Float { op, arg } => {
            let (bound, unit) = (bound_for(op, t, backend), unit_for(op, t, backend));
            let x = &c.bufs[arg].init;
            let (w, g) = (&want[0], &got[0]);
            for i in 0..w.len() {
                if !within(t, unit, bound, x[i].f(), w[i].f(), g[i].f())
                    && !excused.allows(c, backend, op, t, i, w[i], g[i])
                {
                    return Err(format!("{} (bound {bound:?})", describe(c, i, w[i], g[i])));
                }
            }
            excused.verdict()
        }
        Rule::Sum { rows, n, axis0 } => {
            let x = &c.bufs[0].init;
            let (w, g) = (&want[0], &got[0]);
            for (j, (wj, gj)) in w.iter().zip(g).enumerate() {
                let elems: Vec<f64> = if axis0 {
                    (0..rows).map(|r| x[r * n + j].f()).collect()
                } else {
                    (0..n).map(|k| x[j * n + k].f()).collect()
                };
                let abs: f64 = elems.iter().map(|v| v.abs()).sum();
                let eps = ulp(t, 1.0);
                let tol = elems.len() as f64 * eps * abs;
                let (wv, gv) = (wj.f(), gj.f());
                let ok = (wv.is_nan() && gv.is_nan()) || wv == gv || (gv - wv).abs() <= tol;
                if !ok {
                    return Err(format!("output {j}: expected {wj}, got {gj} (tolerance {tol:e})"));
                }
            }
            Ok(None)
        }
        Rule::Lanes { rows, n, axis0 } => {
            let x = &c.bufs[0].init;
            let (w, g) = (&want[0], &got[0]);
            let at = |i: usize| x.get(i).map_or(0.0, |v| v.f());
            for (j, (wj, gj)) in w.iter().zip(g).enumerate() {
                let lane: Vec<f64> = if axis0 {
                    (0..rows).map(|r| at(r * n + j % n)).collect()
                } else {
                    (0..n).map(|k| at(j / n * n + k)).collect()
                };
                let abs: f64 = lane.iter().map(|v| v.abs()).sum();
                let tol = lane.len() as f64 * ulp(t, 1.0) * abs;
                let (wv, gv) = (wj.f(), gj.f());
                let ok = (wv.is_nan() && gv.is_nan()) || wv == gv || (gv - wv).abs() <= tol;
                if !ok {
                    return Err(format!("output {j}: expected {wj}, got {gj} (tolerance {tol:e})"));
                }
            }
            Ok(None)
        }
        Rule::Atomic { op } => {
            let (wm, gm, gold) = (&want[0], &got[0], &got[1]);
            let vals = &c.bufs[1].init;
            let init = &c.bufs[0].init;
            for a in 0..wm.len() {
                let ok = if op == "atomic_add" && t.is_float() {
                    let abs: f64 =
                        init[a].f().abs() + vals.iter().skip(a).step_by(wm.len()).map(|v| v.f().abs()).sum::<f64>();
                    (gm[a].f() - wm[a].f()).abs() <= vals.len() as f64 * ulp(t, 1.0) * abs
                } else if op == "atomic_xchg" || op == "atomic_cas" {
                    true // checked below
                } else {
                    same(wm[a], gm[a])
                };
                if !ok {
                    return Err(format!("address {a}: final value expected {}, got {}", wm[a], gm[a]));
                }
            }
            let lanes = |a: usize| (0..vals.len()).filter(move |i| i % wm.len() == a);
            if op == "atomic_xchg" {
                // Per address: the old values and the final value are the initial value and
                // the values written, in some order.
                for a in 0..wm.len() {
                    let mut seen: Vec<V> = lanes(a).map(|i| gold[i]).chain([gm[a]]).collect();
                    let mut expect: Vec<V> = lanes(a).map(|i| vals[i]).chain([init[a]]).collect();
                    let key = |v: &V| v.f().to_bits();
                    seen.sort_by_key(key);
                    expect.sort_by_key(key);
                    if seen.iter().zip(&expect).any(|(s, e)| !same(*s, *e)) {
                        return Err(format!("address {a}: old and final values are not a permutation of the values written and the initial value"));
                    }
                }
            }
            if op == "atomic_cas" {
                // Per address: exactly one lane saw 0 and wrote its value; every other lane
                // saw that value.
                for (a, &final_value) in gm.iter().enumerate().take(wm.len()) {
                    let winners: Vec<usize> = lanes(a).filter(|&i| gold[i].f() == 0.0).collect();
                    if lanes(a).next().is_none() {
                        continue;
                    }
                    if winners.len() != 1
                        || !same(final_value, vals[winners[0]])
                        || lanes(a).any(|i| i != winners[0] && !same(gold[i], final_value))
                    {
                        return Err(format!(
                            "address {a}: compare-and-swap results are inconsistent (winners {winners:?}, final {})",
                            gm[a]
                        ));
                    }
                }
            }
            Ok(None)
        }
    }
}

/// The outcome of a case whose device outputs are `got` and reference outputs `want`.
pub(super) fn judge(
    cpu: &CpuDevice,
    c: &Case,
    kernel: &Kernel,
    backend: Backend,
    want: &[Vec<V>],
    got: &[Vec<V>],
) -> Outcome {
    let mut checked = compare(c, backend, want, got);
    if backend == Backend::Vulkan && checked != Ok(None) {
        // Vulkan may flush f16/f32 (and bf16, computed in f32) subnormals to zero (SPIR-V
        // without the DenormPreserve mode; NVIDIA's driver does, lavapipe does not): a
        // result computed with flushed inputs and outputs also conforms.
        if let Some(ftz) = flushed_reference(cpu, c, kernel, want) {
            // Element by element: the flushed result where the device gave exactly that,
            // the exact one elsewhere.
            let merged: Vec<Vec<V>> = want
                .iter()
                .enumerate()
                .map(|(o, w)| {
                    w.iter()
                        .enumerate()
                        .map(|(i, &x)| {
                            let g = got[o].get(i).copied();
                            ftz.iter()
                                .map(|f| f[o][i])
                                .find(|&f| g.is_some_and(|g| same(f, g)))
                                .unwrap_or(x)
                        })
                        .collect()
                })
                .collect();
            // The better of the two; on failure the merged comparison's message, which
            // names an element that flushing does not explain.
            let rank = |r: &Result<Option<String>, String>| match r {
                Ok(None) => 0,
                Ok(Some(_)) => 1,
                Err(_) => 2,
            };
            let flushed = compare(c, backend, &merged, got);
            if rank(&flushed) <= rank(&checked) {
                checked = flushed;
            }
        }
    }
    match checked {
        Ok(None) => Outcome::Pass,
        Ok(Some(m)) => Outcome::Known(m),
        Err(m) => match c.known.iter().find(|k| k.0 == backend) {
            Some(k) => Outcome::Known(format!("{}: {m}", k.1)),
            None => Outcome::Fail(m),
        },
    }
}

/// Judges one element as the matrix does, for tests of the classification (e.g. against
/// results seen on a GPU): the element-wise case `op` on `dtype` with one element, inputs
/// `inputs` (exact values of the type), run on the interpreter for the reference, and `got`
/// taken as the output of a device of `backend`. Returns the reference and the outcome.
pub fn classify_element(backend: Backend, op: &str, dtype: ScalarType, inputs: &[f64], got: f64) -> (f64, Outcome) {
    let mut c = cases()
        .into_iter()
        .find(|c| c.op == op && c.dtype == dtype && c.shape == "1")
        .unwrap_or_else(|| panic!("no element-wise case {op} {}", dtype.name()));
    let kernel = c
        .kernel
        .clone()
        .unwrap_or_else(|e| panic!("{op} {}: {e}", dtype.name()));
    let ins: Vec<&mut Buf> = c.bufs.iter_mut().filter(|b| !b.output).collect();
    assert_eq!(ins.len(), inputs.len(), "{op} takes {} inputs", ins.len());
    for (b, &x) in ins.into_iter().zip(inputs) {
        let v = quantize(b.dtype, V::F(x));
        assert!(same(v, V::F(x)), "{x:e} is not a {} value", b.dtype.name());
        b.init = vec![v];
    }
    let cpu = CpuDevice::new();
    let want = run_on(&cpu, &c, &kernel).expect("the interpreter runs the case");
    let outcome = judge(&cpu, &c, &kernel, backend, &want, &[vec![V::F(got)]]);
    (want[0][0].f(), outcome)
}

/// The outcomes of one device.
pub struct DeviceResults {
    pub id: String,
    pub outcomes: Vec<Outcome>,
}

/// Every case on every device.
pub struct Matrix {
    pub cases: Vec<Case>,
    pub devices: Vec<DeviceResults>,
}

/// Runs every case on the interpreter (the reference) and on each device of `devices`; the
/// interpreter is also checked against itself (which exercises the atomics' checks).
pub fn run_matrix(devices: &[Arc<dyn Device>]) -> Matrix {
    run_cases(devices, cases())
}

/// Runs `cases` as [`run_matrix`] runs every case: a part of the matrix, for a test that
/// checks one family of ops on its own.
pub fn run_cases(devices: &[Arc<dyn Device>], cases: Vec<Case>) -> Matrix {
    let cpu = CpuDevice::new();
    let reference: Vec<Option<rutile::Result<Vec<Vec<V>>>>> = cases
        .iter()
        .map(|c| c.kernel.as_ref().ok().map(|k| run_on(&cpu, c, k)))
        .collect();
    let mut all: Vec<(String, &dyn Device)> = vec![("cpu (interpreter)".into(), &cpu)];
    for d in devices {
        all.push((d.id(), d.as_ref()));
    }
    let mut results = Vec::new();
    for (id, d) in all {
        let props = d.properties();
        let backend = props.backend;
        let mut outcomes = Vec::new();
        for (c, r) in cases.iter().zip(&reference) {
            let (Ok(kernel), Some(r)) = (&c.kernel, r) else {
                outcomes.push(Outcome::Unsupported("not accepted by the builder".into()));
                continue;
            };
            let missing: Vec<&str> = c
                .bufs
                .iter()
                .map(|b| b.dtype)
                .filter(|t| !props.supported_types.contains(t))
                .map(|t| t.name())
                .collect();
            let outcome = if !missing.is_empty() {
                Outcome::Unsupported(format!("the device does not support {}", missing.join(", ")))
            } else {
                match (r, run_on(d, c, kernel)) {
                    (Err(e), _) => Outcome::Fail(format!("the interpreter failed: {e}")),
                    (_, Err(e)) if is_unsupported(&e) => Outcome::Unsupported(e.to_string()),
                    (_, Err(e)) => Outcome::Fail(format!("error: {e}")),
                    (Ok(want), Ok(got)) => judge(&cpu, c, kernel, backend, want, &got),
                }
            };
            outcomes.push(outcome);
        }
        results.push(DeviceResults { id, outcomes });
    }
    Matrix {
        cases,
        devices: results,
    }
}

#[derive(Default, Clone, Copy)]
pub(super) struct Counts {
    pass: usize,
    fail: usize,
    unsupported: usize,
    known: usize,
}

impl Counts {
    pub(crate) fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail(_) => self.fail += 1,
            Outcome::Unsupported(_) => self.unsupported += 1,
            Outcome::Known(_) => self.known += 1,
        }
    }
    pub(crate) fn cell(&self) -> String {
        if self.pass + self.fail + self.unsupported + self.known == 0 {
            return ".".into();
        }
        let mut s = String::new();
        if self.fail > 0 {
            write!(s, "F{}", self.fail).unwrap();
        }
        if self.known > 0 {
            write!(s, "K{}", self.known).unwrap();
        }
        if self.pass > 0 {
            write!(s, "{}{}", if s.is_empty() { "" } else { "+" }, self.pass).unwrap();
        }
        if self.unsupported > 0 {
            write!(s, "{}U{}", if s.is_empty() { "" } else { "+" }, self.unsupported).unwrap();
        }
        s
    }
}

impl Matrix {
    /// The number of failures over all devices.
    pub fn failures(&self) -> usize {
        self.devices
            .iter()
            .flat_map(|d| &d.outcomes)
            .filter(|o| matches!(o, Outcome::Fail(_)))
            .count()
    }

    /// The matrix as text: per device, a table op × dtype (each cell: `F` failures, `K`
    /// known mismatches, passes, `U` unsupported; `-` where the builder rejects the type),
    /// the totals, then every failure, known mismatch and unsupported combination.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let mut rows: Vec<&str> = Vec::new();
        for c in &self.cases {
            if !rows.contains(&c.op.as_str()) {
                rows.push(&c.op);
            }
        }
        let rejected = |i: usize| self.cases[i].kernel.is_err();
        // The op column fits the longest row's name, so that the type columns line up.
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(20);
        // Each type column one wider than the longest type name (`f8e4m3fnuz`).
        let column = DTYPES.iter().map(|t| t.name().len()).max().unwrap_or(0).max(7) + 1;
        for d in &self.devices {
            writeln!(
                s,
                "\n== {} ==  (cells: F=fail K=known, passes, U=unsupported; - = type not accepted by the op)",
                d.id
            )
            .unwrap();
            write!(s, "{:<width$}", "op").unwrap();
            for t in DTYPES {
                write!(s, "{:>column$}", t.name()).unwrap();
            }
            writeln!(s).unwrap();
            let mut total = Counts::default();
            let mut not_accepted = 0;
            for row in &rows {
                write!(s, "{row:<width$}").unwrap();
                for t in DTYPES {
                    let mut cnt = Counts::default();
                    let mut any = false;
                    let mut all_rejected = true;
                    for (i, c) in self.cases.iter().enumerate() {
                        if c.op == *row && c.dtype == t {
                            any = true;
                            if rejected(i) {
                                not_accepted += 1;
                            } else {
                                all_rejected = false;
                                cnt.add(&d.outcomes[i]);
                            }
                        }
                    }
                    let cell = if !any {
                        "".into()
                    } else if all_rejected {
                        "-".into()
                    } else {
                        cnt.cell()
                    };
                    write!(s, "{cell:>column$}").unwrap();
                    for (i, c) in self.cases.iter().enumerate() {
                        if c.op == *row && c.dtype == t && !rejected(i) {
                            total.add(&d.outcomes[i]);
                        }
                    }
                }
                writeln!(s).unwrap();
            }
            writeln!(
                s,
                "{}: {} pass, {} FAIL, {} unsupported, {} known; {} op/type combinations not accepted by the builder",
                d.id, total.pass, total.fail, total.unsupported, total.known, not_accepted
            )
            .unwrap();
        }
        for d in &self.devices {
            let mut unsupported: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (c, o) in self.cases.iter().zip(&d.outcomes) {
                match o {
                    Outcome::Fail(m) => {
                        writeln!(s, "FAIL  {} {} {} [{}]: {m}", d.id, c.op, c.dtype.name(), c.shape).unwrap()
                    }
                    Outcome::Known(m) => {
                        writeln!(s, "KNOWN {} {} {} [{}]: {m}", d.id, c.op, c.dtype.name(), c.shape).unwrap()
                    }
                    Outcome::Unsupported(m) if c.kernel.is_ok() => {
                        let m: String = m.chars().take(160).collect();
                        let e = unsupported.entry(m).or_default();
                        let key = format!("{}:{}", c.op, c.dtype.name());
                        if !e.contains(&key) {
                            e.push(key);
                        }
                    }
                    _ => {}
                }
            }
            for (m, which) in unsupported {
                writeln!(
                    s,
                    "UNSUPPORTED {} ({} op/types): {m}\n    {}",
                    d.id,
                    which.len(),
                    which.join(" ")
                )
                .unwrap();
            }
        }
        s
    }
}
