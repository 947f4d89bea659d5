//! Times hand-edited WGSL versions of the tutorial's matmul against each other on a Vulkan
//! device: the way to learn what the driver's compiler makes of a structure (cooperative
//! matrices, stages, barriers, the epilogue's exchange) before changing rutile's code
//! generator. Dump the kernel's WGSL with `RUTILE_DUMP=DIR` (the `matmul_kernel.<n>.wgsl`
//! of the configuration; its `thread.ir` beside it names the blocks), copy it, edit the
//! copies, and time them here beside the unedited one.
//!
//!     cargo run --release -p rutile-benches --example matmul_wgsl_variants -- DIR [SIZE] [ADAPTER]
//!
//! Every `DIR/*.wgsl` must end its name with its block, `_<BLOCK_M>x<BLOCK_N>.wgsl`, which
//! sets the grid (one program per block of C, as `seeds::matmul_grid`); entry point
//! `matmul_kernel`, bindings as rutile emits them (A, B, C, then the launch uniform, whose
//! members are filled by name). A, B and C are row-major f16 of `SIZE x SIZE` (default
//! 4096), A and B uniform in [-1, 1). Each timing follows a 256 MiB copy that empties the
//! L2 (as the benchmark's); median of 20 after 5 warm-up launches, with device timestamps.
//! Each result is checked at 256 entries of C against an f64 product of the same inputs
//! (relative error; a kernel that writes nothing or the wrong place shows).
//!
//! Each file is timed six ways ([`Mode`]): compiled from its WGSL as written ("as WGSL");
//! as rutile's runtime hands its own kernels to a driver that takes SPIR-V as it is
//! ("read-only"): SPIR-V 1.4 words with A and B declared `NonWritable` (see
//! `rutile_spirv::SpirvKernel::read_only_bindings`), which lets NVIDIA's driver load them
//! through its read-only path; and the steps between, so that a difference between the
//! two is pinned on one of them: SPIR-V 1.3 words without debug names, as wgpu writes them
//! outside debug builds ("spv1.3 nameless"), rutile's SPIR-V 1.3 words with no hints
//! ("spv1.3"), and its 1.4 words with no hints ("spv1.4"). The sixth ("bare barriers") is a
//! timing model: the read-only words with the barriers' memory semantics removed.
//!
//! Run it at least twice and read the later runs: through NVIDIA's driver the process that
//! first compiled a set of edited variants timed them slow and erratic (up to 4x), and the
//! processes after it, which found them in the driver's cache, agreed within 0.5%.

use half::f16;
use rutile::vulkan::naga;
use rutile::vulkan::{BindingLayout, KernelSource, WgpuBuffer};
use rutile_examples::rng::Rng;

const ENTRY: &str = "matmul_kernel";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: matmul_wgsl_variants DIR [SIZE] [ADAPTER]";
    let dir = args.next().ok_or(usage)?;
    let size: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4096);
    let index = args.next().map(|s| s.parse()).transpose()?;
    let gpu = rutile::WgpuGpu::open(index)?;
    let device = gpu.wgpu();
    println!("{}, {size}^3 f16 -> f32 accumulation -> f16", device.properties().name);

    let mut rng = Rng::new(11);
    let a: Vec<f16> = rng
        .f32s(size * size, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let b: Vec<f16> = rng
        .f32s(size * size, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let (a_buf, b_buf) = (WgpuBuffer::from_slice(device, &a)?, WgpuBuffer::from_slice(device, &b)?);
    let c_buf = WgpuBuffer::zeroed(device, size * size * 2)?;
    let flush_bytes = (256usize << 20).min(device.properties().max_storage_buffer_binding_size as usize);
    let (flush_src, flush_dst) = (
        WgpuBuffer::zeroed(device, flush_bytes)?,
        WgpuBuffer::zeroed(device, flush_bytes)?,
    );
    // The entries of C checked, and their f64 values.
    let probes: Vec<(usize, usize, f64)> = (0..256)
        .map(|_| {
            let (i, j) = (rng.below(size as u64) as usize, rng.below(size as u64) as usize);
            let dot = (0..size)
                .map(|k| a[i * size + k].to_f64() * b[k * size + j].to_f64())
                .sum();
            (i, j, dot)
        })
        .collect();

    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "wgsl"));
    files.sort();
    if files.is_empty() {
        return Err(format!("no .wgsl files in {dir}").into());
    }
    let modes: &[Mode] = if device.features().spirv_passthrough {
        &[
            Mode::Wgsl,
            Mode::Nameless13,
            Mode::Spirv13,
            Mode::Spirv14,
            Mode::ReadOnly,
            Mode::BareBarriers,
        ]
    } else {
        &[Mode::Wgsl]
    };
    for (path, &mode) in files.iter().flat_map(|p| modes.iter().map(move |m| (p, m))) {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        let wgsl = std::fs::read_to_string(path)?;
        let label = format!("{name} {}", mode.label());
        match time_variant(
            device,
            &wgsl,
            mode,
            &name,
            size,
            (&a_buf, &b_buf, &c_buf),
            (&flush_src, &flush_dst),
        ) {
            Ok(ms) => {
                let c: Vec<f16> = c_buf.read_as()?;
                let (mut diff, mut norm) = (0.0f64, 0.0f64);
                for &(i, j, want) in &probes {
                    let got = c[i * size + j].to_f64();
                    diff += (got - want) * (got - want);
                    norm += want * want;
                }
                let err = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
                let verdict = if err <= 2e-3 { "ok" } else { "WRONG" };
                let tflops = 2.0 * (size as f64).powi(3) / (ms * 1e-3) / 1e12;
                println!("{label:<40} {ms:>8.4} ms  {tflops:>6.1} TFLOPS  relative error {err:.1e} {verdict}");
            }
            Err(e) => println!("{label:<40} {e}"),
        }
        c_buf.write(&vec![0u8; size * size * 2])?;
    }
    Ok(())
}

