//! The Slurm executor (docs/slurm.md): the runs of a sweep that are not done become job
//! arrays, chunked to the cluster's `MaxArraySize`, each task running `attnres task` on one
//! run id from a manifest. Run folders stay the truth; `squeue` is only a hint of what is
//! queued or running where. A task that gets `USR1` (a time limit or preemption, by
//! `--signal=B:USR1@120`) checkpoints after its current step and requeues itself; the
//! requeued task resumes from the checkpoint.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};

use super::one_run::{RunOutcome, train_leased};
use crate::spec::{PlannedRun, Sweep};
use crate::store::{RunDir, write_atomic};
use crate::train::TrainOptions;

/// What to ask Slurm for.
#[derive(Debug, Clone)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    /// Per task, e.g. `2:00:00`.
    pub time: Option<String>,
    pub cpus_per_run: usize,
    pub gpus_per_run: usize,
    /// Tasks of one array running at once (`%K`).
    pub max_parallel: Option<usize>,
    /// `--signal` value: `B:USR1@120` sends USR1 to the batch step 120 s before the limit.
    pub signal: String,
    /// Passed to sbatch as they are, one per `#SBATCH` line.
    pub sbatch_args: Vec<String>,
    /// `cpu` or `cuda`.
    pub device: String,
    /// The backend each task trains with; None leaves the task's default.
    pub backend: Option<crate::backend::BackendKind>,
}

/// One submitted (or, dry, written) array.
#[derive(Debug, Clone)]
pub struct Array {
    pub job_id: Option<String>,
    pub manifest: PathBuf,
    pub script: String,
    pub runs: usize,
}

/// `RESULTS/NAME/slurm/`: manifests, scripts and the list of submitted jobs.
pub fn slurm_dir(results: &Path) -> PathBuf {
    results.join("slurm")
}

