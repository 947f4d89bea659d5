//! The kernels of the layer norm, long-row and fused attention tutorials, lowered for the
//! configurations their host code picks (aligned and unaligned arguments): their PTX must
//! pass `ptxas` for sm_80 and sm_90. Registers and spills are printed:
//! `cargo test -p rutile-ptx --test tutorials -- --nocapture`.

mod support;

use rutile_ir::seeds::{
    self, AttentionMeta, LayerNormBackwardMeta, LayerNormMeta, LongRowMeta, RowParams, RowStats, SoftmaxOptions,
};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{F16, F32};
use rutile_ptx::{emit, PtxTarget};

/// Lowers `kernel` for an NVIDIA GPU (`target`, or 48 KiB of shared memory without tensor
/// cores) at each of `warps`, specialized for aligned arguments and for none, and
/// assembles it for sm_80 and sm_90; returns the PTX of the last one.
fn check_on(label: &str, kernel: &Kernel, warps: &[u32], target: impl Fn(u32) -> Target) -> String {
    let mut last = String::new();
    for &num_warps in warps {
        for aligned in [true, false] {
            let n = kernel.params.len();
            let spec = if aligned {
                Specialization::all(n)
            } else {
                Specialization::none(n)
            };
            let t = rutile_ir::lower::lower(kernel, &target(num_warps), &spec)
                .unwrap_or_else(|e| panic!("lowering {label} with {num_warps} warps: {e}"));
            for sm in [80, 90] {
                let ptx = emit(&t, &PtxTarget::from_compute_capability(sm / 10, sm % 10))
                    .unwrap_or_else(|e| panic!("{label}: emitting PTX for sm_{sm}: {e}"));
                if let Some((registers, spilled)) = support::ptxas_resources(&ptx, sm) {
                    println!(
                        "{label}, {num_warps} warps, {}, sm_{sm}: {registers} registers, {spilled} bytes spilled, {} bytes shared",
                        if aligned { "aligned" } else { "unaligned" },
                        t.shared_bytes()
                    );
                }
                last = ptx;
            }
        }
    }
    last
}

fn check(label: &str, kernel: &Kernel, warps: &[u32]) -> String {
    check_on(label, kernel, warps, |w| Target::nvidia(w, 48 * 1024))
}

#[test]
fn layer_norm_passes_ptxas() {
    for (n, dtype) in [(781, F16), (4096, F16), (8192, F16), (16384, F16), (1000, F32)] {
        let meta = LayerNormMeta::for_row(n, dtype).unwrap();
        let warps = [meta.num_warps()];
        let label = format!("layer norm {n} {dtype}, BLOCK {}", meta.block_size);
        check(
            &format!("{label}, forward"),
            &seeds::layer_norm_forward(&meta).unwrap(),
            &warps,
        );
        // Every count the host code picks through CUDA (`one_pass_launch`: 1 to 8 warps).
        check(
            &format!("{label}, one-pass forward"),
            &seeds::layer_norm_forward_row(&meta).unwrap(),
            &[1, 2, 4, 8],
        );
        check(
            &format!("{label}, one-exchange forward"),
            &seeds::layer_norm_forward_row_one_exchange(&meta).unwrap(),
            &[1, 2, 4, 8],
        );
        // The kernels whose programs walk rows in a pipelined loop (`cp.async` into each
        // thread's own slots from sm_80), on the warps the benchmark sweeps.
        // (The host code launches the two-reduction statistics; the interpreter and the
        // simulator check both.)
        {
            let stats = RowStats::TwoReductions;
            for (stages, params) in [2, 3]
                .into_iter()
                .flat_map(|s| [(s, RowParams::Reloaded), (s, RowParams::Held)])
            {
                let kernel = seeds::layer_norm_forward_rows(&meta, stats, params, stages).unwrap();
                let target = |w| Target {
                    async_copy: true,
                    ..Target::nvidia(w, 227 * 1024)
                };
                check_on(
                    &format!("{label}, row walk {stats:?}, {params:?}, {stages} stages"),
                    &kernel,
                    &[4, 8, 16],
                    target,
                );
                // With 16-byte accesses (aligned rows), the row's loads are copies.
                let spec = Specialization::all(kernel.params.len());
                let t = rutile_ir::lower::lower(&kernel, &target(8), &spec).unwrap();
                let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
                assert!(ptx.contains("cp.async"), "{label}: no cp.async\n{ptx}");
            }
        }
        let bwd = LayerNormBackwardMeta {
            group_size_m: seeds::layer_norm_group_size_m(n),
            block_size_n: meta.block_size,
            dtype,
        };
        let ptx = check(
            &format!("{label}, backward dx"),
            &seeds::layer_norm_backward_dx(&bwd).unwrap(),
            &warps,
        );
        // The lock: a compare-and-swap to take it, an exchange to release it, both with
        // acquire-release semantics so that the partial sums they guard are published.
        assert!(ptx.contains("atom.acq_rel.gpu.global.cas.b32"), "{label}:\n{ptx}");
        assert!(ptx.contains("atom.acq_rel.gpu.global.exch.b32"), "{label}:\n{ptx}");
        let dwdb = seeds::layer_norm_backward_dwdb(32, 128, dtype).unwrap();
        check(&format!("{label}, backward dw db"), &dwdb, &[4]);
    }
}

/// The one-pass layer norm at 16384 columns as the CUDA host code launches it (8 warps,
/// at most 128 registers a thread: `ONE_PASS_WIDE_MAXNREG` in the tutorials, two programs
/// a multiprocessor). Since the masked loads' scratch registers are zeroed before the load
/// (`memory.rs`), `ptxas` fits it in 128 on its own (110 with `ptxas` 12.9, where it took 202,
/// and 136 bytes of spills under the limit of 128);
/// a tighter limit reaches the PTX as `.maxnreg`, and `ptxas` keeps to it.
#[test]
fn wide_one_pass_layer_norm_keeps_to_its_register_limit() {
    let meta = LayerNormMeta::for_row(16384, F16).unwrap();
    let kernel = seeds::layer_norm_forward_row(&meta).unwrap();
    let spec = Specialization::all(kernel.params.len());
    let t = rutile_ir::lower::lower(&kernel, &Target::nvidia(8, 48 * 1024), &spec).unwrap();
    for limit in [None, Some(96)] {
        let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0).max_registers(limit)).unwrap();
        assert_eq!(ptx.contains("\n.maxnreg 96\n"), limit.is_some(), "{limit:?}");
        if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
            println!("one-pass layer norm 16384 f16, 8 warps, maxnreg {limit:?}, sm_90: {registers} registers, {spilled} bytes spilled");
            match limit {
                Some(l) => assert!(registers <= l, "{registers} registers over the limit {l}"),
                None => assert!(registers <= 128, "{registers} registers: one program a multiprocessor"),
            }
        }
    }
}

