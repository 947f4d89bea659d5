//! The tutorials' performance sweeps (`rutile_examples::sweeps`) at their small scope on
//! the interpreter: every line measures every point, except cuBLAS, which needs a CUDA
//! device and is a line of gaps that says so.

use rutile::CpuDevice;
use rutile_examples::sweeps::{Scope, SweepDevice};
use rutile_examples::tutorials::sweeps;

#[test]
fn every_sweep_runs_with_its_baselines() {
    let cpu = CpuDevice::new();
    let device = SweepDevice::new(&cpu, Scope::Small, true).unwrap();
    let names: Vec<_> = sweeps().iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["vector-add-performance", "softmax-performance", "matmul-performance"]
    );
    for sweep in sweeps() {
        let report = sweep.run(Scope::Small, std::slice::from_ref(&device)).unwrap();
        let lines: Vec<&str> = report.lines.iter().map(|l| l.name.as_str()).collect();
        let expected: &[&str] = match sweep.name {
            "vector-add-performance" => &["rutile", "copy ceiling"],
            "softmax-performance" => &["rutile", "naive softmax", "copy ceiling"],
            _ => &["rutile", "cuBLAS"],
        };
        let expected: Vec<String> = expected.iter().map(|p| device.line(p)).collect();
        assert_eq!(lines, expected, "{}", sweep.name);
        for line in &report.lines {
            assert_eq!(line.points.len(), report.x_values.len());
            for (i, point) in line.points.iter().enumerate() {
                if line.name.starts_with("cuBLAS") {
                    let reason = point.as_ref().unwrap_err();
                    assert!(reason.contains("cuBLAS runs on CUDA devices, not on cpu"), "{reason}");
                } else {
                    let v = *point
                        .as_ref()
                        .unwrap_or_else(|e| panic!("{}: {} at {}: {e}", sweep.name, line.name, report.x_values[i]));
                    assert!(v.is_finite() && v > 0.0, "{}: {}: {v}", sweep.name, line.name);
                }
            }
        }
        // The table prints a row per size; the CSV reads back to the same values.
        assert_eq!(report.to_string().lines().count(), report.x_values.len() + 2);
        let back = report.read_csv(&report.csv()).unwrap();
        for (a, b) in back.lines.iter().zip(&report.lines) {
            for i in 0..report.x_values.len() {
                match (a.value(i), b.value(i)) {
                    (Some(x), Some(y)) => assert!((x - y).abs() <= 1e-5 * y.abs(), "{x} read back as {y}"),
                    (x, y) => assert_eq!(x, y),
                }
            }
        }
    }
}
