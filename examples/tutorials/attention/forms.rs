//! The configurations the attention tutorial's autotuner tries: the tutorial's own list,
//! and the forms built beyond it (the walk rotated, TMA across heads, warp-specialized with
//! turns, programs sharing a producer, persistent, longest first), each with what it
//! measured; and the union the tutorial's host code tunes over per problem.

use super::Problem;
use rutile::autotune::Config;
use rutile::{Device, DeviceType};
// (For the documentation's links.)
#[cfg(doc)]
use {super::attention, rutile::seeds::AttentionMeta};

/// What the autotuner tries: `BLOCK_M x BLOCK_N` blocks with their warps and stages, the
/// tutorial's sizes first and smaller ones for devices with less shared memory (the
/// autotuner skips what a device cannot run), and for causal attention its two stages
/// (`SPLIT` = 1) or one masked walk (`SPLIT` = 0, half the shared memory, see
/// [`AttentionMeta::split_diagonal`]). A software device gets the smallest blocks only: it
/// compiles each large one for seconds. Through CUDA, 128 x 64 on 8 warps is also tried at
/// 128 registers a thread, so that two programs share a multiprocessor.
pub fn attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    configs(dev, causal, false)
}

/// What the tutorial's host code ([`attention`]) autotunes over for `p`: [`attention_configs`],
/// and through CUDA the forms measured faster for some problems, for the autotuner to pick
/// per problem (`docs/performance.md`): at head dimension 128 the same list with K and V
/// copied by TMA across heads (`LaunchConfig::tma_outer`; on an H200 4–7% faster from 2048
/// tokens, causal or not, 1–4% slower at 1024: "Head dimension 128 on an H200") and
/// [`head_128_specialized_attention_configs`] (the fastest from 2048 tokens), and without
/// the causal mask the same on a persistent grid with the walk's last values ahead
/// ([`persistent_head_128_specialized_attention_configs`] with [`with_last_values_ahead`],
/// the benchmark's `_persistent_pingpong_ahead` line: the producer copies them and `Q` a
/// tile ahead; on an H200 the fastest at 1024 and 2048
/// tokens, 62.8% of cuBLAS's matmul rate at 1024 in the same run); at head
/// dimension 64 without the causal mask, [`block_programs_attention_configs`] (the fastest
/// there from 4096 tokens, 59–64% of cuBLAS's matmul rate: "Whole key blocks"), both also
/// with the walk's last values loaded ahead ([`with_last_values_ahead`]), and the
/// TMA-across-heads list (the fastest at 1024 and 2048 tokens; 3–7% slower with the mask,
/// where it is left out: "Head dimension 128: the ping-pong"); at head dimension 64 with
/// the causal mask, [`longest_first_attention_configs`] (on an H200 1–8% faster than the
/// tutorial's list and the ping-pong from 1024 to 8192 tokens: "Causal programs longest
/// first, measured"; not measured through Vulkan, where it is left out).
pub fn host_attention_configs(dev: &dyn Device, p: &Problem) -> Vec<Config> {
    let mut configs = attention_configs(dev, p.causal);
    match p.head_dim {
        128 => {
            configs.extend(tma_heads_attention_configs(dev, p.causal));
            let ping_pong = head_128_specialized_attention_configs(dev, p.causal);
            configs.extend(with_last_values_ahead(ping_pong.clone()));
            configs.extend(ping_pong);
            if !p.causal {
                let persistent = persistent_head_128_specialized_attention_configs(dev, p.causal);
                configs.extend(with_last_values_ahead(persistent));
            }
        }
        64 if !p.causal => {
            let blocks = block_programs_attention_configs(dev, p.causal);
            configs.extend(with_last_values_ahead(blocks.clone()));
            configs.extend(blocks);
            configs.extend(tma_heads_attention_configs(dev, p.causal));
        }
        64 if dev.properties().backend == rutile::Backend::Cuda => {
            configs.extend(longest_first_attention_configs(dev, p.causal));
        }
        _ => {}
    }
    configs
}

