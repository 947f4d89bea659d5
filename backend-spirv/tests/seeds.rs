//! The seed kernels, lowered for several meta-parameter sets and subgroup sizes: their
//! modules must pass naga's validation and `spirv-val` (CI installs spirv-tools).

mod common;

use rutile_ir::seeds;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{Kernel, ScalarType};
use rutile_spirv::SpirvTarget;

fn check_all(kernel: &Kernel, warps: &[u32]) {
    // Subgroups of 32 (NVIDIA) and 8 (lavapipe) with shuffles, and no fixed size (exchanges
    // through workgroup memory).
    for (warp_size, shuffles) in [(32, true), (8, true), (32, false)] {
        for &num_warps in warps {
            let target = Target {
                shuffles,
                ..Target::vulkan(warp_size, num_warps, 32 * 1024)
            };
            let t = rutile_ir::lower::lower(kernel, &target, &Specialization::all(kernel.params.len()))
                .unwrap_or_else(|e| panic!("lowering {}: {e}", kernel.name));
            let mut st = SpirvTarget::full(warp_size);
            if !shuffles {
                st.subgroup_size = None;
            }
            common::check(&t, &st);
        }
    }
}

#[test]
fn vector_add_validates() {
    for block in [128, 1024] {
        check_all(&seeds::vector_add(ScalarType::F32, block).unwrap(), &[1, 4]);
    }
    check_all(&seeds::vector_add(ScalarType::F16, 1024).unwrap(), &[4]);
}

#[test]
fn softmax_validates() {
    for block in [256, 1024, 4096] {
        let warps = [seeds::softmax_num_warps(block)];
        check_all(&seeds::softmax(block).unwrap(), &warps);
        check_all(&seeds::softmax_persistent(block).unwrap(), &warps);
    }
    for n in [781, 1152] {
        let chunked = seeds::softmax_chunked(&seeds::softmax_chunks(n), rutile_ir::CacheModifier::Streaming);
        check_all(&chunked.unwrap(), &[2, 8]);
    }
}

/// The fused softmax's baseline, the tutorial's unfused `naive_softmax` (five kernels).
#[test]
fn naive_softmax_validates() {
    for n in [781, 4096] {
        let s = seeds::NaiveSoftmax::new(n).unwrap();
        let warps = [seeds::softmax_num_warps(s.row_block)];
        check_all(&s.row_max, &warps);
        check_all(&s.row_sum, &warps);
        for kernel in [&s.subtract, &s.exp, &s.divide] {
            check_all(kernel, &[4]);
        }
    }
}

#[test]
fn matmul_validates() {
    for (bm, bn, bk) in [(64, 64, 32), (32, 64, 16)] {
        let mut meta = seeds::MatmulMeta::fp16(bm, bn, bk);
        check_all(&seeds::matmul(&meta).unwrap(), &[4]);
        meta.activation = Some(seeds::Activation::LeakyRelu);
        meta.input = ScalarType::F32;
        meta.output = ScalarType::F32;
        check_all(&seeds::matmul(&meta).unwrap(), &[2]);
    }
}

