//! What each figure and table needs, computed from the loaded runs and their frames.

use polars_core::prelude::*;

use super::figures::{ArmSeries, Grid, Profile, RunCurve};
use super::load::{LoadedRun, layers_frame, runs_frame, seed_means};
use super::multiplier::{FitReport, RunPoint};
use super::stats::SeedMean;
use crate::store::metrics::read_steps;

/// The fit's inputs: one point per run, compute in PFLOP/s-days. A point's cell is
/// everything that sets its compute apart from the arm: the size (shape) and the budget.
/// The label is the size name, with the budget added when a size was trained at several.
pub fn fit_points(runs: &[LoadedRun], six_nd: bool) -> Vec<RunPoint> {
    let key = |r: &LoadedRun| {
        let m = &r.planned.spec.model;
        (
            r.planned.size.clone(),
            m.d_model,
            m.n_blocks,
            r.summary.tokens,
        )
    };
    let label = |r: &LoadedRun| {
        let k = key(r);
        let shared = runs
            .iter()
            .filter(|o| o.planned.size == r.planned.size)
            .all(|o| key(o) == k);
        if shared {
            k.0
        } else {
            format!(
                "{} ({}x{}, {} tokens)",
                k.0,
                k.1,
                k.2,
                crate::fmt::thousands(k.3)
            )
        }
    };
    runs.iter()
        .filter(|r| r.loss().is_finite())
        .map(|r| RunPoint {
            arm: r.planned.arm.clone(),
            cell: label(r),
            seed: r.planned.seed,
            compute: r.compute(six_nd),
            loss: r.loss(),
        })
        .collect()
}

/// Arms in sweep order (first appearance).
pub fn arms(runs: &[LoadedRun]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        if !out.contains(&r.planned.arm) {
            out.push(r.planned.arm.clone());
        }
    }
    out
}

fn strs(df: &DataFrame, name: &str) -> PolarsResult<Vec<String>> {
    Ok(df
        .column(name)?
        .str()?
        .iter()
        .map(|s| s.unwrap_or_default().to_string())
        .collect())
}

