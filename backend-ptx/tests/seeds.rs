//! The seed kernels, lowered for several meta-parameter sets, warps and specializations
//! (every configuration the tutorials autotune over among them): their PTX must pass
//! `ptxas` for sm_80 and sm_90 (CI installs ptxas). What `ptxas -v` reports for each
//! (registers, bytes spilled) is printed beside the shared memory the lowering counts:
//! `cargo test -p rutile-ptx --test seeds -- --nocapture`.

mod support;

use rutile_ir::seeds;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::thread::ThreadKernel;
use rutile_ir::{Kernel, ScalarType};
use rutile_ptx::{emit, PtxTarget};

/// The compute capabilities every seed configuration is assembled for.
const SMS: [u32; 2] = [80, 90];

/// What `ptxas -v` reported for one kernel: registers per thread and bytes spilled (spill
/// stores plus loads).
#[derive(Clone, Copy, Debug)]
struct Resources {
    registers: u32,
    spilled: u32,
}

/// Emits `t` for `sm_{sm}`, assembles it with `ptxas -v` (a failure of ptxas fails the
/// test, with its messages and the PTX), and prints its resources as `label`. Returns the
/// PTX, and the resources where ptxas is available.
fn assemble(label: &str, t: &ThreadKernel, sm: u32) -> (String, Option<Resources>) {
    let ptx = emit(t, &PtxTarget::from_compute_capability(sm / 10, sm % 10))
        .unwrap_or_else(|e| panic!("{label}: emitting PTX for sm_{sm}: {e}"));
    assert!(ptx.contains(&format!(".target sm_{sm}")), "{label}");
    // (`sm_90a` where the kernel uses `wgmma`.)
    let resources = support::ptxas_resources(&ptx, sm).map(|(registers, spilled)| Resources { registers, spilled });
    if let Some(r) = resources {
        println!(
            "{label}, sm_{sm}: {} registers, {} bytes spilled, {} bytes shared",
            r.registers,
            r.spilled,
            t.shared_bytes()
        );
    }
    (ptx, resources)
}

/// One configuration's PTX for one SM, as [`check`] assembled it.
struct Checked {
    num_warps: u32,
    aligned: bool,
    ptx: String,
    resources: Option<Resources>,
}

/// `kernel` at each of `warps`, specialized as for aligned arguments and for none, lowered
/// for an NVIDIA GPU with 48 KiB of shared memory and assembled for [`SMS`]; `label` names
/// its meta-parameters in the printed report.
fn check_all(label: &str, kernel: &Kernel, warps: &[u32]) -> Vec<Checked> {
    check(label, kernel, warps, &[true, false])
}

/// [`check_all`] for the specializations in `aligned` (`true`: every argument divisible
/// by 16, as the runtime's launches on whole buffers of aligned sizes).
fn check(label: &str, kernel: &Kernel, warps: &[u32], aligned: &[bool]) -> Vec<Checked> {
    let mut checked = Vec::new();
    for &num_warps in warps {
        for &aligned in aligned {
            let n = kernel.params.len();
            let spec = if aligned {
                Specialization::all(n)
            } else {
                Specialization::none(n)
            };
            let t = rutile_ir::lower::lower(kernel, &Target::nvidia(num_warps, 48 * 1024), &spec)
                .unwrap_or_else(|e| panic!("lowering {label} with {num_warps} warps: {e}"));
            let spec_label = if aligned { "aligned" } else { "unaligned" };
            for sm in SMS {
                let (ptx, resources) = assemble(&format!("{label}, {num_warps} warps, {spec_label}"), &t, sm);
                // Readable: each stretch names the block op and line it came from.
                assert!(ptx.contains("// load at "), "{label}");
                checked.push(Checked {
                    num_warps,
                    aligned,
                    ptx,
                    resources,
                });
            }
        }
    }
    checked
}

#[test]
fn vector_add_passes_ptxas() {
    for block in [128, 1024, 4096] {
        let label = format!("vector add f32, BLOCK {block}");
        check_all(&label, &seeds::vector_add(ScalarType::F32, block).unwrap(), &[1, 4, 8]);
    }
    check_all(
        "vector add f16, BLOCK 1024",
        &seeds::vector_add(ScalarType::F16, 1024).unwrap(),
        &[4],
    );
}

