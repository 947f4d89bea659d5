//! [`Benchmark`], Triton's `perf_report`: a sweep over x values, one line per provider, each
//! point a time turned into the unit the caller asked for; and its [`Report`], printed as
//! the seed tutorials print theirs and written as CSV (and SVG, `plot.rs`).

use super::Stats;
use crate::progress::Progress;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

/// Why a provider has no time at one point (no such device, a library not installed, a
/// configuration the device cannot run). The point becomes a gap in the table and the
/// figure; the sweep goes on.
pub type ProviderError = Box<dyn std::error::Error + Send + Sync>;

/// What one line's closure does at one x value: runs the operation (with
/// [`super::do_bench`] or [`super::Timing::stats`]) and returns its times.
type Provider<'a> = Box<dyn FnMut(f64) -> Result<Stats, ProviderError> + 'a>;

/// The unit a benchmark reports its points in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes moved (read plus written) per second, in 10^9: bytes from [`Benchmark::gbps`].
    GBps,
    /// Floating-point operations per second, in 10^12: flops from [`Benchmark::tflops`].
    Tflops,
    /// The median time itself, in milliseconds.
    Ms,
}

impl Unit {
    /// The unit's name in tables, CSV headers and axis labels.
    pub fn label(self) -> &'static str {
        match self {
            Unit::GBps => "GB/s",
            Unit::Tflops => "TFLOPS",
            Unit::Ms => "ms",
        }
    }

    /// The value of an operation doing `work` (bytes or flops, unused for [`Unit::Ms`]) in
    /// `ms` milliseconds.
    fn of(self, work: f64, ms: f64) -> f64 {
        match self {
            Unit::GBps => work / (ms * 1e-3) / 1e9,
            Unit::Tflops => work / (ms * 1e-3) / 1e12,
            Unit::Ms => ms,
        }
    }
}

/// A sweep to measure: `x_name` over `x_values`, one line per provider.
///
/// Each provider is a closure that runs its operation at one x value, on whatever device it
/// holds, and returns its times ([`Stats`], from [`super::do_bench`]); the median becomes
/// the point, in the benchmark's [`Unit`]. A provider that returns an error leaves a gap at
/// that point (the error is printed on stderr once per line and kept in the report):
/// a baseline that is not installed, or a size a device cannot run, does not end the sweep.
/// On a terminal, a sweep that takes more than a second shows its progress on stderr.
pub struct Benchmark<'a> {
    name: String,
    title: String,
    x_name: String,
    x_values: Vec<f64>,
    log_x: bool,
    unit: Unit,
    work: Option<Box<dyn Fn(f64) -> f64 + 'a>>,
    lines: Vec<(String, Provider<'a>)>,
    rounds: usize,
}

impl<'a> Benchmark<'a> {
    /// A sweep named `name` (the stem of its files, e.g. `softmax-performance`) over
    /// `x_values` of `x_name`, reporting milliseconds until [`Benchmark::gbps`] or
    /// [`Benchmark::tflops`] says otherwise.
    pub fn new(name: impl Into<String>, x_name: impl Into<String>, x_values: impl IntoIterator<Item = f64>) -> Self {
        let name = name.into();
        Benchmark {
            title: name.clone(),
            name,
            x_name: x_name.into(),
            x_values: x_values.into_iter().collect(),
            log_x: false,
            unit: Unit::Ms,
            work: None,
            lines: Vec::new(),
            rounds: 1,
        }
    }

    /// Times each point in `rounds` rounds (at least 1, the default), every line once a
    /// round in turn (each round starting one line further on), and takes the median of the rounds' medians (their 20th and 80th
    /// percentiles likewise). Lines compared with each other, such as a kernel and its
    /// library baseline, then run interleaved, so that a clock or temperature drift during
    /// the sweep falls on all of them alike rather than on whichever runs last.
    pub fn rounds(mut self, rounds: usize) -> Self {
        self.rounds = rounds.max(1);
        self
    }