fn floats(df: &DataFrame, name: &str) -> PolarsResult<Vec<f64>> {
    let c = df.column(name)?.cast(&DataType::Float64)?;
    Ok(c.f64()?.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// Seed means with their 95% t-intervals per arm and size, with each arm's fitted law when there is one.
pub fn scaling_series(
    runs: &[LoadedRun],
    fits: Option<&FitReport>,
    six_nd: bool,
) -> anyhow::Result<Vec<ArmSeries>> {
    let means = seed_means(
        &runs_frame(runs)?,
        if six_nd { "flops_6nd" } else { "flops_exact" },
    )?;
    let (arm, compute) = (strs(&means, "arm")?, floats(&means, "compute")?);
    let (mean, sd, n) = (
        floats(&means, "loss_mean")?,
        floats(&means, "loss_std")?,
        floats(&means, "seeds")?,
    );
    // The 95% Student-t interval over seeds; no bar with one seed.
    let half = |i: usize| {
        if n[i] > 1.0 {
            super::stats::t_quantile(0.975, n[i] - 1.0) * sd[i] / n[i].sqrt()
        } else {
            0.0
        }
    };
    Ok(arms(runs)
        .into_iter()
        .map(|a| ArmSeries {
            points: (0..arm.len())
                .filter(|&i| arm[i] == a)
                .map(|i| {
                    (
                        compute[i] / crate::model::flops::PFLOPS_DAY,
                        mean[i],
                        mean[i] - half(i),
                        mean[i] + half(i),
                    )
                })
                .collect(),
            law: fits
                .and_then(|f| f.arms.iter().find(|x| x.arm == a))
                .map(|x| x.law),
            arm: a,
        })
        .collect())
}

/// Train and validation curves of every run.
pub fn run_curves(runs: &[LoadedRun]) -> anyhow::Result<Vec<RunCurve>> {
    runs.iter()
        .map(|r| {
            let rows = read_steps(&r.dir.steps())?;
            Ok(RunCurve {
                size: r.planned.size.clone(),
                arm: r.planned.arm.clone(),
                seed: r.planned.seed,
                train: rows
                    .iter()
                    .map(|s| (s.tokens as f64, f64::from(s.loss_train)))
                    .collect(),
                val: rows
                    .iter()
                    .filter_map(|s| s.loss_val.map(|v| (s.tokens as f64, f64::from(v))))
                    .collect(),
            })
        })
        .collect()
}

/// The size with the most parameters among `runs`.
pub fn largest_size(runs: &[LoadedRun]) -> Option<String> {
    runs.iter()
        .max_by_key(|r| r.summary.params.non_embedding)
        .map(|r| r.planned.size.clone())
}

/// The size whose depth profiles (Fig. 5 and 8) a report shows: the deepest of the sizes
/// within 25% of the largest non-embedding parameter count. In a scaling sweep that is the
/// largest size; in a depth/width family at one parameter count, its deepest shape, where
/// mixing over depth has the most layers to act on.
pub fn profile_size(runs: &[LoadedRun]) -> Option<String> {
    let largest = runs.iter().map(|r| r.summary.params.non_embedding).max()?;
    runs.iter()
        .filter(|r| r.summary.params.non_embedding as f64 >= 0.8 * largest as f64)
        .max_by_key(|r| {
            (
                r.planned.spec.model.n_blocks,
                r.summary.params.non_embedding,
            )
        })
        .map(|r| r.planned.size.clone())
}

/// Fig. 5: per-sublayer probes at each run's final eval, averaged over seeds, per arm, at
/// the profile size ([`profile_size`]).
pub fn final_profiles(runs: &[LoadedRun]) -> anyhow::Result<(String, Vec<Profile>)> {
    let Some(size) = profile_size(runs) else {
        return Ok((String::new(), Vec::new()));
    };
    let at_size: Vec<LoadedRun> = runs
        .iter()
        .filter(|r| r.planned.size == size)
        .cloned()
        .collect();
    let last = last_probes(&at_size)?;
    // Each run's own values, for the seed bands.
    let (run_id, run_metric, run_layer, run_value) = (
        strs(&last, "id")?,
        strs(&last, "metric")?,
        floats(&last, "layer")?,
        floats(&last, "value")?,
    );
    let pick_run = |run: &str, m: &str| -> Vec<f64> {
        let mut rows: Vec<(f64, f64)> = (0..run_id.len())
            .filter(|&i| run_id[i] == run && run_metric[i] == m)
            .map(|i| (run_layer[i], run_value[i]))
            .collect();
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        rows.into_iter().map(|r| r.1).collect()
    };
    let seed_profiles = |arm: &str| -> Vec<Profile> {
        at_size
            .iter()
            .filter(|r| r.planned.arm == arm)
            .map(|r| Profile {
                arm: arm.to_string(),
                in_rms: pick_run(&r.planned.id, "in_rms"),
                out_rms: pick_run(&r.planned.id, "out_rms"),
                grad_norm: pick_run(&r.planned.id, "grad_norm"),
                block_out_rms: pick_run(&r.planned.id, "block_out_rms"),
                seeds: Vec::new(),
            })
            .collect()
    };
    #[allow(deprecated)] // the eager group-by: see load::seed_means
    let last = last
        .group_by_stable(["arm", "metric", "layer"])?
        .select(["value"])
        .mean()?
        .sort(["arm", "metric", "layer"], Default::default())?;
    let (arm, metric, value) = (
        strs(&last, "arm")?,
        strs(&last, "metric")?,
        floats(&last, "value_mean")?,
    );
    let pick = |a: &str, m: &str| -> Vec<f64> {
        (0..arm.len())
            .filter(|&i| arm[i] == a && metric[i] == m)
            .map(|i| value[i])
            .collect()
    };
    let profiles = arms(&at_size)
        .into_iter()
        .map(|a| Profile {
            in_rms: pick(&a, "in_rms"),
            out_rms: pick(&a, "out_rms"),
            grad_norm: pick(&a, "grad_norm"),
            block_out_rms: pick(&a, "block_out_rms"),
            seeds: seed_profiles(&a),
            arm: a,
        })
        .collect();
    Ok((size, profiles))
}

/// The runs' per-layer probe rows at each run's last probed step, labelled with the run's
/// arm (column `arm`).
fn last_probes(runs: &[LoadedRun]) -> anyhow::Result<DataFrame> {
    let layers = layers_frame(runs)?;
    let (ids, steps) = (strs(&layers, "id")?, floats(&layers, "step")?);
    let mut last_step: std::collections::HashMap<&str, f64> = Default::default();
    for (id, &step) in ids.iter().zip(&steps) {
        let last = last_step.entry(id).or_insert(f64::NEG_INFINITY);
        *last = last.max(step);
    }
    let keep: BooleanChunked = ids
        .iter()
        .zip(&steps)
        .map(|(id, &step)| last_step[id.as_str()] == step)
        .collect();
    let mut last = layers.filter(&keep)?;
    let arm_of: std::collections::HashMap<&str, &str> = runs
        .iter()
        .map(|r| (r.planned.id.as_str(), r.planned.arm.as_str()))
        .collect();
    let arm_column: Vec<&str> = strs(&last, "id")?
        .iter()
        .map(|id| arm_of[id.as_str()])
        .collect();
    last.with_column(Column::new("arm".into(), arm_column))?;
    Ok(last)
}

/// Fig. 6: loss against S at the largest size that has block runs, with baseline and Full.
pub struct BlockView {
    pub size: String,
    pub points: Vec<(usize, SeedMean)>,
    pub baseline: Option<SeedMean>,
    pub full: Option<SeedMean>,
}

pub fn block_view(runs: &[LoadedRun]) -> Option<BlockView> {
    let block_runs: Vec<&LoadedRun> = runs.iter().filter(|r| r.variant() == "block").collect();
    let size = block_runs
        .iter()
        .max_by_key(|r| r.summary.params.non_embedding)?
        .planned
        .size
        .clone();
    let losses = |f: &dyn Fn(&LoadedRun) -> bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.planned.size == size && f(r))
            .map(|r| r.loss())
            .collect()
    };
    let mut sizes: Vec<usize> = block_runs
        .iter()
        .filter(|r| r.planned.size == size)
        .filter_map(|r| r.planned.block_size)
        .collect();
    sizes.sort();
    sizes.dedup();
    if sizes.len() < 2 {
        return None;
    }
    let points = sizes
        .iter()
        .map(|&s| {
            (
                s,
                SeedMean::of(&losses(&|r| {
                    r.variant() == "block" && r.planned.block_size == Some(s) && is_plain(r)
                })),
            )
        })
        .collect();
    let opt = |v: Vec<f64>| (!v.is_empty()).then(|| SeedMean::of(&v));
    Some(BlockView {
        baseline: opt(losses(&|r| r.variant() == "baseline")),
        full: opt(losses(&|r| r.variant() == "full" && is_plain(r))),
        points,
        size,
    })
}

