//! How the timing method moves the figures of launches that take microseconds: the same
//! kernels timed one launch at a time after an L2 flush that leaves the cache dirty (a
//! copy, as `triton.testing.do_bench` zeroes a buffer) or clean (a read), and back to back
//! over rotating buffers (no flush: eight input sets, more than the L2 holds).
//!
//!     cargo run --release -p rutile-benches --example timing_study [-- DEVICE_PREFIX]
//!
//! Each line: microseconds per launch (median) and the fraction of the copy ceiling.

use rutile::seeds;
use rutile::{Arg, Buffer, Device, DeviceExt, DeviceType, Kernel, LaunchConfig, ScalarType};
use rutile_examples::bench::{copy_kernel, do_bench, gbps, CacheFlush, FlushMode, COPY_BLOCK};
use rutile_examples::rng::{normal_f32s, Rng};

/// Input sets rotated through by the back-to-back timing.
const SETS: usize = 8;

struct Case {
    name: String,
    bytes: f64,
    kernel: Kernel,
    config: LaunchConfig,
    /// One argument list per input set.
    sets: Vec<Vec<Buffer<f32>>>,
    scalars: Vec<i32>,
}

impl Case {
    fn args(&self, set: usize) -> Vec<Arg<'_>> {
        let mut a: Vec<Arg<'_>> = self.sets[set].iter().map(Arg::from).collect();
        a.extend(self.scalars.iter().map(|&s| Arg::from(s)));
        a
    }
}

fn main() -> rutile::Result<()> {
    let prefix = std::env::args().nth(1).unwrap_or_default();
    let devices: Vec<_> = rutile::list_devices()
        .into_iter()
        .filter(|l| l.id.starts_with(&prefix))
        .filter_map(|l| l.device.ok())
        .filter(|d| d.properties().device_type != DeviceType::Cpu)
        .collect();
    for dev in &devices {
        study(dev.as_ref())?;
    }
    Ok(())
}

