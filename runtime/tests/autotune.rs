//! The autotuner on the CPU interpreter: it chooses among configurations, remembers the
//! choice in memory and in its cache file (shared by processes tuning at once), skips
//! configurations that cannot run and says why, prints its tuning when asked, and reports
//! what the arguments get wrong.

use rutile::autotune::{Autotuner, Config, SkipReason, AUTOTUNE_PRINT_ENV, AUTOTUNE_RUNOFF_ENV};
use rutile::buffer::DeviceBuffer;
use rutile::ir::target::{Specialization, Target};
use rutile::{
    seeds, Arg, CompileOptions, CompiledKernel, CpuDevice, Device, DeviceExt, DeviceProperties, Error,
    ScalarType::{self, F32},
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const N: usize = 5000;

fn configs() -> Vec<Config> {
    vec![
        Config::new(&[("BLOCK", 256)]).num_warps(2),
        Config::new(&[("BLOCK", 1024)]).num_warps(4),
    ]
}

fn build(c: &Config) -> rutile::Result<rutile::Kernel> {
    Ok(seeds::vector_add(F32, c.value("BLOCK")? as u32)?)
}

fn grid(c: &Config) -> rutile::Result<[u32; 3]> {
    Ok([(N as u32).div_ceil(c.value("BLOCK")? as u32), 1, 1])
}

/// A cache file of this test's own, removed first.
fn cache_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("rutile-autotune-{name}-{}.tsv", std::process::id()));
    remove(&path);
    path
}

/// Removes a cache file and the lock file beside it.
fn remove(file: &Path) {
    let _ = std::fs::remove_file(file);
    let mut lock = file.as_os_str().to_owned();
    lock.push(".lock");
    let _ = std::fs::remove_file(lock);
}

/// Runs the tuner's vector add on fresh inputs and checks the sums.
fn add_with(tuner: &Autotuner, dev: &dyn Device) -> rutile::autotune::Choice {
    let x: Vec<f32> = (0..N).map(|i| i as f32 * 0.5 + 1.0).collect();
    let y: Vec<f32> = (0..N).map(|i| 3.0 - i as f32).collect();
    let (xb, yb, zb) = (
        dev.upload(&x).unwrap(),
        dev.upload(&y).unwrap(),
        dev.zeros::<f32>(N).unwrap(),
    );
    let args = [(&xb).into(), (&yb).into(), (&zb).into(), (N as i32).into()];
    let choice = tuner.launch(dev, &N.to_string(), &build, &grid, &args).unwrap();
    let z = dev.download(&zb).unwrap();
    for i in 0..N {
        assert_eq!(z[i], x[i] + y[i], "element {i} with `{}`", choice.config);
    }
    choice
}

#[test]
fn chooses_remembers_and_reads_back_its_choice() {
    let dev = CpuDevice::new();
    let file = cache_file("remember");
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let first = add_with(&tuner, &dev);
    assert!(configs().contains(&first.config));
    assert!(!first.from_file && first.time_ms > 0.0, "{first:?}");
    // Remembered in memory...
    assert_eq!(add_with(&tuner, &dev), first);
    // ... and handed back with its kernel and launch, ready to run again.
    let a = dev.zeros::<f32>(N).unwrap();
    let args = [(&a).into(), (&a).into(), (&a).into(), (N as i32).into()];
    let tuned = tuner.tuned(&dev, &N.to_string(), &build, &grid, &args).unwrap();
    assert_eq!(tuned.choice, first);
    assert_eq!(tuned.launch.grid, grid(&first.config).unwrap());
    assert_eq!(
        (tuned.launch.num_warps, tuned.launch.num_stages),
        (first.config.num_warps, first.config.num_stages)
    );
    assert_eq!(tuned.kernel.name, "add_kernel");
    // ... and in the file, where a new tuner (a later process) finds it.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&first.config.to_string()), "{text}");
    let later = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let again = add_with(&later, &dev);
    assert_eq!(again.config, first.config);
    assert!(again.from_file);
    // Another key is tuned anew and gets a line of its own.
    let other = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let (a, b, c) = (
        dev.zeros::<f32>(8).unwrap(),
        dev.zeros::<f32>(8).unwrap(),
        dev.zeros::<f32>(8).unwrap(),
    );
    let choice = other
        .choose(
            &dev,
            "8",
            &build,
            &|_| Ok([1, 1, 1]),
            &[(&a).into(), (&b).into(), (&c).into(), 8i32.into()],
        )
        .unwrap();
    assert!(!choice.from_file);
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);
    remove(&file);
}

