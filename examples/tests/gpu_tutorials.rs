//! The layer norm, long-row, libdevice (`asin`), fp8 matmul and grouped GEMM tutorials on every GPU present (each
//! CUDA GPU and each wgpu adapter, lavapipe included), each checked against its CPU
//! reference on random inputs at ragged sizes (small ones on software devices). The fused
//! attention tutorial's are in `gpu_attention.rs` and `gpu_attention_configs.rs`.
//!
//! Without any such device the tests skip, unless `RUTILE_REQUIRE_TOOLS=1` or
//! `RUTILE_REQUIRE_GPU=1`, then they fail; and they fail when `RUTILE_REQUIRE` names a
//! backend without a device that opens.

use rutile_examples::gpus::{check_outcome as check, gpus_under_test as devices, is_fast};
use rutile_examples::tutorials;
use std::sync::Arc;

#[test]
fn gpu_layer_norm_matches_the_reference() {
    let (_turn, devices) = devices();
    for d in devices {
        // 20000 columns: the long-row forward pass beside the one-block backward pass; 3000:
        // the one-pass kernel's widest block through Vulkan (16 warps there); 12289 and
        // 16384: its widest through CUDA, under a register limit. Through CUDA from 2048
        // columns: the row walk, its loads copied ahead (ragged and unaligned at 3000, 4097
        // and 12289, where its accesses are narrower than a copy takes, aligned at 8192).
        let mut sizes = vec![(37, 1), (64, 100), (129, 781), (17, 3000), (33, 4097), (3, 20000)];
        if is_fast(d.as_ref()) {
            sizes.extend([(4096, 1000), (1151, 8192), (512, 16384), (33, 12289), (300, 32768)]);
        }
        for (i, &(m, n)) in sizes.iter().enumerate() {
            let outcome = tutorials::layer_norm::layer_norm(d.as_ref(), m, n, 70 + i as u64);
            check(d.as_ref(), &format!("layer norm {m}x{n}"), outcome);
        }
    }
}

/// The forward kernel of several rows a program on ragged rows and row counts (the last
/// program's rows past `M` masked): each row in one warp, two rows a warp, and a row on
/// two warps.
#[test]
fn gpu_layer_norm_row_blocks_match_the_reference() {
    use tutorials::layer_norm::{forward_only, row_block_launch};
    let (_turn, devices) = devices();
    for d in devices {
        for (i, &(m, n)) in [(37, 1), (129, 781), (17, 3000), (10, 2048)].iter().enumerate() {
            for (block_m, warps) in [(4, 4), (8, 4), (2, 4)] {
                let launch = |_: &tutorials::layer_norm::Forward| {
                    Ok(row_block_launch(m, n, block_m, warps)?.expect("rows of one block"))
                };
                let outcome = forward_only(d.as_ref(), m, n, 100 + i as u64, launch);
                check(
                    d.as_ref(),
                    &format!("layer norm {m}x{n}, {block_m} rows on {warps} warps"),
                    outcome,
                );
            }
        }
    }
}

/// Rows over 64 KiB: the softmax and layer norm tutorials' host code picks the long-row
/// kernels by itself.
#[test]
fn gpu_long_rows_match_the_reference() {
    let (_turn, devices) = devices();
    for d in devices {
        let mut softmax = vec![(5, 16385), (3, 50001)];
        let mut layer_norm = vec![(3, 32769), (2, 70000)];
        if is_fast(d.as_ref()) {
            softmax.extend([(64, 32768), (7, 65_537), (33, 100_003), (16, 262_144)]);
            layer_norm.extend([(64, 65536), (8, 262_147)]);
        }
        for (i, &(rows, cols)) in softmax.iter().enumerate() {
            let outcome = tutorials::long_rows::softmax(d.as_ref(), rows, cols, 80 + i as u64);
            check(d.as_ref(), &format!("long-row softmax {rows}x{cols}"), outcome);
        }
        for (i, &(m, n)) in layer_norm.iter().enumerate() {
            let outcome = tutorials::long_rows::layer_norm(d.as_ref(), m, n, 90 + i as u64);
            check(d.as_ref(), &format!("long-row layer norm {m}x{n}"), outcome);
        }
    }
}

