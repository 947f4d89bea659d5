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
                warp_size,
                num_warps,
                max_shared_bytes: 32 * 1024,
                shuffles,
                max_vector_bytes: 16,
                native_float_minmax: false,
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