/// Every matmul configuration of the tutorial lowered for a Vulkan device with cooperative
/// matrices (the H100's f16 x f16 -> f32 shapes, 48 KiB of workgroup memory), specialized
/// as the runtime specializes it for row-major operands (the unit strides known to be 1,
/// so that the operands move in vectors as on the device): the modules use cooperative
/// matrices (where the operands leave room for the accumulator's exchange), pass naga's
/// validation with `COOPERATIVE_MATRIX` and spirv-val for Vulkan 1.3; with leaky ReLU and
/// f32 outputs too.
#[test]
fn matmul_on_cooperative_matrices_validates() {
    use rutile_ir::target::CoopMatrixShape;
    use rutile_ir::thread::{Memory, Stmt};
    let shapes = [(16, 16, 16), (16, 8, 16)].map(|(m, n, k)| CoopMatrixShape {
        m,
        n,
        k,
        ab: ScalarType::F16,
        acc: ScalarType::F32,
    });
    use rutile_ir::testing::{row_major_matmul_args, runtime_spec};
    let spec = runtime_spec(&row_major_matmul_args(4096, 4096, 4096));
    // The seed configurations, and the 16-wide K steps on 16 warps that the tutorial's
    // autotuner adds on devices with cooperative matrices (two iterations ahead, and with
    // one stage); and 32-wide on 8 and 16 warps, one workgroup stage and one prefetch set.
    let extra = [
        (128, 256, 16, 3, 16),
        (128, 256, 16, 1, 16),
        (128, 256, 32, 2, 16),
        (128, 256, 32, 2, 8),
        (256, 128, 32, 2, 8),
    ];
    let mut on_coop = 0;
    for (i, &(bm, bn, bk, stages, warps)) in seeds::MATMUL_CONFIGS.iter().chain(&extra).enumerate() {
        let mut meta = seeds::MatmulMeta::fp16(bm, bn, bk);
        if i % 2 == 1 {
            meta.activation = Some(seeds::Activation::LeakyRelu);
            meta.output = ScalarType::F32;
        }
        let kernel = seeds::matmul(&meta).unwrap();
        let target = Target {
            coop_matrix: shapes.to_vec(),
            reuse_shared: rutile_ir::target::SharedReuse::SameType,
            // The K loop two iterations ahead where the stages allow, as the runtime
            // launches these (the body unrolled by two).
            num_stages: stages,
            // 8-byte vectors, as the runtime gives kernels on cooperative matrices.
            max_vector_bytes: 8,
            ..Target::nvidia(warps, 48 * 1024)
        };
        let t =
            rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {bm}x{bn}x{bk}: {e}"));
        let (mut uses, mut widest_operand_store) = (false, 0);
        t.walk(&mut |s| match s {
            Stmt::CoopMulAdd { .. } => uses = true,
            Stmt::Store {
                values,
                mem: Memory::Shared { alloc },
                ..
            } if t.shared[*alloc as usize].elem == ScalarType::F16 => {
                widest_operand_store = widest_operand_store.max(values.len())
            }
            _ => {}
        });
        on_coop += uses as usize;
        // The operands reach workgroup memory in vectors of at least 8 bytes.
        assert!(
            !uses || widest_operand_store >= 4,
            "{bm}x{bn}x{bk}: widest operand store {widest_operand_store}\n{t}"
        );
        let (_, wgsl) = common::check(&t, &SpirvTarget::full(32));
        assert!(!uses || wgsl.contains("coop"), "{bm}x{bn}x{bk}: {wgsl}");
    }
    // All but the three whose operands fill the 48 KiB (see rutile-ir's coop_matrix tests).
    assert_eq!(on_coop, seeds::MATMUL_CONFIGS.len() + extra.len() - 3);
}

/// The read-once loads of `softmax_with(.., Streaming)`: every `OpLoad` through the input
/// buffer carries `Nontemporal` in the hinted words, and no other load does.
#[test]
fn streaming_loads_are_nontemporal() {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Decoration, MemoryAccess, Op};
    use rutile_ir::ir::CacheModifier;

    /// (loads marked Nontemporal, loads not marked) in `words`.
    fn count_loads(words: &[u32]) -> (usize, usize) {
        let module = rspirv::dr::load_words(words).unwrap();
        let (mut marked, mut plain) = (0, 0);
        for inst in module.all_inst_iter().filter(|i| i.class.opcode == Op::Load) {
            match inst.operands.get(1) {
                Some(Operand::MemoryAccess(m)) if m.contains(MemoryAccess::NONTEMPORAL) => marked += 1,
                _ => plain += 1,
            }
        }
        assert!(
            module.annotations.iter().any(|a| a.class.opcode == Op::Decorate
                && a.operands.get(1) == Some(&Operand::Decoration(Decoration::Binding))),
            "the module declares bindings"
        );
        (marked, plain)
    }

    let target = Target::vulkan(32, 4, 32 * 1024);
    let lower = |k: &Kernel| rutile_ir::lower::lower(k, &target, &Specialization::all(k.params.len())).unwrap();
    for block in [1024, 4096] {
        let streaming = lower(&seeds::softmax_with(block, CacheModifier::Streaming).unwrap());
        let (sk, _) = common::check(&streaming, &SpirvTarget::full(32));
        // Parameters: output (binding 0), input (binding 1), then scalars.
        assert_eq!(sk.streaming_bindings, vec![1]);
        assert!(sk.has_memory_hints());
        let (marked, _) = count_loads(&sk.spirv_words_hinted().unwrap());
        // 16-byte loads: block / (4 per vector) / 128 threads, at least one per thread.
        assert_eq!(marked, (block as usize / 4 / 128).max(1), "block {block}");
        // Without hints no load is marked (naga's own words).
        assert_eq!(count_loads(&sk.spirv_words().unwrap()).0, 0);

        let plain = lower(&seeds::softmax(block).unwrap());
        let (sk, _) = common::check(&plain, &SpirvTarget::full(32));
        assert!(sk.streaming_bindings.is_empty());
        assert_eq!(count_loads(&sk.spirv_words_hinted().unwrap()).0, 0);
    }
}

