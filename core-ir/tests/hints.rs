//! The compiler hints (`multiple_of`, `max_contiguous`, `max_constancy`): what the axis
//! analysis takes from them, the wider loads and stores they allow (and the same results in
//! the simulator as in the interpreter), the interpreter's faults where a value breaks its
//! promise, the printed text, and the builder's errors.

use rutile_ir::analysis::axis;
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer, InterpError};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Memory, Stmt, ThreadKernel};
use rutile_ir::ScalarType::{F32, I32};
use rutile_ir::{Kernel, KernelBuilder, Value};

/// Elements per program: eight a thread on four warps, so that 16-byte accesses fit.
const BLOCK: i32 = 1024;

/// Copies `BLOCK` elements from `starts[pid]` on: an offset loaded from memory, whose
/// alignment no analysis can know. `hint` may promise it.
fn gathered_copy(hint: impl for<'b> Fn(Value<'b>) -> Value<'b>) -> Kernel {
    Kernel::build("gathered_copy", |k| {
        let (src, dst, starts) = (k.arg_ptr("src", F32), k.arg_ptr("dst", F32), k.arg_ptr("starts", I32));
        let n = k.arg_i32("n");
        let base = hint(k.load(starts + k.program_id(0)));
        let offs = base + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        k.store_masked(dst + offs, k.load_masked(src + offs, mask, 0.0), mask);
    })
    .unwrap()
}

/// Copies with offsets wrapped by `% m`, as Triton's matmul tutorial wraps its rows: the
/// remainder hides the runs, which `hint` may promise back.
fn wrapped_copy(hint: impl for<'b> Fn(Value<'b>) -> Value<'b>) -> Kernel {
    Kernel::build("wrapped_copy", |k| {
        let (src, dst) = (k.arg_ptr("src", F32), k.arg_ptr("dst", F32));
        let m = k.arg_i32("m");
        let offs = hint((k.program_id(0) * BLOCK + k.arange(0, BLOCK)) % m);
        k.store(dst + offs, k.load(src + offs));
    })
    .unwrap()
}

/// The widths of the global loads in `k`.
fn load_widths(k: &ThreadKernel) -> Vec<usize> {
    let mut widths = Vec::new();
    k.walk(&mut |s| {
        if let Stmt::Load {
            dsts,
            mem: Memory::Global { .. },
            ..
        } = s
        {
            widths.push(dsts.len());
        }
    });
    widths
}

fn nvidia() -> Target {
    Target::nvidia(4, 48 * 1024)
}

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Runs `kernel` in the interpreter and, lowered for a Vulkan and an NVIDIA target with
/// `spec`, in the simulator: the same buffers, bit for bit.
fn same_in_the_simulator(kernel: &Kernel, grid: u32, args: &[ArgValue], bufs: &[HostBuffer], spec: &Specialization) {
    let mut want = bufs.to_vec();
    interp::run(kernel, [grid, 1, 1], args, &mut want).unwrap_or_else(|e| panic!("{e}"));
    for target in [Target::vulkan(32, 4, 48 * 1024), nvidia()] {
        let lowered = lower(kernel, &target, spec).unwrap();
        let mut got = bufs.to_vec();
        simt::run_threads(&lowered, [grid, 1, 1], args, &mut got).unwrap_or_else(|e| panic!("{e}"));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                g.as_bytes(),
                w.as_bytes(),
                "{} for {} warps",
                kernel.name,
                target.num_warps
            );
        }
    }
}

