//! Kernels that need what the target lacks, and the launch block's layout and place.

mod common;

use common::{basic, check, full, unsupported_what};
use rutile_ir::ir::{AtomicOp, BinaryOp};
use rutile_ir::thread::{Expr, Memory, Special, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, *};
use rutile_spirv::{emit, LaunchPlace, ScalarArg, SpirvTarget};

/// `out[tid] = x[tid] * x[tid]` through a register of type `t` (as a cast from i32).
fn squares(t: ScalarType) -> rutile_ir::thread::ThreadKernel {
    let mut kb = ThreadKernelBuilder::new("squares", 1, 32);
    let out = kb.ptr("out", I32);
    let tid = kb.special(Special::ThreadId);
    let v = kb.set(t, Expr::Cast(tid));
    let sq = kb.bin(BinaryOp::Mul, v, v);
    let r = kb.set(I32, Expr::Cast(sq));
    kb.store(vec![r], Memory::Global { param: out }, tid, None);
    kb.finish()
}

#[test]
fn types_the_target_lacks() {
    let (what, msg) = unsupported_what(emit(&squares(F16), &basic()));
    assert_eq!(what, "f16");
    assert!(msg.contains("register r1") && msg.contains("shader-f16"), "{msg}");
    let (what, _) = unsupported_what(emit(&squares(I64), &basic()));
    assert_eq!(what, "i64");
    let (what, _) = unsupported_what(emit(&squares(U64), &basic()));
    assert_eq!(what, "u64");
    let (what, _) = unsupported_what(emit(&squares(F64), &basic()));
    assert_eq!(what, "f64");
    // With the features, the same kernels translate.
    for t in [F16, I64, U64, F64] {
        check(&squares(t), &full(32));
    }
}

/// Directed rounding computes its f32 result in f64 and needs each f64 operation rounded
/// once: a target without `exact_f64` refuses it rather than round wrongly, and without
/// f64 too; with both it translates.
#[test]
fn directed_rounding_needs_exact_f64() {
    use rutile_ir::ir::{RoundedOp, Rounding};
    let mut kb = ThreadKernelBuilder::new("add_rd", 1, 32);
    let out = kb.ptr("out", F32);
    let tid = kb.special(Special::ThreadId);
    let x = kb.set(F32, Expr::Cast(tid));
    let third = kb.set(F32, Expr::Rounded(RoundedOp::Div, Rounding::Down, vec![x, x]));
    let sum = kb.set(F32, Expr::Rounded(RoundedOp::Add, Rounding::Up, vec![third, x]));
    kb.store(vec![sum], Memory::Global { param: out }, tid, None);
    let k = kb.finish();
    let inexact = SpirvTarget {
        exact_f64: false,
        ..full(32)
    };
    let (what, msg) = unsupported_what(emit(&k, &inexact));
    assert_eq!(what, "directed rounding");
    assert!(msg.contains("div_rd") && msg.contains("exact_f64"), "{msg}");
    let no_f64 = SpirvTarget {
        shader_f64: false,
        ..full(32)
    };
    let (what, msg) = unsupported_what(emit(&k, &no_f64));
    assert_eq!(what, "f64");
    assert!(msg.contains("shaderFloat64"), "{msg}");
    check(&k, &full(32));
}

