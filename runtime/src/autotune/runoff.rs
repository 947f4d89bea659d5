//! The runoff: the configurations timed within a margin of the fastest, timed again in
//! turns before one is chosen.
//!
//! The first pass times each configuration once, one after the other, for about 100 ms. On
//! a GPU whose clocks follow its power draw, two configurations within a few percent of each
//! other may then swap places from one tuning to the next, and a configuration timed while
//! the clocks were low loses to a slower one timed later: on an H200, one tuning of the
//! attention's `_tma_heads` list at 2048 tokens chose a block that ran at 399 TFLOPS where
//! the block chosen in earlier tunings ran at 427 to 453. The finalists (those within
//! [`MARGIN`] of the fastest, at most [`MAX_FINALISTS`]) are therefore timed again in
//! rounds, each round starting one finalist further on, so that none always follows
//! another, as the benchmark times its lines; a finalist's time is then the median of its
//! rounds, and the fastest of those is chosen.

use super::report::{Report, Timing};
use super::restore::Timer;
use super::Config;
use crate::device::Device;
use crate::error::Result;
use crate::ext::DeviceExt;
use crate::launch::{Arg, LaunchConfig};
use rutile_ir::Kernel;

/// How far behind the fastest first time a configuration may be and still run in the
/// runoff: 10%, about the most one configuration's timings moved between rounds on an H200
/// (0.35 to 0.39 ms for an attention launch), so that a configuration a slow first timing
/// pushed back still gets its rounds.
pub const MARGIN: f64 = 0.10;
/// The most configurations in a runoff.
pub const MAX_FINALISTS: usize = 4;
/// Rounds of a runoff on a GPU, unless the tuner says otherwise.
pub const DEFAULT_ROUNDS: usize = 3;

/// The finalists among `timed` (indices, fastest first): those within [`MARGIN`] of the
/// fastest, at most [`MAX_FINALISTS`]; none where fewer than two qualify.
pub(super) fn finalists(timed: &[Timing]) -> Vec<usize> {
    let Some(best) = timed.iter().map(|t| t.time_ms).min_by(f64::total_cmp) else {
        return Vec::new();
    };
    let mut within: Vec<usize> = (0..timed.len())
        .filter(|&i| timed[i].time_ms <= best * (1.0 + MARGIN))
        .collect();
    within.sort_by(|&a, &b| timed[a].time_ms.total_cmp(&timed[b].time_ms));
    within.truncate(MAX_FINALISTS);
    if within.len() < 2 {
        within.clear();
    }
    within
}

/// The median of `times` (the upper one of an even count).
fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Runs the runoff of `report`'s finalists over `rounds` rounds. `kernel_of` gives a
/// configuration's kernel and launch, where it ran; `repetitions` the
/// untimed and timed launches of one round from the first pass's time of one launch.
/// Each finalist's `time_ms` becomes the median of its rounds, and `report.runoff` says
/// which ran and what each round measured.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<'k>(
    dev: &dyn Device,
    timer: &Timer<'_>,
    report: &mut Report,
    rounds: usize,
    kernel_of: &dyn Fn(&Config) -> Option<(&'k Kernel, &'k LaunchConfig)>,
    repetitions: &dyn Fn(f64) -> (usize, usize),
    args: &[Arg<'_>],
) -> Result<()> {
    let finalists: Vec<usize> = finalists(&report.timed)
        .into_iter()
        .filter(|&i| kernel_of(&report.timed[i].config).is_some())
        .collect();
    if rounds == 0 || finalists.len() < 2 {
        return Ok(());
    }
    let n = finalists.len();
    let mut times = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for j in (0..n).map(|j| (j + round) % n) {
            let i = finalists[j];
            let (kernel, launch) = kernel_of(&report.timed[i].config).expect("kept above");
            let (warmup, reps) = repetitions(report.timed[i].time_ms);
            let stats = timer.time(dev, warmup, reps, &mut || dev.launch(kernel, launch, args))?;
            times[j].push(stats.median_ms);
        }
    }
    for (j, rounds) in times.into_iter().enumerate() {
        let t = &mut report.timed[finalists[j]];
        t.time_ms = median(rounds.clone());
        report.runoff.push((t.config.clone(), rounds));
    }
    Ok(())
}