/// A buffer loaded both with and without the hint gets none (the hint is per binding).
#[test]
fn a_buffer_also_loaded_plainly_keeps_no_hint() {
    use rutile_ir::ir::CacheModifier;
    let kernel = Kernel::build("mixed_loads", |k| {
        let x = k.arg_ptr("x", ScalarType::F32);
        let y = k.arg_ptr("y", ScalarType::F32);
        let i = k.arange(0, 128);
        let a = k.load_masked_with(x + i, i.lt(128), 0.0f32, CacheModifier::Streaming);
        let b = k.load(x + i);
        k.store(y + i, a + b);
    })
    .unwrap();
    let target = Target::vulkan(32, 1, 32 * 1024);
    let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(2)).unwrap();
    let (sk, _) = common::check(&t, &SpirvTarget::full(32));
    assert!(sk.streaming_bindings.is_empty());
}

/// The seeded dropout validates, and where the device has 64-bit integers each of Philox's
/// products gives both its halves from one 64-bit multiply
/// (`rutile_ir::thread::product_pairs`): few 32-bit multiplies are left beside them.
#[test]
fn seeded_dropout_takes_both_halves_from_one_product() {
    let kernel = seeds::seeded_dropout(1024).unwrap();
    check_all(&kernel, &[4]);
    let t = rutile_ir::lower::lower(&kernel, &Target::vulkan(32, 4, 32 * 1024), &Specialization::all(5)).unwrap();
    let words = rutile_spirv::emit(&t, &SpirvTarget::full(32))
        .unwrap()
        .spirv_words()
        .unwrap();
    let (wide, narrow) = multiplies_by_width(&words);
    // 8 elements a thread, 9 or 10 rounds each with two products taken whole.
    assert!(wide >= 8 * 9 * 2 - 16, "{wide} 64-bit multiplies");
    assert!(
        narrow < wide / 4,
        "{narrow} 32-bit multiplies beside {wide} 64-bit ones"
    );
}

/// The `OpIMul`s of a SPIR-V module: `(64-bit, 32-bit)` results.
fn multiplies_by_width(words: &[u32]) -> (usize, usize) {
    const OP_TYPE_INT: u32 = 21;
    const OP_IMUL: u32 = 132;
    let mut widths = std::collections::HashMap::new();
    let (mut wide, mut narrow) = (0, 0);
    let mut i = 5; // after the header
    while i < words.len() {
        let (count, opcode) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if opcode == OP_TYPE_INT {
            widths.insert(words[i + 1], words[i + 2]);
        }
        if opcode == OP_IMUL {
            match widths.get(&words[i + 1]) {
                Some(64) => wide += 1,
                Some(32) => narrow += 1,
                _ => {}
            }
        }
        i += count.max(1);
    }
    (wide, narrow)
}

/// The grouped GEMM tutorial's kernel (its K loop inside the walk over tiles inside the
/// loop over problems) validates with and without the aligned tables' promise, plain and
/// on cooperative matrices (the H100's f16 shapes, as the runtime launches it there).
#[test]
fn grouped_matmul_validates_plain_and_on_cooperative_matrices() {
    use rutile_ir::target::CoopMatrixShape;
    use rutile_ir::thread::Stmt;
    let shapes = [(16, 16, 16), (16, 8, 16)].map(|(m, n, k)| CoopMatrixShape {
        m,
        n,
        k,
        ab: ScalarType::F16,
        acc: ScalarType::F32,
    });
    for ((bm, bn, bk), warps) in [((64, 64, 32), 4), ((128, 128, 32), 4)] {
        for aligned in [true, false] {
            let meta = seeds::GroupedMatmulMeta::new((bm, bn, bk), aligned);
            let kernel = seeds::grouped_matmul(&meta).unwrap();
            check_all(&kernel, &[warps]);
            let target = Target {
                coop_matrix: shapes.to_vec(),
                reuse_shared: rutile_ir::target::SharedReuse::SameType,
                max_vector_bytes: 8,
                ..Target::nvidia(warps, 48 * 1024)
            };
            let spec = rutile_ir::target::Specialization::all(kernel.params.len());
            let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
            let mut uses = false;
            t.walk(&mut |s| uses |= matches!(s, Stmt::CoopMulAdd { .. }));
            assert!(uses, "{bm}x{bn}x{bk}, aligned {aligned}: no cooperative matrix");
            common::check(&t, &SpirvTarget::full(32));
        }
    }
}
