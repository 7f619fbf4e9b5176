//! `--executor slurm` on a real one-node Slurm cluster (slurmctld and slurmd started here by
//! scripts/setup-slurm.sh, stopped by pid at the end): a sweep's runs train exactly once with
//! the losses of a local run, bit for bit; a task signalled with USR1 checkpoints, requeues
//! itself and finishes with the same loss; so does a hard-cancelled one submitted again; and
//! two submissions of one sweep never train a run twice. If Slurm cannot start, this fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[path = "common/slurm_cluster.rs"]
mod slurm_cluster;

use slurm_cluster::{BIN, Cluster, wait_queue_empty};

/// Run folders of sweep `name` under `results`.
fn run_dirs(results: &Path, name: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results.join(name))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.join("spec.json").exists())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn done(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("status.json")).is_ok_and(|s| s.contains("\"done\""))
}

/// Waits until `n` runs of the sweep are done, releasing requeued tasks from their two-minute
/// hold 5 s after they appear: released at once, slurmd can still be tearing down the killed
/// attempt and refuses the new one ("Job credential revoked"), which fails the task.
fn wait_done(cluster: &Cluster, results: &Path, name: &str, n: usize) {
    let start = Instant::now();
    let mut held_since: std::collections::HashMap<String, Instant> = Default::default();
    loop {
        let finished = run_dirs(results, name).iter().filter(|d| done(d)).count();
        if finished >= n {
            return;
        }
        let queue = cluster
            .cmd("squeue")
            .args(["-h", "-r", "-o", "%i %r"])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&queue.stdout).lines() {
            if let Some((task, "BeginTime")) = line.split_once(' ') {
                let since = *held_since
                    .entry(task.to_string())
                    .or_insert_with(Instant::now);
                if since.elapsed() < Duration::from_secs(5) {
                    continue;
                }
                let _ = cluster
                    .cmd("scontrol")
                    .args(["update", &format!("jobid={task}"), "StartTime=now"])
                    .status();
            }
        }
        if start.elapsed() > Duration::from_secs(300) {
            let logs: String = std::fs::read_dir(results.join(name).join("logs"))
                .map(|d| {
                    d.map(|e| {
                        let p = e.unwrap().path();
                        format!(
                            "== {}\n{}",
                            p.display(),
                            std::fs::read_to_string(&p).unwrap_or_default()
                        )
                    })
                    .collect()
                })
                .unwrap_or_default();
            let status: Vec<String> = run_dirs(results, name)
                .iter()
                .map(|d| std::fs::read_to_string(d.join("status.json")).unwrap_or_default())
                .collect();
            panic!(
                "{finished}/{n} runs of {} done after 300 s; queue:\n{}\nstatus: {status:?}\nlogs:\n{logs}",
                results.display(),
                String::from_utf8_lossy(&queue.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Every logged column but the timings, per step.
fn losses(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("steps.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').take(6).collect::<Vec<_>>().join(","))
        .collect()
}

fn same_losses(a: &Path, b: &Path, name: &str) {
    let (da, db) = (run_dirs(a, name), run_dirs(b, name));
    assert!(
        !da.is_empty() && da.len() == db.len(),
        "{} vs {} runs",
        da.len(),
        db.len()
    );
    for (x, y) in da.iter().zip(&db) {
        assert_eq!(x.file_name(), y.file_name());
        assert_eq!(
            losses(x),
            losses(y),
            "{} differs from the local run",
            x.display()
        );
    }
}

/// Steps logged so far by the one run of `name`.
fn steps_logged(results: &Path, name: &str) -> usize {
    run_dirs(results, name)
        .first()
        .and_then(|d| std::fs::read_to_string(d.join("steps.csv")).ok())
        .map_or(0, |s| s.lines().count().saturating_sub(1))
}

fn wait_steps(results: &Path, name: &str, at_least: usize) {
    let start = Instant::now();
    while steps_logged(results, name) < at_least {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the run never reached step {at_least}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const LONG: &str = "name: long
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 32}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [full]
seeds: [0]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 150000}, eval_every: 50, eval_batches: 1, checkpoint_every: 40}
";

/// Steps in LONG's run: 150,000 tokens are 3,125 sequences of 48, in steps of 8 (the last
/// holds 5).
const LONG_STEPS: u64 = 391;

/// The step a task log says its run resumed from.
fn resumed_from(log: &str) -> u64 {
    let said = "resuming from the checkpoint at step ";
    let at = log
        .find(said)
        .unwrap_or_else(|| panic!("no resume in:\n{log}"));
    log[at + said.len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step after '{said}' in:\n{log}"))
}

/// The array job id of the sweep's latest submission.
fn last_job(results: &Path, name: &str) -> String {
    let jobs = std::fs::read_to_string(results.join(name).join("slurm/jobs.txt")).unwrap();
    jobs.lines()
        .last()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

/// USR1 (as before a time limit): checkpoint, requeue, resume, the same losses as the
/// local run in `tmp/long-local`.
fn requeued_on_usr1(cluster: &Cluster, tmp: &Path, long: &Path) {
    let r = |name: &str| tmp.join(name);
    cluster.submit(long, &r("usr1"));
    wait_steps(&r("usr1"), "long", 60);
    let job = last_job(&r("usr1"), "long");
    cluster.run(
        "scancel",
        &["--signal=USR1", "--batch", &format!("{job}_0")],
    );
    wait_done(cluster, &r("usr1"), "long", 1);
    let log = std::fs::read_to_string(r("usr1").join(format!("long/logs/{job}_0.log"))).unwrap();
    assert!(
        log.contains("checkpointed") && log.contains("requeued"),
        "{log}"
    );
    let from = resumed_from(&log);
    assert!(
        (60..LONG_STEPS).contains(&from),
        "resumed from {from}:\n{log}"
    );
    same_losses(&r("usr1"), &r("long-local"), "long");
}

/// A hard scancel: the task dies; submitting again resumes from the checkpoint that
/// `status` showed, leaving the rows logged up to it as they were.
fn resumed_after_a_hard_cancel(cluster: &Cluster, tmp: &Path, long: &Path) {
    let r = |name: &str| tmp.join(name);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    cluster.submit(long, &r("hard"));
    wait_steps(&r("hard"), "long", 100);
    cluster.run("scancel", &[&last_job(&r("hard"), "long")]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !done(&run_dirs(&r("hard"), "long")[0]),
        "the run finished before it was cancelled"
    );
    // `status` shows the stopped run at its checkpoint's step, where it will resume.
    let run = run_dirs(&r("hard"), "long")[0].clone();
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("status.json")).unwrap()).unwrap();
    let checkpoint = status["step"].as_u64().unwrap();
    let shown = cluster.attnres(&["status", &s(long), "--results", &s(&r("hard"))]);
    assert!(
        shown.contains("partial") && shown.contains(&format!(" {checkpoint}/{LONG_STEPS} ")),
        "expected partial at {checkpoint}/{LONG_STEPS}:\n{shown}"
    );
    // The rows up to the checkpoint stay as they were (wall times included): a resume that
    // started over would rewrite them.
    let logged = std::fs::read_to_string(run.join("steps.csv")).unwrap();
    cluster.submit(long, &r("hard"));
    wait_done(cluster, &r("hard"), "long", 1);
    let job = last_job(&r("hard"), "long");
    let log = std::fs::read_to_string(r("hard").join(format!("long/logs/{job}_0.log"))).unwrap();
    let from = resumed_from(&log);
    assert!(
        (80..LONG_STEPS).contains(&from),
        "resumed from {from}:\n{log}"
    );
    assert_eq!(
        from, checkpoint,
        "status showed another step than the resume's"
    );
    let rows = |t: &str| {
        t.lines()
            .take(from as usize + 1)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let after = std::fs::read_to_string(run.join("steps.csv")).unwrap();
    assert_eq!(
        rows(&after),
        rows(&logged),
        "rows up to step {from} were rewritten"
    );
    same_losses(&r("hard"), &r("long-local"), "long");
}

/// The same sweep submitted twice at once: every run trained by exactly one task.
fn submitted_twice_trains_each_run_once(cluster: &Cluster, tmp: &Path, smoke: &Path) {
    let r = |name: &str| tmp.join(name);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    for _ in 0..2 {
        cluster.submit(smoke, &r("twice"));
    }
    wait_done(cluster, &r("twice"), "smoke", 12);
    // Let the second submission's tasks finish too (they find their runs busy or done).
    wait_queue_empty(cluster);
    let logs: String = std::fs::read_dir(r("twice").join("smoke/logs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for dir in run_dirs(&r("twice"), "smoke") {
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        let trained = logs
            .lines()
            .filter(|l| l.starts_with(&format!("task: {id}")) && l.contains("trained"))
            .count();
        assert_eq!(trained, 1, "run {id} trained {trained} times:\n{logs}");
    }
    same_losses(&r("twice"), &r("local"), "smoke");
    // Nothing is left to cancel, and `cancel` says so rather than naming the jobs again.
    let cancel = cluster.attnres(&["cancel", &s(smoke), "--results", &s(&r("twice"))]);
    assert!(cancel.contains("nothing queued or running"), "{cancel}");
}

/// Two submissions in the same second with different filters: a manifest each, a line
/// each in jobs.txt, and every run of both trained.
fn same_second_submissions_keep_their_own_manifests(cluster: &Cluster, tmp: &Path, smoke: &Path) {
    let r = |name: &str| tmp.join(name);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let submit = |seed: &str| {
        cluster
            .cmd(BIN)
            .args(["run", &s(smoke), "--executor", "slurm", "--results"])
            .arg(r("filters"))
            .args(["--filter", &format!("seed={seed}")])
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (submit("0"), submit("1"));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    let jobs = std::fs::read_to_string(r("filters").join("smoke/slurm/jobs.txt")).unwrap();
    let manifests: std::collections::BTreeSet<&str> =
        jobs.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(jobs.lines().count(), 2, "{jobs}");
    assert_eq!(
        manifests.len(),
        2,
        "two submissions shared a manifest:\n{jobs}"
    );
    wait_done(cluster, &r("filters"), "smoke", 12);
    same_losses(&r("filters"), &r("local"), "smoke");
}

#[test]
fn sweeps_train_on_slurm_exactly_once_and_survive_signals() {
    let tmp = TempDir::new().unwrap();
    let cluster = Cluster::start(&tmp.path().join("cluster"));
    let r = |name: &str| tmp.path().join(name);
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // 1. The smoke sweep: 12 runs, two arrays under MaxArraySize = 11, equal to a local run.
    let smoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/smoke.yaml");
    let out = cluster.submit(&smoke, &r("slurm"));
    assert_eq!(out.matches("submitted job array").count(), 2, "{out}");
    cluster.attnres(&[
        "run",
        &s(&smoke),
        "--results",
        &s(&r("local")),
        "--threads",
        "1",
    ]);
    wait_done(&cluster, &r("slurm"), "smoke", 12);
    same_losses(&r("slurm"), &r("local"), "smoke");
    let status = cluster.attnres(&["status", &s(&smoke), "--results", &s(&r("slurm"))]);
    assert!(status.contains("12 done"), "{status}");

    let long = tmp.path().join("long.yaml");
    std::fs::write(&long, LONG).unwrap();
    cluster.attnres(&[
        "run",
        &s(&long),
        "--results",
        &s(&r("long-local")),
        "--threads",
        "1",
    ]);
    requeued_on_usr1(&cluster, tmp.path(), &long);
    resumed_after_a_hard_cancel(&cluster, tmp.path(), &long);
    submitted_twice_trains_each_run_once(&cluster, tmp.path(), &smoke);
    same_second_submissions_keep_their_own_manifests(&cluster, tmp.path(), &smoke);

    // 5. --dry-run shows the arrays a submission would make: two under MaxArraySize = 11.
    let dry = cluster.attnres(&[
        "run",
        &s(&smoke),
        "--executor",
        "slurm",
        "--dry-run",
        "--results",
        &s(&r("dry")),
    ]);
    assert_eq!(dry.matches("(not written: --dry-run)").count(), 2, "{dry}");
}
