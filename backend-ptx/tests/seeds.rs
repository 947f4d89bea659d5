//! The seed kernels, lowered for several meta-parameter sets, warps and specializations:
//! their PTX must pass `ptxas` for sm_80 and sm_90 (CI installs ptxas).

mod support;

use rutile_ir::seeds;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{Kernel, ScalarType};
use rutile_ptx::{emit, PtxTarget};

fn check_all(kernel: &Kernel, warps: &[u32]) {
    for &num_warps in warps {
        for spec in [
            Specialization::all(kernel.params.len()),
            Specialization::none(kernel.params.len()),
        ] {
            let t = rutile_ir::lower::lower(kernel, &Target::nvidia(num_warps, 48 * 1024), &spec)
                .unwrap_or_else(|e| panic!("lowering {} with {num_warps} warps: {e}", kernel.name));
            for (major, minor) in [(8, 0), (9, 0)] {
                let ptx = emit(&t, &PtxTarget::from_compute_capability(major, minor))
                    .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
                assert!(ptx.contains(&format!(".target sm_{major}{minor}")));
                // Readable: each stretch names the block op and line it came from.
                assert!(ptx.contains("// load at "), "{}", kernel.name);
                support::ptxas_check(&ptx, major * 10 + minor);
            }
        }
    }
}

#[test]
fn vector_add_passes_ptxas() {
    for block in [128, 1024, 4096] {
        check_all(&seeds::vector_add(ScalarType::F32, block).unwrap(), &[1, 4, 8]);
    }
    check_all(&seeds::vector_add(ScalarType::F16, 1024).unwrap(), &[4]);
}

#[test]
fn softmax_passes_ptxas() {
    for block in [256, 1024, 16384] {
        let warps = [seeds::softmax_num_warps(block), 2];
        check_all(&seeds::softmax(block).unwrap(), &warps);
        check_all(&seeds::softmax_persistent(block).unwrap(), &warps);
        check_all(&seeds::softmax_persistent_staged(block, 1).unwrap(), &warps);
        let full = seeds::SoftmaxOptions {
            ieee_rounding: false,
            ..Default::default()
        };
        check_all(&seeds::softmax_with(block, full).unwrap(), &warps);
        check_all(&seeds::softmax_persistent_with(block, 2, full).unwrap(), &warps);
    }
}

/// The chunked softmax (the row as several power-of-two blocks) at widths that split into
/// two to three pieces, with read-once loads.
#[test]
fn chunked_softmax_passes_ptxas() {
    for n in [781, 1152, 4224, 12672] {
        let chunks = seeds::softmax_chunks(n);
        let kernel = seeds::softmax_chunked(&chunks, rutile_ir::CacheModifier::Streaming).unwrap();
        check_all(&kernel, &[2, 8]);
    }
}

/// With the division without IEEE rounding (`div.full.f32`, as Triton's `/`) the fused
/// softmax at 1024 columns and 2 warps fits in 32 registers without spilling, so that 32
/// programs (the most a multiprocessor holds) are resident at once: 4096 rows in one wave
/// on an H100. `div.rn.f32`'s slow path for hard operands keeps more registers live.
#[test]
fn softmax_with_full_division_fits_32_registers_at_2_warps() {
    let options = seeds::SoftmaxOptions {
        cache: rutile_ir::CacheModifier::Streaming,
        ieee_rounding: false,
    };
    for kernel in [
        seeds::softmax_with(1024, options).unwrap(),
        seeds::softmax_chunked(&[1024], options).unwrap(),
    ] {
        let t = rutile_ir::lower::lower(
            &kernel,
            &Target::nvidia(2, 48 * 1024),
            &Specialization::all(kernel.params.len()),
        )
        .unwrap();
        let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
        assert!(ptx.contains("div.full.f32") && !ptx.contains("div.rn"), "{ptx}");
        if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
            assert!(
                registers <= 32 && spilled == 0,
                "{}: {registers} registers, {spilled} bytes spilled",
                kernel.name
            );
        }
    }
}

/// Before sm_80 PTX has no `max.NaN`: the runtime lowers f32 max reductions on integer keys
/// there, and that PTX must assemble for sm_70.
#[test]
fn softmax_with_keyed_max_passes_ptxas_for_sm_70() {
    let target = Target {
        native_float_minmax: false,
        ..Target::nvidia(4, 48 * 1024)
    };
    for kernel in [seeds::softmax(1024).unwrap(), seeds::softmax_persistent(1024).unwrap()] {
        let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
        let ptx = emit(&t, &PtxTarget::from_compute_capability(7, 0)).unwrap();
        assert!(
            ptx.contains("max.s32"),
            "the max reduction combines integer keys:\n{ptx}"
        );
        support::ptxas_check(&ptx, 70);
    }
}

#[test]
fn vector_add_vectorizes_when_aligned() {
    let k = seeds::vector_add(ScalarType::F32, 1024).unwrap();
    let t = rutile_ir::lower::lower(&k, &Target::nvidia(4, 48 * 1024), &Specialization::all(4)).unwrap();
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    assert!(ptx.contains("ld.global.v4.f32"), "16-byte loads expected:\n{ptx}");
    assert!(ptx.contains("st.global.v4.f32"), "16-byte stores expected");
    let t = rutile_ir::lower::lower(&k, &Target::nvidia(4, 48 * 1024), &Specialization::none(4)).unwrap();
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    assert!(!ptx.contains("ld.global.v4"), "no vector loads without alignment");
}