#[test]
fn seeded_dropout_passes_ptxas() {
    for block in [256, 1024] {
        let label = format!("seeded dropout, BLOCK {block}");
        let checked = check_all(&label, &seeds::seeded_dropout(block).unwrap(), &[4]);
        // Philox's products, high and low halves from one instruction (`wide_products`)
        // but for the last round's, whose low half nothing reads.
        for c in &checked {
            let count = |i: &str| c.ptx.matches(i).count();
            assert!(count("mul.wide.u32") >= 9 * block as usize / 128, "{label}");
            assert!(count("mul.hi.u32") < count("mul.wide.u32") / 4, "{label}");
        }
    }
}

/// The dropout whose programs walk blocks, its next blocks copied ahead
/// (`seeds::seeded_dropout_walk`), lowered as the runtime lowers it for sm_80 and later
/// (asynchronous copies): it assembles, with the copies in it.
#[test]
fn seeded_dropout_walk_passes_ptxas() {
    for (block, warps) in [(1024, 4), (2048, 8), (512, 4)] {
        for stages in [2, 3] {
            let kernel = seeds::seeded_dropout_walk(block, stages).unwrap();
            let target = Target {
                async_copy: true,
                ..Target::nvidia(warps, 48 * 1024)
            };
            let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
            let label = format!("seeded dropout walk, BLOCK {block}, {warps} warps, {stages} stages");
            let (ptx, _) = assemble(&label, &t, 90);
            assert!(ptx.contains("cp.async"), "{label}");
        }
    }
}

/// Without `PtxTarget::wide_products` the dropout's Philox takes its products' halves by
/// two instructions, and `ptxas` makes more of them. With `RUTILE_PTX_DIR=DIR` the sm_90
/// PTX is written to `DIR/_seeded_dropout.ptx`.
#[test]
fn seeded_dropout_takes_both_halves_from_one_product() {
    let kernel = seeds::seeded_dropout(1024).unwrap();
    let spec = Specialization::all(kernel.params.len());
    let t = rutile_ir::lower::lower(&kernel, &Target::nvidia(4, 48 * 1024), &spec).unwrap();
    let sm90 = PtxTarget::from_compute_capability(9, 0);
    let wide = emit(&t, &sm90).unwrap();
    let split = emit(&t, &sm90.wide_products(false)).unwrap();
    // The PTX that `benches/cuda/dropout_time.cu` times and `dropout_variants.py` edits.
    if let Ok(dir) = std::env::var("RUTILE_PTX_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("_seeded_dropout.ptx"), &wide).unwrap();
    }
    let count = |ptx: &str, i: &str| ptx.matches(i).count();
    assert_eq!(count(&split, "mul.wide.u32"), 0);
    let pairs = count(&wide, "mul.wide.u32");
    assert_eq!(count(&split, "mul.hi.u32"), count(&wide, "mul.hi.u32") + pairs);
    assert_eq!(count(&split, "mul.lo.u32"), count(&wide, "mul.lo.u32") + pairs);
    for ptx in [&wide, &split] {
        if let Some(r) = support::ptxas_resources(ptx, 90) {
            println!(
                "seeded dropout, BLOCK 1024, 4 warps: {} registers, {} bytes spilled",
                r.0, r.1
            );
        }
    }
}

#[test]
fn softmax_passes_ptxas() {
    for block in [256, 1024, 16384] {
        let warps = [seeds::softmax_num_warps(block), 2];
        let label = |form: &str| format!("softmax {form}, BLOCK {block}");
        check_all(&label("simple"), &seeds::softmax(block).unwrap(), &warps);
        check_all(&label("persistent"), &seeds::softmax_persistent(block).unwrap(), &warps);
        let staged = seeds::softmax_persistent_staged(block, 1).unwrap();
        check_all(&label("persistent, 1 stage"), &staged, &warps);
        let full = seeds::SoftmaxOptions {
            ieee_rounding: false,
            ..Default::default()
        };
        check_all(
            &label("simple, fdiv"),
            &seeds::softmax_with(block, full).unwrap(),
            &warps,
        );
        let persistent = seeds::softmax_persistent_with(block, 2, full).unwrap();
        check_all(&label("persistent, 2 stages, fdiv"), &persistent, &warps);
    }
}

