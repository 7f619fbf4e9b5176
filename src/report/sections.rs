//! The sections of a sweep report, in reading order.

use std::path::Path;

use super::doc::Doc;
use super::tables::{
    HOLD_OUT_HEADER, arms_table, fit_rows, hold_out_rows, paired_header, paired_rows, runs_table,
};
use super::{Analysis, AnalysisOptions};
use super::{shapes, tasks};
use crate::analysis::cost::cost_curves;
use crate::analysis::design::Design;
use crate::analysis::multiplier::FitReport;
use crate::analysis::paired::paired_table;
use crate::analysis::views;
use crate::fmt::thousands;
use crate::model::config::ResidualConfig;
use crate::plot;
use crate::spec::Sweep;

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
    let commits: Vec<String> = {
        let mut c: Vec<String> = a
            .runs
            .iter()
            .map(|r| r.summary.git_commit.clone())
            .collect();
        c.sort();
        c.dedup();
        c
    };
    let backends: Vec<String> = {
        let mut b: Vec<String> = a
            .runs
            .iter()
            .map(|r| format!("{} ({})", r.summary.backend, r.summary.device))
            .collect();
        b.sort();
        b.dedup();
        b
    };
    doc.p(format!(
        "Generated {} by attnres {} from `{}`; runs trained with attnres {} on {}.",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        env!("CARGO_PKG_VERSION"),
        sweep.path.display(),
        commits.join(", "),
        backends.join(", ")
    ));
    if let Some(d) = &f.description {
        doc.p(d.trim());
    }
    setup(&mut doc, sweep, a);
    runs_table(&mut doc, &a.runs);
    if f.tasks.len() > 1 {
        doc.p(format!(
            "This sweep trains on {} tasks; loss is not comparable across tasks, so there is no scaling fit, no per-size comparison of losses and no training-curve figure. Each task's answer accuracy is compared below.",
            f.tasks.len()
        ));
        tasks::probes_section(&mut doc, a, opts, figs, &f.name)?;
    } else {
        arms_table(&mut doc, &a.runs, &opts.baseline);
        fits(&mut doc, a, opts, figs, &f.name)?;
        let curves = views::run_curves(&a.runs)?;
        doc.figure(
            plot::training_curves(figs, &format!("{}: training curves", f.name), &curves)?,
            "Train (thin, smoothed) and validation (thick) loss against training tokens, one panel per size.",
        );
    }
    magnitudes(&mut doc, a, figs, &f.name)?;
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

/// Fig. 6: loss against block size, with baseline and Full as reference lines.
fn block_size_section(doc: &mut Doc, a: &Analysis, figs: &Path, name: &str) -> anyhow::Result<()> {
    if let Some(b) = views::block_view(&a.runs) {
        doc.h(2, "Block size (Fig. 6)");
        let rows = b
            .points
            .iter()
            .map(|(s, i)| {
                vec![
                    s.to_string(),
                    format!("{:.4}", i.mean),
                    if i.half.is_finite() {
                        format!("[{:.4}, {:.4}]", i.lo(), i.hi())
                    } else {
                        "-".into()
                    },
                    i.n.to_string(),
                ]
            })
            .collect();
        doc.table(&["S", "val loss", "95% t-interval", "seeds"], rows);
        doc.figure(
            plot::block_size(figs, &format!("{}: loss against block size, size {}", name, b.size), &b.points, b.baseline, b.full)?,
            "Validation loss against S with 95% Student-t intervals over seeds; baseline and Full AttnRes as reference lines (band: their t-interval).",
        );
    }
    Ok(())
}

/// Fig. 8: the depth-attention weights at the end of training.
fn depth_attention_section(
    doc: &mut Doc,
    a: &Analysis,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    let (size, grids) = views::depth_attention_grids(&a.runs)?;
    let streams = a
        .runs
        .iter()
        .any(|r| r.planned.spec.model.residual.is_multi_stream());
    if !grids.is_empty() {
        doc.h(2, "Depth attention (Fig. 8)");
        doc.figure(
            plot::depth_attention(
                figs,
                &format!("{}: depth-attention weights, size {size}", name),
                &grids,
                streams,
            )?,
            if streams {
                "Mean weight each mixing step puts on each source at the end of training. For hyper-connections, mHC and mHC-lite: each layer's mean read weight of each stream (hyper-connections' may be negative)."
            } else {
                "Mean weight each mixing step puts on each source at the end of training."
            },
        );
    }
    Ok(())
}

