//! The report's Fig. 6: validation loss against the block size S, with intervals, and the
//! baseline and Full AttnRes as reference lines.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawError, Figure, Frame, color, err, house_mesh, padded};
use crate::analysis::stats::SeedMean;

/// The drawn extent of a seed mean: its t-interval, or the mean alone with one seed.
pub(super) fn span(i: &SeedMean) -> (f64, f64) {
    if i.half.is_finite() {
        (i.lo(), i.hi())
    } else {
        (i.mean, i.mean)
    }
}

struct BlockSize<'a> {
    title: String,
    points: &'a [(usize, SeedMean)],
    baseline: Option<SeedMean>,
    full: Option<SeedMean>,
}

pub fn block_size(
    dir: &std::path::Path,
    title: &str,
    points: &[(usize, SeedMean)],
    baseline: Option<SeedMean>,
    full: Option<SeedMean>,
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
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let log2 = |s: usize| (s as f64).log2();
        let x1 = self.points.iter().map(|p| log2(p.0)).fold(1.0, f64::max) + 0.5;
        let refs = [self.baseline, self.full].into_iter().flatten();
        let (y0, y1) = padded(
            self.points
                .iter()
                .flat_map(|p| <[f64; 2]>::from(span(&p.1)))
                .chain(refs.flat_map(|r| <[f64; 2]>::from(span(&r)))),
            0.15,
        );
        let mut chart = Frame::FIGURE.chart(area, &self.title, -0.5..x1, y0..y1)?;
        house_mesh(
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
                .y_label_formatter(&|y| format!("{y:.3}")),
            (15, 17),
        )
        .draw()
        .map_err(err)?;
        for (r, name, c) in [
            (self.baseline, "baseline", color(0)),
            (self.full, "Full AttnRes (S = 1)", color(1)),
        ] {
            let Some(r) = r else { continue };
            let (lo, hi) = span(&r);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(-0.5, lo), (x1, hi)],
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
                let (lo, hi) = span(&i);
                ErrorBar::new_vertical(log2(s), lo, i.mean, hi, c.stroke_width(2), 10)
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
            .label("Block AttnRes (95% t-interval over seeds)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2)));
        super::legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
        Ok(())
    }
}
