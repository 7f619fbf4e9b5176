//! The command line's less travelled flags, end to end: `--filter`, `--dry-run`,
//! `--retry-failed`, `model --json`, `budget: {flops}`, a missing GPU, foreign leases and
//! bf16. Each trains seconds-long synthetic runs in a temporary folder.

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};

use cli::*;
use tempfile::TempDir;

#[test]
fn filter_selects_runs_and_dry_run_trains_nothing() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let (s, results) = (sweep.to_str().unwrap(), tmp.path().join("results"));
    let r = results.to_str().unwrap();
    let plan = ok(&["plan", s, "--results", r, "--filter", "variant=full"]);
    assert!(plan.contains("total: 2 runs"), "{plan}");
    assert!(!plan.contains("baseline"), "{plan}");
    let dry = ok(&["run", s, "--results", r, "--dry-run", "--filter", "seed=1"]);
    assert!(dry.contains("total: 2 runs"), "{dry}");
    assert!(!results.exists(), "--dry-run wrote {}", results.display());
    ok(&[
        "run",
        s,
        "--results",
        r,
        "--threads",
        "1",
        "--filter",
        "variant=full",
        "--filter",
        "seed=0",
    ]);
    assert_eq!(run_ids(&results).len(), 1, "one run matches both filters");
}

/// A failed run is skipped by `run` and trained again by `run --retry-failed`.
#[test]
fn retry_failed_trains_a_failed_run_again() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let (s, results) = (sweep.to_str().unwrap(), tmp.path().join("results"));
    let r = results.to_str().unwrap();
    let filter = ["--filter", "variant=baseline", "--filter", "seed=0"];
    attnres()
        .args(["run", s, "--results", r, "--threads", "1"])
        .args(filter)
        .assert()
        .success();
    let id = run_ids(&results).pop().expect("a run folder");
    let status = results.join("tiny").join(&id).join("status.json");
    std::fs::write(
        &status,
        r#"{"state":"failed","step":3,"reason":"made up by the test"}"#,
    )
    .unwrap();
    let again = attnres()
        .args(["run", s, "--results", r])
        .args(filter)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&again.get_output().stdout).into_owned();
    assert!(text.contains("1 failed before"), "{text}");
    attnres()
        .args(["run", s, "--results", r, "--threads", "1", "--retry-failed"])
        .args(filter)
        .assert()
        .success();
    let now = std::fs::read_to_string(&status).unwrap();
    assert!(now.contains("\"done\""), "{now}");
}

#[test]
fn model_json_has_counts_per_variant() {
    let out = ok(&[
        "model",
        "--d-model",
        "64",
        "--n-blocks",
        "2",
        "--residual",
        "baseline,full",
        "--json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().expect("a list");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["label"], "baseline", "{out}");
    assert_eq!(rows[1]["label"], "full", "{out}");
    // By hand: d = 64, SwiGLU hidden 2.667 * 64 rounded up to a multiple of 8 = 176; per
    // block 4d² of attention, 3·d·176 of MLP and two RMSNorm gains; a final norm.
    let d = 64u64;
    let per_block = 4 * d * d + 3 * d * 176 + 2 * d;
    let count = |i: usize, key: &str| rows[i]["params"][key].as_u64().unwrap();
    assert_eq!(count(0, "non_embedding"), 2 * per_block + d, "{out}");
    assert_eq!(count(0, "embedding"), 256 * d);
    assert_eq!(count(0, "head"), 256 * d);
    assert_eq!(count(0, "residual"), 0);
    // Full AttnRes: a pseudo-query and a key-norm gain (2d) for each of the 4 sublayers'
    // inputs and the final output.
    assert_eq!(count(1, "residual"), 5 * 2 * d, "{out}");
    assert_eq!(
        count(1, "non_embedding"),
        count(0, "non_embedding") + 5 * 2 * d
    );
}

/// A FLOP budget becomes the tokens that spend it, in whole sequences: the training FLOPs
/// per token are counted here by hand, apart from the code that plans.
#[test]
fn flops_budget_is_spent_in_tokens() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("flops.yaml");
    std::fs::write(
        &path,
        TINY.replace("budget: {tokens: 4000}", "budget: {flops: 1.0e11}"),
    )
    .unwrap();
    let plan = ok(&[
        "plan",
        path.to_str().unwrap(),
        "--results",
        tmp.path().join("r").to_str().unwrap(),
    ]);
    // nano: d = 32, 2 blocks (4 sublayers), SwiGLU hidden 88, T = 48, vocabulary 256.
    // Forward per token: matrices 2·(4d² + 3·d·88) per block, attention 4Td per attention
    // layer, head 2dV; Full AttnRes adds 4d for each (mixing step, source) pair: 5 steps
    // (4 sublayer inputs and the output) over 1 + 2 + 3 + 4 + 5 = 15 pairs.
    let (d, t, v) = (32u64, 48u64, 256u64);
    let baseline = 2 * 2 * (4 * d * d + 3 * d * 88) + 2 * 4 * t * d + 2 * d * v;
    let full = baseline + 15 * 4 * d;
    for (arm, forward) in [("baseline", baseline), ("full", full)] {
        let training = 3 * forward;
        let tokens = (1e11 / training as f64 / t as f64).floor() as u64 * t;
        let row = plan
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(arm))
            .unwrap_or_else(|| panic!("no {arm} row in:\n{plan}"));
        let words: Vec<String> = row.split_whitespace().map(|w| w.replace(',', "")).collect();
        assert!(
            words.contains(&tokens.to_string()),
            "{arm}: expected {tokens} tokens ({training} FLOPs per token) in:\n{row}"
        );
    }
}