/// f64 results in a direction: `add` and `sub` translate (a two-sum stepped on the 64 bits,
/// which needs 64-bit integers), `mul` and the others are refused naming the op.
#[test]
fn directed_rounding_of_f64() {
    use rutile_ir::ir::{RoundedOp, Rounding};
    let kernel = |op: RoundedOp| {
        let mut kb = ThreadKernelBuilder::new("f64_rd", 1, 32);
        let out = kb.ptr("out", F64);
        let tid = kb.special(Special::ThreadId);
        let x = kb.set(F64, Expr::Cast(tid));
        let r = kb.set(F64, Expr::Rounded(op, Rounding::Down, vec![x, x]));
        kb.store(vec![r], Memory::Global { param: out }, tid, None);
        kb.finish()
    };
    check(&kernel(RoundedOp::Add), &full(32));
    check(&kernel(RoundedOp::Sub), &full(32));
    let no_i64 = SpirvTarget {
        shader_i64: false,
        ..full(32)
    };
    let (what, msg) = unsupported_what(emit(&kernel(RoundedOp::Add), &no_i64));
    assert_eq!(what, "i64");
    assert!(msg.contains("add_rd") && msg.contains("shader-int64"), "{msg}");
    let (what, msg) = unsupported_what(emit(&kernel(RoundedOp::Mul), &full(32)));
    assert_eq!(what, "directed rounding");
    assert!(msg.contains("mul_rd") && msg.contains("f64"), "{msg}");
}

/// Types naga lacks are emulated: `bf16` registers as `f32`, 8- and 16-bit integers as
/// 32-bit ones, and their buffers as packed words; their scalar parameters take a word of
/// the launch block. Each translates and validates, with the basic target's features.
#[test]
fn types_naga_lacks() {
    for t in [BF16, I8, U8, I16, U16] {
        check(&squares(t), &basic());
        let mut kb = ThreadKernelBuilder::new("narrow_param", 1, 32);
        let out = kb.ptr("out", t);
        let s = kb.scalar("s", t);
        let tid = kb.special(Special::ThreadId);
        let v = kb.param(s, t);
        kb.store(vec![v], Memory::Global { param: out }, tid, None);
        let (spirv, _) = check(&kb.finish(), &basic());
        let slot = &spirv.bindings.scalars[0];
        assert_eq!((slot.offset, slot.size), (32, 4), "{t}");
    }
    // Bitcasts among the 16-bit types, without 16-bit integers on the device and with them.
    for (from, to) in [
        (I16, F16),
        (U16, F16),
        (F16, I16),
        (BF16, U16),
        (I16, BF16),
        (F16, BF16),
    ] {
        let mut kb = ThreadKernelBuilder::new("bitcast16", 1, 32);
        let out = kb.ptr("out", to);
        let tid = kb.special(Special::ThreadId);
        let v = kb.set(from, Expr::Cast(tid));
        let h = kb.set(to, Expr::Bitcast(v));
        kb.store(vec![h], Memory::Global { param: out }, tid, None);
        let k = kb.finish();
        check(&k, &full(32));
        let no_int16 = SpirvTarget {
            shader_i16: false,
            ..full(32)
        };
        check(&k, &no_int16);
    }
}

#[test]
fn boolean_memory_and_f16_without_the_feature() {
    let mut kb = ThreadKernelBuilder::new("bools", 1, 32);
    let _ = kb.ptr("mask", Bool);
    let (what, _) = unsupported_what(emit(&kb.finish(), &full(32)));
    assert_eq!(what, "i1");
    // f16 memory needs shader-f16 like f16 registers.
    let mut kb = ThreadKernelBuilder::new("halves", 1, 32);
    let _ = kb.ptr("h", F16);
    let (what, msg) = unsupported_what(emit(&kb.finish(), &basic()));
    assert_eq!(what, "f16");
    assert!(msg.contains("`h`"), "{msg}");
}

fn shuffling(warp: u32) -> rutile_ir::thread::ThreadKernel {
    let mut kb = ThreadKernelBuilder::new("shuffling", 2, warp);
    let out = kb.ptr("out", I32);
    let tid = kb.special(Special::ThreadId);
    let s = kb.set(I32, Expr::ShuffleXor { value: tid, mask: 1 });
    kb.store(vec![s], Memory::Global { param: out }, tid, None);
    kb.finish()
}

