//! Heatmaps: the report's Fig. 7 (loss over depth and width, one panel per variant) and
//! Fig. 8 (depth-attention weights, layer x source, one panel per AttnRes variant).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{DrawError, FONT, Figure, Frame, err};
pub use crate::analysis::figures::Grid;

struct Heatmaps<'a> {
    title: String,
    x_desc: String,
    y_desc: String,
    scale_desc: String,
    panels: &'a [Grid],
    /// Low values bright (losses) or high values bright (weights).
    low_is_bright: bool,
    annotate: bool,
}

/// Fig. 7: one panel per variant, n_blocks rows by d_model columns.
pub fn depth_width(
    dir: &std::path::Path,
    title: &str,
    panels: &[Grid],
) -> anyhow::Result<std::path::PathBuf> {
    let fig = Heatmaps {
        title: title.into(),
        x_desc: "Width d_model".into(),
        y_desc: "Depth (Transformer blocks)".into(),
        scale_desc: "validation loss".into(),
        panels,
        low_is_bright: true,
        annotate: true,
    };
    let w = 40 + 430 * panels.len().clamp(1, 4) as u32;
    let h = 110 + 400 * panels.len().div_ceil(4).max(1) as u32;
    super::save(&fig, dir, "depth_width", (w, h))
}

/// Fig. 8: one panel per arm, on a colour scale of its own kind of weight, saved as
/// `name`: the AttnRes arms' mixing steps (rows) over their sources (columns), or the
/// multi-stream arms' layers over their streams; `axes` are the x and y titles.
pub fn depth_attention(
    dir: &std::path::Path,
    name: &str,
    title: &str,
    panels: &[Grid],
    axes: (&str, &str),
) -> anyhow::Result<std::path::PathBuf> {
    let annotate = panels.iter().all(|p| p.cols.len() <= 10);
    let fig = Heatmaps {
        title: title.into(),
        x_desc: axes.0.into(),
        y_desc: axes.1.into(),
        scale_desc: "mean weight over tokens".into(),
        panels,
        low_is_bright: false,
        annotate,
    };
    let w = 40 + 460 * panels.len().clamp(1, 3) as u32;
    let h = 110 + 460 * panels.len().div_ceil(3).max(1) as u32;
    super::save(&fig, dir, name, (w, h))
}

