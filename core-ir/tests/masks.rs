//! Masks computed once a run: a comparison the axis analysis finds constant over runs of a
//! thread's consecutive elements (`cols < n` with `n` divisible by 16) is one register a
//! run in the per-thread IR, not one an element; where `n` is not known divisible, one an
//! element. Either way the kernel computes in the SIMT simulator what the interpreter does,
//! at widths that end inside a thread's vector.

mod tutorial_support;

use rutile_ir::interp::{ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::{runtime_spec, Rng};
use rutile_ir::thread::{Expr, Stmt};
use rutile_ir::ScalarType::{self, F16, F32};
use rutile_ir::{Kernel, KernelBuilder};
use tutorial_support::simulate_targets;

const BLOCK: i32 = 1024;

/// `Y[c] = where(c < n, 2 X[c], -3) + sum(where(c < n, X[c], 0))` over a block of
/// `BLOCK` columns, X loaded and Y stored whole (so that a thread holds vectors of
/// consecutive columns whatever `n`): the masked-out elements show in Y, so a mask shared
/// past where it holds changes the output.
fn masked_where(elem: ScalarType) -> Kernel {
    Kernel::build("masked_where", |k: &KernelBuilder| {
        let x = k.arg_ptr("X", elem);
        let y = k.arg_ptr("Y", elem);
        let n = k.arg_i32("n");
        let cols = k.arange(0, BLOCK);
        let mask = cols.lt(n);
        let v = k.load(x + cols).to(F32);
        let doubled = k.where_(mask, v * 2.0, -3.0);
        let total = k.where_(mask, v, 0.0).sum(0);
        k.store(y + cols, (doubled + total).to(elem));
    })
    .unwrap()
}

fn args(n: i64) -> Vec<ArgValue> {
    vec![
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
        ArgValue::Int(n),
    ]
}

fn buffers(rng: &mut Rng, elem: ScalarType) -> Vec<HostBuffer> {
    let x = rng.f32s(BLOCK as usize, -2.0, 2.0);
    match elem {
        F16 => vec![
            HostBuffer::from_slice(&x.iter().map(|&v| half::f16::from_f32(v)).collect::<Vec<_>>()),
            HostBuffer::from_slice(&vec![half::f16::ZERO; BLOCK as usize]),
        ],
        _ => vec![
            HostBuffer::from_slice(&x),
            HostBuffer::from_slice(&vec![0.0f32; BLOCK as usize]),
        ],
    }
}

/// Comparisons in the lowered kernel.
fn comparisons(kernel: &Kernel, target: &Target, spec: &Specialization) -> usize {
    let t = lower(kernel, target, spec).unwrap();
    let mut n = 0;
    t.walk(&mut |s| {
        n += matches!(
            s,
            Stmt::Set {
                expr: Expr::Compare(..),
                ..
            }
        ) as usize;
    });
    n
}

/// On 4 warps of 32 a thread holds 8 columns, in one 16-byte vector (f16) or two (f32):
/// with `n` divisible by 16 the mask is 1 or 2 comparisons, without 8.
#[test]
fn a_mask_is_one_comparison_a_vector() {
    let target = Target::nvidia(4, 48 * 1024);
    for (elem, vectors) in [(F16, 1), (F32, 2)] {
        let kernel = masked_where(elem);
        let divisible = comparisons(&kernel, &target, &runtime_spec(&args(1008)));
        let ragged = comparisons(&kernel, &target, &runtime_spec(&args(1001)));
        assert_eq!(ragged, 8, "{elem}: comparisons where n is not known divisible by 16");
        assert_eq!(divisible, vectors, "{elem}: comparisons where n is divisible by 16");
    }
}

/// Run in the simulator against the interpreter on several targets, at widths divisible by
/// 16 (the mask shared by each vector) and not (ending inside a vector), and past the block.
#[test]
fn masks_shared_by_runs_compute_what_the_interpreter_does() {
    let mut rng = Rng::new(71);
    for elem in [F16, F32] {
        let kernel = masked_where(elem);
        for n in [1024, 1008, 16, 1001, 1015, 9, 0, 2000] {
            let bufs = buffers(&mut rng, elem);
            simulate_targets(&format!("{elem}, n = {n}"), &kernel, [1, 1, 1], &args(n), &bufs, 1e-5);
        }
    }
}

/// Pointers into one buffer compare by their offsets, as Triton compares addresses: a mask
/// `x + c < x + n` and the other five comparisons of the same pointers (against `x + n`
/// and against `x + c` shifted by a constant), each stored as a flag, compute in the
/// simulator what the interpreter does, at widths that end inside a thread's vector.
/// Pointers into two parameters are refused by both, saying why (two parameters may be
/// bound to one buffer).
#[test]
fn pointers_into_one_buffer_compare_by_offset() {
    use rutile_ir::ir::CmpOp;
    const B: i32 = 256;
    let kernel = Kernel::build("pointer_masks", |k: &KernelBuilder| {
        let x = k.arg_ptr("X", F32);
        let flags = k.arg_ptr("flags", ScalarType::I32);
        let y = k.arg_ptr("Y", F32);
        let n = k.arg_i32("n");
        let cols = k.arange(0, B);
        let (p, end, shifted) = (x + cols, x + n, x + (cols + 3) / 2);
        let mask = p.lt(end);
        // A scalar comparison too, as a branch's condition: uniform, so every thread takes
        // the same side.
        let scale = k.if_else(
            end.gt(x + 100),
            || vec![k.full(&[], 2.0, F32)],
            || vec![k.full(&[], -3.0, F32)],
        );
        k.store_masked(y + cols, k.load_masked(p, mask, 0.0) * scale[0], mask);
        for (i, op) in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne]
            .into_iter()
            .enumerate()
        {
            let c = match op {
                CmpOp::Lt => p.lt(end),
                CmpOp::Le => p.le(shifted),
                CmpOp::Gt => p.gt(end),
                CmpOp::Ge => p.ge(shifted),
                CmpOp::Eq => p.eq(shifted),
                CmpOp::Ne => p.ne(end),
            };
            k.store(flags + cols + i as i32 * B, k.where_(c, 1, 0));
        }
    })
    .unwrap();
    let mut rng = Rng::new(0x9c);
    for n in [0, 1, 37, 128, 255] {
        let x: Vec<f32> = (0..B).map(|_| rng.uniform(-2.0, 2.0) as f32).collect();
        let bufs = [
            HostBuffer::from_slice(&x),
            HostBuffer::from_slice(&vec![-1i32; 6 * B as usize]),
            HostBuffer::from_slice(&vec![7.5f32; B as usize]),
        ];
        let args = [
            ArgValue::Ptr { buffer: 0, offset: 0 },
            ArgValue::Ptr { buffer: 1, offset: 0 },
            ArgValue::Ptr { buffer: 2, offset: 0 },
            ArgValue::Int(n),
        ];
        // The interpreter's flags are the comparisons of the offsets.
        let mut want = bufs.to_vec();
        rutile_ir::interp::run(&kernel, [1, 1, 1], &args, &mut want).unwrap();
        let flags: Vec<i32> = want[1].to_vec().unwrap();
        let b = B as i64;
        for c in 0..b {
            let (end, shifted) = (n, (c + 3) / 2);
            let expect = [c < end, c <= shifted, c > end, c >= shifted, c == shifted, c != end];
            for (i, e) in expect.into_iter().enumerate() {
                assert_eq!(
                    flags[i * B as usize + c as usize],
                    e as i32,
                    "n = {n}, column {c}, comparison {i}"
                );
            }
        }
        simulate_targets(
            &format!("pointer masks, n = {n}"),
            &kernel,
            [1, 1, 1],
            &args,
            &bufs,
            0.0,
        );
    }
    // Into two parameters: refused by the interpreter and the lowering alike.
    let two = Kernel::build("two_buffers", |k: &KernelBuilder| {
        let (x, y) = (k.arg_ptr("X", F32), k.arg_ptr("Y", F32));
        let cols = k.arange(0, 32);
        let mask = (x + cols).lt(y + cols);
        k.store_masked(y + cols, k.load(x + cols), mask);
    })
    .unwrap();
    let mut bufs = [
        HostBuffer::from_slice(&[1.0f32; 32]),
        HostBuffer::from_slice(&[0.0f32; 32]),
    ];
    let args = [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
    ];
    let e = rutile_ir::interp::run(&two, [1, 1, 1], &args, &mut bufs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("compares pointers into two parameters"), "{e}");
    let e = lower(&two, &Target::nvidia(1, 48 * 1024), &Specialization::all(2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "compares pointers into two parameters (`X` and `Y`); only pointers into one parameter's buffer compare"
        ),
        "{e}"
    );
}