    /// The title of the table and the figure (the name by default).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Whether the figure's x-axis is logarithmic (sizes in powers of two).
    pub fn log_x(mut self, log_x: bool) -> Self {
        self.log_x = log_x;
        self
    }

    /// Report GB/s, the operation at `x` moving `bytes(x)` bytes (read plus written).
    pub fn gbps(mut self, bytes: impl Fn(f64) -> f64 + 'a) -> Self {
        self.unit = Unit::GBps;
        self.work = Some(Box::new(bytes));
        self
    }

    /// Report TFLOPS, the operation at `x` doing `flops(x)` floating-point operations.
    pub fn tflops(mut self, flops: impl Fn(f64) -> f64 + 'a) -> Self {
        self.unit = Unit::Tflops;
        self.work = Some(Box::new(flops));
        self
    }

    /// Adds a line named `name` whose points `provider` times.
    pub fn line(
        mut self,
        name: impl Into<String>,
        provider: impl FnMut(f64) -> Result<Stats, ProviderError> + 'a,
    ) -> Self {
        self.add_line(name, provider);
        self
    }

    /// [`Benchmark::line`] through a reference, for lines added in a loop.
    pub fn add_line(
        &mut self,
        name: impl Into<String>,
        provider: impl FnMut(f64) -> Result<Stats, ProviderError> + 'a,
    ) -> &mut Self {
        self.lines.push((name.into(), Box::new(provider)));
        self
    }

    /// The x values the sweep runs over (to size the buffers its providers need).
    pub fn x_values(&self) -> &[f64] {
        &self.x_values
    }

    /// The benchmark's name (the stem of its files).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The report this benchmark would produce with no point measured: the layout of an
    /// earlier run's CSV, read back by [`Report::read_csv`].
    pub fn empty_report(&self) -> Report {
        Report {
            name: self.name.clone(),
            title: self.title.clone(),
            x_name: self.x_name.clone(),
            log_x: self.log_x,
            unit: self.unit,
            x_values: self.x_values.clone(),
            lines: self
                .lines
                .iter()
                .map(|(name, _)| Series {
                    name: name.clone(),
                    points: Vec::new(),
                    stats: Vec::new(),
                })
                .collect(),
        }
    }

    /// Measures every line at every x value (x outer, as `perf_report` does, so that all
    /// lines of one size run close together in time).
    pub fn run(mut self) -> Report {
        let mut report = self.empty_report();
        let mut progress = Progress::new(
            self.x_values.len() * self.lines.len() * self.rounds,
            format!("benchmark `{}`", self.name),
        );
        // The last error each line printed, so that a baseline missing at every point says
        // so once.
        let mut last_error: Vec<Option<String>> = vec![None; self.lines.len()];
        for &x in &self.x_values {
            let work = self.work.as_ref().map_or(0.0, |w| w(x));
            // Each line's times, round by round; a line stops at its first error.
            let mut rounds: Vec<Result<Vec<Stats>, String>> = vec![Ok(Vec::new()); self.lines.len()];
            let n = self.lines.len();
            for round in 0..self.rounds {
                // Each round starts one line further on, so that no line always runs right
                // after the same one (after a heavy baseline, say, on a hot card).
                for i in (0..n).map(|j| (j + round) % n) {
                    let (name, provider) = &mut self.lines[i];
                    progress.step(format!("{name}, {} = {}", self.x_name, format_x(x)));
                    if let Ok(times) = &mut rounds[i] {
                        match provider(x) {
                            Ok(t) => times.push(t),
                            Err(e) => rounds[i] = Err(e.to_string()),
                        }
                    }
                    progress.done();
                }
            }
            for (i, (name, times)) in self.lines.iter().map(|(n, _)| n).zip(rounds).enumerate() {
                let stats = times.map(|t| median_of_rounds(&t));
                let point = stats
                    .as_ref()
                    .map(|s| self.unit.of(work, s.median_ms))
                    .map_err(Clone::clone);
                report.lines[i].stats.push(stats.ok());
                if let Err(message) = &point {
                    if last_error[i].as_ref() != Some(message) {
                        progress.println(&format!(
                            "{}: {name} at {} = {}: {message} (a gap in the report)",
                            self.name,
                            self.x_name,
                            format_x(x)
                        ));
                        last_error[i] = Some(message.clone());
                    }
                }
                report.lines[i].points.push(point);
            }
        }
        report
    }
}

