//! Cases of block pointers and tensor descriptors on every type: two programs load a
//! 16 x 32 window of a 13 x 30 tensor (row stride 32) that leaves it on every side, through
//! a block pointer checked on both dimensions (zeros outside), and copy the same windows
//! into a second tensor through tensor descriptors (nothing written outside).

use super::*;
use rutile::Padding;

/// The tensor's rows (the `n` argument) and columns, its row stride, and the window.
const ROWS: i32 = 13;
const COLS: i32 = 30;
const STRIDE: i32 = 32;
const WINDOW: [u32; 2] = [16, 32];

/// The kernel of `op` on element type `t`: program `pid`'s window is at `(8 pid - 3,
/// 5 - 9 pid)`.
fn kernel(op: &str, t: ScalarType) -> Result<Kernel, String> {
    built(Kernel::build(&kname(op, &[t]), |k| {
        let (x, out) = (k.arg_ptr("x", t), k.arg_ptr("out", t));
        let rows = k.arg_i32("n");
        let pid = k.program_id(0);
        let at = (pid * 8 - 3, 5 - pid * 9);
        match op {
            "load_block" => {
                let p = k.make_block_ptr(x, (rows, COLS), (STRIDE, 1), at, &WINDOW, &[1, 0]);
                let dense = k.arange(0, 16).expand_dims(1) * 32 + k.arange(0, 32).expand_dims(0);
                k.store(out + pid * 512 + dense, k.load_block(&p, &[0, 1], Padding::Zero));
            }
            _ => {
                let src = k.make_tensor_descriptor(x, (rows, COLS), (STRIDE, 1), &WINDOW);
                let dst = k.make_tensor_descriptor(out, (rows, COLS), (STRIDE, 1), &WINDOW);
                dst.store(at, src.load(at));
            }
        }
    }))
}

pub(super) fn block_ptr_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (i, op) in ["load_block", "tensor_descriptor"].into_iter().enumerate() {
        for t in DTYPES {
            let x = generate(t, (ROWS * STRIDE) as usize, Domain::General, 960 + i as u64);
            let out_len = if op == "load_block" {
                2 * 512
            } else {
                (ROWS * STRIDE) as usize
            };
            cases.push(Case {
                op: format!("{op}(16x32 of {ROWS}x{COLS})"),
                dtype: t,
                shape: format!("{ROWS}x{COLS}"),
                kernel: kernel(op, t),
                bufs: vec![
                    Buf {
                        dtype: t,
                        init: x,
                        output: false,
                    },
                    Buf {
                        dtype: t,
                        init: vec![quantize(t, V::I(0)); out_len],
                        output: true,
                    },
                ],
                n: Some(ROWS),
                grid: 2,
                cluster: 1,
                rule: Rule::Exact,
                known: Vec::new(),
            });
        }
    }
    cases
}
