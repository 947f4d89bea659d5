//! `bench::Benchmark` (Triton's `perf_report`) with fake providers: the units, the table,
//! the CSV (and its reading back), the SVG with the `plot` feature, and a failing provider
//! recorded as a gap instead of ending the sweep.

use rutile::bench::{Benchmark, Report, Stats, Unit};
use std::cell::Cell;

/// Times that a fake provider "measured": `ms` at the median, a spread around it.
fn stats(ms: f64) -> Stats {
    Stats {
        median_ms: ms,
        p20_ms: ms * 0.9,
        p80_ms: ms * 1.1,
    }
}

/// A bandwidth sweep over three sizes: a provider taking `n / 1e9` ms for `n` elements of
/// 8 bytes (exactly 8000 GB/s), and a baseline that fails at the middle size and takes
/// twice as long elsewhere.
fn sweep() -> Report {
    let calls = Cell::new(0);
    let report = Benchmark::new("fake-performance", "N", [1000.0, 3000.0, 1e6])
        .title("fake kernel, f32")
        .log_x(true)
        .gbps(|n| 8.0 * n)
        .line("rutile, fake (cuda)", |n| {
            calls.set(calls.get() + 1);
            Ok(stats(n / 1e9))
        })
        .line("baseline", |n| {
            calls.set(calls.get() + 1);
            if n == 3000.0 {
                Err("baseline: not installed".into())
            } else {
                Ok(stats(2.0 * n / 1e9))
            }
        })
        .run();
    assert_eq!(calls.get(), 6, "every line runs at every x value, also after a failure");
    report
}

#[test]
fn units_and_gaps() {
    let report = sweep();
    assert_eq!(report.unit, Unit::GBps);
    assert_eq!(report.x_values, [1000.0, 3000.0, 1e6]);
    let [rutile, baseline] = &report.lines[..] else {
        panic!("expected two lines, got {}", report.lines.len())
    };
    for i in 0..3 {
        let v = rutile.value(i).expect("rutile has every point");
        assert!((v - 8000.0).abs() < 1e-6, "point {i}: {v} GB/s, expected 8000");
    }
    assert!((baseline.value(0).unwrap() - 4000.0).abs() < 1e-6);
    assert_eq!(baseline.value(1), None);
    assert_eq!(baseline.points[1].as_ref().unwrap_err(), "baseline: not installed");
    assert!((baseline.value(2).unwrap() - 4000.0).abs() < 1e-6);
    // The times behind the points are kept, none at the gap.
    let kept = rutile.stats[2].expect("times at a measured point");
    assert_eq!(kept.median_ms, 1e6 / 1e9);
    assert!((kept.p80_ms - 1.1e-3).abs() < 1e-12);
    assert!(baseline.stats[1].is_none() && baseline.stats[2].is_some());

    let tflops = Benchmark::new("t", "M", [1000.0])
        .tflops(|m| 2.0 * m * m * m)
        .line("mm", |_| Ok(stats(2.0)))
        .run();
    // 2e9 flops in 2 ms: 1 TFLOPS.
    assert!((tflops.lines[0].value(0).unwrap() - 1.0).abs() < 1e-12);
    let ms = Benchmark::new("t", "M", [1.0]).line("x", |_| Ok(stats(0.25))).run();
    assert_eq!((ms.unit, ms.lines[0].value(0)), (Unit::Ms, Some(0.25)));
}

#[test]
fn table_as_perf_report_prints_it() {
    let table = sweep().to_string();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "title, header and one row per size:\n{table}");
    assert_eq!(rows[0], "fake kernel, f32 (GB/s):");
    assert!(rows[1].trim_start().starts_with('N'), "{table}");
    assert!(
        rows[1].contains("rutile, fake (cuda)") && rows[1].contains("baseline"),
        "{table}"
    );
    let fields = |row: &str| row.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(fields(rows[2]), ["1000", "8000.0", "4000.0"]);
    assert_eq!(fields(rows[3]), ["3000", "8000.0", "-"], "a gap is a dash");
    assert_eq!(fields(rows[4]), ["1000000", "8000.0", "4000.0"]);
    // Columns line up: every row as wide as the header.
    assert!(rows[1..].iter().all(|r| r.len() == rows[1].len()), "{table}");
}

