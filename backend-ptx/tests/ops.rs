//! Every unary, binary and comparison op on every type where it is defined, `select` and
//! `fma`, checked with ptxas; and the ops the backend rejects.

mod support;

use rutile_ir::ir::{BinaryOp, CmpOp, UnaryOp};
use rutile_ir::thread::{Expr, Memory, ThreadKernel};
use rutile_ir::ScalarType::{self, *};
use rutile_ptx::{emit, PtxError, PtxTarget};
use support::{assert_contains, emit_80_90, emit_checked, kernel};

/// Whether the block IR defines `op` on `t` (the typing rules).
fn unary_defined(op: UnaryOp, t: ScalarType) -> bool {
    match op {
        UnaryOp::Not => !t.is_float(),
        UnaryOp::Neg | UnaryOp::Abs => !t.is_bool(),
        op if op.bits_only() => t.is_int(),
        _ => t.is_float(),
    }
}

fn binary_defined(op: BinaryOp, t: ScalarType) -> bool {
    if op.integral_only() && !t.is_integral() || op.float_only() && !t.is_float() {
        return false;
    }
    let numeric_only = matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::Shl
            | BinaryOp::Shr
            | BinaryOp::CeilDiv
    );
    if op == BinaryOp::UMulHi && !matches!(t.bits(), 32 | 64) {
        return false;
    }
    !(t.is_bool() && numeric_only)
}

/// Whether the PTX backend generates `op` of `t` (f64 `pow` is missing).
fn binary_supported(op: BinaryOp, t: ScalarType) -> bool {
    binary_defined(op, t) && !(t == F64 && op == BinaryOp::Pow)
}

/// Whether the PTX backend generates `op` of `t` (f64 transcendental functions are missing).
fn unary_supported(op: UnaryOp, t: ScalarType) -> bool {
    unary_defined(op, t)
        && !(t == F64
            && matches!(
                op,
                UnaryOp::Exp
                    | UnaryOp::Exp2
                    | UnaryOp::Log
                    | UnaryOp::Log2
                    | UnaryOp::Sin
                    | UnaryOp::Cos
                    | UnaryOp::Erf
                    | UnaryOp::Sigmoid
                    | UnaryOp::Tanh
            ))
}

/// A kernel applying every supported op to two loaded values of type `t` and storing every
/// result.
fn all_ops(t: ScalarType) -> ThreadKernel {
    let mut k = kernel("ops");
    let src = k.ptr("src", t);
    let dst = k.ptr("dst", t);
    let flags = k.ptr("flags", Bool);
    let tid = k.thread_id();
    let two = k.int(I32, 2);
    let i = k.set(I32, Expr::Binary(BinaryOp::Mul, tid, two));
    let v = k.load(t, 2, Memory::Global { param: src }, i, None);
    let (a, b) = (v[0], v[1]);
    let mut out = vec![];
    for op in UnaryOp::ALL {
        if unary_supported(op, t) {
            out.push(k.set(t, Expr::Unary(op, a)));
        }
    }
    for op in BinaryOp::ALL {
        if binary_supported(op, t) {
            out.push(k.set(t, Expr::Binary(op, a, b)));
        }
    }
    let mut bools = vec![];
    for op in CmpOp::ALL {
        bools.push(k.set(Bool, Expr::Compare(op, a, b)));
    }
    out.push(k.set(t, Expr::Select(bools[2], a, b)));
    if t.is_float() {
        out.push(k.set(t, Expr::Fma(a, b, a)));
    }
    // Results are stored in pairs (index `i` is even).
    for pair in out.chunks(2) {
        let mut v = pair.to_vec();
        if v.len() == 1 {
            v.push(a);
        }
        k.store(v, Memory::Global { param: dst }, i, None);
    }
    for pair in bools.chunks(2) {
        k.store(pair.to_vec(), Memory::Global { param: flags }, i, None);
    }
    k.finish()
}

