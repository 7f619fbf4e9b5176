//! `attnres bench --split`: how a sweep should share this machine's CPU cores between runs
//! trained at once (`--jobs`) and threads per run (`--threads`), measured on the sweep's
//! own sizes and arms rather than assumed.
//!
//! Each split `J x T` (`J` runs of `T` threads; `T` divides the cores, `J` at most the
//! sweep's runs, as the runner caps it) gets `J` jobs, each a child process per arm of the
//! size, all with `T` threads. A window starts every job at once; each job steps its arms in
//! turn (each request an untimed step then a timed sample, `child.rs`) until the window's
//! deadline, and its throughput is the tokens of its timed samples that ended before the
//! deadline over their seconds, so that every counted sample ran while all `J` jobs did.
//! The split's throughput in that window is the sum over its jobs. The splits take turns,
//! round after round (in reverse order every other round, and each round starting the jobs
//! on the next arm), so that a noisy host's drift hits them alike; each split's ratio to the
//! runner's default (one single-thread run per core, `runner::capacity::default_jobs`) is
//! taken round by round, with a distribution-free interval for its median (`report.rs`).

mod report;

use std::time::{Duration, Instant};

use anyhow::Context;

use self::report::{SplitReport, SplitRow, print_split, row};
use super::child::{Case, Child};
use super::{BenchArgs, InputError, backends, check_memory};
use crate::backend::{self, BackendKind};
use crate::spec::Sweep;

/// Runs trained at once and threads per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Split {
    pub(super) jobs: usize,
    pub(super) threads: usize,
}

/// The splits worth measuring on `cores` cores for a sweep of `runs` runs: the runner's
/// default first (one single-thread run per core, at most `runs`), then every `T > 1` that
/// divides the cores, with `cores / T` runs (at most `runs`); each once.
fn splits(cores: usize, runs: usize) -> Vec<Split> {
    let (jobs, _) = crate::runner::capacity::default_jobs("cpu", None, cores, runs);
    let mut out = vec![Split { jobs, threads: 1 }];
    for threads in (2..=cores).filter(|&t| cores.is_multiple_of(t)) {
        let split = Split {
            jobs: (cores / threads).clamp(1, runs.max(1)),
            threads,
        };
        if !out.contains(&split) {
            out.push(split);
        }
    }
    out
}

/// `bench --split`: every split at every size (`groups`, the sizes' cases; `sweep`, the
/// sweep they come from, if any), per backend, as a table or JSON.
pub(super) fn run(
    args: &BenchArgs,
    sweep: Option<&Sweep>,
    groups: &[Vec<Case>],
) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs = sweep.map(|s| s.runs.len());
    // Each size's training tokens in the sweep, in the order of `groups`.
    let tokens: Option<Vec<f64>> = sweep.map(|sweep| {
        groups
            .iter()
            .map(|cases| {
                let size = &cases[0].size;
                let runs = sweep.runs.iter().filter(|r| &r.size == size);
                runs.map(|r| r.spec.budget_tokens()).sum()
            })
            .collect()
    });
    let splits = splits(cores, runs.unwrap_or(usize::MAX));
    let children: usize = splits.iter().map(|s| s.jobs).sum();
    for cases in groups {
        check_memory(args, cases, children)?;
    }
    for backend in backends(args) {
        let mut rows = Vec::new();
        for cases in groups {
            rows.extend(
                measure_size(args, backend, cases, &splits)
                    .with_context(|| format!("measuring the splits at size {}", cases[0].size))?,
            );
        }
        if let Some(tokens) = tokens.as_ref().filter(|t| t.len() > 1) {
            let whole = whole_sweep(&rows, &splits, tokens);
            rows.extend(whole);
        }
        let report = SplitReport {
            machine: backend::cpu_model(),
            cores,
            backend: backend.name().into(),
            precision: args.precision.name(),
            rounds: args.steps,
            runs,
            sweep_tokens: tokens.as_ref().map(|t| t.iter().sum()),
            rows,
        };
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print_split(&report);
        }
    }
    Ok(())
}