impl Heatmaps<'_> {
    /// The viridis colour of `v` on the figure's shared scale `[lo, hi]`.
    fn shade(&self, v: f64, (lo, hi): (f64, f64)) -> RGBColor {
        let t = (v - lo) / (hi - lo);
        ViridisRGB::get_color(if self.low_is_bright { 1.0 - t } else { t } as f32)
    }

    /// One grid: coloured cells, the marked cell outlined, values written in if asked.
    fn draw_panel<DB: DrawingBackend>(
        &self,
        grid: &Grid,
        panel: &DrawingArea<DB, Shift>,
        range: (f64, f64),
    ) -> Result<(), DrawError> {
        let (nr, nc) = (grid.rows.len(), grid.cols.len());
        // Cell (r, c) is centred on (c, r), so integer ticks label cell centres.
        let label = |names: &[String], v: f64| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                String::new()
            } else {
                names.get(i as usize).cloned().unwrap_or_default()
            }
        };
        let mut chart = Frame::new(16, 8, 40, 60).chart(
            panel,
            &grid.title,
            -0.5..nc as f64 - 0.5,
            -0.5..nr as f64 - 0.5,
        )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .x_labels(nc.min(16) + 1)
            .y_labels(nr.min(16) + 1)
            .x_label_formatter(&|x| label(&grid.cols, *x))
            .y_label_formatter(&|y| label(&grid.rows, *y))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(err)?;
        let cells = || {
            grid.cells.iter().enumerate().flat_map(|(r, row)| {
                row.iter()
                    .enumerate()
                    .filter_map(move |(c, v)| v.map(|v| (r as f64, c as f64, v)))
            })
        };
        chart
            .draw_series(cells().map(|(r, c, v)| {
                Rectangle::new(
                    [(c - 0.5, r - 0.5), (c + 0.5, r + 0.5)],
                    self.shade(v, range).filled(),
                )
            }))
            .map_err(err)?;
        if let Some((r, c)) = grid.mark {
            let (r, c) = (r as f64, c as f64);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(c - 0.5, r - 0.5), (c + 0.5, r + 0.5)],
                    RED.stroke_width(3),
                )))
                .map_err(err)?;
        }
        if self.annotate {
            chart
                .draw_series(cells().map(|(r, c, v)| self.annotation(v, (c, r), range)))
                .map_err(err)?;
        }
        Ok(())
    }

    /// A cell's value printed on it at `at`: white on dark cells, black on bright ones.
    fn annotation(
        &self,
        v: f64,
        at: (f64, f64),
        (lo, hi): (f64, f64),
    ) -> Text<'_, (f64, f64), String> {
        let t = (v - lo) / (hi - lo);
        let dark_cell = if self.low_is_bright { t > 0.5 } else { t < 0.5 };
        let ink = if dark_cell { WHITE } else { BLACK };
        let text = if v.abs() < 1.0 {
            format!("{v:.2}")
        } else {
            format!("{v:.3}")
        };
        let style = (FONT, 11)
            .into_font()
            .color(&ink)
            .pos(Pos::new(HPos::Center, VPos::Center));
        Text::new(text, at, style)
    }

    /// The shared colour scale under the panels: five labelled ticks, and what it measures
    /// under them.
    fn draw_colour_bar<DB: DrawingBackend>(
        &self,
        legend: &DrawingArea<DB, Shift>,
        range: (f64, f64),
    ) -> Result<(), DrawError> {
        let (lo, hi) = range;
        let (w, _) = legend.dim_in_pixel();
        let (bar_x0, bar_x1) = (w as i32 / 4, 3 * w as i32 / 4);
        let steps = 200;
        let step_px = ((bar_x1 - bar_x0) as f64 / steps as f64).ceil() as i32 + 1;
        for i in 0..steps {
            let t = i as f64 / (steps - 1) as f64;
            let x = bar_x0 + ((bar_x1 - bar_x0) as f64 * t) as i32;
            legend
                .draw(&Rectangle::new(
                    [(x, 8), (x + step_px, 24)],
                    self.shade(lo + t * (hi - lo), range).filled(),
                ))
                .map_err(err)?;
        }
        // Five labelled ticks under the bar: its ends and the quarters between.
        for k in 0..=4 {
            let t = f64::from(k) / 4.0;
            let x = bar_x0 + ((bar_x1 - bar_x0) as f64 * t) as i32;
            legend
                .draw(&PathElement::new(vec![(x, 24), (x, 28)], BLACK))
                .map_err(err)?;
            let style = (FONT, 12)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top));
            legend
                .draw(&Text::new(
                    format!("{:.3}", lo + t * (hi - lo)),
                    (x, 29),
                    style,
                ))
                .map_err(err)?;
        }
        // What the scale measures, centred under its tick labels: beside the bar it ran off
        // the left edge of a one-panel figure.
        let style = (FONT, 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        legend
            .draw(&Text::new(
                self.scale_desc.clone(),
                ((bar_x0 + bar_x1) / 2, 48),
                style,
            ))
            .map_err(err)?;
        Ok(())
    }
}

impl Figure for Heatmaps<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let (title_area, rest) = area.split_vertically(44);
        title_area.titled(&self.title, (FONT, 21)).map_err(err)?;
        let (body, legend) = rest.split_vertically(rest.dim_in_pixel().1 - 70);
        let values = self
            .panels
            .iter()
            .flat_map(|p| p.cells.iter().flatten().flatten().copied());
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        let range = if lo.is_finite() {
            (lo, hi.max(lo + 1e-9))
        } else {
            (0.0, 1.0)
        };
        let per_row = if self.annotate && self.panels.iter().all(|p| p.rows.len() > 8) {
            3
        } else {
            4
        }
        .min(self.panels.len().max(1));
        let panels = body.split_evenly((self.panels.len().div_ceil(per_row).max(1), per_row));
        for (grid, panel) in self.panels.iter().zip(panels.iter()) {
            self.draw_panel(grid, panel, range)?;
        }
        self.draw_colour_bar(&legend, range)
    }
}
