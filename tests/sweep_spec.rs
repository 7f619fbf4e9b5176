//! Sweep files: every malformed file under tests/sweeps/bad gets the error it deserves
//! (exit 2 from `plan` and from `run`, nothing written), and expansion order is pinned.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use attnres::spec::Sweep;
use run::*;

/// Each bad file states what its error must say (`# expect: ...`) and, optionally, where
/// (`# at: LINE:COL`).
#[test]
fn every_malformed_sweep_gets_a_clear_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sweeps/bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 20, "only {} malformed sweeps", files.len());
    let tmp = TempDir::new("bad-sweeps");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let expects: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .collect();
        assert!(
            !expects.is_empty(),
            "{} states no expected message",
            file.display()
        );
        let results = tmp.path().join("results");
        let o = attnres()
            .arg("plan")
            .arg(&file)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", file.display());
        assert!(
            err.starts_with(&format!("error: {}:", file.display())),
            "{}: error does not name the file: {err}",
            file.display()
        );
        for e in &expects {
            assert!(
                err.contains(e),
                "{}: expected `{e}` in: {err}",
                file.display()
            );
        }
        if let Some(at) = text.lines().find_map(|l| l.strip_prefix("# at: ")) {
            assert!(
                err.contains(&format!(":{at}:")),
                "{}: expected location {at} in: {err}",
                file.display()
            );
        } else {
            let located = err
                .split(':')
                .nth(2)
                .is_some_and(|line| line.trim().parse::<usize>().is_ok());
            assert!(located, "{}: no line number in: {err}", file.display());
        }
        // `run` must refuse it the same way, before anything is written.
        let o = attnres()
            .arg("run")
            .arg(&file)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "run {}: {}",
            file.display(),
            stderr(&o)
        );
        assert!(
            !results.exists(),
            "{}: `run` on an invalid sweep wrote {}",
            file.display(),
            results.display()
        );
    }
}

const GRID: &str = "name: order
data: {corpus: {synthetic: {task: mqar}}}
model: {context: 64, head_dim: 16}
sizes: [nano, {name: wide, d_model: 64, n_blocks: 2}]
residual: [baseline, {variant: block}, denseformer]
block_size: [2, 4]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, budget: {tokens_per_param: 2}}
grid:
  exclude:
    - {variant: denseformer, seed: 1}
    - {size: wide, block_size: 4}
";

#[test]
fn expansion_order_is_pinned() {
    let sweep = Sweep::parse(Path::new("order.yaml"), GRID).unwrap();
    let got: Vec<String> = sweep
        .runs
        .iter()
        .map(|r| format!("{} {} {}", r.size, r.arm, r.seed))
        .collect();
    let want = [
        "nano baseline 0",
        "nano baseline 1",
        "nano block S=2 0",
        "nano block S=2 1",
        "nano block S=4 0",
        "nano block S=4 1",
        "nano denseformer 0",
        "wide baseline 0",
        "wide baseline 1",
        "wide block S=2 0",
        "wide block S=2 1",
        "wide denseformer 0",
    ];
    assert_eq!(got, want);
    // Run ids are a hash of the resolved spec: stable across loads, distinct across runs.
    let again = Sweep::parse(Path::new("order.yaml"), GRID).unwrap();
    let ids: Vec<&str> = sweep.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        again.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
    );
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    assert!(
        ids.iter()
            .all(|id| id.len() == 10 && id.chars().all(|c| c.is_ascii_hexdigit()))
    );
    // tokens_per_param scales the budget with each size's non-embedding parameters.
    let nano = &sweep.runs[0].spec;
    let wide = &sweep.runs[7].spec;
    assert!(wide.total_tokens() > 2 * nano.total_tokens());
}

#[test]
fn zip_pairs_axes_and_lr_rules_follow_size() {
    let text = GRID.replace(
        "grid:\n  exclude:\n    - {variant: denseformer, seed: 1}\n    - {size: wide, block_size: 4}\n",
        "budgets: [{tokens: 1000}, {tokens: 3000}]\nlr: {rule: {base: 0.004, ref_params: 25000, exponent: -0.5}}\ngrid:\n  zip: [[size, budget]]\n",
    );
    let sweep = Sweep::parse(Path::new("zip.yaml"), &text).unwrap();
    assert_eq!(sweep.runs.len(), 2 * 4 * 2);
    for run in &sweep.runs {
        let tokens = run.spec.total_tokens();
        match run.size.as_str() {
            "nano" => assert!(tokens <= 1000 && tokens > 900, "{tokens}"),
            _ => assert!(tokens <= 3000 && tokens > 2900, "{tokens}"),
        }
    }
    let lr = |size: &str| {
        sweep
            .runs
            .iter()
            .find(|r| r.size == size)
            .unwrap()
            .spec
            .train
            .lr
    };
    assert!(
        lr("wide") < lr("nano"),
        "a larger model gets a smaller learning rate"
    );
}

/// `tasks` is the outermost axis: each task's runs in the usual order under ids of their
/// own; the value residual makes an arm of its own, and is left out of the canonical form
/// when off, so the run ids of earlier sweeps do not move.
#[test]
fn tasks_are_the_outermost_axis() {
    let text = "name: t
data: {}
tasks:
  - {synthetic: {task: khop, hops: 1, n_vars: 5}}
  - {synthetic: {task: mqar, pairs: 4, queries: 2}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline, {variant: baseline, value_residual: true}]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 4000}}
";
    let sweep = Sweep::parse(Path::new("t.yaml"), text).unwrap();
    let got: Vec<String> = sweep
        .runs
        .iter()
        .map(|r| format!("{} / {} {}", r.task(), r.arm, r.seed))
        .collect();
    let want = [
        "khop hops=1 / baseline 0",
        "khop hops=1 / baseline 1",
        "khop hops=1 / baseline value_residual 0",
        "khop hops=1 / baseline value_residual 1",
        "mqar pairs=4 / baseline 0",
        "mqar pairs=4 / baseline 1",
        "mqar pairs=4 / baseline value_residual 0",
        "mqar pairs=4 / baseline value_residual 1",
    ];
    assert_eq!(got, want);
    let mut ids: Vec<&str> = sweep.runs.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
    let plain = serde_json::to_string(&sweep.runs[0].spec).unwrap();
    assert!(!plain.contains("value_residual"), "{plain}");
    let with = serde_json::to_string(&sweep.runs[2].spec).unwrap();
    assert!(with.contains(r#""value_residual":true"#), "{with}");
}
