//! The Findings that open a report: a few plain sentences generated from the statistics the
//! report's tables hold, each with its number, interval and test. Null results are stated as
//! such, and warnings say what a reader should not lean on.

use crate::analysis::bootstrap::Resampling;
use crate::analysis::figures::Profile;
use crate::analysis::multiplier::WallClock;
use crate::analysis::multiplier::{DeltaInterval, Estimate, FitReport};
use crate::analysis::paired::PairedTable;
use paired::paired;

/// An arm is called unstable when its largest hidden-state RMS, or the spread of its gradient
/// norm across depth, is this many times the median over the sweep's arms.
const OUTLIER: f64 = 3.0;
/// A held-out prediction this many seed half-widths off is a miss worth a warning.
const MISS: f64 = 2.0;

/// What the Findings are drawn from.
pub struct Evidence<'a> {
    pub baseline: &'a str,
    /// Per-size paired differences to the baseline, Holm-corrected.
    pub paired: Option<&'a PairedTable>,
    pub fit: Option<&'a FitReport>,
    /// Each arm's per-sublayer probes at the end of training, largest size, seed means.
    pub profiles: &'a [Profile],
    /// The builds that trained the runs; `-dirty` marks an uncommitted tree.
    pub builds: &'a [String],
    /// The fewest seeds of any (arm, size).
    pub min_seeds: usize,
    /// Why the scaling fit's laws are not to be read, when a fit was made.
    pub no_law: Option<&'a str>,
    /// Sentences made elsewhere (the probe sweep's accuracy comparisons), placed after the
    /// comparisons of loss.
    pub more: &'a [String],
}

/// Three to six sentences, most important first.
pub fn findings(e: &Evidence) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(
        e.no_law
            .map(|why| format!("No compute multiplier is read from these runs: {why}.")),
    );
    out.extend(multipliers(e));
    out.extend(wall_clock(e));
    out.extend(paired(e));
    out.extend(e.more.iter().cloned());
    out.extend(held_out(e));
    out.extend(unstable(e.profiles));
    out.extend(provenance(e));
    if out.is_empty() {
        out.push("No arm has a baseline to be compared with, and no fit was made.".into());
    }
    out
}

fn multipliers(e: &Evidence) -> Option<String> {
    let fit = e.fit?;
    let arms: Vec<_> = fit
        .arms
        .iter()
        .filter_map(|a| a.multiplier.as_ref().map(|m| (a.arm.as_str(), m, a.delta)))
        .filter(|(_, m, _)| m.value.is_finite())
        .collect();
    if arms.is_empty() {
        return None;
    }
    let list: Vec<String> = arms
        .iter()
        .map(|&(arm, m, delta)| multiplier_text(arm, m, delta))
        .collect();
    let verdict = verdict(&arms);
    let how = match &fit.resampling {
        Resampling::Seeds { .. } => format!(
            "95% bootstrap over seeds, {} resamples, {}",
            fit.resamples,
            seeds_text(e.min_seeds)
        ),
        Resampling::Residuals { points, parameters } => format!(
            "95% residual bootstrap of the fit, one seed per size, {} degrees of freedom",
            points.saturating_sub(*parameters)
        ),
        Resampling::Unavailable { .. } => return None,
    };
    Some(format!(
        "Compute multipliers against `{}` at the largest compute ({how}): {}; {verdict}.",
        e.baseline,
        list.join(", ")
    ))
}

/// One arm's multiplier with its bootstrap interval, and its delta-method interval where
/// there is one.
fn multiplier_text(arm: &str, m: &Estimate, delta: Option<DeltaInterval>) -> String {
    let d = m.digits().min(2);
    let delta = delta
        .map(|x| format!(", delta-method [{:.2}, {}]", x.lo, upper(x.hi)))
        .unwrap_or_default();
    let hi = if m.hi.is_finite() {
        format!("{:.d$}", m.hi)
    } else {
        "∞".into()
    };
    format!(
        "`{arm}` {:.2}x, bootstrap [{:.d$}, {hi}]{delta}",
        m.value, m.lo
    )
}

/// Which arms clear 1, or fall below it, in both intervals, and which end past 1 by less
/// than the bootstrap's Monte Carlo error; a verdict only where both intervals agree on it.
fn verdict(arms: &[(&str, &Estimate, Option<DeltaInterval>)]) -> String {
    let mc = |m: &&Estimate| m.mc_error.unwrap_or(0.0);
    let above: Vec<&str> = arms
        .iter()
        .filter(|(_, m, delta)| m.lo - mc(m) > 1.0 && delta.is_none_or(|x| x.lo > 1.0))
        .map(|(a, _, _)| *a)
        .collect();
    let below: Vec<&str> = arms
        .iter()
        .filter(|(_, m, delta)| m.hi + mc(m) < 1.0 && delta.is_none_or(|x| x.hi < 1.0))
        .map(|(a, _, _)| *a)
        .collect();
    // Intervals that end past 1 by less than the Monte Carlo error: said as such.
    let at_one: Vec<String> = arms
        .iter()
        .filter(|(a, m, _)| {
            !above.contains(a) && !below.contains(a) && (m.lo > 1.0 || m.hi < 1.0)
        })
        .map(|(a, m, _)| {
            let end = if m.lo > 1.0 { m.lo } else { m.hi };
            format!("`{a}`'s bootstrap interval ends at {end:.3}, within its Monte Carlo error ({:.3}) of 1", mc(m))
        })
        .collect();
    let verdict = if above.is_empty() && below.is_empty() {
        "no arm has every interval above 1 or every interval below 1, so no compute multiplier is shown at this scale".to_string()
    } else {
        let mut parts = Vec::new();
        if !above.is_empty() {
            let verb = if above.len() == 1 { "clears" } else { "clear" };
            parts.push(format!(
                "{} {verb} 1 in both intervals, so the multiplier is shown at this scale",
                ticks(&above)
            ));
        }
        if !below.is_empty() {
            let verb = if below.len() == 1 { "falls" } else { "fall" };
            parts.push(format!(
                "{} {verb} below 1 in both intervals",
                ticks(&below)
            ));
        }
        parts.join("; ")
    };
    match at_one.is_empty() {
        true => verdict,
        false => format!(
            "{verdict}; {}, so it is not shown to differ from 1",
            at_one.join(", ")
        ),
    }
}

