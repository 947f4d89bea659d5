//! What the attention tests share: a tutorial form checked on every device autotuned over
//! its configurations, every configuration on its own, and the refusals of configurations
//! beyond a device's limits. Used by `gpu_attention.rs` and `gpu_attention_configs.rs`.
#![allow(dead_code)] // each test binary uses some of these

use rutile::Device;
use rutile_examples::gpus::{check_outcome as check, gpus_under_test as devices, is_fast};
use rutile_examples::tutorials;
use rutile_examples::tutorials::attention::Problem;

/// Fused attention forward on every device, at `(z, h, n_ctx, head_dim)` sizes (`fast`
/// ones too on a hardware device), causal and not, autotuned over `configs(device,
/// causal)`, each checked against the CPU reference; `name` and `seed` tell the runs apart.
pub fn check_attention(
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

/// Every configuration `configs` gives on its own, causal and not, at 1000 and 1024 tokens
/// of 3 heads of dimension `head_dim` (autotuned among the others, each is checked only where it
/// wins; 1024 is a multiple of every key block, whose kernels have no ragged walk). A
/// configuration beyond the device's limits (shared memory, threads at its registers: the
/// tutorial's 128-row blocks through Vulkan's 48 KiB) is refused by the autotuner, saying
/// so, and left out; at least one must run on each device and problem.
pub fn check_each_attention_config(
    name: &str,
    seed: u64,
    head_dim: usize,
    configs: fn(&dyn rutile::Device, bool) -> Vec<rutile::autotune::Config>,
) {
    let failed = each_attention_config_on(name, seed, head_dim, configs, |_| true);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// [`check_each_attention_config`] on the devices `on` picks: what failed, each on a line.
pub fn each_attention_config_on(
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

/// Configuration `c` alone on `p`: its result within bounds, or, where it is expected to
/// be `refused`, its refusal for the device's limits ([`beyond_the_device`]); anything
/// else goes to `failed`.
pub fn check_alone_or_refused(
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
pub fn beyond_the_device(e: &rutile::Error) -> bool {
    let e = e.to_string();
    e.contains("no configuration ran")
        && (e.contains("shared memory per program; the device gives one at most")
            || e.contains("threads per program on this device"))
}
