//! The benchmark's sweeps of the layer norm, long-row softmax and fused attention
//! tutorials: each configuration checked against a CPU reference first, then timed as the
//! other sections are (device timers, L2 emptied before each run).

use super::{LaunchShape, Run, WarpChoice};
use half::f16;
use rutile::autotune::Autotuner;
use rutile::{Device, DeviceExt, LaunchConfig};
use rutile_examples::bench::{copy_kernel_of, do_bench, gbps, CacheFlush, Stats, COPY_BLOCK};
use rutile_examples::check::{max_relative_error, softmax_reference};
use rutile_examples::rng::{normal_f32s, Rng};
use rutile_examples::tutorials::attention::{self, Problem, Tensors};
use rutile_examples::tutorials::layer_norm::{self, Forward};
use rutile_examples::tutorials::{long_rows, softmax_args};
use std::fmt::Write as _;

/// One CSV line of a bandwidth measurement.
fn csv_line(csv: &mut String, id: &str, kernel: &str, size: &str, s: &rutile::bench::Stats, g: f64, ceiling: f64) {
    let _ = writeln!(
        csv,
        "{id},{kernel},{size},{:.5},{:.5},{:.5},{g:.1},{ceiling:.1},{:.4}",
        s.median_ms,
        s.p20_ms,
        s.p80_ms,
        g / ceiling
    );
}

/// `Err` naming `what` when `error` exceeds `bound`: a wrong kernel is not timed.
fn checked(what: &str, error: f64, bound: f64) -> rutile::Result<()> {
    if error <= bound {
        return Ok(());
    }
    Err(rutile::Error::Device {
        backend: "benchmark",
        message: format!("{what}: error {error:.2e} against the CPU reference, above {bound:.0e}"),
    })
}

/// The register limit (a multiple of 8, at most 255) that lets `programs` programs of
/// `num_warps` share an SM's 64K registers.
fn programs_maxnreg(programs: u32, num_warps: u32) -> u32 {
    (65536 / (programs * 32 * num_warps)).min(255) / 8 * 8
}

/// Through CUDA, the register limits (`maxnreg`) under which 2 to 8 programs of
/// `num_warps` share a multiprocessor's 64K registers, where the kernel takes more than
/// the limit unlimited (`registers`, as compiled) and the limit is at least 24: more rows
/// in flight, and fewer programs left for a last partial wave (4096 rows on 132
/// multiprocessors).
fn register_limits(num_warps: u32, registers: Option<u32>) -> Vec<u32> {
    let mut limits: Vec<u32> = (2..=8)
        .map(|p| programs_maxnreg(p, num_warps))
        .filter(|&cap| cap >= 24 && registers.is_some_and(|r| cap < r))
        .collect();
    limits.dedup();
    limits
}

