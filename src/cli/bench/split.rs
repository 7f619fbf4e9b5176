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
//! taken round by round, with a distribution-free interval for its median.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::child::{Case, Child};
use super::{BenchArgs, InputError};
use crate::analysis::stats::{LEVEL, ext_f64, fmt_interval, median_interval, percentile};
use crate::backend::BackendKind;

/// Runs trained at once and threads per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(super) struct Split {
    pub(super) jobs: usize,
    pub(super) threads: usize,
}

/// The splits worth measuring on `cores` cores for a sweep of `runs` runs: the runner's
/// default first (one single-thread run per core, at most `runs`), then every `T > 1` that
/// divides the cores, with `cores / T` runs (at most `runs`); each once.
pub(super) fn splits(cores: usize, runs: usize) -> Vec<Split> {
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

/// One split's measurements at one size.
#[derive(Debug, Serialize)]
pub(super) struct SplitRow {
    pub(super) size: String,
    pub(super) jobs: usize,
    pub(super) threads: usize,
    /// The runner's default on this machine (the first split).
    pub(super) default: bool,
    /// Median over rounds of the split's tokens a second (all its jobs together), and its
    /// quartiles.
    pub(super) tokens_per_s_median: f64,
    pub(super) tokens_per_s_p25: f64,
    pub(super) tokens_per_s_p75: f64,
    /// Median over rounds of this split's tokens a second over the default's in the same
    /// round (above 1: faster), and a distribution-free interval for it (NaN with fewer
    /// than 6 rounds).
    pub(super) vs_default_median: f64,
    #[serde(with = "ext_f64")]
    pub(super) vs_default_ci_low: f64,
    #[serde(with = "ext_f64")]
    pub(super) vs_default_ci_high: f64,
    #[serde(with = "ext_f64")]
    pub(super) vs_default_ci_coverage: f64,
    /// Every round's tokens a second and its ratio to the default's.
    pub(super) tokens_per_s: Vec<f64>,
    pub(super) vs_default_rounds: Vec<f64>,
}

/// A split bench: the machine, and a row per (size, split).
#[derive(Debug, Serialize)]
pub(super) struct SplitReport {
    pub(super) machine: String,
    pub(super) cores: usize,
    pub(super) backend: String,
    pub(super) precision: &'static str,
    pub(super) rounds: usize,
    /// Runs of the sweep (what caps the jobs), if a sweep was given.
    pub(super) runs: Option<usize>,
    /// The sweep's training tokens, all runs together, if a sweep was given.
    pub(super) sweep_tokens: Option<f64>,
    /// A row per (size, split), then, with a sweep of several sizes, one per split for the
    /// whole sweep (size `all sizes`, [`whole_sweep`]).
    pub(super) rows: Vec<SplitRow>,
}

/// Refuses what `--split` cannot measure, before any child starts.
pub(super) fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    let refuse = |what: &str| Err(InputError(format!("bench --split: {what}")).into());
    if args.inference {
        return refuse("it measures training; drop --inference");
    }
    if args.against.is_some() {
        return refuse("it compares splits of one build; drop --against");
    }
    if args.threads.is_some() {
        return refuse("it chooses the threads per run itself; drop --threads");
    }
    if crate::backend::gpu_index(&args.device).is_some() {
        return refuse(&format!(
            "it shares CPU cores; on {} the runner trains one run at a time \
             (--jobs-per-device shares a GPU); drop --device",
            args.device
        ));
    }
    if args.steps < 1 {
        return refuse("--steps must be at least 1 (rounds of every split)");
    }
    Ok(())
}

/// The children of one split at one size: `[job][arm]`.
type Jobs = Vec<Vec<Child>>;

