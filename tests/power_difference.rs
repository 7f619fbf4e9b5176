//! `attnres power --difference`: on a one-size sweep (the committed block_size runs), the
//! seeds to detect a 0.02-nat difference follow from the paired-difference noise worked out
//! here from the runs' summaries, independently of the planner's own loading.

#[path = "common/run.rs"]
mod run;

use std::collections::BTreeMap;
use std::path::Path;

use attnres::analysis::power::seeds_at_size;
use run::*;

#[test]
fn a_one_size_sweep_is_planned_for_a_loss_difference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // (arm, seed) -> final validation loss (these runs predate the whole-split one).
    let mut loss: BTreeMap<(String, u64), f64> = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("results/reference/block_size")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("summary.json")) else {
            continue;
        };
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("spec.json")).unwrap()).unwrap();
        let arm = summary["label"].as_str().unwrap().to_string();
        let seed = spec["seed"].as_u64().unwrap();
        loss.insert((arm, seed), summary["loss_val"].as_f64().unwrap());
    }
    // Pooled SD of arm - baseline over seeds, over the six arms.
    let (mut ss, mut df, mut arms) = (0.0, 0, 0);
    let names: Vec<String> = loss.keys().map(|(a, _)| a.clone()).collect();
    let mut names: Vec<String> = names.into_iter().filter(|a| a != "baseline").collect();
    names.dedup();
    for arm in &names {
        let d: Vec<f64> = (0..3)
            .map(|s| loss[&(arm.clone(), s)] - loss[&("baseline".to_string(), s)])
            .collect();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        ss += d.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        df += d.len() - 1;
        arms += 1;
    }
    assert_eq!((arms, df), (6, 12));
    let sd = (ss / df as f64).sqrt();
    let seeds = seeds_at_size(0.02, sd).expect("a count within the planner's range");

    // `power` on the committed block_size results, with `extra` options.
    let power = |extra: &[&str]| {
        attnres()
            .current_dir(root)
            .args([
                "power",
                "sweeps/block_size.yaml",
                "--results",
                "results/reference",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = power(&["--difference", "0.02"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let noise = format!("noise: {sd:.4} nats per paired difference, pooled over 6 arm(s) (12 df");
    assert!(out.contains(&noise), "expected `{noise}` in:\n{out}");
    assert!(
        out.contains(&format!("seeds: {seeds} (power")),
        "{seeds} seeds in:\n{out}"
    );
    for arm in &names {
        assert!(out.contains(arm.as_str()), "{arm}'s own noise in:\n{out}");
    }

    // A multiplier option is refused beside it, and so is a difference of nothing.
    let o = power(&["--difference", "0.02", "--multiplier", "1.1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Negative numbers reach the checks, which say what is wrong with them.
    for (flag, value) in [
        ("--difference", "0"),
        ("--difference", "-0.02"),
        ("--sigma", "-1"),
    ] {
        let extra = match flag {
            "--sigma" => vec!["--difference", "0.02", flag, value],
            _ => vec![flag, value],
        };
        let o = power(&extra);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let want = format!("{flag} {value}:");
        assert!(stderr(&o).contains(&want), "`{want}` in {}", stderr(&o));
    }
}