/// The layer norm forward pass on fp16 (the tutorial's benchmark: M = 4096, N = 512 to
/// 16384, 2 bytes read and 2 written per element), at the host code's `num_warps` and at
/// the best of 1 to 32 and it (through CUDA also 2 to 32 warps under the register limits
/// that let 2 to 8 programs share a multiprocessor), and rows over 64 KiB (the long-row kernel, at the same bytes as
/// 4096 x 32768), and the long-row kernel where the one-block kernel runs too. The first 8 rows
/// and the last are checked against the f64 reference.
pub fn layer_norm(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, ceiling) = (dev.id(), run.ceiling);
    let reps = run.reps();
    let sizes: Vec<(usize, usize)> = if run.quick {
        vec![(256, 512), (256, 2048), (8, 65536)]
    } else {
        let mut s: Vec<(usize, usize)> = (9..=14).map(|l| (4096, 1 << l)).collect();
        s.extend([32768, 65536, 262_144].map(|n| ((1 << 27) / n, n)));
        s
    };
    let sizes: Vec<(usize, usize)> = match &run.layer_norm_cols {
        Some(cols) => sizes.into_iter().filter(|(_, n)| cols.contains(n)).collect(),
        None => sizes,
    };
    println!(
        "\nlayer norm forward fp16: GB/s (of ceiling) at the host code's num_warps, and at the best of 1..32 and it"
    );
    println!("{:>14}  {:>22} {:>22}", "M x N", "host num_warps", "best num_warps");
    println!("(copy f16/f32: rutile's copy kernel moving the same bytes, 8 elements a thread; 16 f16/4 f32: as many a thread)");
    for (m, n) in sizes {
        let x: Vec<f16> = normal_f32s(rng, m * n)
            .into_iter()
            .map(|v| f16::from_f32(-2.3 + 0.5 * v))
            .collect();
        let w: Vec<f16> = rng.f32s(n, 0.0, 1.0).into_iter().map(f16::from_f32).collect();
        let b: Vec<f16> = rng.f32s(n, 0.0, 1.0).into_iter().map(f16::from_f32).collect();
        let fwd = Forward::new(dev, &x, &w, &b, m, n)?;
        let (kernel, heuristic) = layer_norm::forward_launch(dev, &fwd)?;
        let args = fwd.args_for(&kernel);
        dev.launch(&kernel, &heuristic, &args)?;
        let rows: Vec<usize> = (0..8.min(m)).chain([m - 1]).collect();
        let y = dev.download(&fwd.y)?;
        let to64 = |v: &[f16]| v.iter().map(|h| h.to_f64()).collect::<Vec<_>>();
        let (w64, b64) = (to64(&w), to64(&b));
        let mut error: f64 = 0.0;
        for &r in &rows {
            let want = layer_norm::forward_reference(&to64(&x[r * n..(r + 1) * n]), &w64, &b64, 1, n);
            error = error.max(max_relative_error(to64(&y[r * n..(r + 1) * n]), &want.y, 1.0).0);
        }
        checked(&format!("layer norm {m}x{n}"), error, 1e-2)?;
        let mut choice = WarpChoice::new(LaunchShape::of(&heuristic));
        let mut shapes: Vec<LaunchShape> = [1u32, 2, 4, 8, 16, 32]
            .into_iter()
            .map(|num_warps| LaunchShape {
                num_warps,
                maxnreg: None,
            })
            .collect();
        // Through CUDA, 2 warps and more also under the register limits that let more
        // programs share a multiprocessor (`maxnreg`).
        if dev.properties().backend == rutile::Backend::Cuda {
            for num_warps in [2u32, 4, 8, 16, 32] {
                let config = LaunchConfig { num_warps, ..heuristic };
                let registers = match dev.compile_for(&kernel, &config, &args) {
                    Ok(compiled) => compiled.metadata.registers,
                    Err(_) => continue,
                };
                shapes.extend(
                    register_limits(num_warps, registers)
                        .into_iter()
                        .map(|cap| LaunchShape {
                            num_warps,
                            maxnreg: Some(cap),
                        }),
                );
            }
        }
        if !shapes.contains(&LaunchShape::of(&heuristic)) {
            shapes.push(LaunchShape::of(&heuristic));
        }
        for shape in shapes {
            let config = LaunchConfig {
                num_warps: shape.num_warps,
                maxnreg: shape.maxnreg,
                ..heuristic
            };
            // (A kernel whose programs walk rows gets the grid the device holds at once.)
            let config = match layer_norm::persistent_config(dev, &kernel, config, &fwd) {
                Ok(c) => c,
                Err(rutile::Error::Launch { .. } | rutile::Error::Lower(_)) => continue,
                Err(e) => return Err(e),
            };
            let s = match do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args)) {
                Ok(s) => s,
                // Configurations the device cannot run (too many threads) are skipped.
                Err(rutile::Error::Launch { .. } | rutile::Error::Lower(_)) => continue,
                Err(e) => return Err(e),
            };
            let g = gbps(4.0 * (m * n) as f64, s.median_ms);
            let name = match shape.maxnreg {
                Some(r) => format!("{}_w{}_r{r}", kernel.name, shape.num_warps),
                None => format!("{}_w{}", kernel.name, shape.num_warps),
            };
            csv_line(csv, &id, &name, &format!("{m}x{n}"), &s, g, ceiling);
            choice.record(shape, g);
        }
        let (h, best) = choice.cells(ceiling);
        println!("{:>14}  {h:>22} {best:>22}", format!("{m}x{n}"));
        // Where the row fits one block, the other kernels beside the host code's pick: the
        // tutorial's (three walks), the one-pass and the long-row kernel (two walks,
        // Welford): what holding the row is worth, and which the host code should pick.
        // Past one block, the row shared by the programs of a cluster (where the device has
        // them) beside the long-row kernel.
        {
            let mut others = Vec::new();
            if let Some(tutorial) = layer_norm::tutorial_forward_launch(m, n)? {
                others.push(tutorial);
                others.extend(layer_norm::one_pass_launch(dev, m, n)?);
                others.extend(layer_norm::one_exchange_launch(dev, m, n)?);
                // Several rows a program, on half, as many and twice as many warps as
                // rows (each row in one warp, two rows a warp, or a row on two warps),
                // where a thread holds 8 to 128 of the block's elements.
                let block = n.next_power_of_two();
                for block_m in [2u32, 4, 8, 16] {
                    for warps in [block_m / 2, block_m, 2 * block_m] {
                        let per_thread = block_m as usize * block / (32 * warps as usize);
                        if warps <= 16 && (8..=128).contains(&per_thread) {
                            others.extend(layer_norm::row_block_launch(m, n, block_m, warps)?);
                        }
                    }
                }
            } else {
                // Shares of 8192 and 16384 columns, 32 a thread, and 16384 at 64 a thread
                // under the cap that lets two such programs share a multiprocessor (as the
                // one-pass kernel at 16384 columns).
                let max = dev.properties().max_cluster();
                for (share, per_thread, maxnreg) in [(8192, 32, None), (16384, 32, None), (16384, 64, Some(128))] {
                    if let Some(shape) = long_rows::cluster_shape(n, max, share, per_thread, 16384) {
                        let (kernel, config) =
                            long_rows::layer_norm_cluster_launch_on(m, n, rutile::ScalarType::F16, shape)?;
                        others.push((kernel, config.maxnreg(maxnreg)));
                    }
                }
            }
            others.push(long_rows::layer_norm_long_launch(dev, m, rutile::ScalarType::F16)?);
            // The held-row kernel whose programs walk rows in a pipelined loop, on 4, 8 and
            // 16 warps (through CUDA 2 and 3 stages), the weight and bias loaded for each row
            // and held across rows. (With the statistics in one exchange, on 4 and 8 warps, 2
            // stages, the row walk measured 38-61% of the ceiling at 8192 columns on an H200,
            // where this one measured 83-85%: not timed here.)
            let cuda = dev.properties().backend == rutile::Backend::Cuda;
            let stages: &[u32] = if cuda { &[2, 3] } else { &[2] };
            let (reloaded, held) = (rutile::seeds::RowParams::Reloaded, rutile::seeds::RowParams::Held);
            for (warps, &stages) in [4, 8, 16].into_iter().flat_map(|w| stages.iter().map(move |s| (w, s))) {
                let stats = rutile::seeds::RowStats::TwoReductions;
                for params in [reloaded, held] {
                    others.extend(layer_norm::row_walk_launch(dev, &fwd, stats, params, warps, stages)?);
                }
            }
            // (The host code's kernel is timed above; a row walk of other stages is another.)
            let host = |k: &rutile::Kernel| k.name == kernel.name && loop_stages(k) == loop_stages(&kernel);
            // (The host code's row block on other warps is timed above too; on other rows
            // a program it is another.)
            let mut others: Vec<_> = others
                .into_iter()
                .filter(|(k, c)| !host(k) || (k.name == "_layer_norm_fwd_row_block" && c.grid != heuristic.grid))
                .collect();
            // The host code's row walk on every program the device holds at once, sharing
            // the rows unevenly, where `occupancy::persistent_grid` evened them (few
            // programs a multiprocessor): what evening them gives.
            if layer_norm::walks_rows(&kernel) {
                let balanced = layer_norm::persistent_config(dev, &kernel, heuristic, &fwd)?;
                let compiled = dev.compile_for(&kernel, &balanced, &args)?;
                let all = rutile::occupancy::persistent_programs(dev.properties(), &compiled.metadata);
                if let Some(all) = all.map(|p| p.min(m as u32)).filter(|&p| p != balanced.grid[0]) {
                    others.push((
                        kernel.clone(),
                        LaunchConfig {
                            grid: [all, 1, 1],
                            ..balanced
                        },
                    ));
                }
            }
            // A poisoned output for each kernel, so that one that leaves rows unwritten
            // fails its check instead of passing on the rows an earlier kernel wrote.
            let poison = vec![f16::NAN; m * n];
            for (other, config) in others {
                let args = fwd.args_for(&other);
                dev.upload_into(&fwd.y, &poison)?;
                dev.launch(&other, &config, &args)?;
                let y = dev.download(&fwd.y)?;
                let mut error: f64 = 0.0;
                for &r in &rows {
                    let want = layer_norm::forward_reference(&to64(&x[r * n..(r + 1) * n]), &w64, &b64, 1, n);
                    error = error.max(max_relative_error(to64(&y[r * n..(r + 1) * n]), &want.y, 1.0).0);
                }
                checked(&format!("{} {m}x{n}", other.name), error, 1e-2)?;
                let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&other, &config, &args))?;
                let g = gbps(4.0 * (m * n) as f64, s.median_ms);
                let label = match other.name.as_str() {
                    _ if host(&other) && other.name.starts_with("_layer_norm_fwd_rows") => {
                        format!("  host's row walk, {} programs (rows uneven)", config.grid[0])
                    }
                    "_layer_norm_fwd_fused" => "  tutorial's".to_string(),
                    "_layer_norm_fwd_row" => "  one-pass".to_string(),
                    "_layer_norm_fwd_row_x1" => "  one exchange".to_string(),
                    "_layer_norm_fwd_row_block" => format!("  {} rows a program", (m as u32).div_ceil(config.grid[0])),
                    name if name.starts_with("_layer_norm_fwd_rows") => format!(
                        "  row walk{}{}, {} programs, {} stages",
                        if name.contains("_x1") { " x1" } else { "" },
                        if name.ends_with("_held") { " held w, b" } else { "" },
                        config.grid[0],
                        loop_stages(&other)
                    ),
                    "_layer_norm_fwd_cluster" => format!("  cluster of {}", config.cluster),
                    _ => "  long-row".to_string(),
                };
                let name = match config.cluster {
                    1 if other.name.starts_with("_layer_norm_fwd_rows") => {
                        format!("{}_w{}_s{}", other.name, config.num_warps, loop_stages(&other))
                    }
                    1 if other.name == "_layer_norm_fwd_row_block" => format!(
                        "{}_m{}_w{}",
                        other.name,
                        (m as u32).div_ceil(config.grid[0]),
                        config.num_warps
                    ),
                    1 => other.name.clone(),
                    c => format!("{}_c{c}_{}", other.name, LaunchShape::of(&config)).replace(' ', "_"),
                };
                csv_line(csv, &id, &name, &format!("{m}x{n}"), &s, g, ceiling);
                println!(
                    "{:>14}  {:>22}",
                    label,
                    format!("{g:.0} ({:.1}%, {})", 100.0 * g / ceiling, LaunchShape::of(&config))
                );
            }
        }
        // Copies of the same bytes, in f16 (x to y) and in f32, 8 elements a thread: what one
        // launch moving them leaves of the ceiling through this backend; and 16 f16 or 4 f32
        // a thread, to tell the element type from the bytes a thread moves (through NVIDIA's
        // Vulkan driver 2-byte elements had cost a fifth of the rate: docs/performance.md).
        let mut cells = Vec::new();
        for (elem, block) in [
            (rutile::ScalarType::F16, COPY_BLOCK),
            (rutile::ScalarType::F32, COPY_BLOCK),
            (rutile::ScalarType::F16, 2 * COPY_BLOCK),
            (rutile::ScalarType::F32, COPY_BLOCK / 2),
        ] {
            let count = 4 * m * n / (2 * elem.size_bytes());
            let kernel = copy_kernel_of(elem, block, 0)?;
            let config = LaunchConfig::grid1(count.div_ceil(block as usize) as u32).num_warps(4);
            let f32_buffers;
            let args: [rutile::Arg<'_>; 3] = if elem == rutile::ScalarType::F16 {
                [(&fwd.x).into(), (&fwd.y).into(), rutile::Arg::I32(count as i32)]
            } else {
                f32_buffers = (dev.upload(&rng.f32s(count, 0.5, 1.5))?, dev.zeros::<f32>(count)?);
                [
                    (&f32_buffers.0).into(),
                    (&f32_buffers.1).into(),
                    rutile::Arg::I32(count as i32),
                ]
            };
            let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
            let g = gbps(4.0 * (m * n) as f64, s.median_ms);
            csv_line(
                csv,
                &id,
                &format!("copy_{elem}_{block}"),
                &format!("{m}x{n}"),
                &s,
                g,
                ceiling,
            );
            cells.push(format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling));
        }
        println!("{:>14}  {:>22} {:>22}", "  copy f16/f32", cells[0], cells[1]);
        println!("{:>14}  {:>22} {:>22}", "  16 f16/4 f32", cells[2], cells[3]);
    }
    Ok(())
}