/// A choice made among fewer configurations is not taken for one among more: the added
/// ones are timed too.
#[test]
fn a_choice_from_another_list_is_tuned_again() {
    let dev = CpuDevice::new();
    let file = cache_file("grown");
    let fewer: Vec<Config> = configs().into_iter().take(1).collect();
    let tuner = Autotuner::new("add", fewer).unwrap().cache_file(Some(file.clone()));
    assert!(!add_with(&tuner, &dev).from_file);
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let choice = add_with(&tuner, &dev);
    assert!(!choice.from_file, "chosen among one configuration: {choice:?}");
    // And that choice, made among all, is read back by a tuner with the same list.
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    assert!(add_with(&tuner, &dev).from_file);
    remove(&file);
}

#[test]
fn a_choice_no_longer_listed_is_tuned_again() {
    let dev = CpuDevice::new();
    let file = cache_file("stale");
    let name = dev.properties().name.clone();
    let backend = dev.properties().backend;
    std::fs::write(
        &file,
        format!("add\t{name} ({backend})\t{N}\tBLOCK=64, num_warps=1, num_stages=3\t0.001\nnot a line\n"),
    )
    .unwrap();
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let choice = add_with(&tuner, &dev);
    assert!(!choice.from_file, "{choice:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    // Where the file can be locked (not on every platform), the stale line is replaced,
    // not only outdone by a later one.
    if cfg!(unix) {
        assert!(!text.contains("BLOCK=64"), "the stale line is replaced: {text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }
    assert!(
        text.contains("not a line"),
        "lines it does not understand are kept: {text}"
    );
    remove(&file);
}

#[test]
fn configurations_that_cannot_run_are_skipped() {
    let dev = CpuDevice::new();
    // 1000 is not a power of two: that kernel does not build.
    let mut list = configs();
    list.insert(0, Config::new(&[("BLOCK", 1000)]));
    let tuner = Autotuner::new("add", list).unwrap().cache_file(None);
    let choice = add_with(&tuner, &dev);
    assert_ne!(choice.config.value("BLOCK").unwrap(), 1000);
    // The caller sees what was skipped and why, and what ran.
    let report = choice.report.as_ref().expect("a tuned choice has a report");
    assert_eq!(report.timed.len(), 2);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].config.value("BLOCK").unwrap(), 1000);
    match &report.skipped[0].reason {
        SkipReason::Failed(why) => assert!(why.contains("power of two"), "{why}"),
        other => panic!("expected the build error, got {other:?}"),
    }

    // When none can run, the error says why for each.
    let tuner = Autotuner::new(
        "add",
        vec![Config::new(&[("BLOCK", 1000)]), Config::new(&[("SIZE", 1024)])],
    )
    .unwrap()
    .cache_file(None);
    let (a, b, c) = (
        dev.zeros::<f32>(8).unwrap(),
        dev.zeros::<f32>(8).unwrap(),
        dev.zeros::<f32>(8).unwrap(),
    );
    let args = [(&a).into(), (&b).into(), (&c).into(), 8i32.into()];
    match tuner.choose(&dev, "8", &build, &grid, &args) {
        Err(e @ Error::Autotune { .. }) => {
            let text = e.to_string();
            assert!(text.contains("no configuration ran"), "{text}");
            assert!(text.contains("BLOCK=1000") && text.contains("power of two"), "{text}");
            assert!(text.contains("no meta-parameter `BLOCK`"), "{text}");
        }
        other => panic!("expected an autotuning error, got {other:?}"),
    }
}

#[test]
fn wrong_arguments_are_reported_not_skipped() {
    let dev = CpuDevice::new();
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(None);
    let a = dev.zeros::<f32>(8).unwrap();
    // Three arguments where the kernel takes four: every configuration would fail alike.
    match tuner.choose(&dev, "8", &build, &grid, &[(&a).into(), (&a).into(), (&a).into()]) {
        Err(e @ Error::Argument { .. }) => assert!(e.to_string().contains("4"), "{e}"),
        other => panic!("expected the argument error, got {other:?}"),
    }
}

#[test]
fn bad_configuration_lists_are_errors() {
    for (list, words) in [
        (vec![], "no configurations"),
        (
            vec![Config::new(&[("BLOCK", 8)]), Config::new(&[("BLOCK", 8)])],
            "listed twice",
        ),
        (vec![Config::new(&[("BLOCK", 8)]).num_warps(0)], "at least 1"),
    ] {
        match Autotuner::new("add", list) {
            Err(e @ Error::Autotune { .. }) => assert!(e.to_string().contains(words), "{e}"),
            Err(e) => panic!("expected an autotuning error, got {e:?}"),
            Ok(_) => panic!("expected an autotuning error saying {words:?}"),
        }
    }
}

/// The chosen kernel is built once per key: later launches reuse it, not the builder.
#[test]
fn launches_after_the_first_do_not_build_again() {
    let dev = CpuDevice::new();
    let builds = std::cell::Cell::new(0);
    let counting = |c: &Config| {
        builds.set(builds.get() + 1);
        build(c)
    };
    let tuner = Autotuner::new("add", configs()).unwrap().cache_file(None);
    let (x, y, z) = (
        dev.upload(&[1.0f32; N]).unwrap(),
        dev.upload(&[2.0f32; N]).unwrap(),
        dev.zeros::<f32>(N).unwrap(),
    );
    let args = [(&x).into(), (&y).into(), (&z).into(), (N as i32).into()];
    tuner.launch(&dev, "k", &counting, &grid, &args).unwrap();
    let after_tuning = builds.get();
    assert_eq!(
        after_tuning,
        configs().len() + 1,
        "each configuration, then the chosen one"
    );
    for _ in 0..3 {
        tuner.launch(&dev, "k", &counting, &grid, &args).unwrap();
    }
    tuner.tuned(&dev, "k", &counting, &grid, &args).unwrap();
    assert_eq!(builds.get(), after_tuning);
    assert!(dev.download(&z).unwrap().iter().all(|&v| v == 3.0));
}

/// The interpreter behind a GPU's lowering: each kernel is first lowered as the CUDA
/// backend lowers it, for a device that gives a program `shared` bytes of shared memory
/// at most, so that what that lowering refuses is refused here too.
struct SmallSharedMemory {
    cpu: CpuDevice,
    properties: DeviceProperties,
    shared: u32,
}

impl SmallSharedMemory {
    fn new(shared: u32) -> SmallSharedMemory {
        let cpu = CpuDevice::new();
        let mut properties = cpu.properties().clone();
        properties.name = format!("interpreter with {shared} bytes of shared memory");
        properties.shared_memory_per_block_optin = Some(shared);
        SmallSharedMemory {
            cpu,
            properties,
            shared,
        }
    }
}

impl Device for SmallSharedMemory {
    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }
    fn alloc(&self, elem: ScalarType, len: usize) -> rutile::Result<DeviceBuffer> {
        self.cpu.alloc(elem, len)
    }
    fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> rutile::Result<()> {
        self.cpu.write(buffer, bytes)
    }
    fn read(&self, buffer: &DeviceBuffer) -> rutile::Result<Vec<u8>> {
        self.cpu.read(buffer)
    }
    fn compile(
        &self,
        kernel: &rutile::Kernel,
        options: &CompileOptions,
        spec: &Specialization,
    ) -> rutile::Result<Arc<CompiledKernel>> {
        rutile::ir::lower::lower(kernel, &Target::nvidia(options.num_warps, self.shared), spec)?;
        self.cpu.compile(kernel, options, spec)
    }
    fn launch_compiled(&self, kernel: &CompiledKernel, grid: [u32; 3], args: &[Arg<'_>]) -> rutile::Result<()> {
        self.cpu.launch_compiled(kernel, grid, args)
    }
    fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> rutile::Result<()> {
        self.cpu.copy(src, dst)
    }
    fn synchronize(&self) -> rutile::Result<()> {
        self.cpu.synchronize()
    }
    fn id(&self) -> String {
        "small-shared".into()
    }
    fn device_key(&self) -> u64 {
        self.cpu.device_key()
    }
}

/// Tunes the tiled transpose of a 128 x 128 matrix over square tiles of `blocks` on
/// `dev`, and checks the result when one ran.
fn transpose_with(dev: &dyn Device, blocks: &[i64]) -> rutile::Result<rutile::autotune::Choice> {
    const M: usize = 128;
    let configs = blocks.iter().map(|&b| Config::new(&[("BLOCK", b)])).collect();
    let tuner = Autotuner::new("transpose", configs)?.cache_file(None);
    let x: Vec<f32> = (0..M * M).map(|i| i as f32).collect();
    let (xb, out) = (dev.upload(&x)?, dev.zeros::<f32>(M * M)?);
    let m = M as i32;
    let args = [(&xb).into(), (&out).into(), m.into(), m.into(), m.into(), m.into()];
    let build = |c: &Config| {
        Ok(seeds::transpose(
            F32,
            c.value("BLOCK")? as u32,
            c.value("BLOCK")? as u32,
        )?)
    };
    let grid = |c: &Config| {
        let b = c.value("BLOCK")? as u32;
        Ok(seeds::transpose_grid(M as u32, M as u32, b, b))
    };
    let choice = tuner.launch(dev, "128", &build, &grid, &args)?;
    let t = dev.download(&out)?;
    for (i, j) in [(0, 1), (5, 100), (127, 3)] {
        assert_eq!(t[j * M + i], x[i * M + j], "({i}, {j}) with `{}`", choice.config);
    }
    Ok(choice)
}

/// A configuration whose kernel needs more shared memory than the device gives a program
/// (its opt-in limit: the lowering refuses it) is skipped, with the bytes needed and the
/// limit as the reason; when none fits, the error says so for each.
#[test]
fn configurations_over_the_shared_memory_limit_are_skipped() {
    let limit = 16 * 1024;
    let dev = SmallSharedMemory::new(limit);
    // The 128 x 128 f32 tile changes layout through 64 KiB of shared memory; 16 x 16
    // through 1 KiB.
    let choice = transpose_with(&dev, &[128, 16]).unwrap();
    assert_eq!(choice.config.value("BLOCK").unwrap(), 16);
    let report = choice.report.as_ref().unwrap();
    assert_eq!(report.timed.len(), 1);
    let timed = &report.timed[0].metadata;
    assert!(timed.shared_bytes <= limit, "{timed:?}");
    let skipped: Vec<_> = report
        .skipped
        .iter()
        .map(|s| (s.config.value("BLOCK").unwrap(), &s.reason))
        .collect();
    match skipped[..] {
        [(128, SkipReason::SharedMemory { needed, limit: l })] => {
            assert!(*needed >= 128 * 128 * 4 && *l == limit, "{needed} {l}")
        }
        _ => panic!("expected the 128 x 128 tile skipped for its shared memory: {skipped:?}"),
    }
    let text = transpose_with(&dev, &[128]).unwrap_err().to_string();
    assert!(
        text.contains("no configuration ran: `BLOCK=128, num_warps=4, num_stages=3`: its kernel needs")
            && text.contains(&format!(
                "bytes of shared memory per program; the device gives one at most {limit}"
            )),
        "{text}"
    );
}

/// The variable that makes this test binary, started again by a test, play a part of a
/// test (see [`child_process`]), and the cache file it uses.
const CHILD_ENV: &str = "RUTILE_AUTOTUNE_TEST_CHILD";
const CHILD_FILE_ENV: &str = "RUTILE_AUTOTUNE_TEST_FILE";

/// Starts this test binary again to run [`child_process`] as `role` with the cache file
/// `file`, and `RUTILE_AUTOTUNE_PRINT` as `print` says; its output is piped.
fn start_child(role: &str, file: &Path, print: bool) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .env(CHILD_FILE_ENV, file)
        .env_remove(AUTOTUNE_PRINT_ENV)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if print {
        cmd.env(AUTOTUNE_PRINT_ENV, "1");
    }
    cmd.spawn().unwrap()
}

