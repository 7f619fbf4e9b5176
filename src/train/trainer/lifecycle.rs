//! A run's life around its steps: a fresh start or the newest checkpoint, checkpoints as
//! they fall due, and the ways a run ends early (a loss that is not finite, a stop asked
//! for, a lease lost to another runner).

use burn::optim::ModuleOptimizer;
use indicatif::ProgressBar;

use super::Trainer;
use crate::model::Lm;
use crate::store::Status;
use crate::store::metrics;
use crate::train::checkpoint::{self, CheckpointState};
use crate::train::{Outcome, optimizer};

impl Trainer<'_> {
    /// Marks the run failed at `step` for a loss that is not finite.
    pub(super) fn failed(
        &self,
        bar: &ProgressBar,
        step: u64,
        loss: f32,
    ) -> anyhow::Result<Outcome> {
        let reason = format!("loss became {loss} at step {step}");
        self.dir.write_status(&Status::Failed {
            step,
            reason: reason.clone(),
        })?;
        bar.abandon_with_message(format!("failed: {reason}"));
        Ok(Outcome::Failed { step, reason })
    }

    /// Whether the runner asked this run to stop (a signal): it then checkpoints and stops.
    pub(super) fn stop_asked(&self) -> bool {
        self.opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Checkpoints after the last step, every `checkpoint_every` steps, and when asked to
    /// stop; `status` then shows the step a restart resumes from.
    pub(super) fn checkpoint_if_due(
        &self,
        model: &Lm,
        optim: &ModuleOptimizer,
        state: &CheckpointState,
        stop: bool,
    ) -> anyhow::Result<()> {
        let (done, every) = (state.step, self.spec.train.checkpoint_every as u64);
        if done == self.total_steps || (every > 0 && done.is_multiple_of(every)) || stop {
            checkpoint::save(self.dir, model, optim, state)?;
            if done < self.total_steps {
                self.dir.write_status(&Status::Running {
                    step: done,
                    total_steps: self.total_steps,
                })?;
            }
        }
        Ok(())
    }

    /// Whether the run's lease went to another runner: then the folder is no longer ours.
    pub(super) fn lost(&self) -> bool {
        self.opts
            .lost
            .as_ref()
            .is_some_and(|l| l.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// A fresh model, optimizer and state, or the newest checkpoint's (with the metrics
    /// files cut back to its step); a fresh start removes metrics left by an earlier attempt.
    pub(super) fn restore(&mut self) -> anyhow::Result<(Lm, ModuleOptimizer, CheckpointState)> {
        let (spec, dir) = (self.spec, self.dir);
        let train_device = self.device.clone().autodiff();
        let mut model = Lm::init(&spec.model, spec.seed, &train_device)?;
        let resume_from = dir.find_checkpoint();
        if let Some(path) = &resume_from {
            // Weights first: loading restores the parameter ids the optimizer groups and
            // state are keyed by.
            model = checkpoint::load_model(path, model)?;
        }
        let mut optim = optimizer::build(&spec.train, &model);
        let mut state = CheckpointState {
            run_id: spec.run_id(),
            step: 0,
            tokens: 0,
            wall_s: 0.0,
            seed: spec.seed,
        };
        match &resume_from {
            Some(path) => {
                optim = checkpoint::load_optimizer(path, optim)?;
                state = checkpoint::read_state(path)?;
                metrics::truncate_steps(&dir.steps(), state.step)?;
                self.layers = metrics::read_layers(&dir.layers(), Some(state.step))?;
                self.depth = metrics::read_depth(&dir.depth_attn(), Some(state.step))?;
            }
            None => {
                for stale in [dir.steps(), dir.layers(), dir.depth_attn(), dir.summary()] {
                    let _ = std::fs::remove_file(stale);
                }
            }
        }
        Ok((model, optim, state))
    }
}