fn study(dev: &dyn Device) -> rutile::Result<()> {
    let mut rng = Rng::new(11);
    let n_copy = 1usize << 28;
    let (a, b) = (dev.upload(&rng.f32s(n_copy, 0.5, 1.5))?, dev.zeros::<f32>(n_copy)?);
    // The ceiling, as in the benchmark: the faster of the driver's copy and a copy kernel
    // (wgpu's buffer copy may go through a slower copy engine).
    let copy = do_bench(dev, None, 3, 20, &mut || dev.copy(a.raw(), b.raw()))?;
    let (kernel, config) = (
        copy_kernel(0)?,
        LaunchConfig::grid1((n_copy as u32).div_ceil(COPY_BLOCK)),
    );
    let args = [(&a).into(), (&b).into(), (n_copy as i32).into()];
    let by_kernel = do_bench(dev, None, 3, 20, &mut || dev.launch(&kernel, &config, &args))?;
    let ceiling = gbps(8.0 * n_copy as f64, copy.median_ms.min(by_kernel.median_ms));
    drop((a, b));
    println!(
        "\n== {} ({}): ceiling {ceiling:.0} GB/s",
        dev.id(),
        dev.properties().name
    );

    let mut cases = Vec::new();
    let add = seeds::vector_add(ScalarType::F32, 1024)?;
    for log in [0u32, 21, 22, 23, 24] {
        let n = if log == 0 { 0 } else { 1usize << log };
        let sets = (0..SETS)
            .map(|_| {
                let len = n.max(1);
                Ok(vec![
                    dev.upload(&rng.f32s(len, 0.5, 1.5))?,
                    dev.upload(&rng.f32s(len, 0.5, 1.5))?,
                    dev.zeros::<f32>(len)?,
                ])
            })
            .collect::<rutile::Result<Vec<_>>>()?;
        cases.push(Case {
            name: if n == 0 {
                "empty launch".into()
            } else {
                format!("vector add 2^{log}")
            },
            bytes: 12.0 * n as f64,
            kernel: add.clone(),
            config: LaunchConfig::grid1((n as u32).div_ceil(1024).max(1)),
            sets,
            scalars: vec![n as i32],
        });
    }
    // The smallest program: 128 elements, one warp, a quarter of the code.
    let sets = (0..SETS)
        .map(|_| Ok(vec![dev.zeros::<f32>(1)?, dev.zeros::<f32>(1)?, dev.zeros::<f32>(1)?]))
        .collect::<rutile::Result<Vec<_>>>()?;
    cases.push(Case {
        name: "empty launch, 1 warp".into(),
        bytes: 0.0,
        kernel: seeds::vector_add(ScalarType::F32, 128)?,
        config: LaunchConfig::grid1(1).num_warps(1),
        sets,
        scalars: vec![0],
    });
    let (m, n) = (4096usize, 1024usize);
    for (form, kernel, warps) in [
        ("simple", seeds::softmax(1024)?, 4),
        ("simple", seeds::softmax(1024)?, 2),
        (
            "simple-cs",
            seeds::softmax_with(1024, rutile::CacheModifier::Streaming)?,
            2,
        ),
        ("rows2", seeds::softmax_rows(2, 1024)?, 4),
    ] {
        let rows = if form == "rows2" { 2 } else { 1 };
        let sets = softmax_sets(dev, &mut rng, m * n)?;
        cases.push(Case {
            name: format!("softmax {m}x{n} {form} w{warps}"),
            bytes: 8.0 * (m * n) as f64,
            kernel,
            config: LaunchConfig::grid1((m / rows) as u32).num_warps(warps),
            sets,
            scalars: vec![n as i32, n as i32, m as i32, n as i32],
        });
    }

    // The persistent form at fixed grids, the same on both backends (multiples of the
    // H100's 132 multiprocessors): each program loads its next row before reducing the
    // current one, which hides the reductions' latency if anything does.
    for programs in [264u32, 528, 1056, 2112] {
        let sets = softmax_sets(dev, &mut rng, m * n)?;
        cases.push(Case {
            name: format!("softmax {m}x{n} persistent w4 x{programs}"),
            bytes: 8.0 * (m * n) as f64,
            kernel: seeds::softmax_persistent(1024)?,
            config: LaunchConfig::grid1(programs).num_warps(4),
            sets,
            scalars: vec![n as i32, n as i32, m as i32, n as i32],
        });
    }

    // The softmax's steps one at a time, each a kernel of the softmax's shape (one row of
    // 1024 per program, 4 warps): which of them costs what the copy does not.
    for step in RowStep::ALL {
        let mut sets = softmax_sets(dev, &mut rng, m * n)?;
        for set in &mut sets {
            set.push(dev.zeros::<f32>(m)?);
        }
        cases.push(Case {
            name: format!("row step: {}", step.name()),
            bytes: 8.0 * (m * n) as f64,
            kernel: step.kernel(n as u32)?,
            config: LaunchConfig::grid1(m as u32).num_warps(4),
            sets,
            scalars: vec![n as i32],
        });
    }
    // One launch copying the 32 MB that softmax moves: the floor of a kernel moving those
    // bytes through this backend, and the same with 60 unused scalar parameters (a launch
    // block too large for immediates).
    for (unused, name) in [(0, "copy kernel 16 MiB"), (60, "copy kernel 16 MiB, 61 args")] {
        let sets = (0..SETS)
            .map(|_| Ok(vec![dev.upload(&rng.f32s(m * n, 0.5, 1.5))?, dev.zeros::<f32>(m * n)?]))
            .collect::<rutile::Result<Vec<_>>>()?;
        let mut scalars = vec![(m * n) as i32];
        scalars.extend(std::iter::repeat_n(0, unused));
        cases.push(Case {
            name: name.into(),
            bytes: 8.0 * (m * n) as f64,
            kernel: copy_kernel(unused)?,
            config: LaunchConfig::grid1(((m * n) as u32).div_ceil(COPY_BLOCK)),
            sets,
            scalars,
        });
    }
    // An empty launch with a large launch block.
    let sets = (0..SETS)
        .map(|_| Ok(vec![dev.zeros::<f32>(1)?, dev.zeros::<f32>(1)?]))
        .collect::<rutile::Result<Vec<_>>>()?;
    let mut scalars = vec![0];
    scalars.extend(std::iter::repeat_n(0, 60));
    cases.push(Case {
        name: "empty launch, 61 args".into(),
        bytes: 0.0,
        kernel: copy_kernel(60)?,
        config: LaunchConfig::grid1(1),
        sets,
        scalars,
    });

    host_costs(dev, &cases)?;
    if let Some(index) = dev.id().strip_prefix("vulkan:").and_then(|i| i.parse().ok()) {
        dispatch_costs(rutile::WgpuGpu::open(Some(index))?.wgpu())?;
        immediates_or_uniform(index, &mut rng)?;
    }
    let flushes = [
        CacheFlush::new(dev, FlushMode::Copy)?,
        CacheFlush::new(dev, FlushMode::Read)?,
    ];
    println!(
        "{:<28} {:>20} {:>20} {:>20}",
        "kernel", "copy flush", "read flush", "back to back"
    );
    for c in &cases {
        let cell = |ms: f64| {
            if c.bytes == 0.0 {
                format!("{:.2} us", ms * 1e3)
            } else {
                format!("{:.2} us {:>5.1}%", ms * 1e3, 100.0 * gbps(c.bytes, ms) / ceiling)
            }
        };
        let mut cells = Vec::new();
        for f in &flushes {
            let args = c.args(0);
            let s = do_bench(dev, Some(f), 3, 50, &mut || dev.launch(&c.kernel, &c.config, &args))?;
            cells.push(cell(s.median_ms));
        }
        let all: Vec<Vec<Arg<'_>>> = (0..SETS).map(|i| c.args(i)).collect();
        let s = do_bench(dev, None, 3, 20, &mut || {
            for args in &all {
                dev.launch(&c.kernel, &c.config, args)?;
            }
            Ok(())
        })?;
        cells.push(cell(s.median_ms / SETS as f64));
        println!("{:<28} {:>20} {:>20} {:>20}", c.name, cells[0], cells[1], cells[2]);
    }
    // The device's own copy of the bytes a 4096 x 1024 softmax moves.
    let n = 4096 * 1024;
    let (a, b) = (dev.upload(&rng.f32s(n, 0.5, 1.5))?, dev.zeros::<f32>(n)?);
    let mut cells = Vec::new();
    for f in &flushes {
        let s = do_bench(dev, Some(f), 3, 50, &mut || dev.copy(a.raw(), b.raw()))?;
        cells.push(format!(
            "{:.2} us {:>5.1}%",
            s.median_ms * 1e3,
            100.0 * gbps(8.0 * n as f64, s.median_ms) / ceiling
        ));
    }
    println!("{:<28} {:>20} {:>20}", "copy of 16 MiB", cells[0], cells[1]);
    Ok(())
}

