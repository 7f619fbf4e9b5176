//! Loading the runs of one or more sweeps from the results folder into polars frames.

use std::path::Path;

use anyhow::Context;
use polars_core::prelude::*;

use crate::model::flops::PFLOPS_DAY;
use crate::spec::{PlannedRun, Sweep};
use crate::store::metrics::read_layers;
use crate::store::{RunDir, Status, read_json};
use crate::train::Summary;

/// One finished run: where it came from and what it found.
#[derive(Debug, Clone)]
pub struct LoadedRun {
    pub sweep: String,
    pub planned: PlannedRun,
    pub dir: RunDir,
    pub summary: Summary,
    /// Whether [`Self::loss`] and the others read the whole-split final validation: true
    /// only when every run loaded with this one has it, so that a table never mixes kinds.
    pub whole_split: bool,
}

impl LoadedRun {
    /// The final validation loss the analysis uses (nats per token).
    pub fn loss(&self) -> f64 {
        match (self.whole_split, &self.summary.final_val) {
            (true, Some(v)) => f64::from(v.loss),
            _ => f64::from(self.summary.loss_val),
        }
    }

    /// The final answer accuracy (synthetic tasks), from the same validation as [`Self::loss`].
    pub fn accuracy(&self) -> Option<f64> {
        match (self.whole_split, &self.summary.final_val) {
            (true, Some(v)) => v.acc,
            _ => self.summary.acc_val,
        }
        .map(f64::from)
    }

    /// The final bits per byte (text corpora), from the same validation as [`Self::loss`].
    pub fn bits_per_byte(&self) -> Option<f64> {
        match (self.whole_split, &self.summary.final_val) {
            (true, Some(v)) => v.bpb,
            _ => self.summary.bpb_val,
        }
        .map(f64::from)
    }

    /// `baseline`, `full`, `block`, `denseformer` (ablations keep their family's name).
    pub fn variant(&self) -> &'static str {
        self.planned.spec.model.residual.variant()
    }

    /// Training compute in PFLOP/s-days, by the exact count or by 6ND.
    pub fn compute(&self, six_nd: bool) -> f64 {
        (if six_nd {
            self.summary.flops_6nd
        } else {
            self.summary.flops_exact
        }) / PFLOPS_DAY
    }
}

/// Every finished run of `sweeps` (planned runs not yet done are skipped).
pub fn load_runs(sweeps: &[Sweep], results_root: &Path) -> anyhow::Result<Vec<LoadedRun>> {
    let mut out = Vec::new();
    for sweep in sweeps {
        let root = sweep.results_dir(results_root);
        for planned in &sweep.runs {
            let dir = RunDir::new(root.join(&planned.id));
            if !matches!(dir.read_status()?, Some(Status::Done { .. })) {
                continue;
            }
            let summary: Summary =
                read_json(&dir.summary()).with_context(|| format!("run {}", planned.id))?;
            out.push(LoadedRun {
                sweep: sweep.file.name.clone(),
                planned: planned.clone(),
                dir,
                summary,
                whole_split: false,
            });
        }
    }
    let whole_split = !out.is_empty() && out.iter().all(|r| r.summary.final_val.is_some());
    for r in &mut out {
        r.whole_split = whole_split;
    }
    Ok(out)
}

/// What the final losses of `runs` were measured on, in a few words for a report.
pub fn final_val_source(runs: &[LoadedRun]) -> String {
    match runs.first() {
        Some(r) if r.whole_split => {
            let tokens = r.summary.final_val.map_or(0, |v| v.tokens);
            format!("the whole validation split ({tokens} tokens, each scored once)")
        }
        Some(r) => format!(
            "{} fixed validation batches of {} sequences",
            r.planned.spec.train.eval_batches, r.planned.spec.train.batch_size
        ),
        None => "no runs".into(),
    }
}

