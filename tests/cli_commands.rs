//! The command line's less travelled flags, end to end: `--filter`, `--dry-run`,
//! `--retry-failed`, `model --json`, `bench`, `fit --e per-arm`, `--six-nd`, `--baseline`,
//! `compare` across two sweeps and `budget: {flops}`. Analysis commands read the committed
//! reference results; the rest train seconds-long synthetic runs in a temporary folder.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use tempfile::TempDir;

fn attnres() -> Command {
    Command::cargo_bin("attnres").expect("the attnres binary is built")
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs `args`, expects success, returns stdout.
fn ok(args: &[&str]) -> String {
    let out = attnres()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

/// Runs `args`, expects exit 2 (bad input), returns stderr.
fn refused(args: &[&str]) -> String {
    let out = attnres()
        .args(args)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    String::from_utf8(out).unwrap()
}

const TINY: &str = "name: tiny
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 1000, val_examples: 32}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline, full]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 4000}, eval_every: 5, eval_batches: 1}
";

fn tiny_sweep(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.yaml");
    std::fs::write(&path, TINY).unwrap();
    path
}

/// The run folders of the sweep (not its copy of the sweep file).
fn run_ids(results: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(results.join("tiny"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.join("spec.json").exists())
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

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

/// A JSON array of numbers.
fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `bench` at a reference size small enough for a test: 2 timed steps.
const TINY_BENCH: [&str; 13] = [
    "bench",
    "--backend",
    "tch",
    "--steps",
    "2",
    "--d-model",
    "64",
    "--n-blocks",
    "1",
    "--context",
    "16",
    "--batch-size",
    "2",
];

#[test]
fn bench_reports_speed_and_memory_per_variant() {
    let out = ok(&TINY_BENCH);
    for variant in ["baseline", "full", "block S=4"] {
        let row = out
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
                    .starts_with(&format!("reference {variant}"))
            })
            .unwrap_or_else(|| panic!("{variant} missing:\n{out}"));
        assert!(row.contains("MB"), "no memory in: {row}");
    }
    assert!(out.contains("median of 2 interleaved samples"), "{out}");
}

/// `--against` runs every case in a second binary too (here the same one), its row's ratio
/// taken to this binary's same case; a missing binary is refused with exit 2 before any
/// child starts.
#[test]
fn bench_against_another_binary_pairs_every_case() {
    let me = env!("CARGO_BIN_EXE_attnres");
    let out = ok(&[&TINY_BENCH[..], &["--against", me, "--json"]].concat());
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rows = report["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "baseline",
            "baseline",
            "full",
            "full",
            "block S=4",
            "block S=4"
        ]
    );
    for (i, r) in rows.iter().enumerate() {
        let other = r["binary"].as_str();
        assert_eq!(other.is_some(), i % 2 == 1, "row {i}: {r}");
        assert_eq!(r["steps"], 2);
        let ratio = r["vs_baseline_median"].as_f64().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0, "row {i}: {r}");
        // Each round's ratio is this row's step over its pair's in the same round: this
        // binary's same case for an `--against` row, else the baseline.
        let paired = if i % 2 == 1 { &rows[i - 1] } else { &rows[0] };
        let (mine, theirs) = (floats(&r["step_s"]), floats(&paired["step_s"]));
        let rounds = floats(&r["vs_baseline_rounds"]);
        assert_eq!((mine.len(), rounds.len()), (2, 2), "row {i}: {r}");
        for k in 0..2 {
            let want = mine[k] / theirs[k];
            assert!(
                (rounds[k] - want).abs() <= 1e-12 * want,
                "row {i}, round {k}: {r}"
            );
        }
    }
    let err = refused(&[
        "bench",
        "--backend",
        "tch",
        "--against",
        "/nonexistent/attnres",
    ]);
    assert!(err.contains("--against /nonexistent/attnres"), "{err}");
}

/// `--processes` shares the rounds out among fresh children of every case: every row keeps
/// all its rounds, each round's ratio still paired with the baseline's same round; more
/// processes than rounds are refused with exit 2.
#[test]
fn bench_shares_its_rounds_among_fresh_processes() {
    let out = ok(&[&TINY_BENCH[..], &["--processes", "2", "--json"]].concat());
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(report["processes"], 2, "{report}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{report}");
    let base = floats(&rows[0]["step_s"]);
    for r in rows {
        assert_eq!(r["steps"], 2, "{r}");
        assert!(r["peak_bytes"].as_f64().unwrap() > 0.0, "{r}");
        let (mine, rounds) = (floats(&r["step_s"]), floats(&r["vs_baseline_rounds"]));
        for k in 0..2 {
            let want = mine[k] / base[k];
            assert!((rounds[k] - want).abs() <= 1e-12 * want, "round {k}: {r}");
        }
    }
    let text = ok(&[&TINY_BENCH[..], &["--processes", "2"]].concat());
    assert!(
        text.contains("from 2 successive processes of each case"),
        "{text}"
    );
    let err = refused(&[&TINY_BENCH[..], &["--processes", "3"]].concat());
    assert!(
        err.contains("--processes 3") && err.contains("--steps (2)"),
        "{err}"
    );
    let err = refused(&["bench", "--backend", "tch", "--steps", "0"]);
    assert!(err.contains("--steps 0"), "{err}");
}