/// The softmax on f32 rows of N = 32768 to 262144 (1 GiB in, 1 GiB out: M = 2^28 / N), 8
/// bytes per element as the softmax section counts: the long-row kernel at every width,
/// and where the host code holds a row in registers, that one block on its warps and on
/// 16, or, past that, the programs of a thread-block cluster sharing it (where the device
/// has clusters). Each form writes a poisoned output, and rows 0, 1, M / 2 and the last are checked
/// against the CPU before it is timed.
pub fn long_softmax(
    dev: &dyn Device,
    run: &Run,
    flush: Option<&CacheFlush>,
    rng: &mut Rng,
    csv: &mut String,
) -> rutile::Result<()> {
    let (id, ceiling) = (dev.id(), run.ceiling);
    let reps = if run.quick { 5 } else { 20 };
    let sizes: Vec<(usize, usize)> = if run.quick {
        vec![(16, 32768)]
    } else {
        [32768, 65536, 131_072, 262_144].map(|n| ((1 << 28) / n, n)).to_vec()
    };
    println!("\nlong-row softmax f32: GB/s (of ceiling)");
    for (m, n) in sizes {
        let x = normal_f32s(rng, m * n);
        let xb = dev.upload(&x)?;
        // What a launch that sizes its grid compiles for: the softmax's arguments (their
        // types and alignment, not their values: the input stands in for the output).
        let compile_args = softmax_args(&xb, &xb, m, n);
        let mut launches = vec![(
            "long-row".to_string(),
            "softmax_long_rows".to_string(),
            long_rows::softmax_long_launch(m)?,
        )];
        if n <= long_rows::REGISTER_ROW_MAX {
            // The host code's pick for such rows: one block held in registers, read once
            // where the long-row kernel reads it twice; and the same on 16 warps.
            let (kernel, config) = long_rows::softmax_launch(dev, m, n, &compile_args)?;
            for warps in [16, config.num_warps] {
                launches.push((
                    format!("one block, {warps} warps"),
                    format!("softmax_one_block_w{warps}"),
                    (kernel.clone(), config.num_warps(warps)),
                ));
            }
        } else if let Some(host) = long_rows::cluster_for(n, dev.properties().max_cluster()) {
            // Where the device has clusters, the row shared by the programs of one, each
            // holding its share in registers, read once: a cluster a row (the host code's
            // pick without asynchronous copies), and clusters walking rows (with them), on
            // the clusters and warps that hold 32 or 64 elements a thread.
            let props = dev.properties();
            let walk_host = long_rows::cluster_walk_for(n, props.max_cluster()).filter(|_| props.async_copies());
            let host = Some(host).filter(|_| walk_host.is_none());
            for cluster in [2u32, 4, 8, 16]
                .into_iter()
                .filter(|&c| c <= dev.properties().max_cluster())
            {
                let share = (n.div_ceil(cluster as usize) as u32).next_power_of_two();
                for num_warps in [4u32, 8, 16, 32] {
                    let per_thread = share / (num_warps * 32);
                    if ![32, 64].contains(&per_thread) || share as usize > long_rows::REGISTER_ROW_MAX {
                        continue;
                    }
                    let shape = long_rows::ClusterShape { cluster, num_warps };
                    let pick = if Some(shape) == host { " (host)" } else { "" };
                    let (kernel, config) = long_rows::softmax_cluster_launch_on(m, n, shape)?;
                    if Some(shape) == host && config.maxnreg.is_some() {
                        // What the host's register limit is worth.
                        launches.push((
                            format!("cluster of {cluster}, {num_warps} warps, no register limit"),
                            format!("softmax_cluster{cluster}_w{num_warps}_uncapped"),
                            (kernel.clone(), config.maxnreg(None)),
                        ));
                    }
                    launches.push((
                        format!("cluster of {cluster}, {num_warps} warps{pick}"),
                        format!("softmax_cluster{cluster}_w{num_warps}"),
                        (kernel, config),
                    ));
                    // The same clusters walking rows, the next row's shares copied ahead.
                    let stages = long_rows::CLUSTER_WALK_STAGES;
                    let pick = if Some(shape) == walk_host { " (host)" } else { "" };
                    match long_rows::softmax_cluster_rows_launch_on(dev, m, n, shape, stages, &compile_args) {
                        Ok(launch) => launches.push((
                            format!(
                                "cluster of {cluster}, {num_warps} warps, walking rows on {} clusters, {stages} stages{pick}",
                                launch.1.grid[0] / cluster
                            ),
                            format!("softmax_cluster_rows{cluster}_w{num_warps}_s{stages}"),
                            launch,
                        )),
                        Err(e) => println!(
                            "{:>14}  cluster of {cluster}, {num_warps} warps walking rows: not run: {e}",
                            format!("{m}x{n}")
                        ),
                    }
                }
            }
        }
        for (form, name, (kernel, config)) in launches {
            // A poisoned output for each form, so that a form that writes nothing fails
            // its check rather than passing on the one before's results.
            let yb = dev.upload(&vec![f32::NAN; m * n])?;
            let args = softmax_args(&yb, &xb, m, n);
            if let Err(e) = dev.launch(&kernel, &config, &args) {
                if form == "long-row" {
                    return Err(e);
                }
                println!("{:>14}  {form}: not run: {e}", format!("{m}x{n}"));
                continue;
            }
            let y = dev.download(&yb)?;
            let mut error: f64 = 0.0;
            for r in [0, 1, m / 2, m - 1] {
                let want = softmax_reference(&x[r * n..(r + 1) * n], 1, n);
                let got = y[r * n..(r + 1) * n].iter().map(|&v| v as f64);
                error = error.max(max_relative_error(got, &want, 1e-30).0);
            }
            checked(&format!("softmax {m}x{n}, {form}"), error, 1e-5)?;
            let s = do_bench(dev, flush, 3, reps, &mut || dev.launch(&kernel, &config, &args))?;
            let g = gbps(8.0 * (m * n) as f64, s.median_ms);
            csv_line(csv, &id, &name, &format!("{m}x{n}"), &s, g, ceiling);
            println!(
                "{:>14}  {:>22}  {form}",
                format!("{m}x{n}"),
                format!("{g:.0} ({:.1}%)", 100.0 * g / ceiling)
            );
        }
    }
    Ok(())
}

