//! `attnres bench` end to end: speed and memory per variant, `--against` another binary,
//! rounds shared among fresh processes, `--split` and `--sizes` with `--inference`.

#[path = "common/cli.rs"]
mod cli;

use cli::*;
use tempfile::TempDir;

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
