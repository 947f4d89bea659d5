//! Atomics' `sem` and `scope` (`AtomicOrder`): printed where not Triton's default, carried
//! to the per-thread IR, and the barrier a releasing atomic needs (the program's pending
//! stores published first) left out for relaxed and acquire ones; results as the
//! interpreter's in the simulator.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::ir::{AtomicOp, AtomicOrder, MemScope, MemSem};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Stmt, ThreadKernel};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{F32, I32};

const BLOCK: i32 = 256;

/// Stores `2x` to `out`, then counts the positive elements of each program into
/// `counts[pid % 4]` and swaps 0 for 7 in `counts[4 + pid % 4]`, by atomics with `order`.
fn count_after_store(order: AtomicOrder) -> Kernel {
    Kernel::build("count", |k| {
        let (x, out, counts) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32), k.arg_ptr("counts", I32));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, 0.0);
        k.store_masked(out + offs, v * 2.0, mask);
        let slot = counts + k.program_id(0) % 4;
        let positive = mask & v.gt(0.0);
        k.atomic_rmw_ordered(AtomicOp::Add, slot, 1, Some(positive), order);
        k.atomic_cas_ordered(slot + 4, 0, 7, None, order);
    })
    .unwrap()
}

fn barriers(k: &ThreadKernel) -> usize {
    let mut n = 0;
    k.walk(&mut |s| n += matches!(s, Stmt::Barrier) as usize);
    n
}

fn orders(k: &ThreadKernel) -> Vec<AtomicOrder> {
    let mut out = Vec::new();
    k.walk(&mut |s| match s {
        Stmt::Atomic { order, .. } | Stmt::AtomicCas { order, .. } => out.push(*order),
        _ => {}
    });
    out
}

#[test]
fn only_releasing_atomics_wait_for_the_program_s_stores() {
    let target = Target::nvidia(4, 48 * 1024);
    let spec = Specialization::all(4);
    let default = lower(&count_after_store(AtomicOrder::default()), &target, &spec).unwrap();
    let relaxed = lower(&count_after_store(AtomicOrder::relaxed()), &target, &spec).unwrap();
    let acquire = AtomicOrder::new(MemSem::Acquire, MemScope::Cta);
    let acquiring = lower(&count_after_store(acquire), &target, &spec).unwrap();
    let release = AtomicOrder::new(MemSem::Release, MemScope::Sys);
    let releasing = lower(&count_after_store(release), &target, &spec).unwrap();
    // The store to `out` is pending at the first atomic: a barrier before it where the
    // atomic releases, none where it does not.
    assert!(barriers(&default) > barriers(&relaxed), "{default}");
    assert_eq!(barriers(&relaxed), barriers(&acquiring));
    assert_eq!(barriers(&releasing), barriers(&default));
    assert!(orders(&relaxed).iter().all(|&o| o == AtomicOrder::relaxed()));
    assert!(orders(&acquiring).iter().all(|&o| o == acquire));
    assert!(orders(&default).iter().all(|&o| o == AtomicOrder::default()));
}

#[test]
fn orders_are_printed_where_not_the_default() {
    let default = count_after_store(AtomicOrder::default()).to_string();
    assert!(!default.contains("sem="), "{default}");
    let cta = count_after_store(AtomicOrder::new(MemSem::Acquire, MemScope::Cta)).to_string();
    assert!(
        cta.contains("atomic_add") && cta.contains(", sem=acquire, scope=cta"),
        "{cta}"
    );
    let lowered = lower(
        &count_after_store(AtomicOrder::relaxed()),
        &Target::vulkan(32, 4, 48 * 1024),
        &Specialization::none(4),
    )
    .unwrap()
    .to_string();
    assert!(
        lowered.contains("atomic_add.relaxed.gpu") && lowered.contains("atomic_cas.relaxed.gpu"),
        "{lowered}"
    );
}

#[test]
fn every_order_computes_the_interpreter_s_result() {
    let n = 1000usize;
    let mut rng = Rng::new(8);
    let bufs = vec![
        HostBuffer::from_slice(&rng.f32s(n, -1.0, 1.0)),
        HostBuffer::zeros(F32, n),
        HostBuffer::zeros(I32, 8),
    ];
    let args = [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
        ArgValue::Ptr { buffer: 2, offset: 0 },
        ArgValue::Int(n as i64),
    ];
    let grid = [(n as u32).div_ceil(BLOCK as u32), 1, 1];
    for order in [
        AtomicOrder::default(),
        AtomicOrder::relaxed(),
        AtomicOrder::new(MemSem::Release, MemScope::Cta),
    ] {
        let kernel = count_after_store(order);
        let mut want = bufs.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let positives = want[0].to_vec::<f32>().unwrap().iter().filter(|&&v| v > 0.0).count() as i32;
        let counts = want[2].to_vec::<i32>().unwrap();
        assert_eq!(counts[..4].iter().sum::<i32>(), positives);
        for target in [Target::vulkan(32, 4, 48 * 1024), Target::nvidia(4, 48 * 1024)] {
            let lowered = lower(&kernel, &target, &Specialization::all(4)).unwrap();
            let mut got = bufs.clone();
            simt::run_threads(&lowered, grid, &args, &mut got).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.as_bytes(), w.as_bytes(), "{order:?}");
            }
        }
    }
}