#[test]
fn long_row_kernels_pass_ptxas() {
    let meta = LongRowMeta::default();
    let warps = [meta.num_warps, 4];
    for ieee_rounding in [true, false] {
        let options = SoftmaxOptions {
            ieee_rounding,
            ..SoftmaxOptions::default()
        };
        let kernel = seeds::softmax_long(meta.block_size, options).unwrap();
        let ptx = check(
            &format!("long-row softmax, ieee division {ieee_rounding}"),
            &kernel,
            &warps,
        );
        // The second walk's loads, the row's last reads, are read-once.
        assert!(ptx.contains("ld.global.cs"), "{ptx}");
    }
    for dtype in [F16, F32] {
        let kernel = seeds::layer_norm_long(&LayerNormMeta {
            block_size: meta.block_size,
            dtype,
        })
        .unwrap();
        let ptx = check(&format!("long-row layer norm {dtype}"), &kernel, &warps);
        assert!(ptx.contains("ld.global.cs"), "{ptx}");
        no_spills(&format!("long-row layer norm {dtype}"), &kernel, meta.num_warps);
    }
    let kernel = seeds::softmax_long(meta.block_size, SoftmaxOptions::default()).unwrap();
    no_spills("long-row softmax", &kernel, meta.num_warps);
    // The host code's warps for it (`LONG_ROW_SOFTMAX_WARPS`).
    no_spills("long-row softmax on 32 warps", &kernel, 32);
    // Rows of up to 32768 f32 columns, which the host code holds in the registers of one
    // 32-warp program (`REGISTER_ROW_MAX` in `examples/tutorials/long_rows.rs`): 32 elements
    // a thread within the 64 registers a thread of a 1024-thread program may have.
    let options = SoftmaxOptions {
        ieee_rounding: false,
        ..SoftmaxOptions::default()
    };
    let kernel = seeds::softmax_with(32768, options).unwrap();
    no_spills("softmax of 32768 columns in registers", &kernel, 32);
}

/// Fails when `kernel`, lowered for `num_warps` with aligned arguments, spills on sm_90
/// (the running statistics of 16 elements a thread fit in registers).
fn no_spills(label: &str, kernel: &Kernel, num_warps: u32) {
    let spec = Specialization::all(kernel.params.len());
    let t = rutile_ir::lower::lower(kernel, &Target::nvidia(num_warps, 48 * 1024), &spec).unwrap();
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
    if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
        assert_eq!(spilled, 0, "{label}: {registers} registers, {spilled} bytes spilled");
    }
}

