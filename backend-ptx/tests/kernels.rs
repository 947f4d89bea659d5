//! Whole kernels: vector add, a reduction through shuffles and shared memory, control flow,
//! vector widths per element type, and the module's header and parameters.

mod support;

use rutile_ir::ir::{BinaryOp, CmpOp, Literal};
use rutile_ir::thread::{Expr, Memory, Special, Stmt};
use rutile_ir::ScalarType::{self, *};
use rutile_ptx::{emit, PtxTarget};
use support::{assert_contains, emit_80_90, emit_checked, kernel};

/// `out[i..i+4] = x[i..i+4] + y[i..i+4]` for `i < n`, 4 elements per thread.
fn vector_add() -> rutile_ir::thread::ThreadKernel {
    let mut k = kernel("vec_add");
    let x = k.ptr("x", F32);
    let y = k.ptr("y", F32);
    let out = k.ptr("out", F32);
    let n = k.scalar("n", I32);
    let pid = k.set(I32, Expr::Special(Special::ProgramId(0)));
    let tid = k.thread_id();
    let block = k.int(I32, 512);
    let four = k.int(I32, 4);
    let start = k.set(I32, Expr::Binary(BinaryOp::Mul, pid, block));
    let t4 = k.set(I32, Expr::Binary(BinaryOp::Mul, tid, four));
    let i = k.set(I32, Expr::Binary(BinaryOp::Add, start, t4));
    let n = k.set(I32, Expr::Param(n));
    let m = k.set(Bool, Expr::Compare(CmpOp::Lt, i, n));
    let a = k.load(F32, 4, Memory::Global { param: x }, i, Some(m));
    let b = k.load(F32, 4, Memory::Global { param: y }, i, Some(m));
    let sums: Vec<_> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| k.set(F32, Expr::Binary(BinaryOp::Add, a, b)))
        .collect();
    k.store(sums, Memory::Global { param: out }, i, Some(m));
    k.finish()
}

#[test]
fn vector_add_uses_v4_accesses_and_predicates() {
    let ptx = emit_80_90(&vector_add());
    assert_contains(
        &ptx,
        &[
            ".version 7.8",
            ".target sm_80",
            ".address_size 64",
            ".visible .entry vec_add(",
            ".param .u64 vec_add_param_0",
            ".param .s32 vec_add_param_3",
            ".maxntid 128, 1, 1",
            "cvta.to.global.u64",
            "mov.u32 %r0, %ctaid.x",
            "mov.u32 %r1, %tid.x",
            "mul.wide.s32",
            "setp.lt.s32 %p0",
            "@%p0 ld.global.v4.f32 {%f0, %f1, %f2, %f3}",
            "add.rn.f32",
            "@%p0 st.global.v4.f32",
            "ret;",
        ],
    );
    assert_eq!(ptx.matches("ld.global.v4.f32").count(), 2);
}