/// A GPU that is not there is refused before anything is written: `cuda:64` on any machine,
/// and plain `cuda` on one without a GPU.
#[test]
fn a_missing_gpu_is_refused_at_plan_and_run() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let results = tmp.path().join("results");
    let mut devices = vec!["cuda:64"];
    if !std::path::Path::new("/dev/nvidia0").exists() {
        devices.push("cuda");
    }
    for (cmd, device) in ["plan", "run"]
        .into_iter()
        .flat_map(|c| devices.iter().map(move |d| (c, *d)))
    {
        let out = attnres()
            .args([
                cmd,
                sweep.to_str().unwrap(),
                "--results",
                results.to_str().unwrap(),
                "--device",
                device,
            ])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            err.contains(&format!("--device {device}")) && err.contains("not available"),
            "{cmd} {device}: {err}"
        );
    }
    assert!(
        !results.exists(),
        "refused runs wrote {}",
        results.display()
    );
}

/// `lease.json` as another host's runner writes it, its heartbeat `age_s` seconds old.
fn foreign_lease(age_s: u64) -> String {
    let at = humantime::format_rfc3339_seconds(
        std::time::SystemTime::now() - std::time::Duration::from_secs(age_s),
    );
    format!(
        r#"{{"host": "node-elsewhere", "pid": 4242, "job": null, "token": "00000000000000ab",
            "acquired": "{at}", "heartbeat": "{at}"}}"#
    )
}

#[test]
fn a_run_leased_by_a_live_host_is_skipped_and_a_silent_hosts_lease_is_taken_over() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let (s, results) = (sweep.to_str().unwrap(), tmp.path().join("results"));
    let r = results.to_str().unwrap();
    let plan = ok(&[
        "plan",
        s,
        "--results",
        r,
        "--filter",
        "variant=full",
        "--filter",
        "seed=0",
    ]);
    let id = plan
        .lines()
        .find(|l| l.contains(" full "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no full run in {plan}"))
        .to_string();
    let run_dir = results.join("tiny").join(&id);
    std::fs::create_dir_all(&run_dir).unwrap();
    let lease = run_dir.join("lease.json");
    std::fs::write(&lease, foreign_lease(5)).unwrap();
    let args = ["run", s, "--results", r, "--threads", "1", "--filter"];
    let filter = format!("id={id}");
    let out = attnres()
        .args(args)
        .arg(&filter)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("skipped: trained by host node-elsewhere pid 4242, heartbeat"),
        "{out}"
    );
    // It says how to follow the other process, with the results folder in the command.
    assert!(
        out.contains("1 run(s) are training in another process")
            && out.contains(&format!("`attnres status {s} --results {r}`")),
        "{out}"
    );
    assert!(
        !run_dir.join("steps.csv").exists(),
        "a leased run was trained"
    );
    let status = ok(&["status", s, "--results", r]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("running")),
        "{status}"
    );
    // The other host fell silent 10 minutes ago: its lease is stale, and the run is ours.
    std::fs::write(&lease, foreign_lease(600)).unwrap();
    let out = ok(&[&args[..], &[filter.as_str()]].concat());
    assert!(out.contains("1 trained"), "{out}");
    assert!(run_dir.join("summary.json").exists());
    assert!(!lease.exists(), "the lease is released after training");
}