/// An H100 as the CUDA backend lowers for it: tensor cores, operand loads pipelined over
/// `num_stages` shared buffers, 227 KiB of shared memory a program.
fn h100(num_warps: u32, num_stages: u32) -> Target {
    Target {
        mma_sync: true,
        wgmma: true,
        tma: true,
        async_copy: true,
        num_stages,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

/// The target the CUDA runtime lowers a warp-specialized attention launch for on an H100 or
/// H200 (`runtime/src/backends/cuda.rs`): K and V through TMA across heads, and for one
/// program a block the output stored through TMA across heads too, with, on a persistent
/// grid, the producer copying the last values loaded ahead with `Q`.
fn cuda_specialized(num_warps: u32, num_stages: u32, programs_per_block: u32, persistent: bool) -> Target {
    Target {
        tma_outer: true,
        warp_specialize: true,
        tma_store_outer: programs_per_block <= 1,
        tma_staged_after: persistent,
        programs_per_block,
        persistent,
        ..h100(num_warps, num_stages)
    }
}

/// Every configuration the attention tutorial's autotuner may pick on CUDA (its list in
/// `examples/tutorials/attention/forms.rs`: blocks, warps, stages), both head dimensions, causal
/// in two stages and in one masked walk, and not: lowered with aligned arguments (the
/// tutorial's contiguous tensors) and assembled for sm_90; the tutorial's first
/// configuration also unaligned and for sm_80.
#[test]
fn attention_passes_ptxas() {
    let configs = [
        (128, 64, 8, 2),
        (128, 128, 8, 2),
        (128, 128, 8, 3),
        (128, 64, 8, 4),
        (128, 64, 8, 3),
        (128, 32, 8, 3),
        (64, 128, 4, 2),
        (64, 128, 4, 3),
        (64, 64, 4, 3),
        (64, 32, 4, 3),
        (32, 32, 4, 2),
        (16, 16, 4, 1),
    ];
    for head_dim in [64, 128] {
        for (causal, split_diagonal) in [(false, true), (true, true), (true, false)] {
            for (i, &(block_m, block_n, warps, stages)) in configs.iter().enumerate() {
                if causal && split_diagonal && block_m % block_n != 0 {
                    // Refused by the builder (the diagonal is walked in whole key blocks);
                    // the autotuner skips such configurations.
                    continue;
                }
                let meta = AttentionMeta {
                    split_diagonal,
                    ..AttentionMeta::fp16(block_m, block_n, head_dim, causal)
                };
                let kernel = seeds::attention_forward(&meta).unwrap();
                let label = format!(
                    "attention d {head_dim}, causal {causal}, split {split_diagonal}, {block_m}x{block_n}, {stages} stages"
                );
                let ptx = if i == 0 {
                    // (`mma.sync`, which sm_80 has too.)
                    check_on(&label, &kernel, &[warps], |w| Target {
                        wgmma: false,
                        tma: false,
                        ..h100(w, stages)
                    })
                } else {
                    assemble_aligned_sm90(&label, &kernel, &h100(warps, stages))
                };
                // Warpgroup MMAs where the block is whole m64 tiles (`P V` then reads `P` from
                // registers: an A operand in braces, not a descriptor), `mma.sync` elsewhere.
                let wgmmas: Vec<&str> = ptx.lines().filter(|l| l.contains("wgmma.mma_async")).collect();
                if block_m >= 64 && i != 0 {
                    assert!(!wgmmas.is_empty(), "{label}: no wgmma");
                    assert!(
                        wgmmas.iter().any(|l| l.contains("}, {%r")),
                        "{label}: no wgmma with A in registers"
                    );
                } else {
                    assert!(
                        !wgmmas.is_empty() || ptx.contains("mma.sync.aligned.m16n8k16"),
                        "{label}: no mma"
                    );
                }
                assert!(ptx.contains("ex2.approx"), "{label}: the softmax runs on exp2");
            }
        }
    }
}

/// The walk rotated by one block (`AttentionMeta::rotate`) in the warpgroup configurations
/// the tutorial's autotuner tries on CUDA, at head dimension 64 (the one it is for: at 128
/// the carried `P` costs too many registers, 408 bytes spilled at 128x128), causal and
/// not: `P V` reads `P` from registers and leaves its group in flight
/// (`wgmma.wait_group 1`), and ptxas assembles each for sm_90 without spilling (`cargo
/// test -p rutile-ptx --test tutorials rotated -- --nocapture` prints registers and shared
/// memory).
#[test]
fn rotated_attention_passes_ptxas_without_spills() {
    let head_dim = 64;
    for causal in [false, true] {
        for (block_m, block_n, warps, stages) in [(128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3), (64, 64, 4, 3)] {
            if causal && block_m % block_n != 0 {
                continue; // refused by the builder, skipped by the autotuner
            }
            let meta = AttentionMeta {
                rotate: true,
                ..AttentionMeta::fp16(block_m, block_n, head_dim, causal)
            };
            let kernel = seeds::attention_forward(&meta).unwrap();
            let label =
                format!("rotated attention d {head_dim}, causal {causal}, {block_m}x{block_n}, {stages} stages");
            let spec = Specialization {
                equal_to_1: kernel
                    .params
                    .iter()
                    .map(|p| ["stride_qk", "stride_kk", "stride_vn", "stride_on"].contains(&p.name.as_str()))
                    .collect(),
                ..Specialization::all(kernel.params.len())
            };
            let t = rutile_ir::lower::lower(&kernel, &h100(warps, stages), &spec)
                .unwrap_or_else(|e| panic!("lowering {label}: {e}"));
            let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap();
            assert!(
                ptx.contains("wgmma.wait_group.sync.aligned 1"),
                "{label}: nothing in flight"
            );
            assert!(
                ptx.lines()
                    .any(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")),
                "{label}: no wgmma with A in registers"
            );
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                println!(
                    "{label}, {warps} warps, sm_90: {registers} registers, {spilled} bytes spilled, {} bytes shared",
                    t.shared_bytes()
                );
                assert_eq!(spilled, 0, "{label}: {registers} registers, {spilled} bytes spilled");
            }
        }
    }
}

/// `kernel` lowered for `target` with every argument aligned and the strides along the head
/// dimension 1 (as the runtime specializes the tutorial's contiguous tensors), assembled for
/// sm_90 (its registers and spills printed); returns the PTX.
fn assemble_aligned_sm90(label: &str, kernel: &Kernel, target: &Target) -> String {
    assemble_aligned_for(label, kernel, target, &PtxTarget::from_compute_capability(9, 0))
}

/// [`assemble_aligned_sm90`] for `ptx_target` (an sm_90 one with other choices).
fn assemble_aligned_for(label: &str, kernel: &Kernel, target: &Target, ptx_target: &PtxTarget) -> String {
    let t = rutile_ir::lower::lower(kernel, target, &aligned_spec(kernel))
        .unwrap_or_else(|e| panic!("lowering {label}: {e}"));
    let ptx = emit(&t, ptx_target).unwrap_or_else(|e| panic!("{label}: {e}"));
    // For reading what a configuration compiles to: each kernel's PTX into that folder.
    if let Ok(dir) = std::env::var("RUTILE_PTX_DIR") {
        let name: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::fs::write(format!("{dir}/{name}.ptx"), &ptx).unwrap();
    }
    if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
        println!(
            "{label}, {} warps, sm_90: {registers} registers, {spilled} bytes spilled, {} bytes shared",
            target.num_warps,
            t.shared_bytes()
        );
    }
    ptx
}

/// Every argument of attention's `kernel` aligned, and its unit strides equal to 1.
fn aligned_spec(kernel: &Kernel) -> Specialization {
    let unit = ["stride_qk", "stride_kk", "stride_vn", "stride_on"];
    Specialization {
        equal_to_1: kernel.params.iter().map(|p| unit.contains(&p.name.as_str())).collect(),
        ..Specialization::all(kernel.params.len())
    }
}

/// `kernel` lowered for an sm_90 GPU in clusters of `cluster` programs of `warps` warps
/// (with aligned arguments), and its PTX; `ptxas`, where present, must assemble it without
/// spills.
fn cluster_ptx(label: &str, kernel: &Kernel, cluster: u32, warps: u32) -> (rutile_ir::thread::ThreadKernel, String) {
    let target = Target {
        cluster,
        ..Target::nvidia(warps, 227 * 1024)
    };
    let spec = Specialization::all(kernel.params.len());
    let t = rutile_ir::lower::lower(kernel, &target, &spec).unwrap_or_else(|e| panic!("lowering {label}: {e}"));
    let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap_or_else(|e| panic!("{label}: {e}"));
    if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
        println!("{label}, {cluster} programs of {warps} warps, sm_90: {registers} registers, {spilled} bytes spilled");
        assert_eq!(
            spilled, 0,
            "{label}, cluster {cluster}: {registers} registers, {spilled} bytes spilled"
        );
    }
    (t, ptx)
}

/// The softmax whose rows are shared by the programs of a thread-block cluster
/// (`seeds::softmax_cluster`): 32 columns a thread (2 programs of 32 warps), and 64 on the
/// clusters and warps the tutorial's host code launches rows of 65536 to 262144 columns
/// with (4 to 16 programs of 8 warps, 16 being Hopper's largest cluster). Its programs meet through each
/// other's shared memory (`mapa`, `st.shared::cluster`, the cluster barrier), the launch
/// groups them by the kernel's `.reqnctapercluster`, and `ptxas` assembles it for sm_90
/// without spills. Without a cluster the op is its operand; before sm_90 it is an error.
#[test]
fn cluster_softmax_passes_ptxas() {
    let options = SoftmaxOptions {
        ieee_rounding: false,
        ..SoftmaxOptions::default()
    };
    for (cluster, block, warps) in [
        (1, 32768, 32),
        (2, 32768, 32),
        (4, 16384, 8),
        (8, 16384, 8),
        (16, 16384, 8),
    ] {
        let kernel = seeds::softmax_cluster(block, cluster, options).unwrap();
        let (t, ptx) = cluster_ptx("cluster softmax", &kernel, cluster, warps);
        let needles = [
            format!(".reqnctapercluster {cluster}, 1, 1"),
            "mapa.shared::cluster.u32".to_string(),
            "st.shared::cluster.f32".to_string(),
            "barrier.cluster.arrive.release.aligned".to_string(),
            "barrier.cluster.wait.acquire.aligned".to_string(),
        ];
        for needle in &needles {
            assert_eq!(
                ptx.contains(needle.as_str()),
                cluster > 1,
                "cluster {cluster}: {needle}\n{ptx}"
            );
        }
        if cluster > 1 {
            // One exchange of the pair (maximum, sum): an arrive before the row's loads
            // whose wait comes before the pair's two stores, and a whole barrier after them.
            assert_eq!(ptx.matches("barrier.cluster.arrive").count(), 2, "{ptx}");
            assert_eq!(ptx.matches("barrier.cluster.wait").count(), 2, "{ptx}");
            assert_eq!(ptx.matches("st.shared::cluster.f32").count(), 2, "{ptx}");
            let arrive = ptx.find("barrier.cluster.arrive");
            assert!(arrive < ptx.find("ld.global"), "{ptx}");
            let e = emit(&t, &PtxTarget::from_compute_capability(8, 0))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("sm_90") && e.contains(&format!("cluster of {cluster}")),
                "{e}"
            );
        }
    }
}

