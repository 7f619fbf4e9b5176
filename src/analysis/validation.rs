//! Fit validation (SPEC section 11): refit without the largest cell and see how well each
//! arm's law predicts it, in nats and in units of that cell's seed interval.

use serde::{Deserialize, Serialize};

use super::design::Design;
use super::fit::{EMode, fit};
use super::stats::SeedMean;

/// The fewest cells an arm needs before one is held out (three remain to fit).
pub const MIN_CELLS: usize = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutArm {
    pub arm: String,
    /// PFLOP/s-days.
    pub compute: f64,
    /// Mean over seeds at the held-out cell, with its t-interval.
    pub observed: SeedMean,
    /// The law fitted without that cell, at its compute.
    pub predicted: f64,
    /// `predicted - observed.mean`, nats.
    pub error: f64,
    /// `error / observed.half`; NaN with one seed.
    #[serde(with = "super::stats::ext_f64")]
    pub error_in_intervals: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldOut {
    pub cell: String,
    pub arms: Vec<HeldOutArm>,
}

/// `Ok(None)` when some arm has fewer than `MIN_CELLS` cells; `Err` when the refit fails.
pub fn hold_out_largest(design: &Design, mode: EMode) -> Result<Option<HoldOut>, String> {
    let last = design.cells.len().saturating_sub(1);
    let complete = design.runs.iter().all(|cells| {
        cells.iter().filter(|c| !c.is_empty()).count() >= MIN_CELLS && !cells[last].is_empty()
    });
    if !complete {
        return Ok(None);
    }
    let rest = design.without_cell(last);
    let refit = fit(&rest.arm_points(), mode)
        .ok_or("the refit without the largest cell did not converge")?;
    let arms = design
        .arms
        .iter()
        .zip(&design.runs)
        .zip(&refit.laws)
        .map(|((arm, cells), law)| {
            let held = &cells[last];
            let observed = SeedMean::of(&held.observed().collect::<Vec<_>>());
            let predicted = law.loss(held.compute);
            let error = predicted - observed.mean;
            HeldOutArm {
                arm: arm.clone(),
                compute: held.compute,
                observed,
                predicted,
                error,
                error_in_intervals: error / observed.half,
            }
        })
        .collect();
    Ok(Some(HoldOut {
        cell: design.cells[last].clone(),
        arms,
    }))
}
