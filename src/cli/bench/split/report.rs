//! What `bench --split` reports: a row per (size, split) with its tokens a second and its
//! ratio to the runner's default, the verdict per size, and the table and legend it prints.

use serde::Serialize;

use super::{Split, WHOLE_SWEEP};
use crate::analysis::stats::{LEVEL, ext_f64, median_interval, percentile};
use crate::cli::bench::table::ratio_text;

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

impl SplitRow {
    /// `0.873x [0.856, 0.882]`: its ratio to the default and the interval.
    fn vs_default_text(&self) -> String {
        ratio_text(
            self.vs_default_median,
            self.vs_default_ci_low,
            self.vs_default_ci_high,
        )
    }
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

/// A split's row from its rounds' tokens a second and the default's.
pub(super) fn row(
    size: &str,
    split: Split,
    default: bool,
    rates: &[f64],
    default_rates: &[f64],
) -> SplitRow {
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
    let Some(best) = fastest(rows.iter().copied()) else {
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
    let ratio = best.vs_default_text();
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

/// The row of the most tokens a second (median over rounds).
fn fastest<'a>(rows: impl Iterator<Item = &'a SplitRow>) -> Option<&'a SplitRow> {
    rows.max_by(|a, b| a.tokens_per_s_median.total_cmp(&b.tokens_per_s_median))
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
            row.vs_default_text(),
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
    // The whole sweep's rows, if it has several sizes.
    let whole = r.rows.iter().any(|row| row.size == WHOLE_SWEEP);
    if whole {
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
    let best = fastest(
        r.rows
            .iter()
            .filter(|row| !whole || row.size == WHOLE_SWEEP),
    );
    if let (Some(tokens), Some(best)) = (r.sweep_tokens, best) {
        println!(
            "the sweep's {} training tokens: about {} of training steps with {} x {}",
            crate::fmt::thousands(tokens.round() as u64),
            crate::fmt::duration(tokens / best.tokens_per_s_median),
            best.jobs,
            best.threads
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_of(jobs: usize, threads: usize, rates: &[f64], default: &[f64]) -> SplitRow {
        let is_default = rates == default;
        row("micro", Split { jobs, threads }, is_default, rates, default)
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
