//! Failure is a state: a run that fails at run time (here its disk fills) is recorded as
//! `failed` with its message, leaves no lease or half-written file behind, shows in
//! `status`, is skipped by a plain re-run and retried by `--retry-failed` once fixed; a
//! results folder that cannot be written is refused before anything is.

#[path = "common/run.rs"]
mod run;

use std::path::{Path, PathBuf};
use std::process::Command;

use run::*;

/// A tmpfs of `size` mounted at `dir` for the test's life. Mounting needs root (CI runs as
/// root); the test fails, never skips, when it cannot mount.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("running mount");
        assert!(
            o.status.success(),
            "cannot mount a tmpfs (this test needs root): {}",
            stderr(&o)
        );
        Self(dir.to_path_buf())
    }

    fn grow(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Every file under `dir`, relative.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(
                files(&p)
                    .into_iter()
                    .map(|f| format!("{}/{f}", entry.file_name().to_string_lossy())),
            );
        } else {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// `dir`'s run is failed for a full disk at a checkpoint, and neither half-written files nor
/// its lease stayed.
fn assert_failed_clean_at_a_checkpoint(dir: &Path) {
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "failed", "{status}");
    let reason = status["reason"].as_str().unwrap();
    assert!(
        reason.contains("No space left on device") && reason.contains("checkpoint"),
        "{reason}"
    );
    let left = files(dir);
    assert!(
        !left
            .iter()
            .any(|f| f.ends_with(".tmp") || f == "lease.json" || f.starts_with("checkpoint.new")),
        "half-written files or the lease stayed: {left:?}"
    );
}

#[test]
fn a_run_whose_disk_fills_is_failed_clean_and_retried_once_fixed() {
    let tmp = TempDir::new("disk-full");
    let sweep = write(
        tmp.path(),
        "full.yaml",
        "name: full
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline]
seeds: [0]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 8000}, eval_every: 5, eval_batches: 2, checkpoint_every: 5}
",
    );
    // Room for the run's small files, not for a checkpoint (about 0.5 MB).
    let disk = SmallDisk::mount(&tmp.path().join("disk"), "160k");
    let results = disk.0.clone();
    let run = |extra: &[&str]| {
        attnres()
            .arg("run")
            .arg(&sweep)
            .arg("--results")
            .arg(&results)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failure at run time exits 1: {out}"
    );
    assert!(out.contains("No space left on device"), "{out}");
    // The files already there are intact: nothing may call them damaged.
    assert!(!out.contains("damaged"), "{out}");
    for line in out.lines() {
        assert!(
            line.matches("No space left on device").count() <= 1,
            "an error printed twice in one line: {line}"
        );
    }
    let dir = std::fs::read_dir(results.join("full"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("spec.json").exists())
        .expect("a run folder");
    assert_failed_clean_at_a_checkpoint(&dir);
    let o = attnres()
        .arg("status")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("failed"),
        "status shows the failure: {shown}"
    );
    // A plain re-run leaves it alone and says how to retry.
    let o = run(&[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("--retry-failed"), "{out}");
    assert!(!dir.join("summary.json").exists());
    // Fixed, it retries and finishes.
    disk.grow("64m");
    let o = run(&["--retry-failed"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "done", "{status}");
    assert!(dir.join("summary.json").is_file());
}

/// A results folder on a read-only mount, or a file given as one, is refused by `plan` and
/// `run` before anything is written, naming the folder and the reason, with exit 2.
#[test]
fn a_results_folder_that_cannot_be_written_is_refused_at_plan() {
    let tmp = TempDir::new("read-only");
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/smoke.yaml");
    let disk = SmallDisk::mount(&tmp.path().join("ro"), "1m");
    let o = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&disk.0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let afile = write(tmp.path(), "afile", "");
    for (results, says) in [
        (disk.0.join("results"), "Read-only file system"),
        (afile.join("results"), "is not a folder"),
    ] {
        for command in ["plan", "run"] {
            let o = attnres()
                .arg(command)
                .arg(&sweep)
                .arg("--results")
                .arg(&results)
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{command}: {err}");
            assert!(
                err.contains(&format!("--results {}", results.display())) && err.contains(says),
                "{command}: {err}"
            );
        }
    }
    assert!(std::fs::read_dir(&disk.0).unwrap().next().is_none());
}