/// The cluster softmax whose clusters walk rows (`seeds::softmax_cluster_rows`), on the
/// host code's shapes (shares of 32768 columns, 64 a thread, on 16 warps) and the one-row
/// clusters' (16384 on 8 warps), 2 stages: with asynchronous copies (sm_90) each program's share of the next row
/// is copied ahead by `cp.async` inside the loop that exchanges the rows' statistics
/// through the cluster, its exponentials are one `ex2` each, and `ptxas` assembles it without
/// spills at every cluster size the host code picks (and prints what it takes under the 128
/// registers that let two programs share a multiprocessor).
#[test]
fn cluster_row_walk_passes_ptxas() {
    let options = SoftmaxOptions {
        ieee_rounding: false,
        ..SoftmaxOptions::default()
    };
    // Every cluster the host code's walk takes (shares of 32768 columns on 16 warps, 2 to 16
    // programs), and the one-row clusters' shares.
    let host = (2..=16).map(|c| (c, 32768, 16));
    for (cluster, block, warps) in host.chain([(4, 16384, 8), (16, 16384, 8)]) {
        for stages in [2] {
            let kernel = seeds::softmax_cluster_rows(block, cluster, stages, options).unwrap();
            let target = Target {
                cluster,
                async_copy: true,
                ..Target::nvidia(warps, 227 * 1024)
            };
            let label = format!("cluster row walk, share {block}, {stages} stages");
            let spec = Specialization::all(kernel.params.len());
            let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("{label}: {e}"));
            let ptx = emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap_or_else(|e| panic!("{label}: {e}"));
            for needle in [
                "cp.async",
                "st.shared::cluster.f32",
                "barrier.cluster.wait.acquire.aligned",
            ] {
                assert!(ptx.contains(needle), "{label}, cluster {cluster}: no {needle}\n{ptx}");
            }
            // Every exponential is one `ex2` (`exp2` of `(x - max)·log2 e`), none the
            // corrected `exp` (`testp.finite` is its last step), which costs 5 to 8 points of
            // the copy ceiling on an H200 where it stands in for the share's.
            let per_thread = block / (warps * 32);
            let ex2 = ptx.matches("ex2.approx.ftz.f32").count() as u32;
            let corrected = ptx.matches("testp.finite.f32").count() as u32;
            assert!(
                ex2 >= per_thread && corrected == 0,
                "{label}, cluster {cluster}: {ex2} ex2.approx.ftz for {per_thread} elements a thread, \
                 {corrected} corrected exp"
            );
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                println!(
                    "{label}, {cluster} programs of {warps} warps, sm_90: {registers} registers, {spilled} bytes \
                     spilled, {} bytes shared",
                    t.shared_bytes()
                );
                // `ptxas` 12.9 keeps 8 bytes of the fold of 11 to 14 programs' pairs in local
                // memory (every size from 3 up but 4, 8 and 15 spilled 16 to 32 bytes before
                // the rank was taken once and the combine's exponentials became `ex2`s).
                let allowed = if (11..=14).contains(&cluster) { 8 } else { 0 };
                assert!(
                    spilled <= allowed,
                    "{label}, cluster {cluster}: {registers} registers, {spilled} bytes spilled"
                );
            }
            // Under the limit that lets two programs share a multiprocessor (what the one
            // stage's 64 KB of shared memory leaves room for).
            let capped = PtxTarget {
                max_registers: Some(128),
                ..PtxTarget::from_compute_capability(9, 0)
            };
            let ptx = emit(&t, &capped).unwrap_or_else(|e| panic!("{label}: {e}"));
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                println!("{label}, {cluster} programs of {warps} warps, at most 128 registers: {registers}, {spilled} bytes spilled");
            }
        }
    }
}

/// A cluster outside 1..=16, larger than a program's threads, or with a persistent grid,
/// is a configuration error.
#[test]
fn cluster_sizes_are_checked() {
    let kernel = seeds::softmax_cluster(1024, 2, SoftmaxOptions::default()).unwrap();
    let spec = Specialization::all(kernel.params.len());
    let few = Target {
        cluster: 16,
        ..Target::vulkan(8, 1, 48 * 1024)
    };
    let e = rutile_ir::lower::lower(&kernel, &few, &spec).unwrap_err().to_string();
    assert!(e.contains("needs at least as many threads a program"), "{e}");
    for (cluster, persistent, expected) in [(0, false, "1 to 16"), (17, false, "1 to 16"), (2, true, "persistent")] {
        let target = Target {
            cluster,
            persistent,
            ..Target::nvidia(4, 48 * 1024)
        };
        let e = rutile_ir::lower::lower(&kernel, &target, &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "cluster {cluster}, persistent {persistent}: {e}");
    }
}

/// The layer norm whose rows the programs of a cluster share (`seeds::layer_norm_cluster`),
/// fp16, 32 columns a thread, as the host code launches rows of 32769 to 262144 columns:
/// `ptxas` assembles it for sm_90 without spills.
#[test]
fn cluster_layer_norm_passes_ptxas() {
    for (cluster, block_size, warps) in [(4, 8192, 8), (16, 16384, 16)] {
        let kernel = seeds::layer_norm_cluster(&LayerNormMeta { block_size, dtype: F16 }, cluster).unwrap();
        let (_, ptx) = cluster_ptx("cluster layer norm", &kernel, cluster, warps);
        assert!(ptx.contains(&format!(".reqnctapercluster {cluster}, 1, 1")), "{ptx}");
    }
}