/// The fused softmax's baseline, the tutorial's unfused `naive_softmax` (five kernels).
#[test]
fn naive_softmax_passes_ptxas() {
    for n in [781, 16384] {
        let s = seeds::NaiveSoftmax::new(n).unwrap();
        let warps = [seeds::softmax_num_warps(s.row_block)];
        check_all(&format!("naive softmax row max, {n} columns"), &s.row_max, &warps);
        check_all(&format!("naive softmax row sum, {n} columns"), &s.row_sum, &warps);
        for (name, kernel) in [("subtract", &s.subtract), ("exp", &s.exp), ("divide", &s.divide)] {
            check_all(&format!("naive softmax {name}"), kernel, &[4]);
        }
    }
}

/// The chunked softmax (the row as several power-of-two blocks) at widths that split into
/// two to three pieces, with read-once loads.
#[test]
fn chunked_softmax_passes_ptxas() {
    for n in [781, 1152, 4224, 12672] {
        let chunks = seeds::softmax_chunks(n);
        let kernel = seeds::softmax_chunked(&chunks, rutile_ir::CacheModifier::Streaming).unwrap();
        check_all(&format!("softmax chunked {chunks:?}, streaming"), &kernel, &[2, 8]);
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
    check_all("softmax simple, BLOCK 1024, streaming", &k, &[2, 4]);
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
        check_all(&format!("{}, streaming", k.name), &k, &[2, 8]);
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
        check_all(
            &format!("matmul f16 {bm}x{bn}x{bk}"),
            &seeds::matmul(&meta).unwrap(),
            &[4, 8],
        );
        meta.activation = Some(seeds::Activation::LeakyRelu);
        meta.input = ScalarType::F32;
        meta.output = ScalarType::F32;
        let label = format!("matmul f32 {bm}x{bn}x{bk}, leaky ReLU");
        check_all(&label, &seeds::matmul(&meta).unwrap(), &[4]);
    }
}

/// The tiled transpose (load contiguous along rows, store along columns) in the tiles and
/// warps the benchmark runs: 16-byte global accesses both ways, 16-byte shared stores for
/// the conversion, and no spills when aligned; `ptxas -v`'s registers are printed for the
/// record (`cargo test -p rutile-ptx --test seeds transpose -- --nocapture`).
#[test]
fn transpose_moves_16_bytes_both_ways_without_spills() {
    for (block, warps) in [(64u32, 4u32), (64, 8), (32, 4), (32, 8)] {
        let kernel = seeds::transpose(ScalarType::F32, block, block).unwrap();
        let label = format!("transpose {block}x{block}");
        for c in check_all(&label, &kernel, &[warps]).iter().filter(|c| c.aligned) {
            for vector in ["ld.global.v4.f32", "st.global.v4.f32", "st.shared.v4.f32"] {
                assert!(c.ptx.contains(vector), "{label} at {warps} warps: no {vector}");
            }
            if let Some(r) = c.resources {
                assert_eq!(r.spilled, 0, "{label} at {} warps spills", c.num_warps);
            }
        }
    }
}

/// The configurations the softmax tutorial autotunes over (`softmax_configs` in
/// `examples/tutorials.rs`) at a width between powers of two: the row as one block
/// or in up to 4 power-of-two pieces, plain or read-once loads, Triton's division, 1 to
/// 16 warps.
#[test]
fn softmax_tutorial_configurations_pass_ptxas() {
    let cols = 1100;
    let mut splits: Vec<Vec<u32>> = Vec::new();
    for pieces in 1..=4 {
        let chunks = seeds::softmax_chunks_at_most(cols, pieces);
        if !splits.contains(&chunks) {
            splits.push(chunks);
        }
    }
    assert!(splits.len() > 2, "{splits:?}");
    for cache in [rutile_ir::CacheModifier::Default, rutile_ir::CacheModifier::Streaming] {
        let options = seeds::SoftmaxOptions {
            cache,
            ieee_rounding: false,
        };
        for (pieces, chunks) in splits.iter().enumerate() {
            let kernel = match pieces {
                0 => seeds::softmax_with(seeds::softmax_block(cols), options),
                _ => seeds::softmax_chunked(chunks, options),
            }
            .unwrap();
            let label = format!("softmax autotuned, {cols} columns as {chunks:?}, {cache:?} loads");
            check(&label, &kernel, &[1, 2, 4, 8, 16], &[true]);
        }
    }
}