#[test]
fn csv_is_well_formed_and_reads_back() {
    let report = sweep();
    let csv = report.csv();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows,
        [
            "N,\"rutile, fake (cuda)\",baseline",
            "1000,8000.00,4000.00",
            "3000,8000.00,",
            "1000000,8000.00,4000.00",
        ]
    );
    // Six significant digits, also for small values.
    let small = Benchmark::new("t", "x", [1.0])
        .line("a", |_| Ok(stats(0.0001234567)))
        .run();
    assert_eq!(small.csv().lines().nth(1), Some("1,0.000123457"));
    let back = report.read_csv(&csv).unwrap();
    assert_eq!(back.x_values, report.x_values);
    assert_eq!(back.lines[0].name, "rutile, fake (cuda)");
    assert_eq!(back.lines[1].value(1), None);
    assert_eq!(back.lines[1].value(2), Some(4000.0));
    assert_eq!(back.title, report.title);

    let short_row = report.read_csv("N,a,b\n1,2\n").unwrap_err();
    assert!(
        short_row.contains("line 2") && short_row.contains("expected 3 fields"),
        "{short_row}"
    );
    // Names with quotes and semicolons read back as written; an unquoted one written before
    // names were quoted has its semicolons read as commas.
    let odd = Benchmark::new("t", "x", [1.0])
        .line("say \"hi\"; then, go", |_| Ok(stats(1.0)))
        .line("plain", |_| Ok(stats(2.0)))
        .run();
    let back = odd.read_csv(&odd.csv()).unwrap();
    assert_eq!(back.lines[0].name, "say \"hi\"; then, go");
    assert_eq!(back.lines[1].name, "plain");
    assert_eq!(back.lines[1].value(0), Some(2.0));
    assert_eq!(
        report.read_csv("N,old; name\n1,2\n").unwrap().lines[0].name,
        "old, name"
    );
    assert!(report.read_csv("N,\"open\n1,2\n").unwrap_err().contains("not closed"));
    let not_a_number = report.read_csv("N,a\n1,fast\n").unwrap_err();
    assert!(not_a_number.contains("`fast`"), "{not_a_number}");
    assert!(report.read_csv("").is_err());
}

#[test]
fn save_writes_the_files() {
    let dir = std::env::temp_dir().join(format!("rutile-perf-report-{}", std::process::id()));
    let report = sweep();
    let written = report.save(&dir).unwrap();
    let csv = dir.join("fake-performance.csv");
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), report.csv());
    assert!(written.contains(&csv));
    #[cfg(feature = "plot")]
    {
        let svg_path = dir.join("fake-performance.svg");
        assert!(written.contains(&svg_path));
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(
            svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "not an SVG document"
        );
        assert!(svg.contains("fake kernel, f32"), "the title is drawn");
        assert!(
            svg.contains("rutile, fake (cuda)") && svg.contains("baseline"),
            "both lines are in the legend"
        );
        assert!(svg.contains("GB/s"), "the unit labels the y-axis");
        // Ticks in steps of 0.2 (whose sums are not exact in binary) print as written.
        let mut times = [0.7, 1.3].into_iter();
        let small = Benchmark::new("small-values", "x", [1.0, 2.0])
            .line("a", |_| Ok(stats(times.next().unwrap())))
            .run();
        let small_path = dir.join("small-values.svg");
        small.write_svg(&small_path).unwrap();
        let small_svg = std::fs::read_to_string(&small_path).unwrap();
        assert!(small_svg.split(['<', '>']).any(|t| t.trim() == "0.6"), "a tick at 0.6");
        let long_fraction = [svg.as_str(), small_svg.as_str()]
            .iter()
            .flat_map(|s| s.split(['<', '>']))
            .map(str::trim)
            .find(|t| t.parse::<f64>().is_ok() && t.split_once('.').is_some_and(|(_, f)| f.len() > 4));
        assert_eq!(long_fraction, None, "tick labels without float noise");
        // The baseline's gap splits it into two single points, each marked with a circle.
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
    }
    #[cfg(not(feature = "plot"))]
    assert_eq!(written.len(), 1, "without the `plot` feature only the CSV is written");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With rounds, the lines run interleaved at each point, each round starting one line
/// further on (a, b, then b, a, then a, b, ...), each point is
/// the median of the rounds' medians, and a line that fails in one round is a gap there
/// without being called again at that point.
#[test]
fn rounds_interleave_the_lines_and_take_the_median() {
    let order = std::cell::RefCell::new(String::new());
    let a_calls = Cell::new(0usize);
    let b_calls = Cell::new(0usize);
    let report = Benchmark::new("t", "x", [1.0, 2.0])
        .rounds(3)
        .line("a", |_| {
            order.borrow_mut().push('a');
            a_calls.set(a_calls.get() + 1);
            // 5, 1, 3 ms in the three rounds of each point: the median is 3.
            Ok(stats([5.0, 1.0, 3.0][(a_calls.get() - 1) % 3]))
        })
        .line("b", |x| {
            order.borrow_mut().push('b');
            b_calls.set(b_calls.get() + 1);
            if x == 2.0 && b_calls.get() == 5 {
                Err("b: failed in the second round".into())
            } else {
                Ok(stats(2.0))
            }
        })
        .run();
    // At x = 2 line b fails in its second round (where it runs first) and is not called in
    // the third.
    assert_eq!(*order.borrow(), "abbaababbaa");
    assert_eq!(report.lines[0].value(0), Some(3.0));
    assert_eq!(report.lines[0].value(1), Some(3.0));
    let kept = report.lines[0].stats[0].unwrap();
    assert!((kept.p80_ms - 3.3).abs() < 1e-12, "{kept:?}");
    assert_eq!(report.lines[1].value(0), Some(2.0));
    assert_eq!(report.lines[1].value(1), None);
    assert_eq!(
        report.lines[1].points[1].as_ref().unwrap_err(),
        "b: failed in the second round"
    );
}