/// `cluster_reduce` of every type and combination it takes (as the conformance matrix runs
/// it: one element a program, clusters of 4) assembles for sm_90.
#[test]
fn cluster_reduce_of_every_type_passes_ptxas() {
    use rutile_ir::ir::ReduceOp;
    use rutile_ir::ScalarType::{F64, I32, I64, U32, U64};
    for t in [I32, I64, U32, U64, F32, F64] {
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            let kernel = Kernel::build("cluster_reduce_one", |k| {
                let x = k.arg_ptr("x", t);
                let out = k.arg_ptr("out", t);
                let pid = k.program_id(0);
                k.store(out + pid, k.load(x + pid).cluster_reduce(op));
            })
            .unwrap();
            let target = Target {
                cluster: 4,
                ..Target::nvidia(4, 48 * 1024)
            };
            let t_kernel = rutile_ir::lower::lower(&kernel, &target, &Specialization::none(2)).unwrap();
            let ptx = emit(&t_kernel, &PtxTarget::from_compute_capability(9, 0)).unwrap();
            support::ptxas_check(&ptx, 90);
        }
    }
}

/// With boxes across a pointer's outer dimensions (`Target::tma_outer`), attention's K and
/// V tiles are 4-D tensor copies (the head offset is two outer dimensions), which `ptxas`
/// assembles for sm_90 without spills at head dimension 64.
#[test]
fn attention_copies_k_and_v_across_heads() {
    for (bm, bn, warps, stages) in [(128, 64, 8, 3), (64, 128, 4, 2)] {
        let kernel = seeds::attention_forward(&AttentionMeta::fp16(bm, bn, 64, false)).unwrap();
        let label = format!("attention across heads, {bm}x{bn}, {stages} stages");
        let target = Target {
            tma_outer: true,
            ..h100(warps, stages)
        };
        let ptx = assemble_aligned_sm90(&label, &kernel, &target);
        assert!(
            ptx.contains("cp.async.bulk.tensor.4d.shared::cluster.global"),
            "{label}:\n{ptx}"
        );
        if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
            assert_eq!(spilled, 0, "{label}");
        }
    }
}

/// With `PtxTarget::pack_before_fence`, the tutorial walk's `P V` group (A from registers)
/// packs P's halves before its `wgmma.fence`, so that no register is written between the
/// fence and the group's commit; without it the packing sits between the MMAs. `ptxas`
/// assembles both (`-- --nocapture` prints their registers and spills, which decide it on
/// a GPU).
#[test]
fn p_packs_before_the_fence_where_asked() {
    let packs_inside_groups = |ptx: &str| {
        let mut inside = false;
        let mut count = 0;
        for line in ptx.lines().map(str::trim) {
            if line.starts_with("wgmma.fence") {
                inside = true;
            } else if line.starts_with("wgmma.commit_group") {
                inside = false;
            } else if inside && line.starts_with("mov.b32") && line.contains('{') {
                count += 1;
            }
        }
        count
    };
    for (bm, bn, d, warps, stages) in [(128, 64, 64, 8, 3), (128, 128, 128, 8, 2)] {
        let kernel = seeds::attention_forward(&AttentionMeta::fp16(bm, bn, d, false)).unwrap();
        let target = h100(warps, stages);
        let sm90 = PtxTarget::from_compute_capability(9, 0);
        let label = format!("attention d{d} {bm}x{bn}, {stages} stages");
        let inline = assemble_aligned_for(&format!("{label}, packed in the group"), &kernel, &target, &sm90);
        let ahead = assemble_aligned_for(
            &format!("{label}, packed before the fence"),
            &kernel,
            &target,
            &sm90.pack_before_fence(true),
        );
        assert!(
            packs_inside_groups(&inline) > 0,
            "{label}: no packing inside a group to move"
        );
        assert_eq!(packs_inside_groups(&ahead), 0, "{label}: packing left inside a group");
        assert!(ahead.contains("wgmma.mma_async"), "{label}");
    }
}

/// With stores across outer dimensions too (`Target::tma_store_outer`), attention's output
/// leaves through 4-D TMA stores (one thread, after the staging tile's fence and barrier)
/// in place of the exchange and 16-byte stores, in the plain and the warp-specialized walk;
/// `ptxas` assembles each for sm_90a without spills (`-- --nocapture` prints registers).
#[test]
fn attention_stores_its_output_across_heads() {
    for (bm, bn, warps, stages, specialize) in [(128, 64, 8, 3, false), (64, 128, 4, 2, false), (128, 128, 8, 2, true)]
    {
        let meta = AttentionMeta {
            rotate: specialize,
            ..AttentionMeta::fp16(bm, bn, 64, false)
        };
        let kernel = seeds::attention_forward(&meta).unwrap();
        let label = format!("attention storing across heads, {bm}x{bn}, {stages} stages, specialized {specialize}");
        let target = Target {
            tma_outer: true,
            tma_store_outer: true,
            warp_specialize: specialize,
            ..h100(warps, stages)
        };
        let ptx = assemble_aligned_sm90(&label, &kernel, &target);
        assert!(
            ptx.contains("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"),
            "{label}:\n{ptx}"
        );
        if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
            println!("{label}: {registers} registers, {spilled} bytes spilled");
            assert_eq!(spilled, 0, "{label}");
        }
    }
}

/// Attention's walk warp-specialized (`Target::warp_specialize`, K and V through TMA across
/// heads) in the configurations `specialized_attention_configs` gives the autotuner through
/// CUDA (head dimension 64, rotated, 8 consumer warps): a producer warpgroup issues the
/// copies, and the two consumer warpgroups take turns at the tensor cores (`bar.sync` on
/// their own barrier before a step's first MMA, `bar.arrive` on the next one's after its
/// last group). `ptxas` assembles each for sm_90a without spills in the walk: what precedes the walk and the kernel's prologue are computed again on
/// each side, so that nothing stays live across the branch in the 168 registers of the
/// kernel's entry, where `ptxas` spilled 490 to 568 bytes at 128 x 128 before (`cargo test
/// -p rutile-ptx --test tutorials specialized -- --nocapture` prints registers and spills).
#[test]
fn specialized_attention_takes_turns() {
    for causal in [false, true] {
        for (bm, bn, stages) in [(128, 128, 2), (128, 128, 3), (128, 64, 2), (128, 64, 3)] {
            let meta = AttentionMeta {
                rotate: true,
                ..AttentionMeta::fp16(bm, bn, 64, causal)
            };
            let kernel = seeds::attention_forward(&meta).unwrap();
            let label = format!("specialized attention, causal {causal}, {bm}x{bn}, {stages} stages");
            let target = cuda_specialized(8, stages, 1, false);
            let ptx = assemble_aligned_sm90(&label, &kernel, &target);
            for want in ["setmaxnreg.inc", "bar.arrive", "cp.async.bulk.tensor.4d"] {
                assert!(ptx.contains(want), "{label}: no {want}");
            }
            // `P V` stays in flight beside the softmax on a ring of 3 stages or more.
            assert_eq!(
                ptx.contains("wgmma.wait_group.sync.aligned 1"),
                stages >= 3,
                "{label}: in flight"
            );
            // (With the output stored through TMA, as the runtime launches it, `ptxas` 12.9
            // keeps three values of the non-causal 128 x 64 on two stages in local memory
            // across the walk: three stores before its loop, three loads after, 24 bytes.)
            let allowed = if (causal, bn, stages) == (false, 64, 2) { 24 } else { 0 };
            if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
                assert!(spilled <= allowed, "{label}: {spilled} bytes spilled");
            }
        }
    }
}

