//! The fused attention tutorial on every GPU present (each CUDA GPU and each wgpu adapter,
//! lavapipe included): the tutorial's configurations autotuned, and the forms built beyond
//! them (rotated, warp-specialized, programs sharing a producer, persistent, longest first,
//! TMA across heads), each checked against the CPU reference at ragged sizes, causal and
//! not, at head dimensions 64 and 128 (small sizes on software devices); the forms whose
//! pick would hide a wrong configuration are checked configuration by configuration.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` or
//! `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when `RUTILE_REQUIRE` names a
//! backend without a device that opens.

use rutile::Device;
use rutile_examples::gpus::{check_outcome as check, gpus_under_test as devices, is_fast};
use rutile_examples::tutorials;
use rutile_examples::tutorials::attention::Problem;

/// Fused attention forward on every device, at `(z, h, n_ctx, head_dim)` sizes (`fast`
/// ones too on a hardware device), causal and not, autotuned over `configs(device,
/// causal)`, each checked against the CPU reference; `name` and `seed` tell the runs apart.
fn check_attention(
    name: &str,
    seed: u64,
    sizes: &[(usize, usize, usize, usize)],
    fast: &[(usize, usize, usize, usize)],
    configs: fn(&dyn rutile::Device, bool) -> Vec<rutile::autotune::Config>,
) {
    let (_turn, devices) = devices();
    for d in devices {
        let mut all = sizes.to_vec();
        if is_fast(d.as_ref()) {
            all.extend(fast);
        }
        for (i, &(z, h, n_ctx, head_dim)) in all.iter().enumerate() {
            for causal in [false, true] {
                if configs(d.as_ref(), causal).is_empty() {
                    continue;
                }
                let p = Problem {
                    z,
                    h,
                    n_ctx,
                    head_dim,
                    causal,
                };
                let outcome =
                    tutorials::attention::attention_with(d.as_ref(), p, seed + i as u64, configs(d.as_ref(), causal));
                check(d.as_ref(), &format!("{name} {p}"), outcome);
            }
        }
    }
}

/// Fused attention forward with the walk rotated by one block (`AttentionMeta::rotate`),
/// fp16, head dimension 64, causal and not, at lengths that are not multiples of the blocks
/// and one that is (1024: kernels without the ragged walk), autotuned over the rotated
/// configurations only: whichever one wins is checked.
#[test]
fn gpu_rotated_attention_matches_the_reference() {
    check_attention(
        "rotated attention",
        200,
        &[(1, 2, 100, 64)],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64), (1, 3, 1024, 64)],
        tutorials::attention::rotated_attention_configs,
    );
}

/// Through CUDA, the rotated walk warp-specialized, its two consumer warpgroups taking turns
/// at the tensor cores (`specialized_attention_configs`; none elsewhere), at head dimension
/// 64, causal and not, at lengths that are not multiples of the blocks and at 1024:
/// whichever configuration wins is checked, and every one on its own at 1000 and 1024
/// tokens.
#[test]
fn gpu_specialized_attention_matches_the_reference() {
    check_attention(
        "warp-specialized attention",
        500,
        &[],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64), (1, 3, 1024, 64)],
        tutorials::attention::specialized_attention_configs,
    );
    check_each_attention_config(
        "warp-specialized attention",
        510,
        64,
        tutorials::attention::specialized_attention_configs,
    );
}

/// The 128-row ping-pong at head dimension 128 (rotated or not): autotuned at ragged and
/// whole lengths, and each configuration on its own.
#[test]
fn gpu_head_128_specialized_attention_matches_the_reference() {
    check_attention(
        "warp-specialized attention, head 128",
        540,
        &[],
        &[(1, 2, 1000, 128), (1, 1, 4097, 128), (1, 3, 1024, 128)],
        tutorials::attention::head_128_specialized_attention_configs,
    );
    check_each_attention_config(
        "warp-specialized attention, head 128",
        550,
        128,
        tutorials::attention::head_128_specialized_attention_configs,
    );
}

