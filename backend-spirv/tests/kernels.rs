//! Whole kernels: vector add, a reduction through shared memory and shuffles, control flow.

mod common;

use common::{basic, check, full, reduction, vector_add, vector_add_width};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::thread::{Expr, Memory, Special, ThreadKernelBuilder};
use rutile_ir::ScalarType::*;
use rutile_spirv::ScalarArg;

#[test]
fn vector_add_f32() {
    let k = vector_add(F32);
    let (sk, wgsl) = check(&k, &basic());
    assert_eq!(sk.entry_point, "vector_add");
    let b = &sk.bindings;
    assert_eq!(b.storage.len(), 3);
    assert_eq!(
        (b.storage[2].binding, b.storage[2].param, b.storage[2].elem),
        (2, 2, F32)
    );
    assert!(!b.storage[0].atomic);
    assert_eq!(b.uniform_binding(), Some(3));
    assert_eq!(b.scalars.len(), 1);
    assert_eq!((b.scalars[0].param, b.scalars[0].offset, b.scalars[0].size), (3, 32, 4));
    assert_eq!(b.launch_size, 48);
    assert!(wgsl.contains("@workgroup_size(128, 1, 1)"), "{wgsl}");
    // 16-byte loads and stores: the buffers are arrays of vectors.
    assert!(wgsl.contains("var<storage, read_write> x: array<vec4<f32>>"), "{wgsl}");
    assert!(wgsl.contains("@group(0) @binding(3)"), "{wgsl}");
    let bytes = b
        .launch_bytes([70000, 2, 1], [65535, 0, 0], &[ScalarArg::I32(-5)])
        .unwrap();
    assert_eq!(bytes.len(), 48);
    assert_eq!(&bytes[0..4], &70000u32.to_le_bytes());
    assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
    assert_eq!(&bytes[16..20], &65535u32.to_le_bytes());
    assert_eq!(&bytes[32..36], &(-5i32).to_le_bytes());
}

#[test]
fn vector_add_other_types() {
    for t in [I32, U32, F16, I64, U64, F64] {
        let (_, wgsl) = check(&vector_add(t), &full(32));
        // Vector accesses of 4-byte types and of f16 (eight to 16 bytes: two vectors) bind
        // their buffers as vectors; 8-byte types stay scalar.
        let vectors = matches!(t, I32 | U32 | F16);
        let name = match t {
            I32 => "i32",
            U32 => "u32",
            F16 => "f16",
            I64 => "i64",
            U64 => "u64",
            _ => "f64",
        };
        let decl = format!("x: array<vec4<{name}>>");
        assert_eq!(wgsl.contains(&decl), vectors, "{t:?}: {wgsl}");
    }
}

/// An `f16` buffer that every access moves in 16-byte vectors is held as `vec4<u32>` words
/// of pairs (one 16-byte access; the halves reinterpreted as 16-bit integers, or without
/// them unpacked through `f32`), unless the target says otherwise; one moved in 8-byte
/// vectors stays `vec4<f16>`.
#[test]
fn f16_buffers_moved_in_16_bytes_are_packed_words() {
    let (_, wgsl) = check(&vector_add_width(F16, 8), &full(32));
    for name in ["x", "y", "out"] {
        assert!(wgsl.contains(&format!("{name}: array<vec4<u32>>")), "{wgsl}");
    }
    assert!(wgsl.contains("u16(") && !wgsl.contains("pack2x16float"), "{wgsl}");
    let no_i16 = rutile_spirv::SpirvTarget {
        shader_i16: false,
        ..full(32)
    };
    let (_, wgsl) = check(&vector_add_width(F16, 8), &no_i16);
    assert!(wgsl.contains("x: array<vec4<u32>>"), "{wgsl}");
    assert!(
        wgsl.contains("unpack2x16float") && wgsl.contains("pack2x16float"),
        "{wgsl}"
    );
    let unpacked = rutile_spirv::SpirvTarget {
        packed_f16: false,
        ..full(32)
    };
    let (_, wgsl) = check(&vector_add_width(F16, 8), &unpacked);
    assert!(
        wgsl.contains("x: array<vec4<f16>>") && !wgsl.contains("unpack2x16float"),
        "{wgsl}"
    );
    let (_, wgsl) = check(&vector_add_width(F16, 4), &full(32));
    assert!(
        wgsl.contains("x: array<vec4<f16>>") && !wgsl.contains("unpack2x16float"),
        "{wgsl}"
    );
}

#[test]
fn reduction_with_shared_memory_barrier_and_shuffles() {
    for warp in [32, 64, 16] {
        let (_, wgsl) = check(&reduction(warp), &full(warp));
        assert!(wgsl.contains("workgroupBarrier()"), "{wgsl}");
        assert!(wgsl.contains("subgroupShuffleXor"), "{wgsl}");
        assert!(wgsl.contains("var<workgroup> shared0_: array<f32, "), "{wgsl}");
    }
}

