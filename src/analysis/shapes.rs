//! The depth/width family (the report's Fig. 7) read as the report reads it: at each fixed
//! parameter count (or FLOPs per token), loss against the shape's `d_model / n_blocks`, and
//! where each arm's optimum lies.

use super::load::LoadedRun;
use super::stats::SeedMean;
use super::views::arms;
use crate::spec::family::FamilyShapes;
use crate::spec::presets::Fixed;

/// One arm at one target: its shapes in increasing `d_model / n_blocks`.
#[derive(Debug, Clone)]
pub struct ShapeCurve {
    pub arm: String,
    /// `(d_model / n_blocks, d_model, n_blocks, loss over seeds)`.
    pub points: Vec<(f64, usize, usize, SeedMean)>,
}

impl ShapeCurve {
    /// The shape with the lowest mean loss.
    pub fn best(&self) -> Option<&(f64, usize, usize, SeedMean)> {
        self.points
            .iter()
            .min_by(|a, b| a.3.mean.total_cmp(&b.3.mean))
    }
}

/// Every arm's curve at one target of the family.
#[derive(Debug, Clone)]
pub struct TargetView {
    /// `2.0e5 non-embedding parameters` or `1.2e6 FLOPs per token`.
    pub target: String,
    pub curves: Vec<ShapeCurve>,
}

/// The runs of a depth/width family per target, each target with the shapes the sweep chose
/// for it (`spec::family::family_shapes`; a shape two targets share is in both), per arm.
pub fn target_views(runs: &[LoadedRun], targets: &FamilyShapes) -> Vec<TargetView> {
    let order = arms(runs);
    targets
        .iter()
        .map(|(fixed, shapes)| {
            let mut shapes: Vec<(usize, usize)> = shapes.clone();
            shapes.sort_by(|a, b| (a.0 as f64 / a.1 as f64).total_cmp(&(b.0 as f64 / b.1 as f64)));
            shapes.dedup();
            let curves = order
                .iter()
                .filter_map(|arm| {
                    let points: Vec<_> = shapes
                        .iter()
                        .copied()
                        .filter_map(|(d, n)| {
                            let losses: Vec<f64> = runs
                                .iter()
                                .filter(|r| {
                                    let m = &r.planned.spec.model;
                                    r.planned.arm == *arm && m.d_model == d && m.n_blocks == n
                                })
                                .map(|r| r.loss())
                                .collect();
                            (!losses.is_empty())
                                .then(|| (d as f64 / n as f64, d, n, SeedMean::of(&losses)))
                        })
                        .collect();
                    (!points.is_empty()).then(|| ShapeCurve {
                        arm: arm.clone(),
                        points,
                    })
                })
                .collect();
            TargetView {
                target: match fixed {
                    Fixed::NonEmbeddingParams(x) => format!("{x:.1e} non-embedding parameters"),
                    Fixed::FlopsPerToken(x) => format!("{x:.1e} training FLOPs per token"),
                },
                curves,
            }
        })
        .filter(|v| !v.curves.is_empty())
        .collect()
}
