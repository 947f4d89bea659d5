//! The kernels of the layer norm, long-row and fused attention tutorials, lowered as the
//! Vulkan backend lowers them (subgroups of 32 and 8, and none): their modules must pass
//! naga's validation and `spirv-val`. The layer norm backward pass's lock publishes plain
//! stores between workgroups: its barriers must order storage buffers too.

mod common;

use rutile_ir::seeds::{self, AttentionMeta, LayerNormBackwardMeta, LayerNormMeta, LongRowMeta, SoftmaxOptions};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{F16, F32};
use rutile_spirv::SpirvTarget;

/// Lowers `kernel` at `num_warps` for subgroups of 32 and 8 with shuffles and for none
/// (exchanges through workgroup memory), checks each translation; returns their WGSL.
fn check_all(kernel: &Kernel, num_warps: u32) -> Vec<String> {
    let mut wgsl = Vec::new();
    for (warp_size, shuffles) in [(32, true), (8, true), (32, false)] {
        let target = Target {
            shuffles,
            ..Target::vulkan(warp_size, num_warps, 48 * 1024)
        };
        let t = rutile_ir::lower::lower(kernel, &target, &Specialization::all(kernel.params.len()))
            .unwrap_or_else(|e| panic!("lowering {}: {e}", kernel.name));
        let mut st = SpirvTarget::full(warp_size);
        if !shuffles {
            st.subgroup_size = None;
        }
        wgsl.push(common::check(&t, &st).1);
    }
    wgsl
}

#[test]
fn layer_norm_validates() {
    for (n, dtype) in [(781, F16), (4096, F32)] {
        let meta = LayerNormMeta::for_row(n, dtype).unwrap();
        check_all(&seeds::layer_norm_forward(&meta).unwrap(), meta.num_warps());
        check_all(&seeds::layer_norm_forward_row(&meta).unwrap(), meta.num_warps());
        check_all(
            &seeds::layer_norm_forward_row_one_exchange(&meta).unwrap(),
            meta.num_warps(),
        );
        check_all(&seeds::layer_norm_backward_dwdb(32, 128, dtype).unwrap(), 4);
        let bwd = LayerNormBackwardMeta {
            group_size_m: seeds::layer_norm_group_size_m(n),
            block_size_n: meta.block_size,
            dtype,
        };
        for wgsl in check_all(&seeds::layer_norm_backward_dx(&bwd).unwrap(), meta.num_warps()) {
            assert!(wgsl.contains("atomicCompareExchangeWeak"), "the lock:\n{wgsl}");
            assert!(
                wgsl.contains("storageBarrier()"),
                "barriers order the partial sums:\n{wgsl}"
            );
        }
    }
}

/// The layer norm backward pass's `dx` kernel for rows of 781 fp16 elements, lowered for
/// subgroups of 32 and checked (`common::check`), with the row's meta-parameters.
fn backward_dx_781() -> (LayerNormMeta, Kernel, rutile_spirv::SpirvKernel) {
    let meta = LayerNormMeta::for_row(781, F16).unwrap();
    let bwd = LayerNormBackwardMeta {
        group_size_m: seeds::layer_norm_group_size_m(781),
        block_size_n: meta.block_size,
        dtype: F16,
    };
    let kernel = seeds::layer_norm_backward_dx(&bwd).unwrap();
    let target = Target::vulkan(32, meta.num_warps(), 48 * 1024);
    let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
    let (sk, _) = common::check(&t, &SpirvTarget::full(32));
    (meta, kernel, sk)
}

/// The backward pass's partial sums (`DW`, `DB`: loaded and stored by a kernel with
/// atomics) are declared `Coherent` in the words rutile hands the driver, and nothing else
/// is: the lock's buffer is only used atomically, the others are only loaded or only
/// stored. The forward pass, without atomics, has no coherent buffer. (spirv-val checks the
/// hinted words in `common::check`.)
#[test]
fn the_locks_partial_sums_are_coherent() {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Decoration, Op};
    let (meta, kernel, sk) = backward_dx_781();
    let names: Vec<&str> = sk
        .coherent_bindings
        .iter()
        .map(|b| {
            let s = sk.bindings.storage.iter().find(|s| s.binding == *b).unwrap();
            kernel.params[s.param as usize].name.as_str()
        })
        .collect();
    assert_eq!(names, ["DW", "DB"]);
    let module = rspirv::dr::load_words(sk.spirv_words_hinted().unwrap()).unwrap();
    let coherent = module
        .annotations
        .iter()
        .filter(|a| {
            a.class.opcode == Op::Decorate && a.operands.get(1) == Some(&Operand::Decoration(Decoration::Coherent))
        })
        .count();
    assert_eq!(coherent, 2);

    let forward = seeds::layer_norm_forward_row(&meta).unwrap();
    let target = Target::vulkan(32, meta.num_warps(), 48 * 1024);
    let t = rutile_ir::lower::lower(&forward, &target, &Specialization::all(forward.params.len())).unwrap();
    let (sk, _) = common::check(&t, &SpirvTarget::full(32));
    assert!(sk.coherent_bindings.is_empty());
}