/// Each of the tutorial's matmul configurations lowered as the CUDA backend lowers it on
/// an H100 (up to 227 KiB of shared memory), with `dot` on the tensor cores or not
/// (`mma_sync`), and assembled for [`SMS`]. Returns, per configuration and SM, its label
/// and what ptxas reported.
fn matmul_tutorial_configurations(mma_sync: bool) -> Vec<(String, Option<Resources>)> {
    let mut reports = Vec::new();
    // The seed's own ten (`BLOCK_K` 32).
    for &(bm, bn, bk, stages, warps) in &seeds::MATMUL_CONFIGS[..seeds::SEED_MATMUL_CONFIGS] {
        let kernel = seeds::matmul(&seeds::MatmulMeta::fp16(bm, bn, bk)).unwrap();
        // `num_stages` does not reach the lowering through this target; written so, the
        // target keeps its other defaults as fields are added.
        let target = Target {
            mma_sync,
            ..Target::nvidia(warps, 227 * 1024)
        };
        // As the runtime specializes a row-major launch: every argument divisible by 16,
        // the unit strides (`stride_ak`, `stride_bn`, `stride_cn`) equal to 1.
        let spec = Specialization {
            equal_to_1: (0..kernel.params.len()).map(|i| [7, 9, 11].contains(&i)).collect(),
            ..Specialization::all(kernel.params.len())
        };
        let cores = if mma_sync { "tensor cores" } else { "CUDA cores" };
        let label = format!("matmul {bm}x{bn}x32, {warps} warps, {stages} stages, {cores}");
        let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
        for sm in SMS {
            let (ptx, resources) = assemble(&label, &t, sm);
            assert_eq!(
                ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
                mma_sync,
                "{label}: mma.sync where the target has it, only there"
            );
            // 16-byte loads into registers, or straight into shared memory (`cp.async`).
            assert!(
                ptx.contains("ld.global.v4") || ptx.contains("cp.async"),
                "{label}: 16-byte loads"
            );
            reports.push((format!("{label}, sm_{sm}"), resources));
        }
    }
    reports
}

/// The matmul tutorial's configurations with `dot` on the tensor cores (`mma.sync`, f16
/// in, f32 accumulators) pass ptxas for sm_80 and sm_90, and none spills
/// (`cargo test -p rutile-ptx --test seeds tensor_cores -- --nocapture` prints each one's
/// registers).
#[test]
fn matmul_on_the_tensor_cores_passes_ptxas() {
    let spilling: Vec<String> = matmul_tutorial_configurations(true)
        .into_iter()
        .filter_map(|(label, r)| {
            r.filter(|r| r.spilled > 0)
                .map(|r| format!("{label}: {} bytes", r.spilled))
        })
        .collect();
    assert!(
        spilling.is_empty(),
        "tensor-core matmuls that spill:\n{}",
        spilling.join("\n")
    );
}