fn seeds_text(n: usize) -> String {
    if n == 1 {
        "1 seed per size".into()
    } else {
        format!("at least {n} seeds per size")
    }
}

fn upper(hi: f64) -> String {
    if hi.is_finite() {
        format!("{hi:.2}")
    } else {
        "∞".into()
    }
}

fn ticks(arms: &[&str]) -> String {
    arms.iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// What each arm is worth per unit of training time, where its compute multiplier is read.
fn wall_clock(e: &Evidence) -> Option<String> {
    let fit = e.fit?;
    let first = fit.wall_clock.first()?;
    let list: Vec<String> = fit
        .wall_clock
        .iter()
        .map(|w| {
            let d = w.multiplier.digits().min(2);
            format!(
                "`{}` {:.2}x [{:.d$}, {}] (its time per token is {:.2}x the baseline's)",
                w.arm,
                w.multiplier.value,
                w.multiplier.lo,
                upper(w.multiplier.hi),
                1.0 / w.speed_ratio
            )
        })
        .collect();
    let side = |pick: fn(&WallClock) -> bool| -> Vec<String> {
        fit.wall_clock
            .iter()
            .filter(|w| pick(w))
            .map(|w| format!("`{}`", w.arm))
            .collect()
    };
    let (above, below) = (
        side(|w| w.multiplier.lo > 1.0),
        side(|w| w.multiplier.hi < 1.0),
    );
    let verdict = match (above.is_empty(), below.is_empty()) {
        (true, true) => "no interval excludes 1 once timing noise is counted".to_string(),
        _ => [(above, "above"), (below, "below")]
            .into_iter()
            .filter(|(arms, _)| !arms.is_empty())
            .map(|(arms, side)| format!("{} lies {side} 1", arms.join(" and ")))
            .collect::<Vec<_>>()
            .join("; "),
    };
    Some(format!(
        "Per unit of training time on {} (runs at `{}` timed per step, paired by seed; intervals count timing noise too), the multipliers are {}: {verdict}.",
        first.machine,
        first.size,
        list.join(", ")
    ))
}

fn held_out(e: &Evidence) -> Option<String> {
    let h = e.fit?.hold_out.as_ref()?;
    let misses: Vec<String> = h
        .arms
        .iter()
        .filter(|a| a.error_in_intervals.abs() > MISS)
        .map(|a| {
            format!(
                "`{}` ({:+.2} nats, {:+.1} half-widths)",
                a.arm, a.error, a.error_in_intervals
            )
        })
        .collect();
    (!misses.is_empty()).then(|| {
        format!(
            "Warning: refitted without `{}`, the law misses it by more than {MISS} seed half-widths for {}; multipliers read at the largest size are extrapolations the fit cannot check.",
            h.cell,
            misses.join(", ")
        )
    })
}

/// Arms whose hidden state grows, or whose gradient spreads across depth, far beyond the rest.
fn unstable(profiles: &[Profile]) -> Vec<String> {
    if profiles.len() < 3 {
        return Vec::new();
    }
    let peak = |p: &Profile| p.in_rms.iter().copied().fold(0.0f64, f64::max);
    let spread = |p: &Profile| {
        let [_, _, grad] = p.per_block();
        let (lo, hi) = grad
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
        if lo > 0.0 { hi / lo } else { f64::NAN }
    };
    let median = |values: Vec<f64>| {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let peak_median = median(profiles.iter().map(peak).collect());
    let spread_median = median(profiles.iter().map(spread).collect());
    profiles
        .iter()
        .filter(|p| peak(p) > OUTLIER * peak_median || spread(p) > OUTLIER * spread_median)
        .map(|p| {
            format!(
                "Warning: `{}` looks unstable: its hidden-state RMS peaks at {:.2} and its gradient norm varies {:.0}x across blocks, against medians of {:.2} and {:.1}x over the arms (final probes, largest size, mean over seeds; a measurement, not a test).",
                p.arm,
                peak(p),
                spread(p),
                peak_median,
                spread_median
            )
        })
        .collect()
}

fn provenance(e: &Evidence) -> Vec<String> {
    let mut out = Vec::new();
    if e.min_seeds == 1 {
        out.push(
            "Warning: some runs have one seed, so there is no seed noise to test against there; read those differences as single draws.".into(),
        );
    }
    let dirty = e.builds.iter().filter(|b| b.ends_with("-dirty")).count();
    if e.builds.len() > 1 {
        let which = if dirty > 0 {
            format!(", {dirty} from uncommitted trees")
        } else {
            String::new()
        };
        out.push(format!(
            "Note: {} builds trained these runs{which}; builds can round differently, which moves a final loss by about one seed's noise.",
            e.builds.len()
        ));
    } else if dirty > 0 {
        out.push("Note: the build that trained these runs had uncommitted changes, so its commit alone does not rebuild it.".into());
    }
    out
}

mod paired;

#[cfg(test)]
mod tests;