/// The one run folder of sweep `name` under `results` (beside it: `tensorboard/`).
fn only_run(results: &Path, name: &str) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(results.join(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("spec.json").exists())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The tiny sweep with 100 steps, long enough to learn a nat or two, in f32 and in bf16
/// (`tiny.yaml`, `tiny-bf16.yaml` in `dir`).
fn f32_and_bf16_sweeps(dir: &Path) -> (PathBuf, PathBuf) {
    let longer = TINY.replace("tokens: 4000", "tokens: 40000");
    let f32_sweep = dir.join("tiny.yaml");
    std::fs::write(&f32_sweep, &longer).unwrap();
    let bf16_sweep = dir.join("tiny-bf16.yaml");
    let text = longer
        .replace("name: tiny", "name: tiny-bf16")
        .replace("eval_batches: 1}", "eval_batches: 1, precision: bf16}");
    std::fs::write(&bf16_sweep, text).unwrap();
    (f32_sweep, bf16_sweep)
}

#[test]
fn bf16_runs_keep_half_the_bytes_and_still_learn() {
    let tmp = TempDir::new().unwrap();
    let (f32_sweep, bf16_sweep) = f32_and_bf16_sweeps(tmp.path());
    let results = tmp.path().join("results");
    let r = results.to_str().unwrap();
    for sweep in [&f32_sweep, &bf16_sweep] {
        let s = sweep.to_str().unwrap();
        let args = [
            "run",
            s,
            "--results",
            r,
            "--threads",
            "1",
            "--backend",
            "tch",
        ];
        let filters = ["--filter", "variant=baseline", "--filter", "seed=0"];
        ok(&[&args[..], &filters[..]].concat());
    }
    let (f32_run, bf16_run) = (only_run(&results, "tiny"), only_run(&results, "tiny-bf16"));
    let bytes = |run: &Path| {
        std::fs::metadata(run.join("checkpoint/model.bpk"))
            .unwrap()
            .len()
    };
    let ratio = bytes(&bf16_run) as f64 / bytes(&f32_run) as f64;
    assert!(
        (0.45..0.55).contains(&ratio),
        "bf16 / f32 weights: {ratio:.3}"
    );
    let spec = |run: &Path| std::fs::read_to_string(run.join("spec.json")).unwrap();
    assert!(spec(&bf16_run).contains(r#""precision": "bf16""#));
    assert!(
        !spec(&f32_run).contains("precision"),
        "f32 run ids are unchanged"
    );
    let losses: Vec<f64> = std::fs::read_to_string(bf16_run.join("steps.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap().parse().unwrap())
        .collect();
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    assert!(
        last < first - 1.0,
        "bf16 training did not learn: {first} -> {last}"
    );
    // Its checkpoint loads back for scoring (in bf16, the precision it trained in).
    let text = tmp.path().join("probe.txt");
    std::fs::write(&text, "a=1;b=a;c=b;c?1 x=2;y=x;y?2").unwrap();
    let scored = ok(&["score", bf16_run.to_str().unwrap(), text.to_str().unwrap()]);
    assert!(scored.contains("bits/byte"), "{scored}");
}

/// flex trains in f32 only: a bf16 sweep is refused with exit 2 before anything is written.
#[test]
fn bf16_sweeps_are_refused_by_flex() {
    let tmp = TempDir::new().unwrap();
    let (_, bf16_sweep) = f32_and_bf16_sweeps(tmp.path());
    let elsewhere = tmp.path().join("flex-results");
    let out = attnres()
        .args([
            "run",
            bf16_sweep.to_str().unwrap(),
            "--backend",
            "flex",
            "--results",
        ])
        .arg(&elsewhere)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(
        err.contains("trains in bf16, which only the tch backend does"),
        "{err}"
    );
    assert!(
        !elsewhere.exists(),
        "a refused run wrote {}",
        elsewhere.display()
    );
}