/// One line's [`Stats`] at one point from those of its rounds: the median of each
/// statistic (the middle round's, or the mean of the two middle ones).
fn median_of_rounds(rounds: &[Stats]) -> Stats {
    let median = |f: fn(&Stats) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    Stats {
        median_ms: median(|s| s.median_ms),
        p20_ms: median(|s| s.p20_ms),
        p80_ms: median(|s| s.p80_ms),
    }
}

/// The measured sweep: one [`Series`] per line, one point per x value.
#[derive(Clone, Debug)]
pub struct Report {
    /// The benchmark's name, the stem of the files [`Report::save`] writes.
    pub name: String,
    /// The title of the table and the figure ([`Benchmark::title`]).
    pub title: String,
    /// The name of the swept quantity: the x column's header and the figure's x-axis label.
    pub x_name: String,
    /// Whether the figure's x-axis is logarithmic ([`Benchmark::log_x`]).
    pub log_x: bool,
    /// The unit of every line's points.
    pub unit: Unit,
    /// The x values measured, in the order of the points.
    pub x_values: Vec<f64>,
    /// One series per provider, in the order the lines were added.
    pub lines: Vec<Series>,
}

/// One line of a [`Report`]: at each x value, the value in the report's unit, or why the
/// provider has none there (a gap).
#[derive(Clone, Debug)]
pub struct Series {
    /// The line's name, as given to [`Benchmark::line`].
    pub name: String,
    /// One per x value: the value in the report's [`Unit`], or why there is none (a gap):
    /// the provider's error, or an empty field of a CSV read back.
    pub points: Vec<Result<f64, String>>,
    /// The times behind each point; `None` at a gap, and for points read from CSV.
    pub stats: Vec<Option<Stats>>,
}

impl Series {
    /// The value at the `i`-th x value; `None` at a gap.
    pub fn value(&self, i: usize) -> Option<f64> {
        self.points.get(i).and_then(|p| p.as_ref().ok().copied())
    }
}

/// A name as a CSV header field: as it is where it has no `,`, `;` or `"`; else quoted
/// (RFC 4180: in double quotes, a quote doubled), so that a line named
/// `rutile, H100 (cuda)` keeps one column and reads back as it was written.
fn csv_name(name: &str) -> String {
    if name.contains([',', ';', '"']) {
        format!("\"{}\"", name.replace('"', "\"\""))
    } else {
        name.to_string()
    }
}

/// The names of a CSV header line after its first field, [`csv_name`]'s inverse: a quoted
/// field as written in it; an unquoted one with its semicolons as commas (how names with
/// commas were written before they were quoted).
fn csv_header_names(header: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut chars = header.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(format!("CSV header: a quoted name is not closed: `{header}`")),
                }
            }
            if !matches!(chars.peek(), None | Some(',')) {
                return Err(format!("CSV header: text after a quoted name: `{header}`"));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                field.push(if c == ';' { ',' } else { c });
                chars.next();
            }
        }
        names.push(field);
        if chars.next().is_none() {
            break;
        }
    }
    Ok(names.split_off(1))
}