#[test]
fn f32_ops() {
    let ptx = emit_80_90(&all_ops(F32));
    assert_contains(
        &ptx,
        &[
            "neg.f32",
            "abs.f32",
            "ex2.approx.f32",
            "ex2.approx.ftz.f32",
            "lg2.approx.f32",
            "sqrt.rn.f32",
            "rsqrt.approx.f32",
            "sin.approx.f32",
            "cos.approx.f32",
            "cvt.rmi.f32.f32",
            "cvt.rpi.f32.f32",
            "add.rn.f32",
            "sub.rn.f32",
            "mul.rn.f32",
            "div.rn.f32",
            "div.full.f32",
            "min.NaN.f32",
            "max.NaN.f32",
            "setp.eq.f32",
            "setp.neu.f32",
            "setp.lt.f32",
            "setp.ge.f32",
            "selp.b32",
            "fma.rn.f32",
        ],
    );
    // Without min.NaN before sm_80.
    let ptx = emit_checked(&all_ops(F32), 75);
    assert!(!ptx.contains(".NaN"));
    assert_contains(&ptx, &["min.f32", "max.f32", "setp.nan.f32"]);
}

#[test]
fn f64_ops() {
    let ptx = emit_80_90(&all_ops(F64));
    assert_contains(
        &ptx,
        &[
            "neg.f64",
            "abs.f64",
            "sqrt.rn.f64",
            "div.rn.f64 %fd",
            "cvt.rmi.f64.f64",
            "cvt.rpi.f64.f64",
            "add.rn.f64",
            "min.f64",
            "max.f64",
            "setp.nan.f64",
            "setp.neu.f64",
            "fma.rn.f64",
            "st.global.v2.f64",
        ],
    );
    emit_checked(&all_ops(F64), 75);
}

#[test]
fn f16_ops() {
    let ptx = emit_80_90(&all_ops(F16));
    assert_contains(
        &ptx,
        &[
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
            "xor.b16",
            "and.b16",
            "min.NaN.f16",
            "fma.rn.f16",
            "add.rn.f16",
            "sub.rn.f16",
            "mul.rn.f16",
            "ld.global.v2.b16",
        ],
    );
    // f16 arithmetic needs nothing newer than sm_70; `+ - *` never go through f32.
    emit_checked(&all_ops(F16), 75);
    let ptx = emit_checked(&sum_difference_product(F16), 70);
    assert_contains(&ptx, &["add.rn.f16", "sub.rn.f16", "mul.rn.f16"]);
    assert!(!ptx.contains("cvt.f32.") && !ptx.contains("cvt.rn."), "{ptx}");
}

/// `a + b`, `a - b` and `a * b` of two loaded values of type `t`, stored with `a`.
fn sum_difference_product(t: ScalarType) -> ThreadKernel {
    let mut k = kernel("sum_difference_product");
    let (src, dst) = (k.ptr("src", t), k.ptr("dst", t));
    let tid = k.thread_id();
    let v = k.load(t, 2, Memory::Global { param: src }, tid, None);
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
    let [sum, difference, product] = ops.map(|op| k.set(t, Expr::Binary(op, v[0], v[1])));
    k.store(
        vec![sum, difference, product, v[0]],
        Memory::Global { param: dst },
        tid,
        None,
    );
    k.finish()
}

