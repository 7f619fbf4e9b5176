//! A RunSpec: everything that determines one training run, and its id.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{Budget, TrainConfig};
use crate::data::DataConfig;
use crate::model::ModelConfig;
use crate::model::flops::{flops_per_token, param_counts};
use crate::model::memory::{MemoryEstimate, training_memory_in};

/// One fully resolved run. The same spec always maps to the same run id and folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub model: ModelConfig,
    pub data: DataConfig,
    pub train: TrainConfig,
    #[serde(default)]
    pub seed: u64,
}

impl RunSpec {
    /// Short hash of the canonical JSON form (serde_json writes struct fields in order).
    pub fn run_id(&self) -> String {
        let canonical = serde_json::to_string(self).unwrap_or_default();
        let digest = format!("{:x}", Sha256::digest(canonical.as_bytes()));
        digest[..10].to_string()
    }

    /// Tokens per optimizer step.
    pub fn tokens_per_step(&self) -> u64 {
        (self.train.batch_size * self.model.context) as u64
    }

    /// The budget in tokens, before rounding to whole sequences.
    pub fn budget_tokens(&self) -> f64 {
        match self.train.budget {
            Budget::Tokens(t) => t,
            Budget::TokensPerParam(r) => r * param_counts(&self.model).non_embedding as f64,
            Budget::Flops(f) => f / flops_per_token(&self.model).training() as f64,
        }
    }

    /// The budget in whole sequences of `context` tokens (rounded down, at least one; a
    /// sweep refuses budgets below one optimizer step before this is reached).
    pub fn total_sequences(&self) -> u64 {
        ((self.budget_tokens() / self.model.context as f64).floor() as u64).max(1)
    }

    pub fn total_tokens(&self) -> u64 {
        self.total_sequences() * self.model.context as u64
    }

    /// Optimizer steps; the last one may hold fewer sequences so the budget is met exactly.
    pub fn total_steps(&self) -> u64 {
        self.total_sequences()
            .div_ceil(self.train.batch_size as u64)
    }

    /// Sequences in step `step` (the last step takes the remainder).
    pub fn sequences_in_step(&self, step: u64) -> usize {
        let b = self.train.batch_size as u64;
        (self.total_sequences() - step * b).min(b) as usize
    }

    /// Sequences through the model at once: one micro-batch, `ceil(batch_size / micro_batches)`.
    pub fn sequences_in_flight(&self) -> usize {
        self.train
            .batch_size
            .div_ceil(self.train.micro_batches.max(1))
    }

    /// Peak training memory with [`Self::sequences_in_flight`] sequences in flight.
    pub fn memory(&self) -> MemoryEstimate {
        training_memory_in(
            &self.model,
            self.sequences_in_flight(),
            self.train.precision.bytes(),
        )
    }
}
