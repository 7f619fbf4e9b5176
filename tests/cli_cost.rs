//! `attnres cost` reproduces the report's systems numbers, and `plan` shows and checks each
//! run's training memory.

#[path = "common/run.rs"]
mod run;

use run::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn table1_and_the_prefill_example() {
    let o = attnres()
        .args(["cost", "--report-table1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for total in ["total 3d", "total 34d + 48", "total 24d", "total 5.5d"] {
        assert!(out.contains(total), "`{total}` missing from:\n{out}");
    }
    assert!(
        out.contains(
            "15.0 GB whole, 1.88 GB per device sharded, 235 MB per device with 16K chunks"
        ),
        "{out}"
    );
}

/// The report's pipeline claim for a Kimi-sized layout: without caching the peak per link
/// is V - 1/P times the cached one by Eqs. 7-8, and at least V counted exactly.
#[test]
fn pipeline_communication_with_and_without_caching() {
    let o = attnres()
        .args([
            "cost",
            "--d-model",
            "7168",
            "--n-blocks",
            "27",
            "--block-size",
            "6",
        ])
        .args(["--pp", "8", "--virtual-stages", "4", "--context", "4096"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("without caching (Eq. 7)"), "{out}");
    assert!(out.contains("with cross-stage caching (Eq. 8)"), "{out}");
    let ratios = out
        .lines()
        .find(|l| l.starts_with("peak per link"))
        .expect("a peak ratio line");
    assert!(ratios.contains("3.875x by Eqs. 7-8"), "{ratios}");
    let counted: f64 = ratios
        .split(", ")
        .last()
        .and_then(|s| s.trim_end_matches("x counted").parse().ok())
        .expect("a counted ratio");
    assert!(counted >= 4.0, "{ratios}");
}

#[test]
fn bad_cost_flags_exit_2() {
    for args in [
        vec!["cost", "--dtype", "f16x"],
        vec![
            "cost",
            "--n-blocks",
            "4",
            "--pp",
            "8",
            "--virtual-stages",
            "2",
        ],
        vec!["cost", "--block-size", "0"],
    ] {
        let o = attnres().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn plan_shows_each_runs_memory() {
    let sweep = concat!(env!("CARGO_MANIFEST_DIR"), "/sweeps/smoke.yaml");
    let tmp = TempDir::new("plan-memory");
    let o = attnres()
        .args(["plan", sweep, "--results"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let header = out
        .lines()
        .find(|l| l.starts_with("id "))
        .expect("a header");
    assert!(header.contains("memory"), "{header}");
    let rows = out.lines().filter(|l| l.contains(" MB ")).count();
    assert_eq!(rows, 12, "every run has an estimate in MB:\n{out}");
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "plan wrote something"
    );
}
