//! The fused attention tutorial on every GPU present (each CUDA GPU and each wgpu adapter,
//! lavapipe included): the tutorial's configurations autotuned, and the forms built beyond
//! them whose pick is checked (warp-specialized, programs sharing a producer, persistent
//! block programs, longest first, register-capped), each against the CPU reference at
//! ragged sizes, causal and not, at head dimensions 64 and 128 (small sizes on software
//! devices); the configuration-by-configuration sweeps and the ping-pongs are in
//! `gpu_attention_configs.rs`: on an H200 the tests of each took about six to seven
//! minutes (timed one by one), where one binary of them all took over thirteen.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` or
//! `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when `RUTILE_REQUIRE` names a
//! backend without a device that opens.

mod support;

use rutile_examples::gpus::gpus_under_test as devices;
use rutile_examples::tutorials;
use rutile_examples::tutorials::attention::Problem;
use support::attention::{beyond_the_device, check_alone_or_refused, check_attention, check_each_attention_config};

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
