//! One run trained under its lease, by either executor (local jobs or a Slurm task): what
//! happened to it ([`RunOutcome`]), and a failure of any kind, a panic included, recorded in
//! its status so that `status` shows it and `--retry-failed` retries it.

use crate::spec::PlannedRun;
use crate::store::lease::{Claim, Lease};
use crate::store::{RunDir, Status};
use crate::train::{Outcome, TrainOptions, train};

/// What happened to one selected run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Trained {
        val_loss: f32,
        wall_s: f64,
    },
    AlreadyDone,
    /// Another live process (or job) holds its lease: who.
    Busy(String),
    FailedBefore,
    Failed(String),
    /// Stopped on request with a checkpoint after this many steps; the next run resumes.
    Stopped(u64),
    /// Stopped after this many steps because another runner took its lease over.
    Lost(u64),
}

pub(super) fn train_leased(run: &PlannedRun, dir: &RunDir, opts: &TrainOptions) -> RunOutcome {
    let lease = match Lease::try_acquire(dir) {
        Ok(Claim::Held(lease)) => lease,
        Ok(Claim::Busy(holder)) => return RunOutcome::Busy(holder.describe()),
        Err(e) => return RunOutcome::Failed(e.to_string()),
    };
    // The sweep's TensorBoard folder: `tensorboard --logdir` on the sweep shows runs by name.
    let events = dir
        .root
        .parent()
        .map(|sweep| sweep.join("tensorboard").join(run.tensorboard_name()));
    let opts = TrainOptions {
        lost: Some(lease.lost_flag()),
        events,
        ..opts.clone()
    };
    let result = guarded(dir, || train(&run.spec, dir, &opts));
    match result {
        Ok(Outcome::Done(s)) => RunOutcome::Trained {
            val_loss: s.loss_val,
            wall_s: s.wall_s,
        },
        Ok(Outcome::AlreadyDone) => RunOutcome::AlreadyDone,
        Ok(Outcome::Failed { reason, .. }) => RunOutcome::Failed(reason),
        Ok(Outcome::Stopped { step }) => RunOutcome::Stopped(step),
        Ok(Outcome::Lost { step }) => RunOutcome::Lost(step),
        // A failure outside the loss (a full disk, a bad corpus) is recorded like any
        // other, so that `status` shows it and `--retry-failed` retries it once fixed.
        Err(e) => {
            let reason = format!("{e:#}");
            // Never into a folder that holds another run (train refused it for that).
            let ours = crate::store::read_json_opt::<crate::spec::RunSpec>(&dir.spec())
                .is_ok_and(|s| s.is_none_or(|s| s == run.spec));
            if ours {
                record_failure(dir, &reason);
            }
            RunOutcome::Failed(reason)
        }
    }
}

/// Marks `dir`'s run failed with `reason` at the step its status last showed, after
/// removing what the failed attempt left half-written: temporary files and a checkpoint
/// folder that never got its `state.json`. Best effort: on a disk that refuses every write
/// the status stays as it was, and the error was printed.
fn record_failure(dir: &RunDir, reason: &str) {
    if let Ok(entries) = std::fs::read_dir(&dir.root) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let half = dir.checkpoint_sibling(".new");
    if half.is_dir() && !half.join("state.json").is_file() {
        let _ = std::fs::remove_dir_all(&half);
    }
    let step = match dir.read_status() {
        Ok(Some(Status::Running { step, .. })) => step,
        _ => 0,
    };
    let _ = dir.write_status(&Status::Failed {
        step,
        reason: reason.to_string(),
    });
}

/// Runs `work` (training one run) so that a panic anywhere inside it (a backend assertion, an
/// allocation failure that unwinds) becomes this run's failure, recorded in its status with
/// the panic's message; the sweep goes on.
fn guarded(
    dir: &RunDir,
    work: impl FnOnce() -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        let reason = format!("panicked: {message}");
        record_failure(dir, &reason);
        Ok(Outcome::Failed { step: 0, reason })
    })
}

pub fn outcome_text(o: &RunOutcome) -> String {
    match o {
        RunOutcome::Trained { val_loss, wall_s } => {
            format!("trained, val loss {val_loss:.4} ({wall_s:.1} s)")
        }
        RunOutcome::AlreadyDone => "done already".into(),
        RunOutcome::Busy(who) => format!("skipped: trained by {who}"),
        RunOutcome::FailedBefore => "failed before (use --retry-failed)".into(),
        RunOutcome::Failed(why) => format!("FAILED: {why}"),
        RunOutcome::Stopped(step) => {
            format!("stopped at step {step} (checkpointed; runs again from there)")
        }
        RunOutcome::Lost(step) => format!(
            "stopped at step {step}: its lease was lost (taken over after this process \
             stalled, or not refreshable); whoever holds it now trains it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside a run is that run's failure, with its message, in the run's status.
    #[test]
    fn a_panic_inside_a_run_is_recorded_as_its_failure() {
        let root = std::env::temp_dir().join(format!("attnres-guarded-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let dir = RunDir::new(root.clone());
        let outcome = guarded(&dir, || panic!("index out of bounds: the len is 3"));
        let Ok(Outcome::Failed { reason, .. }) = outcome else {
            panic!("not a failure: {outcome:?}");
        };
        assert_eq!(reason, "panicked: index out of bounds: the len is 3");
        let status = std::fs::read_to_string(dir.status()).unwrap();
        assert!(status.contains("index out of bounds"), "{status}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
