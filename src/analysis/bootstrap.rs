//! How a bootstrap resample of a sweep is drawn (SPEC section 11).
//!
//! The noise we claim to measure is seed noise, so the bootstrap resamples seeds *inside
//! each cell* (size and budget), with the same draw for every arm: every resample keeps
//! every size, and the comparison stays paired. Two small-sample corrections make the
//! percentile interval honest at 3 seeds: each seed's deviation from its cell mean is
//! scaled by `sqrt(n / (n - 1))` (resampling n values with replacement shrinks their
//! variance by `(n - 1) / n`), and by `t(0.975, ν) / z(0.975)`, so the interval has
//! Student-t width rather than normal width. `ν` is the Welch-Satterthwaite degrees of
//! freedom of the multiplier's linearised variance: a multiplier read at the largest
//! compute rests mostly on the largest cells, whose seeds carry fewer degrees of freedom
//! than the pooled `Σ (n_c - 1)`. With one seed per cell there is no seed noise to
//! resample; the residuals of the full fit are resampled across cells instead (the same
//! draw for every arm), scaled by `sqrt(N / (N - P))` and the same t factor on `N - P`.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::design::Design;
use super::fit::{ArmPoints, EMode, Law, multiplier_at, parameter_count, refine};
use super::stats::{LEVEL, normal_quantile, t_quantile};

/// The resampling scheme a fit's intervals come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resampling {
    /// Seeds drawn with replacement inside each cell, the same draw for every arm.
    Seeds {
        cells: usize,
        /// Cells with a single seed: held at their value in every resample.
        fixed_cells: usize,
        /// Degrees of freedom of the pooled seed variance, `Σ (n_c - 1)`.
        dof: usize,
        /// Welch-Satterthwaite degrees of freedom of the multiplier's linearised variance
        /// (the smallest over arms): the Student-t width uses these. Cells that move the
        /// multiplier most weigh most, so this is at most `dof`.
        effective_dof: f64,
    },
    /// One seed per cell: residuals of the full fit resampled across cells.
    Residuals { points: usize, parameters: usize },
    /// No interval can be had.
    Unavailable { why: String },
}

impl Resampling {
    pub fn choose(design: &Design, mode: EMode) -> Self {
        let cells = design.cells.len();
        let multi = design.seeds.iter().filter(|s| s.len() > 1).count();
        if multi > 0 {
            let dof = design.seeds.iter().map(|s| s.len().saturating_sub(1)).sum();
            return Self::Seeds {
                cells,
                fixed_cells: cells - multi,
                dof,
                effective_dof: dof as f64,
            };
        }
        let points: usize = design
            .runs
            .iter()
            .map(|cells| cells.iter().filter(|c| !c.is_empty()).count())
            .sum();
        let parameters = parameter_count(design.arms.len(), mode);
        if points <= parameters {
            return Self::Unavailable {
                why: format!(
                    "one seed per cell and {points} points for {parameters} fitted parameters: no seed noise to resample and no residual degrees of freedom; run more seeds"
                ),
            };
        }
        Self::Residuals { points, parameters }
    }

    /// One sentence for the report and the command line.
    pub fn describe(&self) -> String {
        match self {
            Self::Seeds {
                cells,
                fixed_cells,
                dof,
                effective_dof,
            } => {
                let fixed = if *fixed_cells > 0 {
                    format!("; {fixed_cells} cell(s) with one seed held fixed")
                } else {
                    String::new()
                };
                format!(
                    "seeds resampled within each of {cells} cells (size, budget), the same draw for every arm; deviations scaled for n - 1 and to Student-t width on {effective_dof:.1} df (Welch-Satterthwaite; {dof} pooled){fixed}"
                )
            }
            Self::Residuals { points, parameters } => format!(
                "one seed per cell, so there is no seed noise to resample: a residual bootstrap of the fit ({points} points, {parameters} parameters, {} df), the same draw for every arm",
                points - parameters
            ),
            Self::Unavailable { why } => format!("no interval: {why}"),
        }
    }
}

