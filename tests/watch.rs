//! `attnres watch` and `plan` give a sweep's time left by FLOPs, not by runs: with the small
//! half of a sweep trained and its large half left, the time left is the large runs' FLOPs
//! over the speed measured on the small ones, far more than "half done" would say.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use attnres::fmt::duration;
use attnres::runner::eta::{flops_left, machine_speed};
use attnres::spec::Sweep;
use attnres::store::{RunDir, read_json};
use attnres::train::Summary;
use run::*;

const SWEEP: &str = "name: eta
data:
  corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}
model: {vocab_size: 256, context: 48}
sizes:
  - {name: small, d_model: 32, n_blocks: 1, n_heads: 1}
  - {name: large, d_model: 96, n_blocks: 4, n_heads: 3}
residual: [baseline]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, warmup: 2, budget: {tokens: 7680}, eval_every: 10, eval_batches: 2}
";

fn stdout_of(args: &[&str], sweep: &Path, results: &Path) -> String {
    let o = attnres()
        .args(args)
        .arg(sweep)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn time_left_is_the_large_runs_flops_over_the_measured_speed() {
    let tmp = TempDir::new("watch-eta");
    let sweep_file = write(tmp.path(), "eta.yaml", SWEEP);
    let results = tmp.path().join("results");
    let o = attnres()
        .arg("run")
        .arg(&sweep_file)
        .arg("--results")
        .arg(&results)
        .args(["--filter", "size=small", "--jobs", "1", "--threads", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    // What the view must say, worked out here from the run folders.
    let sweep = Sweep::load(&sweep_file).unwrap();
    let root = results.join("eta");
    let summaries: Vec<Summary> = sweep
        .runs
        .iter()
        .filter(|r| r.size == "small")
        .map(|r| read_json(&RunDir::new(root.join(&r.id)).summary()).unwrap())
        .collect();
    let cores = std::thread::available_parallelism().unwrap().get();
    let speed = machine_speed(summaries.iter(), cores, false).unwrap();
    let large: Vec<_> = sweep.runs.iter().filter(|r| r.size == "large").collect();
    let flops: f64 = large.iter().map(|r| flops_left(r, 0)).sum();
    let seconds: f64 = large.iter().map(|r| flops_left(r, 0) / speed).sum();
    // By runs the sweep is half done: the time spent so far would be the time left.
    let spent: f64 = summaries
        .iter()
        .map(|s| s.wall_s * s.threads.unwrap() as f64)
        .sum::<f64>()
        / cores as f64;
    assert!(
        seconds > 3.0 * spent,
        "the large runs should dominate: {seconds} s left vs {spent} s spent"
    );

    let view = stdout_of(&["watch", "--once"], &sweep_file, &results);
    assert!(view.contains("2 done, 2 pending"), "{view}");
    let said = format!("left: {flops:.3e} FLOPs, about {} (", duration(seconds));
    assert!(view.contains(&said), "expected `{said}` in:\n{view}");
    assert!(
        view.contains("measured on all finished runs"),
        "large has no finished run yet:\n{view}"
    );
    let plan = stdout_of(&["plan"], &sweep_file, &results);
    let said = format!("left to train: ~{} by FLOPs left", duration(seconds));
    assert!(plan.contains(&said), "expected `{said}` in:\n{plan}");
}

#[test]
fn a_finished_sweep_has_nothing_left() {
    let tmp = TempDir::new("watch-done");
    let sweep_file = write(tmp.path(), "eta.yaml", SWEEP);
    let results = tmp.path().join("results");
    let view = stdout_of(
        &[
            "watch",
            "--once",
            "--filter",
            "size=small",
            "--filter",
            "seed=0",
        ],
        &sweep_file,
        &results,
    );
    assert!(view.contains("1 pending"), "{view}");
    let o = attnres()
        .arg("run")
        .arg(&sweep_file)
        .arg("--results")
        .arg(&results)
        .args([
            "--filter",
            "size=small",
            "--filter",
            "seed=0",
            "--threads",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Without --once it returns by itself once nothing is left to train.
    let view = stdout_of(
        &["watch", "--filter", "size=small", "--filter", "seed=0"],
        &sweep_file,
        &results,
    );
    assert!(
        view.contains("1 done") && view.contains("nothing left to train"),
        "{view}"
    );
}