/// The matmul configurations the tutorial tries (`matmul_configs`) as the CUDA backend lowers
/// them on an H100: `dot` on warpgroup MMAs (`wgmma`, sm_90a) where the warps make whole
/// warpgroups, `mma.sync` elsewhere, operands pipelined over `num_stages` buffers, fed by
/// the tensor memory accelerator (`cp.async.bulk.tensor`) where `wgmma` reads them, and by
/// `cp.async` without it (`RUTILE_TMA=0`); with TMA, f16 and f32 results both leave by
/// bulk tensor stores. Each passes ptxas for sm_90a without spilling
/// (`cargo test -p rutile-ptx --test seeds warpgroup -- --nocapture` prints registers and
/// shared memory).
#[test]
fn matmul_on_warpgroup_mmas_passes_ptxas() {
    let configs = seeds::MATMUL_CONFIGS;
    let mut spilling = Vec::new();
    for (tma, output) in [
        (true, ScalarType::F16),
        (true, ScalarType::F32),
        (false, ScalarType::F16),
    ] {
        for (bm, bn, bk, stages, warps) in configs {
            let meta = seeds::MatmulMeta {
                output,
                ..seeds::MatmulMeta::fp16(bm, bn, bk)
            };
            let kernel = seeds::matmul(&meta).unwrap();
            let target = Target {
                mma_sync: true,
                wgmma: true,
                tma,
                async_copy: true,
                num_stages: stages,
                ..Target::nvidia(warps, 227 * 1024)
            };
            let spec = Specialization {
                equal_to_1: (0..kernel.params.len()).map(|i| [7, 9, 11].contains(&i)).collect(),
                ..Specialization::all(kernel.params.len())
            };
            let label = format!(
                "matmul {bm}x{bn}x{bk}, {warps} warps, {stages} stages, warpgroup MMAs, TMA {tma}, {output:?} out"
            );
            let t =
                rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
            let (ptx, resources) = assemble(&label, &t, 90);
            let whole_warpgroups = warps % 4 == 0;
            assert_eq!(
                ptx.contains("wgmma.mma_async.sync.aligned"),
                whole_warpgroups,
                "{label}"
            );
            assert_eq!(ptx.contains(".target sm_90a"), whole_warpgroups, "{label}");
            let bulk = ptx.contains("cp.async.bulk.tensor.2d");
            assert_eq!(bulk, tma && whole_warpgroups, "{label}: TMA copies");
            // With TMA both operands are boxes (A's rows in order: the accumulator carries the
            // warpgroup MMA's row order), so no `cp.async` is left.
            let async_copies = ptx.contains("cp.async.ca") || ptx.contains("cp.async.cg");
            assert_eq!(async_copies, !bulk, "{label}: cp.async");
            let bulk_store = ptx.contains("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group");
            // Where the result's rows are whole 128-byte column blocks.
            let blocks = bn * output.size_bytes() as u32 % 128 == 0;
            assert_eq!(bulk_store, tma && whole_warpgroups && blocks, "{label}: TMA stores");
            if let Some(r) = resources.filter(|r| r.spilled > 0) {
                spilling.push(format!("{label}: {} bytes", r.spilled));
            }
        }
    }
    assert!(
        spilling.is_empty(),
        "warpgroup matmuls that spill:\n{}",
        spilling.join("\n")
    );
}

/// The matmul tutorial's fp8 run lowered for an H100 or H200: with the warps in whole
/// warpgroups its `dot` of fp8 blocks runs on fp8 warpgroup MMAs (`k32`, both operands
/// K-major in shared memory), fed by TMA where B lies along K in memory (the tutorial's
/// `b.T`) and staged from registers into its K-major tile where B lies along N; elsewhere
/// (`mma.sync`) on the operands' f16 conversions. Each passes ptxas for sm_90a without
/// spilling.
#[test]
fn fp8_matmul_on_warpgroup_mmas_passes_ptxas() {
    let mut spilling = Vec::new();
    for input in [ScalarType::F8E5M2, ScalarType::F8E4M3] {
        for b_along_k in [true, false] {
            for (bm, bn, bk, stages, warps) in [(128, 256, 64, 3, 8), (128, 128, 128, 4, 8), (64, 32, 32, 5, 2)] {
                let meta = seeds::MatmulMeta {
                    input,
                    ..seeds::MatmulMeta::fp16(bm, bn, bk)
                };
                let kernel = seeds::matmul(&meta).unwrap();
                let target = Target {
                    mma_sync: true,
                    wgmma: true,
                    tma: true,
                    async_copy: true,
                    num_stages: stages,
                    ..Target::nvidia(warps, 227 * 1024)
                };
                // stride_ak, stride_cn, and stride_bk (B along K) or stride_bn equal to 1.
                let unit = [7, 11, if b_along_k { 8 } else { 9 }];
                let spec = Specialization {
                    equal_to_1: (0..kernel.params.len()).map(|i| unit.contains(&i)).collect(),
                    ..Specialization::all(kernel.params.len())
                };
                let label = format!("fp8 matmul {input} {bm}x{bn}x{bk}, {warps} warps, B along K {b_along_k}");
                let t = rutile_ir::lower::lower(&kernel, &target, &spec)
                    .unwrap_or_else(|e| panic!("lowering {label}: {e}"));
                let (ptx, resources) = assemble(&label, &t, 90);
                let fp8 = if input == ScalarType::F8E5M2 { "e5m2" } else { "e4m3" };
                if warps % 4 == 0 {
                    assert!(ptx.contains(&format!("k32.f32.{fp8}.{fp8}")), "{label}: no fp8 wgmma");
                    // (A's rows along K: a box; B's too where it lies along K.)
                    assert!(ptx.contains("cp.async.bulk.tensor.2d.shared"), "{label}: TMA copies");
                } else {
                    assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16"), "{label}");
                    assert!(
                        ptx.contains(&format!("cvt.rn.f16x2.{fp8}x2")),
                        "{label}: f16 conversions"
                    );
                }
                if let Some(r) = resources.filter(|r| r.spilled > 0) {
                    spilling.push(format!("{label}: {} bytes", r.spilled));
                }
            }
        }
    }
    assert!(spilling.is_empty(), "fp8 matmuls that spill:\n{}", spilling.join("\n"));
    // E4M3 by E5M2: one MMA of both types.
    for b_along_k in [true, false] {
        let kernel = rutile_ir::testing::mixed_fp8_dot(b_along_k);
        let target = Target {
            mma_sync: true,
            wgmma: true,
            ..Target::nvidia(4, 227 * 1024)
        };
        let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(3)).unwrap();
        let (ptx, _) = assemble(&format!("mixed fp8 dot, B along K {b_along_k}"), &t, 90);
        assert!(ptx.contains("m64n64k32.f32.e4m3.e5m2"), "no mixed fp8 wgmma");
    }
}