/// Through CUDA, the head-128 ping-pong on a persistent grid
/// (`persistent_head_128_specialized_attention_configs`), every configuration on its own at
/// 40 heads, where a multiprocessor's block walks two or more query blocks (320 of them on
/// 132 multiprocessors at 1024 tokens), on whole key blocks, ragged and causal. With a
/// ragged last key block or the mask only 128 x 64 on two stages in the tutorial's order
/// fits shared memory (the walks after the specialized one need buffers of their own); the
/// others are refused, saying so.
#[test]
fn gpu_persistent_head_128_ping_pong_matches_the_reference() {
    let (_turn, devices) = devices();
    let mut failed = Vec::new();
    for d in devices {
        for causal in [false, true] {
            let configs = tutorials::attention::persistent_head_128_specialized_attention_configs(d.as_ref(), causal);
            assert_eq!(!configs.is_empty(), d.properties().backend == rutile::Backend::Cuda);
            for (i, c) in configs.into_iter().enumerate() {
                for (h, n_ctx) in [(40, 1024), (40, 1000)] {
                    let p = Problem {
                        z: 1,
                        h,
                        n_ctx,
                        head_dim: 128,
                        causal,
                    };
                    let meta = |k: &str| c.meta.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
                    let fits = meta("BLOCK_N") == Some(64) && meta("ROTATE") == Some(0) && c.num_stages == 2;
                    let refused = (causal || n_ctx % 128 != 0) && !fits;
                    check_alone_or_refused(d.as_ref(), p, &c, 600 + i as u64, refused, &mut failed);
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "persistent head-128 ping-pong failed:\n{}",
        failed.join("\n")
    );
}

/// Through CUDA, the ping-pong on a persistent grid with the rotated walk's last values
/// loaded ahead (`with_last_values_ahead` of `persistent_specialized_attention_configs` and
/// `persistent_head_128_specialized_attention_configs`, the benchmark's
/// `_persistent_pingpong_ahead` line), every configuration on its own at 40 heads of 1024
/// tokens, where each block walks two or more query blocks: the producer copies the last
/// values with `Q` a tile ahead (`Target::tma_staged_after`, on for persistent grids), and
/// the consumers hand the buffers back only after the last `P V` (with
/// `RUTILE_TMA_STAGED_AFTER=0` the consumers load them). Ragged (1000 tokens) or causal, a
/// configuration runs right or is refused for the device's limits.
#[test]
fn gpu_persistent_ping_pong_with_the_last_values_ahead_config_by_config() {
    use tutorials::attention::{
        persistent_head_128_specialized_attention_configs, persistent_specialized_attention_configs,
        with_last_values_ahead,
    };
    let (_turn, devices) = devices();
    let mut failed = Vec::new();
    for d in devices {
        let cuda = d.properties().backend == rutile::Backend::Cuda;
        for (head_dim, causal) in [(64, false), (64, true), (128, false), (128, true)] {
            let configs = match head_dim {
                64 => persistent_specialized_attention_configs(d.as_ref(), causal),
                _ => persistent_head_128_specialized_attention_configs(d.as_ref(), causal),
            };
            let configs = with_last_values_ahead(configs);
            assert_eq!(!configs.is_empty(), cuda);
            for (i, c) in configs.into_iter().enumerate() {
                for n_ctx in [1024, 1000] {
                    let p = Problem {
                        z: 1,
                        h: 40,
                        n_ctx,
                        head_dim,
                        causal,
                    };
                    let seed = 760 + i as u64;
                    match tutorials::attention::attention_with(d.as_ref(), p, seed, vec![c.clone()]) {
                        Ok(o) if o.passed() => println!("{o}"),
                        Err(e) if (causal || n_ctx % 128 != 0) && beyond_the_device(&e) => {
                            println!("{p} on {c:?}: {e}")
                        }
                        Ok(o) => failed.push(format!("{}: {p} on {c:?}: {o}", d.id())),
                        Err(e) => failed.push(format!("{}: {p} on {c:?}: {e}", d.id())),
                    }
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "persistent ping-pong, last values ahead, failed:\n{}",
        failed.join("\n")
    );
}

/// Causal attention with the programs started longest first (the grid's axes swapped,
/// heads first, query blocks from the last; through CUDA by groups of heads where the
/// heads' keys and values exceed the L2 cache): autotuned at ragged and whole lengths and
/// both head dimensions, on every device (the interpreter's and lavapipe's small blocks
/// too), and each configuration on its own at head dimension 64.
#[test]
fn gpu_longest_first_attention_matches_the_reference() {
    check_attention(
        "attention, longest first",
        560,
        &[(1, 3, 300, 64)],
        &[
            (2, 4, 1000, 64),
            (1, 2, 1024, 128),
            (1, 1, 4097, 128),
            (1, 40, 4097, 128),
        ],
        tutorials::attention::longest_first_attention_configs,
    );
    // Through CUDA, 40 heads of 4097 keys at head dimension 128 go by groups of heads
    // (`AttentionMeta::group_heads`; two groups of 20 in an H100's or H200's 50 MB L2
    // cache), the others all together.
    {
        let (_turn, devices) = devices();
        for d in devices {
            let l2 = d.properties().l2_cache_bytes;
            let p = |h, n_ctx, head_dim| Problem {
                z: 1,
                h,
                n_ctx,
                head_dim,
                causal: true,
            };
            let grouped = tutorials::attention::group_heads(&p(40, 4097, 128), l2);
            let kv = 40 * 2 * 4097 * 128 * 2;
            let groups = l2.is_some_and(|l2| l2 < kv);
            assert_eq!(
                groups,
                (1..40).contains(&grouped),
                "{}: {grouped} heads a group",
                d.id()
            );
            assert_eq!(tutorials::attention::group_heads(&p(2, 1024, 128), l2), 0);
        }
    }
    check_each_attention_config(
        "attention, longest first",
        570,
        64,
        tutorials::attention::longest_first_attention_configs,
    );
}

/// Every configuration `configs` gives on its own, causal and not, at 1000 and 1024 tokens
/// of 3 heads of dimension `head_dim` (autotuned among the others, each is checked only where it
/// wins; 1024 is a multiple of every key block, whose kernels have no ragged walk). A
/// configuration beyond the device's limits (shared memory, threads at its registers: the
/// tutorial's 128-row blocks through Vulkan's 48 KiB) is refused by the autotuner, saying
/// so, and left out; at least one must run on each device and problem.
fn check_each_attention_config(
    name: &str,
    seed: u64,
    head_dim: usize,
    configs: fn(&dyn rutile::Device, bool) -> Vec<rutile::autotune::Config>,
) {
    let failed = each_attention_config_on(name, seed, head_dim, configs, |_| true);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// [`check_each_attention_config`] on the devices `on` picks: what failed, each on a line.
fn each_attention_config_on(
    name: &str,
    seed: u64,
    head_dim: usize,
    configs: fn(&dyn rutile::Device, bool) -> Vec<rutile::autotune::Config>,
    on: fn(&dyn rutile::Device) -> bool,
) -> Vec<String> {
    let (_turn, devices) = devices();
    // Every configuration runs; the failures are reported together.
    let mut failed = Vec::new();
    for d in devices.into_iter().filter(|d| on(d.as_ref())) {
        for (causal, n_ctx) in [false, true].into_iter().flat_map(|c| [(c, 1000), (c, 1024)]) {
            let p = Problem {
                z: 1,
                h: 3,
                n_ctx,
                head_dim,
                causal,
            };
            let listed = configs(d.as_ref(), causal);
            let mut ran = 0;
            for (i, c) in listed.iter().enumerate() {
                let outcome = tutorials::attention::attention_with(d.as_ref(), p, seed + i as u64, vec![c.clone()]);
                match outcome {
                    Err(e) if beyond_the_device(&e) => println!("{}: {name} {p} on {c:?}: {e}", d.id()),
                    Ok(o) if o.passed() => {
                        println!("{o}");
                        ran += 1;
                    }
                    Ok(o) => failed.push(format!("{}: {name} {p} on {c:?}: {o}", d.id())),
                    Err(e) => failed.push(format!("{}: {name} {p} on {c:?}: {e}", d.id())),
                }
            }
            if !listed.is_empty() && ran == 0 {
                failed.push(format!(
                    "{}: {name} {p}: none of {} configurations ran correctly",
                    d.id(),
                    listed.len()
                ));
            }
        }
    }
    failed
}

/// Through Vulkan on cooperative matrices (none elsewhere: lavapipe lists none), every
/// configuration of the tutorial's list and of the rotated walk on its own, at head
/// dimensions 64 and 128: the walk's accumulator stays in the matrices, rescaled row by row
/// in place by element-wise products with the factors loaded at stride 0 (what
/// `RUTILE_COOP_SCALE=0` turns off), which only a device's own compiler can show right.
#[test]
fn gpu_attention_on_cooperative_matrices_config_by_config() {
    let coop = |d: &dyn rutile::Device| d.properties().cooperative_matrix.is_some();
    // Every part runs; the failures of all are reported together.
    let mut failed = Vec::new();
    for head_dim in [64, 128] {
        failed.extend(each_attention_config_on(
            "attention on cooperative matrices",
            640,
            head_dim,
            tutorials::attention::attention_configs,
            coop,
        ));
    }
    failed.extend(each_attention_config_on(
        "rotated attention on cooperative matrices",
        660,
        64,
        tutorials::attention::rotated_attention_configs,
        coop,
    ));
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A configuration beyond a device's shared memory (128 x 128 blocks at head dimension 128,
/// 66560 bytes on the FMA path, where buffers not in use at once share bytes; lavapipe and
/// NVIDIA's Vulkan driver give 32 and 48 KiB) is refused by the autotuner saying so, in the
/// words [`beyond_the_device`] looks for, on every device whose limit is known and lower.
#[test]
fn an_attention_configuration_beyond_the_device_is_refused_saying_so() {
    let (_turn, devices) = devices();
    for d in devices {
        let props = d.properties();
        let Some(limit) = props.shared_memory_per_block_optin.or(props.shared_memory_per_block) else {
            continue;
        };
        if limit >= 66560 {
            continue;
        }
        let config = rutile::autotune::Config::new(&[("BLOCK_M", 128), ("BLOCK_N", 128), ("SPLIT", 1)])
            .num_warps(8)
            .num_stages(2);
        let p = Problem {
            z: 1,
            h: 1,
            n_ctx: 128,
            head_dim: 128,
            causal: false,
        };
        match tutorials::attention::attention_with(d.as_ref(), p, 1, vec![config]) {
            Err(e) => assert!(beyond_the_device(&e), "{}: {e}", d.id()),
            Ok(o) => panic!("{}: 128 x 128 ran in {limit} bytes of shared memory: {o}", d.id()),
        }
    }
}

/// Configuration `c` alone on `p`: its result within bounds, or, where it is expected to
/// be `refused`, its refusal for the device's limits ([`beyond_the_device`]); anything
/// else goes to `failed`.
fn check_alone_or_refused(
    d: &dyn Device,
    p: Problem,
    c: &rutile::autotune::Config,
    seed: u64,
    refused: bool,
    failed: &mut Vec<String>,
) {
    match tutorials::attention::attention_with(d, p, seed, vec![c.clone()]) {
        Ok(o) if o.passed() && !refused => println!("{o}"),
        Err(e) if refused && beyond_the_device(&e) => println!("{p} on {c:?}: {e}"),
        Ok(o) => failed.push(format!("{}: {p} on {c:?}: {o}", d.id())),
        Err(e) => failed.push(format!("{}: {p} on {c:?}: {e}", d.id())),
    }
}

/// Whether the autotuner refused every configuration for the device's limits (the texts of
/// `SkipReason::SharedMemory` and `SkipReason::Registers`), not for a failure.
fn beyond_the_device(e: &rutile::Error) -> bool {
    let e = e.to_string();
    e.contains("no configuration ran")
        && (e.contains("shared memory per program; the device gives one at most")
            || e.contains("threads per program on this device"))
}

/// Through CUDA, 64-row programs of the rotated walk, two or three a thread block sharing
/// one producer warpgroup (`block_programs_attention_configs`; none elsewhere, none causal),
/// at lengths whose last block leaves programs of a block past the grid's end and at 1024
/// (no ragged walk): whichever configuration wins is checked, and every one on its own at
/// 1000 and 1024 tokens (16 programs a head: the last block of three has one).
#[test]
fn gpu_block_programs_attention_matches_the_reference() {
    check_attention(
        "attention, programs sharing a producer",
        520,
        &[],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64), (1, 3, 1024, 64)],
        tutorials::attention::block_programs_attention_configs,
    );
    // (The devices' lock is let go before the check below takes it again.)
    {
        let (_turn, devices) = devices();
        for d in devices {
            let configs = tutorials::attention::block_programs_attention_configs(d.as_ref(), false);
            assert_eq!(
                !configs.is_empty(),
                d.properties().backend == rutile::Backend::Cuda,
                "programs sharing a producer are for CUDA"
            );
            assert!(tutorials::attention::block_programs_attention_configs(d.as_ref(), true).is_empty());
        }
    }
    check_each_attention_config(
        "attention, programs sharing a producer",
        530,
        64,
        tutorials::attention::block_programs_attention_configs,
    );
}

/// Through CUDA, the programs sharing a producer on a persistent grid
/// (`persistent_block_programs_attention_configs`), every configuration on its own: at 3
/// heads (a block a multiprocessor at most) and at 40 and 48 heads, where a multiprocessor's
/// block walks two or more blocks of programs (240 and 288 of them on 132
/// multiprocessors), at lengths with and without a ragged last key block. With it, the
/// ragged walk's copies need buffers of their own (the producer is filling the ring for
/// the next block), more shared memory than there is for blocks of 64 x 128 but two
/// programs on two stages: those are refused, saying so.
#[test]
fn gpu_persistent_block_programs_attention_matches_the_reference() {
    let (_turn, devices) = devices();
    let mut failed = Vec::new();
    for d in devices {
        let configs = tutorials::attention::persistent_block_programs_attention_configs(d.as_ref(), false);
        assert_eq!(!configs.is_empty(), d.properties().backend == rutile::Backend::Cuda);
        for (i, c) in configs.into_iter().enumerate() {
            for (h, n_ctx) in [(3, 1000), (3, 1024), (40, 1000), (48, 1024), (4, 4096)] {
                let p = Problem {
                    z: 1,
                    h,
                    n_ctx,
                    head_dim: 64,
                    causal: false,
                };
                // (Lowered on their own: 215024 bytes at two programs and two stages, the
                // only one of 64 x 128 that fits with the ragged walk; 198640 at three of 64
                // x 64 and three stages.)
                let wide = c.meta.iter().any(|(k, v)| k == "BLOCK_N" && *v == 128);
                let smallest = c.programs_per_block == 2 && c.num_stages == 2;
                let refused = wide && !smallest && n_ctx % 128 != 0;
                check_alone_or_refused(d.as_ref(), p, &c, 550 + i as u64, refused, &mut failed);
            }
        }
    }
    assert!(failed.is_empty(), "persistent attention failed:\n{}", failed.join("\n"));
}

/// The configurations of the attention tutorial's list that cap the registers a thread
/// (`maxnreg`, through CUDA only; none elsewhere), checked on their own: autotuned among
/// the others they are checked only where they win.
#[test]
fn gpu_register_capped_attention_matches_the_reference() {
    check_attention(
        "register-capped attention",
        300,
        &[],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64), (1, 2, 1024, 128)],
        |d, causal| {
            let capped: Vec<_> = tutorials::attention::attention_configs(d, causal)
                .into_iter()
                .filter(|c| c.maxnreg.is_some())
                .collect();
            let cuda = d.properties().backend == rutile::Backend::Cuda;
            assert_eq!(
                !capped.is_empty(),
                cuda,
                "register limits are for CUDA, and it has some"
            );
            capped
        },
    );
}

/// Through CUDA, the tutorial's configurations with K and V copied by the tensor memory
/// accelerator across heads (`tma_heads_attention_configs`, which the host code adds at
/// head dimension 128; none elsewhere): whichever one wins is checked, as in the other
/// attention tests.
#[test]
fn gpu_attention_with_tma_across_heads_matches_the_reference() {
    check_attention(
        "attention, TMA across heads",
        400,
        &[],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64), (1, 2, 1024, 128)],
        tutorials::attention::tma_heads_attention_configs,
    );
}

/// Through CUDA, the 64 x 128 program with K and V across heads capped at 168 registers
/// (`capped_tma_heads_attention_configs`, the benchmark's `tma_heads_capped` line; none
/// elsewhere), causal and not.
#[test]
fn gpu_capped_attention_across_heads_matches_the_reference() {
    check_attention(
        "attention, TMA across heads, 168 registers",
        430,
        &[],
        &[(2, 4, 1000, 64), (1, 1, 4097, 64)],
        tutorials::attention::capped_tma_heads_attention_configs,
    );
}

/// Through CUDA (none elsewhere), every configuration with the rotated walk's last values
/// loaded ahead of it (`with_last_values_ahead`, the benchmark's `_ahead` lines) on its
/// own: three programs a block at head dimension 64, the ping-pong at 128, at 1000 and 1024
/// tokens (a ragged last key block and whole ones), causal and not where the list has them.
#[test]
fn gpu_attention_with_the_last_values_ahead_config_by_config() {
    use tutorials::attention::{
        block_programs_attention_configs, head_128_specialized_attention_configs, with_last_values_ahead,
    };
    let cuda = |d: &dyn rutile::Device| d.properties().backend == rutile::Backend::Cuda;
    let mut failed = each_attention_config_on(
        "three programs a block, last values ahead",
        700,
        64,
        |d, causal| with_last_values_ahead(block_programs_attention_configs(d, causal)),
        cuda,
    );
    failed.extend(each_attention_config_on(
        "the ping-pong, last values ahead",
        720,
        128,
        |d, causal| with_last_values_ahead(head_128_specialized_attention_configs(d, causal)),
        cuda,
    ));
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Fused attention forward, fp16, head dimensions 64 and 128, causal and not, at lengths
/// that are not multiples of the blocks, and at 128 and 1024 that are (kernels without the
/// ragged walk, `AttentionMeta::whole_key_blocks`).
#[test]
fn gpu_attention_matches_the_reference() {
    check_attention(
        "attention",
        100,
        &[(1, 2, 100, 64), (1, 1, 70, 128), (1, 1, 128, 64)],
        &[(2, 4, 1000, 64), (1, 2, 1024, 128), (1, 1, 4097, 64), (1, 1, 2049, 128)],
        tutorials::attention::attention_configs,
    );
}