/// The long-row softmax's host code on the interpreter, which has thread-block clusters:
/// rows past what one program holds are shared by the programs of a cluster (4, 5 and 16
/// programs here, the last share of each ragged).
#[test]
fn long_row_softmax_in_clusters_on_the_interpreter() {
    let cpu = rutile::CpuDevice::new();
    for (i, &(rows, cols)) in [(2, 50_001), (1, 65_537), (1, 262_143)].iter().enumerate() {
        let outcome = tutorials::long_rows::softmax(&cpu, rows, cols, 70 + i as u64);
        let detail = outcome.as_ref().ok().and_then(|o| o.detail.clone()).unwrap_or_default();
        assert!(detail.contains("cluster of"), "{rows}x{cols}: {detail}");
        check(&cpu, &format!("long-row softmax {rows}x{cols}"), outcome);
    }
}

/// The cluster softmax's launch at 262144 columns (16 programs of 8 warps, 64 columns a
/// thread) on each CUDA GPU with clusters of 16: whole clusters are resident at once, and
/// its register limit holds at least as many as the same kernel without one. Prints both
/// counts.
#[test]
fn gpu_cluster_softmax_clusters_are_resident() {
    use rutile::DeviceExt;
    use tutorials::long_rows;
    let (_turn, devices) = devices();
    for d in devices {
        if d.properties().backend != rutile::Backend::Cuda || d.properties().max_cluster() < 16 {
            continue;
        }
        let Some(ordinal) = d.id().strip_prefix("cuda:").and_then(|o| o.parse().ok()) else {
            continue;
        };
        let gpu = rutile::CudaGpu::open(ordinal).unwrap();
        let (rows, cols) = (1024, 262_144);
        let shape = long_rows::cluster_for(cols, 16).unwrap();
        let (kernel, config) = long_rows::softmax_cluster_launch_on(rows, cols, shape).unwrap();
        // (Compiling looks at the arguments' types, not their values.)
        let x = gpu.upload(&[0.5f32; 4]).unwrap();
        let y = gpu.upload(&[0.0f32; 4]).unwrap();
        let args = rutile_examples::tutorials::softmax_args(&y, &x, rows, cols);
        let resident = |config: &rutile::LaunchConfig| {
            let compiled = gpu.compile_for(&kernel, config, &args).unwrap();
            (gpu.resident_clusters(&compiled).unwrap(), compiled.metadata.registers)
        };
        let (capped, capped_registers) = resident(&config);
        let (free, free_registers) = resident(&config.maxnreg(None));
        println!(
            "{}: clusters of {} resident at once: {capped} at {capped_registers:?} registers (limit {:?}), {free} at {free_registers:?} without the limit",
            d.id(),
            shape.cluster,
            config.maxnreg
        );
        assert!(capped >= 1 && capped >= free, "{}: {capped} against {free}", d.id());
    }
}

/// The cluster softmax whose clusters walk rows, its next rows' shares copied ahead
/// (`long_rows::softmax_cluster_rows_launch_on`, 2 and 3 stages), on each device with
/// clusters, including the interpreter (rows walked in turn there): on the grid of resident
/// clusters, at ragged rows whose last share is partly masked, with as many rows as
/// clusters and more; each row against the f64 reference on random inputs.
#[test]
fn gpu_cluster_row_walk_matches_the_reference() {
    use rutile::DeviceExt;
    use rutile_examples::check::{max_relative_error, softmax_reference};
    use tutorials::long_rows;
    let (_turn, mut devices) = devices();
    devices.push(Arc::new(rutile::CpuDevice::new()));
    for d in devices {
        let max = d.properties().max_cluster();
        let sizes: &[(usize, usize)] = if is_fast(d.as_ref()) {
            &[(7, 65_537), (300, 100_003), (16, 262_144), (5, 262_143)]
        } else {
            &[(3, 50_001), (2, 65_537)]
        };
        for (i, &(rows, cols)) in sizes.iter().enumerate() {
            let Some(shape) = long_rows::cluster_for(cols, max) else {
                continue;
            };
            let mut rng = rutile_examples::rng::Rng::new(110 + i as u64);
            let x = rutile_examples::rng::normal_f32s(&mut rng, rows * cols);
            let want = softmax_reference(&x, rows, cols);
            let xb = d.upload(&x).unwrap();
            for stages in [2, 3] {
                let yb = d.upload(&vec![f32::NAN; rows * cols]).unwrap();
                let args = tutorials::softmax_args(&yb, &xb, rows, cols);
                let at = format!("{}: {rows}x{cols}, {shape:?}, {stages} stages", d.id());
                let (kernel, config) =
                    long_rows::softmax_cluster_rows_launch_on(d.as_ref(), rows, cols, shape, stages, &args)
                        .unwrap_or_else(|e| panic!("{at}: {e}"));
                d.launch(&kernel, &config, &args)
                    .unwrap_or_else(|e| panic!("{at}: {e}"));
                let got: Vec<f64> = d.download(&yb).unwrap().iter().map(|&v| v as f64).collect();
                let (error, _) = max_relative_error(got, &want, 1e-30);
                println!("{at}: {} clusters, error {error:.2e}", config.grid[0] / shape.cluster);
                assert!(error <= 1e-5, "{at}: error {error:e}");
            }
        }
    }
}