/// The 128-row ping-pong at head dimension 128, in the configurations
/// `head_128_specialized_attention_configs` gives the autotuner, causal or not, for whole
/// key blocks (as the host code launches it at lengths that are multiples of them) and any
/// length, causal with its programs in the tutorial's order or longest first, and on a
/// persistent grid on whole blocks (`persistent_head_128_specialized_attention_configs`):
/// each runs on a TMA-fed ring, the rotated walks taking turns, lowered as the CUDA runtime
/// launches it (the output through TMA stores across heads). Without the mask on whole
/// blocks none spills, persistent or not (`ptxas` 12.9); where it is causal or ragged the
/// rotated walk on 128-key blocks spills 560–568 bytes (224 with the output exchanged
/// instead; on an H200 the causal ping-pong measured within 1.2% either way from 4096
/// tokens and 3–5% faster with the TMA store at 1024), printed here.
#[test]
fn head_128_ping_pong_assembles() {
    let configs = [
        (128, 128, 2, true),
        (128, 128, 2, false),
        (128, 64, 2, true),
        (128, 64, 3, true),
        (128, 64, 2, false),
        (128, 64, 3, false),
    ];
    // (Causal or ragged, a persistent grid fits only 128 x 64 on two stages unrotated:
    // `persistent_head_128_specialized_attention_configs`.)
    let forms = [
        (false, true, false),
        (false, false, false),
        (true, true, false),
        (true, false, false),
    ];
    for (causal, whole, persistent) in forms.into_iter().chain([(false, true, true)]) {
        for (bm, bn, stages, rotate) in configs {
            // (Causal walks have no whole-blocks form: their second pass starts the
            // programs longest first instead.)
            let longest_first = causal && !whole;
            let meta = AttentionMeta {
                rotate,
                whole_key_blocks: whole && !causal,
                longest_first,
                ..AttentionMeta::fp16(bm, bn, 128, causal)
            };
            let kernel = seeds::attention_forward(&meta).unwrap();
            let label = format!(
                "head 128 ping-pong, causal {causal}, whole blocks {whole}, longest first {longest_first}, {bm}x{bn}, \
                     {stages} stages, rotate {rotate}, persistent {persistent}"
            );
            let target = cuda_specialized(8, stages, 1, persistent);
            let ptx = assemble_aligned_sm90(&label, &kernel, &target);
            for want in ["setmaxnreg.inc", "cp.async.bulk.tensor.4d"] {
                assert!(ptx.contains(want), "{label}: no {want}");
            }
            // The rotated walks take turns (a named barrier's arrive).
            assert!(!rotate || ptx.contains("bar.arrive"), "{label}: no turns");
            if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
                if whole && !causal {
                    assert_eq!(spilled, 0, "{label}: {spilled} bytes spilled");
                }
            }
        }
    }
}

/// Several programs of 64 query rows a thread block sharing one producer warpgroup
/// (`Target::programs_per_block`) in the configurations `block_programs_attention_configs`
/// gives the autotuner (head dimension 64, rotated, without the causal mask), for any
/// length and for whole key blocks (`AttentionMeta::whole_key_blocks`). Two programs a
/// block (the consumers at 232 registers) assemble for sm_90a without spills. Three
/// (FlashAttention-3's three consumer warpgroups) get the 160 registers each that the
/// register file leaves beside a producer at 32: the walk's loop fits them; with the
/// ragged walk `ptxas` spills outside it (600 bytes at 64 x 128 and 2 stages with `ptxas`
/// 12.9), without it nothing but at 64 x 128 and 3 stages (48 bytes), which this prints and
/// docs/performance.md explains. The same on a persistent grid
/// (`persistent_block_programs_attention_configs`), whole key blocks, as the benchmark runs
/// them ("Past 60% in the compiler"; `cargo test -p rutile-ptx
/// --test tutorials programs_a_block -- --nocapture`, and `RUTILE_PTX_DIR=DIR` to read the
/// PTX).
#[test]
fn programs_a_block_assemble() {
    let configs = [(2, 128, 2), (2, 128, 3), (3, 128, 2), (3, 128, 3), (3, 64, 3)];
    let persistent = [(2, 128, 2), (3, 128, 2), (3, 128, 3), (3, 64, 3)]
        .map(|c| (c, true, true))
        .into_iter()
        .chain([((2, 128, 2), false, true)]);
    let plain = configs.into_iter().flat_map(|c| [(c, false, false), (c, true, false)]);
    for ((programs, bn, stages), whole, persistent) in plain.chain(persistent) {
        let meta = AttentionMeta {
            rotate: true,
            whole_key_blocks: whole,
            ..AttentionMeta::fp16(64, bn, 64, false)
        };
        let kernel = seeds::attention_forward(&meta).unwrap();
        let label = format!(
            "{programs} programs a block, 64x{bn}, {stages} stages, whole blocks {whole}, persistent {persistent}"
        );
        let target = Target {
            tma_outer: true,
            warp_specialize: true,
            programs_per_block: programs,
            persistent,
            ..h100(4, stages)
        };
        let ptx = assemble_aligned_sm90(&label, &kernel, &target);
        let (consumers, producer) = if programs == 3 { (160, 32) } else { (232, 40) };
        for want in [
            format!("setmaxnreg.inc.sync.aligned.u32 {consumers}"),
            format!("setmaxnreg.dec.sync.aligned.u32 {producer}"),
            "bar.arrive".to_string(),
        ] {
            assert!(ptx.contains(&want), "{label}: no {want}");
        }
        if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
            if programs == 2 || (whole && !persistent && (bn, stages) != (128, 3)) {
                assert_eq!(spilled, 0, "{label}: {spilled} bytes spilled");
            }
            // Three programs on a persistent grid spill a little, in each tile's start and
            // end (248, 164 and 68 bytes with `ptxas` 12.9; 100, 76 and 28 with 13.0); 892
            // before the masked loads' scratch registers were zeroed (`memory.rs`).
            if persistent {
                assert!(spilled <= 256, "{label}: {spilled} bytes spilled");
            }
        }
    }
}