#[test]
fn bf16_ops() {
    let ptx = emit_80_90(&all_ops(BF16));
    assert_contains(&ptx, &["shl.b32", "cvt.rn.bf16.f32", "min.NaN.bf16", "fma.rn.bf16"]);
    // `+ - *`: sm_80 has only the fused form, with 1 or -0 for the missing operand; sm_90
    // has each one. Neither goes through f32.
    for (sm, native) in [(80, false), (90, true)] {
        let ptx = emit_checked(&sum_difference_product(BF16), sm);
        let ops = ["add.rn.bf16", "sub.rn.bf16", "mul.rn.bf16"];
        assert!(ops.iter().all(|op| ptx.contains(op) == native), "{ptx}");
        let fused = ["0x8000", "0x3F80", "0xBF80"].iter().all(|c| ptx.contains(c));
        assert_eq!(ptx.matches("fma.rn.bf16").count(), if native { 0 } else { 3 }, "{ptx}");
        assert_eq!(fused, !native, "{ptx}");
        assert!(!ptx.contains("cvt.f32.") && !ptx.contains("cvt.rn."), "{ptx}");
    }
    // Rounding to bf16 needs sm_80.
    let err = emit(&all_ops(BF16), &PtxTarget::from_compute_capability(7, 5)).unwrap_err();
    assert!(matches!(err, PtxError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("needs sm_80"), "{err}");
}

#[test]
fn bf16_without_rounding_works_before_sm80() {
    // neg, abs, min, max, compares, select and copies need no rounding.
    let mut k = kernel("bf16_old");
    let src = k.ptr("src", BF16);
    let dst = k.ptr("dst", BF16);
    let tid = k.thread_id();
    let v = k.load(BF16, 2, Memory::Global { param: src }, tid, None);
    let n = k.set(BF16, Expr::Unary(UnaryOp::Neg, v[0]));
    let a = k.set(BF16, Expr::Unary(UnaryOp::Abs, n));
    let m = k.set(BF16, Expr::Binary(BinaryOp::Max, a, v[1]));
    let m = k.set(BF16, Expr::Binary(BinaryOp::Min, m, v[0]));
    let c = k.set(Bool, Expr::Compare(CmpOp::Le, m, a));
    let s = k.set(BF16, Expr::Select(c, m, a));
    let f = k.set(F32, Expr::Cast(s));
    let g = k.set(F32, Expr::Binary(BinaryOp::Mul, f, f));
    let fdst = k.ptr("fdst", F32);
    k.store(vec![g], Memory::Global { param: fdst }, tid, None);
    k.store(vec![s], Memory::Global { param: dst }, tid, None);
    let ptx = emit_checked(&k.finish(), 75);
    assert!(!ptx.contains(".bf16"), "{ptx}");
}

#[test]
fn signed_int_ops() {
    let ptx = emit_80_90(&all_ops(I32));
    assert_contains(
        &ptx,
        &[
            "neg.s32",
            "not.b32",
            "abs.s32",
            "add.s32",
            "mul.lo.s32",
            "div.s32",
            "rem.s32",
            "setp.eq.s32",
            "selp.b32 %r",
            "shl.b32",
            "shr.s32",
            "min.s32",
            "max.s32",
            "setp.ne.s32",
            "setp.lt.s32",
        ],
    );
    let ptx = emit_80_90(&all_ops(I64));
    assert_contains(
        &ptx,
        &[
            "div.s64",
            "rem.s64",
            "min.u64",
            "cvt.u32.u64",
            "shl.b64",
            "shr.s64",
            "mul.lo.s64",
            "setp.le.s64",
        ],
    );
    for t in [I8, I16] {
        let ptx = emit_80_90(&all_ops(t));
        assert_contains(&ptx, &[&format!("cvt.s32.{}", if t == I8 { "s8" } else { "s16" })]);
    }
}

#[test]
fn unsigned_int_ops() {
    let ptx = emit_80_90(&all_ops(U32));
    assert_contains(
        &ptx,
        &["div.u32", "rem.u32", "shr.u32", "min.u32", "setp.lt.u32", "setp.ge.u32"],
    );
    assert!(!ptx.contains("abs.s32"), "abs of unsigned is a copy");
    let ptx = emit_80_90(&all_ops(U64));
    assert_contains(&ptx, &["div.u64", "shr.u64", "max.u64", "setp.gt.u64"]);
    for t in [U8, U16] {
        let ptx = emit_80_90(&all_ops(t));
        assert_contains(&ptx, &[if t == U8 { "and.b32 %r" } else { "65535" }]);
    }
}

#[test]
fn bool_ops() {
    let ptx = emit_80_90(&all_ops(Bool));
    assert_contains(&ptx, &["not.pred", "and.pred", "or.pred", "xor.pred", "selp.u32"]);
}

#[test]
fn f64_transcendentals_are_rejected() {
    for op in [
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
    ] {
        let mut k = kernel("f64_math");
        let src = k.ptr("src", F64);
        let tid = k.thread_id();
        let v = k.load(F64, 1, Memory::Global { param: src }, tid, None)[0];
        let r = k.set(F64, Expr::Unary(op, v));
        k.store(vec![r], Memory::Global { param: src }, tid, None);
        let err = emit(&k.finish(), &PtxTarget::from_compute_capability(9, 0)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("f64 `{}` is not supported by the PTX backend yet", op.name())),
            "{msg}"
        );
        // The statement is named.
        assert!(msg.contains(&format!("= {} r", op.name())), "{msg}");
    }
}