/// [`attention_configs`] with K and V copied by TMA across heads (`LaunchConfig::tma_outer`),
/// through CUDA (none elsewhere).
pub fn tma_heads_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    let configs = attention_configs(dev, causal).into_iter();
    configs.map(|c| c.tma_outer(true)).collect()
}

/// The one-warpgroup 64 x 128 program on 2 stages of [`tma_heads_attention_configs`] (the
/// fastest at 1024 and 2048 tokens at head dimension 64) capped at 168 registers a thread
/// (`maxnreg`), through CUDA (none elsewhere): `ptxas` 12.9 then spills nothing (221
/// registers uncapped), and three programs share a multiprocessor instead of two (12 warps
/// where 8; their shared memory, 75760 bytes each, still fits), for the other programs to
/// fill one's waits. (On 3 stages the shared memory holds two programs whatever the
/// registers; 64 x 64 takes 151 registers uncapped, three already.) Measured slower than
/// two a multiprocessor on an H200 (1% at 1024 and 2048 tokens, 7–9% at 4096): the
/// benchmark's `tma_heads_capped` line, not in the host code's list (`docs/performance.md`,
/// "The last values ahead, and shorter chains timed").
pub fn capped_tma_heads_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    tma_heads_attention_configs(dev, causal)
        .into_iter()
        .filter(|c| {
            let meta = |name: &str| c.meta.iter().find(|(k, _)| k == name).map(|&(_, v)| v);
            (c.num_warps, c.num_stages, meta("BLOCK_M"), meta("BLOCK_N")) == (4, 2, Some(64), Some(128))
        })
        .map(|c| c.maxnreg(Some(168)))
        .collect()
}

/// [`attention_configs`] with the walk rotated by one block (`ROTATE` = 1, see
/// [`AttentionMeta::rotate`]): FlashAttention-3's overlap of one block's `P V` with the
/// next block's softmax, for head dimension 64 (at 128 the carried `P` costs too many
/// registers). Not in the tutorial's own list until it is measured faster.
pub fn rotated_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    configs(dev, causal, true)
}

/// The rotated walk warp-specialized, through CUDA (none elsewhere): a producer warpgroup
/// copies K and V by TMA across heads (`LaunchConfig::warp_specialize`, `tma_outer`), and the
/// two consumer warpgroups of a 128-row block take turns at the tensor cores, one's softmax
/// beside the other's MMAs (FlashAttention-3's ping-pong; the lowering's `specialize`). For
/// head dimension 64; its own list until a full run measures it faster everywhere (it was
/// 2–7% faster than the tutorial's list without the causal mask, 5% slower with it at 4096
/// tokens: `docs/performance.md`). The same list causal or not (`block_n` divides
/// `block_m` in every one, so causal walks split the diagonal off too).
pub fn specialized_attention_configs(dev: &dyn Device, _causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    [(128, 128, 2), (128, 128, 3), (128, 64, 2), (128, 64, 3)]
        .into_iter()
        .map(|(bm, bn, stages)| {
            let meta = [("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", 1)];
            let config = Config::new(&meta).num_warps(8).num_stages(stages);
            config.warp_specialize(true).tma_outer(true)
        })
        .collect()
}

/// The rotated walk of 64-row programs, several a thread block sharing one producer
/// warpgroup (`LaunchConfig::programs_per_block`): FlashAttention-3's three consumer
/// warpgroups, and two, through CUDA (none elsewhere) and without the causal mask (whose
/// key blocks depend on the program, so that programs cannot share them: none then). For
/// head dimension 64; its own list, the fastest there on an H200 from 2048 tokens (three
/// programs a block: 64% of cuBLAS's matmul rate from 8192 tokens, 59–61% at 4096,
/// `docs/performance.md`, "Whole key blocks"); not in the tutorial's list, which also
/// serves causal attention, Vulkan and head dimension 128, but in what its host code tunes
/// over where it applies ([`host_attention_configs`]).
pub fn block_programs_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda || causal {
        return Vec::new();
    }
    [(2, 128, 2), (2, 128, 3), (3, 128, 2), (3, 128, 3), (3, 64, 3)]
        .into_iter()
        .map(|(programs, bn, stages)| {
            let meta = [("BLOCK_M", 64), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", 1)];
            let config = Config::new(&meta).num_warps(4).num_stages(stages);
            config
                .warp_specialize(true)
                .tma_outer(true)
                .programs_per_block(programs)
        })
        .collect()
}

