//! The extent analysis: which unmasked accesses a launch determines, the elements they
//! need, and that it never reports an overrun the interpreter would not hit.

use rutile_ir::analysis::extent::{ExtentPlan, LaunchExtent, Overrun};
use rutile_ir::interp::{self, ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ScalarType::{F32, I32, I64};
use rutile_ir::{Kernel, ScalarType};

/// `out[pid * block + i] = x[pid * block + i]`, without a mask.
fn unmasked_copy(block: u32) -> Kernel {
    Kernel::build("copy_unmasked", |k| {
        let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
        let offsets = k.program_id(0) * block + k.arange(0, block as i32);
        k.store(out + offsets, k.load(x + offsets));
    })
    .unwrap()
}

/// Checks `kernel` over `grid` with buffers of `lens` elements (`None`: a scalar argument,
/// whose value is in `ints`).
fn check(kernel: &Kernel, grid: [u32; 3], lens: &[Option<u64>], ints: &[Option<i128>]) -> Option<Overrun> {
    ExtentPlan::new(kernel).check(&LaunchExtent {
        grid,
        ints,
        buffer_lens: lens,
    })
}

/// Runs the launch in the interpreter (f32 buffers of `lens`, i32 scalars of `ints`) and
/// says whether it went out of bounds.
fn interpreter_overruns(kernel: &Kernel, grid: [u32; 3], lens: &[Option<u64>], ints: &[Option<i128>]) -> bool {
    let mut buffers = Vec::new();
    let args: Vec<ArgValue> = lens
        .iter()
        .zip(ints)
        .map(|(len, int)| match (len, int) {
            (Some(n), _) => {
                buffers.push(HostBuffer::zeros(F32, *n as usize));
                ArgValue::Ptr {
                    buffer: buffers.len() - 1,
                    offset: 0,
                }
            }
            (None, Some(v)) => ArgValue::Int(*v as i64),
            (None, None) => panic!("an argument without a value"),
        })
        .collect();
    match interp::run(kernel, grid, &args, &mut buffers) {
        Ok(()) => false,
        Err(InterpError::Fault {
            kind: FaultKind::OutOfBounds,
            ..
        }) => true,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn unmasked_vector_access_needs_grid_times_block() {
    let kernel = unmasked_copy(256);
    let ints = [None, None];
    assert_eq!(check(&kernel, [4, 1, 1], &[Some(1024), Some(1024)], &ints), None);
    assert_eq!(check(&kernel, [4, 1, 1], &[Some(5000), Some(1024)], &ints), None);
    let o = check(&kernel, [4, 1, 1], &[Some(1023), Some(1024)], &ints).unwrap();
    assert_eq!(
        (o.op, o.param, o.last, o.needed(), o.len),
        ("load", 0, 1023, 1024, 1023)
    );
    assert!(o.loc.file.ends_with("extent.rs"), "{:?}", o.loc);
    let o = check(&kernel, [5, 1, 1], &[Some(5000), Some(1024)], &ints).unwrap();
    assert_eq!((o.op, o.param, o.needed(), o.len), ("store", 1, 1280, 1024));
}

#[test]
fn masked_vector_add_needs_nothing() {
    let kernel = rutile_ir::seeds::vector_add(F32, 1024).unwrap();
    assert!(ExtentPlan::new(&kernel).is_empty());
    let lens = [Some(10), Some(10), Some(10), None];
    assert_eq!(check(&kernel, [1000, 1, 1], &lens, &[None, None, None, Some(10)]), None);
}

#[test]
fn accesses_in_loops_and_branches_are_skipped() {
    let looped = Kernel::build("looped", |k| {
        let x = k.arg_ptr("x", F32);
        let n = k.arg_i32("n");
        k.for_range(0, n, 1, &[], |i, _| {
            let offs = i * 64 + k.arange(0, 64);
            k.store(x + offs, 1.0f32);
            vec![]
        });
    })
    .unwrap();
    assert!(ExtentPlan::new(&looped).is_empty());
    let branched = Kernel::build("branched", |k| {
        let x = k.arg_ptr("x", F32);
        let pid = k.program_id(0);
        k.if_then(pid.lt(1), || {
            k.store(x + k.arange(0, 64), 1.0f32);
        });
    })
    .unwrap();
    assert!(ExtentPlan::new(&branched).is_empty());
}

#[test]
fn loaded_offsets_are_skipped() {
    let kernel = Kernel::build("gather", |k| {
        let (x, idx) = (k.arg_ptr("x", F32), k.arg_ptr("idx", I32));
        let i = k.load(idx + k.arange(0, 16));
        k.store(x + i, 1.0f32);
    })
    .unwrap();
    // Only the load of the indices is described.
    let o = check(&kernel, [1, 1, 1], &[Some(1), Some(15)], &[None, None]).unwrap();
    assert_eq!((o.op, o.param, o.needed()), ("load", 1, 16));
    assert_eq!(check(&kernel, [1, 1, 1], &[Some(1), Some(16)], &[None, None]), None);
}

#[test]
fn scalar_arguments_and_two_dimensional_blocks() {
    // Row `pid` of a matrix with `stride` elements per row, 128 columns.
    let rows = Kernel::build("row", |k| {
        let x = k.arg_ptr("x", F32);
        let stride = k.arg_i32("stride");
        let row = x + k.program_id(0) * stride;
        k.store(row + k.arange(0, 128), 0.0f32);
    })
    .unwrap();
    let lens = |n| [Some(n), None];
    let ints = [None, Some(200)];
    assert_eq!(check(&rows, [10, 1, 1], &lens(9 * 200 + 128), &ints), None);
    let o = check(&rows, [10, 1, 1], &lens(9 * 200 + 127), &ints).unwrap();
    assert_eq!(o.needed(), 9 * 200 + 128);
    // A tile of 32 x 64 at (pid_y, pid_x), in a row-major matrix of `n` columns.
    let tile = Kernel::build("tile", |k| {
        let x = k.arg_ptr("x", F32);
        let n = k.arg_i32("n");
        let r = k.program_id(1) * 32 + k.arange(0, 32);
        let c = k.program_id(0) * 64 + k.arange(0, 64);
        let offs = r.expand_dims(1) * n + c.expand_dims(0);
        k.store(x + offs, 0.0f32);
    })
    .unwrap();
    let ints = [None, Some(256)];
    assert_eq!(check(&tile, [4, 3, 1], &[Some(96 * 256), None], &ints), None);
    let o = check(&tile, [4, 3, 1], &[Some(96 * 256 - 1), None], &ints).unwrap();
    assert_eq!(o.needed(), 96 * 256);
    // Transposed through `trans`: the same elements.
    let transposed = Kernel::build("tile_t", |k| {
        let x = k.arg_ptr("x", F32);
        let r = k.arange(0, 32);
        let c = k.arange(0, 64);
        let offs = (r.expand_dims(1) * 64 + c.expand_dims(0)).trans();
        k.store(x + offs, 0.0f32);
    })
    .unwrap();
    assert_eq!(check(&transposed, [1, 1, 1], &[Some(2048)], &[None]), None);
    assert_eq!(
        check(&transposed, [1, 1, 1], &[Some(2047)], &[None]).unwrap().needed(),
        2048
    );
}

#[test]
fn the_largest_index_is_exact() {
    // `r - r` is 0 everywhere (an interval bound would say 63), and a reversed range
    // reaches n - 1 at its first element.
    let kernel = Kernel::build("exact", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let r = k.arange(0, 64);
        k.store(x + (r - r), 1.0f32);
        k.store(y + (63 - r + k.num_programs(0) * 2), 1.0f32);
    })
    .unwrap();
    assert_eq!(check(&kernel, [3, 1, 1], &[Some(1), Some(70)], &[None, None]), None);
    let o = check(&kernel, [3, 1, 1], &[Some(1), Some(69)], &[None, None]).unwrap();
    assert_eq!((o.param, o.needed()), (1, 70));
}

#[test]
fn offsets_that_would_wrap_are_skipped() {
    // pid * 2^29 wraps in i32 from the fifth program on: no claim about it.
    let kernel = Kernel::build("wrapping", |k| {
        let x = k.arg_ptr("x", F32);
        let offs = k.program_id(0) * (1 << 29) + k.arange(0, 16);
        k.store(x + offs, 1.0f32);
    })
    .unwrap();
    assert!(check(&kernel, [4, 1, 1], &[Some(16)], &[None]).is_some());
    assert_eq!(check(&kernel, [5, 1, 1], &[Some(16)], &[None]), None);
    // Widened to i64 first, the product is exact.
    let wide = Kernel::build("wide", |k| {
        let x = k.arg_ptr("x", F32);
        let offs = k.program_id(0).to(I64) * (1i64 << 29) + k.arange(0, 16).to(I64);
        k.store(x + offs, 1.0f32);
    })
    .unwrap();
    let o = check(&wide, [5, 1, 1], &[Some(16)], &[None]).unwrap();
    assert_eq!(o.needed(), 4 * (1 << 29) + 16);
}

#[test]
fn atomics_are_described() {
    let kernel = Kernel::build("histogram_row", |k| {
        let x = k.arg_ptr("x", ScalarType::I32);
        let _ = k.atomic_add(x + k.program_id(0) * 8 + k.arange(0, 8), 1, None);
    })
    .unwrap();
    let o = check(&kernel, [3, 1, 1], &[Some(16)], &[None]).unwrap();
    assert_eq!((o.op, o.needed()), ("atomic_add", 24));
}

/// The plan agrees with the interpreter on every launch of a few shapes: an overrun is
/// reported exactly when the interpreter faults.
#[test]
fn agrees_with_the_interpreter() {
    let tile = Kernel::build("tile", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let n = k.arg_i32("n");
        let r = k.program_id(1) * 4 + k.arange(0, 4);
        let c = k.program_id(0) * 8 + k.arange(0, 8);
        let offs = r.expand_dims(1) * n + c.expand_dims(0);
        k.store(y + offs, k.load(x + offs));
    })
    .unwrap();
    let mut seen = [false; 2];
    for gx in 1..4 {
        for gy in 1..4 {
            for n in [8, 16, 24] {
                for len in [16, 64, 100, 200, 300] {
                    let lens = [Some(len), Some(len), None];
                    let ints = [None, None, Some(n)];
                    let plan = check(&tile, [gx, gy, 1], &lens, &ints).is_some();
                    seen[plan as usize] = true;
                    assert_eq!(
                        plan,
                        interpreter_overruns(&tile, [gx, gy, 1], &lens, &ints),
                        "grid ({gx}, {gy}), n {n}, len {len}"
                    );
                }
            }
        }
    }
    assert_eq!(seen, [true, true], "both verdicts should occur");
}

/// An offset that goes below zero (a shift by an argument that may be negative) is an
/// access before the buffer's start, and the interpreter agrees on every launch.
#[test]
fn offsets_before_the_start_are_overruns() {
    let shifted = Kernel::build("shifted", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let shift = k.arg_i32("shift");
        let offs = k.program_id(0) * 16 + k.arange(0, 16);
        k.store(y + offs, k.load(x + (offs + shift)));
    })
    .unwrap();
    let lens = [Some(64), Some(64), None];
    let o = check(&shifted, [4, 1, 1], &lens, &[None, None, Some(-3)]).expect("an overrun");
    assert!(o.before_start(), "{o:?}");
    assert_eq!((o.param, o.first, o.last, o.op), (0, -3, 60, "load"));
    for shift in -20..=20 {
        for grid in 1..=4 {
            let ints = [None, None, Some(shift)];
            assert_eq!(
                check(&shifted, [grid, 1, 1], &lens, &ints).is_some(),
                interpreter_overruns(&shifted, [grid, 1, 1], &lens, &ints),
                "shift {shift}, grid {grid}"
            );
        }
    }
}