/// A size whose cases cannot all be alive at once here is refused with exit 2 before any
/// child starts, naming the size and what to change.
#[test]
fn bench_refuses_cases_that_do_not_fit_together() {
    let err = refused(&[
        "bench",
        "--backend",
        "tch",
        "--d-model",
        "8192",
        "--n-blocks",
        "64",
        "--context",
        "8192",
        "--batch-size",
        "4096",
    ]);
    assert!(
        err.contains("size `reference`'s 3 cases need about")
            && err.contains("a smaller --batch-size"),
        "{err}"
    );
}

/// `--split` measures how a sweep should share the cores: the runner's default first (one
/// single-thread run per core, at most the sweep's runs), then each thread count dividing the
/// cores, every split's tokens/s per round and its ratio to the default's in the same round;
/// what it cannot measure is refused with exit 2 before any child starts.
#[test]
fn bench_split_measures_every_split_of_the_cores_against_the_default() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let s = sweep.to_str().unwrap();
    let split = ["bench", "--backend", "tch", "--split", "--sizes", s];
    let out = ok(&[&split[..], &["--steps", "6", "--json"]].concat());
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(report["cores"], cores);
    assert_eq!(report["runs"], 4, "the tiny sweep's runs cap the jobs");
    assert_eq!(report["sweep_tokens"], 16000.0, "4 runs of 4000 tokens");
    let rows = report["rows"].as_array().unwrap();
    let splits: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| (r["jobs"].as_u64().unwrap(), r["threads"].as_u64().unwrap()))
        .collect();
    let mut want = vec![(cores.min(4) as u64, 1)];
    for t in (2..=cores).filter(|&t| cores.is_multiple_of(t)) {
        let split = ((cores / t).min(4) as u64, t as u64);
        if !want.contains(&split) {
            want.push(split);
        }
    }
    assert_eq!(splits, want, "{out}");
    let default = floats(&rows[0]["tokens_per_s"]);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["size"], "nano", "one size: no whole-sweep rows");
        assert_eq!(r["default"], i == 0, "{r}");
        let (rates, ratios) = (floats(&r["tokens_per_s"]), floats(&r["vs_default_rounds"]));
        assert_eq!((rates.len(), ratios.len()), (6, 6), "{r}");
        for k in 0..6 {
            assert!(rates[k] > 0.0 && rates[k].is_finite(), "{r}");
            let want = rates[k] / default[k];
            assert!((ratios[k] - want).abs() <= 1e-12 * want, "round {k}: {r}");
        }
        let q = |k: &str| r[k].as_f64().unwrap();
        assert!(q("tokens_per_s_p25") <= q("tokens_per_s_median"), "{r}");
        assert!(q("tokens_per_s_median") <= q("tokens_per_s_p75"), "{r}");
        assert!(q("vs_default_ci_low") <= q("vs_default_median"), "{r}");
        assert!(q("vs_default_median") <= q("vs_default_ci_high"), "{r}");
    }
    let text = ok(&[&split[..], &["--steps", "2"]].concat());
    assert!(
        text.contains("(default)")
            && text.lines().any(|l| l.starts_with("nano: "))
            && text.contains("the sweep's 16,000 training tokens: about"),
        "a table and a verdict for the size:\n{text}"
    );
    for (flag, why) in [
        ("--inference", "it measures training"),
        ("--threads=2", "it chooses the threads per run itself"),
        ("--device=cuda:0", "it shares CPU cores"),
        ("--processes=2", "its runs keep their processes"),
    ] {
        let err = refused(&[&split[..], &[flag]].concat());
        assert!(err.contains(why), "{flag}: {err}");
    }
}

