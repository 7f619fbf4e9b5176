//! The experimental design behind a fit: runs arranged by arm, cell and seed.
//!
//! A *cell* is everything that sets a run's compute except the residual arm: its size
//! (shape) and its budget. Seeds are the replicates inside a cell; the same seed in two
//! arms is a pair (same data order, same initial weights of the shared parts).

use super::fit::ArmPoints;

/// One finished run as the fit sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    pub arm: String,
    /// The cell's label: the size name, with the budget when a size has several.
    pub cell: String,
    pub seed: u64,
    /// PFLOP/s-days.
    pub compute: f64,
    pub loss: f64,
}

/// One arm in one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRuns {
    /// Mean compute of the runs (equal across seeds).
    pub compute: f64,
    /// Loss per seed of the cell (`Design::seeds[c]`), `None` where this arm lacks it.
    pub loss: Vec<Option<f64>>,
}

impl CellRuns {
    pub fn observed(&self) -> impl Iterator<Item = f64> + '_ {
        self.loss.iter().flatten().copied()
    }
    pub fn mean(&self) -> f64 {
        let (sum, n) = self.observed().fold((0.0, 0), |(s, n), v| (s + v, n + 1));
        sum / n as f64
    }
    pub fn is_empty(&self) -> bool {
        self.loss.iter().all(Option::is_none)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Design {
    /// The baseline first, then arms in first-seen order.
    pub arms: Vec<String>,
    /// Cells in order of increasing compute (the baseline's, or the first arm having it).
    pub cells: Vec<String>,
    /// The seeds of each cell (union over arms, ascending).
    pub seeds: Vec<Vec<u64>>,
    /// `[arm][cell]`.
    pub runs: Vec<Vec<CellRuns>>,
}

impl Design {
    pub fn new(points: &[RunPoint], baseline: &str) -> Self {
        let mut arms = vec![baseline.to_string()];
        let mut cells: Vec<String> = Vec::new();
        for p in points {
            if !arms.contains(&p.arm) {
                arms.push(p.arm.clone());
            }
            if !cells.contains(&p.cell) {
                cells.push(p.cell.clone());
            }
        }
        let compute_of = |cell: &str| {
            let of = |arm: &str| {
                let v: Vec<f64> = points
                    .iter()
                    .filter(|p| p.cell == cell && p.arm == arm)
                    .map(|p| p.compute)
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            arms.iter().find_map(|a| of(a)).unwrap_or(f64::NAN)
        };
        cells.sort_by(|a, b| compute_of(a).total_cmp(&compute_of(b)));
        let seeds: Vec<Vec<u64>> = cells
            .iter()
            .map(|c| {
                let mut s: Vec<u64> = points
                    .iter()
                    .filter(|p| &p.cell == c)
                    .map(|p| p.seed)
                    .collect();
                s.sort();
                s.dedup();
                s
            })
            .collect();
        let runs = arms
            .iter()
            .map(|arm| {
                cells
                    .iter()
                    .zip(&seeds)
                    .map(|(cell, cell_seeds)| {
                        let mine: Vec<&RunPoint> = points
                            .iter()
                            .filter(|p| &p.arm == arm && &p.cell == cell)
                            .collect();
                        let compute = if mine.is_empty() {
                            f64::NAN
                        } else {
                            mine.iter().map(|p| p.compute).sum::<f64>() / mine.len() as f64
                        };
                        // A repeated (arm, cell, seed) is averaged: it is one replicate.
                        let loss = cell_seeds
                            .iter()
                            .map(|s| {
                                let v: Vec<f64> = mine
                                    .iter()
                                    .filter(|p| p.seed == *s)
                                    .map(|p| p.loss)
                                    .collect();
                                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                            })
                            .collect();
                        CellRuns { compute, loss }
                    })
                    .collect()
            })
            .collect();
        Self {
            arms,
            cells,
            seeds,
            runs,
        }
    }

    /// The fit's input: per arm, the seed mean of every cell it has.
    pub fn arm_points(&self) -> Vec<ArmPoints> {
        self.runs
            .iter()
            .map(|cells| {
                let present: Vec<&CellRuns> = cells.iter().filter(|c| !c.is_empty()).collect();
                ArmPoints {
                    compute: present.iter().map(|c| c.compute).collect(),
                    loss: present.iter().map(|c| c.mean()).collect(),
                }
            })
            .collect()
    }

    /// The same design without cell `drop` (fit validation).
    pub fn without_cell(&self, drop: usize) -> Self {
        let keep = |i: usize| i != drop;
        Self {
            arms: self.arms.clone(),
            cells: (0..self.cells.len())
                .filter(|&i| keep(i))
                .map(|i| self.cells[i].clone())
                .collect(),
            seeds: (0..self.seeds.len())
                .filter(|&i| keep(i))
                .map(|i| self.seeds[i].clone())
                .collect(),
            runs: self
                .runs
                .iter()
                .map(|cells| {
                    (0..cells.len())
                        .filter(|&i| keep(i))
                        .map(|i| cells[i].clone())
                        .collect()
                })
                .collect(),
        }
    }

    /// The compute of every (arm, cell) that has runs.
    fn computes(&self) -> impl Iterator<Item = f64> + '_ {
        self.runs
            .iter()
            .flatten()
            .filter(|c| !c.is_empty())
            .map(|c| c.compute)
    }

    /// The largest compute of any run.
    pub fn largest_compute(&self) -> f64 {
        self.computes().fold(f64::MIN, f64::max)
    }

    pub fn smallest_compute(&self) -> f64 {
        self.computes().fold(f64::MAX, f64::min)
    }

    /// `arm - baseline` in cell `cell`, over the seeds both have (the pairs).
    pub fn paired_differences(&self, arm: usize, cell: usize) -> Vec<f64> {
        self.runs[arm][cell]
            .loss
            .iter()
            .zip(&self.runs[0][cell].loss)
            .filter_map(|(a, b)| Some((*a)? - (*b)?))
            .collect()
    }

    /// Distinct seeds an arm has, over all cells.
    pub fn seed_count(&self, arm: usize) -> usize {
        let mut s: Vec<u64> = self.runs[arm]
            .iter()
            .zip(&self.seeds)
            .flat_map(|(c, seeds)| {
                c.loss
                    .iter()
                    .zip(seeds)
                    .filter(|(l, _)| l.is_some())
                    .map(|(_, s)| *s)
            })
            .collect();
        s.sort();
        s.dedup();
        s.len()
    }
}
