//! Inputs that would do nothing, or the wrong thing, are refused with exit 2 and a message
//! naming the flag or file, before anything is written; inputs that only look odd are read.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use run::*;

fn smoke() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/smoke.yaml")
}

#[test]
fn a_filter_that_selects_nothing_is_refused_before_anything_is_written() {
    let tmp = TempDir::new("filter-nothing");
    for (filters, expect) in [
        (vec!["size=nosuch"], "its size values are nano, nano2"),
        (vec!["seed=abc"], "its seed values are 0, 1"),
        (vec!["size=nano2", "id=ffffffffff"], "matches no run"),
    ] {
        for command in ["plan", "run", "status"] {
            let mut cmd = attnres();
            cmd.arg(command)
                .arg(smoke())
                .arg("--results")
                .arg(tmp.path());
            for f in &filters {
                cmd.args(["--filter", f]);
            }
            let out = cmd.output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command} {filters:?}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains(expect),
                "{command} {filters:?}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).contains("--filter"), "{}", stderr(&out));
        }
    }
    let written: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(written.is_empty(), "refused commands wrote {written:?}");
    // Together: each matches something, both at once nothing.
    let out = attnres()
        .arg("plan")
        .arg(smoke())
        .args(["--filter", "size=nano", "--filter", "size=nano2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("together match no run"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn cancel_refuses_a_filter_it_cannot_apply() {
    let out = attnres()
        .arg("cancel")
        .arg(smoke())
        .args(["--filter", "seed=0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--filter seed=0"), "{}", stderr(&out));
}

#[test]
fn a_sweep_saved_with_a_byte_order_mark_plans_like_one_without() {
    let tmp = TempDir::new("bom");
    let text = std::fs::read(smoke()).unwrap();
    let with_bom = tmp.path().join("smoke.yaml");
    std::fs::write(&with_bom, [b"\xef\xbb\xbf".as_slice(), &text].concat()).unwrap();
    let plain = attnres().arg("plan").arg(smoke()).output().unwrap();
    let bom = attnres().arg("plan").arg(&with_bom).output().unwrap();
    assert!(bom.status.success(), "{}", stderr(&bom));
    assert_eq!(
        String::from_utf8_lossy(&bom.stdout).replace(&with_bom.display().to_string(), "X"),
        String::from_utf8_lossy(&plain.stdout).replace(&smoke().display().to_string(), "X")
    );
}

#[test]
fn a_device_or_fifo_is_refused_as_a_sweep_without_reading_it() {
    let tmp = TempDir::new("fifo");
    let fifo = tmp.path().join("sweep.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for path in [Path::new("/dev/zero"), fifo.as_path()] {
        let out = attnres().arg("plan").arg(path).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {}",
            path.display(),
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("not a regular file"),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(&path.display().to_string()));
    }
}

/// A Slurm submission refuses the local options it would drop, with exit 2 and the flag's
/// name, and passes `--backend` on to its tasks.
#[test]
fn slurm_submissions_refuse_local_options_and_pass_the_backend_on() {
    let tmp = TempDir::new("slurm-options");
    let submit = |extra: &[&str]| {
        attnres()
            .arg("run")
            .arg(smoke())
            .arg("--results")
            .arg(tmp.path())
            .args(["--executor", "slurm", "--dry-run"])
            .args(extra)
            .output()
            .unwrap()
    };
    for (extra, flag) in [
        (vec!["--jobs", "2"], "--jobs"),
        (vec!["--devices", "cuda:0,cuda:1"], "--devices"),
        (vec!["--jobs-per-device", "2"], "--jobs-per-device"),
        (vec!["--threads", "7"], "--threads"),
        (vec!["--device", "cuda:5"], "--device"),
    ] {
        let out = submit(&extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("{flag} does not apply to --executor slurm")),
            "{extra:?}: {}",
            stderr(&out)
        );
    }
    let out = submit(&["--backend", "flex"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("--backend flex"), "{script}");
    let out = submit(&[]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("--backend"));
    let written: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(
        written.is_empty(),
        "dry runs and refusals wrote {written:?}"
    );
}

#[test]
fn fit_refuses_six_nd_with_points() {
    let tmp = TempDir::new("points-six-nd");
    let csv = write(
        tmp.path(),
        "points.csv",
        "arm,compute,loss\nbaseline,1e-6,2.0\nbaseline,1e-5,1.8\n",
    );
    let out = attnres()
        .arg("fit")
        .arg("--points")
        .arg(&csv)
        .arg("--six-nd")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--six-nd does not apply to --points"),
        "{}",
        stderr(&out)
    );
}

/// `train` checks a RunSpec file as a sweep checks each run: located at the file, line and
/// key, exit 2, and nothing written (no run folder, no spec.json, no step count printed).
#[test]
fn train_refuses_a_bad_runspec_where_the_fault_is_before_writing() {
    let tmp = TempDir::new("train-refusals");
    let good = tiny_spec("{variant: block, block_size: 2}", 4, "");
    for (name, text, at, says) in [
        (
            "vocab",
            good.replace("vocab_size: 256", "vocab_size: 10"),
            ":1:9: `model.vocab_size`",
            "10 is smaller than the data's vocabulary of 256",
        ),
        (
            "block",
            good.replace("block_size: 2", "block_size: 9"),
            ":1:",
            "block_size 9 exceeds the model's 4 sublayers",
        ),
        (
            "context",
            good.replace("context: 48", "context: 0"),
            "`model.context`",
            "must be at least 1, got 0",
        ),
        (
            "lr",
            good.replace("lr: 0.003", "lr: 1e309"),
            ":6:7: `train.lr`",
            "beyond the largest 64-bit float",
        ),
    ] {
        let spec = write(tmp.path(), &format!("{name}.yaml"), &text);
        let out = tmp.path().join(name);
        let o = attnres()
            .arg("train")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.starts_with(&format!("error: {}", spec.display())) && err.contains(at),
            "{name}: expected the location {at} in: {err}"
        );
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            !err.contains(" steps, "),
            "{name}: a step count was printed: {err}"
        );
        assert!(!out.exists(), "{name}: {} was written", out.display());
    }
}
