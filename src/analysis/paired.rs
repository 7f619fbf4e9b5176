//! Per-cell paired comparisons against the baseline (SPEC section 11): for each size, each
//! arm's loss minus the baseline's on the same seed, with a t-interval, a paired t-test and
//! Holm's correction over every comparison in the table. They show where a fitted
//! multiplier comes from (e.g. an arm losing at the smallest size and winning at the
//! largest).

use serde::{Deserialize, Serialize};

use super::design::Design;
use super::stats::{PairedTest, holm};

/// Family-wise level of the Holm correction.
pub const HOLM_ALPHA: f64 = 0.05;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedRow {
    pub arm: String,
    pub cell: String,
    /// Baseline compute of the cell (PFLOP/s-days).
    pub compute: f64,
    /// `arm - baseline` over the seeds both have.
    pub test: PairedTest,
    /// Survives Holm's correction over all `comparisons` at `HOLM_ALPHA`.
    pub holm: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedTable {
    /// Tests with a p-value (at least two pairs): the family Holm corrects over.
    pub comparisons: usize,
    pub alpha: f64,
    pub rows: Vec<PairedRow>,
}

pub fn paired_table(design: &Design) -> PairedTable {
    let mut rows = Vec::new();
    for (k, arm) in design.arms.iter().enumerate().skip(1) {
        for (c, cell) in design.cells.iter().enumerate() {
            let diffs = design.paired_differences(k, c);
            if diffs.is_empty() {
                continue;
            }
            rows.push(PairedRow {
                arm: arm.clone(),
                cell: cell.clone(),
                compute: design.runs[0][c].compute,
                test: PairedTest::of(&diffs),
                holm: false,
            });
        }
    }
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].test.p.is_finite())
        .collect();
    let p: Vec<f64> = tested.iter().map(|&i| rows[i].test.p).collect();
    for (&i, keep) in tested.iter().zip(holm(&p, HOLM_ALPHA)) {
        rows[i].holm = keep;
    }
    PairedTable {
        comparisons: tested.len(),
        alpha: HOLM_ALPHA,
        rows,
    }
}