#[test]
fn header_versions_follow_the_target() {
    let k = vector_add();
    let ptx = emit(&k, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    assert_contains(&ptx, &[".version 8.0", ".target sm_90"]);
    let ptx = emit(&k, &PtxTarget::from_compute_capability(8, 6)).unwrap();
    assert_contains(&ptx, &[".version 7.8", ".target sm_86"]);
    assert_eq!(
        PtxTarget::from_compute_capability(7, 5),
        PtxTarget {
            sm: 75,
            ptx_version: (7, 8),
            max_registers: None,
            pack_before_fence: false,
            wide_products: true,
            native_fp8_conversions: true,
        }
    );
    assert_eq!(PtxTarget::from_compute_capability(8, 9).ptx_version, (7, 8));
    assert_eq!(PtxTarget::from_compute_capability(10, 0).ptx_version, (8, 6));
    assert_eq!(PtxTarget::from_compute_capability(12, 0).ptx_version, (8, 7));
    emit_checked(&k, 75);
    emit_checked(&k, 86);
    emit_checked(&k, 89);
}

/// Sum of 128 values: shuffles within warps, shared memory across warps.
#[test]
fn reduction_with_shuffles_shared_memory_and_barrier() {
    let mut k = kernel("sum128");
    let x = k.ptr("x", F32);
    let out = k.ptr("out", F32);
    let partial = k.shared(F32, 4);
    let tid = k.thread_id();
    let v = k.load(F32, 1, Memory::Global { param: x }, tid, None)[0];
    let mut acc = v;
    for mask in [16, 8, 4, 2, 1] {
        let other = k.set(F32, Expr::ShuffleXor { value: acc, mask });
        acc = k.set(F32, Expr::Binary(BinaryOp::Add, acc, other));
    }
    let c31 = k.int(I32, 31);
    let c5 = k.int(I32, 5);
    let zero = k.int(I32, 0);
    let lane = k.set(I32, Expr::Binary(BinaryOp::And, tid, c31));
    let warp = k.set(I32, Expr::Binary(BinaryOp::Shr, tid, c5));
    let lane0 = k.set(Bool, Expr::Compare(CmpOp::Eq, lane, zero));
    k.push(Stmt::Comment("cross-warp exchange".into()));
    k.push(Stmt::Store {
        values: vec![acc],
        mem: Memory::Shared { alloc: partial },
        index: warp,
        pred: Some(lane0),
    });
    k.push(Stmt::Barrier);
    let four = k.int(I32, 4);
    let first = k.set(Bool, Expr::Compare(CmpOp::Lt, tid, four));
    let p = k.reg(F32);
    k.assign(p, Expr::Const(Literal::Float(0.0)));
    k.push(Stmt::Load {
        dsts: vec![p],
        mem: Memory::Shared { alloc: partial },
        index: lane,
        pred: Some(first),
        cache: rutile_ir::CacheModifier::Default,
    });
    let mut acc = p;
    for mask in [2, 1] {
        let other = k.set(F32, Expr::ShuffleXor { value: acc, mask });
        acc = k.set(F32, Expr::Binary(BinaryOp::Add, acc, other));
    }
    let t0 = k.set(Bool, Expr::Compare(CmpOp::Eq, tid, zero));
    k.store(vec![acc], Memory::Global { param: out }, zero, Some(t0));
    let ptx = emit_80_90(&k.finish());
    assert_contains(
        &ptx,
        &[
            ".extern .shared .align 16 .b8 smem[];",
            "smem;",
            "shfl.sync.bfly.b32",
            ", 16, 31, -1",
            "// cross-warp exchange",
            "st.shared.f32 [",
            "bar.sync 0;",
            "ld.shared.f32",
        ],
    );
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 7);
}

/// `if`/`else` and a counting `while` loop.
#[test]
fn if_else_and_while() {
    let mut k = kernel("control");
    let out = k.ptr("out", I32);
    let n = k.scalar("n", I32);
    let n = k.set(I32, Expr::Param(n));
    let zero = k.int(I32, 0);
    let one = k.int(I32, 1);
    let i = k.reg(I32);
    let acc = k.reg(I32);
    k.assign(i, Expr::Copy(zero));
    k.assign(acc, Expr::Copy(zero));
    let cond = k.reg(Bool);
    let cond_body = k.block(|k| k.assign(cond, Expr::Compare(CmpOp::Lt, i, n)));
    let body = k.block(|k| {
        let three = k.int(I32, 3);
        let r = k.set(I32, Expr::Binary(BinaryOp::Rem, i, three));
        let is0 = k.set(Bool, Expr::Compare(CmpOp::Eq, r, zero));
        let then_body = k.block(|k| k.assign(acc, Expr::Binary(BinaryOp::Add, acc, i)));
        let else_body = k.block(|k| k.assign(acc, Expr::Binary(BinaryOp::Sub, acc, one)));
        k.push(Stmt::If {
            cond: is0,
            then_body,
            else_body,
        });
        // An `if` without `else`, with a barrier inside (control flow is uniform).
        let then_body = k.block(|k| k.push(Stmt::Barrier));
        k.push(Stmt::If {
            cond: is0,
            then_body,
            else_body: vec![],
        });
        k.assign(i, Expr::Binary(BinaryOp::Add, i, one));
    });
    k.push(Stmt::While { cond_body, cond, body });
    let tid = k.thread_id();
    k.store(vec![acc], Memory::Global { param: out }, tid, None);
    let ptx = emit_80_90(&k.finish());
    assert_contains(
        &ptx,
        &[
            "$L__1:",
            "@!%p0 bra $L__2;",
            "bra.uni $L__1;",
            "$L__2:",
            "bra.uni",
            "rem.s32",
        ],
    );
    // Labels are defined once each.
    for l in 1..=5 {
        assert_eq!(ptx.matches(&format!("$L__{l}:")).count(), 1, "label $L__{l}");
    }
}

