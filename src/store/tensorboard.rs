//! A run's scalars as TensorBoard and `export-metrics` show them, built from its metrics
//! files (steps.csv, layers.parquet, depth_attn.parquet): one list, so the event files are
//! a view that can always be rebuilt from the run folder and never hold anything else.
//!
//! Tags: `loss/train`, `loss/val`, `acc/val`, `lr`, `grad_norm` (before clipping),
//! `loss/val_whole_split` (once, at the end),
//! `perf/tokens_per_s`, `perf/flops_per_s`, `perf/mfu` (where the device's peak is known);
//! at each evaluation `hidden_rms/03 mlp` (a sublayer's input), `output_rms/03 mlp`,
//! `layer_grad_norm/03 mlp`, `block_out_rms/05` and, for mixing steps whose weights form
//! a distribution (the AttnRes families), `routing_max/03` and `routing_entropy/03`.

use std::collections::BTreeMap;
use std::path::Path;

use super::StoreError;
use super::event_file::EventFile;
use super::metrics::{DepthRow, LayerRow, StepRow};

/// The finished run's validation loss on its whole validation split (`summary.json`
/// `final_val.loss`, what the reports use), at its last step.
pub const FINAL_VAL_TAG: &str = "loss/val_whole_split";

/// The scalars of one step: its steps.csv row, and its probes at an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct StepScalars {
    pub step: u64,
    /// Seconds in the training loop when the step ended.
    pub wall_s: f64,
    pub values: Vec<(String, f32)>,
}

/// The scalars of a step's steps.csv row. `peak_flops` is the device's peak rate at the
/// run's precision, where known: it gives `perf/mfu`.
pub fn row_scalars(row: &StepRow, peak_flops: Option<f64>) -> Vec<(String, f32)> {
    let mut out = vec![("loss/train".to_string(), row.loss_train)];
    let optional = [
        ("loss/val", row.loss_val),
        ("acc/val", row.acc_val),
        ("grad_norm", row.grad_norm),
    ];
    out.extend(
        optional
            .into_iter()
            .filter_map(|(tag, v)| Some((tag.to_string(), v?))),
    );
    out.push(("lr".into(), row.lr as f32));
    out.push(("perf/tokens_per_s".into(), row.tokens_per_s as f32));
    if row.tokens > 0 {
        let flops_per_s = row.flops_exact / row.tokens as f64 * row.tokens_per_s;
        out.push(("perf/flops_per_s".into(), flops_per_s as f32));
        if let Some(peak) = peak_flops {
            out.push(("perf/mfu".into(), (flops_per_s / peak) as f32));
        }
    }
    out
}

/// The probe scalars of one evaluation (its rows of the two probe files).
pub fn probe_scalars(layers: &[&LayerRow], depth: &[&DepthRow]) -> Vec<(String, f32)> {
    let mut out = Vec::new();
    for row in layers {
        let group = match row.metric.as_str() {
            "in_rms" => "hidden_rms",
            "out_rms" => "output_rms",
            "grad_norm" => "layer_grad_norm",
            other => other,
        };
        let tag = match row.kind.as_str() {
            "block" => format!("{group}/{:02}", row.layer),
            kind => format!("{group}/{:02} {kind}", row.layer),
        };
        out.push((tag, row.value));
    }
    let mut by_step: BTreeMap<u32, Vec<f32>> = BTreeMap::new();
    for row in depth {
        by_step.entry(row.layer).or_default().push(row.weight);
    }
    for (layer, weights) in by_step {
        let sum: f32 = weights.iter().sum();
        // Only a distribution has a contrast to speak of: softmax weights, not HC's signed
        // mixing or DenseFormer's free weights.
        if weights.iter().all(|&w| w >= 0.0) && (sum - 1.0).abs() < 1e-3 {
            let max = weights.iter().copied().fold(0.0f32, f32::max);
            let entropy: f32 = weights
                .iter()
                .filter(|&&w| w > 0.0)
                .map(|&w| -w * w.ln())
                .sum();
            out.push((format!("routing_max/{layer:02}"), max));
            out.push((format!("routing_entropy/{layer:02}"), entropy));
        }
    }
    out
}

