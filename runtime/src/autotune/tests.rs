//! The autotuner on fake devices: choices, skips, the cache file, the parallel precompile.

use super::*;
use crate::buffer::DeviceBuffer;
use crate::compiled::{CompileOptions, CompiledKernel};
use crate::device::Backend;
use crate::CpuDevice;
use rutile_ir::analysis::extent::ExtentPlan;
use rutile_ir::lower::LowerError;
use rutile_ir::target::Specialization;
use rutile_ir::ScalarType;

/// The interpreter dressed as a GPU whose compiler reports, for each `num_warps`, the
/// resources [`resources_of`] says: what the tuner does with them can be tested
/// without one.
struct FakeGpu {
    cpu: CpuDevice,
    properties: DeviceProperties,
    /// Compiles running now, and the most that ever ran at once (each takes 20 ms, as a
    /// slow driver's would take longer).
    compiling: std::sync::atomic::AtomicUsize,
    most_compiling: std::sync::atomic::AtomicUsize,
}

/// 1 warp: a small kernel; 2: one that spills; 4: more shared memory than the device
/// gives; 8: more registers than 8 warps' threads can have.
fn resources_of(options: &CompileOptions) -> KernelMetadata {
    let threads = options.num_warps * 32;
    let (registers, spill_bytes, shared_bytes, max_threads) = match options.num_warps {
        1 => (40, 0, 1024, 1024),
        2 => (255, 128, 1024, 256),
        4 => (64, 0, 64 * 1024, 1024),
        _ => (255, 0, 0, 128),
    };
    KernelMetadata {
        threads,
        registers: Some(registers),
        spill_bytes: Some(spill_bytes),
        shared_bytes,
        max_threads: Some(max_threads),
        warp_specialized: false,
        dots: None,
        resident_programs: None,
        resident_clusters: None,
    }
}

impl FakeGpu {
    fn new() -> FakeGpu {
        let mut properties = DeviceProperties::unknown("fake gpu", "rutile", Backend::Cuda, DeviceType::Cpu);
        properties.shared_memory_per_block_optin = Some(48 * 1024);
        FakeGpu {
            cpu: CpuDevice::new(),
            properties,
            compiling: Default::default(),
            most_compiling: Default::default(),
        }
    }
}

impl Device for FakeGpu {
    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }
    fn alloc(&self, elem: ScalarType, len: usize) -> Result<DeviceBuffer> {
        self.cpu.alloc(elem, len)
    }
    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<()> {
        self.cpu.write(buffer, bytes)
    }
    fn read(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>> {
        self.cpu.read(buffer)
    }
    fn compile(&self, kernel: &Kernel, options: &CompileOptions, spec: &Specialization) -> Result<Arc<CompiledKernel>> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.compiling.fetch_add(1, SeqCst) + 1;
        self.most_compiling.fetch_max(now, SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20));
        self.compiling.fetch_sub(1, SeqCst);
        Ok(Arc::new(CompiledKernel {
            kernel: kernel.clone(),
            options: *options,
            specialization: spec.clone(),
            metadata: resources_of(options),
            code: None,
            artifact: Box::new(()),
            extent: ExtentPlan::new(kernel),
        }))
    }
    fn launch_compiled(&self, kernel: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
        self.cpu.launch_compiled(kernel, grid, args)
    }
    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<()> {
        self.cpu.copy(src, dst)
    }
    fn synchronize(&self) -> Result<()> {
        self.cpu.synchronize()
    }
    fn id(&self) -> String {
        "fake".into()
    }
    fn device_key(&self) -> u64 {
        self.cpu.device_key()
    }
}

/// Tunes a vector add of 1000 elements with `tuner` on a [`FakeGpu`].
fn tune(tuner: Autotuner) -> Result<Choice> {
    tune_on(&FakeGpu::new(), tuner)
}

fn tune_on(dev: &FakeGpu, tuner: Autotuner) -> Result<Choice> {
    let n = 1000;
    let (x, y, z) = (dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?);
    let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
    let build = |_: &Config| Ok(rutile_ir::seeds::vector_add(ScalarType::F32, 256)?);
    tuner
        .cache_file(None)
        .choose(dev, "1000", &build, &|_| Ok([4, 1, 1]), &args)
}

