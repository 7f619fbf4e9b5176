//! The reasoning-probes section: answer accuracy against the difficulty of a synthetic task
//! (hops of k-hop, pairs of MQAR), one line per arm, and each arm's paired difference to the
//! reference arm.

use std::path::Path;

use super::doc::Doc;
use super::shapes::arm_color;
use super::{Analysis, AnalysisOptions};
use crate::analysis::probes::probe_views;
use crate::analysis::stats::holm;
use crate::analysis::views;
use crate::plot::{self, Line, Panel};

/// Family-wise level of the Holm correction over the probe comparisons.
const ALPHA: f64 = 0.05;

/// The guessing reference's line: grey, the palette's last colour.
const GUESS_LABEL: &str = "guess among the prompt's digits";
const GUESS_COLOR: usize = 11;

pub fn probes_section(
    doc: &mut Doc,
    a: &Analysis,
    opts: &AnalysisOptions,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    let probe = probe_views(&a.runs, &opts.baseline);
    if probe.is_empty() {
        return Ok(());
    }
    doc.h(2, "Reasoning probes: answer accuracy against difficulty");
    // Every comparison with a p-value, across all views, is one Holm family.
    let p: Vec<f64> = probe
        .iter()
        .flat_map(|v| v.arms.iter().flat_map(|(_, pts)| pts.iter()))
        .filter_map(|pt| pt.vs_reference.map(|t| t.p))
        .collect();
    let rejected = holm(&p, ALPHA);
    let mut k = 0;
    let mut rows = Vec::new();
    for v in &probe {
        for (arm, points) in &v.arms {
            for pt in points {
                let (diff, p_text, mark) = match pt.vs_reference {
                    Some(t) => {
                        let survives = rejected.get(k).copied().unwrap_or(false);
                        k += 1;
                        (
                            percent_interval(&t.diff),
                            if t.p.is_finite() {
                                format!("{:.3}", t.p)
                            } else {
                                "-".into()
                            },
                            if survives { "yes" } else { "" },
                        )
                    }
                    None => ("-".into(), "-".into(), ""),
                };
                let guess = v
                    .guess
                    .iter()
                    .find(|(d, _)| *d == pt.difficulty)
                    .map_or("-".into(), |(_, g)| format!("{:.1}", 100.0 * g.mean));
                rows.push(vec![
                    format!("{} ({})", v.kind, v.size),
                    arm.clone(),
                    pt.difficulty.to_string(),
                    percent_interval(&pt.accuracy),
                    guess,
                    diff,
                    p_text,
                    mark.to_string(),
                    pt.accuracy.n.to_string(),
                ]);
            }
        }
    }
    doc.p(format!(
        "Accuracy is the fraction of answer positions predicted exactly at the final evaluation, mean over seeds with its 95% Student-t interval. `guess` is what a model scores that has learnt the format but not the binding: guessing uniformly among the distinct digits written before each answer, on the same validation examples (mean over seeds). The difference is the arm minus `{}` on the same seed and task, in percentage points, with its 95% t-interval and a two-sided paired t-test; {} comparisons, Holm's correction at a family-wise {ALPHA} (survivors marked).",
        opts.baseline,
        p.len()
    ));
    doc.table(
        &[
            "task (size)",
            "variant",
            "difficulty",
            "accuracy, %",
            "guess, %",
            &format!("vs {}, points", opts.baseline),
            "p",
            "Holm",
            "seeds",
        ],
        rows,
    );
    let arm_names = views::arms(&a.runs);
    let panels: Vec<Panel> = probe
        .iter()
        .map(|v| Panel {
            title: format!("{}, size {}", v.kind, v.size),
            x_desc: v.difficulty_name().to_string(),
            y_desc: "Answer accuracy".into(),
            lines: v
                .arms
                .iter()
                .map(|(arm, pts)| Line {
                    label: arm.clone(),
                    color: arm_color(&arm_names, arm),
                    points: pts
                        .iter()
                        .map(|pt| (pt.difficulty as f64, pt.accuracy))
                        .collect(),
                })
                .chain((!v.guess.is_empty()).then(|| Line {
                    label: GUESS_LABEL.into(),
                    color: GUESS_COLOR,
                    points: v.guess.iter().map(|(d, g)| (*d as f64, *g)).collect(),
                }))
                .collect(),
        })
        .collect();
    doc.figure(
        plot::interval_lines(
            figs,
            "probe_accuracy",
            &format!("{name}: answer accuracy against difficulty"),
            &panels,
            &["bars: 95% t-interval over seeds"],
        )?,
        "Final answer accuracy against the task's difficulty, one line per arm: seed means with 95% Student-t intervals (lines offset slightly sideways so that intervals do not hide one another); grey: guessing uniformly among the digits written before each answer.",
    );
    Ok(())
}

/// `61.2 ± 3.4` in percent (the mean alone with one seed).
fn percent_interval(m: &crate::analysis::stats::SeedMean) -> String {
    crate::analysis::stats::SeedMean {
        mean: 100.0 * m.mean,
        half: 100.0 * m.half,
        n: m.n,
    }
    .display(1)
}
