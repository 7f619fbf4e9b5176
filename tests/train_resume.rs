//! A run killed with SIGKILL at any point and then resumed ends with exactly the losses of
//! an uninterrupted run.

#[path = "common/run.rs"]
mod run;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use run::*;

/// When a killed attempt dies.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This fraction of an uninterrupted run's wall time.
    At(f64),
    /// Until `status.json` reports a checkpoint at this step or later.
    AfterCheckpoint(u64),
}

use Kill::*;

#[test]
fn killed_and_resumed_runs_match_an_uninterrupted_run() {
    // Kill points spread over the whole run (start-up, mid-step, mid-checkpoint, near the
    // end), two kills in a row for the same folder, then a clean finish; one kill set
    // waits for a checkpoint, so at least one resume starts mid-run.
    killed_and_resumed(
        "resume",
        "",
        &[
            &[At(0.05), At(0.5)],
            &[At(0.3), At(0.9)],
            &[At(0.7), At(0.95)],
            &[AfterCheckpoint(9)],
        ],
    );
}

/// bf16 weights and Adam moments go through the checkpoint as they are: the resumed run is
/// the uninterrupted one, bit for bit.
#[test]
fn killed_and_resumed_bf16_runs_match_an_uninterrupted_run() {
    killed_and_resumed(
        "resume-bf16",
        "  precision: bf16\n",
        &[&[At(0.4), At(0.8)], &[AfterCheckpoint(12)]],
    );
}

const STEPS: u64 = 24;

/// Runs `train` (training into `out`) and SIGKILLs it at `kill` (`full`: how long a whole
/// run took), or lets it finish first.
fn train_until_killed(mut train: Command, out: &Path, kill: Kill, full: Duration) {
    let mut child = train
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    while child.try_wait().unwrap().is_none() {
        let due = match kill {
            At(f) => begun.elapsed() >= full.mul_f64(f),
            AfterCheckpoint(step) => status_step(out) >= step,
        };
        if due {
            break;
        }
        assert!(begun.elapsed() < full * 20, "{kill:?} never came");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill(); // SIGKILL on Unix
    let _ = child.wait();
}

fn killed_and_resumed(name: &str, extra_train: &str, kill_sets: &[&[Kill]]) {
    let tmp = TempDir::new(name);
    let spec = write(
        tmp.path(),
        "spec.yaml",
        &tiny_spec(
            "{variant: block, block_size: 2}",
            STEPS as usize,
            extra_train,
        ),
    );
    let train = |out: &std::path::Path| {
        let mut c = attnres();
        c.arg("train")
            .arg(&spec)
            .arg("--out")
            .arg(out)
            .arg("--threads")
            .arg("2");
        c
    };
    let reference = tmp.path().join("reference");
    let started = Instant::now();
    let o = train(&reference).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("resuming"), "{}", stderr(&o));
    let full = started.elapsed();
    let expected = loss_columns(&reference);

    let mut mid_run = 0;
    for (i, kills) in kill_sets.iter().enumerate() {
        let out = tmp.path().join(format!("killed{i}"));
        for &kill in kills.iter() {
            train_until_killed(train(&out), &out, kill, full);
        }
        // What the next process must pick up: the checkpoint's step, and the rows logged
        // up to it, which a resume keeps as they are (wall times included).
        let from = checkpoint_step(&out);
        let kept = steps_rows(&out, from);
        let finished = status_text(&out).contains("\"done\"");
        let o = train(&out).output().unwrap();
        let err = stderr(&o);
        assert!(o.status.success(), "{err}");
        assert_eq!(loss_columns(&out), expected, "kill points {kills:?}");
        if finished {
            // The last kill came after the run had finished: nothing to resume.
            assert!(String::from_utf8_lossy(&o.stdout).contains("done already"));
            continue;
        }
        if from == 0 {
            assert!(!err.contains("resuming"), "{kills:?}: {err}");
            continue;
        }
        let said = format!("resuming from the checkpoint at step {from} of {STEPS}");
        assert!(
            err.contains(&said),
            "{kills:?}: expected '{said}' in:\n{err}"
        );
        assert_eq!(
            steps_rows(&out, from),
            kept,
            "{kills:?}: the rows up to the checkpoint were rewritten"
        );
        if from < STEPS {
            mid_run += 1;
        }
        if let [AfterCheckpoint(step)] = kills {
            assert!(from >= *step && from < STEPS, "resumed from step {from}");
        }
    }
    assert!(mid_run > 0, "no kill landed mid-run");
}

fn status_text(run: &Path) -> String {
    std::fs::read_to_string(run.join("status.json")).unwrap_or_default()
}

/// The step `status.json` last reported (0 before the first checkpoint).
fn status_step(run: &Path) -> u64 {
    serde_json::from_str::<serde_json::Value>(&status_text(run))
        .ok()
        .and_then(|v| v["step"].as_u64())
        .unwrap_or(0)
}

/// The step of the checkpoint a resume would load, in the trainer's order of preference.
fn checkpoint_step(run: &Path) -> u64 {
    ["checkpoint", "checkpoint.new", "checkpoint.old"]
        .iter()
        .map(|c| run.join(c).join("state.json"))
        .find(|p| p.is_file())
        .map_or(0, |p| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            v["step"].as_u64().unwrap()
        })
}

/// The header and the first `n` rows of steps.csv, byte for byte.
fn steps_rows(run: &Path, n: u64) -> Vec<String> {
    std::fs::read_to_string(run.join("steps.csv"))
        .unwrap_or_default()
        .lines()
        .take(n as usize + 1)
        .map(str::to_string)
        .collect()
}