/// The largest matmul configurations the autotuner tries on `mma.sync` (sm_80 and sm_89
/// GPUs, and Hopper with `RUTILE_HOPPER=0`): 128 x 256 on 8 warps, 3 stages of `cp.async`,
/// persistent and not, f16 operands and fp8 ones widened to f16 for the MMAs (the fp8
/// study's kernel: B along K, f16 results), pass ptxas for sm_90 without spilling; each
/// accumulator is 128 registers a thread, so this is where spills would start.
#[test]
fn largest_mma_sync_matmuls_do_not_spill() {
    let mut spilling = Vec::new();
    for (input, bk) in [
        (ScalarType::F16, 64),
        (ScalarType::F8E4M3, 128),
        (ScalarType::F8E5M2, 64),
        (ScalarType::F8E5M2, 128),
    ] {
        for persistent in [true, false] {
            let meta = seeds::MatmulMeta {
                input,
                output: ScalarType::F16,
                group_m: 8,
                ..seeds::MatmulMeta::fp16(128, 256, bk)
            };
            let kernel = seeds::matmul(&meta).unwrap();
            let target = Target {
                mma_sync: true,
                async_copy: true,
                num_stages: 3,
                persistent,
                ..Target::nvidia(8, 227 * 1024)
            };
            // B along K: stride_ak, stride_bk and stride_cn equal to 1.
            let spec = Specialization {
                equal_to_1: (0..kernel.params.len()).map(|i| [7, 8, 11].contains(&i)).collect(),
                ..Specialization::all(kernel.params.len())
            };
            let label = format!("matmul {input} 128x256x{bk}, 8 warps, 3 stages, persistent {persistent}, mma.sync");
            let t =
                rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
            let (ptx, resources) = assemble(&label, &t, 90);
            assert!(ptx.contains("mma.sync.aligned.m16n8k16"), "{label}: not on mma.sync");
            if let Some(r) = resources.filter(|r| r.spilled > 0) {
                spilling.push(format!("{label}: {} bytes", r.spilled));
            }
        }
    }
    assert!(
        spilling.is_empty(),
        "mma.sync matmuls that spill:\n{}",
        spilling.join("\n")
    );
}