/// Every step's scalars, in step order, from a run's metrics; with a finished run's
/// whole-split validation loss (`final_val`) last.
pub fn history(
    steps: &[StepRow],
    layers: &[LayerRow],
    depth: &[DepthRow],
    peak_flops: Option<f64>,
    final_val: Option<f32>,
) -> Vec<StepScalars> {
    let mut layer_rows: BTreeMap<u64, Vec<&LayerRow>> = BTreeMap::new();
    for row in layers {
        layer_rows.entry(row.step).or_default().push(row);
    }
    let mut depth_rows: BTreeMap<u64, Vec<&DepthRow>> = BTreeMap::new();
    for row in depth {
        depth_rows.entry(row.step).or_default().push(row);
    }
    let mut out: Vec<StepScalars> = steps
        .iter()
        .map(|row| {
            let mut values = row_scalars(row, peak_flops);
            values.extend(probe_scalars(
                layer_rows.get(&row.step).map_or(&[], Vec::as_slice),
                depth_rows.get(&row.step).map_or(&[], Vec::as_slice),
            ));
            StepScalars {
                step: row.step,
                wall_s: row.wall_s,
                values,
            }
        })
        .collect();
    if let (Some(loss), Some(last)) = (final_val, steps.last()) {
        out.push(StepScalars {
            step: last.step,
            wall_s: last.wall_s,
            values: vec![(FINAL_VAL_TAG.into(), loss)],
        });
    }
    out
}

/// A run's event file, appended to as it trains.
pub struct RunEvents {
    file: EventFile,
    /// Unix time at which the run's `wall_s` was zero.
    start: f64,
}

impl RunEvents {
    /// Starts `dir`'s events afresh: a new file that opens with a session start at step 1
    /// (so a live TensorBoard drops what it had read of earlier files) and holds `history`;
    /// then every other event file in `dir` is removed. Each step is in the folder once.
    pub fn rewrite(dir: &Path, start: f64, history: &[StepScalars]) -> Result<Self, StoreError> {
        let now = unix_now();
        let mut file = EventFile::create(dir, now)?;
        file.session_start(1, now)?;
        let mut events = Self { file, start };
        for step in history {
            events.write(step)?;
        }
        let ours = events.file.path().to_path_buf();
        let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path != ours && name.to_string_lossy().contains("tfevents") {
                std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            }
        }
        Ok(events)
    }

    pub fn write(&mut self, step: &StepScalars) -> Result<(), StoreError> {
        self.file
            .scalars(step.step, self.start + step.wall_s, &step.values)
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    unix_seconds(std::time::SystemTime::now())
}

/// `time` in seconds since the Unix epoch.
pub fn unix_seconds(time: std::time::SystemTime) -> f64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: u64) -> StepRow {
        StepRow {
            step,
            tokens: 100 * step,
            lr: 1e-3,
            loss_train: 2.0,
            loss_val: (step == 2).then_some(2.5),
            acc_val: None,
            flops_exact: 6e3 * step as f64,
            flops_6nd: 5e3 * step as f64,
            wall_s: step as f64,
            tokens_per_s: 50.0,
            grad_norm: Some(0.5),
        }
    }

    #[test]
    fn a_row_gives_its_losses_rate_and_achieved_flops() {
        let values: BTreeMap<String, f32> = row_scalars(&row(2), Some(6e4)).into_iter().collect();
        assert_eq!(values["loss/val"], 2.5);
        assert_eq!(values["grad_norm"], 0.5);
        // 60 FLOPs per token at 50 tokens/s.
        assert_eq!(values["perf/flops_per_s"], 3000.0);
        assert_eq!(values["perf/mfu"], 0.05);
        let without: BTreeMap<String, f32> = row_scalars(&row(1), None).into_iter().collect();
        assert!(!without.contains_key("loss/val") && !without.contains_key("perf/mfu"));
    }

    #[test]
    fn routing_contrast_is_read_only_from_distributions() {
        let depth = |layer, weights: &[f32]| -> Vec<DepthRow> {
            weights
                .iter()
                .enumerate()
                .map(|(s, &weight)| DepthRow {
                    step: 2,
                    layer,
                    source: s as u32,
                    weight,
                })
                .collect()
        };
        let mut rows = depth(1, &[0.5, 0.5]);
        rows.extend(depth(2, &[1.2, -0.2]));
        let refs: Vec<&DepthRow> = rows.iter().collect();
        let values: BTreeMap<String, f32> = probe_scalars(&[], &refs).into_iter().collect();
        assert_eq!(values["routing_max/01"], 0.5);
        assert!((values["routing_entropy/01"] - std::f32::consts::LN_2).abs() < 1e-6);
        assert!(!values.contains_key("routing_max/02"), "signed weights");
    }

    #[test]
    fn history_puts_each_evaluations_probes_on_its_step() {
        let layers = vec![LayerRow {
            step: 2,
            layer: 3,
            kind: "mlp".into(),
            metric: "in_rms".into(),
            value: 1.5,
        }];
        let h = history(&[row(1), row(2)], &layers, &[], None, Some(1.9));
        assert_eq!(h.len(), 3);
        assert_eq!(h[2].values, [(FINAL_VAL_TAG.to_string(), 1.9)]);
        assert!(!h[0].values.iter().any(|(t, _)| t.starts_with("hidden_rms")));
        assert!(
            h[1].values
                .contains(&("hidden_rms/03 mlp".to_string(), 1.5))
        );
    }
}
