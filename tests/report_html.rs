//! `attnres report` on a finished sweep: the figures exist, the Markdown links them, and
//! report.html loads in headless Chromium with every figure decoded.

#[path = "common/run.rs"]
mod run;

use std::path::Path;
use std::process::Command;

use run::*;

const SWEEP: &str = "name: rep
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}
model: {context: 48, head_dim: 16}
sizes: [nano, {name: wide, d_model: 48, n_blocks: 2}, {name: wider, d_model: 64, n_blocks: 2}]
residual: [baseline, full, {variant: block}]
block_size: [2, 4]
seeds: [0, 1]
budgets: [{tokens: 3000}, {tokens: 6000}, {tokens: 12000}]
grid: {zip: [[size, budget]]}
train: {batch_size: 8, lr: 0.004, budget: {tokens: 6000}, eval_every: 5, eval_batches: 2, checkpoint_every: 0}
";

/// The DOM of `html` after Chromium ran its scripts (headless, a fresh profile in
/// `profile`, up to 10 s of virtual time).
fn chromium_dom(html: &Path, profile: &Path) -> String {
    let chromium = which_chromium()
        .expect("chromium is not installed: run `make setup` (Debian package `chromium`)");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=10000", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_report_renders_every_figure_in_chromium() {
    let tmp = TempDir::new("report");
    let sweep = write(tmp.path(), "rep.yaml", SWEEP);
    let results = tmp.path().join("results");
    let dir = train_and_report(tmp.path(), &sweep, 200).join("rep");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for fig in [
        "scaling",
        "multiplier",
        "training_curves",
        "layers",
        "blocks",
        "block_size",
        "depth_attention",
    ] {
        assert!(
            dir.join("figures").join(format!("{fig}.png")).is_file(),
            "missing {fig}.png"
        );
        assert!(
            dir.join("figures").join(format!("{fig}.svg")).is_file(),
            "missing {fig}.svg"
        );
        assert!(
            md.contains(&format!("figures/{fig}.png")),
            "report.md does not show {fig}"
        );
    }
    assert!(dir.join("fits.json").is_file());
    assert!(
        md.contains("Scaling fits and compute multipliers") && md.contains("block S=2"),
        "{md}"
    );

    // Several sweeps side by side (here the same one twice).
    let o = attnres()
        .arg("compare")
        .arg(&sweep)
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .args(["--resamples", "100"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{table}{}", stderr(&o));
    assert!(
        table.contains("rep: multiplier [95%]")
            && table.contains("block S=4")
            && table.contains("reference"),
        "{table}"
    );

    let html = dir.join("report.html");
    let text = std::fs::read_to_string(&html).unwrap();
    let figures: usize = attr(&text, "data-figures").parse().unwrap();
    assert!(figures >= 7, "{figures} figures");
    assert!(
        !text.contains("src=\"figures/"),
        "report.html must be self-contained"
    );
    let dom = chromium_dom(&html, &tmp.path().join("chromium-profile"));
    assert!(dom.contains("<h1>attnres sweep"), "the page did not load");
    let loaded: usize = attr(&dom, "data-figures-loaded").parse().unwrap_or(0);
    assert_eq!(
        loaded, figures,
        "only {loaded} of {figures} figures rendered"
    );
}

/// Trains `sweep` into `root/results` (two jobs) and reports it into `root/reports`, which
/// it returns.
fn train_and_report(
    root: &std::path::Path,
    sweep: &std::path::Path,
    resamples: u32,
) -> std::path::PathBuf {
    let (results, reports) = (root.join("results"), root.join("reports"));
    let o = attnres()
        .arg("run")
        .arg(sweep)
        .arg("--results")
        .arg(&results)
        .args(["--jobs", "2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = attnres()
        .arg("report")
        .arg(sweep)
        .arg("--results")
        .arg(&results)
        .arg("--reports")
        .arg(&reports)
        .args(["--resamples", &resamples.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", stderr(&o));
    reports
}

fn attr<'a>(text: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    let start = text.find(&key).map(|i| i + key.len()).unwrap_or(0);
    let end = text[start..].find('"').map(|i| start + i).unwrap_or(start);
    &text[start..end]
}

fn which_chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from)
}

/// A sweep over tasks (k-hop at 1 and 2 hops): the report compares answer accuracy per
/// task, draws it against hops, and fits no scaling law across tasks.
#[test]
fn a_sweep_over_tasks_reports_accuracy_against_difficulty() {
    let tmp = TempDir::new("probes");
    let sweep = write(
        tmp.path(),
        "probes.yaml",
        "name: probes
data: {tokenizer: byte}
tasks:
  - {synthetic: {task: khop, hops: 1, n_vars: 5, train_examples: 1000, val_examples: 64}}
  - {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 1000, val_examples: 64}}
model: {context: 32, head_dim: 16}
sizes: [nano]
residual: [baseline, full, {variant: full, value_residual: true}]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.004, budget: {tokens: 3000}, eval_every: 5, eval_batches: 2, checkpoint_every: 0}
",
    );
    let results = tmp.path().join("results");
    let o = attnres()
        .arg("plan")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{plan}{}", stderr(&o));
    assert!(
        plan.contains("total: 12 runs")
            && plan.contains("khop hops=2")
            && plan.contains("full value_residual"),
        "{plan}"
    );
    let dir = train_and_report(tmp.path(), &sweep, 50).join("probes");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(dir.join("figures/probe_accuracy.png").is_file(), "{md}");
    assert!(md.contains("figures/probe_accuracy.png"), "{md}");
    assert!(
        md.contains("Reasoning probes") && md.contains("khop (nano)"),
        "{md}"
    );
    assert!(!md.contains("Scaling fits"), "a fit across tasks: {md}");
    // One row per (arm, hops): 3 arms x 2 difficulties, each with its two seeds.
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| khop (nano) |"))
        .count();
    assert_eq!(rows, 6, "{md}");
    assert!(md.contains("4 comparisons"), "{md}");
    // A scaling law across tasks is refused, with the reason.
    let o = attnres()
        .arg("fit")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not comparable across tasks"),
        "{}",
        stderr(&o)
    );
}
