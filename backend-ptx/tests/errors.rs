//! Kernels and targets the backend refuses, with messages that say why.

mod support;

use rutile_ir::thread::{Expr, Memory, Stmt};
use rutile_ir::ScalarType::*;
use rutile_ptx::{emit, PtxError, PtxTarget};
use support::kernel;

fn sm90() -> PtxTarget {
    PtxTarget::from_compute_capability(9, 0)
}

#[test]
fn boolean_scalar_parameters() {
    let mut k = kernel("flag");
    k.scalar("enabled", Bool);
    let err = emit(&k.finish(), &sm90()).unwrap_err();
    assert!(
        matches!(&err, PtxError::Param { name, .. } if name == "enabled"),
        "{err}"
    );
    assert!(err.to_string().contains("pass booleans as an integer"), "{err}");
}

#[test]
fn kernel_shape_and_target_limits() {
    let check = |k: &rutile_ir::thread::ThreadKernel, t: PtxTarget, needle: &str| {
        let err = emit(k, &t).unwrap_err();
        assert!(matches!(err, PtxError::Target { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    };
    let base = kernel("k").finish();
    check(
        &base,
        PtxTarget {
            sm: 61,
            ptx_version: (7, 8),
            max_registers: None,
            pack_before_fence: false,
            wide_products: true,
            native_fp8_conversions: true,
        },
        "needs sm_70",
    );
    check(
        &base,
        PtxTarget {
            sm: 80,
            ptx_version: (6, 5),
            max_registers: None,
            pack_before_fence: false,
            wide_products: true,
            native_fp8_conversions: true,
        },
        "PTX ISA 7.0",
    );
    for count in [0, 15, 256] {
        check(&base, sm90().max_registers(Some(count)), &format!("maxnreg = {count}"));
    }
    let mut k = base.clone();
    k.warp_size = 64;
    check(&k, sm90(), "32 threads");
    let mut k = base.clone();
    k.num_warps = 64;
    check(&k, sm90(), "1024");
    // More than 48 KiB of shared memory is fine: it is dynamic, sized at launch.
    let mut k = kernel("big");
    k.shared(F32, 16 * 1024);
    let k = k.finish();
    let ptx = rutile_ptx::emit(&k, &sm90()).unwrap();
    assert!(ptx.contains(".extern .shared .align 16 .b8 smem[];"));
    assert_eq!(rutile_ptx::dynamic_shared_bytes(&k), 64 * 1024);
    let mut k = base.clone();
    k.name = "not an identifier".into();
    check(&k, sm90(), "identifier");
}

#[test]
fn invalid_kernels_fail_verification() {
    let mut k = kernel("bad");
    let f = k.reg(F32);
    let i = k.reg(I32);
    k.push(Stmt::Set {
        dst: f,
        expr: Expr::Copy(i),
    });
    let err = emit(&k.finish_unverified(), &sm90()).unwrap_err();
    assert!(matches!(err, PtxError::InvalidKernel(_)), "{err}");
    // 2^27 warps of 32 threads overflow a u32 count (to a `.maxntid` of 0, unchecked).
    let mut k = kernel("many").finish();
    k.num_warps = 1 << 27;
    let err = emit(&k, &sm90()).unwrap_err();
    assert!(matches!(err, PtxError::InvalidKernel(_)), "{err}");
    assert!(err.to_string().contains("4294967296 threads per program"), "{err}");
    // Producer warps count: the message adds them up as the check does.
    let mut k = kernel("specialized").finish();
    (k.num_warps, k.producer_warps) = (1 << 20, 4);
    let err = emit(&k, &sm90()).unwrap_err();
    assert!(
        err.to_string()
            .contains("1048576 warps and 4 producer warps of 32 threads make 33554560 threads per program"),
        "{err}"
    );
}

#[test]
fn unsupported_statements_are_named() {
    let mut k = kernel("named");
    let p = k.ptr("x", F64);
    let tid = k.thread_id();
    let v = k.load(F64, 1, Memory::Global { param: p }, tid, None)[0];
    k.set(F64, Expr::Unary(rutile_ir::ir::UnaryOp::Cos, v));
    let err = emit(&k.finish(), &sm90()).unwrap_err();
    match &err {
        PtxError::Unsupported { statement, reason } => {
            assert_eq!(statement, "r2: f64 = cos r1");
            assert_eq!(reason, "f64 `cos` is not supported by the PTX backend yet");
        }
        _ => panic!("{err}"),
    }
    assert_eq!(
        err.to_string(),
        "f64 `cos` is not supported by the PTX backend yet (in `r2: f64 = cos r1`)"
    );
}
