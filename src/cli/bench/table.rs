//! What `attnres bench` reports: one row per case (its step times, throughput, MFU, ratio to
//! the baseline with that ratio's interval, and memory), as `--json` writes them and as the
//! table prints them.

use serde::Serialize;

use super::child;
use crate::analysis::stats::{ext_f64, fmt_interval};
use crate::fmt::bytes_text;

/// One case's measurements.
#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub(super) size: String,
    pub(super) label: String,
    pub(super) d_model: usize,
    pub(super) n_blocks: usize,
    pub(super) context: usize,
    pub(super) batch: usize,
    pub(super) steps: usize,
    pub(super) step_s_median: f64,
    pub(super) step_s_p25: f64,
    pub(super) step_s_p75: f64,
    pub(super) step_s_min: f64,
    pub(super) step_s_max: f64,
    pub(super) tokens_per_s: f64,
    /// The model's FLOPs a second at the median step (`model::flops`).
    pub(super) flops_per_s: f64,
    /// `flops_per_s` over the report's matmul peak.
    pub(super) mfu: f64,
    /// The `--against` binary this row's child ran, if not this one.
    pub(super) binary: Option<String>,
    /// Median over rounds of this case's step time over the baseline's in the same round
    /// (for an `--against` row: over this binary's same case), with its quartiles.
    pub(super) vs_baseline_median: f64,
    pub(super) vs_baseline_p25: f64,
    pub(super) vs_baseline_p75: f64,
    /// A distribution-free interval for that median (`stats::median_interval`, at least
    /// 95%), with its exact coverage; NaN with fewer than 6 rounds.
    #[serde(with = "ext_f64")]
    pub(super) vs_baseline_ci_low: f64,
    #[serde(with = "ext_f64")]
    pub(super) vs_baseline_ci_high: f64,
    #[serde(with = "ext_f64")]
    pub(super) vs_baseline_ci_coverage: f64,
    pub(super) peak_bytes: Option<f64>,
    pub(super) estimate_bytes: f64,
    /// Steps run back to back per timed sample, whose mean the step times are
    /// (`child::MIN_SAMPLE_S`).
    pub(super) repeats: usize,
    /// Every timed step (s), in round order, and its ratio to the step it is paired with in
    /// the same round (the baseline's, or this binary's same case for an `--against` row):
    /// what the median and interval above are taken over, for analyses of one's own.
    pub(super) step_s: Vec<f64>,
    pub(super) vs_baseline_rounds: Vec<f64>,
}

/// A bench run: the machine and backend, and a row per case.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) machine: String,
    pub(super) cores: usize,
    pub(super) threads: Option<usize>,
    pub(super) backend: String,
    pub(super) device: String,
    pub(super) precision: &'static str,
    pub(super) mode: &'static str,
    /// The better of the two probes below.
    pub(super) matmul_peak_flops: f64,
    /// The matmul peak probed before the cases ran and after (`PEAK_REPEATS` each).
    pub(super) matmul_peak_probes: [f64; 2],
    /// `n` of the probes' `n x n x n` matmul.
    pub(super) matmul_peak_size: usize,
    /// Processes each case's rounds were shared out among (`--processes`).
    pub(super) processes: usize,
    pub(super) rows: Vec<Row>,
}

/// `1.052x [1.031, 1.074]`: a median ratio and its interval (`[-]` with too few rounds).
pub(super) fn ratio_text(median: f64, low: f64, high: f64) -> String {
    let interval = if low.is_nan() {
        "[-]".to_string()
    } else {
        fmt_interval(low, high, 3)
    };
    format!("{median:.3}x {interval}")
}

/// Prints the report as a table, with a legend of what each column is.
pub(super) fn print_table(r: &Report) {
    println!(
        "{} on {} ({}, {} cores, threads {}), {} {}: matmul peak {:.1} GFLOP/s ({}^3, best of {} before the cases and after: {:.1} and {:.1})",
        r.backend,
        r.device,
        r.machine,
        r.cores,
        r.threads.map_or("default".to_string(), |t| t.to_string()),
        r.precision,
        r.mode,
        r.matmul_peak_flops / 1e9,
        r.matmul_peak_size,
        super::PEAK_REPEATS,
        r.matmul_peak_probes[0] / 1e9,
        r.matmul_peak_probes[1] / 1e9,
    );
    let label = |row: &Row| match &row.binary {
        Some(_) => format!("{} @other", row.label),
        None => row.label.clone(),
    };
    let width = r
        .rows
        .iter()
        .map(|row| label(row).len())
        .max()
        .unwrap_or(0)
        .max(12);
    println!(
        "{:<10} {:<width$} {:>9} {:>17} {:>10} {:>6} {:>21} {:>9} {:>9}",
        "size",
        "variant",
        "step ms",
        "IQR ms",
        "tokens/s",
        "MFU",
        "vs baseline [95% CI]",
        "peak mem",
        "estimate"
    );
    for row in &r.rows {
        let mem = |b: Option<f64>| b.filter(|b| b.is_finite()).map_or("-".into(), bytes_text);
        println!(
            "{:<10} {:<width$} {:>9.2} {:>17} {:>10.0} {:>5.1}% {:>21} {:>9} {:>9}",
            row.size,
            label(row),
            row.step_s_median * 1e3,
            format!("{:.2}-{:.2}", row.step_s_p25 * 1e3, row.step_s_p75 * 1e3),
            row.tokens_per_s,
            row.mfu * 100.0,
            ratio_text(
                row.vs_baseline_median,
                row.vs_baseline_ci_low,
                row.vs_baseline_ci_high,
            ),
            mem(row.peak_bytes),
            mem(Some(row.estimate_bytes)),
        );
    }
    println!(
        "\nstep ms: median of {} interleaved samples per case{}, each right after an untimed step and the mean of as many steps as fill {} ms (--json: repeats); vs baseline: median of the per-round ratio to the first case of its size, with a distribution-free 95% interval for it (order statistics, rounds taken as independent; quartiles and every round in --json); peak mem: the case's own process (CPU: VmHWM; GPU: what nvidia-smi shows it holding at the end, CUDA context and libtorch's cached blocks included); estimate: what `plan` checks (docs/cost.md)\n",
        r.rows.first().map_or(0, |row| row.steps),
        if r.processes > 1 {
            format!(" from {} successive processes of each case", r.processes)
        } else {
            String::new()
        },
        child::MIN_SAMPLE_S * 1e3
    );
    if let Some(other) = r.rows.iter().find_map(|row| row.binary.as_ref()) {
        println!(
            "@other: the same case in {other}, its steps beside this binary's (swapping places every round); its vs baseline is its ratio to this binary's same case\n"
        );
    }
}
