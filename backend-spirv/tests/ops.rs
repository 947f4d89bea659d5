//! Every op on every type the target allows: the module validates, writes as WGSL and SPIR-V,
//! and (with `RUTILE_SPIRV_VAL`) passes spirv-val.

mod common;

use common::{basic, check, full};
use rutile_ir::ir::{AtomicOp, BinaryOp, CmpOp, Literal, UnaryOp};
use rutile_ir::thread::{Expr, Memory, Reg, Special, Stmt, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, *};

fn unary_ok(op: UnaryOp, t: ScalarType) -> bool {
    match t {
        Bool => op == UnaryOp::Not,
        t if t.is_float() => op != UnaryOp::Not && !op.bits_only(),
        _ => !op.float_only(),
    }
}

fn binary_ok(op: BinaryOp, t: ScalarType) -> bool {
    if op == BinaryOp::UMulHi && !matches!(t.bits(), 32 | 64) {
        return false;
    }
    match t {
        Bool => matches!(
            op,
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Min | BinaryOp::Max
        ),
        t if t.is_float() => !op.integral_only(),
        _ => !op.float_only(),
    }
}

/// Loads two values of `t` per thread, applies every op, and stores every result (booleans
/// as 0/1 in an i32 buffer). With `constants`, the second operand is a constant instead,
/// which exercises the folding of literal divisors and shift amounts.
fn all_ops(t: ScalarType, constants: Option<i64>) -> rutile_ir::thread::ThreadKernel {
    let mut kb = ThreadKernelBuilder::new(format!("ops_{t}"), 1, 32);
    let mem_t = if t == Bool { I32 } else { t };
    let a_buf = kb.ptr("a", mem_t);
    let b_buf = kb.ptr("b", mem_t);
    let out = kb.ptr("out", mem_t);
    let flags = kb.ptr("flags", I32);
    let tid = kb.special(Special::ThreadId);
    let load = |kb: &mut ThreadKernelBuilder, buf| {
        let v = kb.load(mem_t, 1, Memory::Global { param: buf }, tid, None)[0];
        if t == Bool {
            kb.set(Bool, Expr::Cast(v))
        } else {
            v
        }
    };
    let a = load(&mut kb, a_buf);
    let b = match constants {
        None => load(&mut kb, b_buf),
        Some(c) if t == Bool => kb.boolean(c != 0),
        Some(c) if t.is_float() => kb.float(t, c as f64),
        Some(c) => kb.int(t, c),
    };
    let mut results: Vec<Reg> = vec![];
    let mut bools: Vec<Reg> = vec![];
    for op in UnaryOp::ALL {
        if unary_ok(op, t) {
            results.push(kb.set(t, Expr::Unary(op, a)));
        }
    }
    for op in BinaryOp::ALL {
        if binary_ok(op, t) {
            results.push(kb.set(t, Expr::Binary(op, a, b)));
        }
    }
    for op in CmpOp::ALL {
        bools.push(kb.cmp(op, a, b));
    }
    results.push(kb.set(t, Expr::Select(bools[2], a, b)));
    if t.is_float() {
        results.push(kb.set(t, Expr::Fma(a, b, a)));
    }
    for (k, r) in results.into_iter().enumerate() {
        let v = if t == Bool { kb.set(I32, Expr::Cast(r)) } else { r };
        let off = kb.int(I32, k as i64 * 32);
        let i = kb.bin(BinaryOp::Add, tid, off);
        kb.store(vec![v], Memory::Global { param: out }, i, None);
    }
    for (j, r) in bools.into_iter().enumerate() {
        let v = kb.set(I32, Expr::Cast(r));
        let off = kb.int(I32, j as i64 * 32);
        let i = kb.bin(BinaryOp::Add, tid, off);
        kb.store(vec![v], Memory::Global { param: flags }, i, None);
    }
    kb.finish()
}

#[test]
fn ops_on_32_bit_types_and_booleans() {
    for t in [I32, U32, F32, Bool] {
        check(&all_ops(t, None), &basic());
    }
}

#[test]
fn ops_on_f16_and_64_bit_types() {
    for t in [F16, I64, U64, F64] {
        check(&all_ops(t, None), &full(32));
    }
}

#[test]
fn ops_with_constant_operands() {
    // 0 divisors and shift amounts at, above and below the width; negative amounts.
    for c in [0, 1, 3, 31, 32, 33, 63, 64, 100, -1] {
        for t in [I32, U32, F32, Bool, I64, U64, F16, F64] {
            check(&all_ops(t, Some(c)), &full(32));
        }
    }
}