/// The rotated walk carries P into its next step as the A operand of `P V`: the PTX keeps
/// each pair of P's f16 halves in one 32-bit register, packed where the walk sets P, and the
/// `P V` MMAs of the walk read those registers (`pairs.rs`; before, each half held a
/// register of its own and the pairs were packed between the MMAs, after their
/// `wgmma.fence`, where `ptxas` injects a `warpgroup.arrive` before each). Where P comes
/// from casts in the same step (the tutorial's order, and the rotated kernel's ragged last
/// block) it is packed at the MMAs as before. `ptxas` then gives the rotated walk fewer
/// registers: 236 at 128 x 128 on 8 warps, where it needed 255.
#[test]
fn carried_p_stays_packed() {
    for rotate in [true, false] {
        let meta = AttentionMeta {
            rotate,
            ..AttentionMeta::fp16(128, 128, 64, false)
        };
        let kernel = seeds::attention_forward(&meta).unwrap();
        let label = format!("attention, rotate {rotate}");
        let ptx = assemble_aligned_sm90(&label, &kernel, &h100(8, 3));
        // The same PTX every time (the pairs are numbered in register order).
        assert!(
            ptx == assemble_aligned_sm90(&label, &kernel, &h100(8, 3)),
            "{label}: PTX differs between compilations"
        );
        let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
        let (mut ahead, mut at_mma) = (0, 0);
        for (i, l) in lines.iter().enumerate() {
            if !(l.starts_with("wgmma.mma_async") && l.contains("}, {%r")) {
                continue;
            }
            let a = &l[l.find("}, {%r").unwrap() + 3..];
            let a: Vec<&str> = a[1..a.find('}').unwrap()].split(", ").collect();
            let fence = lines[..i].iter().rposition(|l| l.starts_with("wgmma.fence")).unwrap();
            // Where each register of A was last packed from two halves before this MMA.
            let packed: Vec<usize> = a
                .iter()
                .map(|reg| {
                    let pack = format!("mov.b32 {reg}, {{%h");
                    lines[..i]
                        .iter()
                        .rposition(|l| l.starts_with(&pack))
                        .unwrap_or_else(|| panic!("{label}: {reg} is not packed from halves"))
                })
                .collect();
            if packed.iter().all(|&p| p < fence) {
                ahead += 1;
            } else if packed.iter().all(|&p| p > fence) {
                at_mma += 1;
            } else {
                panic!("{label}: `{l}` reads pairs packed on both sides of its fence");
            }
        }
        // The walk's `P V` (8 MMAs a step) and the last block's after it read P packed ahead.
        assert_eq!(ahead >= 16, rotate, "{label}: {ahead} MMAs read P packed ahead");
        assert!(at_mma >= 8, "{label}: {at_mma} MMAs pack P at the MMA");
    }
}

/// Some of attention's `exp2`s on the FMA units (`Target::exp2_on_fma`): the polynomial's
/// rounding constant (1.5 * 2^23) appears beside the remaining `ex2.approx`, and `ptxas` assembles the
/// configurations the tutorial's host code lists at head dimension 64 for sm_90a without
/// spills (`-- --nocapture` prints registers beside those without).
#[test]
fn attention_takes_some_exp2_on_the_fma_units() {
    for (bm, bn, warps, stages, tma_outer) in [(64, 128, 4, 2, true), (128, 64, 8, 4, false), (128, 64, 8, 3, false)] {
        let kernel = seeds::attention_forward(&AttentionMeta::fp16(bm, bn, 64, false)).unwrap();
        for share in [0, 1, 2, 3] {
            let label = format!("attention {bm}x{bn}, {warps} warps, {stages} stages, {share} of 8 exp2 on FMAs");
            let target = Target {
                tma_outer,
                exp2_on_fma: share,
                ..h100(warps, stages)
            };
            let ptx = assemble_aligned_sm90(&label, &kernel, &target);
            assert!(ptx.contains("ex2.approx"), "{label}: no ex2 left");
            assert_eq!(
                ptx.contains("0f4B400000"),
                share > 0,
                "{label}: the polynomial's rounding constant"
            );
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                println!("{label}: {registers} registers, {spilled} bytes spilled");
                assert_eq!(spilled, 0, "{label}");
            }
        }
    }
}

/// The one-warpgroup attention program of the benchmark's `tma_heads_capped` line
/// (`capped_tma_heads_attention_configs`: head dimension 64, 64 x 128 on 2 stages, K and V
/// through TMA across heads) at 168 registers a thread: `ptxas` assembles it for sm_90a
/// without spilling, so that three share a multiprocessor (`-- --nocapture` prints
/// registers uncapped and capped).
#[test]
fn one_warpgroup_attention_fits_168_registers() {
    for (bn, stages) in [(128, 2)] {
        let kernel = seeds::attention_forward(&AttentionMeta::fp16(64, bn, 64, false)).unwrap();
        let target = Target {
            tma_outer: true,
            ..h100(4, stages)
        };
        for cap in [None, Some(168)] {
            let label = format!("attention 64x{bn}, {stages} stages, across heads, maxnreg {cap:?}");
            let ptx = assemble_aligned_for(
                &label,
                &kernel,
                &target,
                &PtxTarget::from_compute_capability(9, 0).max_registers(cap),
            );
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
                println!("{label}: {registers} registers, {spilled} bytes spilled");
                if cap.is_some() {
                    assert!(registers <= 168, "{label}: {registers} registers");
                    assert_eq!(spilled, 0, "{label}");
                }
            }
        }
    }
}

