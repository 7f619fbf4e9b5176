//! Training one run: a RunSpec and a run folder in, a complete run folder out (DESIGN.md,
//! "A run folder"). Resumes from the folder's checkpoint when there is one.

pub mod adamw;
pub mod checkpoint;
pub mod config;
pub mod eval;
pub mod optimizer;
pub mod run_spec;
mod trainer;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::model::flops::ParamCounts;

pub use trainer::{set_threads, train};

/// How to run (not what to run: that is the RunSpec).
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub backend: BackendKind,
    /// `cpu`, `cuda` or `cuda:N`.
    pub device: String,
    /// CPU threads for the backend; None keeps the backend's default.
    pub threads: Option<usize>,
    /// A bar to drive (a sweep's per-run bar); None makes one when stdout is a terminal.
    pub progress: Option<indicatif::ProgressBar>,
    /// Set (by a signal handler) to stop after the current step with a checkpoint, so that
    /// a preempted or timed-out job resumes exactly where it stopped.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Set when this process no longer holds the run's lease (store::lease): stop at once
    /// and write nothing more into the run folder, which is another runner's now.
    pub lost: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The folder for the run's TensorBoard event file (a sweep's
    /// `tensorboard/SIZE ARM seed N (ID)`); None writes none.
    pub events: Option<std::path::PathBuf>,
}

/// How a call to [`train`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done(Box<Summary>),
    /// The folder already held a finished run; nothing was trained.
    AlreadyDone,
    Failed {
        step: u64,
        reason: String,
    },
    /// Asked to stop: checkpointed after `step` steps; training again resumes there.
    Stopped {
        step: u64,
    },
    /// The run's lease was lost after `step` steps; nothing more was written.
    Lost {
        step: u64,
    },
}

/// `summary.json`: what a finished run found and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub run_id: String,
    pub label: String,
    pub steps: u64,
    pub tokens: u64,
    pub flops_exact: f64,
    pub flops_6nd: f64,
    pub params: ParamCountsJson,
    /// Train loss of the last step, and the mean over the last 10% of steps.
    pub loss_train_last: f32,
    pub loss_train_tail: f32,
    /// Validation at the last step on the fixed eval batches (`train.eval_batches`).
    pub loss_val: f32,
    pub acc_val: Option<f32>,
    /// Validation bits per byte (text corpora).
    pub bpb_val: Option<f32>,
    /// The final validation on the whole validation split, every token scored once: what
    /// the reports use when every run they read has it (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_val: Option<FinalVal>,
    pub wall_s: f64,
    pub backend: String,
    pub device: String,
    pub threads: Option<usize>,
    /// The CPU's model name: libtorch's kernels round differently on different CPUs, so a
    /// run retrains bit for bit only on the kind it was trained on (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// The libtorch release a `tch` run used (`2.9.0`, `2.11.0+cu130`): its kernels round
    /// differently from release to release (absent in older runs and on other backends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libtorch: Option<String>,
    /// The GPU it trained on, if any, and whether its f32 matmuls ran as TF32 (which rounds
    /// differently): `NVIDIA H200, TF32 matmuls` (absent in older runs and on a CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    pub git_commit: String,
    pub version: String,
    pub finished_at: String,
}

/// A finished run's validation on its whole validation split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FinalVal {
    /// Nats per scored token.
    pub loss: f32,
    /// Answer accuracy (synthetic tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acc: Option<f32>,
    /// Bits per UTF-8 byte of the split (text corpora).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpb: Option<f32>,
    /// Tokens scored.
    pub tokens: u64,
    /// Seconds it took.
    pub wall_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ParamCountsJson {
    pub total: u64,
    pub non_embedding: u64,
    pub residual: u64,
}

impl From<ParamCounts> for ParamCountsJson {
    fn from(p: ParamCounts) -> Self {
        Self {
            total: p.total,
            non_embedding: p.non_embedding,
            residual: p.residual,
        }
    }
}