/// Waits for a child and returns its stderr; fails with its output when it failed.
fn finish(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "the child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}");
    stderr
}

/// Not a test of its own: the part a child process plays for another test, named by
/// [`CHILD_ENV`]; without it, nothing.
#[test]
fn child_process() {
    let Ok(role) = std::env::var(CHILD_ENV) else { return };
    let file = PathBuf::from(std::env::var_os(CHILD_FILE_ENV).unwrap());
    match role.as_str() {
        "print" => tune_and_read_back(&file),
        "writer 0" => write_entries(&file, 0),
        "writer 1" => write_entries(&file, 1),
        "runoff env" => {
            let e = Autotuner::new("add", configs())
                .err()
                .expect("a tuner despite the bad runoff");
            assert!(
                e.to_string().contains(
                    "RUTILE_AUTOTUNE_RUNOFF: takes a number of runoff rounds (0 for none), 0 to 1000; got \"three\""
                ),
                "{e}"
            );
        }
        "print env" => {
            let e = Autotuner::new("add", configs())
                .err()
                .expect("a tuner despite the bad print switch");
            assert!(
                e.to_string()
                    .contains("RUTILE_AUTOTUNE_PRINT: takes 0 (off) or 1 (on); got \"off\""),
                "{e}"
            );
        }
        _ => panic!("unknown part {role:?}"),
    }
}

