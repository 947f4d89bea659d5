//! Atomics: every op on every type with atomics, predicated, native or as a CAS loop.

mod support;

use rutile_ir::ir::{AtomicOp, AtomicOrder, CmpOp, MemScope, MemSem};
use rutile_ir::thread::{Expr, Memory, Stmt, ThreadKernel};
use rutile_ir::ScalarType::{self, *};
use rutile_ptx::{emit, PtxTarget};
use support::{assert_contains, emit_80_90, emit_checked, kernel};

const OPS: [AtomicOp; 7] = [
    AtomicOp::Add,
    AtomicOp::Max,
    AtomicOp::Min,
    AtomicOp::Xchg,
    AtomicOp::And,
    AtomicOp::Or,
    AtomicOp::Xor,
];

fn defined(op: AtomicOp, t: ScalarType) -> bool {
    !(t.is_float() && matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor))
}

/// One atomic `op` (or a CAS when `op` is `None`) of type `t`, predicated on `tid < 64`.
fn atomic_kernel(t: ScalarType, op: Option<AtomicOp>) -> ThreadKernel {
    let mut k = kernel("atomics");
    let p = k.ptr("p", t);
    let out = k.ptr("old", t);
    let tid = k.thread_id();
    let c64 = k.int(I32, 64);
    let m = k.set(Bool, Expr::Compare(CmpOp::Lt, tid, c64));
    let v = k.load(t, 1, Memory::Global { param: out }, tid, None)[0];
    let dst = k.reg(t);
    k.assign(dst, Expr::Copy(v));
    let idx = k.int(I64, 3);
    k.push(match op {
        Some(op) => Stmt::Atomic {
            dst,
            op,
            param: p,
            index: idx,
            value: v,
            pred: Some(m),
            order: Default::default(),
        },
        None => Stmt::AtomicCas {
            dst,
            param: p,
            index: tid,
            cmp: v,
            value: dst,
            pred: Some(m),
            order: Default::default(),
        },
    });
    k.store(vec![dst], Memory::Global { param: out }, tid, None);
    k.finish()
}

#[test]
fn every_atomic_assembles() {
    for t in [I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64] {
        for op in OPS {
            if defined(op, t) {
                emit_80_90(&atomic_kernel(t, Some(op)));
            }
        }
        emit_80_90(&atomic_kernel(t, None));
    }
}

#[test]
fn native_atomics() {
    let cases: &[(ScalarType, AtomicOp, &str)] = &[
        (F32, AtomicOp::Add, "@%p0 atom.acq_rel.gpu.global.add.f32 %f1, [%rd"),
        (F64, AtomicOp::Add, "atom.acq_rel.gpu.global.add.f64"),
        (I32, AtomicOp::Add, "atom.acq_rel.gpu.global.add.u32"),
        (U64, AtomicOp::Add, "atom.acq_rel.gpu.global.add.u64"),
        (F16, AtomicOp::Add, "atom.acq_rel.gpu.global.add.noftz.f16"),
        (I32, AtomicOp::Max, "atom.acq_rel.gpu.global.max.s32"),
        (U32, AtomicOp::Min, "atom.acq_rel.gpu.global.min.u32"),
        (I64, AtomicOp::Min, "atom.acq_rel.gpu.global.min.s64"),
        (F32, AtomicOp::Xchg, "atom.acq_rel.gpu.global.exch.b32"),
        (F64, AtomicOp::Xchg, "atom.acq_rel.gpu.global.exch.b64"),
        (U32, AtomicOp::And, "atom.acq_rel.gpu.global.and.b32"),
        (I64, AtomicOp::Or, "atom.acq_rel.gpu.global.or.b64"),
        (U64, AtomicOp::Xor, "atom.acq_rel.gpu.global.xor.b64"),
    ];
    for &(t, op, needle) in cases {
        let ptx = emit_80_90(&atomic_kernel(t, Some(op)));
        assert_contains(&ptx, &[needle]);
        assert!(!ptx.contains(".cas."), "{t} {op:?} should not loop:\n{ptx}");
    }
}