/// Refuses what `--split` cannot measure, before any child starts.
pub(super) fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    let refuse = |what: &str| Err(InputError::flag("bench --split", what).into());
    if args.inference {
        return refuse("it measures training; drop --inference");
    }
    if args.against.is_some() {
        return refuse("it compares splits of one build; drop --against");
    }
    if args.threads.is_some() {
        return refuse("it chooses the threads per run itself; drop --threads");
    }
    if args.processes != 1 {
        return refuse("its runs keep their processes for all rounds; drop --processes");
    }
    if crate::backend::gpu_index(&args.device).is_some() {
        return refuse(&format!(
            "it shares CPU cores; on {} the runner trains one run at a time \
             (--jobs-per-device shares a GPU); drop --device",
            args.device
        ));
    }
    Ok(())
}

/// The children of one split at one size: `[job][arm]`.
type Jobs = Vec<Vec<Child>>;

/// Measures every split at one size (`cases`: its arms), `args.steps` rounds after one
/// warm-up round.
fn measure_size(
    args: &BenchArgs,
    backend: BackendKind,
    cases: &[Case],
    splits: &[Split],
) -> anyhow::Result<Vec<SplitRow>> {
    let mut wanted = Vec::new();
    for split in splits {
        for _ in 0..split.jobs {
            for case in cases {
                let case = Case {
                    threads: Some(split.threads),
                    ..case.clone()
                };
                wanted.push((case, None));
            }
        }
    }
    // All of them started at once, then dealt out split by split, job by job.
    let mut started = Child::spawn_all(backend, &args.device, wanted, None)?.into_iter();
    let mut children: Vec<Jobs> = splits
        .iter()
        .map(|split| {
            (0..split.jobs)
                .map(|_| started.by_ref().take(cases.len()).collect())
                .collect()
        })
        .collect();
    // The warm-up round: every job steps each of its arms once, and the slowest job's time
    // sets the split's window.
    let mut windows = Vec::new();
    for jobs in &mut children {
        let (_, slowest) = window(jobs, None, 0)?;
        windows.push(slowest.mul_f64(1.5));
    }
    let mut tokens_per_s = vec![Vec::with_capacity(args.steps); splits.len()];
    for round in 0..args.steps {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..splits.len()).collect()
        } else {
            (0..splits.len()).rev().collect()
        };
        for s in order {
            let (rate, _) = window(&mut children[s], Some(windows[s]), round)?;
            tokens_per_s[s].push(rate);
        }
    }
    for jobs in children {
        for child in jobs.into_iter().flatten() {
            child.end()?;
        }
    }
    Ok(splits
        .iter()
        .zip(&tokens_per_s)
        .enumerate()
        .map(|(s, (split, rates))| row(&cases[0].size, *split, s == 0, rates, &tokens_per_s[0]))
        .collect())
}

/// The whole sweep's row per split, from the sizes' rows (`rows`, size after size, each with
/// every split in `splits`' order) and each size's training tokens in the sweep (`tokens`,
/// in the same order of sizes): in each round, the sweep's tokens over the time its sizes'
/// tokens take at that round's tokens/s, an estimate that leaves out the sweep's tail, where
/// fewer runs than jobs are left, and its evaluations and checkpoints.
fn whole_sweep(rows: &[SplitRow], splits: &[Split], tokens: &[f64]) -> Vec<SplitRow> {
    let total: f64 = tokens.iter().sum();
    let rates: Vec<Vec<f64>> = (0..splits.len())
        .map(|s| {
            let rounds = rows[s].tokens_per_s.len();
            (0..rounds)
                .map(|r| {
                    let seconds: f64 = tokens
                        .iter()
                        .enumerate()
                        .map(|(size, t)| t / rows[size * splits.len() + s].tokens_per_s[r])
                        .sum();
                    total / seconds
                })
                .collect()
        })
        .collect();
    splits
        .iter()
        .zip(&rates)
        .enumerate()
        .map(|(s, (split, r))| row(WHOLE_SWEEP, *split, s == 0, r, &rates[0]))
        .collect()
}

/// The size name of [`whole_sweep`]'s rows.
pub(super) const WHOLE_SWEEP: &str = "all sizes";

