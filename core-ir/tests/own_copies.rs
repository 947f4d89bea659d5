//! The refill of a loop's own copies (`lower/pipeline/`, `Target::refill_after_read`):
//! the copies of a later iteration go out after the first instruction that computes with
//! what a thread read back from its slots, never after a mere view of it (`expand_dims`,
//! whose registers are the read's and which emits nothing), so that they cannot overtake
//! the reads of the stage they refill.

mod tutorial_support;

use rutile_ir::interp::{ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Expr, Memory, Stmt};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::F32;
use tutorial_support::{ptr, simulate_on};

/// Rows of 64 f32 walked by the programs, 2 stages: each row's loaded block is first
/// viewed as 1 x 64 (`expand_dims`: the same registers, no instruction), then summed.
fn viewed_rows_kernel() -> Kernel {
    Kernel::build("viewed_rows", |k| {
        let inp = k.arg_ptr("inp", F32);
        let out = k.arg_ptr("out", F32);
        let rows = k.arg_i32("rows");
        k.for_range_staged(k.program_id(0), rows, k.num_programs(0), 2, &[], |r, _| {
            let x = k.load(inp + r * 64 + k.arange(0, 64));
            let sums = x.expand_dims(0).sum(1);
            k.store(out + r + k.arange(0, 1), sums);
            vec![]
        });
    })
    .unwrap()
}

#[test]
fn a_view_of_what_was_read_does_not_release_the_refill() {
    let kernel = viewed_rows_kernel();
    let target = Target {
        async_copy: true,
        ..Target::nvidia(1, 48 * 1024)
    };
    let t = lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
    // In walk order, inside the loop (after its first wait): the first read of the slots,
    // then f32 arithmetic (the sum's additions) before the first copy of a later row.
    let (mut waited, mut read, mut computed, mut copied_after) = (false, false, false, None);
    t.walk(&mut |s| match s {
        Stmt::AsyncWait { .. } => waited = true,
        Stmt::Load {
            mem: Memory::Shared { .. },
            ..
        } if waited => read = true,
        Stmt::Set {
            dst,
            expr: Expr::Binary(..),
        } if read && copied_after.is_none() && t.regs[*dst].ty == F32 => computed = true,
        Stmt::AsyncCopy { .. } if waited && copied_after.is_none() => copied_after = Some(read && computed),
        _ => {}
    });
    assert_eq!(
        copied_after,
        Some(true),
        "the refill before the first computation with what was read"
    );
    let rows = 7;
    let mut rng = Rng::new(5);
    let x = rng.f32s(rows * 64, 0.5, 2.0);
    let buffers = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(F32, rows)];
    let args = [ptr(0), ptr(1), ArgValue::Int(rows as i64)];
    simulate_on("viewed rows", &kernel, &[target], [3, 1, 1], &args, &buffers, 1e-6);
}
