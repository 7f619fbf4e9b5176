//! The sections of a sweep report, in reading order.

use std::path::Path;

use super::doc::Doc;
use super::findings::{Evidence, findings};
use super::tables::{
    FIT_HEADER, HOLD_OUT_HEADER, WALL_CLOCK_HEADER, arms_table, fit_rows, hold_out_rows,
    paired_header, paired_rows, runs_table, wall_clock_rows,
};
use super::{Analysis, AnalysisOptions};
use super::{shapes, tasks};
use crate::analysis::design::Design;
use crate::analysis::multiplier::FitReport;
use crate::analysis::paired::{PairedTable, paired_table};
use crate::analysis::views;
use crate::fmt::thousands;
use crate::plot;
use crate::spec::Sweep;

mod depth;
use depth::{block_size_section, depth_attention_section, depth_cost, magnitudes};

pub fn build(
    sweep: &Sweep,
    a: &Analysis,
    opts: &AnalysisOptions,
    figs: &Path,
) -> anyhow::Result<Doc> {
    let f = &sweep.file;
    let mut doc = Doc {
        title: format!("attnres sweep `{}`", f.name),
        blocks: Vec::new(),
    };
    let commits = distinct(a.runs.iter().map(|r| r.summary.git_commit.clone()));
    doc.p(provenance_line(sweep, a, &commits));
    if let Some(d) = &f.description {
        doc.p(d.trim());
    }
    // Losses of different tasks are not comparable, so a multi-task sweep has no fit, no
    // paired losses and no pooled magnitudes in its Findings; its accuracy section says
    // what it found.
    let several_tasks = f.tasks.len() > 1;
    let paired = (!several_tasks)
        .then(|| paired_differences(a, opts))
        .flatten();
    let (size, profiles) = views::final_profiles(&a.runs)?;
    let probe_findings = tasks::probe_findings(a, &opts.baseline);
    let evidence = Evidence {
        baseline: &opts.baseline,
        paired: paired.as_ref(),
        fit: a.law().ok().filter(|_| !several_tasks),
        profiles: if several_tasks { &[] } else { &profiles },
        builds: &commits,
        min_seeds: min_seeds(a),
        no_law: a.fits.as_ref().ok().and_then(|r| r.degenerate.as_deref()),
        more: &probe_findings,
    };
    doc.h(2, "Findings");
    let mut list = findings(&evidence);
    list.extend(cpu_note(&a.runs));
    doc.list(list);
    setup(&mut doc, sweep, a);
    runs_table(&mut doc, &a.runs);
    if several_tasks {
        doc.p(format!(
            "This sweep trains on {} tasks; loss is not comparable across tasks, so there is no scaling fit, no per-size comparison of losses and no training-curve figure. Each task's answer accuracy is compared below.",
            f.tasks.len()
        ));
        tasks::probes_section(&mut doc, a, opts, figs, &f.name)?;
    } else {
        arms_table(&mut doc, &a.runs, &opts.baseline);
        fits(&mut doc, a, opts, paired.as_ref(), figs, &f.name)?;
        let curves = views::run_curves(&a.runs)?;
        doc.figure(
            plot::training_curves(figs, &format!("{}: training curves", f.name), &curves)?,
            "Train (thin, smoothed) and validation (thick) loss against training tokens, one panel per size.",
        );
    }
    magnitudes(&mut doc, &size, &profiles, figs, &f.name)?;
    block_size_section(&mut doc, a, figs, &f.name)?;
    shapes::depth_width_section(&mut doc, sweep, a, figs)?;
    depth_attention_section(&mut doc, a, figs, &f.name)?;
    depth_cost(&mut doc, a, figs, &f.name)?;
    doc.h(2, "Reproduce");
    doc.code(format!(
        "attnres run {p}\nattnres report {p}\nattnres fit {p} --resamples {} --seed {}",
        opts.resamples,
        opts.seed,
        p = sweep.path.display()
    ));
    Ok(doc)
}

/// The sorted distinct values.
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = values.collect();
    v.sort();
    v.dedup();
    v
}

/// When and by what the report was made, and by which builds on which backends its runs
/// were trained.
fn provenance_line(sweep: &Sweep, a: &Analysis, commits: &[String]) -> String {
    let backends = distinct(
        a.runs
            .iter()
            .map(|r| format!("{} ({})", r.summary.backend, r.summary.device)),
    );
    format!(
        "Generated {} by attnres {} from `{}`; runs trained with attnres {} on {}.",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        env!("CARGO_PKG_VERSION"),
        sweep.path.display(),
        commits.join(", "),
        backends.join(", ")
    )
}

