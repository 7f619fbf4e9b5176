//! How long a sweep has left, counted in FLOPs rather than runs: each unfinished run's
//! training FLOPs left, over the training speed of its size. A size's speed is measured on
//! the sweep's finished runs of that size; before any has finished, on all its finished
//! runs; before that, assumed. `plan`, the `run` bars and `watch` all use this one
//! estimate, so a sweep whose last run is its largest is not called 90% done with most of
//! its time ahead.
//!
//! Speeds are the whole machine's: a CPU's FLOPs per thread-second times its cores (all
//! busy, as a sweep keeps them), or one GPU's FLOPs per second.

use std::collections::BTreeMap;
use std::path::Path;

use crate::backend::gpu_index;
use crate::model::flops::flops_per_token;
use crate::spec::{PlannedRun, Sweep};
use crate::store::metrics::read_steps;
use crate::store::{RunDir, read_json_opt};
use crate::train::Summary;

/// Training speed of one CPU core assumed before any run of the sweep has finished (tch,
/// one 1-thread run per core, small models). A 2-core Intel Xeon trained the quick sweep at
/// 57 and the scaling sweep at 71 GFLOP/s a core (their sweep files' measured times).
pub const ASSUMED_FLOPS_PER_CORE_S: f64 = 60e9;

/// The same on one GPU: gpu-scaling's step times on one H200 in f32 (docs/gpu.md) came to
/// about 21 TFLOP/s over the sweep, its `medium` baseline run end to end to 18.5.
pub const ASSUMED_GPU_FLOPS_PER_S: f64 = 20e12;

/// The whole machine's speed assumed before any run has finished: one GPU, or all `cores`.
pub fn assumed_speed(gpu: bool, cores: usize) -> f64 {
    if gpu {
        ASSUMED_GPU_FLOPS_PER_S
    } else {
        ASSUMED_FLOPS_PER_CORE_S * cores as f64
    }
}

/// Where a speed came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The sweep's finished runs of the same size.
    Size,
    /// All the sweep's finished runs (none of this size yet).
    Sweep,
    /// No finished run yet.
    Assumed,
}

/// The speeds behind a sweep's time left.
#[derive(Debug, Clone)]
pub struct Clock {
    by_size: BTreeMap<String, f64>,
    all: Option<f64>,
    assumed: f64,
    pub gpu: bool,
    pub cores: usize,
}

impl Clock {
    /// From the summaries of `runs` that have finished in `root`, for runs on a GPU (`gpu`)
    /// or on this machine's CPU cores.
    pub fn measure(runs: &[PlannedRun], root: &Path, gpu: bool) -> Self {
        let finished: Vec<(&PlannedRun, Summary)> = runs
            .iter()
            .filter_map(|r| {
                let summary = read_json_opt(&RunDir::new(root.join(&r.id)).summary()).ok()??;
                Some((r, summary))
            })
            .collect();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::over(&finished, gpu, cores)
    }

    fn over(finished: &[(&PlannedRun, Summary)], gpu: bool, cores: usize) -> Self {
        let mut sizes: BTreeMap<String, Vec<&Summary>> = BTreeMap::new();
        for (run, summary) in finished {
            sizes.entry(run.size.clone()).or_default().push(summary);
        }
        let by_size = sizes
            .into_iter()
            .filter_map(|(size, s)| Some((size, machine_speed(s.into_iter(), cores, gpu)?)))
            .collect();
        Self {
            by_size,
            all: machine_speed(finished.iter().map(|(_, s)| s), cores, gpu),
            assumed: assumed_speed(gpu, cores),
            gpu,
            cores,
        }
    }

    /// The speed for runs of `size`, in FLOP/s, and where it came from.
    pub fn speed(&self, size: &str) -> (f64, Source) {
        match (self.by_size.get(size), self.all) {
            (Some(&s), _) => (s, Source::Size),
            (None, Some(all)) => (all, Source::Sweep),
            (None, None) => (self.assumed, Source::Assumed),
        }
    }

    /// Seconds `run` has left once `tokens_done` of its tokens are trained.
    pub fn seconds_left(&self, run: &PlannedRun, tokens_done: u64) -> f64 {
        flops_left(run, tokens_done) / self.speed(&run.size).0
    }

