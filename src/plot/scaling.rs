//! The scaling figure (the report's Fig. 4) and the multiplier-versus-compute figure.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    DrawError, FONT, Figure, Frame, color, draw_marked, err, log_ticks, marker, padded_log, sci,
};
pub use crate::analysis::figures::ArmSeries;
use crate::analysis::fit::Law;
use crate::analysis::multiplier::{ArmFit, FitReport};
use crate::analysis::validation::HeldOutArm;

struct Scaling<'a> {
    title: String,
    arms: &'a [ArmSeries],
    fits: Option<&'a FitReport>,
}

/// Loss against compute, log-log: seed means with their spread, fitted curves, multipliers.
pub fn scaling(
    dir: &std::path::Path,
    title: &str,
    arms: &[ArmSeries],
    fits: Option<&FitReport>,
) -> anyhow::Result<std::path::PathBuf> {
    super::save(
        &Scaling {
            title: title.into(),
            arms,
            fits,
        },
        dir,
        "scaling",
        (1000, 820),
    )
}

impl Figure for Scaling<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let all = || self.arms.iter().flat_map(|a| a.points.iter());
        let (x0, x1) = padded_log(all().map(|p| p.0), 1.6);
        let held_out = self.fits.and_then(|f| f.hold_out.as_ref());
        let (y0, y1) = padded_log(
            all().flat_map(|p| [p.2, p.3]).chain(
                held_out
                    .iter()
                    .flat_map(|h| h.arms.iter().map(|a| a.predicted)),
            ),
            1.03,
        );
        // With laws, a residual panel under the main one.
        let (_, height) = area.dim_in_pixel();
        let has_laws = self.arms.iter().any(|a| a.law.is_some());
        let (area, lower) = if has_laws {
            let (upper, lower) = area.split_vertically(height * 3 / 4);
            (upper, Some(lower))
        } else {
            (area.clone(), None)
        };
        let area = &area;
        let mut chart = Frame::FIGURE.chart(
            area,
            &self.title,
            (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
            (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
        )?;
        super::house_mesh(
            chart
                .configure_mesh()
                .x_desc("Training compute (PFLOP/s-days)")
                .y_desc("Validation loss (nats/token)")
                .x_label_formatter(&|x| sci(*x))
                .y_label_formatter(&|y| format!("{y:.2}")),
            (15, 17),
        )
        .draw()
        .map_err(err)?;
        for (i, arm) in self.arms.iter().enumerate() {
            let held = held_out.and_then(|h| h.arms.iter().find(|a| a.arm == arm.arm));
            draw_arm(&mut chart, i, arm, held, ((x0, x1), (y0, y1)))?;
        }
        super::legend(&mut chart, SeriesLabelPosition::UpperRight, 15)?;
        if let Some(fits) = self.fits {
            multiplier_notes(area, fits)?;
        }
        if let Some(lower) = lower {
            self.residuals(&lower, (x0, x1))?;
        }
        Ok(())
    }
}

/// One arm on the main panel: its fitted law (labelled in the legend), each size's seed
/// mean with its spread, and the largest size as a fit without it predicted it.
fn draw_arm<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    i: usize,
    arm: &ArmSeries,
    held: Option<&HeldOutArm>,
    ((x0, x1), (y0, y1)): ((f64, f64), (f64, f64)),
) -> Result<(), DrawError>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = color(i);
    if let Some(law) = arm.law {
        let n = 60;
        let curve = (0..=n).map(|j| {
            let x = (x0.ln() + (x1.ln() - x0.ln()) * j as f64 / n as f64).exp();
            (x, law.loss(x))
        });
        chart
            .draw_series(LineSeries::new(
                curve.filter(|p| p.1 >= y0 && p.1 <= y1),
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(legend_label(&arm.arm, law))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2)));
    }
    chart
        .draw_series(arm.points.iter().map(|&(x, _, lo, hi)| {
            ErrorBar::new_vertical(x, lo, (lo + hi) / 2.0, hi, c.stroke_width(1), 8)
        }))
        .map_err(err)?;
    let points: Vec<(f64, f64)> = arm.points.iter().map(|&(x, y, ..)| (x, y)).collect();
    let label = arm.law.is_none().then(|| arm.arm.clone());
    draw_marked(chart, &points, marker(i), c, label)?;
    // The largest size as a fit without it predicted it: hollow, joined to the
    // observed mean.
    if let Some(h) = held {
        chart
            .draw_series([
                PathElement::new(
                    vec![(h.compute, h.predicted), (h.compute, h.observed.mean)],
                    c.stroke_width(1),
                )
                .into_dyn(),
                Circle::new((h.compute, h.predicted), 7, WHITE.filled()).into_dyn(),
                Circle::new((h.compute, h.predicted), 7, c.stroke_width(2)).into_dyn(),
            ])
            .map_err(err)?;
    }
    Ok(())
}