/// The buffers a kernel only loads are declared `NonWritable` in the words rutile hands the
/// driver, and no other: in the backward pass, the inputs `DY`, `X`, `W`, `Mean` and `Rstd`,
/// not `DX` (stored), `DW` and `DB` (loaded and stored) or `Lock` (atomics). Without them
/// NVIDIA's driver makes every load a strong one (see the `hints` module).
#[test]
fn only_loaded_buffers_are_non_writable() {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Decoration, Op};
    let (_, kernel, sk) = backward_dx_781();
    let name_of = |binding: u32| {
        let s = sk.bindings.storage.iter().find(|s| s.binding == binding).unwrap();
        kernel.params[s.param as usize].name.clone()
    };
    let names: Vec<String> = sk.read_only_bindings.iter().map(|&b| name_of(b)).collect();
    assert_eq!(names, ["DY", "X", "W", "Mean", "Rstd"]);
    assert!(sk.has_memory_hints());
    // In the words: exactly those variables carry the decoration.
    let module = rspirv::dr::load_words(sk.spirv_words_hinted().unwrap()).unwrap();
    let decorated = |d: Decoration| -> Vec<u32> {
        module
            .annotations
            .iter()
            .filter(|a| a.class.opcode == Op::Decorate && a.operands.get(1) == Some(&Operand::Decoration(d)))
            .filter_map(|a| match a.operands.first() {
                Some(Operand::IdRef(id)) => Some(*id),
                _ => None,
            })
            .collect()
    };
    let binding_of = |id: u32| {
        module.annotations.iter().find_map(|a| match a.operands.as_slice() {
            [Operand::IdRef(t), Operand::Decoration(Decoration::Binding), Operand::LiteralBit32(b)] if *t == id => {
                Some(*b)
            }
            _ => None,
        })
    };
    let mut marked: Vec<String> = decorated(Decoration::NonWritable)
        .into_iter()
        .filter_map(binding_of)
        .map(name_of)
        .collect();
    marked.sort();
    assert_eq!(marked, ["DY", "Mean", "Rstd", "W", "X"]);
    // naga's own words (the path without hints) say nothing of it.
    let plain = rspirv::dr::load_words(sk.spirv_words().unwrap()).unwrap();
    assert!(!plain
        .annotations
        .iter()
        .any(|a| a.operands.get(1) == Some(&Operand::Decoration(Decoration::NonWritable))));
}

/// `f16` rows moved in 16-byte vectors: the one-pass kernel (no loop) holds them as packed
/// words, the tutorial's kernel (which walks the row in a loop) as `vec4<f16>`, where words
/// measured slower (`Holding::PackedF16`).
#[test]
fn f16_rows_are_packed_words_in_kernels_without_loops() {
    let meta = LayerNormMeta::for_row(4096, F16).unwrap();
    for wgsl in check_all(&seeds::layer_norm_forward_row(&meta).unwrap(), meta.num_warps()) {
        assert!(wgsl.contains("X: array<vec4<u32>>") && wgsl.contains("u16("), "{wgsl}");
        assert!(wgsl.contains("Y: array<vec4<u32>>"), "{wgsl}");
    }
    for wgsl in check_all(&seeds::layer_norm_forward(&meta).unwrap(), meta.num_warps()) {
        assert!(wgsl.contains("X: array<vec4<f16>>") && !wgsl.contains("u16("), "{wgsl}");
    }
}

#[test]
fn kernels_without_atomics_keep_workgroup_barriers() {
    let meta = LayerNormMeta::for_row(4096, F32).unwrap();
    for wgsl in check_all(&seeds::layer_norm_forward(&meta).unwrap(), meta.num_warps()) {
        assert!(
            wgsl.contains("workgroupBarrier()") && !wgsl.contains("storageBarrier()"),
            "{wgsl}"
        );
    }
}

#[test]
fn long_row_kernels_validate() {
    let meta = LongRowMeta::default();
    check_all(
        &seeds::softmax_long(meta.block_size, SoftmaxOptions::default()).unwrap(),
        meta.num_warps,
    );
    for dtype in [F16, F32] {
        let kernel = seeds::layer_norm_long(&LayerNormMeta {
            block_size: meta.block_size,
            dtype,
        })
        .unwrap();
        check_all(&kernel, meta.num_warps);
    }
}

/// The tutorial's walks, and at head dimension 64 the walk rotated by one block.
#[test]
fn attention_validates() {
    for head_dim in [64, 128] {
        for (causal, split_diagonal) in [(false, true), (true, true), (true, false)] {
            let rotations: &[bool] = if head_dim == 64 { &[false, true] } else { &[false] };
            for &rotate in rotations {
                let meta = AttentionMeta {
                    split_diagonal,
                    rotate,
                    ..AttentionMeta::fp16(16, 16, head_dim, causal)
                };
                check_all(&seeds::attention_forward(&meta).unwrap(), 4);
            }
        }
    }
}