/// `SETS` argument sets of a softmax of `len` elements: an output, and a random input.
fn softmax_sets(dev: &dyn Device, rng: &mut Rng, len: usize) -> rutile::Result<Vec<Vec<Buffer<f32>>>> {
    (0..SETS)
        .map(|_| Ok(vec![dev.zeros::<f32>(len)?, dev.upload(&normal_f32s(rng, len))?]))
        .collect()
}

/// Host time per launch, in microseconds, of the cached compile lookup, of launching a
/// compiled kernel, and of both (`DeviceExt::launch`): what a loop of small launches pays
/// before the GPU sees any work.
fn host_costs(dev: &dyn Device, cases: &[Case]) -> rutile::Result<()> {
    const N: usize = 2000;
    let softmax = cases
        .iter()
        .find(|c| c.name.starts_with("softmax"))
        .expect("a softmax case");
    for c in [&cases[0], softmax] {
        let args = c.args(0);
        let compiled = dev.compile_for(&c.kernel, &c.config, &args)?;
        let t = std::time::Instant::now();
        for _ in 0..N {
            dev.compile_for(&c.kernel, &c.config, &args)?;
        }
        let lookup = t.elapsed().as_secs_f64() * 1e6 / N as f64;
        dev.synchronize()?;
        let t = std::time::Instant::now();
        for _ in 0..N {
            dev.launch_compiled(&compiled, c.config.grid, &args)?;
        }
        let queue = t.elapsed().as_secs_f64() * 1e6 / N as f64;
        dev.synchronize()?;
        let t = std::time::Instant::now();
        for _ in 0..N {
            dev.launch(&c.kernel, &c.config, &args)?;
        }
        let both = t.elapsed().as_secs_f64() * 1e6 / N as f64;
        dev.synchronize()?;
        println!(
            "host cost per launch of {}: compile lookup {lookup:.2} us, launch_compiled {queue:.2} us, launch {both:.2} us",
            c.name
        );
    }
    Ok(())
}

