//! A one-node Slurm cluster for the Slurm tests: slurmctld and slurmd started by
//! scripts/setup-slurm.sh in a folder of their own, stopped by the pids it recorded when
//! the cluster is dropped. A cluster that cannot start fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_attnres");

/// A cluster for this test; stopped (by the pids its start recorded) when dropped.
pub struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    pub fn start(dir: &Path) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup-slurm.sh");
        let out = Command::new(&script)
            .arg("start")
            .arg(dir)
            .output()
            .expect("running scripts/setup-slurm.sh");
        let cluster = Self {
            dir: dir.to_path_buf(),
        };
        assert!(
            out.status.success(),
            "Slurm could not be started here, so the Slurm executor is untested:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", self.conf());
        c
    }

    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        let out = self.cmd(program).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn attnres(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.run(BIN, args).stdout).into_owned()
    }

    /// `attnres run SWEEP --executor slurm --results RESULTS`; returns its output.
    pub fn submit(&self, sweep: &Path, results: &Path) -> String {
        let (sweep, results) = (sweep.to_str().unwrap(), results.to_str().unwrap());
        self.attnres(&["run", sweep, "--executor", "slurm", "--results", results])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup-slurm.sh");
        let _ = Command::new(script).arg("stop").arg(&self.dir).status();
    }
}

/// Waits until `squeue` lists no task.
pub fn wait_queue_empty(cluster: &Cluster) {
    let start = Instant::now();
    while !cluster
        .cmd("squeue")
        .arg("-h")
        .output()
        .unwrap()
        .stdout
        .is_empty()
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "tasks still queued"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
