//! `attnres run`: a second run trains nothing; a killed sweep finishes with no run lost and
//! none trained twice; two processes on one results folder never train the same run.

#[path = "common/run.rs"]
mod run;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use run::*;

const SWEEP: &str = "name: mini
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline, full, {variant: block, block_size: 2}]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 15000}, eval_every: 10, eval_batches: 2, checkpoint_every: 5}
";

/// Finished runs (status done) and when their status was written.
fn summary_times(results: &Path) -> Vec<(String, SystemTime)> {
    let Ok(entries) = std::fs::read_dir(results.join("mini")) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .filter_map(|e| {
            let status = e.unwrap().path().join("status.json");
            if !std::fs::read_to_string(&status).ok()?.contains("\"done\"") {
                return None;
            }
            let t = std::fs::metadata(&status).ok()?.modified().ok()?;
            let id = status.parent()?.file_name()?.to_string_lossy().into_owned();
            Some((id, t))
        })
        .collect();
    out.sort();
    out
}

fn run_sweep(sweep: &Path, results: &Path) -> std::process::Command {
    let mut c = attnres();
    c.arg("run")
        .arg(sweep)
        .arg("--results")
        .arg(results)
        .arg("--threads")
        .arg("1");
    c
}

#[test]
fn a_second_run_trains_nothing_and_a_killed_sweep_loses_nothing() {
    let tmp = TempDir::new("sweep-kill");
    let sweep = write(tmp.path(), "mini.yaml", SWEEP);
    let results = tmp.path().join("results");
    // Kill the sweep part-way: some runs done, one partial, the rest pending.
    let mut child = run_sweep(&sweep, &results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while summary_times(&results).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    let before = summary_times(&results);
    assert!(
        !before.is_empty() && before.len() < 6,
        "kill landed at {} finished runs",
        before.len()
    );

    let o = run_sweep(&sweep, &results).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.contains(&format!("{} done already", before.len())),
        "{out}"
    );
    let after = summary_times(&results);
    assert_eq!(after.len(), 6, "every run finished");
    for (id, t) in &before {
        assert_eq!(
            after.iter().find(|(a, _)| a == id).map(|(_, t)| t),
            Some(t),
            "{id} was trained twice"
        );
    }
    for (id, _) in &after {
        let rows = loss_columns(&results.join("mini").join(id));
        assert_eq!(
            rows.len(),
            39,
            "{id}: one steps.csv row per step, no duplicates"
        );
    }

    let o = run_sweep(&sweep, &results).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("0 trained, 6 done already"), "{out}");
    assert!(
        !out.contains("jobs:"),
        "nothing left to train, yet it chose jobs: {out}"
    );
    assert_eq!(summary_times(&results), after);

    let o = attnres()
        .arg("status")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("6 done") && out.contains("39/39"), "{out}");
}

#[test]
fn two_processes_never_train_the_same_run() {
    let tmp = TempDir::new("sweep-two");
    let sweep = write(tmp.path(), "mini.yaml", SWEEP);
    let results = tmp.path().join("results");
    let a = run_sweep(&sweep, &results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = run_sweep(&sweep, &results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for o in [&a, &b] {
        assert!(
            o.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        );
    }
    let lines = format!(
        "{}{}",
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout)
    );
    let trained: Vec<&str> = lines
        .lines()
        .filter(|l| l.contains(": trained,"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let mut unique = trained.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(trained.len(), 6, "{lines}");
    assert_eq!(
        unique.len(),
        6,
        "a run was trained by both processes:\n{lines}"
    );
}
