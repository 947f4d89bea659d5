//! A [`Report`] as an SVG line chart, as `perf_report` draws its figures: one line per
//! provider, broken where the provider has a gap.

use super::Report;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Line colours, in the order of the report's lines.
const COLORS: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A tick value without the float noise of the axis's steps (`0.6000000000000001`).
fn axis_label(y: f64) -> String {
    let text = format!("{y:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Report {
    /// Writes the report as an SVG line chart to `path`.
    pub fn write_svg(&self, path: &Path) -> std::io::Result<()> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (900, 540)).into_drawing_area();
            self.draw(&root)
                .map_err(|e| std::io::Error::other(format!("drawing `{}`: {e}", self.name)))?;
        }
        std::fs::write(path, svg)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
        root.fill(&WHITE)?;
        let (mut x_min, mut x_max) = self
            .x_values
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if x_min > x_max {
            (x_min, x_max) = (0.0, 1.0);
        }
        if x_min == x_max {
            // One size: an axis of zero width has no scale.
            (x_min, x_max) = (x_min * 0.5, x_max * 1.5 + 1.0);
        }
        let y_top = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().filter_map(|p| p.as_ref().ok()))
            .fold(0.0f64, |m, &y| m.max(y));
        let y_max = if y_top > 0.0 { y_top * 1.1 } else { 1.0 };
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64);
        if self.log_x && x_min > 0.0 {
            let chart = builder.build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max)?;
            self.draw_lines(chart)
        } else {
            let chart = builder.build_cartesian_2d(x_min..x_max, 0.0..y_max)?;
            self.draw_lines(chart)
        }
    }

    fn draw_lines<'c, X>(
        &self,
        mut chart: ChartContext<'c, SVGBackend<'c>, Cartesian2d<X, RangedCoordf64>>,
    ) -> DrawResult
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        chart
            .configure_mesh()
            .x_desc(&self.x_name)
            .y_desc(self.unit.label())
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| axis_label(*y))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, line) in self.lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<Option<(f64, f64)>> = self
                .x_values
                .iter()
                .enumerate()
                .map(|(j, &x)| line.value(j).map(|y| (x, y)))
                .collect();
            // Each run of points between gaps is its own series; only the first is named,
            // so the legend lists every line once (a line with no point at all included).
            let mut runs: Vec<Vec<(f64, f64)>> = points
                .split(Option::is_none)
                .filter(|r| !r.is_empty())
                .map(|r| r.iter().flatten().copied().collect())
                .collect();
            if runs.is_empty() {
                runs.push(Vec::new());
            }
            for (k, run) in runs.into_iter().enumerate() {
                let single = run.len() == 1;
                let series = chart.draw_series(LineSeries::new(run.clone(), color.stroke_width(2)))?;
                if k == 0 {
                    series
                        .label(line.name.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
                }
                if single {
                    // A point between two gaps draws no line segment: mark it.
                    chart.draw_series(run.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}