/// The method itself, not an ablation.
fn is_plain(r: &LoadedRun) -> bool {
    r.planned.spec.model.is_plain()
}

/// Fig. 7: per arm, mean loss over seeds on the (n_blocks, d_model) grid; the best shape
/// is marked. Returns nothing unless there are at least two shapes.
pub fn depth_width_grids(runs: &[LoadedRun]) -> anyhow::Result<Vec<(Grid, String, f64)>> {
    let means = seed_means(&runs_frame(runs)?, "flops_exact")?;
    let (arm, d, n, loss) = (
        strs(&means, "arm")?,
        floats(&means, "d_model")?,
        floats(&means, "n_blocks")?,
        floats(&means, "loss_mean")?,
    );
    let mut widths: Vec<u64> = d.iter().map(|&x| x as u64).collect();
    widths.sort();
    widths.dedup();
    let mut depths: Vec<u64> = n.iter().map(|&x| x as u64).collect();
    depths.sort();
    depths.dedup();
    if widths.len() < 2 || depths.len() < 2 {
        return Ok(Vec::new());
    }
    Ok(arms(runs)
        .into_iter()
        .map(|a| {
            let mut cells = vec![vec![None; widths.len()]; depths.len()];
            let mut best: Option<(usize, usize, f64)> = None;
            for i in (0..arm.len()).filter(|&i| arm[i] == a) {
                let r = depths.iter().position(|&x| x == n[i] as u64).unwrap_or(0);
                let c = widths.iter().position(|&x| x == d[i] as u64).unwrap_or(0);
                cells[r][c] = Some(loss[i]);
                if best.is_none_or(|b| loss[i] < b.2) {
                    best = Some((r, c, loss[i]));
                }
            }
            let (br, bc, bl) = best.unwrap_or((0, 0, f64::NAN));
            let shape = format!("d_model {} x {} blocks", widths[bc], depths[br]);
            (
                Grid {
                    title: a.clone(),
                    rows: depths.iter().map(u64::to_string).collect(),
                    cols: widths.iter().map(u64::to_string).collect(),
                    cells,
                    mark: best.map(|(r, c, _)| (r, c)),
                },
                shape,
                bl,
            )
        })
        .collect())
}
