//! What a training run writes besides its steps: the per-layer probe rows, the progress
//! bar and the summary.

use std::io::IsTerminal;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};

use super::Trainer;
use crate::backend;
use crate::model::flops::{flops_6nd, flops_exact, param_counts};
use crate::model::residual::Probes;
use crate::store::metrics::{self, DepthRow, LayerRow, StepRow};
use crate::store::tensorboard::{self, RunEvents, StepScalars};
use crate::train::checkpoint::CheckpointState;
use crate::train::{FinalVal, Summary};

impl Trainer<'_> {
    pub(super) fn bits_per_byte(&self, loss: f32) -> Option<f32> {
        let bytes = self.data.val_bytes? as f64;
        let tokens = self.data.val.tokens.len() as f64;
        Some((f64::from(loss) * tokens / (bytes * std::f64::consts::LN_2)) as f32)
    }

    pub(super) fn record_probes(&mut self, step: u64, probes: &Probes, grad_norms: &[f32]) {
        let kind = |l: usize| if l.is_multiple_of(2) { "attn" } else { "mlp" };
        for (metric, values) in [
            ("in_rms", &probes.in_rms),
            ("out_rms", &probes.out_rms),
            ("grad_norm", &grad_norms.to_vec()),
        ] {
            for (l, &value) in values.iter().enumerate() {
                self.layers.push(LayerRow {
                    step,
                    layer: l as u32,
                    kind: kind(l).into(),
                    metric: metric.into(),
                    value,
                });
            }
        }
        // Indexed by Transformer block, not sublayer.
        for (b, &value) in probes.block_out_rms.iter().enumerate() {
            self.layers.push(LayerRow {
                step,
                layer: b as u32,
                kind: "block".into(),
                metric: "block_out_rms".into(),
                value,
            });
        }
        for (l, weights) in probes.depth_attn.iter().enumerate() {
            for (source, &weight) in weights.iter().enumerate() {
                self.depth.push(DepthRow {
                    step,
                    layer: l as u32,
                    source: source as u32,
                    weight,
                });
            }
        }
    }

    /// The run's event file, begun afresh from the metrics up to `state`'s step (a resumed
    /// run's are cut back to its checkpoint by then); None when the options ask for none.
    pub(super) fn open_events(&self, state: &CheckpointState) -> anyhow::Result<Option<RunEvents>> {
        let Some(folder) = &self.opts.events else {
            return Ok(None);
        };
        let steps = match state.step {
            0 => Vec::new(),
            _ => metrics::read_steps(&self.dir.steps())?,
        };
        let history =
            tensorboard::history(&steps, &self.layers, &self.depth, self.peak_flops, None);
        let start = tensorboard::unix_now() - state.wall_s;
        Ok(Some(RunEvents::rewrite(folder, start, &history)?))
    }

    /// Step `row` (and its probes, at an evaluation) into the event file.
    pub(super) fn log_events(
        &self,
        events: Option<&mut RunEvents>,
        row: &StepRow,
    ) -> anyhow::Result<()> {
        let Some(events) = events else {
            return Ok(());
        };
        let row = row.as_stored();
        let mut values = tensorboard::row_scalars(&row, self.peak_flops);
        if row.loss_val.is_some() {
            let layers: Vec<&LayerRow> =
                self.layers.iter().filter(|r| r.step == row.step).collect();
            let depth: Vec<&DepthRow> = self.depth.iter().filter(|r| r.step == row.step).collect();
            values.extend(tensorboard::probe_scalars(&layers, &depth));
        }
        events.write(&StepScalars {
            step: row.step,
            wall_s: row.wall_s,
            values,
        })?;
        Ok(())
    }

    /// The whole-split validation loss of a finished run, at its last step.
    pub(super) fn log_final_events(
        &self,
        events: Option<&mut RunEvents>,
        state: &CheckpointState,
        loss: f32,
    ) -> anyhow::Result<()> {
        if let Some(events) = events {
            events.write(&StepScalars {
                step: state.step,
                wall_s: state.wall_s,
                values: vec![(tensorboard::FINAL_VAL_TAG.into(), loss)],
            })?;
        }
        Ok(())
    }

    pub(super) fn progress_bar(&self, position: u64) -> ProgressBar {
        let bar = match &self.opts.progress {
            Some(bar) => bar.clone(),
            None if std::io::stdout().is_terminal() => ProgressBar::new(self.total_steps),
            None => ProgressBar::hidden(),
        };
        bar.set_length(self.total_steps);
        bar.set_position(position);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} steps {msg} (ETA {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        if self.opts.progress.is_none() {
            bar.set_prefix(self.spec.model.arm_label());
        }
        bar
    }

    /// Says on stderr (above any bars) that the run resumed at `step`, if it did, so that
    /// logs show where it picked up.
    pub(super) fn say_resumed(&self, bar: &ProgressBar, step: u64) {
        if step > 0 {
            let (root, total) = (self.dir.root.display(), self.total_steps);
            let at = format!("{root}: resuming from the checkpoint at step {step} of {total}");
            bar.suspend(|| eprintln!("{at}"));
        }
    }

    /// The summary, from steps.csv (so a run killed after its final checkpoint but before
    /// writing it still gets one).
    pub(super) fn summarize(
        &self,
        state: &CheckpointState,
        final_val: FinalVal,
    ) -> anyhow::Result<Summary> {
        let spec = self.spec;
        let rows = metrics::read_steps(&self.dir.steps())?;
        let Some(last) = rows.last() else {
            bail!(
                "{} has no rows; delete the run folder to retrain",
                self.dir.steps().display()
            )
        };
        let tail = &rows[rows.len() - rows.len().div_ceil(10)..];
        let loss_val = last.loss_val.unwrap_or(f32::NAN);
        Ok(Summary {
            run_id: spec.run_id(),
            label: spec.model.arm_label(),
            steps: state.step,
            tokens: state.tokens,
            flops_exact: flops_exact(&spec.model, state.tokens),
            flops_6nd: flops_6nd(&spec.model, state.tokens),
            params: param_counts(&spec.model).into(),
            loss_train_last: last.loss_train,
            loss_train_tail: tail.iter().map(|r| r.loss_train).sum::<f32>() / tail.len() as f32,
            loss_val,
            acc_val: last.acc_val,
            bpb_val: self.bits_per_byte(loss_val),
            final_val: Some(final_val),
            wall_s: state.wall_s,
            backend: self.opts.backend.name().into(),
            device: self.opts.device.clone(),
            threads: self.opts.threads,
            cpu: Some(backend::cpu_model()),
            libtorch: backend::libtorch_release(self.opts.backend),
            gpu: backend::gpu_model(&self.opts.device),
            git_commit: env!("ATTNRES_GIT_COMMIT").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            finished_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
        })
    }
}

/// The progress bar's message after a step: its loss, the validation loss when it evaluated,
/// and the step's speed.
pub(super) fn progress_message(row: &StepRow) -> String {
    let val = row
        .loss_val
        .map(|v| format!(" val {v:.4}"))
        .unwrap_or_default();
    format!(
        "loss {:.4}{val} {:.0} tok/s",
        row.loss_train, row.tokens_per_s
    )
}
