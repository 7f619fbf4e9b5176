//! The event files attnres writes, read back with TensorBoard's own reader (the `tensorboard`
//! package from PyPI, installed by `make setup` into `$TENSORBOARD_VENV`): every scalar
//! equals the run's metrics files, each step appears once after a SIGKILL and resume, a
//! sweep's runs are named by size, arm and seed, and `export-metrics` rebuilds the same
//! scalars from the run folders.

#[path = "common/run.rs"]
mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use attnres::store::metrics::{read_depth, read_layers, read_steps};
use run::*;

/// Every scalar TensorBoard's `EventAccumulator` reads from `dir`: tag -> [(step, value)].
type Scalars = BTreeMap<String, Vec<(u64, f32)>>;

const READER: &str = r#"
import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0})
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
"#;

fn python() -> PathBuf {
    let python = tensorboard_venv().join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `make setup` (scripts/setup-tensorboard.sh installs TensorBoard)",
        python.display()
    );
    python
}

fn read_events(dir: &Path) -> Scalars {
    let out = std::process::Command::new(python())
        .args(["-c", READER])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let raw: BTreeMap<String, Vec<(u64, f64)>> = serde_json::from_slice(&out.stdout).unwrap();
    raw.into_iter()
        .map(|(tag, points)| {
            (
                tag,
                points.into_iter().map(|(s, v)| (s, v as f32)).collect(),
            )
        })
        .collect()
}

fn event_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("tfevents"))
        .count()
}

/// Asserts that `events` holds exactly the run's metrics: each steps.csv column at every
/// step, each probe at every evaluation, and the routing contrast of each mixing step.
fn assert_matches_run(events: &Scalars, run: &Path) {
    let steps = read_steps(&run.join("steps.csv")).unwrap();
    let series = |tag: &str| -> &Vec<(u64, f32)> {
        events
            .get(tag)
            .unwrap_or_else(|| panic!("no `{tag}` in {:?}", events.keys()))
    };
    let every_step: Vec<u64> = steps.iter().map(|r| r.step).collect();
    let column = |f: &dyn Fn(&attnres::store::metrics::StepRow) -> Option<f32>| {
        steps
            .iter()
            .filter_map(|r| Some((r.step, f(r)?)))
            .collect::<Vec<_>>()
    };
    assert_eq!(*series("loss/train"), column(&|r| Some(r.loss_train)));
    assert_eq!(
        series("loss/train").iter().map(|p| p.0).collect::<Vec<_>>(),
        every_step,
        "every step once, in order"
    );
    assert_eq!(*series("loss/val"), column(&|r| r.loss_val));
    assert_eq!(*series("acc/val"), column(&|r| r.acc_val));
    assert_eq!(*series("grad_norm"), column(&|r| r.grad_norm));
    assert_eq!(*series("lr"), column(&|r| Some(r.lr as f32)));
    assert_eq!(
        *series("perf/tokens_per_s"),
        column(&|r| Some(r.tokens_per_s as f32))
    );
    assert!(
        steps
            .iter()
            .all(|r| r.grad_norm.is_some_and(f32::is_finite))
    );

    let layers = read_layers(&run.join("layers.parquet"), None).unwrap();
    assert!(!layers.is_empty());
    for row in &layers {
        let group = match row.metric.as_str() {
            "in_rms" => "hidden_rms",
            "out_rms" => "output_rms",
            "grad_norm" => "layer_grad_norm",
            other => other,
        };
        let tag = match row.kind.as_str() {
            "block" => format!("{group}/{:02}", row.layer),
            kind => format!("{group}/{:02} {kind}", row.layer),
        };
        let at: Vec<f32> = series(&tag)
            .iter()
            .filter(|p| p.0 == row.step)
            .map(|p| p.1)
            .collect();
        assert_eq!(at, [row.value], "{tag} at step {}", row.step);
    }
    let depth = read_depth(&run.join("depth_attn.parquet"), None).unwrap();
    let mut mixes: BTreeMap<(u64, u32), Vec<f32>> = BTreeMap::new();
    for row in &depth {
        mixes
            .entry((row.step, row.layer))
            .or_default()
            .push(row.weight);
    }
    let routing = events.keys().any(|t| t.starts_with("routing_max/"));
    assert_eq!(
        routing,
        !mixes.is_empty(),
        "routing tags iff depth attention"
    );
    for ((step, layer), weights) in mixes {
        let max = weights.iter().copied().fold(0.0, f32::max);
        let at: Vec<f32> = series(&format!("routing_max/{layer:02}"))
            .iter()
            .filter(|p| p.0 == step)
            .map(|p| p.1)
            .collect();
        assert_eq!(at, [max], "routing_max/{layer:02} at step {step}");
    }
}

fn train(spec: &Path, out: &Path) -> std::process::Command {
    let mut c = attnres();
    c.arg("train")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .arg("--threads")
        .arg("1");
    c
}

