//! Who holds a run's lease (`lease.json`): this process as a claimant (host, pid, Slurm
//! task and attempt, a random token) and the rules by which a claimant counts a holder dead.

use std::time::{Duration, SystemTime};

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::LeaseTiming;

/// What `lease.json` says: who holds the run and when it last said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// `ARRAYJOB_TASK` (or the job id) when the holder is a Slurm task.
    pub job: Option<String>,
    /// Slurm's `SLURM_RESTART_COUNT`: which attempt of that task (0 outside Slurm).
    #[serde(default)]
    pub attempt: u32,
    /// Random, per claim: tells two claims of one process apart.
    pub token: String,
    pub acquired: String,
    pub heartbeat: String,
}

impl Holder {
    /// This process, as a claimant.
    pub fn me() -> Self {
        let now = rfc3339(SystemTime::now());
        Self {
            host: hostname(),
            pid: std::process::id(),
            job: slurm_task(),
            attempt: std::env::var("SLURM_RESTART_COUNT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            token: format!("{:016x}", rand::rng().random::<u64>()),
            acquired: now.clone(),
            heartbeat: now,
        }
    }

    /// How long ago the heartbeat was written (zero if it lies in the future: clock skew).
    pub fn silent_for(&self, now: SystemTime) -> Duration {
        humantime::parse_rfc3339(&self.heartbeat)
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or(Duration::ZERO)
    }

    /// Whether `claimant` may take this holder's lease.
    pub(super) fn is_dead(&self, claimant: &Holder, now: SystemTime, timing: LeaseTiming) -> bool {
        if self.token == claimant.token {
            return false;
        }
        if self.silent_for(now) > timing.stale_after {
            return true;
        }
        if self.job.is_some() && self.job == claimant.job && self.attempt < claimant.attempt {
            // An earlier attempt of this Slurm task (requeued since): Slurm runs one at a
            // time. Two processes of one attempt (two `attnres run` in one allocation) are
            // both alive and are told apart by the rules below.
            return true;
        }
        self.host == claimant.host && !pid_alive(self.pid)
    }

    /// `host n1 pid 4242 (job 16_0), heartbeat 3 s ago`.
    pub fn describe(&self) -> String {
        let job = self
            .job
            .as_ref()
            .map(|j| format!(" (job {j})"))
            .unwrap_or_default();
        let silent = self.silent_for(SystemTime::now()).as_secs();
        format!(
            "host {} pid {}{job}, heartbeat {silent} s ago",
            self.host, self.pid
        )
    }
}

pub(super) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

pub(super) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if ok && !name.is_empty() => name.to_string(),
        _ => "unknown-host".into(),
    }
}

/// `ARRAYJOB_TASK` inside a Slurm array task, the job id in a plain job, None outside Slurm.
fn slurm_task() -> Option<String> {
    let var = |k| std::env::var(k).ok().filter(|v: &String| !v.is_empty());
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(job), Some(task)) => Some(format!("{job}_{task}")),
        _ => var("SLURM_JOB_ID"),
    }
}

pub(super) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only asks whether the process exists; nothing is delivered.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