/// One row per run: its axes, size, cost and final losses.
pub fn runs_frame(runs: &[LoadedRun]) -> PolarsResult<DataFrame> {
    let col_str = |f: &dyn Fn(&LoadedRun) -> String| runs.iter().map(f).collect::<Vec<_>>();
    let col_f64 = |f: &dyn Fn(&LoadedRun) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    df!(
        "sweep" => col_str(&|r| r.sweep.clone()),
        "id" => col_str(&|r| r.planned.id.clone()),
        "task" => col_str(&|r| r.planned.task()),
        "size" => col_str(&|r| r.planned.size.clone()),
        "arm" => col_str(&|r| r.planned.arm.clone()),
        "variant" => col_str(&|r| r.variant().to_string()),
        "block_size" => runs.iter().map(|r| r.planned.block_size.map(|s| s as u32)).collect::<Vec<_>>(),
        "seed" => runs.iter().map(|r| r.planned.seed).collect::<Vec<_>>(),
        "d_model" => runs.iter().map(|r| r.planned.spec.model.d_model as u32).collect::<Vec<_>>(),
        "n_blocks" => runs.iter().map(|r| r.planned.spec.model.n_blocks as u32).collect::<Vec<_>>(),
        "params" => runs.iter().map(|r| r.summary.params.non_embedding).collect::<Vec<_>>(),
        "tokens" => runs.iter().map(|r| r.summary.tokens).collect::<Vec<_>>(),
        "flops_exact" => col_f64(&|r| r.summary.flops_exact),
        "flops_6nd" => col_f64(&|r| r.summary.flops_6nd),
        "loss_val" => col_f64(&|r| r.loss()),
        "loss_train" => col_f64(&|r| f64::from(r.summary.loss_train_tail)),
        "acc_val" => runs.iter().map(LoadedRun::accuracy).collect::<Vec<_>>(),
        "bpb_val" => runs.iter().map(LoadedRun::bits_per_byte).collect::<Vec<_>>(),
        "wall_s" => col_f64(&|r| r.summary.wall_s),
    )
}

/// The probes (in_rms, out_rms, grad_norm per sublayer) of every run at every eval.
pub fn layers_frame(runs: &[LoadedRun]) -> anyhow::Result<DataFrame> {
    let (mut id, mut step, mut layer, mut kind, mut metric, mut value) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in runs {
        for row in read_layers(&r.dir.layers(), None)? {
            id.push(r.planned.id.clone());
            step.push(row.step);
            layer.push(row.layer);
            kind.push(row.kind);
            metric.push(row.metric);
            value.push(f64::from(row.value));
        }
    }
    Ok(
        df!("id" => id, "step" => step, "layer" => layer, "kind" => kind, "metric" => metric, "value" => value)?,
    )
}

/// Mean and spread of the final validation loss over seeds, per (task, arm, size, budget): the points of
/// the scaling plot and the block-size and depth/width views.
///
/// polars' eager group-by (deprecated in favour of its lazy engine, which this crate does not
/// build: it would double the compile time) runs the same aggregation kernels.
#[allow(deprecated)]
pub fn seed_means(runs: &DataFrame, compute_col: &str) -> PolarsResult<DataFrame> {
    const KEYS: [&str; 8] = [
        "task",
        "arm",
        "variant",
        "size",
        "block_size",
        "d_model",
        "n_blocks",
        "tokens",
    ];
    let groups = runs.group_by_stable(KEYS)?;
    let agg = |col: &str, f: &dyn Fn(GroupBy) -> PolarsResult<DataFrame>, name: &str| {
        let df = f(groups.clone().select([col]))?;
        let mut c = df
            .column(df.get_column_names()[KEYS.len()].as_str())?
            .clone();
        c.rename(name.into());
        Ok::<Column, PolarsError>(c)
    };
    let mut columns: Vec<Column> = groups.keys();
    columns.push(agg(compute_col, &|g| g.mean(), "compute")?);
    columns.push(agg("params", &|g| g.first(), "params")?);
    columns.push(agg("loss_val", &|g| g.mean(), "loss_mean")?);
    columns.push(agg("loss_val", &|g| g.min(), "loss_min")?);
    columns.push(agg("loss_val", &|g| g.max(), "loss_max")?);
    columns.push(agg("loss_val", &|g| g.std(1), "loss_std")?);
    columns.push(agg("seed", &|g| g.count(), "seeds")?);
    DataFrame::new_infer_height(columns)
}