#[test]
fn a_promised_alignment_lets_loads_move_16_bytes() {
    let spec = Specialization::all(4);
    let plain = lower(&gathered_copy(|b| b), &nvidia(), &spec).unwrap();
    let hinted_kernel = gathered_copy(|b| b.multiple_of(4));
    let hinted = lower(&hinted_kernel, &nvidia(), &spec).unwrap();
    assert!(load_widths(&plain).iter().all(|&w| w == 1), "{:?}", load_widths(&plain));
    assert!(load_widths(&hinted).contains(&4), "{:?}", load_widths(&hinted));
    // Starts that keep the promise (and a ragged end): the same copy either way.
    let n = 1000;
    let mut rng = Rng::new(5);
    let starts: Vec<i32> = (0..4).map(|_| 4 * rng.i32s(1, 0, 200)[0]).collect();
    let bufs = vec![
        HostBuffer::from_slice(&rng.f32s(n + BLOCK as usize, -1.0, 1.0)),
        HostBuffer::from_slice(&vec![0.5f32; n + BLOCK as usize]),
        HostBuffer::from_slice(&starts),
    ];
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(n as i64)];
    same_in_the_simulator(&hinted_kernel, 4, &args, &bufs, &spec);
}

#[test]
fn promised_runs_survive_a_remainder() {
    // `m` not known to be a multiple of 16: the remainder's runs could end anywhere.
    let spec = Specialization {
        divisible_by_16: vec![true, true, false],
        equal_to_1: vec![false; 3],
    };
    let plain = lower(&wrapped_copy(|o| o), &nvidia(), &spec).unwrap();
    let hinted_kernel = wrapped_copy(|o| o.max_contiguous(BLOCK).multiple_of(BLOCK));
    let hinted = lower(&hinted_kernel, &nvidia(), &spec).unwrap();
    assert!(load_widths(&plain).iter().all(|&w| w == 1), "{:?}", load_widths(&plain));
    assert!(load_widths(&hinted).contains(&4), "{:?}", load_widths(&hinted));
    let mut rng = Rng::new(6);
    let m = 4 * BLOCK as usize;
    let bufs = vec![
        HostBuffer::from_slice(&rng.f32s(m, -1.0, 1.0)),
        HostBuffer::from_slice(&vec![0.5f32; m]),
    ];
    // Six programs over four blocks: the last two wrap around, whole blocks at a time.
    same_in_the_simulator(
        &hinted_kernel,
        6,
        &[ptr(0), ptr(1), ArgValue::Int(m as i64)],
        &bufs,
        &spec,
    );
}

#[test]
fn the_analysis_takes_what_is_promised() {
    let kernel = Kernel::build("facts", |k| {
        let p = k.arg_ptr("p", I32);
        let x = k.load(p);
        let block = (k.arange(0, 64) / 4).max_constancy(4);
        let both = (k.load(p + k.arange(0, 16)) + x).multiple_of(8).max_contiguous(16);
        k.store(p + k.arange(0, 64), block + x.multiple_of(32));
        k.store(p + k.arange(0, 16), both);
    })
    .unwrap();
    let info = axis::analyze(&kernel, &Specialization::none(1));
    let fact = |i: usize| info[kernel.hints[i].value.index()];
    assert_eq!(fact(0).constancy[0], 4);
    assert_eq!((fact(1).divisibility[0], fact(2).contiguity[0]), (8, 16));
    assert_eq!(fact(3).divisibility[0], 32);
}

/// The interpreter's error for `kernel` on these arguments, as text.
fn fault(kernel: &Kernel, grid: u32, args: &[ArgValue], mut bufs: Vec<HostBuffer>) -> String {
    let e: InterpError = interp::run(kernel, [grid, 1, 1], args, &mut bufs).expect_err("the promise is broken");
    e.to_string()
}

