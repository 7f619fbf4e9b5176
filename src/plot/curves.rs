//! Training curves: train and validation loss against tokens, one panel per model size,
//! each arm's median over seeds with a band from its lowest to its highest seed.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawError, Figure, Frame, SIDE_LEGEND_WIDTH, color, err, padded, sci};
pub use crate::analysis::figures::RunCurve;

/// Panels per row: two keep the figure near 1200 px wide, so its text reads at page width.
const COLUMNS: usize = 2;

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
    let cols = sizes.len().min(COLUMNS) as u32;
    let rows = sizes.len().div_ceil(COLUMNS) as u32;
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
            480 * cols.max(1) + SIDE_LEGEND_WIDTH,
            400 * rows.max(1) + 50,
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

/// Per x, the median over seeds and the band from the lowest to the highest seed: `curves`
/// are one arm's runs of one size, which share their x values (tokens at each step or
/// eval); x values that not every run has yet are left out.
fn median_band(curves: &[Vec<(f64, f64)>]) -> Vec<(f64, f64, f64, f64)> {
    let Some(shortest) = curves.iter().map(Vec::len).min() else {
        return Vec::new();
    };
    (0..shortest)
        .filter(|&i| curves.iter().all(|c| c[i].0 == curves[0][i].0))
        .map(|i| {
            let mut ys: Vec<f64> = curves.iter().map(|c| c[i].1).collect();
            ys.sort_by(f64::total_cmp);
            let n = ys.len();
            let median = if n % 2 == 1 {
                ys[n / 2]
            } else {
                (ys[n / 2 - 1] + ys[n / 2]) / 2.0
            };
            (curves[0][i].0, median, ys[0], ys[n - 1])
        })
        .collect()
}

/// The part of a falling curve inside `[.., y1]`: points before it first enters the range
/// are dropped, so a curve is never drawn flat along the top edge.
fn from_entry(points: &[(f64, f64, f64, f64)], y1: f64) -> &[(f64, f64, f64, f64)] {
    let first = points
        .iter()
        .position(|p| p.1 <= y1)
        .unwrap_or(points.len());
    &points[first..]
}

impl Curves<'_> {
    /// The panel of one size: each arm's median train and validation loss over its seeds,
    /// and the validation band where any size so far has several seeds (`seeds`, the most
    /// so far; returned with this size's counted in).
    fn draw_size<DB: DrawingBackend>(
        &self,
        panel: &DrawingArea<DB, Shift>,
        size: &str,
        mut seeds: usize,
    ) -> Result<usize, DrawError> {
        let runs: Vec<&RunCurve> = self.runs.iter().filter(|r| r.size == size).collect();
        let x1 = runs
            .iter()
            .flat_map(|r| r.train.iter().map(|p| p.0))
            .fold(1.0f64, f64::max);
        // Per arm: the median and band of the smoothed train loss and of validation.
        let per_arm: Vec<(usize, Vec<_>, Vec<_>)> = self
            .arms
            .iter()
            .enumerate()
            .filter_map(|(i, arm)| {
                let mine: Vec<&&RunCurve> = runs.iter().filter(|r| &r.arm == arm).collect();
                seeds = seeds.max(mine.len());
                let train: Vec<Vec<(f64, f64)>> = mine.iter().map(|r| smooth_run(r)).collect();
                let val: Vec<Vec<(f64, f64)>> = mine.iter().map(|r| r.val.clone()).collect();
                (!mine.is_empty()).then(|| (i, median_band(&train), median_band(&val)))
            })
            .collect();
        // The y range from what is drawn after the first tenth of training.
        let ys = per_arm.iter().flat_map(|(_, train, val)| {
            let skip = |n: usize| n / 10;
            train
                .iter()
                .skip(skip(train.len()))
                .chain(val.iter().skip(skip(val.len())))
                .flat_map(|p| [p.1, p.2, p.3])
        });
        let (y0, y1) = padded(ys, 0.05);
        let mut chart =
            Frame::new(20, 12, 50, 70).chart(panel, format!("size {size}"), 0.0..x1, y0..y1)?;
        super::house_mesh(
            chart
                .configure_mesh()
                .x_labels(5)
                .y_labels(6)
                .x_desc("Training tokens")
                .y_desc("Loss (nats/token)")
                .x_label_formatter(&|x| sci(*x))
                .y_label_formatter(&|y| format!("{y:.2}")),
            (16, 17),
        )
        .draw()
        .map_err(err)?;
        for (i, train, val) in &per_arm {
            let c = color(*i);
            let (train, val) = (from_entry(train, y1), from_entry(val, y1));
            if seeds > 1 {
                let band: Vec<(f64, f64)> = val
                    .iter()
                    .map(|p| (p.0, p.2.min(y1)))
                    .chain(val.iter().rev().map(|p| (p.0, p.3.min(y1))))
                    .collect();
                chart
                    .draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))
                    .map_err(err)?;
            }
            chart
                .draw_series(LineSeries::new(
                    train.iter().map(|p| (p.0, p.1)),
                    c.mix(0.55).stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series(
                    LineSeries::new(val.iter().map(|p| (p.0, p.1)), c.stroke_width(3))
                        .point_size(4),
                )
                .map_err(err)?;
        }
        Ok(seeds)
    }
}

impl Figure for Curves<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let cols = self.sizes.len().min(COLUMNS);
        let rows = self.sizes.len().div_ceil(COLUMNS);
        let (panels, legend_area) =
            super::titled_panels(area, &self.title, (rows.max(1), cols.max(1)))?;
        let mut seeds = 0;
        for (size, panel) in self.sizes.iter().zip(panels.iter()) {
            seeds = self.draw_size(panel, size, seeds)?;
        }
        let entries: Vec<(String, RGBColor)> = self
            .arms
            .iter()
            .enumerate()
            .map(|(i, arm)| (arm.clone(), color(i)))
            .collect();
        let seeds_note = format!("lines: median of {seeds} seeds");
        let mut notes = vec![
            "thin: train loss (smoothed)",
            "thick, dots: validation loss",
        ];
        if seeds > 1 {
            notes.extend([seeds_note.as_str(), "band: lowest to highest seed"]);
        }
        super::side_legend(&legend_area, &entries, &notes)
    }
}