/// The fewest seeds of any (arm, size, budget) among the finished runs.
fn min_seeds(a: &Analysis) -> usize {
    let mut seeds: std::collections::HashMap<(&str, &str, u64), usize> = Default::default();
    for r in &a.runs {
        *seeds
            .entry((&r.planned.arm, &r.planned.size, r.summary.tokens))
            .or_default() += 1;
    }
    seeds.values().copied().min().unwrap_or(0)
}

fn setup(doc: &mut Doc, sweep: &Sweep, a: &Analysis) {
    let f = &sweep.file;
    doc.h(2, "Setup");
    let first = &sweep.runs[0].spec;
    let mut data = serde_json::to_string(&f.data).unwrap_or_default();
    if !f.tasks.is_empty() {
        let tasks: Vec<String> = f.tasks.iter().map(|t| t.label()).collect();
        data = format!("{data}` with each of the tasks `{}", tasks.join("`, `"));
    }
    doc.p(format!(
        "Data `{data}`; context {}, vocabulary {}, ff_mult {:.3}. Optimiser AdamW (betas {}, {}), peak lr {} with {} warmup and cosine decay to {}x, weight decay {} on matrices, clip {}, batch {} sequences. Seeds {:?}. {} of {} planned runs finished.",
        f.model.context,
        f.model.vocab_size,
        f.model.ff_mult,
        first.train.beta1,
        first.train.beta2,
        // With a per-size rule, `train.lr` is not what any run used.
        if f.lr.is_some() {
            "per size (table below)".to_string()
        } else {
            f.train.lr.to_string()
        },
        f.train.warmup,
        f.train.min_lr_ratio,
        f.train.weight_decay,
        f.train.grad_clip,
        f.train.batch_size,
        f.seeds,
        a.runs.len(),
        sweep.runs.len()
    ));
    doc.p(format!(
        "Final losses are measured on {}.",
        crate::analysis::load::final_val_source(&a.runs)
    ));
    if let Some(cost) = &f.cost {
        doc.p(format!("Cost: {cost}."));
    }
    let mut sizes: Vec<(&str, &crate::spec::RunSpec)> = Vec::new();
    for r in &sweep.runs {
        if !sizes.iter().any(|(s, _)| *s == r.size) {
            sizes.push((&r.size, &r.spec));
        }
    }
    let rows = sizes
        .iter()
        .map(|(name, s)| {
            let base = crate::model::ModelConfig {
                residual: Default::default(),
                value_residual: false,
                ..s.model.clone()
            };
            vec![
                name.to_string(),
                s.model.d_model.to_string(),
                s.model.n_blocks.to_string(),
                s.model.n_heads.to_string(),
                thousands(crate::model::flops::param_counts(&base).non_embedding),
                thousands(s.total_tokens()),
                format!("{:.2e}", s.train.lr),
            ]
        })
        .collect();
    doc.table(
        &[
            "size",
            "d_model",
            "blocks",
            "heads",
            "params (non-emb., baseline)",
            "tokens",
            "lr",
        ],
        rows,
    );
}

fn fits(
    doc: &mut Doc,
    a: &Analysis,
    opts: &AnalysisOptions,
    paired_table: Option<&PairedTable>,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    doc.h(2, "Scaling fits and compute multipliers");
    let fits: Option<&FitReport> = a.law().ok();
    match a.law() {
        Ok(r) => {
            doc.p(format!(
                "`L(C) = E + A·C^-α` per arm, C in PFLOP/s-days ({} FLOP count), Huber loss in log space, E {}. Multipliers are `C_baseline(L_arm(C)) / C` at the largest compute ({:.3e} PF-days), with 95% percentile intervals from {}. An interval ending in ∞ means that more than 2.5% of the resamples found the baseline's law never reaching the arm's loss.",
                if opts.six_nd { "6ND" } else { "exact" },
                r.e_mode.describe(),
                r.largest_compute,
                r.summary_line(),
            ));
            doc.table(&FIT_HEADER, fit_rows(r));
            wall_clock(doc, r);
            doc.p("The bootstrap interval is rounded to its Monte Carlo error (the standard error of its ends over generator seeds). The delta-method interval is `exp(ln M ± t·se)`, with `se` linearised in the cell means and Welch-Satterthwaite degrees of freedom; where the two disagree, the fit is unstable at this noise (docs/statistics.md).");
            validation(doc, r);
        }
        Err(why) => doc.p(format!("No scaling fit: {why}.")),
    }
    if let Some(table) = paired_table {
        paired(doc, table, opts, figs, name)?;
    }
    let series = views::scaling_series(&a.runs, fits, opts.six_nd)?;
    doc.figure(
        plot::scaling(figs, &format!("{name}: loss against compute"), &series, fits)?,
        "Validation loss against training compute (log-log): seed means with 95% Student-t intervals over seeds and fitted curves.",
    );
    if let Some(r) = fits.filter(|r| r.arms.iter().any(|a| !a.curve.is_empty())) {
        doc.figure(
            plot::multiplier_curve(figs, &format!("{name}: compute multiplier against compute"), r)?,
            "Compute multiplier of each arm against the baseline over the fitted range, with its 95% bootstrap band.",
        );
    }
    Ok(())
}