/// The configurations are compiled several at once, on the host's cores, before any is
/// timed: a driver that takes seconds a kernel (NVIDIA's Vulkan driver on cooperative
/// matrices) then costs the tuning a fraction of what it would one after another.
#[test]
fn configurations_compile_at_once_on_the_hosts_cores() {
    let dev = FakeGpu::new();
    let warps = [1, 1, 1, 1, 1, 1];
    let configs: Vec<Config> = warps
        .iter()
        .enumerate()
        .map(|(i, &w)| Config::new(&[("BLOCK", 256), ("COPY", i as i64)]).num_warps(w))
        .collect();
    let choice = tune_on(&dev, Autotuner::new("add", configs).unwrap()).unwrap();
    assert_eq!(choice.report.as_ref().unwrap().timed.len(), warps.len());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = dev.most_compiling.load(std::sync::atomic::Ordering::SeqCst);
    // (At least two at once where there are two cores; never more than the cores.)
    assert!(
        most >= cores.min(2) && most <= cores.min(warps.len()),
        "{most} compiles at once on {cores} cores"
    );
}

fn configs(warps: &[u32]) -> Vec<Config> {
    warps
        .iter()
        .map(|&w| Config::new(&[("BLOCK", 256)]).num_warps(w))
        .collect()
}

fn skipped_warps(choice: &Choice) -> Vec<(u32, SkipReason)> {
    let report = choice.report.as_ref().expect("a tuned choice has a report");
    report
        .skipped
        .iter()
        .map(|s| (s.config.num_warps, s.reason.clone()))
        .collect()
}

#[test]
fn each_timed_kernel_reports_its_resources_and_what_cannot_run_is_skipped() {
    let tuner = Autotuner::new("add", configs(&[1, 2, 4, 8]))
        .unwrap()
        .skip_spilling(false);
    let choice = tune(tuner).unwrap();
    let report = choice.report.as_ref().unwrap();
    let timed: Vec<(u32, &KernelMetadata)> = report.timed.iter().map(|t| (t.config.num_warps, &t.metadata)).collect();
    let (one, two) = (resources_of(&options(1)), resources_of(&options(2)));
    assert_eq!(timed, vec![(1, &one), (2, &two)], "spilling runs unless asked");
    assert!(report.timed.iter().all(|t| t.time_ms > 0.0));
    assert_eq!(
        skipped_warps(&choice),
        vec![
            (
                4,
                SkipReason::SharedMemory {
                    needed: 64 * 1024,
                    limit: 48 * 1024
                }
            ),
            (
                8,
                SkipReason::Registers {
                    registers: Some(255),
                    max_threads: 128,
                    threads: 256
                }
            ),
        ]
    );
    assert!([1, 2].contains(&choice.config.num_warps));
    assert_eq!(
        choice.metadata(),
        Some(&resources_of(&options(choice.config.num_warps)))
    );
}

fn options(num_warps: u32) -> CompileOptions {
    CompileOptions {
        num_warps,
        num_stages: 3,
        persistent: false,
        warp_specialize: false,
        tma_outer: false,
        maxnreg: None,
        cluster: 1,
        programs_per_block: 1,
    }
}

#[test]
fn spilling_configurations_are_skipped_when_asked() {
    let tuner = Autotuner::new("add", configs(&[2, 1])).unwrap().skip_spilling(true);
    let choice = tune(tuner).unwrap();
    assert_eq!(choice.config.num_warps, 1);
    let skipped = skipped_warps(&choice);
    assert_eq!(
        skipped,
        vec![(
            2,
            SkipReason::Spills {
                spill_bytes: 128,
                registers: Some(255)
            }
        )]
    );
    let text = skipped[0].1.to_string();
    assert!(
        text.contains("spills 128 bytes") && text.contains(AUTOTUNE_SKIP_SPILLS_ENV),
        "{text}"
    );
}

#[test]
fn when_nothing_runs_the_error_says_why_for_each() {
    let tuner = Autotuner::new("add", configs(&[2, 4, 8])).unwrap().skip_spilling(true);
    let text = tune(tuner).unwrap_err().to_string();
    for words in [
        "autotuning `add`: no configuration ran",
        "`BLOCK=256, num_warps=2, num_stages=3`: its kernel spills 128 bytes per thread",
        "`BLOCK=256, num_warps=4, num_stages=3`: its kernel needs 65536 bytes of shared memory per program; \
         the device gives one at most 49152",
        "`BLOCK=256, num_warps=8, num_stages=3`: its kernel (255 registers per thread) runs at most 128 \
         threads per program",
    ] {
        assert!(text.contains(words), "{words:?} in {text}");
    }
}

/// A shared-memory error of the lowering (as the GPU backends give, at their opt-in
/// limit) reads as the same reason.
#[test]
fn a_lowering_out_of_shared_memory_is_a_shared_memory_reason() {
    let e = Error::Lower(LowerError::OutOfSharedMemory {
        kernel: "k".into(),
        needed: 300_000,
        limit: 232_448,
    });
    assert_eq!(
        SkipReason::of(&e),
        SkipReason::SharedMemory {
            needed: 300_000,
            limit: 232_448
        }
    );
}