#[test]
fn a_broken_promise_is_a_fault_naming_the_hint() {
    let n = 1000;
    let bufs = |starts: &[i32]| {
        vec![
            HostBuffer::from_slice(&vec![1.0f32; n + BLOCK as usize]),
            HostBuffer::zeros(F32, n + BLOCK as usize),
            HostBuffer::from_slice(starts),
        ]
    };
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(n as i64)];
    let kernel = gathered_copy(|b| b.multiple_of(4));
    let message = fault(&kernel, 2, &args, bufs(&[8, 6]));
    for part in [
        "broken hint",
        "multiple_of",
        "6 is not a multiple of 4",
        file!(),
        "(1, 0, 0)",
    ] {
        assert!(message.contains(part), "{message:?} does not say {part:?}");
    }
    // The remainder wraps inside a block where m is not a multiple of it.
    let kernel = wrapped_copy(|o| o.max_contiguous(BLOCK));
    let bufs = vec![HostBuffer::zeros(F32, 1000), HostBuffer::zeros(F32, 1000)];
    let message = fault(&kernel, 1, &[ptr(0), ptr(1), ArgValue::Int(1000)], bufs);
    for part in [
        "max_contiguous",
        "element (1000) is 0 after 999",
        "run of 1024 consecutive values",
    ] {
        assert!(message.contains(part), "{message:?} does not say {part:?}");
    }
    // A loop's carried offset, checked each time the loop binds it.
    let kernel = Kernel::build("carried", |k| {
        let p = k.arg_ptr("p", I32);
        let start = k.load(p);
        let r = k.for_range(0, 3, 1, &[start], |_, c| {
            let c = c[0].multiple_of(16);
            vec![c + 8]
        });
        k.store(p, r[0]);
    })
    .unwrap();
    let message = fault(&kernel, 1, &[ptr(0)], vec![HostBuffer::from_slice(&[32i32])]);
    for part in ["40 is not a multiple of 16", "(the multiple_of at"] {
        assert!(message.contains(part), "{message:?} does not say {part:?}");
    }
    // Runs of equal values.
    let kernel = Kernel::build("equal_runs", |k| {
        let p = k.arg_ptr("p", I32);
        k.store(p + k.arange(0, 8), (k.arange(0, 8) / 2).max_constancy(4));
    })
    .unwrap();
    let message = fault(&kernel, 1, &[ptr(0)], vec![HostBuffer::zeros(I32, 8)]);
    assert!(
        message.contains("max_constancy") && message.contains("element (2) is 1 after 0"),
        "{message}"
    );
}

#[test]
fn hints_are_part_of_the_text() {
    let plain = gathered_copy(|b| b).to_string();
    let hinted = gathered_copy(|b| b.multiple_of(4)).to_string();
    assert!(!plain.contains("hint"), "{plain}");
    assert!(hinted.contains(", multiple_of=[4]"), "{hinted}");
    let two_d = Kernel::build("two_d", |k| {
        let p = k.arg_ptr("p", I32);
        let offs = k.arange(0, 4).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0);
        k.store(p + offs, offs.max_contiguous([1, 16]));
    })
    .unwrap()
    .to_string();
    assert!(two_d.contains("max_contiguous=[1, 16]"), "{two_d}");
}

#[test]
fn mistakes_are_errors_that_name_the_hint() {
    type Make = for<'b> fn(&'b KernelBuilder);
    let cases: [(Make, &[&str]); 6] = [
        (
            |k| {
                let _ = k.zeros(&[16], F32).multiple_of(4);
            },
            &["multiple_of", "takes integers", "f32"],
        ),
        (
            |k| {
                let _ = k.arg_i32("n").max_contiguous(4);
            },
            &["max_contiguous", "takes a block"],
        ),
        (
            |k| {
                let _ = k.arange(0, 16).max_contiguous(6);
            },
            &["max_contiguous", "power of two", "got 6"],
        ),
        (
            |k| {
                let _ = k.arange(0, 16).max_constancy(32);
            },
            &["max_constancy", "up to the dimension's 16"],
        ),
        (
            |k| {
                let _ = k.arange(0, 16).multiple_of(0);
            },
            &["multiple_of", "positive", "got 0"],
        ),
        (
            |k| {
                let _ = k.arange(0, 16).multiple_of([2, 4]);
            },
            &["multiple_of", "one number or one per dimension (1)", "got 2"],
        ),
    ];
    for (make, parts) in cases {
        let message = Kernel::build("bad", make).expect_err("the hint is wrong").to_string();
        for part in parts {
            assert!(message.contains(part), "{message:?} does not say {part:?}");
        }
    }
}