/// The `num_stages` of the first loop of `kernel` that gives one, else 1.
fn loop_stages(kernel: &rutile::Kernel) -> u32 {
    kernel
        .insts
        .iter()
        .find_map(|(_, i)| match i.op {
            rutile::ir::Op::For { num_stages, .. } => num_stages,
            _ => None,
        })
        .unwrap_or(1)
}

/// The fused attention forward pass, fp16, as the tutorial's benchmark: 4 x 32 heads,
/// N_CTX = 1024 to 16384, head dimensions 64 and 128, causal and not, autotuned per
/// problem, in TFLOPS. Each head dimension and mask is first checked against the CPU at
/// 1 x 2 heads of 1024 (1 x 2 x 256 with `--quick`); the timed problems then run on inputs
/// tiled from a random block (their values do not change the time). Lines of their own:
/// the rotated walk at head dimension 64 (`_rotated`), through CUDA that walk
/// warp-specialized with its consumers taking turns (`_pingpong`), 64-row programs
/// several a block sharing a producer (`_blocks`) and those on a persistent grid
/// (`_persistent_blocks`), at head dimension 128 the ping-pong (`_pingpong`), at both the
/// ping-pong on a persistent grid (`_persistent_pingpong`), the blocks and the ping-pongs
/// with the walk's last values loaded ahead of it (`_blocks_ahead`, `_pingpong_ahead`,
/// `_persistent_pingpong_ahead`: `with_last_values_ahead`), causal programs started longest first
/// (`_longest_first`), and K and V copied by
/// TMA across heads (`_tma_heads`, `LaunchConfig::tma_outer`; at head dimension 64 its
/// 64 x 128 program also capped at 168 registers, `_tma_heads_capped`), each autotuned over the
/// tutorial's configurations in that form and timed in rounds with the others.
pub fn attention(dev: &dyn Device, run: &Run, flush: Option<&CacheFlush>, csv: &mut String) -> rutile::Result<()> {
    let id = dev.id();
    let (z, h, lengths): (usize, usize, Vec<usize>) = if run.quick {
        (1, 2, vec![256])
    } else {
        (
            4,
            32,
            run.attention_lengths
                .clone()
                .unwrap_or_else(|| vec![1024, 2048, 4096, 8192, 16384]),
        )
    };
    println!("\nfused attention forward fp16, {z} x {h} heads: TFLOPS");
    for head_dim in [64, 128] {
        if run.head_dims.as_ref().is_some_and(|d| !d.contains(&head_dim)) {
            continue;
        }
        for causal in [false, true] {
            if (causal && !run.attention_causal) || (!causal && !run.attention_plain) {
                continue;
            }
            let small = Problem {
                z: 1,
                h: 2,
                n_ctx: lengths[0],
                head_dim,
                causal,
            };
            let outcome = attention::attention(dev, small, 5)?;
            checked(&format!("attention {small}"), outcome.error, outcome.tolerance)?;
            for &n_ctx in &lengths {
                let p = Problem {
                    z,
                    h,
                    n_ctx,
                    head_dim,
                    causal,
                };
                let (t, tile) = Tensors::tiled(dev, &p, 6)?;
                let args = t.args(&p);
                // The tutorial's walk, and at head dimension 64 the walk rotated by one block
                // (its own line until it is measured faster: `rotated_attention_configs`).
                let mut forms = vec![("", attention::attention_configs(dev, causal))];
                if head_dim == 64 {
                    forms.push(("_rotated", attention::rotated_attention_configs(dev, causal)));
                    // Through CUDA, warp-specialized with turns at the tensor cores.
                    let specialized = attention::specialized_attention_configs(dev, causal);
                    if !specialized.is_empty() {
                        forms.push(("_pingpong", specialized));
                        let persistent = attention::persistent_specialized_attention_configs(dev, causal);
                        forms.push((
                            "_persistent_pingpong_ahead",
                            attention::with_last_values_ahead(persistent.clone()),
                        ));
                        forms.push(("_persistent_pingpong", persistent));
                    }
                    // Through CUDA, without the mask: 64-row programs, several a block.
                    let blocks = attention::block_programs_attention_configs(dev, causal);
                    if !blocks.is_empty() {
                        forms.push(("_blocks_ahead", attention::with_last_values_ahead(blocks.clone())));
                        forms.push(("_blocks", blocks));
                        let persistent = attention::persistent_block_programs_attention_configs(dev, causal);
                        forms.push(("_persistent_blocks", persistent));
                    }
                }
                if head_dim == 128 {
                    // Through CUDA, warp-specialized: the 128-row ping-pong.
                    let specialized = attention::head_128_specialized_attention_configs(dev, causal);
                    if !specialized.is_empty() {
                        forms.push((
                            "_pingpong_ahead",
                            attention::with_last_values_ahead(specialized.clone()),
                        ));
                        forms.push(("_pingpong", specialized));
                        let persistent = attention::persistent_head_128_specialized_attention_configs(dev, causal);
                        forms.push((
                            "_persistent_pingpong_ahead",
                            attention::with_last_values_ahead(persistent.clone()),
                        ));
                        forms.push(("_persistent_pingpong", persistent));
                    }
                }
                // Causal: the programs started longest first.
                let longest_first = attention::longest_first_attention_configs(dev, causal);
                if !longest_first.is_empty() {
                    forms.push(("_longest_first", longest_first));
                }
                // Through CUDA, K and V through TMA across heads.
                let across = attention::tma_heads_attention_configs(dev, causal);
                if !across.is_empty() {
                    forms.push(("_tma_heads", across));
                }
                // Its 64 x 128 program capped at 168 registers: three a multiprocessor.
                let capped = attention::capped_tma_heads_attention_configs(dev, causal);
                if head_dim == 64 && !capped.is_empty() {
                    forms.push(("_tma_heads_capped", capped));
                }
                // `--attention-forms`: the lines asked for (the tutorial's is named `tutorial`).
                forms.retain(|(form, _)| {
                    let name = if form.is_empty() { "tutorial" } else { &form[1..] };
                    run.attention_forms.as_ref().is_none_or(|f| f.iter().any(|n| n == name))
                });
                // What each form's outputs are filled with before its check (below): built
                // once a problem, not once a form (half a gigabyte at the largest).
                let (nan_out, nan_m) = (vec![f16::NAN; p.len()], vec![f32::NAN; p.z * p.h * p.n_ctx]);
                let mut tuned = Vec::new();
                for (form, configs) in forms {
                    let tuner = Autotuner::new(&format!("attention_fwd{form}"), configs)?;
                    let form_tuned = attention::tuned_attention(dev, &tuner, &p, &args)?;
                    // Each form's pick is checked before it is timed: a fast wrong kernel is
                    // no figure. The outputs are filled with NaN first, so that a kernel
                    // which writes nothing cannot pass on the last form's results.
                    dev.upload_into(&t.out, &nan_out)?;
                    dev.upload_into(&t.m, &nan_m)?;
                    dev.launch(&form_tuned.kernel, &form_tuned.launch, &args)?;
                    let error = attention::tiled_error(dev, &t, &p, &tile)?;
                    checked(
                        &format!("attention {p}{form} on {}", form_tuned.choice.config),
                        error,
                        4e-3,
                    )?;
                    tuned.push((form, form_tuned));
                }
                // The forms' kernels timed in turns, each round starting one form further on,
                // so that neither always follows the other (or the autotuning) on a card
                // whose clocks move with its power draw; a form's time is its median round.
                let reps = if n_ctx >= 8192 { 10 } else { 30 };
                let rounds = if tuned.len() > 1 { 3 } else { 1 };
                let mut times: Vec<Vec<Stats>> = vec![Vec::new(); tuned.len()];
                for round in 0..rounds {
                    for i in (0..tuned.len()).map(|i| (i + round) % tuned.len()) {
                        let t = &tuned[i].1;
                        times[i].push(do_bench(dev, flush, 2, reps, &mut || {
                            dev.launch(&t.kernel, &t.launch, &args)
                        })?);
                    }
                }
                for ((form, t), mut rounds) in tuned.into_iter().zip(times) {
                    rounds.sort_by(|a, b| a.median_ms.total_cmp(&b.median_ms));
                    let s = rounds[rounds.len() / 2];
                    let tflops = p.flops() / (s.median_ms * 1e-3) / 1e12;
                    let _ = writeln!(
                        csv,
                        "{id},attention_fwd_d{head_dim}{}{form},{z}x{h}x{n_ctx},{:.5},{:.5},{:.5},{tflops:.2},,",
                        if causal { "_causal" } else { "" },
                        s.median_ms,
                        s.p20_ms,
                        s.p80_ms
                    );
                    // What the pick's `dot`s run on: a block too large for the matrix units'
                    // staging takes the FMA path, which the figure alone does not say. (From
                    // the compile cache: a choice read from the tuning file has no report.)
                    let compiled = dev.compile_for(&t.kernel, &t.launch, &args)?;
                    let dots = compiled
                        .metadata
                        .dots
                        .as_ref()
                        .map(|d| format!(", {d}"))
                        .unwrap_or_default();
                    println!(
                        "{:>28}{form:18}  {tflops:>8.1} TFLOPS  {}{dots}",
                        p.to_string(),
                        t.choice.config
                    );
                }
            }
        }
    }
    Ok(())
}