#[test]
fn printed_lines_show_times_resources_reasons_and_the_winner() {
    let list = configs(&[1, 4]);
    let printer = Printer::new(&list);
    let timing = Timing {
        config: list[0].clone(),
        time_ms: 0.0123,
        metadata: resources_of(&options(1)),
    };
    let line = printer.outcome(&list[0], &Outcome::Timed(timing.clone()));
    assert_eq!(
        line,
        "  BLOCK=256, num_warps=1, num_stages=3     0.0123 ms  40 registers, 0 bytes spilled, 1024 bytes shared"
    );
    let reason = SkipReason::SharedMemory {
        needed: 65536,
        limit: 49152,
    };
    let line = printer.outcome(&list[1], &Outcome::Skipped(reason.clone()));
    assert_eq!(
        line,
        format!("  BLOCK=256, num_warps=4, num_stages=3  skipped: {reason}")
    );
    let report = Report {
        timed: vec![timing.clone()],
        skipped: vec![Skipped {
            config: list[1].clone(),
            reason,
        }],
        runoff: Vec::new(),
    };
    let line = printer.winner("add", "1000", &timing, &report, std::time::Duration::from_millis(1500));
    assert_eq!(
        line,
        "rutile: autotuning `add` for key `1000` finished after 1.50 s (1 timed, 1 skipped); best: \
         `BLOCK=256, num_warps=1, num_stages=3`, 0.0123 ms, 40 registers, 0 bytes spilled, 1024 bytes shared"
    );
    // Unreported resources are left out.
    assert_eq!(resources(&KernelMetadata::default()), "0 bytes shared");
}

/// A timing of `config` at `ms`, with no resources reported.
fn timed(config: &Config, ms: f64) -> Timing {
    Timing {
        config: config.clone(),
        time_ms: ms,
        metadata: KernelMetadata::default(),
    }
}

#[test]
fn the_finalists_are_the_fastest_within_the_margin() {
    let list = configs(&[1, 2, 4, 8]);
    let more: Vec<Config> = (0..6).map(|s| list[0].clone().num_stages(s + 1)).collect();
    let times = [1.0, 1.05, 1.2, 1.08, 1.09, 1.01];
    let timings: Vec<Timing> = more.iter().zip(times).map(|(c, t)| timed(c, t)).collect();
    // Within 10% of 1.0: all but 1.2; fastest first, four at most.
    assert_eq!(runoff::finalists(&timings), vec![0, 5, 1, 3]);
    // One alone within the margin: no runoff.
    let alone = [timed(&list[0], 1.0), timed(&list[1], 1.2)];
    assert!(runoff::finalists(&alone).is_empty());
    assert!(runoff::finalists(&[]).is_empty());
}

/// The finalists run again in rounds; each one's time becomes the median of its rounds, and
/// a configuration outside the margin keeps its first time.
#[test]
fn the_runoff_times_the_finalists_again_in_rounds() {
    let dev = FakeGpu::new();
    let list = configs(&[1, 2, 4]);
    let n = 1000;
    let (x, y, z) = (
        dev.zeros::<f32>(n).unwrap(),
        dev.zeros::<f32>(n).unwrap(),
        dev.zeros::<f32>(n).unwrap(),
    );
    let args = [(&x).into(), (&y).into(), (&z).into(), (n as i32).into()];
    let kernel = rutile_ir::seeds::vector_add(ScalarType::F32, 256).unwrap();
    let launch = LaunchConfig::new([4, 1, 1]).num_warps(1);
    // Far from any time the interpreter measures, so that the finalists' new times show.
    let mut report = Report {
        timed: vec![timed(&list[0], 1e6), timed(&list[1], 1e6), timed(&list[2], 5e6)],
        ..Report::default()
    };
    let kernel_of = |c: &Config| (*c != list[2]).then_some((&kernel, &launch));
    runoff::run(&dev, &NO_PREPARE, &mut report, 3, &kernel_of, &|_| (0, 1), &args).unwrap();
    assert_eq!(report.runoff.len(), 2, "{report:?}");
    for (i, (config, rounds)) in report.runoff.iter().enumerate() {
        assert_eq!(*config, list[i]);
        assert_eq!(rounds.len(), 3);
        let mut sorted = rounds.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(report.timed[i].time_ms, sorted[1], "the median of its rounds");
        assert!(report.timed[i].time_ms < 1e6);
    }
    assert_eq!(report.timed[2].time_ms, 5e6);
    // No rounds asked: nothing runs again.
    let mut untouched = Report {
        timed: vec![timed(&list[0], 1.0), timed(&list[1], 1.0)],
        ..Report::default()
    };
    runoff::run(&dev, &NO_PREPARE, &mut untouched, 0, &kernel_of, &|_| (0, 1), &args).unwrap();
    assert!(untouched.runoff.is_empty());
    assert_eq!(untouched.timed[0].time_ms, 1.0);
    // The printed line names each finalist with its rounds.
    let printer = Printer::new(&list);
    let shown = Report {
        runoff: vec![(list[0].clone(), vec![0.5, 0.25]), (list[1].clone(), vec![0.75, 1.0])],
        ..Report::default()
    };
    assert_eq!(
        printer.runoff(&shown),
        format!(
            "rutile: runoff of 2 finalists over 2 rounds: `{}` 0.5000 ms / 0.2500 ms; `{}` 0.7500 ms / 1.0000 ms",
            list[0], list[1]
        )
    );
}