#[test]
fn streaming_loads_are_ld_global_cs() {
    let k = seeds::softmax_with(1024, rutile_ir::CacheModifier::Streaming).unwrap();
    assert!(
        k.to_string().contains("cache=cs"),
        "the block IR shows the modifier:\n{k}"
    );
    check_all(&k, &[2, 4]);
    let t = rutile_ir::lower::lower(&k, &Target::nvidia(4, 48 * 1024), &Specialization::all(6)).unwrap();
    assert!(t.to_string().contains("load.cs"), "the per-thread IR keeps it:\n{t}");
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    assert!(
        ptx.contains("ld.global.cs.v4.f32"),
        "streaming 16-byte loads expected:\n{ptx}"
    );
    // Only the input is streamed; shared-memory loads of the reductions are plain.
    assert!(!ptx.contains("ld.shared.cs"));
}

/// The other softmax forms take the modifier too: the persistent loop's loads (the first
/// row's and the next row's) and the several-rows block's.
#[test]
fn streaming_persistent_and_rows_forms_use_ld_global_cs() {
    let streaming = rutile_ir::CacheModifier::Streaming;
    for k in [
        seeds::softmax_persistent_with(1024, 2, streaming).unwrap(),
        seeds::softmax_rows_with(2, 1024, streaming).unwrap(),
    ] {
        check_all(&k, &[2, 8]);
        let t = rutile_ir::lower::lower(&k, &Target::nvidia(4, 48 * 1024), &Specialization::all(6)).unwrap();
        let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
        let streamed = ptx.matches("ld.global.cs").count();
        assert!(streamed > 0, "{}: streaming loads expected:\n{ptx}", k.name);
        assert_eq!(
            ptx.matches("ld.global.").count(),
            streamed,
            "{}: every global load is the input's",
            k.name
        );
    }
}

#[test]
fn matmul_passes_ptxas() {
    for (bm, bn, bk) in [(64, 64, 32), (128, 64, 32)] {
        let mut meta = seeds::MatmulMeta::fp16(bm, bn, bk);
        check_all(&seeds::matmul(&meta).unwrap(), &[4, 8]);
        meta.activation = Some(seeds::Activation::LeakyRelu);
        meta.input = ScalarType::F32;
        meta.output = ScalarType::F32;
        check_all(&seeds::matmul(&meta).unwrap(), &[4]);
    }
}

/// The tiled transpose (load contiguous along rows, store along columns) in the tiles and
/// warps the benchmark runs: 16-byte global accesses both ways, 16-byte shared stores for
/// the conversion, and no spills; `ptxas -v`'s registers are printed for the record
/// (`cargo test -p rutile-ptx --test seeds transpose -- --nocapture`).
#[test]
fn transpose_moves_16_bytes_both_ways_without_spills() {
    for (block, warps) in [(64u32, 4u32), (64, 8), (32, 4), (32, 8)] {
        let kernel = seeds::transpose(ScalarType::F32, block, block).unwrap();
        check_all(&kernel, &[warps]);
        let spec = Specialization::all(kernel.params.len());
        let t = rutile_ir::lower::lower(&kernel, &Target::nvidia(warps, 48 * 1024), &spec).unwrap();
        let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
        for vector in ["ld.global.v4.f32", "st.global.v4.f32", "st.shared.v4.f32"] {
            assert!(ptx.contains(vector), "{block}x{block} at {warps} warps: no {vector}");
        }
        if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
            println!("transpose {block}x{block}, {warps} warps: {registers} registers, {spilled} bytes spilled");
            assert_eq!(spilled, 0, "{block}x{block} at {warps} warps spills");
        }
    }
}

/// The matmul tutorial's configurations with `dot` on the tensor cores (`mma.sync`, f16
/// in, f32 accumulators) pass ptxas for sm_80 and sm_90; `ptxas -v`'s registers and
/// spills on sm_90 are printed for the record
/// (`cargo test -p rutile-ptx --test seeds tensor_cores -- --nocapture`).
#[test]
fn matmul_on_the_tensor_cores_passes_ptxas() {
    let configs = [
        (128, 256, 8),
        (256, 128, 8),
        (256, 64, 4),
        (64, 256, 4),
        (128, 128, 4),
        (128, 64, 4),
        (64, 128, 4),
        (128, 32, 4),
        (64, 32, 2),
        (32, 64, 2),
    ];
    for (bm, bn, warps) in configs {
        let kernel = seeds::matmul(&seeds::MatmulMeta::fp16(bm, bn, 32)).unwrap();
        let target = Target {
            mma_sync: true,
            ..Target::nvidia(warps, 227 * 1024)
        };
        // As the runtime specializes a row-major launch: every argument divisible by 16,
        // the unit strides (`stride_ak`, `stride_bn`, `stride_cn`) equal to 1.
        let spec = Specialization {
            equal_to_1: (0..kernel.params.len()).map(|i| [7, 9, 11].contains(&i)).collect(),
            ..Specialization::all(kernel.params.len())
        };
        let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
        for sm in [80, 90] {
            let ptx = emit(&t, &PtxTarget::from_compute_capability(sm / 10, 0)).unwrap();
            assert!(
                ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
                "{bm}x{bn}"
            );
            assert!(ptx.contains("ld.global.v4"), "{bm}x{bn}: 16-byte loads");
            support::ptxas_check(&ptx, sm);
            if sm == 90 {
                if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                    println!(
                        "matmul {bm}x{bn}x32, {warps} warps: {registers} registers, {spilled} bytes spilled, {} bytes shared",
                        t.shared_bytes()
                    );
                }
            }
        }
    }
}