/// The libdevice tutorial's `asin` kernel on every device, against `f64::asin`, at ragged
/// lengths (the last program masked).
#[test]
fn gpu_asin_matches_the_reference() {
    let (_turn, devices) = devices();
    for d in devices {
        let mut sizes = vec![1, 1000, 4097];
        if is_fast(d.as_ref()) {
            sizes.push(98431);
        }
        for (i, &n) in sizes.iter().enumerate() {
            let outcome = tutorials::math_functions::asin(d.as_ref(), n, 90 + i as u64);
            check(d.as_ref(), &format!("asin {n}"), outcome);
        }
    }
}

/// The matmul tutorial's fp8 run (E5M2, B column-major, autotuned) on every hardware
/// device with fp8 types, against the exact product: ragged shapes (B's columns then
/// 16-byte misaligned) and an aligned one (TMA boxes of bytes on Hopper). (Software
/// devices run the fp8 kernel in fixed configurations in `gpu_matmul.rs`: autotuning it
/// there takes minutes.)
#[test]
fn gpu_fp8_matmul_tutorial_matches_the_reference() {
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        if !d.properties().supported_types.contains(&rutile::ScalarType::F8E5M2) || !is_fast(d) {
            println!("{}: no fp8 types, or a software device", d.id());
            continue;
        }
        let shapes = [(61, 47, 83), (509, 381, 263), (512, 384, 512)];
        for (i, &shape) in shapes.iter().enumerate() {
            let outcome = tutorials::fp8_matmul(d, shape, 95 + i as u64);
            check(d, &format!("fp8 matmul {shape:?}"), outcome);
        }
    }
}

/// The grouped GEMM tutorial on every device: ragged problems (edges in every dimension,
/// an empty one, an empty sum) with NaN in every padding (which must reach no C and stay
/// where it is), aligned tables (16-byte loads) and packed ones, fewer programs than tiles
/// walking them; then the tutorial's host code, autotuned.
#[test]
fn gpu_grouped_matmul_matches_the_reference() {
    use half::f16;
    use rutile::DeviceExt;
    use tutorials::grouped_matmul::{grouped_matmul, tutorial_problems, GroupedMatmul};
    let (_turn, devices) = devices();
    for d in devices {
        let d = d.as_ref();
        let problems = [
            (77, 45, 29),
            (64, 64, 64),
            (1, 70, 17),
            (130, 3, 40),
            (0, 20, 8),
            (5, 7, 0),
        ];
        let blocks = if is_fast(d) {
            vec![(64, 64, 32, 4), (128, 128, 64, 8)]
        } else {
            vec![(32, 32, 32, 4)]
        };
        for (bm, bn, bk, warps) in blocks {
            for aligned in [true, false] {
                let meta = rutile::seeds::GroupedMatmulMeta::new((bm, bn, bk), aligned);
                let what = format!("grouped matmul {bm}x{bn}x{bk}, aligned {aligned}");
                let run = || -> rutile::Result<(f64, bool)> {
                    let group = GroupedMatmul::new(d, &problems, aligned, f16::NAN, 31)?;
                    let kernel = rutile::seeds::grouped_matmul(&meta)?;
                    // Three programs: each walks several tiles of several problems.
                    let mut launch = group.launch(d, &kernel, &meta, (warps, 3))?;
                    launch.grid = [3, 1, 1];
                    d.launch(&kernel, &launch, &group.args())?;
                    group.check(d, f16::NAN)
                };
                match run() {
                    Ok((error, padding_kept)) => {
                        assert!(padding_kept, "{}: {what}: wrote outside the problems' C", d.id());
                        assert!(error <= 2e-3, "{}: {what}: error {error:.2e}", d.id());
                    }
                    Err(e) => panic!("{}: {what}: {e}", d.id()),
                }
            }
        }
        let outcome = grouped_matmul(d, tutorial_problems(d), 32);
        check(d, "grouped matmul, the tutorial's problems", outcome);
    }
}