/// Times without a flush and with nothing to put back.
const NO_PREPARE: restore::Timer<'static> = restore::Timer {
    flush: None,
    prepare: &|| Ok(()),
};

/// `acc[i] += x[i]` for `n` elements in blocks of `block`: a kernel that changes its
/// argument, as one accumulating into its output does; `peak[i]` keeps the largest sum
/// any launch made.
fn accumulate(block: u32) -> Result<Kernel> {
    Ok(Kernel::build("accumulate", |k| {
        let (acc, peak) = (k.arg_ptr("acc", ScalarType::F32), k.arg_ptr("peak", ScalarType::F32));
        let x = k.arg_ptr("x", ScalarType::F32);
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
        let mask = offs.lt(n);
        let sum = k.load_masked(acc + offs, mask, 0.0) + k.load_masked(x + offs, mask, 0.0);
        k.store_masked(acc + offs, sum, mask);
        let highest = k.load_masked(peak + offs, mask, 0.0).maximum(sum);
        k.store_masked(peak + offs, highest, mask);
    })?)
}

/// Tunes (two blocks, a ragged 1000 elements, two timed launches each on the interpreter)
/// and launches [`accumulate`] with `tuner` on `acc` (starting from `initial`) and `x`;
/// what `acc` holds after.
fn tune_and_launch_accumulate(tuner: Autotuner, initial: &[f32], x: &[f32]) -> Result<Vec<f32>> {
    Ok(tune_and_launch_with_peak(tuner, initial, x)?.0)
}

/// [`tune_and_launch_accumulate`], with what `peak` (starting from zeros) holds after.
fn tune_and_launch_with_peak(tuner: Autotuner, initial: &[f32], x: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
    let dev = CpuDevice::new();
    let n = x.len();
    let (acc, peak, xs) = (dev.upload(initial)?, dev.zeros::<f32>(n)?, dev.upload(x)?);
    let args = [(&acc).into(), (&peak).into(), (&xs).into(), (n as i32).into()];
    let build = |c: &Config| accumulate(c.value("BLOCK")? as u32);
    let grid = |c: &Config| Ok([(n as u32).div_ceil(c.value("BLOCK")? as u32), 1, 1]);
    tuner
        .cache_file(None)
        .repetitions(1, 2)
        .launch(&dev, "n", &build, &grid, &args)?;
    Ok((dev.download(&acc)?, dev.download(&peak)?))
}

fn block_configs() -> Vec<Config> {
    vec![Config::new(&[("BLOCK", 128)]), Config::new(&[("BLOCK", 256)])]
}

/// Random values in [-2, -0.5] and [0.5, 2], never zero.
fn nonzero(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = rutile_ir::testing::Rng::new(seed);
    (0..n)
        .map(|_| {
            let v = rng.uniform(0.5, 2.0) as f32;
            if rng.below(2) == 0 {
                v
            } else {
                -v
            }
        })
        .collect()
}

/// A kernel that adds into its output, tuned with the output in `reset_to_zero`, returns
/// one launch's sum from its tuned launch (as Triton's `reset_to_zero`), every launch of
/// the tuning having started from zeros; without it, the sum of every launch of the
/// tuning too.
#[test]
fn reset_to_zero_leaves_one_launchs_sum() {
    let x: Vec<f32> = nonzero(1, 1000).iter().map(|v| v.abs()).collect();
    let zeros = vec![0.0f32; x.len()];
    let tuner = || Autotuner::new("accumulate", block_configs()).unwrap();
    let (got, peak) = tune_and_launch_with_peak(tuner().reset_to_zero(&["acc"]), &zeros, &x).unwrap();
    assert_eq!(got, x);
    assert_eq!(peak, x, "a launch of the tuning started from what another left");
    // Without it every launch of the tuning adds in: what the option is for.
    let piled = tune_and_launch_accumulate(tuner(), &zeros, &x).unwrap();
    assert!(piled.iter().zip(&x).all(|(p, v)| (p / v) > 4.5), "{:?}", &piled[..4]);
}