/// How a variant reaches the driver.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Its WGSL, through wgpu's own translation.
    Wgsl,
    /// Passthrough: SPIR-V 1.3 words without debug names (as wgpu writes them outside debug
    /// builds), no hints.
    Nameless13,
    /// Passthrough: rutile's SPIR-V 1.3 words, no hints.
    Spirv13,
    /// Passthrough: rutile's SPIR-V 1.4 words, no hints.
    Spirv14,
    /// Passthrough: rutile's SPIR-V 1.4 words with A and B `NonWritable`, as the runtime.
    ReadOnly,
    /// The same with every barrier's memory semantics removed: a timing model that tells
    /// whether the driver waits at a `workgroupBarrier` for loads in flight (the memory
    /// model then no longer promises that the workgroup stores are seen; the results are
    /// checked all the same).
    BareBarriers,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Wgsl => "as WGSL",
            Mode::Nameless13 => "spv1.3 nameless",
            Mode::Spirv13 => "spv1.3",
            Mode::Spirv14 => "spv1.4",
            Mode::ReadOnly => "read-only",
            Mode::BareBarriers => "read-only, bare barriers",
        }
    }
}

/// The median time in ms of the variant `wgsl` (named `name`, which ends with its block)
/// on `size`-square operands, handed to the driver as `mode` says.
#[allow(clippy::too_many_arguments)]
fn time_variant(
    device: &rutile::vulkan::WgpuDevice,
    wgsl: &str,
    mode: Mode,
    name: &str,
    size: usize,
    (a, b, c): (&WgpuBuffer, &WgpuBuffer, &WgpuBuffer),
    (flush_src, flush_dst): (&WgpuBuffer, &WgpuBuffer),
) -> Result<f64, Box<dyn std::error::Error>> {
    let (bm, bn) = block_of(name).ok_or("the file name does not end with _<BLOCK_M>x<BLOCK_N>")?;
    let programs = (size.div_ceil(bm) * size.div_ceil(bn)) as u32;
    let launch = launch_block(wgsl, programs, size)?;
    // SAFETY: a matmul variant indexes A, B and C within `size x size` (the user's edits
    // are trusted as rutile's own kernels are).
    let source = match mode {
        Mode::Wgsl => KernelSource::Wgsl(wgsl.into()),
        _ => passthrough_source(wgsl, mode)?,
    };
    let pipeline = unsafe { device.create_pipeline_trusted(source, ENTRY, BindingLayout::new(3, true))? };
    let mut times = Vec::new();
    for rep in 0..25 {
        flush_dst.copy_from(flush_src)?;
        device.synchronize()?;
        let ms = device.dispatch_timed(&pipeline, &[a, b, c], Some(&launch), [programs, 1, 1])?;
        if rep >= 5 {
            times.push(ms.ok_or("the device has no timestamp queries")?);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// rutile's SPIR-V words of `wgsl` as `mode` says; with `Mode::ReadOnly`, bindings 0 and 1
/// (A and B) declared `NonWritable`, as rutile's runtime hands the words of a kernel that
/// only loads them.
fn passthrough_source(wgsl: &str, mode: Mode) -> Result<KernelSource<'static>, Box<dyn std::error::Error>> {
    use rutile_spirv::naga as n;
    let module = n::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let info = n::valid::Validator::new(n::valid::ValidationFlags::all(), n::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(wgsl))?;
    let kernel = rutile_spirv::SpirvKernel {
        module: module.clone(),
        info,
        entry_point: ENTRY.into(),
        bindings: rutile_spirv::BindingLayout {
            storage: Vec::new(),
            launch: rutile_spirv::LaunchPlace::Uniform { binding: 3 },
            launch_size: 0,
            scalars: Vec::new(),
            print: None,
        },
        streaming_bindings: Vec::new(),
        coherent_bindings: Vec::new(),
        read_only_bindings: if matches!(mode, Mode::ReadOnly | Mode::BareBarriers) {
            vec![0, 1]
        } else {
            Vec::new()
        },
        prints: Vec::new(),
        coop_products: false,
        cooperative_matrices: true,
        exact_f64: false,
    };
    let words = match mode {
        Mode::Spirv13 => kernel.spirv_words()?,
        Mode::Nameless13 => {
            let options = n::back::spv::Options {
                lang_version: (1, 3),
                flags: n::back::spv::WriterFlags::empty(),
                zero_initialize_workgroup_memory: n::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
                force_loop_bounding: false,
                use_storage_input_output_16: false,
                ..Default::default()
            };
            let pipeline = n::back::spv::PipelineOptions {
                shader_stage: n::ShaderStage::Compute,
                entry_point: ENTRY.into(),
            };
            n::back::spv::write_vec(&kernel.module, &kernel.info, &options, Some(&pipeline))?
        }
        Mode::BareBarriers => bare_barriers(&kernel.spirv_words_hinted()?)?,
        _ => kernel.spirv_words_hinted()?,
    };
    Ok(KernelSource::SpirVPassthrough {
        words: words.into(),
        module: Box::new(module),
    })
}

/// `words` with the memory semantics of every `OpControlBarrier` set to none (a constant
/// 32-bit unsigned 0, added after the module's 32-bit unsigned type where it has none).
fn bare_barriers(words: &[u32]) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
    const OP_TYPE_INT: u32 = 21;
    const OP_CONSTANT: u32 = 43;
    const OP_CONTROL_BARRIER: u32 = 224;
    let instructions = |words: &[u32]| -> Vec<(usize, u32, usize)> {
        let mut at = 5;
        let mut out = Vec::new();
        while at < words.len() {
            let (count, op) = ((words[at] >> 16) as usize, words[at] & 0xffff);
            out.push((at, op, count.max(1)));
            at += count.max(1);
        }
        out
    };
    let mut words = words.to_vec();
    let all = instructions(&words);
    let (uint_at, uint) = all
        .iter()
        .find(|&&(at, op, _)| op == OP_TYPE_INT && words[at + 2] == 32 && words[at + 3] == 0)
        .map(|&(at, _, count)| (at + count, words[at + 1]))
        .ok_or("the module has no 32-bit unsigned type")?;
    let zero = match all
        .iter()
        .find(|&&(at, op, count)| op == OP_CONSTANT && count == 4 && words[at + 1] == uint && words[at + 3] == 0)
    {
        Some(&(at, _, _)) => words[at + 2],
        None => {
            let id = words[3];
            words[3] += 1;
            words.splice(uint_at..uint_at, [(4 << 16) | OP_CONSTANT, uint, id, 0]);
            id
        }
    };
    for (at, op, _) in instructions(&words) {
        if op == OP_CONTROL_BARRIER {
            words[at + 3] = zero;
        }
    }
    Ok(words)
}

/// `(BLOCK_M, BLOCK_N)` from a name ending `_<m>x<n>`.
fn block_of(name: &str) -> Option<(usize, usize)> {
    let (m, n) = name.rsplit('_').next()?.split_once('x')?;
    Some((m.parse().ok()?, n.parse().ok()?))
}

/// The launch uniform of the module in `wgsl`, its members filled by name: the grid, no
/// program offset, the sizes and the row-major strides.
fn launch_block(wgsl: &str, programs: u32, size: usize) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let uniform = module
        .global_variables
        .iter()
        .find(|(_, g)| g.space == naga::AddressSpace::Uniform)
        .ok_or("no uniform launch block")?
        .1;
    let naga::TypeInner::Struct { members, span } = &module.types[uniform.ty].inner else {
        return Err("the launch block is not a struct".into());
    };
    let mut block = vec![0u8; *span as usize];
    let s = size as u32;
    for m in members {
        let name = m.name.as_deref().unwrap_or("");
        let words: &[u32] = match name {
            "num_programs" => &[programs, 1, 1],
            "program_offset" => &[0, 0, 0],
            "M" | "N" | "K" | "stride_am" | "stride_bk" | "stride_cm" => &[s],
            "stride_ak" | "stride_bn" | "stride_cn" => &[1],
            other => return Err(format!("unknown launch member `{other}`").into()),
        };
        for (i, w) in words.iter().enumerate() {
            let at = m.offset as usize + 4 * i;
            block[at..at + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    Ok(block)
}