/// Every element type loads and stores 1, 2, 4 and 8 elements at a time (predicated), from
/// global and shared memory.
#[test]
fn vector_widths_for_every_element_type() {
    for ty in ScalarType::ALL {
        let mut k = kernel("widths");
        let src = k.ptr("src", ty);
        let dst = k.ptr("dst", ty);
        let sh = if ty != Bool { Some(k.shared(ty, 1024)) } else { None };
        let tid = k.thread_id();
        let eight = k.int(I32, 8);
        let i = k.set(I32, Expr::Binary(BinaryOp::Mul, tid, eight));
        let i64_ = k.set(I64, Expr::Cast(i));
        let zero = k.int(I32, 0);
        let m = k.set(Bool, Expr::Compare(CmpOp::Ge, tid, zero));
        for n in [1, 2, 4, 8] {
            let v = k.load(ty, n, Memory::Global { param: src }, i, Some(m));
            k.store(v.clone(), Memory::Global { param: dst }, i64_, Some(m));
            if let Some(a) = sh {
                k.push(Stmt::Store {
                    values: v.clone(),
                    mem: Memory::Shared { alloc: a },
                    index: i,
                    pred: None,
                });
                k.push(Stmt::Load {
                    dsts: v.clone(),
                    mem: Memory::Shared { alloc: a },
                    index: i64_,
                    pred: Some(m),
                    cache: rutile_ir::CacheModifier::Default,
                });
            }
        }
        let k = k.finish();
        let ptx = emit_80_90(&k);
        let expect: &[&str] = match ty {
            Bool => &["ld.global.v4.u8", "setp.ne.u32", "selp.u32", "st.global.v4.u8"],
            F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz => {
                &["ld.global.v4.u8", "ld.shared.v2.u8", "st.global.v4.u8"]
            }
            I8 => &["ld.global.v4.s8", "st.global.v2.s8"],
            U8 => &["ld.global.v4.u8"],
            I16 => &["ld.global.v4.s16", "ld.shared.v2.s16"],
            U16 => &["ld.global.v4.u16"],
            F16 | BF16 => &[
                "ld.global.v4.b32",
                "mov.b32 {%h",
                "ld.global.v4.b16",
                "ld.global.v2.b16",
                "st.global.v4.b32",
            ],
            I32 => &["ld.global.v4.s32", "st.global.v4.s32 [%rd"],
            U32 => &["ld.global.v4.u32"],
            F32 => &["ld.global.v4.f32", "ld.shared.v4.f32", "st.shared.v4.f32", "+16]"],
            I64 | U64 | F64 => &["ld.global.v2.", "+48]", "mad.lo.s64"],
        };
        assert_contains(&ptx, expect);
    }
}

#[test]
fn shuffles_of_every_register_class() {
    for ty in [Bool, I8, U16, I32, U32, F32, I64, U64, F64, F16, BF16] {
        let mut k = kernel("shuffles");
        let src = k.ptr("src", ty);
        let dst = k.ptr("dst", ty);
        let tid = k.thread_id();
        let v = k.load(ty, 1, Memory::Global { param: src }, tid, None)[0];
        let a = k.set(ty, Expr::ShuffleXor { value: v, mask: 1 });
        let c7 = k.int(I32, 7);
        let lane = k.set(I32, Expr::Binary(BinaryOp::And, tid, c7));
        let b = k.set(ty, Expr::ShuffleIdx { value: a, lane });
        k.store(vec![b], Memory::Global { param: dst }, tid, None);
        let ptx = emit_80_90(&k.finish());
        assert_contains(&ptx, &["shfl.sync.bfly.b32", "shfl.sync.idx.b32"]);
        if ty.bits() == 64 {
            assert_eq!(ptx.matches("shfl.sync").count(), 4);
        }
    }
}