    /// `mini 58, tiny 61 GFLOP/s measured per size; all 2 cores busy`: the speeds behind the
    /// time left of runs of `sizes`.
    pub fn describe(&self, sizes: &[&str]) -> String {
        let mut measured = Vec::new();
        let (mut sweep, mut assumed) = (false, false);
        for size in sizes {
            match self.speed(size) {
                (s, Source::Size) => measured.push(format!("{size} {:.0}", s / 1e9)),
                (_, Source::Sweep) => sweep = true,
                (_, Source::Assumed) => assumed = true,
            }
        }
        let busy = if self.gpu {
            "on one GPU".to_string()
        } else {
            format!("all {} cores busy", self.cores)
        };
        let mut parts = Vec::new();
        if !measured.is_empty() {
            parts.push(format!("{} GFLOP/s measured per size", measured.join(", ")));
        }
        if sweep {
            parts.push(format!(
                "sizes with no finished run at {:.0} GFLOP/s measured on all finished runs",
                self.all.unwrap_or(0.0) / 1e9
            ));
        }
        if assumed {
            parts.push(format!(
                "{:.0} GFLOP/s assumed until a run finishes",
                self.assumed / 1e9
            ));
        }
        parts.push(busy);
        parts.join("; ")
    }
}

/// Keeps the sweep bar's ETA current (runner::eta): the FLOPs each unfinished run has left
/// (a training run's from its bar) over its size's speed, re-measured as runs finish.
pub(super) fn keep_bar_current<'a>(
    overall: &indicatif::ProgressBar,
    sweep: &Sweep,
    root: &std::path::Path,
    gpu: bool,
    left: impl Fn() -> Vec<&'a PlannedRun>,
    active: &std::sync::Mutex<Vec<(&PlannedRun, indicatif::ProgressBar)>>,
) {
    let started: std::collections::HashMap<&str, u64> = left()
        .into_iter()
        .map(|r| {
            (
                r.id.as_str(),
                tokens_done(r, &RunDir::new(root.join(&r.id))),
            )
        })
        .collect();
    let (mut clock, mut measured_with) = (Clock::measure(&sweep.runs, root, gpu), usize::MAX);
    loop {
        let runs = left();
        if runs.is_empty() {
            break;
        }
        if runs.len() != measured_with {
            clock = Clock::measure(&sweep.runs, root, gpu);
            measured_with = runs.len();
        }
        let training: Vec<(String, u64)> = active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(r, bar)| (r.id.clone(), bar.position() * r.spec.tokens_per_step()))
            .collect();
        let seconds: f64 = runs
            .iter()
            .map(|r| {
                let done = training
                    .iter()
                    .find(|(id, _)| *id == r.id)
                    .map_or_else(|| started.get(r.id.as_str()).copied().unwrap_or(0), |t| t.1);
                clock.seconds_left(r, done)
            })
            .sum();
        overall.set_message(format!(
            "ETA {} by FLOPs left",
            crate::fmt::duration(seconds)
        ));
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// Training FLOPs `run` has left once `tokens_done` of its tokens are trained.
pub fn flops_left(run: &PlannedRun, tokens_done: u64) -> f64 {
    let left = run.spec.total_tokens().saturating_sub(tokens_done);
    flops_per_token(&run.spec.model).training() as f64 * left as f64
}

/// Tokens a run folder has trained: all of them when done, else its last logged step's.
pub fn tokens_done(run: &PlannedRun, dir: &RunDir) -> u64 {
    if dir.summary().exists() {
        return run.spec.total_tokens();
    }
    read_steps(&dir.steps())
        .ok()
        .and_then(|rows| rows.last().map(|r| r.tokens))
        .unwrap_or(0)
}

/// The whole machine's training speed over `finished` runs: on a GPU their FLOPs over their
/// seconds; on a CPU their FLOPs per thread-second (a run of `--jobs 2` on two cores had one
/// thread) times `cores`. Only runs on the kind of device asked for count.
pub fn machine_speed<'a>(
    finished: impl Iterator<Item = &'a Summary>,
    cores: usize,
    gpu: bool,
) -> Option<f64> {
    let (mut flops, mut thread_seconds) = (0.0, 0.0);
    for s in finished {
        if s.wall_s > 0.0 && gpu_index(&s.device).is_some() == gpu {
            let threads = if gpu {
                1
            } else {
                s.threads.unwrap_or(cores).max(1)
            };
            flops += s.flops_exact;
            thread_seconds += s.wall_s * threads as f64;
        }
    }
    let busy = if gpu { 1 } else { cores };
    (thread_seconds > 0.0).then(|| flops / thread_seconds * busy as f64)
}