/// The 128-row ping-pong of [`specialized_attention_configs`] at head dimension 128,
/// through CUDA (none elsewhere): a producer warpgroup copies K and V by TMA across heads,
/// two consumer warpgroups take turns at the tensor cores, the walk rotated or in the
/// tutorial's order. On an H200 the fastest form from 2048 tokens (68–76% of cuBLAS's
/// matmul rate, `docs/performance.md`, "Head dimension 128: the ping-pong"), slower at
/// 1024; in what the host code tunes over ([`host_attention_configs`]). Two 64-row
/// programs a block sharing a producer ran 8–17% slower than it at every length, and three
/// do not fit (each consumer's accumulator and scores take 128 of the 160 registers three
/// consumers get): no list.
pub fn head_128_specialized_attention_configs(dev: &dyn Device, _causal: bool) -> Vec<Config> {
    if dev.properties().backend != rutile::Backend::Cuda {
        return Vec::new();
    }
    [
        (128, 128, 2, 1),
        (128, 128, 2, 0),
        (128, 64, 2, 1),
        (128, 64, 3, 1),
        (128, 64, 2, 0),
        (128, 64, 3, 0),
    ]
    .into_iter()
    .map(|(bm, bn, stages, rotate)| {
        let meta = [("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", 1), ("ROTATE", rotate)];
        let config = Config::new(&meta).num_warps(8).num_stages(stages);
        config.warp_specialize(true).tma_outer(true)
    })
    .collect()
}

/// The rotated configurations of `configs` (`ROTATE` = 1) with the walk's last values
/// loaded before it (`AHEAD` = 1, [`AttentionMeta::last_values_ahead`]): staged in shared
/// memory of their own before the walk, so that their load overlaps the queries' and the
/// ring's first copies rather than following the walk, for the short problems where a
/// program's start and end are a third of its time. The others are left out. On an H200
/// (the benchmark's `_ahead` lines, `docs/performance.md`, "The last values ahead") the
/// head-128 ping-pong ran 3% faster at 1024 tokens and 1% at 2048, three programs a block
/// 2-3% at 1024, both level from 4096; the host code tunes over both ways
/// ([`host_attention_configs`]).
pub fn with_last_values_ahead(configs: Vec<Config>) -> Vec<Config> {
    configs
        .into_iter()
        .filter(|c| c.value("ROTATE").is_ok_and(|r| r != 0))
        .map(|mut c| {
            c.meta.push(("AHEAD".into(), 1));
            c
        })
        .collect()
}

/// [`head_128_specialized_attention_configs`] on a persistent grid (`LaunchConfig::persistent`):
/// a thread block a multiprocessor walks the query blocks, its producer copying the next
/// block's `K` and `V` while the consumers normalize and store this one's output, the
/// start and end of a block that the grid of one block a multiprocessor leaves exposed
/// (FlashAttention-3's schedule at this head dimension). Through CUDA only (none
/// elsewhere). On whole key blocks without the causal mask every configuration fits (231408
/// bytes of shared memory at 128 x 128 rotated); with a ragged last block or the mask, the
/// walks after the specialized one need buffers of their own and only 128 x 64 on two
/// stages in the tutorial's order fits: the autotuner skips the others, saying so. On an
/// H200 it ran 2–6% slower than the plain ping-pong at every length from 1024 to 16384
/// tokens (`docs/performance.md`, "Head dimension 128 on a persistent grid"); with `Q`
/// copied by the producer a tile ahead (`RUTILE_TMA_STAGED`), 7% faster than before at
/// 1024 tokens and ahead of the plain ping-pong there, but 1–8% behind the ping-pong with
/// the last values ahead from 1024 to 4096 ("Q copied by the producer through TMA"): a line
/// of the benchmark (`_persistent_pingpong`), in no list the host code tunes over. With the
/// last values ahead ([`with_last_values_ahead`], copied by the producer with `Q`) it is
/// the fastest at 1024 and 2048 tokens, and in the host code's list without the mask
/// ("The persistent ping-pong with the last values copied").
pub fn persistent_head_128_specialized_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    head_128_specialized_attention_configs(dev, causal)
        .into_iter()
        .map(|c| c.persistent(true))
        .collect()
}