/// One window of a split: every job steps its arms in turn from arm `start + job`, all at
/// once, until `deadline` (or, with none, once per arm). Returns the split's tokens a second
/// (the sum over its jobs of their counted samples' tokens over their seconds) and the
/// slowest job's time.
fn window(
    jobs: &mut Jobs,
    deadline: Option<Duration>,
    start: usize,
) -> anyhow::Result<(f64, Duration)> {
    let begun = Instant::now();
    let results: Vec<anyhow::Result<(f64, Duration)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter_mut()
            .enumerate()
            .map(|(j, arms)| scope.spawn(move || job_window(arms, begun, deadline, start + j)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a bench job's thread panicked")))
            })
            .collect()
    });
    let mut rate = 0.0;
    let mut slowest = Duration::ZERO;
    for result in results {
        let (r, took) = result?;
        rate += r;
        slowest = slowest.max(took);
    }
    Ok((rate, slowest))
}

/// One job's part of a window: steps arm after arm from `first`; counts each sample that
/// ended before `deadline` (and the first in any case, so that a job always has one).
fn job_window(
    arms: &mut [Child],
    begun: Instant,
    deadline: Option<Duration>,
    first: usize,
) -> anyhow::Result<(f64, Duration)> {
    let (mut tokens, mut seconds) = (0.0, 0.0);
    for i in 0.. {
        let done = match deadline {
            Some(deadline) => i > 0 && begun.elapsed() >= deadline,
            None => i == arms.len(),
        };
        if done {
            break;
        }
        let child = &mut arms[(first + i) % arms.len()];
        let step = child.step().with_context(|| {
            format!(
                "bench --split: {} {} at {} threads",
                child.case.size,
                child.case.label,
                child.case.threads.unwrap_or(1)
            )
        })?;
        if i == 0 || deadline.is_none_or(|d| begun.elapsed() <= d) {
            tokens += (child.case.batch * child.case.model.context) as f64;
            seconds += step;
        }
    }
    Ok((tokens / seconds, begun.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(jobs: usize, threads: usize) -> Split {
        Split { jobs, threads }
    }

    #[test]
    fn splits_start_with_the_default_and_divide_the_cores() {
        assert_eq!(splits(2, 9), [split(2, 1), split(1, 2)]);
        assert_eq!(
            splits(16, 36),
            [
                split(16, 1),
                split(8, 2),
                split(4, 4),
                split(2, 8),
                split(1, 16)
            ]
        );
        // Capped by the runs, as the runner caps them; a repeat is measured once.
        assert_eq!(
            splits(16, 3),
            [
                split(3, 1),
                split(3, 2),
                split(3, 4),
                split(2, 8),
                split(1, 16)
            ]
        );
        assert_eq!(
            splits(6, 1),
            [split(1, 1), split(1, 2), split(1, 3), split(1, 6)]
        );
        assert_eq!(splits(1, 9), [split(1, 1)]);
    }

    #[test]
    fn the_whole_sweep_adds_up_each_sizes_time_round_by_round() {
        let splits = [split(2, 1), split(1, 2)];
        // Two sizes, two splits, two rounds: the default at 100 and 50 tokens/s, the other
        // at 50 and 100 in round 0, 100 and 100 in round 1.
        let rows = [
            row("a", splits[0], true, &[100.0, 100.0], &[100.0, 100.0]),
            row("a", splits[1], false, &[50.0, 100.0], &[100.0, 100.0]),
            row("b", splits[0], true, &[50.0, 50.0], &[50.0, 50.0]),
            row("b", splits[1], false, &[100.0, 100.0], &[50.0, 50.0]),
        ];
        // 1000 tokens at size a, 3000 at b.
        let whole = whole_sweep(&rows, &splits, &[1000.0, 3000.0]);
        assert_eq!(whole.len(), 2);
        assert!(whole.iter().all(|r| r.size == WHOLE_SWEEP));
        // The default: 10 s + 60 s for 4000 tokens, both rounds.
        assert_eq!(whole[0].tokens_per_s, [4000.0 / 70.0, 4000.0 / 70.0]);
        // The other: 20 s + 30 s, then 10 s + 30 s.
        assert_eq!(whole[1].tokens_per_s, [4000.0 / 50.0, 4000.0 / 40.0]);
        assert!(whole[0].default && !whole[1].default);
        let ratios = &whole[1].vs_default_rounds;
        assert!((ratios[0] - 70.0 / 50.0).abs() < 1e-12 && (ratios[1] - 70.0 / 40.0).abs() < 1e-12);
    }
}
