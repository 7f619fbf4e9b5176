//! Training curves: train and validation loss against tokens, one panel per model size,
//! every run of that size in it (colour by arm).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{FONT, Figure, SIDE_LEGEND_WIDTH, color, err, padded, sci};
pub use crate::analysis::figures::RunCurve;

struct Curves<'a> {
    title: String,
    sizes: Vec<String>,
    arms: Vec<String>,
    runs: &'a [RunCurve],
}

pub fn training_curves(
    dir: &std::path::Path,
    title: &str,
    runs: &[RunCurve],
) -> anyhow::Result<std::path::PathBuf> {
    let mut sizes: Vec<String> = Vec::new();
    let mut arms: Vec<String> = Vec::new();
    for r in runs {
        if !sizes.contains(&r.size) {
            sizes.push(r.size.clone());
        }
        if !arms.contains(&r.arm) {
            arms.push(r.arm.clone());
        }
    }
    let cols = sizes.len().min(3) as u32;
    let rows = sizes.len().div_ceil(3) as u32;
    let fig = Curves {
        title: title.into(),
        sizes,
        arms,
        runs,
    };
    super::save(
        &fig,
        dir,
        "training_curves",
        (
            560 * cols.max(1) + SIDE_LEGEND_WIDTH,
            420 * rows.max(1) + 50,
        ),
    )
}

/// A run's train curve smoothed over a fiftieth of its steps.
fn smooth_run(r: &RunCurve) -> Vec<(f64, f64)> {
    smooth(&r.train, (r.train.len() / 50).max(1))
}

/// Smooths a noisy train curve with a trailing mean over `window` steps.
fn smooth(points: &[(f64, f64)], window: usize) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len());
    let mut sum = 0.0;
    for (i, &(x, y)) in points.iter().enumerate() {
        sum += y;
        if i >= window {
            sum -= points[i - window].1;
        }
        out.push((x, sum / (i + 1).min(window) as f64));
    }
    out
}

impl Figure for Curves<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (title_area, body) = area.split_vertically(50);
        title_area.titled(&self.title, (FONT, 22)).map_err(err)?;
        let cols = self.sizes.len().min(3);
        let rows = self.sizes.len().div_ceil(3);
        let (w, _) = body.dim_in_pixel();
        let (plots, legend_area) = body.split_horizontally(w - SIDE_LEGEND_WIDTH);
        let panels = plots.split_evenly((rows.max(1), cols.max(1)));
        for (size, panel) in self.sizes.iter().zip(panels.iter()) {
            let runs: Vec<&RunCurve> = self.runs.iter().filter(|r| &r.size == size).collect();
            let xs = runs.iter().flat_map(|r| r.train.iter().map(|p| p.0));
            let x1 = xs.fold(1.0f64, f64::max);
            // The range of what is drawn (smoothed train loss, validation loss), skipping the
            // first tenth of training so that the interesting range is visible.
            let smoothed: Vec<Vec<(f64, f64)>> = runs.iter().map(|r| smooth_run(r)).collect();
            let ys = runs.iter().zip(&smoothed).flat_map(|(r, train)| {
                let skip = |n: usize| n / 10;
                train
                    .iter()
                    .skip(skip(train.len()))
                    .chain(r.val.iter().skip(skip(r.val.len())))
                    .map(|p| p.1)
            });
            let (y0, y1) = padded(ys, 0.05);
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("size {size}"), (FONT, 17))
                .margin(10)
                .x_label_area_size(42)
                .y_label_area_size(55)
                .build_cartesian_2d(0.0..x1, y0..y1)
                .map_err(err)?;
            super::house_mesh(
                chart
                    .configure_mesh()
                    .x_desc("Training tokens")
                    .y_desc("Loss (nats/token)")
                    .x_label_formatter(&|x| sci(*x))
                    .y_label_formatter(&|y| format!("{y:.2}")),
                (13, 14),
            )
            .draw()
            .map_err(err)?;
            for (r, train) in runs.iter().zip(smoothed) {
                let i = self.arms.iter().position(|a| a == &r.arm).unwrap_or(0);
                let c = color(i);
                chart
                    .draw_series(LineSeries::new(train, c.mix(0.45).stroke_width(1)))
                    .map_err(err)?;
                chart
                    .draw_series(LineSeries::new(r.val.clone(), c.stroke_width(2)).point_size(3))
                    .map_err(err)?;
            }
        }
        let entries: Vec<(String, RGBColor)> = self
            .arms
            .iter()
            .enumerate()
            .map(|(i, arm)| (arm.clone(), color(i)))
            .collect();
        super::side_legend(
            &legend_area,
            &entries,
            &[
                "thin: train loss (smoothed)",
                "thick with dots: validation loss",
                "one line per seed",
            ],
        )
    }
}