/// Every cast and bitcast between the register types.
#[test]
fn casts_and_bitcasts() {
    let types = [Bool, I32, U32, F32, F16, I64, U64, F64];
    let mut kb = ThreadKernelBuilder::new("casts", 1, 32);
    let outs: Vec<u32> = types
        .iter()
        .map(|&t| kb.ptr(&format!("out_{t}"), if t == Bool { I32 } else { t }))
        .collect();
    let src = kb.ptr("src", F32);
    let tid = kb.special(Special::ThreadId);
    let x = kb.load(F32, 1, Memory::Global { param: src }, tid, None)[0];
    let mut slot = 0;
    for &s in &types {
        let v = kb.set(s, Expr::Cast(x));
        for (&d, &out) in types.iter().zip(&outs) {
            let mut r = kb.set(d, Expr::Cast(v));
            if d.bits() == s.bits() && s != Bool {
                let bc = kb.set(d, Expr::Bitcast(v));
                let c = kb_true(&mut kb);
                r = kb.set(d, Expr::Select(c, r, bc));
            }
            if d == Bool {
                r = kb.set(I32, Expr::Cast(r));
            }
            slot += 1;
            let off = kb.int(I32, slot * 32);
            let i = kb.bin(BinaryOp::Add, tid, off);
            kb.store(vec![r], Memory::Global { param: out }, i, None);
        }
    }
    check(&kb.finish(), &full(32));
}

fn kb_true(kb: &mut ThreadKernelBuilder) -> Reg {
    kb.boolean(true)
}

/// Constants of every type, including infinities and NaNs (which naga literals cannot hold).
#[test]
fn constants() {
    let mut kb = ThreadKernelBuilder::new("constants", 1, 32);
    let tid = kb.special(Special::ThreadId);
    for t in [F32, F16, F64, I32, U32, I64, U64] {
        let out = kb.ptr(&format!("out_{t}"), t);
        let values: Vec<Literal> = if t.is_float() {
            [
                0.0,
                -0.0,
                1.5,
                65504.0,
                1e300,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
            ]
            .map(Literal::Float)
            .to_vec()
        } else {
            [0, 1, -1, i32::MIN as i64, u32::MAX as i64, i64::MIN, i64::MAX]
                .map(Literal::Int)
                .to_vec()
        };
        for (j, l) in values.into_iter().enumerate() {
            let v = kb.set(t, Expr::Const(l));
            let off = kb.int(I32, j as i64 * 32);
            let i = kb.bin(BinaryOp::Add, tid, off);
            kb.store(vec![v], Memory::Global { param: out }, i, None);
        }
    }
    check(&kb.finish(), &full(32));
}

/// Indexes of every integer type, and vector accesses of 2 and 8 to shared memory.
#[test]
fn index_types_and_vector_widths() {
    let mut kb = ThreadKernelBuilder::new("indexes", 1, 32);
    let buf = kb.ptr("buf", F32);
    let sh = kb.shared(F32, 256);
    let tid = kb.special(Special::ThreadId);
    for t in [I32, U32, I64, U64] {
        let i = kb.set(t, Expr::Cast(tid));
        let eight = kb.int(t, 8);
        let i = kb.bin(BinaryOp::Mul, i, eight);
        let v = kb.load(F32, 8, Memory::Global { param: buf }, i, None);
        kb.store(v.clone(), Memory::Shared { alloc: sh }, i, None);
        let w = kb.load(F32, 2, Memory::Shared { alloc: sh }, i, None);
        let p = kb.boolean(true);
        kb.store(w, Memory::Global { param: buf }, i, Some(p));
    }
    check(&kb.finish(), &full(32));
}

/// Atomics on i32 and u32 (every op), and on f32 (add, min, max by compare-and-swap loops;
/// exchange; compare-and-swap), predicated and not, with plain loads and stores on the same
/// buffers.
#[test]
fn atomics() {
    let mut kb = ThreadKernelBuilder::new("atomics", 2, 32);
    let tid = kb.special(Special::ThreadId);
    let p = kb.cmp(CmpOp::Lt, tid, tid);
    for t in [I32, U32, F32] {
        let buf = kb.ptr(&format!("buf_{t}"), t);
        let v = kb.load(t, 1, Memory::Global { param: buf }, tid, None)[0];
        let ops: &[AtomicOp] = if t == F32 {
            &[AtomicOp::Add, AtomicOp::Min, AtomicOp::Max, AtomicOp::Xchg]
        } else {
            &[
                AtomicOp::Add,
                AtomicOp::Max,
                AtomicOp::Min,
                AtomicOp::Xchg,
                AtomicOp::And,
                AtomicOp::Or,
                AtomicOp::Xor,
            ]
        };
        let mut olds = vec![];
        for &op in ops {
            for pred in [None, Some(p)] {
                let dst = kb.reg(t);
                kb.push(Stmt::Atomic {
                    dst,
                    op,
                    param: buf,
                    index: tid,
                    value: v,
                    pred,
                    order: Default::default(),
                });
                olds.push(dst);
            }
        }
        for pred in [None, Some(p)] {
            let dst = kb.reg(t);
            kb.push(Stmt::AtomicCas {
                dst,
                param: buf,
                index: tid,
                cmp: v,
                value: olds[0],
                pred,
                order: Default::default(),
            });
            olds.push(dst);
        }
        let two = kb.int(I32, 2);
        let i = kb.bin(BinaryOp::Mul, tid, two);
        kb.store(olds[..2].to_vec(), Memory::Global { param: buf }, i, Some(p));
    }
    let (sk, wgsl) = check(&kb.finish(), &basic());
    assert!(sk.bindings.storage.iter().all(|s| s.atomic));
    assert!(wgsl.contains("array<atomic<u32>>"), "{wgsl}");
    assert!(wgsl.contains("array<atomic<i32>>"), "{wgsl}");
    assert!(wgsl.contains("atomicCompareExchangeWeak"), "{wgsl}");
}

