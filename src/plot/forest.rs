//! The forest plot: each arm's paired difference from the baseline at each size, as a point
//! with its 95% t-interval, a zero line, and the comparisons that survive Holm's
//! correction drawn filled (the others hollow).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawError, Figure, Frame, color, err, house_mesh, padded};
use crate::analysis::paired::PairedTable;

struct Forest<'a> {
    title: String,
    /// The arm every row is compared with, for the axis label.
    reference: String,
    table: &'a PairedTable,
    /// Arms in figure order; an arm's colour is its place here plus one (the baseline has 0).
    arms: Vec<String>,
}

/// Writes `DIR/forest.png` (and `.svg`); None when the table has no row with an interval.
pub fn forest(
    dir: &std::path::Path,
    title: &str,
    reference: &str,
    table: &PairedTable,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    if !table.rows.iter().any(|r| r.test.diff.half.is_finite()) {
        return Ok(None);
    }
    let mut arms: Vec<String> = Vec::new();
    for r in &table.rows {
        if !arms.contains(&r.arm) {
            arms.push(r.arm.clone());
        }
    }
    let height = 140 + 30 * table.rows.len() as u32;
    super::save(
        &Forest {
            title: title.into(),
            reference: reference.into(),
            table,
            arms,
        },
        dir,
        "forest",
        (1000, height.max(320)),
    )
    .map(Some)
}

impl Figure for Forest<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let rows = &self.table.rows;
        let n = rows.len();
        let (x0, x1) = padded(
            rows.iter()
                .filter(|r| r.test.diff.half.is_finite())
                .flat_map(|r| [r.test.diff.lo(), r.test.diff.hi()])
                .chain([0.0]),
            0.08,
        );
        // Row 0 at the top.
        let y_of = |i: usize| (n - 1 - i) as i32;
        let labels: Vec<String> = rows
            .iter()
            .map(|r| format!("{}  {}", r.arm, r.cell))
            .collect();
        let mut chart = Frame {
            y_labels: 230,
            ..Frame::FIGURE
        }
        .chart(area, &self.title, x0..x1, -1..n as i32)?;
        house_mesh(
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n + 2)
                .x_desc(format!(
                    "arm − {} (nats/token), same seed; filled: survives Holm over {} at {}",
                    self.reference, self.table.comparisons, self.table.alpha
                ))
                .x_label_formatter(&signed)
                .y_label_formatter(&|y| {
                    let i = n as i64 - 1 - i64::from(*y);
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| labels.get(i).cloned())
                        .unwrap_or_default()
                }),
            (15, 16),
        )
        .draw()
        .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, -1), (0.0, n as i32)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?;
        for (i, r) in rows.iter().enumerate() {
            let k = self.arms.iter().position(|a| *a == r.arm).unwrap_or(0) + 1;
            let c = color(k);
            let d = &r.test.diff;
            let y = y_of(i);
            if d.half.is_finite() {
                chart
                    .draw_series(std::iter::once(ErrorBar::new_horizontal(
                        y,
                        d.lo(),
                        d.mean,
                        d.hi(),
                        c.stroke_width(2),
                        10,
                    )))
                    .map_err(err)?;
            }
            let style = if r.holm { c.filled() } else { WHITE.filled() };
            chart
                .draw_series([
                    Circle::new((d.mean, y), 6, style),
                    Circle::new((d.mean, y), 6, c.stroke_width(2)),
                ])
                .map_err(err)?;
        }
        Ok(())
    }
}

/// A difference's tick label: signed, to three decimals, and a bare 0.
fn signed(x: &f64) -> String {
    if x.abs() < 1e-9 {
        "0".into()
    } else {
        format!("{x:+.3}")
    }
}
