//! What each figure draws: analysis output types, owned here so that `plot` only draws
//! them and computes nothing statistical.

use super::fit::Law;

/// One arm's points: compute, seed mean, and the ends of its 95% t-interval over seeds.
#[derive(Debug, Clone)]
pub struct ArmSeries {
    pub arm: String,
    pub points: Vec<(f64, f64, f64, f64)>,
    pub law: Option<Law>,
}

/// One run's curve.
#[derive(Debug, Clone)]
pub struct RunCurve {
    pub size: String,
    pub arm: String,
    pub seed: u64,
    /// (tokens, train loss) per step.
    pub train: Vec<(f64, f64)>,
    /// (tokens, validation loss) per eval.
    pub val: Vec<(f64, f64)>,
}

/// One panel: a value per (row, column) cell; None leaves the cell blank.
#[derive(Debug, Clone)]
pub struct Grid {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cells: Vec<Vec<Option<f64>>>,
    /// A cell to outline (the best shape).
    pub mark: Option<(usize, usize)>,
}

/// One variant's probes at the end of training, per sublayer (and per block where noted).
#[derive(Debug, Clone)]
pub struct Profile {
    pub arm: String,
    pub in_rms: Vec<f64>,
    pub out_rms: Vec<f64>,
    pub grad_norm: Vec<f64>,
    /// Per Transformer block; empty for runs trained before the probe existed.
    pub block_out_rms: Vec<f64>,
    /// Each seed's own profile, for the figures' seed bands (empty inside those).
    pub seeds: Vec<Profile>,
}

impl Profile {
    /// The per-block view of SPEC section 8, block `i` = sublayers `2i`, `2i+1`: the block's
    /// input RMS, its output RMS (`block_out_rms`, empty if not recorded) and the L2 norm of
    /// its gradient (root-sum-square of the two sublayers').
    pub fn per_block(&self) -> [Vec<f64>; 3] {
        [
            self.in_rms.iter().step_by(2).copied().collect(),
            self.block_out_rms.clone(),
            self.grad_norm
                .chunks(2)
                .map(|c| c.iter().map(|g| g * g).sum::<f64>().sqrt())
                .collect(),
        ]
    }
}