#[test]
fn shuffles_need_a_fixed_subgroup_size_equal_to_the_warp() {
    let k = shuffling(32);
    let no_subgroups = SpirvTarget {
        subgroups: false,
        ..full(32)
    };
    let (what, msg) = unsupported_what(emit(&k, &no_subgroups));
    assert_eq!(what, "shuffles");
    assert!(msg.contains("no subgroup operations"), "{msg}");
    let varying = SpirvTarget {
        subgroup_size: None,
        ..full(32)
    };
    let (what, msg) = unsupported_what(emit(&k, &varying));
    assert_eq!(what, "shuffles");
    assert!(msg.contains("not fixed"), "{msg}");
    let (what, msg) = unsupported_what(emit(&k, &full(64)));
    assert_eq!(what, "shuffles");
    assert!(msg.contains("32") && msg.contains("64"), "{msg}");
    check(&k, &full(32));
    check(&shuffling(64), &full(64));
}

#[test]
fn unsupported_atomics() {
    for (t, op) in [
        (I64, AtomicOp::Add),
        (U64, AtomicOp::Max),
        (F32, AtomicOp::And),
        (F64, AtomicOp::Add),
        (F16, AtomicOp::Xchg),
    ] {
        let mut kb = ThreadKernelBuilder::new("atomic", 1, 32);
        let buf = kb.ptr("buf", t);
        let tid = kb.special(Special::ThreadId);
        let i = kb.int(I32, 0);
        let v = kb.set(t, Expr::Cast(tid));
        let dst = kb.reg(t);
        kb.push(Stmt::Atomic {
            dst,
            op,
            param: buf,
            index: i,
            value: v,
            pred: None,
            order: Default::default(),
        });
        let (what, msg) = unsupported_what(emit(&kb.finish(), &full(32)));
        assert_eq!(what, "atomic");
        assert!(msg.contains(op.name()), "{msg}");
    }
}

/// A kernel with one output and `scalars` scalar parameters of type `ty`, all summed.
fn sum_of_scalars(scalars: usize, ty: ScalarType) -> ThreadKernel {
    let mut kb = ThreadKernelBuilder::new("sum_of_scalars", 1, 32);
    let out = kb.ptr("out", F32);
    let params: Vec<u32> = (0..scalars).map(|i| kb.scalar(&format!("s{i}"), ty)).collect();
    let tid = kb.special(Special::ThreadId);
    let mut acc = kb.float(F32, 0.0);
    for p in params {
        let v = kb.param(p, ty);
        let v = kb.set(F32, Expr::Cast(v));
        acc = kb.bin(BinaryOp::Add, acc, v);
    }
    kb.store(vec![acc], Memory::Global { param: out }, tid, None);
    kb.finish()
}

#[test]
fn launch_block_goes_to_immediates_when_it_fits() {
    // 32 bytes of launch information + 4 i32 = 48 bytes: fits in 128.
    let (sk, wgsl) = check(&sum_of_scalars(4, I32), &full(32).with_immediates(128));
    assert_eq!(sk.bindings.launch, LaunchPlace::Immediates);
    assert_eq!(sk.bindings.uniform_binding(), None);
    assert_eq!(sk.bindings.launch_size, 48);
    assert!(wgsl.contains("var<immediate> launch"), "{wgsl}");
    assert!(!wgsl.contains("var<uniform>"), "{wgsl}");

    // Without immediates, the same kernel reads a uniform buffer after its storage buffer.
    let (sk, wgsl) = check(&sum_of_scalars(4, I32), &full(32));
    assert_eq!(sk.bindings.launch, LaunchPlace::Uniform { binding: 1 });
    assert!(wgsl.contains("var<uniform> launch"), "{wgsl}");

    // 32 + 25 * 4 = 132 bytes, rounded to 144: more than 128, so a uniform buffer.
    let (sk, _) = check(&sum_of_scalars(25, I32), &full(32).with_immediates(128));
    assert_eq!(sk.bindings.launch, LaunchPlace::Uniform { binding: 1 });
    assert_eq!(sk.bindings.launch_size, 144);

    // naga allows no f16 in immediates: a uniform buffer, whatever the room.
    let (sk, _) = check(&sum_of_scalars(2, F16), &full(32).with_immediates(256));
    assert_eq!(sk.bindings.launch, LaunchPlace::Uniform { binding: 1 });
}

