//! The cost figure: per-token depth I/O per layer and extra kept state of each arm against
//! depth (docs/cost.md), so that a report shows the cost next to the benefit.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawError, Figure, Frame, SIDE_LEGEND_WIDTH, color, err, padded};
pub use crate::analysis::cost::CostCurve;

/// Which points of a curve a panel draws.
type CurvePoints = fn(&CostCurve) -> &Vec<(f64, f64)>;

struct Cost<'a> {
    title: String,
    curves: &'a [CostCurve],
}

pub fn depth_cost(
    dir: &std::path::Path,
    title: &str,
    curves: &[CostCurve],
) -> anyhow::Result<std::path::PathBuf> {
    let fig = Cost {
        title: title.into(),
        curves,
    };
    super::save(&fig, dir, "depth_cost", (2 * 560 + SIDE_LEGEND_WIDTH, 470))
}

impl Figure for Cost<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let (panels, legend_area) = super::titled_panels(area, &self.title, (1, 2))?;
        let views: [(&str, &str, CurvePoints); 2] = [
            (
                "memory I/O per token per layer",
                "reads + writes (units of d)",
                |c| &c.io,
            ),
            (
                "state kept beyond a standard residual",
                "d-vectors per token",
                |c| &c.state,
            ),
        ];
        let x_max = self
            .curves
            .iter()
            .flat_map(|c| c.io.iter().map(|p| p.0))
            .fold(8.0f64, f64::max);
        for ((caption, y_desc, pick), panel) in views.iter().zip(panels.iter()) {
            let (_, y1) = padded(
                self.curves.iter().flat_map(|c| pick(c).iter().map(|p| p.1)),
                0.08,
            );
            let mut chart = Frame::new(17, 10, 42, 55).chart(
                panel,
                *caption,
                3.0..x_max.log2(),
                0.0..y1.max(1.0),
            )?;
            super::house_mesh(
                chart
                    .configure_mesh()
                    .x_desc("Depth L (layers = 2 x Transformer blocks, log2 axis)")
                    .y_desc(*y_desc)
                    .x_labels(2 * (x_max.log2() as usize - 3) + 1)
                    .x_label_formatter(&|x| {
                        // Whole powers of two only (a log2 axis).
                        if (x - x.round()).abs() < 1e-6 {
                            format!("{}", x.round().exp2())
                        } else {
                            String::new()
                        }
                    })
                    .y_label_formatter(&|y| format!("{y:.0}")),
                (13, 14),
            )
            .draw()
            .map_err(err)?;
            for (i, curve) in self.curves.iter().enumerate() {
                let c = color(i);
                chart
                    .draw_series(
                        LineSeries::new(
                            pick(curve).iter().map(|&(l, v)| (l.log2(), v)),
                            c.stroke_width(2),
                        )
                        .point_size(3),
                    )
                    .map_err(err)?;
            }
        }
        let entries: Vec<(String, RGBColor)> = self
            .curves
            .iter()
            .enumerate()
            .map(|(i, c)| (c.arm.clone(), color(i)))
            .collect();
        super::side_legend(
            &legend_area,
            &entries,
            &[
                "two-phase schedule for AttnRes",
                "Full: 8 groups, as in Table 1",
                "Block: 8 blocks, as in Table 1",
            ],
        )
    }
}
