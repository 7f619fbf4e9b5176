//! `status.json`: what a run's trainer last said, and the state a reader derives from it.

use serde::{Deserialize, Serialize};

/// What the trainer writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Training, or stopped without a word (killed); the checkpoint says how far it got.
    Running {
        step: u64,
        total_steps: u64,
    },
    Done {
        steps: u64,
    },
    Failed {
        step: u64,
        reason: String,
    },
}

/// The state a reader sees: `status` plus whether a checkpoint exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Pending,
    Partial,
    Done,
    Failed,
}

impl RunState {
    pub fn of(status: Option<&Status>, has_checkpoint: bool) -> Self {
        match status {
            Some(Status::Done { .. }) => Self::Done,
            Some(Status::Failed { .. }) => Self::Failed,
            _ if has_checkpoint => Self::Partial,
            _ => Self::Pending,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Partial => "partial",
            Self::Done => "done",
            Self::Failed => "failed",
        }
    }
}
