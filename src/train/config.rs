//! The `train` section of a run: optimiser, schedule, budget, eval and checkpoint cadence.

use serde::{Deserialize, Serialize};

use crate::backend::Precision;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Sequences per optimizer step (all micro-batches together).
    pub batch_size: usize,
    /// Gradient accumulation: the step's batch is cut into this many micro-batches.
    #[serde(default = "one")]
    pub micro_batches: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Cosine decay ends at `lr * min_lr_ratio`.
    #[serde(default = "min_lr_ratio")]
    pub min_lr_ratio: f64,
    /// Linear warmup: a number of steps, or a fraction of the run when below 1.
    #[serde(default = "warmup")]
    pub warmup: f64,
    #[serde(default = "weight_decay")]
    pub weight_decay: f64,
    /// Global gradient-norm clip; 0 turns clipping off.
    #[serde(default = "grad_clip")]
    pub grad_clip: f64,
    #[serde(default = "beta1")]
    pub beta1: f64,
    #[serde(default = "beta2")]
    pub beta2: f64,
    #[serde(default = "adam_eps")]
    pub adam_eps: f64,
    /// `{tokens: N}`, `{tokens_per_param: R}` or `{flops: F}`.
    #[serde(with = "serde_yaml_ng::with::singleton_map")]
    pub budget: Budget,
    /// Evaluate (validation loss and probes) every this many steps, and at the end.
    #[serde(default = "eval_every")]
    pub eval_every: usize,
    /// Fixed validation batches of `batch_size` sequences per eval.
    #[serde(default = "eval_batches")]
    pub eval_batches: usize,
    /// Write a checkpoint every this many steps (0: only at the end).
    #[serde(default = "checkpoint_every")]
    pub checkpoint_every: usize,
    /// `f32` (the default; left out of spec.json, so older run ids stand) or `bf16`:
    /// the float type of weights, activations, gradients and Adam's moments (tch only).
    #[serde(default, skip_serializing_if = "Precision::is_f32")]
    pub precision: Precision,
}

/// How long a run trains; it stops exactly at the budget, rounded down to whole sequences.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Budget {
    Tokens(f64),
    /// Multiples of the non-embedding parameter count.
    TokensPerParam(f64),
    /// Training FLOPs by the exact count of SPEC section 9.
    Flops(f64),
}

fn one() -> usize {
    1
}
fn min_lr_ratio() -> f64 {
    0.1
}
fn warmup() -> f64 {
    0.05
}
fn weight_decay() -> f64 {
    0.1
}
fn grad_clip() -> f64 {
    1.0
}
fn beta1() -> f64 {
    0.9
}
fn beta2() -> f64 {
    0.95
}
fn adam_eps() -> f64 {
    1e-8
}
fn eval_every() -> usize {
    100
}
fn eval_batches() -> usize {
    4
}
fn checkpoint_every() -> usize {
    100
}

impl TrainConfig {
    /// Checks what serde cannot: returns `(key, problem)` for the first bad value.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.batch_size == 0 {
            return Err(("batch_size", "must be at least 1".into()));
        }
        if self.micro_batches == 0 || !self.batch_size.is_multiple_of(self.micro_batches) {
            return Err((
                "micro_batches",
                format!(
                    "{} must be at least 1 and divide batch_size {}",
                    self.micro_batches, self.batch_size
                ),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(("lr", format!("{} must be a positive number", self.lr)));
        }
        if !(0.0..=1.0).contains(&self.min_lr_ratio) {
            return Err((
                "min_lr_ratio",
                format!("{} must lie in [0, 1]", self.min_lr_ratio),
            ));
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            return Err((
                "warmup",
                format!(
                    "{} must be >= 0 (steps, or a fraction below 1)",
                    self.warmup
                ),
            ));
        }
        for (key, value) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&value) {
                return Err((key, format!("{value} must lie in [0, 1)")));
            }
        }
        if !(self.adam_eps.is_finite() && self.adam_eps > 0.0) {
            return Err((
                "adam_eps",
                format!("{} must be a positive number", self.adam_eps),
            ));
        }
        if !(self.grad_clip.is_finite() && self.grad_clip >= 0.0) {
            return Err((
                "grad_clip",
                format!("{} must be >= 0 (0 turns clipping off)", self.grad_clip),
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err((
                "weight_decay",
                format!("{} must be >= 0", self.weight_decay),
            ));
        }
        if self.eval_every == 0 {
            return Err(("eval_every", "must be at least 1".into()));
        }
        if self.eval_batches == 0 {
            return Err(("eval_batches", "must be at least 1".into()));
        }
        let amount = match self.budget {
            Budget::Tokens(x) | Budget::TokensPerParam(x) | Budget::Flops(x) => x,
        };
        if !(amount.is_finite() && amount > 0.0) {
            return Err(("budget", format!("{amount} must be a positive number")));
        }
        Ok(())
    }

    /// Warmup length in steps for a run of `total` steps.
    pub fn warmup_steps(&self, total: u64) -> u64 {
        if self.warmup < 1.0 {
            (self.warmup * total as f64).round() as u64
        } else {
            self.warmup as u64
        }
    }

    /// Learning rate at `step` (0-based): linear warmup, then cosine decay to the floor.
    pub fn lr_at(&self, step: u64, total: u64) -> f64 {
        let warmup = self.warmup_steps(total);
        if step < warmup {
            return self.lr * (step + 1) as f64 / warmup as f64;
        }
        let decay = total.saturating_sub(warmup).max(1);
        let progress = ((step - warmup) as f64 / decay as f64).min(1.0);
        let floor = self.lr * self.min_lr_ratio;
        floor + (self.lr - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainConfig {
        serde_yaml_ng::from_str("batch_size: 8\nlr: 0.01\nwarmup: 10\nbudget: {tokens: 1000}")
            .unwrap()
    }

    #[test]
    fn schedule_warms_up_then_decays_to_the_floor() {
        let c = config();
        assert!((c.lr_at(0, 100) - 0.001).abs() < 1e-12);
        assert!((c.lr_at(9, 100) - 0.01).abs() < 1e-12);
        assert!((c.lr_at(10, 100) - 0.01).abs() < 1e-12);
        assert!(c.lr_at(50, 100) < 0.01 && c.lr_at(50, 100) > 0.001);
        assert!((c.lr_at(100, 100) - 0.001).abs() < 1e-12);
        let mut fractional = c.clone();
        fractional.warmup = 0.1;
        assert_eq!(fractional.warmup_steps(200), 20);
    }

    #[test]
    fn validation_names_the_key() {
        let mut c = config();
        c.micro_batches = 3;
        assert_eq!(c.validate().unwrap_err().0, "micro_batches");
        let mut c = config();
        c.budget = Budget::Flops(-1.0);
        assert_eq!(c.validate().unwrap_err().0, "budget");
        let mut c = config();
        c.beta1 = 1.5;
        assert_eq!(c.validate().unwrap_err().0, "beta1");
        let mut c = config();
        c.grad_clip = -1.0;
        assert_eq!(c.validate().unwrap_err().0, "grad_clip");
        let mut c = config();
        c.adam_eps = 0.0;
        assert_eq!(c.validate().unwrap_err().0, "adam_eps");
    }
}