/// The multipliers per unit of training time, or why there are none.
fn wall_clock(doc: &mut Doc, r: &FitReport) {
    if let Some(w) = r.wall_clock.first() {
        doc.h(3, "Per unit of training time");
        doc.p(format!(
            "The wall-clock multiplier is the compute multiplier times the baseline's time per token over the arm's, on {}. Time per token is each run's median over its steps; runs at `{}` are paired by seed. The 95% interval combines the compute multiplier's bootstrap interval with the time ratio's t-interval (root-sum-square of their half-widths on the log scale).",
            w.machine, w.size
        ));
        doc.table(&WALL_CLOCK_HEADER, wall_clock_rows(r));
    } else if let Some(why) = &r.wall_clock_missing {
        doc.p(format!("No wall-clock multiplier: {why}."));
    }
}

/// Whether the fit predicts a size it has not seen.
fn validation(doc: &mut Doc, r: &FitReport) {
    if let Some(h) = &r.hold_out {
        doc.h(3, "Fit validation: the largest size held out");
        doc.p(format!(
            "Every arm refitted without `{}` and its law read at that size's compute. The error is predicted minus observed; in units of the observed seed mean's 95% t half-width, |error| < 1 means the prediction falls inside the seed interval.",
            h.cell
        ));
        doc.table(&HOLD_OUT_HEADER, hold_out_rows(h));
    }
}

/// Each arm's loss minus the baseline's on the same seed, per size; None without a baseline.
fn paired_differences(a: &Analysis, opts: &AnalysisOptions) -> Option<PairedTable> {
    let points = views::fit_points(&a.runs, opts.six_nd);
    if !points.iter().any(|p| p.arm == opts.baseline) {
        return None;
    }
    let table = paired_table(&Design::new(&points, &opts.baseline));
    (!table.rows.is_empty()).then_some(table)
}

/// Per-size paired differences to the baseline, with or without a scaling fit (a sweep of
/// one size has no fit but still has comparisons).
fn paired(
    doc: &mut Doc,
    table: &PairedTable,
    opts: &AnalysisOptions,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    doc.h(3, "Per-size paired differences");
    let survivors = table.rows.iter().filter(|x| x.holm).count();
    doc.p(format!(
        "Validation loss of each arm minus the reference arm's (`{}`) on the same seed, per size: mean over seeds, 95% t-interval and two-sided paired t-test. {} comparisons with a p-value were made; {} survive Holm's correction at a family-wise {} (marked). Negative means the arm is better.",
        opts.baseline, table.comparisons, survivors, table.alpha
    ));
    let header = paired_header(&opts.baseline);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    doc.table(&header, paired_rows(table));
    if let Some(png) = plot::forest(
        figs,
        &format!("{name}: each arm against `{}`", opts.baseline),
        &opts.baseline,
        table,
    )? {
        doc.figure(
            png,
            format!(
                "The table above as a forest plot: each arm's loss minus `{}`'s on the same seed, mean and 95% t-interval per size; left of zero the arm is better. Filled points survive Holm's correction.",
                opts.baseline
            ),
        );
    }
    Ok(())
}

/// A note when the runs were trained on more than one CPU kind, whose kernels round
/// differently (docs/statistics.md, "Runs on other CPUs"), or may have been: some record
/// their CPU and some do not.
fn cpu_note(runs: &[crate::analysis::load::LoadedRun]) -> Option<String> {
    let mut kinds: Vec<&str> = runs
        .iter()
        .filter_map(|r| r.summary.cpu.as_deref())
        .collect();
    let recorded = kinds.len();
    kinds.sort_unstable();
    kinds.dedup();
    let unknown = runs.iter().filter(|r| r.summary.cpu.is_none()).count();
    if kinds.len() == 1 && unknown > 0 {
        return Some(format!(
            "Note: {recorded} of these runs were trained on {} and {unknown} do not record their CPU; runs on different CPUs round differently, which moves a final loss by up to about one seed's noise.",
            kinds[0]
        ));
    }
    if kinds.len() < 2 {
        return None;
    }
    let unrecorded = match unknown {
        0 => String::new(),
        n => format!(", and {n} do not record theirs"),
    };
    Some(format!(
        "Note: these runs were trained on {} CPU kinds ({}){unrecorded}; CPUs round differently, which moves a final loss by up to about one seed's noise.",
        kinds.len(),
        kinds.join("; ")
    ))
}
