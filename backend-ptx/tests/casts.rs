//! Casts and bitcasts between every pair of types, checked with ptxas.

mod support;

use rutile_ir::ir::BinaryOp;
use rutile_ir::thread::{Expr, Memory, ThreadKernel};
use rutile_ir::ScalarType::{self, *};
use rutile_ptx::{emit, PtxTarget};
use support::{assert_contains, emit_80_90, emit_checked, kernel};

/// A kernel casting a loaded `from` value to every type and storing each result.
fn casts_from(from: ScalarType, bitcast: bool) -> ThreadKernel {
    casts_among(from, bitcast, |_| true)
}

fn casts_among(from: ScalarType, bitcast: bool, to_types: impl Fn(ScalarType) -> bool) -> ThreadKernel {
    let mut k = kernel("casts");
    let src = k.ptr("src", from);
    let tid = k.thread_id();
    let v = k.load(from, 1, Memory::Global { param: src }, tid, None)[0];
    for to in ScalarType::ALL.into_iter().filter(|&t| to_types(t)) {
        if bitcast && to.bits() != from.bits() {
            continue;
        }
        let dst = k.ptr(&format!("to_{to}"), to);
        let r = k.set(to, if bitcast { Expr::Bitcast(v) } else { Expr::Cast(v) });
        k.store(vec![r], Memory::Global { param: dst }, tid, None);
    }
    k.finish()
}

#[test]
fn every_cast_assembles() {
    // fp8 included on every target: by sm_89's `cvt` from it, by integer instructions before.
    for from in ScalarType::ALL {
        let ptx = emit_80_90(&casts_from(from, false));
        assert!(
            !ptx.contains("e4m3x2") && !ptx.contains("e5m2x2"),
            "sm_80 has no fp8 `cvt`"
        );
        let ptx = emit_checked(&casts_from(from, false), 89);
        // (A bool becomes fp8 by selecting constants.)
        if from != Bool {
            assert!(
                ptx.contains("e4m3x2") && ptx.contains("e5m2x2"),
                "sm_89 converts fp8 by `cvt`"
            );
            assert!(ptx.contains(".version 8.1"), "sm_89's fp8 `cvt` needs PTX 8.1");
        }
    }
}

/// With native conversions off, a target that has them converts fp8 as older ones do: no
/// fp8 `cvt`, and the PTX version the target has without them.
#[test]
fn fp8_conversions_by_integer_instructions_where_asked() {
    for (major, minor) in [(8, 9), (9, 0)] {
        let target = PtxTarget::from_compute_capability(major, minor).native_fp8_conversions(false);
        for from in [F32, F64, F8E4M3, F8E5M2] {
            let ptx = emit(&casts_from(from, false), &target).unwrap();
            support::ptxas_check(&ptx, target.sm);
            assert!(!ptx.contains("e4m3x2") && !ptx.contains("e5m2x2"), "{target}: {ptx}");
            let version = target.ptx_version;
            assert!(
                ptx.contains(&format!(".version {}.{}", version.0, version.1)),
                "{target}"
            );
        }
    }
    // What the integer path is made of: rounding by adding below the kept bits, subnormals
    // by a rounding conversion of the scaled value; E4M3 widened by a power-of-two multiply
    // (in f32, and in f16 for f16), E5M2 through f16.
    let ptx = emit_checked(&casts_from(F32, false), 80);
    assert_contains(&ptx, &["min.u32", "cvt.rni.u32.f32", "setp.gt.u32"]);
    let ptx = emit_checked(&casts_from(F8E4M3, false), 80);
    assert_contains(&ptx, &["mul.rn.f32", "0f7B800000", "mul.rn.f16", "0x5C00"]);
    let ptx = emit_checked(&casts_from(F8E5M2, false), 80);
    assert_contains(&ptx, &["shl.b16", "cvt.f32.f16"]);
}