/// Nested `while` and `if` with loop-carried registers and a barrier inside the loop.
#[test]
fn control_flow() {
    let mut kb = ThreadKernelBuilder::new("control_flow", 2, 32);
    let out = kb.ptr("out", I32);
    let n = kb.scalar("n", I32);
    let flag = kb.scalar("flag", Bool);
    let s = kb.shared(I32, 64);
    let n = kb.param(n, I32);
    let flag = kb.param(flag, Bool);
    let tid = kb.special(Special::ThreadId);
    let acc = kb.int(I32, 0);
    let i = kb.int(I32, 0);
    let one = kb.int(I32, 1);
    let ten = kb.int(I32, 10);
    kb.while_(
        |kb| {
            let c = kb.cmp(CmpOp::Lt, i, n);
            kb.set(Bool, Expr::Binary(BinaryOp::And, c, flag))
        },
        |kb| {
            kb.assign(acc, Expr::Binary(BinaryOp::Add, acc, i));
            let big = kb.cmp(CmpOp::Gt, acc, ten);
            kb.if_(
                big,
                |kb| kb.assign(acc, Expr::Binary(BinaryOp::Sub, acc, ten)),
                |kb| {
                    let j = kb.int(I32, 0);
                    kb.while_(
                        |kb| kb.cmp(CmpOp::Lt, j, i),
                        |kb| {
                            kb.assign(acc, Expr::Binary(BinaryOp::Xor, acc, j));
                            kb.assign(j, Expr::Binary(BinaryOp::Add, j, one));
                        },
                    );
                },
            );
            kb.store(vec![acc], Memory::Shared { alloc: s }, tid, None);
            kb.push(rutile_ir::thread::Stmt::Barrier);
            kb.assign(i, Expr::Binary(BinaryOp::Add, i, one));
        },
    );
    let gx = kb.special(Special::NumPrograms(0));
    let py = kb.special(Special::ProgramId(1));
    let pz = kb.special(Special::ProgramId(2));
    let t = kb.bin(BinaryOp::Mul, py, gx);
    let t = kb.bin(BinaryOp::Add, t, pz);
    let r = kb.bin(BinaryOp::Add, acc, t);
    kb.store(vec![r], Memory::Global { param: out }, tid, None);
    let k = kb.finish();
    let (sk, wgsl) = check(&k, &basic());
    assert!(wgsl.contains("loop {"), "{wgsl}");
    // Booleans pass as u32.
    assert_eq!(sk.bindings.scalars[1].size, 4);
    assert_eq!(sk.bindings.scalars[1].ty, Bool);
}

#[test]
fn registers_set_once_at_top_level_are_expressions() {
    let (_, wgsl) = check(&vector_add(F32), &basic());
    // Loop-free straight-line code needs no function variables except predicated loads.
    assert!(wgsl.contains("let r"), "{wgsl}");
    let (_, wgsl) = check(&reduction(32), &full(32));
    assert!(wgsl.contains("var r"), "{wgsl}");
}

#[test]
fn kernel_names_become_identifiers() {
    let mut kb = ThreadKernelBuilder::new("3-odd name", 1, 32);
    // Parameter names that collide with the backend's own names and with WGSL keywords.
    let out = kb.ptr("launch", I32);
    let other = kb.ptr("shared0", I32);
    let p: Vec<u32> = ["num_programs", "program_offset", "thread_id", "loop", "r1", "a b"]
        .iter()
        .map(|n| kb.scalar(n, I32))
        .collect();
    let tid = kb.special(Special::ThreadId);
    let mut acc = tid;
    for i in p {
        let v = kb.param(i, I32);
        acc = kb.bin(BinaryOp::Add, acc, v);
    }
    kb.store(vec![acc], Memory::Global { param: out }, tid, None);
    kb.store(vec![acc], Memory::Global { param: other }, tid, None);
    let (sk, _) = check(&kb.finish(), &basic());
    assert_eq!(sk.entry_point, "k_3_odd_name");
    let mut kb = ThreadKernelBuilder::new("loop", 1, 32);
    let out = kb.ptr("out", I32);
    let tid = kb.special(Special::ThreadId);
    kb.store(vec![tid], Memory::Global { param: out }, tid, None);
    let (sk, wgsl) = check(&kb.finish(), &basic());
    assert_eq!(sk.entry_point, "k_loop");
    assert!(wgsl.contains("fn k_loop("), "{wgsl}");
}

#[test]
fn malformed_kernels_are_rejected() {
    let mut kb = ThreadKernelBuilder::new("bad", 1, 32);
    let out = kb.ptr("out", I32);
    let tid = kb.special(Special::ThreadId);
    kb.store(vec![tid], Memory::Global { param: out }, tid, None);
    let mut k = kb.finish();
    k.params.clear();
    match rutile_spirv::emit(&k, &basic()) {
        Err(rutile_spirv::SpirvError::InvalidKernel { .. }) => {}
        other => panic!("expected InvalidKernel, got {other:?}"),
    }
    // Grid axis 3 (there are x, y and z) was read as axis 0.
    let mut kb = ThreadKernelBuilder::new("axis3", 1, 32);
    let out = kb.ptr("out", I32);
    let (tid, pid) = (kb.special(Special::ThreadId), kb.special(Special::ProgramId(3)));
    kb.store(vec![pid], Memory::Global { param: out }, tid, None);
    match rutile_spirv::emit(&kb.finish_unverified(), &basic()) {
        Err(e @ rutile_spirv::SpirvError::InvalidKernel { .. }) => {
            assert!(e.to_string().contains("grid axis 3 is not 0, 1 or 2"), "{e}")
        }
        other => panic!("expected InvalidKernel, got {other:?}"),
    }
}
