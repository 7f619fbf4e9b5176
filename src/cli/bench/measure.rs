//! How `attnres bench` measures a size's cases: their children started (afresh with
//! `--processes`), stepped in turn round after round, and each case's times made into its
//! row of the table.

use std::path::Path;

use anyhow::Context;

use super::BenchArgs;
use super::child::{self, Case, Child, Ended};
use super::table::Row;
use crate::analysis::stats::{LEVEL, median_interval, percentile};
use crate::backend::BackendKind;
use crate::model::flops::flops_per_token;

/// One case's step times as its child ran them, the times its ratio is taken to (the
/// baseline's, or for an `--against` child this build's same case), how the child ended and
/// which binary it was if not this one.
pub(super) struct Measured {
    case: Case,
    times: Vec<f64>,
    against: Vec<f64>,
    ended: Ended,
    binary: Option<String>,
}

/// Starts one child per case (two with `--against`: this binary's, then the other's),
/// warms each up with 2 steps, then runs rounds in which every child steps twice
/// (untimed, then timed), in turn; a case's two children swap places every round. With
/// `--processes P`, `args.steps` rounds in all, in P parts, each with children of its own.
pub(super) fn measure_group(
    args: &BenchArgs,
    backend: BackendKind,
    cases: &[Case],
) -> anyhow::Result<Vec<Measured>> {
    let binaries: Vec<Option<&Path>> = std::iter::once(None)
        .chain(args.against.as_deref().map(Some))
        .collect();
    let per_case = binaries.len();
    // One-thread children step one at a time, so they share one CPU: on two CPUs that
    // differ in speed, each child would otherwise keep the speed of the one it settled on.
    let pin = if args.threads == Some(1) && crate::backend::gpu_index(&args.device).is_none() {
        child::current_cpu()
    } else {
        None
    };
    let count = cases.len() * per_case;
    let mut times = vec![Vec::with_capacity(args.steps); count];
    let mut ended: Vec<Option<Ended>> = vec![None; count];
    let mut round = 0;
    for part in 0..args.processes {
        let rounds = args.steps * (part + 1) / args.processes - args.steps * part / args.processes;
        let wanted = cases
            .iter()
            .flat_map(|case| binaries.iter().map(|&binary| (case.clone(), binary)))
            .collect();
        let mut children = Child::spawn_all(backend, &args.device, wanted, pin)?;
        // One warm-up round (each case's first two steps), then the part's rounds.
        for r in 0..rounds + 1 {
            for case in 0..cases.len() {
                for j in 0..per_case {
                    let j = if (round + r) % 2 == 1 {
                        per_case - 1 - j
                    } else {
                        j
                    };
                    let i = case * per_case + j;
                    let seconds = children[i].step()?;
                    if r >= 1 {
                        times[i].push(seconds);
                    }
                }
            }
        }
        round += rounds;
        for (i, child) in children.into_iter().enumerate() {
            let now = child.end()?;
            ended[i] = Some(match ended[i].take() {
                Some(before) => before.then(now),
                None => now,
            });
        }
    }
    let mut measured = Vec::new();
    for (i, ended) in ended.into_iter().enumerate() {
        let case = cases[i / per_case].clone();
        let ended = ended.context("a bench case that never ran")?;
        // This binary's rows against the baseline; the other's against the same case here.
        let (against, binary) = match i % per_case {
            0 => (times[0].clone(), None),
            _ => (times[i - 1].clone(), args.against.as_ref()),
        };
        measured.push(Measured {
            case,
            times: times[i].clone(),
            against,
            ended,
            binary: binary.map(|b| b.display().to_string()),
        });
    }
    Ok(measured)
}

/// A case's row, its MFU against the matmul `peak` (FLOP/s).
pub(super) fn row(m: &Measured, peak: f64) -> Row {
    let (case, times, baseline, ended) = (&m.case, &m.times, &m.against, &m.ended);
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let t = sorted(times.to_vec());
    let rounds: Vec<f64> = times.iter().zip(baseline).map(|(a, b)| a / b).collect();
    let ratios = sorted(rounds.clone());
    let median = percentile(&t, 0.5);
    let (ci_low, ci_high, ci_coverage) =
        median_interval(&ratios, LEVEL).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
    let tokens = (case.batch * case.model.context) as f64;
    let per_token = flops_per_token(&case.model);
    let flops = if case.inference {
        per_token.forward()
    } else {
        per_token.training()
    } as f64;
    let memory = case.training_memory();
    Row {
        size: case.size.clone(),
        label: case.label.clone(),
        d_model: case.model.d_model,
        n_blocks: case.model.n_blocks,
        context: case.model.context,
        batch: case.batch,
        steps: t.len(),
        step_s_median: median,
        step_s_p25: percentile(&t, 0.25),
        step_s_p75: percentile(&t, 0.75),
        step_s_min: t[0],
        step_s_max: t[t.len() - 1],
        binary: m.binary.clone(),
        tokens_per_s: tokens / median,
        flops_per_s: flops * tokens / median,
        mfu: flops * tokens / median / peak,
        vs_baseline_median: percentile(&ratios, 0.5),
        vs_baseline_p25: percentile(&ratios, 0.25),
        vs_baseline_p75: percentile(&ratios, 0.75),
        vs_baseline_ci_low: ci_low,
        vs_baseline_ci_high: ci_high,
        vs_baseline_ci_coverage: ci_coverage,
        repeats: ended.repeats,
        step_s: times.to_vec(),
        vs_baseline_rounds: rounds,
        peak_bytes: ended.peak_bytes,
        // Inference keeps no optimizer state or activations for a backward pass; the
        // estimate is the training one, shown for training only.
        estimate_bytes: if case.inference {
            f64::NAN
        } else {
            memory.total()
        },
    }
}