/// `--sizes` benches a sweep's own sizes and arms; `--inference` times the inference path;
/// `--json` gives every number with its spread and the ratio's interval.
#[test]
fn bench_takes_a_sweeps_sizes_and_times_inference_as_json() {
    let tmp = TempDir::new().unwrap();
    let sweep = tiny_sweep(tmp.path());
    let out = ok(&[
        "bench",
        "--backend",
        "tch",
        "--steps",
        "6",
        "--sizes",
        sweep.to_str().unwrap(),
        "--inference",
        "--batch-size",
        "1",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(report["mode"], "inference");
    // The peak is the better of its probes before and after the cases, and every MFU is
    // over it.
    let probes: Vec<f64> = report["matmul_peak_probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_f64().unwrap())
        .collect();
    let peak = report["matmul_peak_flops"].as_f64().unwrap();
    assert!(
        probes.len() == 2 && probes.iter().all(|&p| p > 0.0 && p <= peak),
        "{probes:?}"
    );
    assert!(probes.contains(&peak), "{probes:?} {peak}");
    let rows = report["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["baseline", "full"],
        "one row per arm of the sweep's one size"
    );
    for r in rows {
        assert_eq!(r["size"], "nano", "one size: no whole-sweep rows");
        assert_eq!(r["steps"], 6);
        assert_eq!(r["context"], 48);
        let q = |k: &str| r[k].as_f64().unwrap();
        assert!(q("step_s_min") <= q("step_s_p25") && q("step_s_p25") <= q("step_s_median"));
        assert!(q("step_s_median") <= q("step_s_p75") && q("step_s_p75") <= q("step_s_max"));
        assert!(q("step_s_min") > 0.0 && q("mfu") > 0.0);
        assert!(
            (q("mfu") - q("flops_per_s") / peak).abs() <= 1e-12 * q("mfu"),
            "{r}"
        );
        // Steps per sample: a nano forward of 48 tokens takes well under the 20 ms a sample
        // covers, but a test run beside others may stall it past that (so at least 1 here;
        // `child::tests` checks the count).
        assert!(r["repeats"].as_u64().unwrap() >= 1, "{r}");
        // Six rounds: the ratio's interval is its whole range, at coverage 1 - 2/64.
        let ratio = q("vs_baseline_median");
        assert!(q("vs_baseline_ci_low") <= ratio && ratio <= q("vs_baseline_ci_high"));
        assert!((q("vs_baseline_ci_coverage") - 0.96875).abs() < 1e-9, "{r}");
    }
    assert_eq!(rows[0]["vs_baseline_median"], 1.0);
}

/// Fit options change what is fitted: per-arm E, 6ND compute and another reference arm.
#[test]
fn fit_options_change_the_fit() {
    let quick = repo("sweeps/quick.yaml");
    let results = repo("results/reference");
    let tmp = TempDir::new().unwrap();
    let out = tmp.path().join("fits.json");
    let fit = |extra: &[&str]| {
        let mut args = vec![
            "fit",
            quick.to_str().unwrap(),
            "--results",
            results.to_str().unwrap(),
            "--resamples",
            "50",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let text = ok(&args);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        (text, json)
    };
    let es = |j: &serde_json::Value| -> Vec<f64> {
        j["arms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["law"]["e"].as_f64().unwrap())
            .collect()
    };
    let (shared_text, shared) = fit(&[]);
    let (per_arm_text, per_arm) = fit(&["--e", "per-arm"]);
    let (_, six_nd) = fit(&["--six-nd"]);
    let (vs_full, _) = fit(&["--baseline", "full"]);
    // One E for all arms, or one each.
    assert!(shared_text.contains(", E shared;"), "{shared_text}");
    assert!(per_arm_text.contains(", E per arm;"), "{per_arm_text}");
    let (one, each) = (es(&shared), es(&per_arm));
    assert!(one.iter().all(|e| *e == one[0]), "shared E: {one:?}");
    assert!(each.iter().any(|e| *e != each[0]), "per-arm E: {each:?}");
    // The largest compute is the largest run's FLOPs, counted exactly or as 6ND: read
    // here from the runs' own steps.csv.
    let (exact, approx) = largest_flops(&results.join("quick"));
    let pf_days = |j: &serde_json::Value| j["largest_compute"].as_f64().unwrap() * 8.64e19;
    assert!((pf_days(&shared) / exact - 1.0).abs() < 1e-9, "{shared}");
    assert!((pf_days(&six_nd) / approx - 1.0).abs() < 1e-9, "{six_nd}");
    assert!(approx < exact * 0.9);
    assert!(
        vs_full.contains("multipliers vs full") && vs_full.contains("arm - full"),
        "{vs_full}"
    );
    assert!(
        vs_full.lines().any(|l| l.starts_with("baseline ")),
        "the old baseline is now an arm:\n{vs_full}"
    );
    attnres()
        .args([
            "fit",
            quick.to_str().unwrap(),
            "--results",
            results.to_str().unwrap(),
            "--baseline",
            "nosuch",
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .code(2);
}

/// The largest last-step `flops_exact` and `flops_6nd` over a sweep's run folders.
fn largest_flops(sweep: &Path) -> (f64, f64) {
    let mut most = (0.0f64, 0.0f64);
    for entry in std::fs::read_dir(sweep).unwrap() {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path().join("steps.csv")) else {
            continue;
        };
        let last: Vec<f64> = text
            .lines()
            .last()
            .unwrap()
            .split(',')
            .map(|f| f.parse().unwrap_or(f64::NAN))
            .collect();
        // step,tokens,lr,loss/train,loss/val,acc/val,flops_exact,flops_6nd,...
        most = (most.0.max(last[6]), most.1.max(last[7]));
    }
    most
}

/// `compare` puts each sweep's multiplier (as `fit` finds it) and its largest size's loss
/// (the mean over seeds of each run's final validation) side by side.
#[test]
fn compare_two_sweeps_side_by_side() {
    let results = repo("results/reference");
    let scaling = repo("sweeps/scaling.yaml");
    let args = ["--results", results.to_str().unwrap(), "--resamples", "50"];
    let quick = repo("sweeps/quick.yaml");
    let mut compare = vec![
        "compare",
        quick.to_str().unwrap(),
        scaling.to_str().unwrap(),
    ];
    compare.extend_from_slice(&args);
    let compare = ok(&compare);
    let tmp = TempDir::new().unwrap();
    let out = tmp.path().join("fits.json");
    let mut fit = vec![
        "fit",
        scaling.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    fit.extend_from_slice(&args);
    let fit = ok(&fit);
    let header = compare.lines().next().unwrap();
    assert!(
        header.contains("quick: multiplier") && header.contains("scaling: multiplier"),
        "{compare}"
    );
    let (loss, n) = largest_size_loss(&results.join("scaling"), "block S=2");
    for (arm, quoted) in [("full", None), ("block S=2", Some((loss, n)))] {
        let row = |text: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{arm} ")))
                .unwrap_or_else(|| panic!("no {arm} row in:\n{text}"))
                .to_string()
        };
        // fit: "block S=2  A α E  1.181x  [1.07, 1.32] ±0.02 ..."; compare: "1.181 [1.07, 1.32]".
        let fit_row = row(&fit);
        let words: Vec<&str> = fit_row.split_whitespace().collect();
        let at = words.iter().position(|w| w.ends_with('x')).unwrap();
        let said = format!(
            "{} {} {}",
            words[at].trim_end_matches('x'),
            words[at + 1],
            words[at + 2]
        );
        assert!(row(&compare).contains(&said), "'{said}' not in:\n{compare}");
        if let Some((loss, n)) = quoted {
            let said = format!("{loss:.4} ± ");
            let seeds = format!("(n={n})");
            let line = row(&compare);
            assert!(
                line.contains(&said) && line.contains(&seeds),
                "{said}..{seeds} not in {line}"
            );
        }
    }
}

/// The mean final validation loss of `arm`'s runs at the sweep's largest size (most
/// parameters), and how many runs that is.
fn largest_size_loss(sweep: &Path, arm: &str) -> (f64, usize) {
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(sweep).unwrap() {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path().join("summary.json")) else {
            continue;
        };
        let s: serde_json::Value = serde_json::from_str(&text).unwrap();
        if s["label"] == arm {
            let params = s["params"]["total"].as_u64().unwrap();
            runs.push((params, s["final_val"]["loss"].as_f64().unwrap()));
        }
    }
    let largest = runs.iter().map(|r| r.0).max().unwrap();
    let losses: Vec<f64> = runs
        .iter()
        .filter(|r| r.0 == largest)
        .map(|r| r.1)
        .collect();
    (
        losses.iter().sum::<f64>() / losses.len() as f64,
        losses.len(),
    )
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

#[test]
fn bf16_runs_keep_half_the_bytes_still_learn_and_are_refused_by_flex() {
    let tmp = TempDir::new().unwrap();
    // 100 steps, long enough to learn a nat or two.
    let longer = TINY.replace("tokens: 4000", "tokens: 40000");
    let f32_sweep = tmp.path().join("tiny.yaml");
    std::fs::write(&f32_sweep, &longer).unwrap();
    let bf16_sweep = tmp.path().join("tiny-bf16.yaml");
    let text = longer
        .replace("name: tiny", "name: tiny-bf16")
        .replace("eval_batches: 1}", "eval_batches: 1, precision: bf16}");
    std::fs::write(&bf16_sweep, text).unwrap();
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