/// [`specialized_attention_configs`] (the ping-pong at head dimension 64) on a persistent
/// grid (`LaunchConfig::persistent`), as [`persistent_head_128_specialized_attention_configs`]
/// is at 128: the benchmark's `_persistent_pingpong` line at head dimension 64, and with
/// [`with_last_values_ahead`] its `_persistent_pingpong_ahead` line at both (the producer
/// copies those last values with `Q`, a tile ahead, `Target::tma_staged_after`, which the
/// CUDA runtime turns on for persistent grids). On an H200 at head dimension 64 slower
/// than TMA across heads at 1024 and 2048 tokens (6–10%): in no list the host code tunes
/// over; at 128 the fastest form there (`docs/performance.md`, "The persistent ping-pong
/// with the last values copied").
pub fn persistent_specialized_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    specialized_attention_configs(dev, causal)
        .into_iter()
        .map(|c| c.persistent(true))
        .collect()
}

/// Causal attention's lists ([`attention_configs`], and through CUDA
/// [`tma_heads_attention_configs`] and [`head_128_specialized_attention_configs`]) with the
/// programs started longest first (`LONGEST_FIRST` = 1, [`AttentionMeta::longest_first`]):
/// the grid's last programs, which set its tail, are then the shortest walks, and the
/// programs go by groups of heads whose keys and values the L2 cache holds (the host code
/// sets [`AttentionMeta::group_heads`] from the device). None without the causal mask,
/// where every walk is as long. The benchmark's `_longest_first` line; on an H200 the
/// fastest form at head dimension 64 from 1024 to 8192 tokens (1–8% ahead), so in what the
/// host code tunes over there ([`host_attention_configs`]); at head dimension 128 level
/// with or up to 4% behind the ping-pong and the tutorial's list, and left out
/// (`docs/performance.md`, "Causal programs longest first, measured").
pub fn longest_first_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    if !causal {
        return Vec::new();
    }
    let mut configs = attention_configs(dev, causal);
    configs.extend(tma_heads_attention_configs(dev, causal));
    configs.extend(head_128_specialized_attention_configs(dev, causal));
    for c in &mut configs {
        c.meta.push(("LONGEST_FIRST".into(), 1));
    }
    configs
}

/// [`block_programs_attention_configs`] on a persistent grid (`LaunchConfig::persistent`):
/// a thread block a multiprocessor, whose producer copies the next block of programs' `K`
/// and `V` while its consumers finish the last one (normalize and store `O`). Meant to
/// hide a block's start and end, it measured slower at every length on an H200
/// (`docs/performance.md`, "Persistent blocks of programs"): a line of the benchmark, in
/// no list the host code tunes over.
pub fn persistent_block_programs_attention_configs(dev: &dyn Device, causal: bool) -> Vec<Config> {
    block_programs_attention_configs(dev, causal)
        .into_iter()
        .map(|c| c.persistent(true))
        .collect()
}

