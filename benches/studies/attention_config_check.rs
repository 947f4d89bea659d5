//! One attention configuration, or several, each checked on its own against the CPU
//! reference on one device: how the blocks that compute wrong results through NVIDIA's
//! Vulkan driver on cooperative matrices were told apart (docs/performance.md, "Buffers
//! that share bytes inside a loop"). Each argument is one check,
//!
//!     BLOCK_M,BLOCK_N,SPLIT,ROTATE,num_warps,num_stages,head_dim,n_ctx,causal
//!
//! (`causal` 0 or 1), on 1 x 3 heads:
//!
//!     cargo run --release -p rutile-benches --example attention_config_check -- 64,64,1,1,4,3,64,1024,1
//!
//! `RUTILE_DEVICE` picks the device (`vulkan:0`, `cuda:0`); the lowering's own switches
//! (`RUTILE_COOP_SCALE=0` and the others the README lists) apply as to any launch. The
//! exit status is 1 when a check fails.

use rutile::autotune::Config;
use rutile_examples::tutorials::attention::{self, Problem};
use std::error::Error;

/// A check parsed from its argument.
fn parse(arg: &str) -> Result<(Config, Problem), Box<dyn Error>> {
    let v: Vec<i64> = arg.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let [bm, bn, split, rotate, warps, stages, head_dim, n_ctx, causal] = v[..] else {
        return Err(format!("`{arg}`: expected nine comma-separated integers (see the usage)").into());
    };
    let config = Config::new(&[("BLOCK_M", bm), ("BLOCK_N", bn), ("SPLIT", split), ("ROTATE", rotate)])
        .num_warps(warps as u32)
        .num_stages(stages as u32);
    let p = Problem {
        z: 1,
        h: 3,
        n_ctx: n_ctx as usize,
        head_dim: head_dim as usize,
        causal: causal != 0,
    };
    Ok((config, p))
}

fn main() -> Result<(), Box<dyn Error>> {
    let checks = std::env::args()
        .skip(1)
        .map(|a| parse(&a))
        .collect::<Result<Vec<_>, _>>()?;
    if checks.is_empty() {
        return Err("no configuration given (see the usage at the top of the source)".into());
    }
    let dev = rutile::default_device()?;
    println!("device: {}", dev.id());
    let mut failed = 0;
    for (config, p) in checks {
        match attention::attention_with(dev.as_ref(), p, 7, vec![config.clone()]) {
            Ok(o) => {
                failed += !o.passed() as usize;
                println!(
                    "{} {p}: error {:.2e} ({config})",
                    if o.passed() { "ok  " } else { "WRONG" },
                    o.error
                );
            }
            Err(e) => {
                failed += 1;
                println!("ERROR {p}: {e} ({config})");
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