/// `t(0.975, df) / z(0.975)`: widens a normal-width percentile interval to Student-t width.
fn t_factor(df: f64) -> f64 {
    if df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    let q = 0.5 + LEVEL / 2.0;
    t_quantile(q, df) / normal_quantile(q)
}

/// Draws resampled fit inputs for one design and scheme.
pub struct Resampler<'a> {
    design: &'a Design,
    scheme: &'a Resampling,
    /// Per arm and cell: the seed mean (Seeds) or the full fit's prediction (Residuals).
    centre: Vec<Vec<f64>>,
    /// Per cell (Seeds) or one for all (Residuals): the deviation scale.
    scale: Vec<f64>,
    /// Residuals only: per arm and cell, `ln(mean) - ln(prediction)`.
    residual: Vec<Vec<Option<f64>>>,
}

impl<'a> Resampler<'a> {
    pub fn new(design: &'a Design, scheme: &'a Resampling, laws: &[Law]) -> Self {
        let means: Vec<Vec<f64>> = design
            .runs
            .iter()
            .map(|cells| cells.iter().map(|c| c.mean()).collect())
            .collect();
        match scheme {
            Resampling::Seeds { effective_dof, .. } => {
                let t = t_factor(*effective_dof);
                let scale = design
                    .seeds
                    .iter()
                    .map(|s| {
                        let n = s.len() as f64;
                        if s.len() > 1 {
                            (n / (n - 1.0)).sqrt() * t
                        } else {
                            0.0
                        }
                    })
                    .collect();
                Self {
                    design,
                    scheme,
                    centre: means,
                    scale,
                    residual: Vec::new(),
                }
            }
            Resampling::Residuals { points, parameters } => {
                let n = *points as f64;
                let df = points - parameters;
                let scale = vec![(n / df as f64).sqrt() * t_factor(df as f64)];
                let centre: Vec<Vec<f64>> = design
                    .runs
                    .iter()
                    .zip(laws)
                    .map(|(cells, law)| cells.iter().map(|c| law.loss(c.compute)).collect())
                    .collect();
                let residual = design
                    .runs
                    .iter()
                    .zip(&centre)
                    .map(|(cells, pred)| {
                        cells
                            .iter()
                            .zip(pred)
                            .map(|(c, p)| (!c.is_empty()).then(|| c.mean().ln() - p.ln()))
                            .collect()
                    })
                    .collect();
                Self {
                    design,
                    scheme,
                    centre,
                    scale,
                    residual,
                }
            }
            Resampling::Unavailable { .. } => Self {
                design,
                scheme,
                centre: means,
                scale: Vec::new(),
                residual: Vec::new(),
            },
        }
    }

    /// One resample: per arm, a loss for every cell it has.
    pub fn draw(&self, rng: &mut impl Rng) -> Vec<ArmPoints> {
        let cells = self.design.cells.len();
        let value: Vec<Vec<f64>> = match self.scheme {
            Resampling::Seeds { .. } => {
                // One draw of seed indices per cell, shared by every arm (paired).
                let draws: Vec<Vec<usize>> = self
                    .design
                    .seeds
                    .iter()
                    .map(|s| (0..s.len()).map(|_| rng.random_range(0..s.len())).collect())
                    .collect();
                self.design
                    .runs
                    .iter()
                    .zip(&self.centre)
                    .map(|(arm_cells, means)| {
                        (0..cells)
                            .map(|c| {
                                let devs: Vec<f64> = draws[c]
                                    .iter()
                                    .filter_map(|&j| arm_cells[c].loss[j])
                                    .map(|l| l - means[c])
                                    .collect();
                                if devs.is_empty() {
                                    return means[c];
                                }
                                means[c]
                                    + self.scale[c] * devs.iter().sum::<f64>() / devs.len() as f64
                            })
                            .collect()
                    })
                    .collect()
            }
            Resampling::Residuals { .. } => {
                // Cell c takes the residual of cell draw[c], in every arm.
                let draw: Vec<usize> = (0..cells).map(|_| rng.random_range(0..cells)).collect();
                self.centre
                    .iter()
                    .zip(&self.residual)
                    .map(|(pred, res)| {
                        (0..cells)
                            .map(|c| {
                                let r = res[draw[c]].unwrap_or(0.0);
                                pred[c] * (self.scale[0] * r).exp()
                            })
                            .collect()
                    })
                    .collect()
            }
            Resampling::Unavailable { .. } => self.centre.clone(),
        };
        self.design
            .runs
            .iter()
            .zip(&value)
            .map(|(arm_cells, v)| {
                let present: Vec<usize> =
                    (0..cells).filter(|&c| !arm_cells[c].is_empty()).collect();
                ArmPoints {
                    compute: present.iter().map(|&c| arm_cells[c].compute).collect(),
                    loss: present.iter().map(|&c| v[c]).collect(),
                }
            })
            .collect()
    }
}

