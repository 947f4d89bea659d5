//! The autotuner on the CPU interpreter: it chooses among configurations, remembers the
//! choice in memory and in its cache file, skips configurations that cannot run, and
//! reports what the arguments get wrong.

use rutile::autotune::{Autotuner, Config};
use rutile::{seeds, CpuDevice, Device, DeviceExt, Error, ScalarType::F32};
use std::path::PathBuf;

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
    let _ = std::fs::remove_file(&path);
    path
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
    let _ = std::fs::remove_file(&file);
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
    let _ = std::fs::remove_file(&file);
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
    assert!(!text.contains("BLOCK=64"), "the stale line is replaced: {text}");
    assert!(
        text.contains("not a line"),
        "lines it does not understand are kept: {text}"
    );
    let _ = std::fs::remove_file(&file);
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