/// Triton's other fp8 formats (`float8e4b15`, the `fnuz` ones) have no `cvt`: integer
/// instructions convert them on every target, sm_90 included; `float8e4b15` widens to f16
/// by a shift alone (its bias is f16's).
#[test]
fn other_fp8_formats_by_integer_instructions_everywhere() {
    for from in [F8E4M3B15, F8E4M3Fnuz, F8E5M2Fnuz] {
        let wide = |t: ScalarType| matches!(t, F16 | F32 | F64) || t == from;
        let ptx = emit_checked(&casts_among(from, false, wide), 90);
        assert!(!ptx.contains("e4m3x2") && !ptx.contains("e5m2x2"), "{from}: {ptx}");
        let to_f16 = emit_checked(&casts_among(from, false, |t| t == F16), 90);
        assert_eq!(to_f16.contains("mul.rn.f16"), from == F8E4M3Fnuz, "{from}: {to_f16}");
        let ptx = emit_checked(&casts_from(F32, false), 90);
        assert!(
            ptx.contains("cvt.rni.u32.f32"),
            "rounding to {from} by integer instructions"
        );
    }
}

#[test]
fn casts_without_bf16_rounding_assemble_on_sm70_and_sm75() {
    for from in ScalarType::ALL {
        let mut k = casts_from(from, false);
        // Drop the casts that round to bf16 (they need sm_80).
        if from != BF16 {
            let pos = k.params.iter().position(|p| p.name() == "to_bf16").unwrap();
            k.body.retain(|s| match s {
                rutile_ir::thread::Stmt::Store {
                    mem: rutile_ir::thread::Memory::Global { param },
                    ..
                } => *param as usize != pos,
                rutile_ir::thread::Stmt::Set { dst, .. } => k.regs[*dst].ty != BF16,
                _ => true,
            });
        }
        emit_checked(&k, 75);
        emit_checked(&k, 70);
    }
    let err = emit(&casts_from(F32, false), &PtxTarget::from_compute_capability(7, 5)).unwrap_err();
    assert!(err.to_string().contains("rounding to bf16 needs sm_80"), "{err}");
}

#[test]
fn cast_instructions() {
    let ptx = emit_80_90(&casts_from(F32, false));
    assert_contains(
        &ptx,
        &[
            "setp.neu.f32",
            "cvt.rzi.s32.f32",
            "cvt.rzi.u32.f32",
            "cvt.rzi.s64.f32",
            "cvt.rzi.u64.f32",
            "max.s32",
            "min.s32",
            "min.u32",
            "cvt.rn.f16.f32",
            "cvt.rn.bf16.f32",
            "cvt.f64.f32",
        ],
    );
    let ptx = emit_80_90(&casts_from(I32, false));
    assert_contains(
        &ptx,
        &[
            "setp.ne.s32",
            "cvt.s32.s8",
            "and.b32",
            "cvt.s64.s32",
            "cvt.rn.f32.s32",
            "cvt.rn.f64.s32",
            "cvt.rn.f16.s32",
            // Rounding to odd on the way to bf16.
            "cvt.rz.f32.s32",
        ],
    );
    let ptx = emit_80_90(&casts_from(U64, false));
    assert_contains(
        &ptx,
        &["cvt.u32.u64", "cvt.rn.f32.u64", "cvt.rz.f32.u64", "setp.ne.u64"],
    );
    let ptx = emit_80_90(&casts_from(Bool, false));
    assert_contains(
        &ptx,
        &["selp.f32 %f0, 0f3F800000, 0f00000000", "selp.b16", "0x3F80", "selp.u64"],
    );
    let ptx = emit_80_90(&casts_from(F64, false));
    assert_contains(
        &ptx,
        &["cvt.rn.f32.f64", "cvt.rn.f16.f64", "cvt.rz.f32.f64", "cvt.rzi.s32.f64"],
    );
    // NaN converts to 0: selected explicitly (the hardware's NaN result is not 0 for f64).
    assert_contains(&ptx, &["setp.nan.f64", "selp.b64 %rd"]);
    let ptx = emit_80_90(&casts_from(BF16, false));
    assert_contains(&ptx, &["shl.b32", "cvt.rn.f16.f32", "and.b16", "setp.ne.b16"]);
    let ptx = emit_80_90(&casts_from(U8, false));
    assert_contains(&ptx, &["cvt.u64.u32", "cvt.rn.f32.u32"]);
    // fp8 on sm_89 and later: rounded by the saturating conversion (E5M2's infinities set
    // after it), widened through f16 pairs, from f64 rounded to odd first.
    let ptx = emit_checked(&casts_from(F32, false), 90);
    assert_contains(
        &ptx,
        &[
            "cvt.rn.satfinite.e4m3x2.f32",
            "cvt.rn.satfinite.e5m2x2.f32",
            "testp.infinite.f32",
        ],
    );
    let ptx = emit_checked(&casts_from(F8E4M3, false), 90);
    assert_contains(&ptx, &["cvt.rn.f16x2.e4m3x2", "cvt.f32.f16", "cvt.f64.f32", "and.b16"]);
    let ptx = emit_checked(&casts_from(F64, false), 90);
    assert_contains(&ptx, &["cvt.rz.f32.f64", "cvt.rn.satfinite.e5m2x2.f32"]);
}