#[test]
fn uniform_layout_of_mixed_scalars() {
    let mut kb = ThreadKernelBuilder::new("scalars", 1, 32);
    let out = kb.ptr("out", F64);
    let names = [
        ("a", I32),
        ("b", F64),
        ("c", Bool),
        ("d", F16),
        ("e", U64),
        ("f", F32),
        ("g", U32),
        ("h", I64),
    ];
    let params: Vec<u32> = names.iter().map(|&(n, t)| kb.scalar(n, t)).collect();
    let tid = kb.special(Special::ThreadId);
    let mut acc = kb.float(F64, 0.0);
    for (&p, &(_, t)) in params.iter().zip(&names) {
        let v = kb.param(p, t);
        let v = kb.set(F64, Expr::Cast(v));
        acc = kb.bin(BinaryOp::Add, acc, v);
    }
    let x = kb.special(Special::NumPrograms(2));
    let x = kb.set(F64, Expr::Cast(x));
    acc = kb.bin(BinaryOp::Add, acc, x);
    kb.store(vec![acc], Memory::Global { param: out }, tid, None);
    let (sk, wgsl) = check(&kb.finish(), &full(32));
    let l = &sk.bindings;
    assert_eq!(l.uniform_binding(), Some(1));
    let offsets: Vec<(u32, u32)> = l.scalars.iter().map(|s| (s.offset, s.size)).collect();
    assert_eq!(
        offsets,
        [(32, 4), (40, 8), (48, 4), (52, 2), (56, 8), (64, 4), (68, 4), (72, 8)]
    );
    assert_eq!(l.launch_size, 80);
    assert!(wgsl.contains("c: u32"), "{wgsl}");
    let args = [
        ScalarArg::I32(-7),
        ScalarArg::F64(0.5),
        ScalarArg::Bool(true),
        ScalarArg::F16(half::f16::from_f32(1.5)),
        ScalarArg::U64(1 << 40),
        ScalarArg::F32(2.0),
        ScalarArg::U32(9),
        ScalarArg::I64(-3),
    ];
    let b = l.launch_bytes([3, 2, 1], [0, 0, 0], &args).unwrap();
    assert_eq!(b.len(), 80);
    assert_eq!(&b[8..12], &1u32.to_le_bytes());
    assert_eq!(&b[32..36], &(-7i32).to_le_bytes());
    assert_eq!(&b[40..48], &0.5f64.to_le_bytes());
    assert_eq!(&b[48..52], &1u32.to_le_bytes());
    assert_eq!(&b[52..54], &half::f16::from_f32(1.5).to_bits().to_le_bytes());
    assert_eq!(&b[56..64], &(1u64 << 40).to_le_bytes());
    assert_eq!(&b[72..80], &(-3i64).to_le_bytes());
    // Mismatched arguments are errors, not panics.
    assert!(l.launch_bytes([1; 3], [0; 3], &args[..3]).is_err());
    let mut wrong = args;
    wrong[0] = ScalarArg::U32(1);
    assert!(l.launch_bytes([1; 3], [0; 3], &wrong).is_err());
}

/// A kernel lowered for a PTX target holds NVIDIA's own statements; SPIR-V refuses each
/// group by what it is and says how to lower instead.
#[test]
fn nvidia_statements_are_refused_by_what_they_are() {
    let with = |s: Stmt| {
        let mut kb = ThreadKernelBuilder::new("nvidia_only", 2, 32);
        kb.push(s);
        kb.finish_unverified()
    };
    let (what, msg) = unsupported_what(emit(&with(Stmt::AsyncCommit), &full(32)));
    assert!(what.contains("cp.async") && what.contains("TMA"), "{what}");
    assert!(msg.contains("Target::vulkan"), "{msg}");
    let (what, msg) = unsupported_what(emit(&with(Stmt::NamedBarrier { id: 1, threads: 64 }), &full(32)));
    assert_eq!(what, "warp specialization");
    assert!(msg.contains("warp_specialize"), "{msg}");
}