/// An x value as the tables print it: whole numbers without a fraction.
fn format_x(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A value with six significant digits (at least two decimals), so that CSV keeps small
/// values (a software device's TFLOPS) as well as large ones.
fn format_value(v: f64) -> String {
    let magnitude = if v == 0.0 || !v.is_finite() {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    let decimals = (5 - magnitude).clamp(2, 15) as usize;
    format!("{v:.decimals$}")
}

impl Report {
    /// The report as CSV: a header `x_name,line,...`, then one row per x value with an
    /// empty field at each gap.
    pub fn csv(&self) -> String {
        let mut text = csv_name(&self.x_name);
        for line in &self.lines {
            let _ = write!(text, ",{}", csv_name(&line.name));
        }
        text.push('\n');
        for (i, &x) in self.x_values.iter().enumerate() {
            text.push_str(&format_x(x));
            for line in &self.lines {
                text.push(',');
                if let Some(v) = line.value(i) {
                    text.push_str(&format_value(v));
                }
            }
            text.push('\n');
        }
        text
    }

    /// A report laid out as `self` (title, unit, axis) with the lines and points of `csv`,
    /// text [`Report::csv`] wrote; an empty field is a gap. Lets figures be drawn again
    /// without measuring.
    pub fn read_csv(&self, csv: &str) -> Result<Report, String> {
        let mut rows = csv.lines();
        let header = rows.next().ok_or("empty CSV: expected a header line")?;
        let mut report = Report {
            x_values: Vec::new(),
            lines: csv_header_names(header)?
                .into_iter()
                .map(|name| Series {
                    name,
                    points: Vec::new(),
                    stats: Vec::new(),
                })
                .collect(),
            ..self.clone()
        };
        for (row, text) in rows.enumerate().filter(|(_, t)| !t.trim().is_empty()) {
            let fields: Vec<&str> = text.split(',').collect();
            let at = || format!("CSV line {}", row + 2);
            if fields.len() != report.lines.len() + 1 {
                return Err(format!(
                    "{}: expected {} fields (x and one per line), got {}",
                    at(),
                    report.lines.len() + 1,
                    fields.len()
                ));
            }
            let parse = |f: &str| f.trim().parse::<f64>().map_err(|e| format!("{}: `{f}`: {e}", at()));
            report.x_values.push(parse(fields[0])?);
            for (line, field) in report.lines.iter_mut().zip(&fields[1..]) {
                line.stats.push(None);
                line.points.push(if field.trim().is_empty() {
                    Err("no value in the CSV".to_string())
                } else {
                    Ok(parse(field)?)
                });
            }
        }
        Ok(report)
    }

    /// Writes `<name>.csv` into `dir` (created if missing), and `<name>.svg` with the
    /// `plot` feature; returns the paths written.
    pub fn save(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let csv = dir.join(format!("{}.csv", self.name));
        std::fs::write(&csv, self.csv())?;
        #[allow(unused_mut)]
        let mut written = vec![csv];
        #[cfg(feature = "plot")]
        {
            let svg = dir.join(format!("{}.svg", self.name));
            self.write_svg(&svg)?;
            written.push(svg);
        }
        Ok(written)
    }

    /// Prints the table on stdout.
    pub fn print(&self) {
        print!("{self}");
    }
}

impl fmt::Display for Report {
    /// The table as `perf_report(print_data=True)` prints it: the title and unit, then
    /// one column for the x values and one per line, `-` at a gap.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} ({}):", self.title, self.unit.label())?;
        let widths: Vec<usize> = self.lines.iter().map(|l| l.name.len().max(10)).collect();
        let x_width = self
            .x_values
            .iter()
            .map(|&x| format_x(x).len())
            .chain([self.x_name.len()])
            .max()
            .unwrap_or(0);
        write!(f, "{:>x_width$}", self.x_name)?;
        for (line, width) in self.lines.iter().zip(&widths) {
            write!(f, "  {:>width$}", line.name)?;
        }
        writeln!(f)?;
        for (i, &x) in self.x_values.iter().enumerate() {
            write!(f, "{:>x_width$}", format_x(x))?;
            for (line, width) in self.lines.iter().zip(&widths) {
                match line.value(i) {
                    // Four decimals below 10, so that small values (milliseconds, a
                    // software device's TFLOPS) keep their digits.
                    Some(v) if v.abs() < 10.0 => write!(f, "  {v:>width$.4}")?,
                    Some(v) => write!(f, "  {v:>width$.1}")?,
                    None => write!(f, "  {:>width$}", "-")?,
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