/// What each arm's depth mixing costs at scale, next to what it buys (docs/cost.md).
fn depth_cost(doc: &mut Doc, a: &Analysis, figs: &Path, name: &str) -> anyhow::Result<()> {
    let arms: Vec<ResidualConfig> = a
        .runs
        .iter()
        .map(|r| r.planned.spec.model.residual.clone())
        .collect();
    let curves = cost_curves(&arms);
    doc.h(2, "Cost of depth mixing at scale");
    let rows = curves
        .iter()
        .map(|c| {
            let at = |v: &[(f64, f64)], l: f64| {
                v.iter()
                    .find(|p| p.0 == l)
                    .map_or("-".into(), |p| format!("{:.2}d", p.1))
            };
            vec![
                c.arm.clone(),
                at(&c.io, 128.0),
                at(&c.state, 128.0),
                at(&c.io, 256.0),
                at(&c.state, 256.0),
            ]
        })
        .collect();
    doc.table(
        &[
            "variant",
            "I/O per layer, L = 128",
            "extra state, L = 128",
            "I/O per layer, L = 256",
            "extra state, L = 256",
        ],
        rows,
    );
    doc.figure(
        plot::depth_cost(figs, &format!("{name}: depth-mixing cost against depth"), &curves)?,
        "Memory I/O per token per layer caused by the residual mechanism (the report's Table 1, two-phase schedule for AttnRes; Full in 8 groups as in Table 1) and d-vectors per token kept beyond a standard residual's hidden state, for each arm of this sweep at its own block size, from L = 8 to 256 layers. Formulas, sources and assumptions: docs/cost.md; `attnres cost` prints them for any shape and parallel layout.",
    );
    Ok(())
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
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    doc.h(2, "Scaling fits and compute multipliers");
    let fits: Option<&FitReport> = a.fits.as_ref().ok();
    match &a.fits {
        Ok(r) => {
            doc.p(format!(
                "`L(C) = E + A·C^-α` per arm, C in PFLOP/s-days ({} FLOP count), Huber loss in log space, E {}. Multipliers are `C_baseline(L_arm(C)) / C` at the largest compute ({:.3e} PF-days), with 95% percentile intervals from {}. An interval ending in ∞ means that more than 2.5% of the resamples found the baseline's law never reaching the arm's loss.",
                if opts.six_nd { "6ND" } else { "exact" },
                match r.e_mode { crate::analysis::fit::EMode::Shared => "shared", crate::analysis::fit::EMode::PerArm => "per arm", crate::analysis::fit::EMode::Zero => "fixed at 0" },
                r.largest_compute,
                r.summary_line(),
            ));
            doc.table(
                &[
                    "arm",
                    "A",
                    "α",
                    "E",
                    "multiplier",
                    "95% interval",
                    "points",
                    "seeds",
                ],
                fit_rows(r),
            );
            validation(doc, r);
        }
        Err(why) => doc.p(format!("No scaling fit: {why}.")),
    }
    paired(doc, a, opts);
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

/// Per-size paired differences to the baseline, with or without a scaling fit (a sweep of
/// one size has no fit but still has comparisons).
fn paired(doc: &mut Doc, a: &Analysis, opts: &AnalysisOptions) {
    let points = views::fit_points(&a.runs, opts.six_nd);
    if !points.iter().any(|p| p.arm == opts.baseline) {
        return;
    }
    let table = paired_table(&Design::new(&points, &opts.baseline));
    if table.rows.is_empty() {
        return;
    }
    doc.h(3, "Per-size paired differences");
    let survivors = table.rows.iter().filter(|x| x.holm).count();
    doc.p(format!(
        "Validation loss of each arm minus the reference arm's (`{}`) on the same seed, per size: mean over seeds, 95% t-interval and two-sided paired t-test. {} comparisons with a p-value were made; {} survive Holm's correction at a family-wise {} (marked). Negative means the arm is better.",
        opts.baseline, table.comparisons, survivors, table.alpha
    ));
    let header = paired_header(&opts.baseline);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    doc.table(&header, paired_rows(&table));
}

/// Fig. 5 and its table: the per-block view of SPEC section 8 at the largest size.
fn magnitudes(doc: &mut Doc, a: &Analysis, figs: &Path, name: &str) -> anyhow::Result<()> {
    let (size, profiles) = views::final_profiles(&a.runs)?;
    if profiles.is_empty() {
        return Ok(());
    }
    doc.h(2, "Magnitudes across depth (Fig. 5)");
    let blocks = profiles
        .iter()
        .map(|p| p.in_rms.len() / 2)
        .max()
        .unwrap_or(0);
    let mut header: Vec<String> = vec!["variant".into(), "per block".into()];
    header.extend((0..blocks).map(|b| format!("block {b}")));
    header.push("max / min".into());
    let mut rows = Vec::new();
    let mut missing = false;
    for p in &profiles {
        let [hidden, output, grad] = p.per_block();
        for (what, values) in [
            ("hidden-state RMS", &hidden),
            ("output RMS", &output),
            ("gradient norm", &grad),
        ] {
            let mut row = vec![p.arm.clone(), what.to_string()];
            if values.is_empty() {
                missing = true;
                row.extend((0..=blocks).map(|_| "-".to_string()));
            } else {
                let (lo, hi) = values
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
                row.extend(values.iter().map(|v| format!("{v:.3}")));
                row.push(format!("{:.2}", hi / lo));
            }
            rows.push(row);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    doc.p(format!(
        "At the end of training, size {size}, mean over seeds. Per Transformer block i (sublayers 2i and 2i+1, SPEC section 8): the hidden state it reads (RMS of x_2i), its output (RMS of y_2i + y_2i+1, the `block_out_rms` probe) and the L2 norm of its gradient (root-sum-square of the two sublayers').{}",
        if missing {
            " A dash: the run predates the `block_out_rms` probe; retrain it to record it."
        } else {
            ""
        }
    ));
    doc.table(&header, rows);
    for png in plot::layer_profiles(
        figs,
        &format!("{name}: size {size}, end of training"),
        &profiles,
    )? {
        let what = if png.ends_with("blocks.png") {
            "per Transformer block (block input, block output, block gradient norm)"
        } else {
            "per sublayer"
        };
        doc.figure(
            png,
            format!("Hidden-state RMS, output RMS and gradient norm {what}, size {size}, mean over seeds."),
        );
    }
    Ok(())
}