/// `ln M` of one arm at one compute, linearised in the cell means: its value, the variance
/// the seed noise gives it and that variance's Welch-Satterthwaite degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linearised {
    pub ln_m: f64,
    pub var: f64,
    pub dof: f64,
}

/// [`Linearised`] `ln M` at `c` for every arm but the baseline (index `k - 1` for arm `k`).
///
/// `ln M` is linearised in the cell means by finite differences (each arm's and the
/// baseline's mean in each cell nudged by `STEP` nats and refitted from the full fit). Per
/// seed of a cell, `x = w_arm·L_arm + w_base·L_base` (the same seed, so pairing is kept);
/// with `v_c = var(x) / n_c`, `ν = (Σ v_c)² / Σ v_c² / (n_c - 1)`. None when the fit does
/// not respond smoothly (an infinite multiplier, a failed refit) or no cell has two seeds.
pub fn linearise(design: &Design, laws: &[Law], mode: EMode, c: f64) -> Vec<Option<Linearised>> {
    const STEP: f64 = 1e-4;
    let base_points = design.arm_points();
    let ln_m = |points: &[ArmPoints], k: usize| -> Option<f64> {
        let f = refine(points, mode, laws)?;
        let m = multiplier_at(&f.laws[0], &f.laws[k], c).ln();
        m.is_finite().then_some(m)
    };
    // The slot of cell `c` in arm `k`'s points (cells it lacks are skipped there).
    let slot = |k: usize, cell: usize| -> Option<usize> {
        let runs = &design.runs[k];
        (!runs[cell].is_empty()).then(|| (0..cell).filter(|&i| !runs[i].is_empty()).count())
    };
    let nudged = |k: usize, cell: usize| -> Option<Vec<ArmPoints>> {
        let mut p = base_points.clone();
        p[k].loss[slot(k, cell)?] += STEP;
        Some(p)
    };
    let arm = |k: usize| -> Option<Linearised> {
        let m0 = ln_m(&base_points, k)?;
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        for cell in 0..design.cells.len() {
            let n = design.seeds[cell].len();
            let (Some(pa), Some(pb)) = (nudged(k, cell), nudged(0, cell)) else {
                continue;
            };
            if n < 2 {
                continue;
            }
            let w_arm = (ln_m(&pa, k)? - m0) / STEP;
            let w_base = (ln_m(&pb, k)? - m0) / STEP;
            let (arm, base) = (&design.runs[k][cell], &design.runs[0][cell]);
            let x: Vec<f64> = arm
                .loss
                .iter()
                .zip(&base.loss)
                .filter_map(|(a, b)| Some(w_arm * (*a)? + w_base * (*b)?))
                .collect();
            if x.len() < 2 {
                continue;
            }
            let (_, sd, pairs) = super::stats::mean_sd(&x);
            let v = sd * sd / pairs as f64;
            sum += v;
            sum_sq += v * v / (pairs - 1) as f64;
        }
        (sum_sq > 0.0).then(|| Linearised {
            ln_m: m0,
            var: sum,
            dof: sum * sum / sum_sq,
        })
    };
    (1..design.arms.len()).map(arm).collect()
}
