//! The reasoning-probes section: answer accuracy against the difficulty of a synthetic task
//! (hops of k-hop, pairs of MQAR), one line per arm, and each arm's paired difference to the
//! reference arm.

use std::path::Path;

use super::doc::Doc;
use super::shapes::arm_color;
use super::{Analysis, AnalysisOptions};
use crate::analysis::probes::{ProbeView, probe_views};
use crate::analysis::stats::{SeedMean, holm};
use crate::analysis::views;
use crate::plot::{self, Line, Panel};

/// Family-wise level of the Holm correction over the probe comparisons.
const ALPHA: f64 = 0.05;

/// The guessing reference's line: grey, the palette's last colour.
const GUESS_LABEL: &str = "guessing";
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
    let (p, rejected) = holm_family(&probe);
    let rows = table_rows(&probe, &rejected);
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
    let panels = accuracy_panels(&probe, &views::arms(&a.runs));
    doc.figure(
        plot::interval_lines(
            figs,
            "probe_accuracy",
            &format!("{name}: answer accuracy against difficulty"),
            &panels,
            &["bars: 95% t-interval over seeds"],
        )?,
        "Final answer accuracy minus the guessing rate (guessing uniformly among the digits written before each answer, grey at 0), in percentage points, against the task's difficulty: seed means with 95% Student-t intervals, one line per arm (offset slightly sideways so that intervals do not hide one another). The table above gives the raw accuracies.",
    );
    Ok(())
}

/// The table's rows: per view, arm and difficulty, the accuracy, the guessing rate and the
/// paired difference to the reference arm (`rejected`: Holm's verdicts, in
/// [`holm_family`]'s order).
fn table_rows(probe: &[ProbeView], rejected: &[bool]) -> Vec<Vec<String>> {
    let mut k = 0;
    let mut rows = Vec::new();
    for v in probe {
        for (arm, points) in &v.arms {
            for pt in points {
                let (diff, p_text, mark) = match pt.vs_reference {
                    Some(t) => {
                        let survives = rejected.get(k).copied().unwrap_or(false);
                        k += 1;
                        (
                            percent_interval(&t.diff),
                            crate::fmt::p_value(t.p),
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
    rows
}

/// One panel per view: each arm's accuracy above guessing against difficulty, and the
/// guessing line at zero.
fn accuracy_panels(probe: &[ProbeView], arm_names: &[String]) -> Vec<Panel> {
    // Accuracy in points above guessing: the guessing rate rises with difficulty, so raw
    // accuracy would rise with it for no merit of the model.
    let above_guess = |v: &ProbeView, d: usize, m: SeedMean| {
        let guess = v
            .guess
            .iter()
            .find(|(g, _)| *g == d)
            .map_or(0.0, |(_, g)| g.mean);
        SeedMean {
            mean: 100.0 * (m.mean - guess),
            half: 100.0 * m.half,
            n: m.n,
        }
    };
    probe
        .iter()
        .map(|v| Panel {
            title: format!("{}, size {}", v.kind, v.size),
            x_desc: v.difficulty_name().to_string(),
            y_desc: "Accuracy above guessing, points".into(),
            lines: v
                .arms
                .iter()
                .map(|(arm, pts)| Line {
                    label: arm.clone(),
                    color: arm_color(arm_names, arm),
                    points: pts
                        .iter()
                        .map(|pt| {
                            (
                                pt.difficulty as f64,
                                above_guess(v, pt.difficulty, pt.accuracy),
                            )
                        })
                        .collect(),
                })
                .chain((!v.guess.is_empty()).then(|| {
                    Line {
                        label: GUESS_LABEL.into(),
                        color: GUESS_COLOR,
                        points: v
                            .guess
                            .iter()
                            .map(|(d, _)| {
                                let zero = SeedMean {
                                    mean: 0.0,
                                    half: f64::NAN,
                                    n: 1,
                                };
                                (*d as f64, zero)
                            })
                            .collect(),
                    }
                }))
                .collect(),
        })
        .collect()
}

/// Every comparison with a p-value, across all views, as one Holm family: the p-values in
/// view, arm and difficulty order, and which survive.
fn holm_family(probe: &[ProbeView]) -> (Vec<f64>, Vec<bool>) {
    let p: Vec<f64> = probe
        .iter()
        .flat_map(|v| v.arms.iter().flat_map(|(_, pts)| pts.iter()))
        .filter_map(|pt| pt.vs_reference.map(|t| t.p))
        .collect();
    let rejected = holm(&p, ALPHA);
    (p, rejected)
}

/// The probe sweep's Findings: which accuracy differences survive Holm's correction (or
/// that none do), and how far the best arm is above guessing at each task's hardest level.
pub fn probe_findings(a: &Analysis, baseline: &str) -> Vec<String> {
    let probe = probe_views(&a.runs, baseline);
    if probe.is_empty() {
        return Vec::new();
    }
    let (p, rejected) = holm_family(&probe);
    let mut survivors = Vec::new();
    let mut k = 0;
    for v in &probe {
        for (arm, points) in &v.arms {
            for pt in points {
                let Some(t) = pt.vs_reference else { continue };
                if rejected.get(k).copied().unwrap_or(false) {
                    survivors.push(format!(
                        "`{arm}` on {} ({}) at {} {}: {:+.1} points [{:+.1}, {:+.1}], p = {:.3}",
                        v.kind,
                        v.size,
                        pt.difficulty,
                        v.difficulty_name(),
                        100.0 * t.diff.mean,
                        100.0 * t.diff.lo(),
                        100.0 * t.diff.hi(),
                        t.p
                    ));
                }
                k += 1;
            }
        }
    }
    let mut out = vec![if survivors.is_empty() {
        format!(
            "No arm's answer accuracy differs from `{baseline}`'s on any task or difficulty after Holm's correction over {} paired comparisons (two-sided paired t-tests on the same seeds, family-wise {ALPHA}).",
            p.len()
        )
    } else {
        format!(
            "After Holm's correction over {} paired comparisons, {} of them differ from `{baseline}`: {}.",
            p.len(),
            survivors.len(),
            survivors.join("; ")
        )
    }];
    out.extend(probe.iter().filter_map(hardest_level_finding));
    out
}

/// How far the best arm is above guessing at the hardest level of one task and size.
fn hardest_level_finding(v: &ProbeView) -> Option<String> {
    let hardest = v
        .arms
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.difficulty))
        .max()?;
    let best = v
        .arms
        .iter()
        .filter_map(|(arm, pts)| {
            pts.iter()
                .find(|p| p.difficulty == hardest)
                .map(|p| (arm, p))
        })
        .max_by(|a, b| a.1.accuracy.mean.total_cmp(&b.1.accuracy.mean));
    let guess = v
        .guess
        .iter()
        .find(|(d, _)| *d == hardest)
        .map(|(_, g)| g.mean);
    let ((arm, pt), guess) = (best?, guess?);
    Some(format!(
        "On {} ({}) at {} {}, the best arm, `{arm}`, answers {:.1}% [{:.1}, {:.1}] against {:.1}% for guessing among the prompt's digits: {:+.1} points.",
        v.kind,
        v.size,
        hardest,
        v.difficulty_name(),
        100.0 * pt.accuracy.mean,
        100.0 * pt.accuracy.lo(),
        100.0 * pt.accuracy.hi(),
        100.0 * guess,
        100.0 * (pt.accuracy.mean - guess)
    ))
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