#[test]
fn every_bitcast_assembles() {
    // fp8 among the 8-bit types: the bits kept in a 16-bit register's low byte.
    for from in ScalarType::ALL {
        let ptx = emit_80_90(&casts_from(from, true));
        emit_checked(&casts_from(from, true), 75);
        match from {
            I8 => assert_contains(&ptx, &["cvt.u16.u32", "and.b16"]),
            I16 => assert_contains(&ptx, &["cvt.u16.u32"]),
            F16 => assert_contains(&ptx, &["cvt.s32.s16", "cvt.u32.u16"]),
            F32 => assert_contains(&ptx, &["mov.b32 %r"]),
            F64 => assert_contains(&ptx, &["mov.b64 %rd"]),
            _ => {}
        }
    }
}

/// The halves of a 32-bit word read as two 16-bit floats, `bitcast(w as u16)` and
/// `bitcast((w >> 16) as u16)`, are the word's own halves (`mov.b32 {lo, hi}`): no mask,
/// no shift, no truncation; and a half taken where the word has changed since its cast
/// is the cast's, as written.
#[test]
fn word_halves_are_read_in_place() {
    for t in [F16, BF16] {
        let mut k = kernel("halves");
        let (src, dst) = (k.ptr("src", I32), k.ptr("dst", t));
        let tid = k.thread_id();
        let w = k.load(I32, 1, Memory::Global { param: src }, tid, None)[0];
        let low = k.set(U16, Expr::Cast(w));
        let sixteen = k.int(I32, 16);
        let shifted = k.set(I32, Expr::Binary(BinaryOp::Shr, w, sixteen));
        let high = k.set(U16, Expr::Cast(shifted));
        let halves = [low, high].map(|h| k.set(t, Expr::Bitcast(h)));
        k.store(halves.to_vec(), Memory::Global { param: dst }, tid, None);
        let ptx = emit_80_90(&k.finish());
        assert_eq!(ptx.matches("mov.b32 {").count(), 2, "{ptx}");
        assert!(!ptx.contains("cvt.u16.u32"), "{ptx}");
    }
    // The word written after the cast: the cast's value, truncated.
    let mut k = kernel("stale");
    let (src, dst) = (k.ptr("src", I32), k.ptr("dst", F16));
    let tid = k.thread_id();
    let w = k.load(I32, 1, Memory::Global { param: src }, tid, None)[0];
    let low = k.set(U16, Expr::Cast(w));
    k.assign(w, Expr::Binary(BinaryOp::Add, w, w));
    let h = k.set(F16, Expr::Bitcast(low));
    k.store(vec![h], Memory::Global { param: dst }, tid, None);
    let ptx = emit_80_90(&k.finish());
    assert!(ptx.contains("cvt.u16.u32") && !ptx.contains("mov.b32 {"), "{ptx}");
}
