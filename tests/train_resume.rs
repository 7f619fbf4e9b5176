//! A run killed with SIGKILL at any point and then resumed ends with exactly the losses of
//! an uninterrupted run.

#[path = "common/run.rs"]
mod run;

use std::time::{Duration, Instant};

use run::*;

#[test]
fn killed_and_resumed_runs_match_an_uninterrupted_run() {
    // Kill points spread over the whole run (start-up, mid-step, mid-checkpoint, near the
    // end), two kills in a row for the same folder, then a clean finish.
    killed_and_resumed("resume", "", &[[0.05, 0.5], [0.3, 0.9], [0.7, 0.95]]);
}

/// bf16 weights and Adam moments go through the checkpoint as they are: the resumed run is
/// the uninterrupted one, bit for bit.
#[test]
fn killed_and_resumed_bf16_runs_match_an_uninterrupted_run() {
    killed_and_resumed("resume-bf16", "  precision: bf16\n", &[[0.4, 0.8]]);
}

fn killed_and_resumed(name: &str, extra_train: &str, kills: &[[f64; 2]]) {
    let tmp = TempDir::new(name);
    let spec = write(
        tmp.path(),
        "spec.yaml",
        &tiny_spec("{variant: block, block_size: 2}", 24, extra_train),
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

    for (i, fractions) in kills.iter().enumerate() {
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
