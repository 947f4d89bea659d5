//! A progress bar on stderr for work of several steps that may take a while (the
//! autotuner's timing of each configuration, a benchmark's sweep). It stays hidden for its
//! first second, so that quick work prints nothing, and whenever stderr is not a terminal,
//! so that logs and pipes get no control characters. Bars shown at once (an autotuner
//! running inside a sweep) stack, one line each.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Every bar on show, drawn together so that nested work does not overwrite its caller's.
fn shown_bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// How long work runs before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

/// A bar of `len` steps, each named by a message, shown once the work has taken
/// [`DELAY`] on a terminal.
pub(crate) struct Progress {
    bar: ProgressBar,
    start: Instant,
    /// Whether the bar may appear at all (stderr is a terminal).
    may_show: bool,
    shown: bool,
}

impl Progress {
    /// A hidden bar of `len` steps, labelled `prefix` (what the work is).
    pub fn new(len: usize, prefix: String) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::hidden());
        // A template that does not parse would be a bug here; the default style then does.
        if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:20}] {pos}/{len} {elapsed} {wide_msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(prefix);
        Progress {
            bar,
            start: Instant::now(),
            may_show: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Starts the next step, named `message`; shows the bar if the work has run long
    /// enough.
    pub fn step(&mut self, message: String) {
        if !self.shown && self.may_show && self.start.elapsed() >= DELAY {
            self.bar = shown_bars().add(self.bar.clone());
            self.shown = true;
        }
        self.bar.set_message(message);
    }

    /// Ends the current step.
    pub fn done(&self) {
        self.bar.inc(1);
    }

    /// Prints `line` on stderr above the bar (the bar is redrawn after it).
    pub fn println(&self, line: &str) {
        // Through `suspend`, not the bar's own `println`, which prints nothing while the
        // bar is hidden: the bars on show (this one's, or its caller's) are cleared and
        // redrawn below the line.
        shown_bars().suspend(|| eprintln!("{line}"));
    }

    /// How long the work has taken.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

impl Drop for Progress {
    /// Removes the bar from the terminal, also when the work ends in an error.
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        if self.shown {
            shown_bars().remove(&self.bar);
        }
    }
}