/// Fused attention on a Vulkan device with cooperative matrices (the H100's shapes): both
/// dots on them where their tiles split, the accumulators moved through workgroup memory
/// for the online softmax; the modules pass naga's validation and spirv-val (Vulkan 1.3).
#[test]
fn attention_on_cooperative_matrices_validates() {
    use rutile_ir::target::CoopMatrixShape;
    let shapes = [(16, 16, 16), (16, 8, 16)].map(|(m, n, k)| CoopMatrixShape {
        m,
        n,
        k,
        ab: F16,
        acc: F32,
    });
    for (block_m, block_n, warps) in [(32, 16, 4), (32, 32, 2)] {
        for (causal, rotate, coop_scale) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, false, true),
            (true, false, true),
            (false, true, true),
        ] {
            let meta = AttentionMeta {
                rotate,
                ..AttentionMeta::fp16(block_m, block_n, 64, causal)
            };
            let kernel = seeds::attention_forward(&meta).unwrap();
            // K and V two iterations ahead, as the runtime launches it (its body unrolled).
            let target = Target {
                reuse_shared: rutile_ir::target::SharedReuse::SameType,
                coop_matrix: shapes.to_vec(),
                coop_scale,
                num_stages: 3,
                ..Target::nvidia(warps, 48 * 1024)
            };
            let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
            let mut mul_adds = 0;
            t.walk(&mut |s| mul_adds += matches!(s, rutile_ir::thread::Stmt::CoopMulAdd { .. }) as usize);
            assert!(mul_adds > 0, "{block_m}x{block_n}: not on cooperative matrices");
            let (sk, _) = common::check(&t, &SpirvTarget::full(32));
            // With `coop_load_fences`, a subgroup barrier before every cooperative load (and
            // spirv-val accepts it); without, none.
            let fenced = SpirvTarget {
                coop_load_fences: true,
                ..SpirvTarget::full(32)
            };
            let (fk, _) = common::check(&t, &fenced);
            let (on, off) = (
                common::fenced_coop_loads(&fk.spirv_words_hinted().unwrap()),
                common::fenced_coop_loads(&sk.spirv_words_hinted().unwrap()),
            );
            assert!(
                on.0 > 0 && on.1 == 0,
                "{block_m}x{block_n}: {on:?} loads fenced and not"
            );
            assert!(
                off.0 == 0 && off.1 == on.0,
                "{block_m}x{block_n}: {off:?} without the fences"
            );
            // The rescale's element-wise products are `OpFMul`s of cooperative matrices in
            // both kinds of words, and no subtraction of them is left.
            assert_eq!(sk.coop_products, coop_scale);
            assert!(sk.needs_own_words());
            for words in [sk.spirv_words().unwrap(), sk.spirv_words_hinted().unwrap()] {
                let (products, differences) = coop_arithmetic(&words);
                assert_eq!((products > 0, differences), (coop_scale, 0), "{block_m}x{block_n}");
                assert_eq!(unordered_workgroup_memory(&words), (0, 0), "{block_m}x{block_n}");
            }
        }
    }
}

/// The `OpFMul`s and `OpFSub`s whose result is a cooperative matrix, in `words`.
fn coop_arithmetic(words: &[u32]) -> (usize, usize) {
    use rspirv::spirv::Op;
    let module = rspirv::dr::load_words(words).unwrap();
    let matrices: Vec<u32> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeCooperativeMatrixKHR)
        .filter_map(|i| i.result_id)
        .collect();
    let mut counts = (0, 0);
    for f in &module.functions {
        for b in &f.blocks {
            for i in b
                .instructions
                .iter()
                .filter(|i| i.result_type.is_some_and(|t| matrices.contains(&t)))
            {
                counts.0 += (i.class.opcode == Op::FMul) as usize;
                counts.1 += (i.class.opcode == Op::FSub) as usize;
            }
        }
    }
    counts
}

/// Under the Vulkan memory model: the barriers that do not make workgroup memory available
/// and visible, and the cooperative loads and stores (all of workgroup memory here) not
/// marked `NonPrivatePointer`, which no barrier would order.
fn unordered_workgroup_memory(words: &[u32]) -> (usize, usize) {
    use rspirv::dr::Operand;
    use rspirv::spirv::{MemoryAccess, MemorySemantics, Op};
    let module = rspirv::dr::load_words(words).unwrap();
    let value = |id: u32| common::constant_value(&module, id);
    let ordering = (MemorySemantics::MAKE_AVAILABLE | MemorySemantics::MAKE_VISIBLE).bits();
    let mut counts = (0, 0);
    for i in module
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().flat_map(|b| b.instructions.iter()))
    {
        match i.class.opcode {
            Op::ControlBarrier => {
                let Some(Operand::IdMemorySemantics(s)) = i.operands.get(2) else {
                    panic!("a barrier without semantics")
                };
                counts.0 += (value(*s).unwrap() & ordering != ordering) as usize;
            }
            Op::CooperativeMatrixLoadKHR | Op::CooperativeMatrixStoreKHR => {
                let private = !i
                    .operands
                    .iter()
                    .any(|o| matches!(o, Operand::MemoryAccess(m) if m.contains(MemoryAccess::NON_PRIVATE_POINTER)));
                counts.1 += private as usize;
            }
            _ => {}
        }
    }
    counts
}