/// `MaxArraySize` from `scontrol show config` (array indices run 0 .. MaxArraySize - 1), or
/// Slurm's default of 1001 where it cannot be read.
pub fn max_array_size() -> usize {
    Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .ok()
        .and_then(|o| parse_max_array_size(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or(1001)
}

fn parse_max_array_size(config: &str) -> Option<usize> {
    config
        .lines()
        .find(|l| l.trim_start().starts_with("MaxArraySize"))?
        .split('=')
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// Chunks of at most `max_array_size` runs: one array each (indices 0 .. len - 1).
pub fn chunks<'a>(runs: &'a [&'a PlannedRun], max_array_size: usize) -> Vec<&'a [&'a PlannedRun]> {
    runs.chunks(max_array_size.max(1)).collect()
}

/// The batch script of one array.
pub fn batch_script(
    sweep: &Sweep,
    results: &Path,
    manifest: &Path,
    tasks: usize,
    opts: &SlurmOptions,
    exe: &Path,
) -> String {
    let root = results.join(&sweep.file.name);
    let mut lines = vec![
        "#!/bin/bash".to_string(),
        format!("#SBATCH --job-name=attnres-{}", sweep.file.name),
        format!(
            "#SBATCH --array=0-{}{}",
            tasks.saturating_sub(1),
            opts.max_parallel
                .map(|k| format!("%{k}"))
                .unwrap_or_default()
        ),
        format!("#SBATCH --output={}/logs/%A_%a.log", root.display()),
        "#SBATCH --open-mode=append".into(),
        format!("#SBATCH --signal={}", opts.signal),
        "#SBATCH --requeue".into(),
        "#SBATCH --ntasks=1".into(),
        format!("#SBATCH --cpus-per-task={}", opts.cpus_per_run),
        // Only what attnres needs travels: no blind copy of the caller's environment.
        "#SBATCH --export=NONE".into(),
    ];
    if opts.gpus_per_run > 0 {
        lines.push(format!("#SBATCH --gpus-per-task={}", opts.gpus_per_run));
    }
    if let Some(p) = &opts.partition {
        lines.push(format!("#SBATCH --partition={p}"));
    }
    if let Some(t) = &opts.time {
        lines.push(format!("#SBATCH --time={t}"));
    }
    lines.extend(opts.sbatch_args.iter().map(|a| format!("#SBATCH {a}")));
    lines.push(String::new());
    lines.push("export PATH=/usr/local/bin:/usr/bin:/bin".into());
    if let Some(conf) = std::env::var_os("SLURM_CONF") {
        lines.push(format!("export SLURM_CONF={}", conf.to_string_lossy()));
    }
    lines.push(format!(
        "export ATTNRES_CACHE={}",
        crate::data::cache::cache_dir().display()
    ));
    lines.push(format!("export OMP_NUM_THREADS={}", opts.cpus_per_run));
    // With --gpus-per-task Slurm sets CUDA_VISIBLE_DEVICES to the task's own GPUs, so the
    // task's `cuda` is its first GPU.
    lines.push(
        format!(
            "exec {} task {} --results {} --manifest {} --threads {} --device {}",
            exe.display(),
            sweep
                .path
                .canonicalize()
                .unwrap_or(sweep.path.clone())
                .display(),
            results.display(),
            manifest.display(),
            opts.cpus_per_run,
            opts.device
        ) + &opts
            .backend
            .map(|b| format!(" --backend {}", b.name()))
            .unwrap_or_default(),
    );
    lines.join("\n") + "\n"
}

/// Writes one manifest and script per array and submits them (unless `dry`); records the
/// job ids in `slurm/jobs.txt`.
pub fn submit(
    sweep: &Sweep,
    results_root: &Path,
    runs: &[&PlannedRun],
    opts: &SlurmOptions,
    dry: bool,
) -> anyhow::Result<Vec<Array>> {
    let results = std::path::absolute(results_root).context("resolving --results")?;
    let root = results.join(&sweep.file.name);
    let dir = slurm_dir(&root);
    let exe = std::env::current_exe().context("locating the attnres binary")?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let limit = max_array_size();
    let mut arrays = Vec::new();
    for (k, chunk) in chunks(runs, limit).into_iter().enumerate() {
        let stem = format!("array-{stamp}-{}-{k}", std::process::id());
        let mut manifest = dir.join(format!("{stem}.txt"));
        let mut job_id = None;
        if !dry {
            std::fs::create_dir_all(root.join("logs"))?;
            std::fs::create_dir_all(&dir)?;
            manifest = reserve(&dir, &stem)?;
            let ids: String = chunk.iter().map(|r| format!("{}\n", r.id)).collect();
            write_atomic(&manifest, ids.as_bytes())?;
        }
        let script = batch_script(sweep, &results, &manifest, chunk.len(), opts, &exe);
        if !dry {
            let script_path = manifest.with_extension("sh");
            write_atomic(&script_path, script.as_bytes())?;
            let out = Command::new("sbatch")
                .arg("--parsable")
                .arg(&script_path)
                .output()
                .context("running sbatch (is Slurm installed and SLURM_CONF set?)")?;
            if !out.status.success() {
                bail!(
                    "sbatch refused {}: {}",
                    script_path.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let id = String::from_utf8_lossy(&out.stdout)
                .trim()
                .split(';')
                .next()
                .unwrap_or_default()
                .to_string();
            append_job(
                &dir.join("jobs.txt"),
                &format!("{id} {}\n", manifest.display()),
            )?;
            job_id = Some(id);
        }
        arrays.push(Array {
            job_id,
            manifest,
            script,
            runs: chunk.len(),
        });
    }
    Ok(arrays)
}

/// A new manifest `DIR/STEM.txt` (or `STEM-N.txt` where that is taken), created here and
/// nowhere else: two submissions never share one, even within a second.
fn reserve(dir: &Path, stem: &str) -> anyhow::Result<PathBuf> {
    for n in 0.. {
        let name = match n {
            0 => format!("{stem}.txt"),
            n => format!("{stem}-{n}.txt"),
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }
    unreachable!("the loop returns")
}

/// Appends `line` to `jobs.txt` under an exclusive `flock`, in one write: submissions at
/// the same moment each add their line.
fn append_job(path: &Path, line: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; released when `file` closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", path.display()));
    }
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("appending to {}", path.display()))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// One array task: trains run `index` of `manifest`. On USR1 it checkpoints after the current
/// step and requeues itself (`scontrol requeue JOB_TASK`), so the task starts again and
/// resumes. Returns the outcome.
pub fn run_task(
    sweep: &Sweep,
    results_root: &Path,
    manifest: &Path,
    index: usize,
    opts: &TrainOptions,
) -> anyhow::Result<RunOutcome> {
    let ids = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading the manifest {}", manifest.display()))?;
    let id = ids
        .lines()
        .nth(index)
        .with_context(|| format!("{} has no run at index {index}", manifest.display()))?;
    let run = sweep
        .runs
        .iter()
        .find(|r| r.id == id)
        .with_context(|| format!("run {id} is not in {}", sweep.path.display()))?;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
    }
    let flag = Arc::new(AtomicBool::new(false));
    let watcher = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            while !STOP.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            flag.store(true, Ordering::SeqCst);
        })
    };
    drop(watcher);
    let train = TrainOptions {
        stop: Some(flag),
        ..opts.clone()
    };
    let dir = RunDir::new(results_root.join(&sweep.file.name).join(&run.id));
    let outcome = train_leased(run, &dir, &train);
    eprintln!(
        "task: {} {}: {}",
        run.id,
        run.arm,
        super::outcome_text(&outcome)
    );
    if matches!(outcome, RunOutcome::Stopped(_)) {
        requeue()?;
    }
    Ok(outcome)
}

/// Puts this array task back in the queue (`scontrol requeue JOB_TASK`, not the job id of the
/// task, which names one task only on some versions).
fn requeue() -> anyhow::Result<()> {
    let (Ok(job), Ok(task)) = (
        std::env::var("SLURM_ARRAY_JOB_ID"),
        std::env::var("SLURM_ARRAY_TASK_ID"),
    ) else {
        bail!("stopped outside a Slurm array task: run it again to resume");
    };
    let target = format!("{job}_{task}");
    // slurmctld can refuse a requeue for a moment (a busy controller); try a few times.
    let mut last = String::new();
    for attempt in 0..5 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        let out = Command::new("scontrol")
            .args(["requeue", &target])
            .output()
            .context("running scontrol requeue")?;
        if out.status.success() {
            last.clear();
            break;
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
        eprintln!(
            "task: scontrol requeue {target} failed (attempt {}): {last}",
            attempt + 1
        );
    }
    if !last.is_empty() {
        bail!(
            "scontrol requeue {target}: {last}; the run is checkpointed, submit the sweep again to resume"
        );
    }
    eprintln!("task: requeued {target}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_max_array_size() {
        let config =
            "Configuration data as of ...\nMaxArraySize            = 11\nMaxJobCount = 10000\n";
        assert_eq!(parse_max_array_size(config), Some(11));
        assert_eq!(parse_max_array_size("nothing"), None);
    }
}
