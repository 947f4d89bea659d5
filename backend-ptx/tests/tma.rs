//! Tensor-memory-accelerator copies and mbarriers (`Stmt::TmaLoad`, `Stmt::Mbarrier*`): the
//! tensor-map parameters and instructions they become, assembled with ptxas for sm_90 and
//! sm_100, and the error older targets get.

mod support;

use rutile_ir::ir::CmpOp;
use rutile_ir::thread::{LaunchValue, MBarrier, Memory, Stmt, ThreadKernel};
use rutile_ir::ScalarType::*;
use rutile_ptx::{emit, PtxError, PtxTarget};
use support::{assert_contains, emit_checked, kernel};

/// One 64x64 f16 box of `a` (`rows` x `cols`, row stride `stride` elements) into shared
/// memory through TMA, waited for twice (two phases), copied out to `out`; then the barrier
/// is invalidated. `maps` tensor maps are declared (the copies read through the first).
fn tma_kernel(maps: usize) -> ThreadKernel {
    let mut k = kernel("tma_copy");
    let a = k.ptr("a", F16);
    let rows = k.scalar("rows", I32);
    let cols = k.scalar("cols", I32);
    let stride = k.scalar("stride", I64);
    let out = k.ptr("out", F16);
    let bars = k.shared(U64, 2);
    let tile = k.shared(F16, 64 * 64);
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    let one = k.int(I32, 1);
    let first = k.cmp(CmpOp::Eq, tid, zero);
    let x = k.int(I32, 64);
    let y = k.int(I32, 0);
    let bar = MBarrier {
        alloc: bars,
        index: zero,
    };
    k.push(Stmt::MbarrierInit {
        bar,
        count: 1,
        pred: Some(first),
    });
    k.push(Stmt::Barrier);
    for parity in [zero, one] {
        k.push(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: 64 * 64 * 2,
            pred: Some(first),
        });
        k.push(Stmt::TmaLoad {
            map: 0,
            alloc: tile,
            dst: zero,
            coords: vec![x, y],
            bar,
            pred: Some(first),
        });
        k.push(Stmt::MbarrierWait { bar, parity });
    }
    let v = k.load(F16, 1, Memory::Shared { alloc: tile }, tid, None);
    k.store(v, Memory::Global { param: out }, tid, None);
    k.push(Stmt::Barrier);
    k.push(Stmt::MbarrierInval { bar, pred: Some(first) });
    let mut t = k.finish_unverified();
    t.shared[tile as usize].align = 1024;
    for _ in 0..maps {
        t.tensor_maps.push(rutile_ir::thread::TensorMap {
            param: a,
            dims: [Some(LaunchValue::Param(cols)), Some(LaunchValue::Param(rows))],
            stride: LaunchValue::Param(stride),
            outer: [None; 3],
            box_dims: [64, 64],
            swizzle: 128,
        });
    }
    rutile_ir::thread::verify(&t).unwrap_or_else(|e| panic!("{e}"));
    t
}

#[test]
fn tma_copies_and_mbarriers_pass_ptxas() {
    let k = tma_kernel(2);
    let ptx = emit_checked(&k, 90);
    assert_contains(
        &ptx,
        &[
            ".target sm_90\n",
            // After the kernel's 5 parameters, one 128-byte parameter per map.
            ".param .align 64 .b8 tma_copy_param_5[128]",
            ".param .align 64 .b8 tma_copy_param_6[128]",
            "mov.b64 %rd",
            "cvta.param.u64 %rd",
            "prefetch.tensormap [%rd",
            "mbarrier.init.shared::cta.b64 [%r",
            "], 1;",
            "fence.mbarrier_init.release.cluster;",
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r",
            "], 8192;",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r",
            "mbarrier.try_wait.parity.shared::cta.b64 %p",
            "mbarrier.inval.shared::cta.b64 [%r",
        ],
    );
    assert!(!ptx.contains("tma_copy_param_7"), "{ptx}");
    // Every predicated statement is guarded by its predicate.
    for ins in [
        "mbarrier.init",
        "fence.mbarrier_init",
        "mbarrier.arrive.expect_tx",
        "cp.async.bulk.tensor",
        "mbarrier.inval",
        "prefetch.tensormap",
    ] {
        for line in ptx.lines().filter(|l| l.contains(ins)) {
            assert!(line.trim_start().starts_with("@%p"), "unguarded `{line}`:\n{ptx}");
        }
    }
    // The two waits loop on labels of their own (ptxas would refuse a duplicate).
    assert_eq!(ptx.matches("mbarrier.try_wait.parity").count(), 2, "{ptx}");
    // The copy reads through map 0's generic address.
    let generic = ptx
        .lines()
        .find(|l| l.contains("cvta.param.u64"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|r| r.trim_end_matches(','))
        .unwrap()
        .to_string();
    assert!(ptx.contains(&format!("[{generic}, {{%r")), "{generic}:\n{ptx}");
    // Blackwell keeps the sm_90 forms.
    emit_checked(&k, 100);
}

#[test]
fn mbarriers_without_tensor_maps_pass_ptxas() {
    // No tensor map: no extra parameter, no prefetch.
    let mut k = kernel("bars");
    let bars = k.shared(U64, 1);
    let zero = k.int(I32, 0);
    let bar = MBarrier {
        alloc: bars,
        index: zero,
    };
    k.push(Stmt::MbarrierInit {
        bar,
        count: 128,
        pred: None,
    });
    k.push(Stmt::MbarrierWait { bar, parity: zero });
    k.push(Stmt::MbarrierInval { bar, pred: None });
    let ptx = emit_checked(&k.finish(), 90);
    assert!(!ptx.contains("prefetch.tensormap"), "{ptx}");
    assert_contains(&ptx, &["mbarrier.init.shared::cta.b64 [%r", "], 128;"]);
}

#[test]
fn older_targets_are_refused_clearly() {
    let sm80 = PtxTarget::from_compute_capability(8, 0);
    // Tensor maps: the kernel's parameters cannot be declared.
    let err = emit(&tma_kernel(1), &sm80).unwrap_err();
    assert!(matches!(err, PtxError::Target { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("tensor maps") && text.contains("sm_90") && text.contains("sm_80"),
        "{text}"
    );

    // An mbarrier statement alone: the statement is named.
    let mut k = kernel("bars");
    let bars = k.shared(U64, 1);
    let zero = k.int(I32, 0);
    k.push(Stmt::MbarrierInit {
        bar: MBarrier {
            alloc: bars,
            index: zero,
        },
        count: 1,
        pred: None,
    });
    let k = k.finish();
    let err = emit(&k, &sm80).unwrap_err();
    assert!(matches!(err, PtxError::Unsupported { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("mbarrier.init needs sm_90") && text.contains("sm_80"),
        "{text}"
    );

    // sm_90 with a PTX ISA older than 8.0.
    let old = PtxTarget {
        sm: 90,
        ptx_version: (7, 8),
        max_registers: None,
        pack_before_fence: false,
        wide_products: true,
        native_fp8_conversions: true,
    };
    let err = emit(&tma_kernel(1), &old).unwrap_err();
    assert!(err.to_string().contains("PTX ISA 8.0"), "{err}");
    let err = emit(&k, &old).unwrap_err();
    assert!(err.to_string().contains("PTX ISA 8.0"), "{err}");
}
