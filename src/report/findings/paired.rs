//! The Findings' sentences on the paired comparisons with the baseline: those that survive
//! Holm's correction, or, where none does, how large a difference the best-measured ones
//! rule out and the strongest that does not survive.

use super::Evidence;
use crate::analysis::paired::PairedRow;

pub(super) fn paired(e: &Evidence) -> Vec<String> {
    let Some(table) = e.paired.filter(|t| t.comparisons > 0) else {
        return Vec::new();
    };
    let mut cells: Vec<&str> = Vec::new();
    for r in &table.rows {
        if !cells.contains(&r.cell.as_str()) {
            cells.push(&r.cell);
        }
    }
    let at = if cells.len() == 1 {
        format!(" at `{}`", cells[0])
    } else {
        " at any size".into()
    };
    let survivors: Vec<&PairedRow> = table.rows.iter().filter(|r| r.holm).collect();
    let mut out = Vec::new();
    if survivors.is_empty() {
        out.push(format!(
            "No arm differs from `{}`{at} after Holm's correction over {} paired comparisons (two-sided paired t-tests on the same seeds, family-wise {}).",
            e.baseline, table.comparisons, table.alpha
        ));
        out.extend(most_seeds(&table.rows, e.baseline));
    } else {
        let each: Vec<String> = survivors
            .iter()
            .take(3)
            .map(|r| difference(r, e.baseline))
            .collect();
        out.push(format!(
            "{} of {} paired comparisons {} Holm's correction (family-wise {}): {}.",
            survivors.len(),
            table.comparisons,
            if survivors.len() == 1 {
                "survives"
            } else {
                "survive"
            },
            table.alpha,
            each.join("; ")
        ));
    }
    let nominal = table
        .rows
        .iter()
        .filter(|r| !r.holm && r.test.p < table.alpha)
        .min_by(|a, b| a.test.p.total_cmp(&b.test.p));
    if let Some(r) = nominal {
        out.push(format!(
            "The strongest difference that does not survive it: {}.",
            difference(r, e.baseline)
        ));
    }
    out
}

/// Where nothing survives, how large a difference the best-measured comparisons leave room
/// for: those with the most seeds, listed with their 95% intervals when there are at most
/// four, else summarised by their interval half-widths.
fn most_seeds(rows: &[PairedRow], baseline: &str) -> Option<String> {
    let n = rows
        .iter()
        .map(|r| r.test.diff.n)
        .max()
        .filter(|&n| n > 1)?;
    let best: Vec<&PairedRow> = rows.iter().filter(|r| r.test.diff.n == n).collect();
    if best.len() > 4 {
        let mut halves: Vec<f64> = best.iter().map(|r| r.test.diff.half).collect();
        halves.sort_by(f64::total_cmp);
        let median = halves[halves.len() / 2];
        return Some(format!(
            "With {n} seeds, {} comparisons have 95% t-intervals of ±{median:.3} nats at the median (±{:.3} to ±{:.3}): smaller differences from `{baseline}` cannot be told apart here.",
            best.len(),
            halves[0],
            halves[halves.len() - 1]
        ));
    }
    let one_cell = best.iter().all(|r| r.cell == best[0].cell);
    let listed: Vec<String> = best
        .iter()
        .map(|r| {
            let d = &r.test.diff;
            let at = if one_cell {
                String::new()
            } else {
                format!(" at `{}`", r.cell)
            };
            format!(
                "`{}`{at} {:+.3} [{:+.3}, {:+.3}]",
                r.arm,
                d.mean,
                d.mean - d.half,
                d.mean + d.half
            )
        })
        .collect();
    let widest = best
        .iter()
        .map(|r| r.test.diff.mean.abs() + r.test.diff.half)
        .fold(0.0, f64::max);
    Some(format!(
        "With the most seeds ({n}), the differences from `{baseline}` in nats, with 95% t-intervals, are {}: none is larger than {widest:.3} nats either way.",
        listed.join(", ")
    ))
}

/// "`arm` at `size` is worse than `baseline` by 0.039 nats [+0.030, +0.048] (3 seeds, p = 0.003)".
fn difference(r: &PairedRow, baseline: &str) -> String {
    let d = &r.test.diff;
    let word = if d.mean > 0.0 { "worse" } else { "better" };
    format!(
        "`{}` at `{}` is {word} than `{baseline}` by {:.3} nats [{:+.3}, {:+.3}] ({} seeds, p {})",
        r.arm,
        r.cell,
        d.mean.abs(),
        d.mean - d.half,
        d.mean + d.half,
        d.n,
        p_text(r.test.p)
    )
}

/// `= 0.013`, or `< 0.001` below that.
fn p_text(p: f64) -> String {
    match crate::fmt::p_value(p) {
        small if small.starts_with('<') => "< 0.001".into(),
        p => format!("= {p}"),
    }
}
