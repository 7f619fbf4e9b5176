//! Running a sweep: pick the runs that are not done, lease each one, train them in parallel
//! (`--jobs`), show progress, and report what happened. A failed run never stops the sweep.

pub mod capacity;
pub mod eta;
mod filter;
mod local;
mod one_run;
pub mod reuse;
pub mod slurm;
pub mod slurm_queue;

pub use filter::Filter;
pub use local::{RunnerOptions, SweepReport, job_devices, run_sweep, runs_to_train};
pub use one_run::{RunOutcome, outcome_text};

use crate::spec::PlannedRun;
use crate::store::lease::Lease;
use crate::store::{RunDir, RunState, StoreError};

/// A run's state on disk, and who trains it now (if anyone).
#[derive(Debug, Clone)]
pub struct RunView {
    pub state: RunState,
    pub holder: Option<String>,
}

pub fn view(dir: &RunDir) -> Result<RunView, StoreError> {
    let status = dir.read_status()?;
    let has_checkpoint = dir.find_checkpoint().is_some();
    Ok(RunView {
        state: RunState::of(status.as_ref(), has_checkpoint),
        holder: Lease::holder(dir).map(|h| h.describe()),
    })
}

/// One line naming a run for logs: `1a2b3c4d5e micro block S=4 seed 0`.
pub fn describe(run: &PlannedRun) -> String {
    format!(
        "{} {} {} seed {} on {}",
        run.id,
        run.size,
        run.arm,
        run.seed,
        run.task()
    )
}
