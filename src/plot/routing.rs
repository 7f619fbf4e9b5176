//! Routing over training: each AttnRes arm's largest depth-attention weight and the weights'
//! entropy against training tokens, the diagnostic for routing collapse (one source taking
//! all the weight) or its opposite, uniform mixing.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    DrawError, Figure, Frame, SIDE_LEGEND_WIDTH, color, err, house_mesh, padded, sci, side_legend,
};
use crate::analysis::depth_views::RoutingCurve;

/// Which value of a routing point a panel draws.
type Pick = fn(&(f64, f64, f64)) -> f64;

struct Routing<'a> {
    title: String,
    curves: &'a [RoutingCurve],
    /// Palette index of each curve (the arm's place in the sweep).
    colors: Vec<usize>,
}

/// Writes `DIR/routing.png` (and `.svg`).
pub fn routing(
    dir: &std::path::Path,
    title: &str,
    curves: &[RoutingCurve],
    colors: Vec<usize>,
) -> anyhow::Result<std::path::PathBuf> {
    super::save(
        &Routing {
            title: title.into(),
            curves,
            colors,
        },
        dir,
        "routing",
        (2 * 440 + SIDE_LEGEND_WIDTH, 460),
    )
}

impl Figure for Routing<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let (panels, legend_area) = super::titled_panels(area, &self.title, (1, 2))?;
        let x1 = self
            .curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .fold(1.0f64, f64::max);
        let metrics: [(&str, &str, Pick); 2] = [
            ("Largest weight", "mean over mixing steps", |p| p.1),
            (
                "Entropy of the weights",
                "nats, mean over mixing steps",
                |p| p.2,
            ),
        ];
        for ((name, unit, value), panel) in metrics.iter().zip(panels.iter()) {
            let (y0, y1) = padded(
                self.curves.iter().flat_map(|c| c.points.iter().map(value)),
                0.1,
            );
            let mut chart = Frame::new(19, 12, 50, 70).chart(panel, *name, 0.0..x1, y0..y1)?;
            house_mesh(
                chart
                    .configure_mesh()
                    .x_labels(5)
                    .y_labels(6)
                    .x_desc("Training tokens")
                    .y_desc(*unit)
                    .x_label_formatter(&|x| sci(*x))
                    .y_label_formatter(&|y| format!("{y:.2}")),
                (16, 16),
            )
            .draw()
            .map_err(err)?;
            for (c, &k) in self.curves.iter().zip(&self.colors) {
                chart
                    .draw_series(
                        LineSeries::new(
                            c.points.iter().map(|p| (p.0, value(p))),
                            color(k).stroke_width(3),
                        )
                        .point_size(4),
                    )
                    .map_err(err)?;
            }
        }
        let entries: Vec<(String, RGBColor)> = self
            .curves
            .iter()
            .zip(&self.colors)
            .map(|(c, &k)| (c.arm.clone(), color(k)))
            .collect();
        let seeds = self.curves.iter().map(|c| c.seeds).max().unwrap_or(0);
        let note = super::seeds_note("", seeds);
        side_legend(
            &legend_area,
            &entries,
            &[note.as_str(), "at each evaluation"],
        )
    }
}