/// A kernel that updates its argument in place, tuned with it in `restore_value`, starts
/// its tuned launch from the caller's values; `choose` alone leaves them as they were.
#[test]
fn restore_value_keeps_the_callers_values() {
    let (initial, x) = (nonzero(2, 1000), nonzero(3, 1000));
    let tuner = Autotuner::new("accumulate", block_configs())
        .unwrap()
        .restore_value(&["acc"]);
    let got = tune_and_launch_accumulate(tuner, &initial, &x).unwrap();
    let want: Vec<f32> = initial.iter().zip(&x).map(|(a, b)| a + b).collect();
    assert_eq!(got, want);

    let dev = CpuDevice::new();
    let (acc, xs) = (dev.upload(&initial).unwrap(), dev.upload(&x).unwrap());
    let peak = dev.zeros::<f32>(1000).unwrap();
    let args = [(&acc).into(), (&peak).into(), (&xs).into(), (1000i32).into()];
    let build = |c: &Config| accumulate(c.value("BLOCK")? as u32);
    let grid = |c: &Config| Ok([1000u32.div_ceil(c.value("BLOCK")? as u32), 1, 1]);
    Autotuner::new("accumulate", block_configs())
        .unwrap()
        .cache_file(None)
        .restore_value(&["acc"])
        .choose(&dev, "n", &build, &grid, &args)
        .unwrap();
    assert_eq!(dev.download(&acc).unwrap(), initial);
}

/// A name that is not a buffer parameter, or that is in both lists, is an error naming it.
#[test]
fn restored_names_must_be_buffer_parameters() {
    let x = nonzero(4, 100);
    let message = |tuner: Autotuner| match tune_and_launch_accumulate(tuner, &x, &x) {
        Err(Error::Autotune { name, message }) => {
            assert_eq!(name, "accumulate");
            message
        }
        other => panic!("expected an autotuning error, got {other:?}"),
    };
    let tuner = || Autotuner::new("accumulate", block_configs()).unwrap();
    let m = message(tuner().reset_to_zero(&["out"]));
    assert!(m.contains("`out`") && m.contains("acc, peak, x, n"), "{m}");
    let m = message(tuner().restore_value(&["n"]));
    assert!(m.contains("`n`") && m.contains("not a buffer"), "{m}");
    let m = message(tuner().reset_to_zero(&["acc"]).restore_value(&["acc"]));
    assert!(m.contains("both"), "{m}");
}

/// Triton's `prune_configs_by`: the build closure, which sees the call's sizes, refuses a
/// configuration that does not apply; it is skipped with the reason given, and the others
/// are timed.
#[test]
fn a_configuration_the_build_refuses_is_skipped_with_its_reason() {
    let dev = CpuDevice::new();
    let n = 300usize;
    let (acc, peak, xs) = (
        dev.zeros::<f32>(n).unwrap(),
        dev.zeros::<f32>(n).unwrap(),
        dev.upload(&nonzero(5, n)).unwrap(),
    );
    let args = [(&acc).into(), (&peak).into(), (&xs).into(), (n as i32).into()];
    let build = |c: &Config| {
        let block = c.value("BLOCK")?;
        if block as usize > n {
            return Err(Error::Autotune {
                name: "accumulate".into(),
                message: format!("BLOCK {block} is longer than the {n} elements"),
            });
        }
        accumulate(block as u32)
    };
    let configs = vec![
        Config::new(&[("BLOCK", 512)]),
        Config::new(&[("BLOCK", 128)]),
        Config::new(&[("BLOCK", 1024)]),
    ];
    let choice = Autotuner::new("accumulate", configs)
        .unwrap()
        .cache_file(None)
        .choose(
            &dev,
            "300",
            &build,
            &|c| Ok([(n as u32).div_ceil(c.value("BLOCK")? as u32), 1, 1]),
            &args,
        )
        .unwrap();
    assert_eq!(choice.config, Config::new(&[("BLOCK", 128)]));
    let report = choice.report.unwrap();
    assert_eq!(report.skipped.len(), 2);
    assert!(
        report.skipped[0]
            .reason
            .to_string()
            .contains("BLOCK 512 is longer than the 300 elements"),
        "{}",
        report.skipped[0].reason
    );
}
