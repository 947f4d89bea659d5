//! Cases of `cluster_reduce`: each of 8 programs, in clusters of 4, passes one element and
//! stores what its cluster combines. Float sums add integers of moderate size, exact in any
//! order and rounding, so every result is compared bit for bit (the interpreter adds in f64
//! and rounds once, a GPU adds in the type). Devices without clusters report the row
//! unsupported. `cluster_reduce_n` passes a pair each, combined as affine maps compose
//! (`(a0, a1) ⊕ (b0, b1) = (a0·b0, a1·b0 + b1)`: associative, not commutative, so a wrong
//! rank order shows), on small integers that every float type holds exactly.

use super::*;
use rutile::ReduceOp;

/// Programs a cluster, and of the grid (two clusters).
const CLUSTER: u32 = 4;
const PROGRAMS: usize = 8;

pub(super) fn cluster_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (op, reduce) in [
        ("cluster_reduce(sum)", ReduceOp::Sum),
        ("cluster_reduce(max)", ReduceOp::Max),
        ("cluster_reduce(min)", ReduceOp::Min),
    ] {
        for (seed, t) in DTYPES.into_iter().enumerate() {
            let kernel = built(Kernel::build(&kname(op, &[t]), |k| {
                let x = k.arg_ptr("x", t);
                let out = k.arg_ptr("out", t);
                let pid = k.program_id(0);
                k.store(out + pid, k.load(x + pid).cluster_reduce(reduce));
            }));
            let init = if reduce == ReduceOp::Sum && t.is_float() {
                // Non-zero integers below 2^10: their sums of four are exact in f16 and up.
                small_integers(PROGRAMS, 1000.0, 7.0, 0xC1 + seed as u64)
            } else {
                generate(t, PROGRAMS, Domain::General, 0xC1 + seed as u64)
            };
            cases.push(case(op, t, kernel, init));
        }
    }
    for (seed, t) in DTYPES.into_iter().enumerate() {
        let op = "cluster_reduce_n(affine)";
        let kernel = built(Kernel::build(&kname(op, &[t]), |k| {
            let x = k.arg_ptr("x", t);
            let out = k.arg_ptr("out", t);
            let pid = k.program_id(0);
            let (scale, shift) = (k.load(x + 2 * pid), k.load(x + (2 * pid + 1)));
            let composed = k.cluster_reduce_n(&[scale, shift], |_, a, b| vec![a[0] * b[0], a[1] * b[0] + b[1]]);
            k.store(out + 2 * pid, composed[0]);
            k.store(out + (2 * pid + 1), composed[1]);
        }));
        let init = if t.is_float() {
            // Non-zero integers of magnitude up to 4: products of four and their sums stay
            // below 2^10, exact in f16 and up.
            small_integers(2 * PROGRAMS, 4.0, 3.0, 0xA7 + seed as u64)
        } else {
            generate(t, 2 * PROGRAMS, Domain::General, 0xA7 + seed as u64)
        };
        cases.push(case(op, t, kernel, init));
    }
    cases
}

/// `n` random integers of magnitude up to `most`, `zero` in place of 0, as floats.
fn small_integers(n: usize, most: f32, zero: f64, seed: u64) -> Vec<V> {
    let mut rng = rutile::ir::testing::Rng::new(seed);
    (0..n)
        .map(|_| {
            let v = rng.f32s(1, -most, most)[0].round();
            V::F(if v == 0.0 { zero } else { v as f64 })
        })
        .collect()
}

/// A case of `PROGRAMS` programs in clusters of `CLUSTER` reading `init` (of type `t`) and
/// writing as many elements, compared bit for bit.
fn case(op: &str, t: ScalarType, kernel: Result<Kernel, String>, init: Vec<V>) -> Case {
    let len = init.len();
    Case {
        op: op.to_string(),
        dtype: t,
        shape: format!("{PROGRAMS}/{CLUSTER}"),
        kernel,
        bufs: vec![Buf::input(t, init), Buf::zeroed_output(t, len)],
        n: None,
        grid: PROGRAMS as u32,
        cluster: CLUSTER,
        rule: Rule::Exact,
        known: Vec::new(),
    }
}