/// GPU time of an empty dispatch through the wgpu layer, by what it binds: what a Vulkan
/// launch costs before its kernel does anything.
fn dispatch_costs(device: &rutile::vulkan::WgpuDevice) -> rutile::Result<()> {
    use rutile::vulkan::{BindingLayout, KernelSource, WgpuBuffer};
    let x = WgpuBuffer::zeroed(device, 1024)?;
    let shaders = [
        ("no bindings", "@compute @workgroup_size(128) fn k() {}", 0, false),
        (
            "one storage buffer",
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
             @compute @workgroup_size(128) fn k(@builtin(local_invocation_index) i: u32) {
                 if i == 1000u { x[0] = 1.0; } }",
            1,
            false,
        ),
        (
            "storage buffer + uniform",
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
             @group(0) @binding(1) var<uniform> u: vec4<u32>;
             @compute @workgroup_size(128) fn k(@builtin(local_invocation_index) i: u32) {
                 if i == u.x { x[0] = 1.0; } }",
            1,
            true,
        ),
        (
            "three storage buffers + uniform",
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;
             @group(0) @binding(2) var<storage, read_write> z: array<f32>;
             @group(0) @binding(3) var<uniform> u: vec4<u32>;
             @compute @workgroup_size(128) fn k(@builtin(local_invocation_index) i: u32) {
                 if i == u.x { z[0] = x[0] + y[0]; } }",
            3,
            true,
        ),
    ];
    let y = WgpuBuffer::zeroed(device, 1024)?;
    let z = WgpuBuffer::zeroed(device, 1024)?;
    for (name, wgsl, storage, uniform) in shaders {
        let pipeline = device.create_pipeline(
            KernelSource::Wgsl(wgsl.into()),
            "k",
            BindingLayout::new(storage, uniform),
        )?;
        let buffers: Vec<&WgpuBuffer> = [&x, &y, &z][..storage as usize].to_vec();
        let u = [1000u32, 0, 0, 0];
        let u = uniform.then_some(bytemuck_bytes(&u));
        let mut times = Vec::new();
        for _ in 0..50 {
            if let Some(ms) = device.dispatch_timed(&pipeline, &buffers, u.as_deref(), [1, 1, 1])? {
                times.push(ms * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        if let Some(t) = times.get(times.len() / 2) {
            println!("empty dispatch, {name}: {t:.2} us");
        }
        if storage == 3 {
            let mut times = Vec::new();
            for _ in 0..50 {
                let mut pass = None;
                device.time_queued(&mut || {
                    pass = device.dispatch_timed(&pipeline, &buffers, u.as_deref(), [1, 1, 1])?;
                    Ok::<_, rutile::vulkan::WgpuError>(())
                })?;
                times.push(pass.unwrap_or(f64::NAN) * 1e3);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "empty dispatch, {name}, inside time_queued: {:.2} us",
                times[times.len() / 2]
            );
            // SAFETY: the shader's accesses are in bounds.
            let trusted = unsafe {
                device.create_pipeline_trusted(
                    KernelSource::Wgsl(wgsl.into()),
                    "k",
                    BindingLayout::new(storage, uniform),
                )?
            };
            let mut times = Vec::new();
            for _ in 0..50 {
                times.push(
                    device
                        .dispatch_timed(&trusted, &buffers, u.as_deref(), [1, 1, 1])?
                        .unwrap_or(f64::NAN)
                        * 1e3,
                );
            }
            times.sort_by(f64::total_cmp);
            println!("empty dispatch, {name}, trusted: {:.2} us", times[times.len() / 2]);
            // After emptying the L2 by a 256 MiB copy, as the benchmark does.
            let big = WgpuBuffer::zeroed(device, 256 << 20)?;
            let big2 = WgpuBuffer::zeroed(device, 256 << 20)?;
            let mut times = Vec::new();
            for _ in 0..50 {
                big2.copy_from(&big)?;
                device.synchronize()?;
                times.push(
                    device
                        .dispatch_timed(&trusted, &buffers, u.as_deref(), [1, 1, 1])?
                        .unwrap_or(f64::NAN)
                        * 1e3,
                );
            }
            times.sort_by(f64::total_cmp);
            println!(
                "empty dispatch, {name}, trusted, after an L2 flush: {:.2} us",
                times[times.len() / 2]
            );
        }
    }
    Ok(())
}

fn bytemuck_bytes(v: &[u32; 4]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// GPU time of an empty launch and of a 32 MB copy kernel on Vulkan with the launch block
/// in a uniform buffer and in immediates (`WgpuOptions::immediates`), after a copy flush.
fn immediates_or_uniform(index: usize, rng: &mut Rng) -> rutile::Result<()> {
    let n = 4096 * 1024;
    let x = rng.f32s(n, 0.5, 1.5);
    for immediates in [false, true] {
        let dev = rutile::WgpuGpu::open_with(
            Some(index),
            rutile::WgpuOptions {
                immediates,
                ..rutile::WgpuOptions::from_env().unwrap()
            },
        )?;
        let flush = CacheFlush::new(&dev, FlushMode::Copy)?;
        let (src, dst) = (dev.upload(&x)?, dev.zeros::<f32>(n)?);
        let kernel = copy_kernel(0)?;
        let mut cells = Vec::new();
        for len in [0, n] {
            let config = LaunchConfig::grid1((len as u32).div_ceil(COPY_BLOCK).max(1));
            let args = [(&src).into(), (&dst).into(), (len as i32).into()];
            let s = do_bench(&dev, Some(&flush), 3, 50, &mut || dev.launch(&kernel, &config, &args))?;
            cells.push(format!("{:.2} us", s.median_ms * 1e3));
        }
        println!(
            "launch block in {}: empty launch {}, copy kernel 16 MiB {}",
            if immediates { "immediates" } else { "a uniform buffer" },
            cells[0],
            cells[1]
        );
    }
    Ok(())
}

/// One step of the softmax, alone, over rows: `out[row, :] = f(in[row, :])`.
#[derive(Clone, Copy)]
enum RowStep {
    /// `x`: the row copied, with the softmax's masked load and store.
    Copy,
    /// `exp(x)`.
    Exp,
    /// `x - max(x)`: one reduction broadcast back.
    SubMax,
    /// `x / sum(x)`: one reduction and a division.
    DivSum,
    /// `x`, and the row's maximum stored aside: the reduction without the stores of the
    /// row waiting for it.
    MaxAside,
}

impl RowStep {
    const ALL: [RowStep; 5] = [
        RowStep::Copy,
        RowStep::Exp,
        RowStep::SubMax,
        RowStep::DivSum,
        RowStep::MaxAside,
    ];

    fn name(self) -> &'static str {
        match self {
            RowStep::Copy => "copy",
            RowStep::Exp => "exp",
            RowStep::SubMax => "x - max",
            RowStep::DivSum => "x / sum",
            RowStep::MaxAside => "x, max aside",
        }
    }

    fn kernel(self, block: u32) -> rutile::Result<Kernel> {
        Ok(Kernel::build("row_step", |k| {
            let out = k.arg_ptr("out", ScalarType::F32);
            let inp = k.arg_ptr("inp", ScalarType::F32);
            let aside = k.arg_ptr("aside", ScalarType::F32);
            let n_cols = k.arg_i32("n_cols");
            let cols = k.arange(0, block as i32);
            let mask = cols.lt(n_cols);
            let row = k.program_id(0) * n_cols;
            let x = k.load_masked(inp + row + cols, mask, 0.0);
            let y = match self {
                RowStep::Copy => x,
                RowStep::Exp => x.exp(),
                RowStep::SubMax => x - x.max(0),
                RowStep::DivSum => x / x.sum(0),
                RowStep::MaxAside => {
                    k.store(aside + k.program_id(0), x.max(0));
                    x
                }
            };
            k.store_masked(out + row + cols, y, mask);
        })?)
    }
}