/// Tunes the vector add among a configuration that does not build and two that do, then
/// reads the choice back from the cache file.
fn tune_and_read_back(file: &Path) {
    let dev = CpuDevice::new();
    let mut list = configs();
    list.insert(0, Config::new(&[("BLOCK", 1000)]));
    let tuner = Autotuner::new("add", list.clone())
        .unwrap()
        .cache_file(Some(file.into()));
    assert!(!add_with(&tuner, &dev).from_file);
    let later = Autotuner::new("add", list).unwrap().cache_file(Some(file.into()));
    assert!(add_with(&later, &dev).from_file);
}

/// `RUTILE_AUTOTUNE_PRINT=1` prints each configuration's time and resources, the skipped
/// one with why, the winner, and later the choice read from the file; without it,
/// nothing. Neither draws a progress bar into a pipe.
#[test]
fn print_shows_each_configuration_and_the_winner() {
    let file = cache_file("print");
    let printed = finish(start_child("print", &file, true));
    for words in [
        "rutile: autotuning `add` for key `5000` on ",
        ": 3 configurations\n",
        "  BLOCK=1000, num_warps=4, num_stages=3  skipped: ",
        "power of two",
        "  BLOCK=256, num_warps=2, num_stages=3   ",
        "  BLOCK=1024, num_warps=4, num_stages=3  ",
        " ms  0 bytes shared\n",
        "rutile: autotuning `add` for key `5000` finished after ",
        " (2 timed, 1 skipped); best: `BLOCK=",
        "` from the cache file ",
    ] {
        assert!(printed.contains(words), "{words:?} in:\n{printed}");
    }
    assert!(!printed.contains('\u{1b}'), "no terminal control in a pipe:\n{printed}");
    remove(&file);
    let quiet = finish(start_child("print", &file, false));
    assert!(!quiet.contains("rutile: autotuning"), "{quiet}");
    remove(&file);
}