/// fp8 matmuls that promote their sums every 128 elements of K (`max_num_imprecise_acc`,
/// the tutorial's `b.T`) on warpgroup MMAs: a second accumulator written from zero by each
/// K block's MMAs, waited for and added in f32 (`add.f32` of every accumulator register a
/// block), plain and on the persistent warp-specialized schedule, pass ptxas for sm_90a
/// without spilling at 128 x 128 (two accumulators of 64 registers); registers printed. At
/// 128 x 256 the two accumulators take 256 registers of a consumer's 232: printed, not
/// bounded (the autotuner weighs what the spills cost).
#[test]
fn promoting_fp8_matmuls_pass_ptxas() {
    let mut spilling = Vec::new();
    for (bm, bn, bk, stages, schedules) in [
        (128, 128, 128, 4, false),
        (128, 128, 128, 3, true),
        (128, 256, 128, 3, true),
    ] {
        let meta = seeds::MatmulMeta {
            input: ScalarType::F8E4M3,
            max_num_imprecise_acc: Some(128),
            ..seeds::MatmulMeta::fp16(bm, bn, bk)
        };
        let kernel = seeds::matmul(&meta).unwrap();
        let target = Target {
            mma_sync: true,
            wgmma: true,
            tma: true,
            async_copy: true,
            num_stages: stages,
            persistent: schedules,
            warp_specialize: schedules,
            ..Target::nvidia(8, 227 * 1024)
        };
        let spec = Specialization {
            equal_to_1: (0..kernel.params.len()).map(|i| [7, 8, 11].contains(&i)).collect(),
            ..Specialization::all(kernel.params.len())
        };
        let label = format!(
            "promoting fp8 matmul {bm}x{bn}x{bk}, {stages} stages, persistent and warp-specialized {schedules}"
        );
        let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
        let (ptx, resources) = assemble(&label, &t, 90);
        assert!(ptx.contains("k32.f32.e4m3.e4m3"), "{label}: no fp8 wgmma");
        // Each consumer thread's share of the block's accumulator, added once a K block.
        let per_thread = (bm * bn / (128 * 2)) as usize;
        let adds = ptx.matches("add.f32").count() + ptx.matches("add.rn.f32").count();
        assert!(
            adds >= per_thread,
            "{label}: {adds} f32 additions, {per_thread} accumulator registers"
        );
        if let Some(r) = resources {
            println!("{label}: {} registers, {} bytes spilled", r.registers, r.spilled);
            if r.spilled > 0 && bn == 128 {
                spilling.push(format!("{label}: {} bytes", r.spilled));
            }
        }
    }
    assert!(
        spilling.is_empty(),
        "promoting fp8 matmuls that spill:\n{}",
        spilling.join("\n")
    );
}

/// The same configurations with `dot` on the CUDA cores (the lowering of targets without
/// `mma.sync`) pass ptxas too; their registers and spills are printed, not bounded.
#[test]
fn matmul_on_the_cuda_cores_passes_ptxas() {
    matmul_tutorial_configurations(false);
}

/// The schedules the autotuner adds on Hopper (`examples/tutorials.rs`,
/// `matmul_configs_for`): the persistent grid, warp specialization (a producer warpgroup
/// issuing the TMA copies, the consumers releasing stages through "empty" mbarriers) and
/// both, for the warpgroup configurations, pass ptxas for sm_90a without spilling
/// (`cargo test -p rutile-ptx --test seeds schedules -- --nocapture` prints registers and
/// shared memory).
#[test]
fn matmul_schedules_pass_ptxas() {
    let mut spilling = Vec::new();
    for (bm, bn, bk, stages, warps) in seeds::MATMUL_CONFIGS {
        if bk != 64 || warps != 8 {
            continue;
        }
        for (persistent, warp_specialize) in [(true, false), (false, true), (true, true)] {
            // The persistent warp-specialized ring holds one stage less: it cannot share its
            // bytes with the epilogue's staging tile, written while the producer fills it.
            let stages = if warp_specialize && persistent {
                stages.min(3)
            } else {
                stages
            };
            let kernel = seeds::matmul(&seeds::MatmulMeta::fp16(bm, bn, bk)).unwrap();
            let target = Target {
                mma_sync: true,
                wgmma: true,
                tma: true,
                async_copy: true,
                num_stages: stages,
                persistent,
                warp_specialize,
                ..Target::nvidia(warps, 227 * 1024)
            };
            let spec = Specialization {
                equal_to_1: (0..kernel.params.len()).map(|i| [7, 9, 11].contains(&i)).collect(),
                ..Specialization::all(kernel.params.len())
            };
            let label = format!(
                "matmul {bm}x{bn}x{bk}, {warps} warps, {stages} stages, persistent {persistent}, warp-specialized {warp_specialize}"
            );
            let t =
                rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
            assert_eq!(t.producer_warps, if warp_specialize { 4 } else { 0 }, "{label}");
            assert_eq!(t.persistent.is_some(), persistent, "{label}");
            let (ptx, resources) = assemble(&label, &t, 90);
            assert!(ptx.contains("cp.async.bulk.tensor.2d"), "{label}");
            // The f16 result tile leaves through bulk tensor stores, waited for by their reads.
            assert!(
                ptx.contains("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"),
                "{label}"
            );
            assert!(ptx.contains("cp.async.bulk.wait_group.read 0"), "{label}");
            assert_eq!(ptx.contains(".maxntid 384, 1, 1"), warp_specialize, "{label}");
            for needed in [
                "setmaxnreg.dec.sync.aligned.u32 40",
                "setmaxnreg.inc.sync.aligned.u32 232",
                "bar.sync 1, 256",
                "mbarrier.arrive.shared::cta.b64",
            ] {
                assert_eq!(ptx.contains(needed), warp_specialize, "{label}: {needed}");
            }
            assert_eq!(ptx.contains("%nctaid.x"), persistent, "{label}");
            if let Some(r) = resources.filter(|r| r.spilled > 0) {
                spilling.push(format!("{label}: {} bytes", r.spilled));
            }
        }
    }
    assert!(spilling.is_empty(), "schedules that spill:\n{}", spilling.join("\n"));
}