/// The blocks that compute wrong results through NVIDIA's Vulkan driver on cooperative
/// matrices (an H200, driver 580; `gpu_attention_on_cooperative_matrices_config_by_config`),
/// where rutile's simulator runs the same per-thread kernels equal to the interpreter. Each
/// is a 64-row block on 4 subgroups whose walk over the keys is split in two (whole blocks,
/// then the masked ones), wrong only on problems with a masked walk (a ragged last block,
/// the causal diagonal): one subgroup's 16 rows of every query block, the same bits launch
/// after launch; in the simulator, lowered as for that device, all three run right and
/// race-free. What they depend on (`docs/performance.md`, "The wrong Vulkan blocks,
/// located"): the first two run right with a subgroup-scope fence on workgroup memory
/// before each cooperative load (`RUTILE_COOP_LOAD_FENCE=1`, which costs the Vulkan matmul
/// 19% and attention 7–13%), or with one read-only declaration taken away (a different one
/// for each); the rotated 64 x 128, the one block that takes all 48 KiB of workgroup
/// memory, stays wrong with either. Left out until the cause is found.
fn known_wrong_on_cooperative_matrices(bm: i64, bn: i64, warps: u32, stages: u32, split: i64, rotate: bool) -> bool {
    matches!(
        (bm, bn, warps, stages, split, rotate),
        (64, 32, 4, 3, 1, _) | (64, 64, 4, 3, 1, true) | (64, 128, 4, _, 1, true)
    )
}

fn configs(dev: &dyn Device, causal: bool, rotate: bool) -> Vec<Config> {
    let software = dev.properties().device_type == DeviceType::Cpu;
    let cuda = dev.properties().backend == rutile::Backend::Cuda;
    let coop = dev.properties().backend == rutile::Backend::Vulkan && dev.properties().cooperative_matrix.is_some();
    let blocks: &[(i64, i64, u32, u32)] = if software {
        &[(16, 16, 4, 1)]
    } else {
        &[
            (128, 64, 8, 2),
            // Wider key blocks and a deeper ring, which fit once `P` no longer takes shared
            // memory (it feeds `P V` from registers on warpgroup MMAs).
            (128, 128, 8, 2),
            (128, 128, 8, 3),
            (128, 64, 8, 4),
            (128, 64, 8, 3),
            (128, 32, 8, 3),
            // One warpgroup a program with wide key blocks: a program holds half the
            // registers of 128 x 128 on 8 warps, so that two or three share a
            // multiprocessor and one's softmax runs beside another's matrix products (the
            // overlap FlashAttention-3 builds by hand).
            (64, 128, 4, 2),
            (64, 128, 4, 3),
            (64, 64, 4, 3),
            (64, 32, 4, 3),
            (32, 32, 4, 2),
            (16, 16, 4, 1),
        ]
    };
    let splits: &[i64] = if causal { &[1, 0] } else { &[1] };
    let mut configs = Vec::new();
    for &split in splits {
        for &(bm, bn, warps, stages) in blocks {
            if coop && known_wrong_on_cooperative_matrices(bm, bn, warps, stages, split, rotate) {
                continue;
            }
            if causal && split == 1 && bm % bn != 0 {
                // The diagonal is walked apart in whole key blocks: such a block is for the
                // one masked walk only (the builder refuses it here).
                continue;
            }
            let meta = [
                ("BLOCK_M", bm),
                ("BLOCK_N", bn),
                ("SPLIT", split),
                ("ROTATE", rotate as i64),
            ];
            let meta = if rotate { &meta[..] } else { &meta[..3] };
            let config = Config::new(meta).num_warps(warps).num_stages(stages);
            // Through CUDA, 128 x 64 on 8 warps also at 128 registers a thread (`maxnreg`):
            // `ptxas` then spills nothing at head dimension 64 (162 registers unbounded),
            // and two programs share a multiprocessor instead of one, one's softmax beside
            // the other's matrix products. On an H200 it ran 5% faster than every other
            // configuration from 4096 tokens on, causal or not (`docs/performance.md`).
            let capped =
                (cuda && (bm, bn, warps) == (128, 64, 8) && stages <= 3).then(|| config.clone().maxnreg(Some(128)));
            configs.extend(std::iter::once(config).chain(capped));
        }
    }
    configs
}