/// Keys each writer tunes.
const KEYS: usize = 100;

/// Two threads each tuning [`KEYS`] keys of their own, and every sixth a key that all
/// writers tune, among a list of configurations of this process's own: so each writer's
/// line of such a key replaces the others', rewriting the file while they append.
fn write_entries(file: &Path, process: usize) {
    std::thread::scope(|s| {
        for thread in 0..2 {
            s.spawn(move || {
                let dev = CpuDevice::new();
                let own = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.into()));
                let list = match process {
                    0 => configs(),
                    _ => configs().into_iter().rev().collect(),
                };
                let contested = Autotuner::new("add", list).unwrap().cache_file(Some(file.into()));
                let (a, b, c) = (
                    dev.zeros::<f32>(8).unwrap(),
                    dev.zeros::<f32>(8).unwrap(),
                    dev.zeros::<f32>(8).unwrap(),
                );
                let args = [(&a).into(), (&b).into(), (&c).into(), 8i32.into()];
                let grid = |_: &Config| Ok([1, 1, 1]);
                for j in 0..KEYS {
                    let key = format!("p{process}-t{thread}-{j}");
                    assert!(!own.choose(&dev, &key, &build, &grid, &args).unwrap().from_file);
                    if j % 6 == 0 {
                        contested
                            .choose(&dev, &format!("contested-{j}"), &build, &grid, &args)
                            .unwrap();
                    }
                }
            });
        }
    });
}

