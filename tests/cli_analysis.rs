//! The analysis commands on the committed reference results: `fit --e per-arm`, `--six-nd`,
//! `--baseline`, and `compare` across two sweeps.

#[path = "common/cli.rs"]
mod cli;

use std::path::Path;

use cli::*;
use tempfile::TempDir;

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
