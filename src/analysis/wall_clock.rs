//! The wall-clock multiplier: what an arm is worth per unit of training time rather than per
//! FLOP. It is the compute multiplier times the baseline-to-arm ratio of measured training
//! time per token on one machine, so an arm worth 1.2x the compute that takes 1.1x the time
//! per token is worth about 1.09x the time.
//!
//! Time per token is each run's median over its steps of `1 / tokens_per_s` (steps.csv; a
//! median, so the first steps' warm-up and an occasional stall do not move it). Runs are
//! paired by seed at the size the multiplier is read at; the ratio is the geometric mean of
//! the per-seed ratios, with a Student-t interval on their logarithms.
//!
//! The wall-clock multiplier's interval carries both uncertainties: on the log scale, its
//! half-width on each side is the root-sum-square of the compute multiplier's bootstrap
//! half-width and the ratio's t half-width. Loss noise comes from the seeds and timing noise
//! from the machine, so they are taken as independent.

use super::load::LoadedRun;
use super::multiplier::{Estimate, FitReport, WallClock};
use super::stats::{LEVEL, mean_sd, t_quantile};
use super::views;
use crate::store::metrics::read_steps;

/// Every arm's wall-clock multiplier, or why there is none (runs timed on different
/// machines, no seed with both runs, no compute multiplier).
pub fn wall_clock(runs: &[LoadedRun], fit: &FitReport) -> Result<Vec<WallClock>, String> {
    let Some(size) = views::largest_size(runs) else {
        return Err("no runs".into());
    };
    let at_size: Vec<&LoadedRun> = runs.iter().filter(|r| r.planned.size == size).collect();
    let mut machines: Vec<String> = at_size.iter().map(|r| machine(r)).collect();
    machines.sort();
    machines.dedup();
    if machines.len() > 1 {
        return Err(format!(
            "the runs at `{size}` were timed on {} different machines ({}); time them on one",
            machines.len(),
            machines.join("; ")
        ));
    }
    let per_token = |r: &LoadedRun| -> Option<f64> {
        let mut s: Vec<f64> = read_steps(&r.dir.steps())
            .ok()?
            .iter()
            .filter(|row| row.tokens_per_s > 0.0)
            .map(|row| 1.0 / row.tokens_per_s)
            .collect();
        s.sort_by(f64::total_cmp);
        (!s.is_empty()).then(|| s[s.len() / 2])
    };
    let time_of = |arm: &str, seed: u64| {
        at_size
            .iter()
            .find(|r| r.planned.arm == arm && r.planned.seed == seed)
            .and_then(|r| per_token(r))
    };
    let mut out = Vec::new();
    for a in &fit.arms {
        let Some(m) = a.multiplier else { continue };
        let logs: Vec<f64> = at_size
            .iter()
            .filter(|r| r.planned.arm == a.arm)
            .filter_map(|r| {
                let arm = time_of(&a.arm, r.planned.seed)?;
                let base = time_of(&fit.baseline, r.planned.seed)?;
                Some((base / arm).ln())
            })
            .collect();
        if logs.is_empty() {
            continue;
        }
        let (mean, sd, n) = mean_sd(&logs);
        let half = t_quantile(0.5 + LEVEL / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt();
        let r = mean.exp();
        out.push(WallClock {
            arm: a.arm.clone(),
            size: size.clone(),
            speed_ratio: r,
            speed_lo: (mean - half).exp(),
            speed_hi: (mean + half).exp(),
            seeds: n,
            multiplier: Estimate {
                value: m.value * r,
                lo: m.value * r * (-combined(m.value.ln() - m.lo.ln(), half)).exp(),
                hi: m.value * r * combined(m.hi.ln() - m.value.ln(), half).exp(),
                mc_error: m.mc_error.map(|e| e * r),
            },
            machine: machines[0].clone(),
        });
    }
    if out.is_empty() {
        return Err(format!(
            "no seed at `{size}` has both an arm's run and the baseline's"
        ));
    }
    Ok(out)
}

/// Two independent log-scale half-widths as one; one seed (no ratio interval) leaves the
/// multiplier's alone, and an infinite end stays infinite.
fn combined(multiplier_half: f64, ratio_half: f64) -> f64 {
    let ratio_half = if ratio_half.is_finite() {
        ratio_half
    } else {
        0.0
    };
    multiplier_half.hypot(ratio_half)
}

/// `AMD EPYC (avx2), tch, 1 thread`: what a run's time per token depends on.
fn machine(r: &LoadedRun) -> String {
    let s = &r.summary;
    let chip = s
        .gpu
        .clone()
        .or_else(|| s.cpu.clone())
        .unwrap_or_else(|| "an unrecorded CPU".into());
    let threads = match s.threads {
        Some(1) => ", 1 thread".to_string(),
        Some(n) => format!(", {n} threads"),
        None => String::new(),
    };
    format!("{chip}, {}{threads}", s.backend)
}

#[cfg(test)]
mod tests {
    use super::combined;

    #[test]
    fn half_widths_add_in_quadrature_and_keep_infinite_ends() {
        assert!((combined(0.03, 0.04) - 0.05).abs() < 1e-12);
        assert_eq!(
            combined(0.03, f64::NAN),
            0.03,
            "one seed: no timing interval"
        );
        assert_eq!(combined(f64::INFINITY, 0.1), f64::INFINITY);
    }
}