/// Two processes of two threads each tune keys at once into one cache file: every line is
/// whole and parses, every key is there (once, where the file can be locked), and a later
/// tuner reads each choice back.
#[test]
fn processes_tuning_at_once_lose_no_entry() {
    let file = cache_file("processes");
    let writers: Vec<_> = ["writer 0", "writer 1"]
        .iter()
        .map(|role| start_child(role, &file, false))
        .collect();
    for writer in writers {
        finish(writer);
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    let dev = CpuDevice::new();
    let device = format!("{} ({})", dev.properties().name, dev.properties().backend);
    let names: Vec<String> = configs().iter().map(|c| c.to_string()).collect();
    let mut lines_of = std::collections::HashMap::<&str, usize>::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert!(
            f.len() == 6 && f[0] == "add" && f[1] == device && names.iter().any(|n| n == f[3]),
            "a torn or unknown line: {line:?}"
        );
        assert!(
            f[4].parse::<f64>().is_ok_and(|t| t > 0.0) && f[5].starts_with("configs:"),
            "{line:?}"
        );
        *lines_of.entry(f[2]).or_default() += 1;
    }
    let own: Vec<String> = (0..2)
        .flat_map(|p| (0..2).flat_map(move |t| (0..KEYS).map(move |j| format!("p{p}-t{t}-{j}"))))
        .collect();
    for key in &own {
        assert_eq!(lines_of.get(key.as_str()), Some(&1), "key {key}");
    }
    for j in (0..KEYS).step_by(6) {
        let lines = lines_of.get(format!("contested-{j}").as_str()).copied().unwrap_or(0);
        // Where the file cannot be locked a line is appended, not replaced.
        assert!(lines == 1 || (!cfg!(unix) && lines > 1), "contested-{j}: {lines} lines");
    }
    let later = Autotuner::new("add", configs()).unwrap().cache_file(Some(file.clone()));
    let a = dev.zeros::<f32>(8).unwrap();
    let args = [(&a).into(), (&a).into(), (&a).into(), 8i32.into()];
    for key in &own {
        let choice = later.choose(&dev, key, &build, &|_| Ok([1, 1, 1]), &args).unwrap();
        assert!(choice.from_file, "{key}: {choice:?}");
    }
    remove(&file);
}

/// Runs [`child_process`] playing `role` with environment variable `variable` set to
/// `value`, and asserts that its part passed.
fn child_with(role: &str, variable: &str, value: &str) {
    let file = cache_file(&role.replace(' ', "_"));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .env(CHILD_FILE_ENV, &file)
        .env_remove(AUTOTUNE_PRINT_ENV)
        .env_remove(AUTOTUNE_RUNOFF_ENV)
        .env(variable, value)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `RUTILE_AUTOTUNE_RUNOFF` that is not a number makes every tuner an error that names it.
#[test]
fn a_runoff_that_is_not_a_number_is_an_error() {
    child_with("runoff env", AUTOTUNE_RUNOFF_ENV, "three");
}

/// `RUTILE_AUTOTUNE_PRINT=off` is an error naming the variable, not taken for on (as any
/// value but `0` once was).
#[test]
fn a_print_switch_other_than_0_or_1_is_an_error() {
    child_with("print env", AUTOTUNE_PRINT_ENV, "off");
}
