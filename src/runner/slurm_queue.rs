//! What Slurm holds of a sweep: the arrays submitted for it (`slurm/jobs.txt`), what
//! `squeue` says of their tasks, a run's latest log, and cancelling what is still queued.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::slurm::slurm_dir;

/// Submitted arrays of a sweep: (job id, run ids by array index).
pub fn submitted(root: &Path) -> Vec<(String, Vec<String>)> {
    let jobs = std::fs::read_to_string(slurm_dir(root).join("jobs.txt")).unwrap_or_default();
    jobs.lines()
        .filter_map(|l| {
            let (id, manifest) = l.split_once(' ')?;
            let ids = std::fs::read_to_string(manifest).ok()?;
            Some((id.to_string(), ids.lines().map(String::from).collect()))
        })
        .collect()
}

/// What `squeue` says of the sweep's tasks, by run id: `queued`, `running on NODE`, ...
/// Finished tasks leave `squeue`; their run folders say the rest.
pub fn queue_states(root: &Path) -> HashMap<String, String> {
    let arrays = submitted(root);
    let mut out = HashMap::new();
    if arrays.is_empty() {
        return out;
    }
    let ids: Vec<&str> = arrays.iter().map(|(id, _)| id.as_str()).collect();
    let Ok(o) = Command::new("squeue")
        .args(["-h", "-r", "-o", "%i %T %N", "-j", &ids.join(",")])
        .output()
    else {
        return out;
    };
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let mut parts = line.split_whitespace();
        let (Some(task), Some(state)) = (parts.next(), parts.next()) else {
            continue;
        };
        let node = parts.next().unwrap_or("");
        let Some((job, index)) = task.split_once('_') else {
            continue;
        };
        let Some(runs) = arrays.iter().find(|(id, _)| id == job).map(|(_, r)| r) else {
            continue;
        };
        if let Some(run) = index.parse::<usize>().ok().and_then(|i| runs.get(i)) {
            let text = match state {
                "RUNNING" => format!("running on {node}"),
                "PENDING" => "queued".into(),
                other => other.to_lowercase(),
            };
            out.insert(run.clone(), text);
        }
    }
    out
}

/// Log of a run's latest task, if any: `RESULTS/NAME/logs/JOB_INDEX.log`.
pub fn log_of(root: &Path, run_id: &str) -> Option<PathBuf> {
    submitted(root).into_iter().rev().find_map(|(job, runs)| {
        let index = runs.iter().position(|r| r == run_id)?;
        let log = root.join("logs").join(format!("{job}_{index}.log"));
        log.exists().then_some(log)
    })
}

/// Cancels the sweep's jobs that `squeue` still lists; returns (cancelled, all submitted).
pub fn cancel(root: &Path) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let all: Vec<String> = submitted(root).into_iter().map(|(id, _)| id).collect();
    if all.is_empty() {
        return Ok((Vec::new(), all));
    }
    let listed = Command::new("squeue")
        .args(["-h", "-o", "%F", "-j", &all.join(",")])
        .output()
        .context("running squeue")?;
    // "%F": the array's job id, for each of its tasks still listed.
    let queued = String::from_utf8_lossy(&listed.stdout).into_owned();
    let ids: Vec<String> = all
        .iter()
        .filter(|id| queued.split_whitespace().any(|w| w == id.as_str()))
        .cloned()
        .collect();
    if ids.is_empty() {
        return Ok((ids, all));
    }
    let out = Command::new("scancel")
        .args(&ids)
        .output()
        .context("running scancel")?;
    if !out.status.success() {
        bail!("scancel: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok((ids, all))
}