/// Shuffles of every type, booleans included, by xor and by index.
#[test]
fn shuffles_of_every_type() {
    let mut kb = ThreadKernelBuilder::new("shuffles", 2, 32);
    let tid = kb.special(Special::ThreadId);
    let lane = kb.int(I32, 3);
    for t in [I32, U32, F32, F16, I64, U64, F64, Bool] {
        let out = kb.ptr(&format!("out_{t}"), if t == Bool { I32 } else { t });
        let v = kb.set(t, Expr::Cast(tid));
        let a = kb.set(t, Expr::ShuffleXor { value: v, mask: 1 });
        let b = kb.set(t, Expr::ShuffleIdx { value: a, lane });
        let b = if t == Bool { kb.set(I32, Expr::Cast(b)) } else { b };
        kb.store(vec![b], Memory::Global { param: out }, tid, None);
    }
    check(&kb.finish(), &full(32));
}

/// Operations on constants only, which overflow (naga's WGSL reader evaluates such
/// expressions and rejects overflow, so the backend folds them).
#[test]
fn constant_operands_that_overflow() {
    let mut kb = ThreadKernelBuilder::new("const_overflow", 1, 32);
    let out = kb.ptr("out", I32);
    let fout = kb.ptr("fout", F32);
    let tid = kb.special(Special::ThreadId);
    let max = kb.int(I32, i32::MAX as i64);
    let min = kb.int(I32, i32::MIN as i64);
    let one = kb.int(I32, 1);
    let m1 = kb.int(I32, -1);
    let mut results = vec![
        kb.bin(BinaryOp::Add, max, one),
        kb.bin(BinaryOp::Sub, min, one),
        kb.bin(BinaryOp::Mul, min, m1),
        kb.bin(BinaryOp::Div, min, m1),
        kb.bin(BinaryOp::Rem, min, m1),
        kb.bin(BinaryOp::CeilDiv, max, max),
        kb.set(I32, Expr::Unary(UnaryOp::Neg, min)),
        kb.set(I32, Expr::Unary(UnaryOp::Abs, min)),
    ];
    let big = kb.float(F32, 3e38);
    let ten = kb.float(F32, 10.0);
    let f = kb.bin(BinaryOp::Mul, big, ten);
    results.push(kb.set(I32, Expr::Cast(f)));
    for (j, r) in results.into_iter().enumerate() {
        let off = kb.int(I32, j as i64 * 32);
        let i = kb.bin(BinaryOp::Add, tid, off);
        kb.store(vec![r], Memory::Global { param: out }, i, None);
    }
    let z = kb.float(F32, 0.0);
    let nan = kb.bin(BinaryOp::Div, z, z);
    kb.store(vec![f, nan], Memory::Global { param: fout }, tid, None);
    check(&kb.finish(), &basic());
}

/// Shared memory of every element type a target may allow.
#[test]
fn shared_memory_of_every_type() {
    let mut kb = ThreadKernelBuilder::new("shared_types", 2, 32);
    let tid = kb.special(Special::ThreadId);
    for t in [I32, U32, F32, F16, I64, U64, F64] {
        let buf = kb.ptr(&format!("buf_{t}"), t);
        let sh = kb.shared(t, 64);
        let v = kb.load(t, 1, Memory::Global { param: buf }, tid, None);
        kb.store(v, Memory::Shared { alloc: sh }, tid, None);
        kb.push(Stmt::Barrier);
        let one = kb.int(I32, 1);
        let other = kb.bin(BinaryOp::Xor, tid, one);
        let w = kb.load(t, 1, Memory::Shared { alloc: sh }, other, None);
        kb.store(w, Memory::Global { param: buf }, tid, None);
    }
    check(&kb.finish(), &full(32));
}
