//! The report's Fig. 5: hidden-state RMS, output RMS and gradient norm across depth, per
//! sublayer and per Transformer block, one line per variant.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawError, Figure, Frame, SIDE_LEGEND_WIDTH, color, err, log_ticks, padded_log, sci};
pub use crate::analysis::figures::Profile;

/// Three panels this wide keep the figure near 1300 px, so its text reads at page width.
const PANEL_WIDTH: u32 = 360;

struct Profiles<'a> {
    title: String,
    profiles: &'a [Profile],
    per_block: bool,
}

/// Writes `layers` (per sublayer) and `blocks` (the per-block view of SPEC section 8).
pub fn layer_profiles(
    dir: &std::path::Path,
    title: &str,
    profiles: &[Profile],
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    Ok(vec![
        super::save(
            &Profiles {
                title: format!("{title}: per sublayer"),
                profiles,
                per_block: false,
            },
            dir,
            "layers",
            (PANEL_WIDTH * 3 + SIDE_LEGEND_WIDTH, 500),
        )?,
        super::save(
            &Profiles {
                title: format!("{title}: per Transformer block"),
                profiles,
                per_block: true,
            },
            dir,
            "blocks",
            (PANEL_WIDTH * 3 + SIDE_LEGEND_WIDTH, 500),
        )?,
    ])
}

impl Profiles<'_> {
    /// Metric `m` (0: hidden-state RMS, 1: output RMS, 2: gradient norm) of a profile,
    /// per sublayer or per block; empty where a run did not record it (block output before
    /// the probe existed).
    fn metric(&self, p: &Profile, m: usize) -> Vec<f64> {
        let [hidden, output, grad] = if self.per_block {
            p.per_block()
        } else {
            [p.in_rms.clone(), p.out_rms.clone(), p.grad_norm.clone()]
        };
        [hidden, output, grad][m].clone()
    }

    /// Per arm and layer, the lowest and highest seed of metric `m`.
    fn seed_bands(&self, m: usize) -> Vec<Vec<(f64, f64)>> {
        self.profiles
            .iter()
            .map(|p| {
                let seeds: Vec<Vec<f64>> = p.seeds.iter().map(|s| self.metric(s, m)).collect();
                let n = seeds.iter().map(Vec::len).min().unwrap_or(0);
                (0..n)
                    .map(|l| {
                        seeds
                            .iter()
                            .map(|s| s[l])
                            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                                (lo.min(v), hi.max(v))
                            })
                    })
                    .collect()
            })
            .collect()
    }

    /// One metric's panel: each arm's line over depth and its band over seeds.
    fn draw_metric<DB: DrawingBackend>(
        &self,
        panel: &DrawingArea<DB, Shift>,
        m: usize,
        (name, ylabel): (&str, &str),
    ) -> Result<(), DrawError> {
        let unit = if self.per_block {
            "Transformer block"
        } else {
            "Sublayer (even: attention, odd: MLP)"
        };
        let series: Vec<Vec<f64>> = self.profiles.iter().map(|p| self.metric(p, m)).collect();
        let bands = self.seed_bands(m);
        let caption = if series.iter().all(Vec::is_empty) {
            format!("{name}: not recorded by these runs")
        } else {
            name.to_string()
        };
        let n = series.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let (y0, y1) = padded_log(
            series
                .iter()
                .flatten()
                .copied()
                .chain(bands.iter().flatten().flat_map(|b| [b.0, b.1])),
            1.3,
        );
        let mut chart = Frame::new(18, 10, 50, 72).chart(
            panel,
            caption,
            -0.3..(n as f64 - 0.7),
            (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
        )?;
        super::house_mesh(
            chart
                .configure_mesh()
                .x_desc(unit)
                .y_desc(ylabel)
                .x_labels(n.min(8))
                .x_label_formatter(&|x| format!("{}", x.round() as i64))
                .y_label_formatter(&|y| sci(*y)),
            (16, 16),
        )
        .draw()
        .map_err(err)?;
        for (i, band) in bands.iter().enumerate().filter(|(_, b)| b.len() > 1) {
            let outline: Vec<(f64, f64)> = band
                .iter()
                .enumerate()
                .map(|(l, b)| (l as f64, b.0))
                .chain(band.iter().enumerate().rev().map(|(l, b)| (l as f64, b.1)))
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    color(i).mix(0.15).filled(),
                )))
                .map_err(err)?;
        }
        for (i, values) in series.iter().enumerate() {
            chart
                .draw_series(
                    LineSeries::new(
                        values.iter().enumerate().map(|(l, &v)| (l as f64, v)),
                        color(i).stroke_width(2),
                    )
                    .point_size(3),
                )
                .map_err(err)?;
        }
        Ok(())
    }
}

impl Figure for Profiles<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let (panels, legend_area) = super::titled_panels(area, &self.title, (1, 3))?;
        let metrics: [(&str, &str); 3] = if self.per_block {
            [
                ("Hidden-state RMS (block input)", "RMS of x_2i"),
                ("Output RMS (Fig. 5b)", "RMS of y_2i + y_2i+1"),
                ("Gradient norm (Fig. 5c)", "L2 norm over the block"),
            ]
        } else {
            [
                ("Hidden-state RMS (input of the layer)", "RMS of x_l"),
                ("Output RMS (Fig. 5b)", "RMS of y_l"),
                ("Gradient norm (Fig. 5c)", "L2 norm of the gradient"),
            ]
        };
        for (m, (metric, panel)) in metrics.into_iter().zip(panels.iter()).enumerate() {
            self.draw_metric(panel, m, metric)?;
        }
        let seeds = self
            .profiles
            .iter()
            .map(|p| p.seeds.len())
            .max()
            .unwrap_or(0);
        let entries: Vec<(String, RGBColor)> = self
            .profiles
            .iter()
            .enumerate()
            .map(|(i, p)| (p.arm.clone(), color(i)))
            .collect();
        let lines = super::seeds_note("lines: ", seeds);
        let notes: &[&str] = if seeds > 1 {
            &[&lines, "band: lowest to highest seed", "end of training"]
        } else {
            &[&lines, "end of training"]
        };
        super::side_legend(&legend_area, &entries, notes)
    }
}