/// A group of warpgroup MMAs builds one descriptor an operand buffer and derives the rest
/// by adding their constant offsets (`SmemMatrix::offset`): in the matmul's K loop, two
/// descriptors are built (A's and B's stage) for every group of MMAs, the other MMAs each add
/// 16-byte chunks to a start address field; and the result still passes ptxas.
#[test]
fn warpgroup_mma_descriptors_are_derived_within_a_group() {
    let kernel = seeds::matmul(&seeds::MatmulMeta::fp16(128, 256, 64)).unwrap();
    let target = Target {
        mma_sync: true,
        wgmma: true,
        tma: true,
        async_copy: true,
        num_stages: 4,
        ..Target::nvidia(8, 227 * 1024)
    };
    let spec = Specialization::all(kernel.params.len());
    let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
    let (ptx, _) = assemble("matmul 128x256x64, 8 warps, 4 stages", &t, 90);
    let count = |s: &str| ptx.matches(s).count();
    let (groups, mmas, built) = (count("wgmma.fence"), count("wgmma.mma_async"), count("bfe.u32"));
    assert!(mmas >= 4 * groups && groups > 0, "{groups} groups, {mmas} MMAs");
    assert_eq!(
        built,
        2 * groups,
        "descriptors built: {built} for {groups} groups of {mmas} MMAs"
    );
    // Each MMA past a group's first adds its offsets: 32 bytes a K step of A, 2 chunks.
    assert!(ptx.contains(", 2;"), "no K step of 2 chunks:\n{ptx}");
}

/// A descriptor built inside a branch is not reused after it (the branch may not have run):
/// an MMA after an `if` whose body ran one on the same operands builds its own.
#[test]
fn warpgroup_mma_descriptors_are_not_shared_across_a_branch() {
    use rutile_ir::ir::CmpOp;
    use rutile_ir::thread::{MatrixMajor, SmemMatrix, Stmt, ThreadKernelBuilder, WgmmaA};
    let mut k = ThreadKernelBuilder::new("branchy_mma", 4, 32);
    let buf = k.shared(ScalarType::F16, 8192);
    let zero = k.int(ScalarType::I32, 0);
    let acc: Vec<_> = (0..8).map(|_| k.float(ScalarType::F32, 0.0)).collect();
    let matrix = |offset| SmemMatrix {
        alloc: buf,
        index: zero,
        offset,
        major: MatrixMajor::K,
        swizzle: 128,
        lbo: 16,
        sbo: 1024,
    };
    let mma = |offset| Stmt::Wgmma {
        acc: acc.clone(),
        a: WgmmaA::Shared(matrix(offset)),
        b: matrix(offset + 4096),
        n: 16,
        accumulate: true,
    };
    let tid = k.thread_id();
    let half = k.int(ScalarType::I32, 64);
    let cond = k.cmp(CmpOp::Lt, tid, half);
    k.push(Stmt::WgmmaFence);
    k.if_(cond, |k| k.push(mma(0)), |_| {});
    k.push(mma(16));
    k.push(Stmt::WgmmaCommit);
    k.push(Stmt::WgmmaWait { pending: 0 });
    let mut t = k.finish_unverified();
    // (As the lowering places a `wgmma` operand's buffer.)
    t.shared[buf as usize].align = 1024;
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    // (A and B share a base: one buffer, register and set of fields; built in the branch and
    // again after it.)
    assert_eq!(ptx.matches("bfe.u32").count(), 2, "{ptx}");
}
