//! Cases of `join`, `split`, `interleave` and `cat` on every type: programs of [`BLOCK`]
//! lanes load `x` and `y` (masked, `i < n`) and store the combined block whole, so the
//! output has `2·BLOCK` elements per program; `split` takes an input of pairs.

use super::*;

/// The kernel of `op` on element type `t`.
fn kernel(op: &str, t: ScalarType) -> Result<Kernel, String> {
    built(Kernel::build(&kname(op, &[t]), |k| {
        let (px, py) = (k.arg_ptr("x", t), k.arg_ptr("y", t));
        let (o0, o1) = (k.arg_ptr("out0", t), k.arg_ptr("out1", t));
        let n = k.arg_i32("n");
        let pid = k.program_id(0);
        let offs = pid * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        // The [BLOCK, 2] block of pairs at 2·offs (+ 0 or 1).
        let pairs = (offs * 2).expand_dims(1) + k.arange(0, 2).expand_dims(0);
        let wide = pid * (2 * BLOCK) + k.arange(0, 2 * BLOCK);
        match op {
            "split" => {
                let v = k.load_masked(px + pairs, pairs.lt(n * 2), 0);
                let (a, b) = k.split(v);
                k.store_masked(o0 + offs, a, mask);
                k.store_masked(o1 + offs, b, mask);
            }
            _ => {
                let x = k.load_masked(px + offs, mask, 0);
                let y = k.load_masked(py + offs, mask, 0);
                match op {
                    "join" => k.store(o0 + pairs, k.join(x, y)),
                    "interleave" => k.store(o0 + wide, k.interleave(x, y)),
                    _ => k.store(o0 + wide, k.cat(x, y)),
                }
            }
        }
    }))
}

pub(super) fn join_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for op in ["join", "split", "interleave", "cat"] {
        for t in DTYPES {
            let kernel = kernel(op, t);
            for (variant, n) in [1usize, RAGGED].into_iter().enumerate() {
                let grid = (n as u32).div_ceil(BLOCK as u32);
                let wide = grid as usize * 2 * BLOCK as usize;
                let seed = 900 + variant as u64 * 4;
                let (x, y) = if op == "split" {
                    (generate(t, 2 * n, Domain::General, seed), vec![V::I(0); 1])
                } else {
                    (
                        generate(t, n, Domain::General, seed),
                        generate(t, n, Domain::General, seed + 1),
                    )
                };
                let (len0, len1) = if op == "split" { (n, n) } else { (wide, 1) };
                let buf = |init: Vec<V>, output: bool| Buf { dtype: t, init, output };
                cases.push(Case {
                    op: op.to_string(),
                    dtype: t,
                    shape: format!("{n}/{BLOCK}"),
                    kernel: kernel.clone(),
                    bufs: vec![
                        buf(x, false),
                        buf(y, false),
                        buf(vec![quantize(t, V::I(0)); len0], true),
                        buf(vec![quantize(t, V::I(0)); len1], true),
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
