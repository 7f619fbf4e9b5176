//! The report's Fig. 6: validation loss against the block size S, with intervals, and the
//! baseline and Full AttnRes as reference lines.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{FONT, Figure, color, err, padded};

/// Mean loss over seeds and its 95% interval (t-free: mean +- 1.96 s / sqrt(n)).
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
}

struct BlockSize<'a> {
    title: String,
    points: &'a [(usize, Interval)],
    baseline: Option<Interval>,
    full: Option<Interval>,
}

pub fn block_size(
    dir: &std::path::Path,
    title: &str,
    points: &[(usize, Interval)],
    baseline: Option<Interval>,
    full: Option<Interval>,
) -> anyhow::Result<std::path::PathBuf> {
    super::save(
        &BlockSize {
            title: title.into(),
            points,
            baseline,
            full,
        },
        dir,
        "block_size",
        (900, 560),
    )
}

impl Figure for BlockSize<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let log2 = |s: usize| (s as f64).log2();
        let x1 = self.points.iter().map(|p| log2(p.0)).fold(1.0, f64::max) + 0.5;
        let refs = [self.baseline, self.full].into_iter().flatten();
        let (y0, y1) = padded(
            self.points
                .iter()
                .flat_map(|p| [p.1.lo, p.1.hi])
                .chain(refs.flat_map(|r| [r.lo, r.hi])),
            0.15,
        );
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..x1, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("Block size S (layers per block, log2 axis)")
            .y_desc("Validation loss (nats/token)")
            // Twice the integer positions, so that plotters offers every power of two (the
            // formatter blanks the half steps).
            .x_labels((2.0 * (x1 + 0.5)) as usize + 1)
            .x_label_formatter(&|x| {
                let s = x.exp2();
                if (s - s.round()).abs() < 1e-6 && x.fract().abs() < 1e-6 {
                    format!("{}", s.round())
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.3}"))
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for (r, name, c) in [
            (self.baseline, "baseline", color(0)),
            (self.full, "Full AttnRes (S = 1)", color(1)),
        ] {
            let Some(r) = r else { continue };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(-0.5, r.lo), (x1, r.hi)],
                    c.mix(0.10).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, r.mean), (x1, r.mean)],
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!("{name}: {:.4}", r.mean))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
        }
        let c = color(2);
        chart
            .draw_series(self.points.iter().map(|&(s, i)| {
                ErrorBar::new_vertical(log2(s), i.lo, i.mean, i.hi, c.stroke_width(2), 10)
            }))
            .map_err(err)?;
        chart
            .draw_series(
                LineSeries::new(
                    self.points.iter().map(|&(s, i)| (log2(s), i.mean)),
                    c.stroke_width(2),
                )
                .point_size(5),
            )
            .map_err(err)?
            .label("Block AttnRes (95% interval over seeds)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2)));
        super::legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
        Ok(())
    }
}
