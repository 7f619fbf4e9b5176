//! The depth/width section (the report's Fig. 7): loss over the shape grid, and at each
//! fixed parameter count the loss against `d_model / n_blocks` with each arm's optimum.

use std::path::Path;

use super::Analysis;
use super::doc::Doc;
use crate::analysis::shapes::{TargetView, target_views};
use crate::analysis::views;
use crate::plot::{self, Line, Panel};
use crate::spec::Sweep;
use crate::spec::family::family_shapes;

pub fn depth_width_section(
    doc: &mut Doc,
    sweep: &Sweep,
    a: &Analysis,
    figs: &Path,
) -> anyhow::Result<()> {
    let Some(family) = &sweep.file.depth_width else {
        return Ok(());
    };
    let grids = views::depth_width_grids(&a.runs)?;
    if grids.is_empty() {
        return Ok(());
    }
    let name = &sweep.file.name;
    doc.h(2, "Depth and width (Fig. 7)");
    let targets = target_views(&a.runs, &family_shapes(&sweep.file, family)?);
    let (rows, at_edge) = best_shapes(&targets);
    doc.p("At each fixed size, the shape with the lowest mean validation loss over seeds, with its 95% Student-t interval, and the next-best shape: where the two intervals overlap, this sweep does not locate the optimum more finely than that.");
    doc.table(
        &[
            "fixed",
            "variant",
            "best shape",
            "d_model / n_blocks",
            "val loss",
            "next best (ratio: loss)",
            "seeds",
        ],
        rows,
    );
    if !at_edge.is_empty() {
        doc.p(format!(
            "At the edge of the grid: {}. The optimum may lie beyond it; this sweep does not locate it there.",
            at_edge.join("; ")
        ));
    }
    let panels = ratio_panels(&targets, &views::arms(&a.runs));
    doc.figure(
        plot::interval_lines(
            figs,
            "depth_width_ratio",
            &format!("{name}: loss against the shape at fixed size"),
            &panels,
            &["bars: 95% t-interval over seeds", "left: deeper and narrower"],
        )?,
        "Validation loss against d_model / n_blocks at each fixed non-embedding parameter count, seed means with 95% Student-t intervals; left is deeper and narrower.",
    );
    if targets.len() < 2 {
        doc.p("With one fixed size, its shapes lie on one line of the width-by-depth grid, so the figure above holds all of it and no grid is drawn.");
        return Ok(());
    }
    let grids: Vec<_> = grids.into_iter().map(|(g, ..)| g).collect();
    doc.figure(
        plot::depth_width(figs, &format!("{name}: loss over depth and width"), &grids)?,
        "Mean validation loss per shape over the whole family; the best shape of each variant is outlined in red (across all sizes, so the largest size wins).",
    );
    Ok(())
}

/// Per fixed size and arm, the table row of its best shape and the next best; and the
/// arms whose best shape is the deepest or widest tried (`"arm at size (where)"`).
fn best_shapes(targets: &[TargetView]) -> (Vec<Vec<String>>, Vec<String>) {
    let mut rows = Vec::new();
    let mut at_edge: Vec<String> = Vec::new();
    for t in targets {
        for c in &t.curves {
            let Some((ratio, d, n, loss)) = c.best() else {
                continue;
            };
            let first = c.points.first().map(|p| (p.1, p.2));
            let last = c.points.last().map(|p| (p.1, p.2));
            if c.points.len() > 1 && (first == Some((*d, *n)) || last == Some((*d, *n))) {
                at_edge.push(format!(
                    "{} at {} ({})",
                    c.arm,
                    t.target,
                    if last == Some((*d, *n)) {
                        "the widest shape tried"
                    } else {
                        "the deepest shape tried"
                    }
                ));
            }
            let runner_up = c
                .points
                .iter()
                .filter(|p| (p.1, p.2) != (*d, *n))
                .min_by(|x, y| x.3.mean.total_cmp(&y.3.mean));
            rows.push(vec![
                t.target.clone(),
                c.arm.clone(),
                format!("d_model {d} x {n} blocks"),
                format!("{ratio:.1}"),
                loss.display(4),
                runner_up
                    .map(|p| format!("{:.1}: {}", p.0, p.3.display(4)))
                    .unwrap_or_else(|| "-".into()),
                loss.n.to_string(),
            ]);
        }
    }
    (rows, at_edge)
}

/// One panel per fixed size: each arm's loss against `d_model / n_blocks`.
fn ratio_panels(targets: &[TargetView], arm_names: &[String]) -> Vec<Panel> {
    targets
        .iter()
        .map(|t| Panel {
            title: t.target.clone(),
            x_desc: "d_model / n_blocks".into(),
            y_desc: "Validation loss (nats/token)".into(),
            lines: t
                .curves
                .iter()
                .map(|c| Line {
                    label: c.arm.clone(),
                    color: arm_color(arm_names, &c.arm),
                    points: c.points.iter().map(|p| (p.0, p.3)).collect(),
                })
                .collect(),
        })
        .collect()
}

/// An arm's palette index: its place in sweep order, so it keeps one colour in every figure.
pub(crate) fn arm_color(arms: &[String], arm: &str) -> usize {
    arms.iter().position(|a| a == arm).unwrap_or(0)
}
