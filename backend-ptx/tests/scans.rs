//! Scans, reductions with a combine, `sort`, `gather`, `histogram` and the standard
//! library's compositions (`flip`, `topk`, `xor_sum`, `softmax`, `swizzle2d`), lowered for
//! NVIDIA targets of 1 to 8 warps: their PTX must pass `ptxas` for sm_80 and sm_90. What they
//! compute is checked in the SIMT simulator (`rutile-ir`'s `tests/scans.rs`) and on devices
//! (the conformance matrix).

mod support;

use rutile_ir::target::{Specialization, Target};
use rutile_ir::ScalarType::{self, F16, F32, I32, I64, U8};
use rutile_ir::{Kernel, KernelBuilder, Value};

/// A kernel over a masked `[rows, cols]` (1-D when `rows` is 0) block of `elem`: `f` of
/// it, stored densely.
fn kernel(
    name: &str,
    elem: ScalarType,
    rows: u32,
    cols: u32,
    f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>) -> Value<'b>,
) -> Kernel {
    Kernel::build(name, |k| {
        let x = k.arg_ptr("x", elem);
        let n = k.arg_i32("n");
        let c = k.arange(0, cols as i32);
        let (offs, mask) = if rows == 0 {
            (c, c.lt(n))
        } else {
            let r = k.arange(0, rows as i32).expand_dims(1);
            let offs = r * cols as i32 + c.expand_dims(0);
            (offs, offs.lt(n))
        };
        let v = k.load_masked(x + offs, mask, 0);
        let y = f(k, v);
        let out = k.arg_ptr("y", y.dtype().unwrap());
        let dense = match y.shape().as_slice() {
            [] => k.scalar(0, I32),
            [m] => k.arange(0, *m as i32),
            [a, b] => k.arange(0, *a as i32).expand_dims(1) * (*b as i32) + k.arange(0, *b as i32).expand_dims(0),
            _ => unreachable!(),
        };
        k.store(out + dense, y);
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assemble(label: &str, k: &Kernel) {
    for warps in [1, 4, 8] {
        let t = rutile_ir::lower::lower(
            k,
            &Target::nvidia(warps, 48 * 1024),
            &Specialization::none(k.params.len()),
        )
        .unwrap_or_else(|e| panic!("{label}, {warps} warps: {e}"));
        support::emit_80_90(&t);
    }
}

#[test]
fn scans_and_combine_reductions_assemble() {
    for elem in [F32, F16, I32, I64] {
        for (rows, cols) in [(0, 256), (16, 32)] {
            for axis in if rows == 0 { vec![0] } else { vec![0, 1] } {
                for reverse in [false, true] {
                    let label = format!("cumsum {elem} {rows}x{cols} axis {axis} reverse {reverse}");
                    assemble(
                        &label,
                        &kernel("cumsum", elem, rows, cols, |_, v| v.cumsum(axis, reverse)),
                    );
                    let label = format!("cumprod {elem} {rows}x{cols} axis {axis} reverse {reverse}");
                    assemble(
                        &label,
                        &kernel("cumprod", elem, rows, cols, |_, v| v.cumprod(axis, reverse)),
                    );
                }
                let label = format!("tuple scan {elem} {rows}x{cols} axis {axis}");
                assemble(
                    &label,
                    &kernel("tuple_scan", elem, rows, cols, |k, v| {
                        k.associative_scan_n(&[v, v + 1], axis, false, |_, a, b| {
                            vec![a[0] * b[0], a[1] * b[0] + b[1]]
                        })[1]
                    }),
                );
                let label = format!("argmax reduction {elem} {rows}x{cols} axis {axis}");
                assemble(
                    &label,
                    &kernel("argmax", elem, rows, cols, |k, v| {
                        let idx = k.arange(0, cols as i32);
                        let idx = if rows == 0 {
                            idx
                        } else {
                            idx.expand_dims(0).broadcast_to(&[rows, cols])
                        };
                        k.reduce_n(&[v, idx], axis, true, |k, a, b| {
                            let take = b[0].gt(a[0]) | (b[0].eq(a[0]) & b[1].lt(a[1]));
                            vec![k.where_(take, b[0], a[0]), k.where_(take, b[1], a[1])]
                        })[1]
                    }),
                );
            }
        }
    }
}

#[test]
fn sorts_gathers_and_histograms_assemble() {
    for elem in [F32, F16, I32, U8] {
        for (rows, cols) in [(0, 256), (16, 32)] {
            for axis in if rows == 0 { vec![0] } else { vec![0, 1] } {
                for descending in [false, true] {
                    let label = format!("sort {elem} {rows}x{cols} axis {axis} descending {descending}");
                    assemble(
                        &label,
                        &kernel("sort", elem, rows, cols, |_, v| v.sort(axis, descending)),
                    );
                }
                let label = format!("gather {elem} {rows}x{cols} axis {axis}");
                assemble(
                    &label,
                    &kernel("gather", elem, rows, cols, |_, v| {
                        let len = if rows == 0 || axis == 1 { cols } else { rows };
                        let idx = (v.to(I64) & 0xff) % len as i64;
                        v.gather(idx, axis)
                    }),
                );
            }
        }
        if !elem.is_float() {
            for bins in [16, 512] {
                assemble(
                    &format!("histogram {elem} {bins}"),
                    &kernel("histogram", elem, 0, 256, |_, v| v.histogram(bins)),
                );
            }
        }
    }
}

/// The standard library's compositions (`flip`, `topk`, `xor_sum`, `softmax`,
/// `swizzle2d`) along each axis of 1-D and 2-D blocks assemble for sm_80 and sm_90.
#[test]
fn standard_library_compositions_assemble() {
    for (rows, cols, axes) in [(0u32, 256u32, vec![0u32]), (16, 32, vec![0, 1])] {
        for axis in axes {
            let at = format!("{rows}x{cols} axis {axis}");
            for elem in [F32, F16, I32] {
                assemble(
                    &format!("flip {elem} {at}"),
                    &kernel("flip", elem, rows, cols, |_, v| v.flip(axis)),
                );
                assemble(
                    &format!("topk {elem} {at}"),
                    &kernel("topk", elem, rows, cols, |_, v| v.topk(4, axis)),
                );
            }
            let xor = kernel("xor_sum", I32, rows, cols, |_, v| v.xor_sum(axis, false));
            assemble(&format!("xor_sum {at}"), &xor);
            let softmax = kernel("softmax", F32, rows, cols, |_, v| v.softmax(axis, false));
            assemble(&format!("softmax {at}"), &softmax);
        }
    }
    let swizzle = kernel("swizzle2d", I32, 16, 32, |k, v| {
        let (i, j) = (k.arange(0, 16).expand_dims(1), k.arange(0, 32).expand_dims(0));
        let (new_i, new_j) = k.swizzle2d(i, j, 16, 32, (v & 7) + 1);
        new_i * 32 + new_j
    });
    assemble("swizzle2d", &swizzle);
}