#[test]
fn cas_loops() {
    // Float max/min: CAS on the bits, NaN-propagating maximum inside.
    let ptx = emit_80_90(&atomic_kernel(F32, Some(AtomicOp::Max)));
    assert_contains(
        &ptx,
        &[
            "@!%p0 bra",
            "ld.relaxed.gpu.global.b32",
            "max.NaN.f32",
            "atom.acq_rel.gpu.global.cas.b32",
            "setp.ne.b32",
        ],
    );
    let ptx = emit_80_90(&atomic_kernel(F64, Some(AtomicOp::Min)));
    assert_contains(&ptx, &["atom.acq_rel.gpu.global.cas.b64", "setp.nan.f64"]);
    // 16-bit integers: 16-bit CAS words.
    let ptx = emit_80_90(&atomic_kernel(I16, Some(AtomicOp::Add)));
    assert_contains(&ptx, &["atom.acq_rel.gpu.global.cas.b16", "cvt.s32.s16", "cvt.u16.u32"]);
    // bf16 add: native on sm_90, a loop on sm_80 (its sum one `fma`), unsupported before.
    let k = atomic_kernel(BF16, Some(AtomicOp::Add));
    assert_contains(&emit_checked(&k, 90), &["atom.acq_rel.gpu.global.add.noftz.bf16"]);
    assert_contains(
        &emit_checked(&k, 80),
        &["atom.acq_rel.gpu.global.cas.b16", "fma.rn.bf16"],
    );
    assert!(emit(&k, &PtxTarget::from_compute_capability(7, 5)).is_err());
    // f16 max before sm_80 (no min.NaN.f16): widened emulation.
    emit_checked(&atomic_kernel(F16, Some(AtomicOp::Max)), 75);
    emit_checked(&atomic_kernel(F32, Some(AtomicOp::Min)), 70);
}

#[test]
fn compare_and_swap() {
    assert_contains(
        &emit_80_90(&atomic_kernel(I32, None)),
        &["@%p0 atom.acq_rel.gpu.global.cas.b32"],
    );
    assert_contains(
        &emit_80_90(&atomic_kernel(F64, None)),
        &["atom.acq_rel.gpu.global.cas.b64"],
    );
    assert_contains(
        &emit_80_90(&atomic_kernel(F16, None)),
        &["atom.acq_rel.gpu.global.cas.b16 %h"],
    );
    assert_contains(
        &emit_80_90(&atomic_kernel(U16, None)),
        &["atom.acq_rel.gpu.global.cas.b16", "@%p0 cvt.u32.u16"],
    );
}

#[test]
fn byte_atomics_are_rejected() {
    for t in [I8, U8, Bool] {
        let op = if t == Bool { AtomicOp::Or } else { AtomicOp::Add };
        let k = ordered_kernel(t, Some(op), AtomicOrder::default());
        let err = emit(&k, &PtxTarget::from_compute_capability(9, 0)).unwrap_err();
        assert!(err.to_string().contains("no atomics on 1-byte elements"), "{err}");
    }
}

#[test]
fn float_bitwise_atomics_are_rejected() {
    let k = ordered_kernel(F32, Some(AtomicOp::And), AtomicOrder::default());
    let err = emit(&k, &PtxTarget::from_compute_capability(9, 0)).unwrap_err();
    assert!(err.to_string().contains("`atomic_and` of f32 is not defined"), "{err}");
}

/// One atomic `op` (or a CAS) of type `t` with `order`.
fn ordered_kernel(t: ScalarType, op: Option<AtomicOp>, order: AtomicOrder) -> ThreadKernel {
    let mut k = kernel("ordered");
    let p = k.ptr("p", t);
    let tid = k.thread_id();
    let v = k.load(t, 1, Memory::Global { param: p }, tid, None)[0];
    let dst = k.reg(t);
    k.push(match op {
        Some(op) => Stmt::Atomic {
            dst,
            op,
            param: p,
            index: tid,
            value: v,
            pred: None,
            order,
        },
        None => Stmt::AtomicCas {
            dst,
            param: p,
            index: tid,
            cmp: v,
            value: v,
            pred: None,
            order,
        },
    });
    k.store(vec![dst], Memory::Global { param: p }, tid, None);
    k.finish()
}

/// `sem` and `scope` reach the instruction, native and in compare-and-swap loops (whose
/// first read takes the scope), and ptxas takes every combination.
#[test]
fn atomics_carry_their_order() {
    let sems = [MemSem::Relaxed, MemSem::Acquire, MemSem::Release, MemSem::AcqRel];
    let scopes = [MemScope::Cta, MemScope::Gpu, MemScope::Sys];
    for sem in sems {
        for scope in scopes {
            let order = AtomicOrder::new(sem, scope);
            let (s, c) = order.names();
            let ptx = emit_80_90(&ordered_kernel(F32, Some(AtomicOp::Add), order));
            assert_contains(&ptx, &[&format!("atom.{s}.{c}.global.add.f32")]);
            let ptx = emit_80_90(&ordered_kernel(I32, None, order));
            assert_contains(&ptx, &[&format!("atom.{s}.{c}.global.cas.b32")]);
            // f32 max: a compare-and-swap loop.
            let ptx = emit_80_90(&ordered_kernel(F32, Some(AtomicOp::Max), order));
            assert_contains(
                &ptx,
                &[
                    &format!("ld.relaxed.{c}.global.b32"),
                    &format!("atom.{s}.{c}.global.cas.b32"),
                ],
            );
        }
    }
}