/// Measures every split at one size (`cases`: its arms), `args.steps` rounds after one
/// warm-up round.
pub(super) fn measure_size(
    args: &BenchArgs,
    backend: BackendKind,
    cases: &[Case],
    splits: &[Split],
) -> anyhow::Result<Vec<SplitRow>> {
    let mut children: Vec<Jobs> = Vec::new();
    for split in splits {
        let mut jobs = Vec::new();
        for _ in 0..split.jobs {
            let mut arms = Vec::new();
            for case in cases {
                let case = Case {
                    threads: Some(split.threads),
                    ..case.clone()
                };
                arms.push(Child::spawn(backend, &args.device, case, None)?);
            }
            jobs.push(arms);
        }
        children.push(jobs);
    }
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
pub(super) fn whole_sweep(rows: &[SplitRow], splits: &[Split], tokens: &[f64]) -> Vec<SplitRow> {
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

/// A split's row from its rounds' tokens a second and the default's.
fn row(size: &str, split: Split, default: bool, rates: &[f64], default_rates: &[f64]) -> SplitRow {
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let ratios: Vec<f64> = rates
        .iter()
        .zip(default_rates)
        .map(|(a, b)| a / b)
        .collect();
    let t = sorted(rates.to_vec());
    let r = sorted(ratios.clone());
    let (ci_low, ci_high, ci_coverage) =
        median_interval(&r, LEVEL).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
    SplitRow {
        size: size.into(),
        jobs: split.jobs,
        threads: split.threads,
        default,
        tokens_per_s_median: percentile(&t, 0.5),
        tokens_per_s_p25: percentile(&t, 0.25),
        tokens_per_s_p75: percentile(&t, 0.75),
        vs_default_median: percentile(&r, 0.5),
        vs_default_ci_low: ci_low,
        vs_default_ci_high: ci_high,
        vs_default_ci_coverage: ci_coverage,
        tokens_per_s: rates.to_vec(),
        vs_default_rounds: ratios,
    }
}

/// What the rows of one size say: the fastest split and whether it beats the default by
/// more than its interval's width.
pub(super) fn verdict(rows: &[&SplitRow]) -> String {
    let Some(&best) = rows
        .iter()
        .max_by(|a, b| a.tokens_per_s_median.total_cmp(&b.tokens_per_s_median))
    else {
        return String::new();
    };
    let name = |r: &SplitRow| format!("{} x {}", r.jobs, r.threads);
    let size = &best.size;
    if best.default {
        return format!(
            "{size}: the runner's default, {}, is the fastest split measured here",
            name(best)
        );
    }
    let ratio = format!(
        "{:.3}x {}",
        best.vs_default_median,
        interval_text(best.vs_default_ci_low, best.vs_default_ci_high)
    );
    if best.vs_default_ci_low > 1.0 {
        format!(
            "{size}: {} is the fastest, {ratio} the default's tokens/s: train with \
             --jobs {} --threads {}",
            name(best),
            best.jobs,
            best.threads
        )
    } else {
        format!(
            "{size}: {} read fastest, {ratio} the default's tokens/s, an interval that does \
             not exclude 1: no split beats the default measurably",
            name(best)
        )
    }
}

fn interval_text(low: f64, high: f64) -> String {
    if low.is_nan() {
        "[-]".into()
    } else {
        fmt_interval(low, high, 3)
    }
}

/// Prints the report as a table, with a legend and each size's verdict.
pub(super) fn print_split(r: &SplitReport) {
    println!(
        "{} on cpu ({}, {} cores), {} training: splits of the cores into runs at once x threads \
         per run{}",
        r.backend,
        r.machine,
        r.cores,
        r.precision,
        r.runs.map_or(String::new(), |n| format!(
            " (jobs at most the sweep's {n} runs)"
        ))
    );
    println!(
        "{:<10} {:<16} {:>10} {:>17} {:>24}",
        "size", "jobs x threads", "tokens/s", "IQR tokens/s", "vs default [95% CI]"
    );
    for row in &r.rows {
        let split = format!(
            "{} x {}{}",
            row.jobs,
            row.threads,
            if row.default { " (default)" } else { "" }
        );
        println!(
            "{:<10} {:<16} {:>10.0} {:>17} {:>24}",
            row.size,
            split,
            row.tokens_per_s_median,
            format!("{:.0}-{:.0}", row.tokens_per_s_p25, row.tokens_per_s_p75),
            format!(
                "{:.3}x {}",
                row.vs_default_median,
                interval_text(row.vs_default_ci_low, row.vs_default_ci_high)
            ),
        );
    }
    println!(
        "\ntokens/s: median over {} rounds of the split's training tokens a second, all its \
         runs together, each run stepping the size's arms in turn (a child process per arm, \
         each request an untimed step and a timed sample) and counting the samples that \
         ended while every run of the split was stepping; the splits take turns round by \
         round; vs default: median of the per-round ratio to the default's tokens/s (above \
         1: faster), with a distribution-free 95% interval (order statistics, rounds taken \
         as independent; every round in --json)\n",
        r.rounds
    );
    if r.rows.iter().any(|row| row.size == WHOLE_SWEEP) {
        println!(
            "all sizes: per round, the sweep's training tokens over the time its sizes' tokens \
             take at their tokens/s in that split (an estimate: it leaves out the tail, where \
             fewer runs than jobs are left, and the evaluations and checkpoints)\n"
        );
    }
    let mut sizes: Vec<&str> = r.rows.iter().map(|row| row.size.as_str()).collect();
    sizes.dedup();
    for size in sizes {
        let rows: Vec<&SplitRow> = r.rows.iter().filter(|row| row.size == size).collect();
        println!("{}", verdict(&rows));
    }
    // The whole sweep's rows, or with one size its rows.
    let whole = r.rows.iter().any(|row| row.size == WHOLE_SWEEP);
    let best = r
        .rows
        .iter()
        .filter(|row| !whole || row.size == WHOLE_SWEEP)
        .max_by(|a, b| a.tokens_per_s_median.total_cmp(&b.tokens_per_s_median));
    if let (Some(tokens), Some(best)) = (r.sweep_tokens, best) {
        println!(
            "the sweep's {} training tokens: about {} of training steps with {} x {}",
            crate::fmt::thousands(tokens.round() as u64),
            super::super::speed::duration(tokens / best.tokens_per_s_median),
            best.jobs,
            best.threads
        );
    }
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

    fn row_of(jobs: usize, threads: usize, rates: &[f64], default: &[f64]) -> SplitRow {
        let is_default = rates == default;
        row("micro", split(jobs, threads), is_default, rates, default)
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

    #[test]
    fn the_verdict_names_a_faster_split_only_when_its_interval_excludes_one() {
        let default: Vec<f64> = (0..10).map(|i| 100.0 + i as f64).collect();
        let base = row_of(2, 1, &default, &default);
        assert!(base.default && base.vs_default_median == 1.0);
        // Clearly faster every round.
        let fast: Vec<f64> = default.iter().map(|d| d * 1.2).collect();
        let v = verdict(&[&base, &row_of(1, 2, &fast, &default)]);
        assert!(
            v.contains("1 x 2 is the fastest") && v.contains("--jobs 1 --threads 2"),
            "{v}"
        );
        // Faster in the median, but slower in half the rounds: not measurably.
        let mixed: Vec<f64> = default
            .iter()
            .enumerate()
            .map(|(i, d)| if i % 2 == 0 { d * 1.3 } else { d * 0.95 })
            .collect();
        let v = verdict(&[&base, &row_of(1, 2, &mixed, &default)]);
        assert!(v.contains("no split beats the default measurably"), "{v}");
        // The default fastest.
        let slow: Vec<f64> = default.iter().map(|d| d * 0.7).collect();
        let v = verdict(&[&base, &row_of(1, 2, &slow, &default)]);
        assert!(
            v.contains("the runner's default, 2 x 1, is the fastest"),
            "{v}"
        );
    }
}