#[test]
fn scalar_parameters_of_every_size() {
    let mut k = kernel("params");
    let out = k.ptr("out", F64);
    let mut acc = k.float(F64, 0.0);
    for ty in [I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64] {
        let p = k.scalar(&format!("p_{ty}"), ty);
        let v = k.set(ty, Expr::Param(p));
        let f = k.set(F64, Expr::Cast(v));
        acc = k.set(F64, Expr::Binary(BinaryOp::Add, acc, f));
    }
    let zero = k.int(I32, 0);
    k.store(vec![acc], Memory::Global { param: out }, zero, None);
    let ptx = emit_80_90(&k.finish());
    assert_contains(
        &ptx,
        &[
            ".param .s8 params_param_1",
            ".param .u8 params_param_2",
            ".param .s16 params_param_3",
            ".param .b16 params_param_9",
            ".param .f64 params_param_12",
            "ld.param.s8",
            "ld.param.b16",
        ],
    );
}

#[test]
fn comments_and_constants() {
    let mut k = kernel("consts");
    let out = k.ptr("out", F32);
    k.push(Stmt::Comment("first line\nsecond line".into()));
    let a = k.float(F32, 1.0);
    let b = k.float(F32, f64::NAN);
    let c = k.float(F32, f64::NEG_INFINITY);
    let d = k.float(F64, 0.1);
    let h = k.float(F16, 1.0);
    let bh = k.float(BF16, -2.0);
    let big = k.int(U64, -1);
    let min = k.int(I64, i64::MIN);
    let neg = k.int(I8, -5);
    let u = k.int(U32, -1);
    let t = k.set(Bool, Expr::Const(Literal::Bool(true)));
    let _ = (d, h, bh, big, min, neg, u);
    let s = k.set(F32, Expr::Select(t, a, b));
    let s = k.set(F32, Expr::Binary(BinaryOp::Add, s, c));
    let zero = k.int(I32, 0);
    k.store(vec![s], Memory::Global { param: out }, zero, None);
    let ptx = emit_80_90(&k.finish());
    assert_contains(
        &ptx,
        &[
            "// first line",
            "// second line",
            "0f3F800000",
            "0f7FC00000",
            "0fFF800000",
            "0d3FB999999999999A",
            "mov.b16 %h0, 0x3C00",
            "mov.b16 %h1, 0xC000",
            "0xFFFFFFFFFFFFFFFF",
            "0x8000000000000000",
            "mov.b32 %r0, -5",
            "4294967295",
            "mov.pred %p0, 1",
        ],
    );
}

#[test]
fn grid_specials() {
    let mut k = kernel("grid");
    let out = k.ptr("out", I32);
    let mut regs = vec![];
    for a in 0..3 {
        regs.push(k.set(I32, Expr::Special(Special::ProgramId(a))));
        regs.push(k.set(I32, Expr::Special(Special::NumPrograms(a))));
    }
    let zero = k.int(I32, 0);
    for r in regs {
        k.store(vec![r], Memory::Global { param: out }, zero, None);
    }
    let ptx = emit_80_90(&k.finish());
    assert_contains(
        &ptx,
        &[
            "%ctaid.x",
            "%ctaid.y",
            "%ctaid.z",
            "%nctaid.x",
            "%nctaid.y",
            "%nctaid.z",
        ],
    );
}

/// Prints the PTX of a small kernel with control flow (run with `--nocapture` to read it).
#[test]
fn readable_output() {
    let mut k = kernel("readable");
    let out = k.ptr("out", F32);
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    let c = k.set(Bool, Expr::Compare(CmpOp::Eq, tid, zero));
    let x = k.float(F32, 0.5);
    let then_body = k.block(|k| {
        k.push(Stmt::Comment("store from thread 0".into()));
        k.store(vec![x], Memory::Global { param: out }, zero, None);
    });
    k.push(Stmt::If {
        cond: c,
        then_body,
        else_body: vec![],
    });
    let ptx = emit_80_90(&k.finish());
    println!("{ptx}");
    // Nested statements are indented one more level.
    assert_contains(&ptx, &["\t\t// store from thread 0", "\t\tst.global.f32"]);
}