/// The rotated walk's last values loaded ahead of it (`AttentionMeta::last_values_ahead`,
/// `with_last_values_ahead` of the tutorial's lists) in the configurations the benchmark's
/// `_ahead` lines give the autotuner: three and two programs a block at head dimension 64,
/// the ping-pong at 128, whole key blocks and a ragged last one. `ptxas` assembles each for
/// sm_90a, with whole key blocks spilling no more than the same configuration loading them
/// after the walk (`-- --nocapture` prints registers, spills and shared memory, both ways).
#[test]
fn the_last_values_ahead_assemble() {
    let blocks = [(2, 128, 2), (2, 128, 3), (3, 128, 2), (3, 128, 3), (3, 64, 3)].map(|(p, bn, s)| (p, 64, bn, s, 64));
    let ping_pong = [(128, 128, 2), (128, 64, 2), (128, 64, 3)].map(|(bm, bn, s)| (1, bm, bn, s, 128));
    for ((programs, bm, bn, stages, d), whole) in blocks
        .into_iter()
        .chain(ping_pong)
        .flat_map(|c| [(c, true), (c, false)])
    {
        let mut spills = Vec::new();
        for ahead in [false, true] {
            let meta = AttentionMeta {
                rotate: true,
                last_values_ahead: ahead,
                whole_key_blocks: whole,
                ..AttentionMeta::fp16(bm, bn, d, false)
            };
            let kernel = seeds::attention_forward(&meta).unwrap();
            let label = format!(
                "head {d}, {programs} programs a block, {bm}x{bn}, {stages} stages, whole blocks {whole}, ahead {ahead}"
            );
            let target = cuda_specialized(if programs == 1 { 8 } else { 4 }, stages, programs, false);
            // (A configuration beyond shared memory is refused, as the autotuner skips it.)
            if let Err(e) = rutile_ir::lower::lower(&kernel, &target, &aligned_spec(&kernel)) {
                println!("{label}: {e}");
                continue;
            }
            let ptx = assemble_aligned_sm90(&label, &kernel, &target);
            if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
                spills.push(spilled);
            }
        }
        // (With the ragged walk after it, three programs a block spill either way, in that
        // walk: 600 bytes after, 824 ahead at 64 x 128 on 2 stages, `ptxas` 12.9.)
        if let (&[before, ahead], true) = (&spills[..], whole) {
            assert!(ahead <= before, "{programs} programs, {bm}x{bn}, {stages} stages, head {d}, whole {whole}: {ahead} bytes spilled ahead, {before} after");
        }
    }
}

/// The rotated ping-pong on a persistent grid with the walk's last values loaded ahead
/// (`AttentionMeta::last_values_ahead`) and copied by the producer with `Q`
/// (`Target::tma_staged_after`), as the benchmark's `_persistent_pingpong_ahead` line runs
/// it (whole key blocks, no mask), in the configurations of
/// `persistent_specialized_attention_configs` (head dimension 64) and the rotated ones of
/// `persistent_head_128_specialized_attention_configs`: each fits shared memory (at head
/// dimension 128 and 128 x 128, 231408 bytes, as with the consumers loading the last values
/// ahead or after the walk, into the same buffer) and none spills
/// (`ptxas` 12.9; printed with `-- --nocapture`).
#[test]
fn persistent_ping_pong_with_the_last_values_copied_assembles() {
    let configs = [(64, 128, 128, 2), (64, 128, 128, 3), (64, 128, 64, 2), (64, 128, 64, 3)]
        .into_iter()
        .chain([(128, 128, 64, 2), (128, 128, 64, 3), (128, 128, 128, 2)]);
    for (head_dim, bm, bn, stages) in configs {
        let meta = AttentionMeta {
            rotate: true,
            whole_key_blocks: true,
            last_values_ahead: true,
            ..AttentionMeta::fp16(bm, bn, head_dim, false)
        };
        let kernel = seeds::attention_forward(&meta).unwrap();
        let label = format!("persistent ping-pong, last values copied, head {head_dim}, {bm}x{bn}, {stages} stages");
        let target = cuda_specialized(8, stages, 1, true);
        let ptx = assemble_aligned_sm90(&label, &kernel, &target);
        assert!(ptx.contains("cp.async.bulk.tensor.4d"), "{label}: no TMA copies");
        // The output leaves by TMA stores across heads (`cp.async.bulk.tensor` stores).
        assert!(
            ptx.contains("cp.async.bulk.tensor.4d.global.shared"),
            "{label}: no TMA store"
        );
        if let Some((_, spilled)) = support::ptxas_resources(&ptx, 90) {
            assert_eq!(spilled, 0, "{label}: {spilled} bytes spilled");
        }
    }
}

/// The grouped GEMM tutorial's kernel (a K loop inside the walk over a problem's tiles
/// inside the loop over problems) on the tensor cores: `mma.sync` for sm_80 and `wgmma`
/// for an H100, none spilled. Where the host promises aligned tables
/// (`GroupedMatmulMeta::aligned`, what the host code launches), A's and B's tiles move 16
/// bytes at once; without the promise the offsets loaded from memory could start anywhere,
/// and they move 2 (into registers: at 128 x 128 x 64 on 8 warps that kernel spills, so
/// only the smaller block is checked without it).
#[test]
fn grouped_matmul_runs_on_the_tensor_cores() {
    // The last field: whether the block's stages fit an sm_80's 163 KiB (128 x 256 x 64 on
    // 3 stages takes 176 KiB: Hopper's 227 only).
    let configs = [
        ((64, 64, 32), 4, 3, true, true),
        ((128, 128, 64), 8, 3, true, true),
        ((128, 256, 64), 8, 3, true, false),
        ((64, 64, 32), 4, 3, false, true),
    ];
    for ((bm, bn, bk), warps, stages, aligned, fits_sm80) in configs {
        let meta = seeds::GroupedMatmulMeta::new((bm, bn, bk), aligned);
        let kernel = seeds::grouped_matmul(&meta).unwrap();
        let label = format!("grouped matmul {bm}x{bn}x{bk}, aligned tables {aligned}, {stages} stages");
        let sm80 = |w| Target {
            mma_sync: true,
            async_copy: true,
            num_stages: stages,
            ..Target::nvidia(w, 163 * 1024)
        };
        for (target, sm, instruction) in [
            (&sm80 as &dyn Fn(u32) -> Target, 80, "mma.sync.aligned"),
            (&|w| h100(w, stages), 90, "wgmma.mma_async"),
        ] {
            if sm == 80 && !fits_sm80 {
                continue;
            }
            if sm == 80 {
                // Unaligned arguments too, and the sm_80 kernel assembled for sm_90.
                check_on(&label, &kernel, &[warps], target);
            }
            let spec = Specialization::all(kernel.params.len());
            let t = rutile_ir::lower::lower(&kernel, &target(warps), &spec).unwrap();
            let ptx = emit(&t, &PtxTarget::from_compute_capability(sm / 10, sm % 10)).unwrap();
            if let Ok(dir) = std::env::var("RUTILE_PTX_DIR") {
                let name = format!("grouped_{bm}x{bn}x{bk}_{aligned}_sm{sm}.ptx");
                std::fs::write(std::path::Path::new(&dir).join(name), &ptx).unwrap();
            }
            assert!(ptx.contains(instruction), "{label}, sm_{sm}: no {instruction}");
            let wide = ptx.contains("cp.async.cg.shared.global") || ptx.contains("ld.global.v4");
            assert_eq!(wide, aligned, "{label}, sm_{sm}: 16-byte copies of the tiles");
            if let Some((registers, spilled)) = support::ptxas_resources(&ptx, sm) {
                println!("{label}, {warps} warps, sm_{sm}: {registers} registers, {spilled} bytes spilled");
                assert_eq!(spilled, 0, "{label}, sm_{sm}: spills");
            }
        }
    }
}
