//! A run killed with SIGKILL at any point and then resumed ends with exactly the losses of
//! an uninterrupted run.

#[path = "common/run.rs"]
mod run;

use std::time::{Duration, Instant};

use run::*;

#[test]
fn killed_and_resumed_runs_match_an_uninterrupted_run() {
    let tmp = TempDir::new("resume");
    let spec = write(
        tmp.path(),
        "spec.yaml",
        &tiny_spec("{variant: block, block_size: 2}", 24, ""),
    );
    let train = |out: &std::path::Path| {
        let mut c = attnres();
        c.arg("train")
            .arg(&spec)
            .arg("--out")
            .arg(out)
            .arg("--threads")
            .arg("2");
        c
    };
    let reference = tmp.path().join("reference");
    let started = Instant::now();
    let o = train(&reference).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let full = started.elapsed();
    let expected = loss_columns(&reference);

    // Kill points spread over the whole run (start-up, mid-step, mid-checkpoint, near the
    // end), two kills in a row for the same folder, then a clean finish.
    for (i, fractions) in [[0.05, 0.5], [0.3, 0.9], [0.7, 0.95]].iter().enumerate() {
        let out = tmp.path().join(format!("killed{i}"));
        for &f in fractions {
            let mut child = train(&out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + full.mul_f64(f);
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = child.kill(); // SIGKILL on Unix
            let _ = child.wait();
        }
        let o = train(&out).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(loss_columns(&out), expected, "kill points {fractions:?}");
    }
}