/// Each arm's compute multiplier with its interval, written in the figure's lower left,
/// and how to read them.
fn multiplier_notes<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    fits: &FitReport,
) -> Result<(), DrawError> {
    let lines: Vec<String> = fits
        .arms
        .iter()
        .filter_map(|a| {
            a.multiplier.map(|m| {
                let d = m.digits().min(2);
                format!(
                    "{}: {:.2}x compute [{:.d$}, {:.d$}]",
                    a.arm, m.value, m.lo, m.hi
                )
            })
        })
        .collect();
    let (_, h) = area.dim_in_pixel();
    for (k, line) in lines.iter().enumerate() {
        area.draw(&Text::new(
            line.clone(),
            (90, h as i32 - 112 - 20 * (lines.len() - 1 - k) as i32),
            (FONT, 15),
        ))
        .map_err(err)?;
    }
    let note = format!(
        "multiplier vs {} at the largest compute, 95% bootstrap interval{}",
        fits.baseline,
        if fits.hold_out.is_some() {
            "; hollow: the largest size predicted by a fit without it"
        } else {
            ""
        }
    );
    area.draw(&Text::new(
        note,
        (90, h as i32 - 90),
        (FONT, 13).into_font().color(&BLACK.mix(0.6)),
    ))
    .map_err(err)?;
    Ok(())
}

impl Scaling<'_> {
    /// Each arm's seed mean minus its fitted law at each compute, in nats.
    fn residuals<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (x0, x1): (f64, f64),
    ) -> Result<(), DrawError> {
        let residual: Vec<(usize, Vec<(f64, f64)>)> = self
            .arms
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let law = a.law?;
                Some((
                    i,
                    a.points
                        .iter()
                        .map(|&(x, y, ..)| (x, y - law.loss(x)))
                        .collect(),
                ))
            })
            .collect();
        let (r0, r1) = super::padded(
            residual
                .iter()
                .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
                .chain([0.0]),
            0.15,
        );
        let mut chart = ChartBuilder::on(area)
            .margin(14)
            .margin_top(0)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                r0..r1,
            )
            .map_err(err)?;
        super::house_mesh(
            chart
                .configure_mesh()
                .y_desc("mean − law, nats")
                .y_labels(4)
                .x_label_formatter(&|x| sci(*x))
                .y_label_formatter(&|y| format!("{y:+.3}")),
            (15, 16),
        )
        .draw()
        .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(x0, 0.0), (x1, 0.0)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?;
        for (i, pts) in &residual {
            draw_marked(&mut chart, pts, marker(*i), color(*i), None)?;
        }
        Ok(())
    }
}

fn legend_label(arm: &str, law: Law) -> String {
    // An E below the printed precision is a pure power law.
    if law.e >= 5e-4 {
        format!("{arm}: {:.3} + {:.3}·C^-{:.3}", law.e, law.a, law.alpha)
    } else {
        format!("{arm}: {:.3}·C^-{:.3}", law.a, law.alpha)
    }
}

struct Multiplier<'a> {
    title: String,
    arms: &'a [ArmFit],
    baseline: &'a str,
}

/// The compute multiplier of every arm against the baseline over the fitted range, with its
/// 95% interval band.
pub fn multiplier_curve(
    dir: &std::path::Path,
    title: &str,
    fits: &FitReport,
) -> anyhow::Result<std::path::PathBuf> {
    let arms: Vec<ArmFit> = fits
        .arms
        .iter()
        .filter(|a| !a.curve.is_empty())
        .cloned()
        .collect();
    super::save(
        &Multiplier {
            title: title.into(),
            arms: &arms,
            baseline: &fits.baseline,
        },
        dir,
        "multiplier",
        (900, 560),
    )
}

impl Figure for Multiplier<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let points = || self.arms.iter().flat_map(|a| a.curve.iter());
        let (x0, x1) = padded_log(points().map(|p| p.compute), 1.05);
        let (y0, y1) = super::padded(
            points()
                .flat_map(|p| [p.multiplier.lo, p.multiplier.hi, p.multiplier.value])
                .chain([1.0]),
            0.08,
        );
        let mut chart = Frame::FIGURE.chart(
            area,
            &self.title,
            (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
            y0..y1,
        )?;
        super::house_mesh(
            chart
                .configure_mesh()
                .x_desc("Training compute (PFLOP/s-days)")
                .y_desc(format!("Compute multiplier vs {} (x)", self.baseline))
                .x_label_formatter(&|x| sci(*x))
                .y_label_formatter(&|y| format!("{y:.2}")),
            (15, 17),
        )
        .draw()
        .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(x0, 1.0), (x1, 1.0)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("1x: no better than {}", self.baseline))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], BLACK.mix(0.5)));
        for (i, arm) in self.arms.iter().enumerate() {
            let c = color(i + 1);
            let band: Vec<(f64, f64)> = arm
                .curve
                .iter()
                .filter(|p| p.multiplier.lo.is_finite())
                .map(|p| (p.compute, p.multiplier.lo.clamp(y0, y1)))
                .chain(
                    arm.curve
                        .iter()
                        .rev()
                        .filter(|p| p.multiplier.hi.is_finite())
                        .map(|p| (p.compute, p.multiplier.hi.clamp(y0, y1))),
                )
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))
                .map_err(err)?;
            chart
                .draw_series(LineSeries::new(
                    arm.curve
                        .iter()
                        .filter(|p| p.multiplier.value.is_finite())
                        .map(|p| (p.compute, p.multiplier.value)),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!("{} (band: 95% interval)", arm.arm))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
        }
        super::legend(&mut chart, SeriesLabelPosition::UpperLeft, 15)?;
        Ok(())
    }
}
