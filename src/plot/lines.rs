//! Seed means with their t-intervals against a small numeric axis, one line per arm and one
//! panel per group: answer accuracy against hops (the reasoning probes), loss against
//! d_model / n_blocks at each parameter count (the depth/width family, Fig. 7).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::block::span;
use super::{
    DrawError, Figure, Frame, SIDE_LEGEND_WIDTH, color, err, house_mesh, padded, side_legend,
};
use crate::analysis::stats::SeedMean;

/// One line: an arm's seed means at each x.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    /// Index into the palette, so an arm keeps its colour across panels.
    pub color: usize,
    pub points: Vec<(f64, SeedMean)>,
}

/// One panel: its lines over a shared x axis.
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub lines: Vec<Line>,
}

struct Lines<'a> {
    title: String,
    panels: &'a [Panel],
    notes: Vec<&'a str>,
}

/// Writes `DIR/NAME.png` (and `.svg`): the panels side by side, one legend on the right.
pub fn interval_lines(
    dir: &std::path::Path,
    name: &str,
    title: &str,
    panels: &[Panel],
    notes: &[&str],
) -> anyhow::Result<std::path::PathBuf> {
    let width = 40 + 520 * panels.len().max(1) as u32 + SIDE_LEGEND_WIDTH;
    super::save(
        &Lines {
            title: title.into(),
            panels,
            notes: notes.to_vec(),
        },
        dir,
        name,
        (width, 540),
    )
}

impl Figure for Lines<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let (cells, legend_area) =
            super::titled_panels(area, &self.title, (1, self.panels.len().max(1)))?;
        for (panel, cell) in self.panels.iter().zip(&cells) {
            draw_panel(panel, cell)?;
        }
        // One entry per colour, in first-seen order.
        let mut entries: Vec<(String, RGBColor)> = Vec::new();
        for line in self.panels.iter().flat_map(|p| &p.lines) {
            if !entries.iter().any(|(l, _)| *l == line.label) {
                entries.push((line.label.clone(), color(line.color)));
            }
        }
        side_legend(&legend_area, &entries, &self.notes)
    }
}

fn draw_panel<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), DrawError> {
    // The x axis is categorical: each distinct x (hops, a shape's ratio) at its own evenly
    // spaced position, labelled with its value.
    let mut xs: Vec<f64> = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let at = |x: f64| xs.iter().position(|v| *v == x).unwrap_or(0) as f64;
    let n_x = xs.len().max(1);
    let (y0, y1) = padded(
        panel
            .lines
            .iter()
            .flat_map(|l| l.points.iter().flat_map(|p| <[f64; 2]>::from(span(&p.1)))),
        0.12,
    );
    let mut chart =
        Frame::new(17, 12, 46, 64).chart(area, &panel.title, -0.5..n_x as f64 - 0.5, y0..y1)?;
    // Decimals enough to tell ticks apart, and no more (about 6 ticks over the range).
    let digits = ((-((y1 - y0) / 6.0).log10()).ceil().max(0.0) as usize).min(4);
    let labels = xs.clone();
    let format_x = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
            format!("{}", (labels[i as usize] * 10.0).round() / 10.0)
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    house_mesh(&mut mesh, (16, 16))
        .disable_x_mesh()
        .x_desc(panel.x_desc.as_str())
        .y_desc(panel.y_desc.as_str())
        .x_labels(n_x + 1)
        .x_label_formatter(&format_x)
        .y_label_formatter(&|y| format!("{y:.digits$}"))
        .draw()
        .map_err(err)?;
    let n = panel.lines.len().max(1) as f64;
    // Lines side by side around each x, so that intervals do not hide one another.
    let width = 0.06;
    for (k, line) in panel.lines.iter().enumerate() {
        let c = color(line.color);
        let dx = (k as f64 - (n - 1.0) / 2.0) * width;
        chart
            .draw_series(line.points.iter().map(|(x, i)| {
                let (lo, hi) = span(i);
                ErrorBar::new_vertical(at(*x) + dx, lo, i.mean, hi, c.stroke_width(2), 8)
            }))
            .map_err(err)?;
        chart
            .draw_series(
                LineSeries::new(
                    line.points.iter().map(|(x, i)| (at(*x) + dx, i.mean)),
                    c.stroke_width(2),
                )
                .point_size(4),
            )
            .map_err(err)?;
    }
    Ok(())
}