#[test]
fn ops_undefined_for_the_type_are_rejected() {
    // The per-thread verifier checks types, not which ops a type has: the backend must.
    let mut k = kernel("bad");
    let src = k.ptr("src", F32);
    let tid = k.thread_id();
    let v = k.load(F32, 1, Memory::Global { param: src }, tid, None)[0];
    let r = k.set(F32, Expr::Binary(BinaryOp::Shl, v, v));
    k.store(vec![r], Memory::Global { param: src }, tid, None);
    let err = emit(&k.finish(), &PtxTarget::from_compute_capability(8, 0)).unwrap_err();
    assert!(err.to_string().contains("`shl` of f32 is not defined"), "{err}");

    let mut k = kernel("bad");
    let c = k.set(Bool, Expr::Const(rutile_ir::ir::Literal::Bool(true)));
    k.set(Bool, Expr::Binary(BinaryOp::Add, c, c));
    let err = emit(&k.finish(), &PtxTarget::from_compute_capability(8, 0)).unwrap_err();
    assert!(err.to_string().contains("`add` of i1 is not defined"), "{err}");
}

#[test]
fn umulhi_pow_and_tanh_instructions() {
    // `umulhi` and `mul` of the same 32-bit operands: both halves from one `mul.wide.u32`
    // (`PtxTarget::wide_products`), or each by its own instruction without it.
    let ops = all_ops(U32);
    assert_contains(&emit_80_90(&ops), &["mul.wide.u32"]);
    let split = emit(&ops, &PtxTarget::from_compute_capability(9, 0).wide_products(false)).unwrap();
    assert_contains(&split, &["mul.hi.u32", "mul.lo.u32"]);
    assert!(!split.contains("mul.wide.u32"), "{split}");
    let ptx = emit_80_90(&all_ops(I64));
    assert_contains(&ptx, &["mul.hi.u64"]);
    let ptx = emit_80_90(&all_ops(F32));
    // pow: the logarithm and exponential, and the integer tests of the exponent.
    assert_contains(&ptx, &["lg2.approx.f32", "ex2.approx.f32", "cvt.rzi.f32.f32"]);
    // tanh: the switch between the series and the exponential form.
    assert_contains(&ptx, &["0f3F0CCCCD"]);
    let mut k = kernel("f64_pow");
    let src = k.ptr("src", F64);
    let tid = k.thread_id();
    let v = k.load(F64, 1, Memory::Global { param: src }, tid, None)[0];
    let r = k.set(F64, Expr::Binary(BinaryOp::Pow, v, v));
    k.store(vec![r], Memory::Global { param: src }, tid, None);
    let err = emit(&k.finish(), &PtxTarget::from_compute_capability(9, 0)).unwrap_err();
    assert!(err.to_string().contains("f64 `pow` is not supported"), "{err}");
}

#[test]
fn float_rem_is_an_exact_loop() {
    let ptx = emit_80_90(&all_ops(F32));
    // Doubling and halving the divisor, conditional exact subtraction.
    assert_contains(&ptx, &["0f40000000", "0f3F000000", "sub.rn.f32 %f", "0x80000000"]);
}