#[test]
fn every_scalar_equals_the_runs_metrics_files() {
    let tmp = TempDir::new("tb-scalars");
    let spec = write(tmp.path(), "spec.yaml", &tiny_spec("full", 24, ""));
    let out = tmp.path().join("run");
    let o = train(&spec, &out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(event_files(&out.join("tb")), 1);
    let events = read_events(&out.join("tb"));
    assert!(
        events.contains_key("routing_entropy/02"),
        "Full AttnRes routes"
    );
    assert_matches_run(&events, &out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let whole = summary["final_val"]["loss"].as_f64().unwrap() as f32;
    assert_eq!(events["loss/val_whole_split"], [(24, whole)]);
}

#[test]
fn a_killed_and_resumed_run_has_each_step_once() {
    let tmp = TempDir::new("tb-resume");
    let spec = write(tmp.path(), "spec.yaml", &tiny_spec("full", 60, ""));
    let out = tmp.path().join("run");
    let mut child = train(&spec, &out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once a checkpoint past the first evaluation is down and steps after it are
    // logged: those steps are in the first event file and must not be there twice.
    let begun = Instant::now();
    loop {
        let status = std::fs::read_to_string(out.join("status.json")).unwrap_or_default();
        let step = serde_json::from_str::<serde_json::Value>(&status)
            .ok()
            .and_then(|v| v["step"].as_u64())
            .unwrap_or(0);
        let logged = read_steps(&out.join("steps.csv")).map_or(0, |r| r.len() as u64);
        if step >= 6 && logged > step {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the kill"
        );
        assert!(
            begun.elapsed() < Duration::from_secs(120),
            "no checkpoint came"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = read_events(&out.join("tb"));
    let logged_before = before["loss/train"].len();
    let o = train(&spec, &out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming from the checkpoint"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        event_files(&out.join("tb")),
        1,
        "the resumed run rewrote its file"
    );
    let after = read_events(&out.join("tb"));
    assert_eq!(
        after["loss/train"].len(),
        60,
        "was {logged_before} before the resume"
    );
    assert_matches_run(&after, &out);
}

/// The labels the tensorboard sweep's four runs are named by, before their ids.
const RUN_LABELS: [&str; 4] = [
    "small baseline seed 0 khop hops=2",
    "small baseline seed 1 khop hops=2",
    "small full seed 0 khop hops=2",
    "small full seed 1 khop hops=2",
];

/// `attnres COMMAND SWEEP --results RESULTS EXTRA...`.
fn on_sweep(command: &str, sweep: &Path, results: &Path, extra: &[&str]) -> Output {
    attnres()
        .arg(command)
        .arg(sweep)
        .arg("--results")
        .arg(results)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_sweeps_runs_are_named_and_export_rebuilds_their_scalars() {
    let tmp = TempDir::new("tb-sweep");
    let sweep = write(
        tmp.path(),
        "tbsweep.yaml",
        "name: tbsweep
data:
  corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}
model: {vocab_size: 256, context: 48}
sizes: [{name: small, d_model: 32, n_blocks: 2, n_heads: 2}]
residual: [baseline, full]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, warmup: 2, budget: {tokens: 3840}, eval_every: 5, eval_batches: 2}
",
    );
    let results = tmp.path().join("results");
    let o = on_sweep("run", &sweep, &results, &["--jobs", "2", "--threads", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let root = results.join("tbsweep").join("tensorboard");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    let live: BTreeMap<String, Scalars> = names
        .iter()
        .map(|n| (n.clone(), read_events(&root.join(n))))
        .collect();
    for name in &names {
        let (label, id) = name.rsplit_once(" (").unwrap();
        assert!(RUN_LABELS.contains(&label), "{name}");
        let run = results.join("tbsweep").join(id.trim_end_matches(')'));
        assert_matches_run(&live[name], &run);
    }
    // Rebuilt from the run folders: the same scalars (timings included), one file a run.
    let o = on_sweep(
        "export-metrics",
        &sweep,
        &results,
        &["--format", "tensorboard"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("event files of 4 runs"),
        "{}",
        stderr(&o)
    );
    for name in &names {
        assert_eq!(event_files(&root.join(name)), 1);
        let rebuilt = read_events(&root.join(name));
        let tags = |s: &Scalars| s.keys().cloned().collect::<Vec<_>>();
        assert_eq!(tags(&rebuilt), tags(&live[name]), "{name}");
        for (tag, points) in &live[name] {
            assert_eq!(&rebuilt[tag], points, "{name} {tag}");
        }
    }
    // The long table holds the same points: one row per run, step and tag.
    let o = on_sweep("export-metrics", &sweep, &results, &["--format", "jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let points: usize = live.values().flat_map(|s| s.values()).map(Vec::len).sum();
    assert_eq!(rows.len(), points);
    let first = &live[&names[0]]["loss/train"][0];
    assert!(rows.iter().any(|r| r["tag"] == "loss/train"
        && r["step"] == first.0
        && r["value"].as_f64() == Some(f64::from(first.1))
        && r["size"] == "small"));
}
