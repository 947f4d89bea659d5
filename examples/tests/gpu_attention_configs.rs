//! The fused attention tutorial's forms checked configuration by configuration on every GPU
//! present (each CUDA GPU and each wgpu adapter, lavapipe included), where an autotuned
//! pick would hide a wrong configuration: the rotated walk, the head-128 ping-pongs
//! (persistent too), cooperative matrices through Vulkan, TMA across heads, the last
//! values ahead; each against the CPU reference at ragged sizes, causal and not. The
//! tutorial's own configurations and the other forms are in `gpu_attention.rs`.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` or
//! `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when `RUTILE_REQUIRE` names a
//! backend without a device that opens.

mod support;

use rutile_examples::gpus::gpus_under_test as devices;
use rutile_examples::tutorials;
use rutile_examples::tutorials::attention::Problem;
use support::attention::{
    beyond_the_device, check_alone_or_refused, check_attention, check_each_attention_config, each_attention_config_on,
};

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
