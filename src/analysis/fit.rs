//! The scaling fit of SPEC section 10: `L_k(C) = E + A_k * C^(-alpha_k)` in log space with a
//! Huber loss (delta 1e-3), minimised by L-BFGS (argmin) from a grid of starts.

use argmin::core::{CostFunction, Error as ArgminError, Executor, Gradient};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use serde::{Deserialize, Serialize};

pub const HUBER_DELTA: f64 = 1e-3;

/// How the irreducible loss `E` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum EMode {
    /// One `E` for every arm (the default).
    Shared,
    /// Each arm its own `E`.
    PerArm,
    /// `E = 0`: the report's pure power law `A * C^-alpha`.
    Zero,
}

impl EMode {
    /// How `E` was treated, in words: "shared", "per arm" or "fixed at 0".
    pub fn describe(self) -> &'static str {
        match self {
            EMode::Shared => "shared",
            EMode::PerArm => "per arm",
            EMode::Zero => "fixed at 0",
        }
    }
}

/// One arm's points: compute (PFLOP/s-days) and loss (seeds already averaged).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmPoints {
    pub compute: Vec<f64>,
    pub loss: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Law {
    pub a: f64,
    pub alpha: f64,
    pub e: f64,
}

/// `A,ALPHA,E` (`L = E + A C^-ALPHA`), as `power --law` takes it.
impl std::str::FromStr for Law {
    type Err = LawError;

    fn from_str(text: &str) -> Result<Self, LawError> {
        let v: Vec<f64> = text
            .split(',')
            .map(|x| {
                let x = x.trim();
                x.parse::<f64>()
                    .map_err(|e| LawError::NotANumber(x.into(), e))
            })
            .collect::<Result<_, _>>()?;
        match v[..] {
            [a, alpha, e] if a > 0.0 && alpha > 0.0 && e >= 0.0 => Ok(Law { a, alpha, e }),
            _ => Err(LawError::OutOfRange),
        }
    }
}

/// A law given as text that is not `A,ALPHA,E`.
#[derive(Debug, thiserror::Error)]
pub enum LawError {
    #[error("`{0}`: {1}")]
    NotANumber(String, std::num::ParseFloatError),
    #[error("give three numbers A,ALPHA,E with A > 0, ALPHA > 0, E >= 0")]
    OutOfRange,
}

impl Law {
    pub fn loss(&self, c: f64) -> f64 {
        self.e + self.a * c.powf(-self.alpha)
    }

    /// The compute that reaches loss `l` (infinite when `l <= E`).
    pub fn compute_for(&self, l: f64) -> f64 {
        if l <= self.e {
            return f64::INFINITY;
        }
        (self.a / (l - self.e)).powf(1.0 / self.alpha)
    }
}

/// `C_base(L_m(C)) / C`: how much more compute the baseline needs to match arm `m` at `C`.
pub fn multiplier_at(base: &Law, arm: &Law, c: f64) -> f64 {
    base.compute_for(arm.loss(c)) / c
}

/// The fitted laws of every arm (same order as the input) and the final objective.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub laws: Vec<Law>,
    pub objective: f64,
}

fn huber(r: f64) -> (f64, f64) {
    if r.abs() <= HUBER_DELTA {
        (0.5 * r * r, r)
    } else {
        (
            HUBER_DELTA * (r.abs() - 0.5 * HUBER_DELTA),
            HUBER_DELTA * r.signum(),
        )
    }
}

/// Parameters: `[log E (absent for E = 0 or per arm), then per arm: q, alpha (, log E)]`,
/// where `q = log(A C0^-alpha)` is the log of the power term at `C0`, the geometric mean of
/// the computes. Centring `ln C` this way decorrelates `q` from `alpha` (with `ln C` near
/// -18, `log A` and `alpha` move almost in lockstep), so L-BFGS converges in far fewer steps
/// and fewer starts stall early. The fitted law is the same.
struct Problem<'a> {
    arms: &'a [ArmPoints],
    mode: EMode,
    log_c0: f64,
}

impl<'a> Problem<'a> {
    fn new(arms: &'a [ArmPoints], mode: EMode) -> Self {
        let logs: Vec<f64> = arms
            .iter()
            .flat_map(|a| a.compute.iter().map(|c| c.ln()))
            .collect();
        let log_c0 = if logs.is_empty() {
            0.0
        } else {
            logs.iter().sum::<f64>() / logs.len() as f64
        };
        Self { arms, mode, log_c0 }
    }

    /// `q` for a law's `log A` and `alpha`.
    fn centred(&self, log_a: f64, alpha: f64) -> f64 {
        log_a - alpha * self.log_c0
    }

    fn per_arm(&self) -> usize {
        if self.mode == EMode::PerArm { 3 } else { 2 }
    }
    fn offset(&self) -> usize {
        usize::from(self.mode == EMode::Shared)
    }

    fn unpack(&self, p: &[f64], k: usize) -> (f64, f64, Option<f64>) {
        let base = self.offset() + k * self.per_arm();
        let log_e = match self.mode {
            EMode::Shared => Some(p[0]),
            EMode::PerArm => Some(p[base + 2]),
            EMode::Zero => None,
        };
        (p[base], p[base + 1], log_e)
    }

    fn laws(&self, p: &[f64]) -> Vec<Law> {
        (0..self.arms.len())
            .map(|k| {
                let (q, alpha, log_e) = self.unpack(p, k);
                Law {
                    a: (q + alpha * self.log_c0).exp(),
                    alpha,
                    e: log_e.map_or(0.0, f64::exp),
                }
            })
            .collect()
    }

    /// Objective and gradient.
    fn eval(&self, p: &[f64]) -> (f64, Vec<f64>) {
        let mut grad = vec![0.0; p.len()];
        let mut total = 0.0;
        for (k, arm) in self.arms.iter().enumerate() {
            let (q, alpha, log_e) = self.unpack(p, k);
            let base = self.offset() + k * self.per_arm();
            for (&c, &l) in arm.compute.iter().zip(&arm.loss) {
                let x = c.ln() - self.log_c0;
                let power = (q - alpha * x).exp(); // A C^-alpha
                let e = log_e.map_or(0.0, f64::exp);
                let pred = (e + power).ln();
                let (h, dh) = huber(pred - l.ln());
                total += h;
                let share = power / (e + power);
                grad[base] += dh * share;
                grad[base + 1] += dh * share * -x;
                match self.mode {
                    EMode::Shared => grad[0] += dh * (1.0 - share),
                    EMode::PerArm => grad[base + 2] += dh * (1.0 - share),
                    EMode::Zero => {}
                }
            }
        }
        (total, grad)
    }
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, p: &Vec<f64>) -> Result<f64, ArgminError> {
        Ok(self.eval(p).0)
    }
}

impl Gradient for Problem<'_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, p: &Vec<f64>) -> Result<Vec<f64>, ArgminError> {
        Ok(self.eval(p).1)
    }
}

/// Fits every arm from the grid of starts; `None` when some arm has fewer than two
/// distinct compute values.
pub fn fit(arms: &[ArmPoints], mode: EMode) -> Option<Fit> {
    fit_with(arms, mode, None)
}

/// The bootstrap's refit: the same grid of starts as [`fit`] (so a resample can land in
/// another basin than the full fit), plus `warm` as one more start. Taking the best of
/// both can only lower the objective, never narrow the search.
pub fn fit_with(arms: &[ArmPoints], mode: EMode, warm: Option<&[Law]>) -> Option<Fit> {
    if arms.is_empty() || arms.iter().any(|a| distinct(&a.compute) < 2) {
        return None;
    }
    let min_loss = arms
        .iter()
        .flat_map(|a| a.loss.iter().copied())
        .fold(f64::INFINITY, f64::min);
    let problem = Problem::new(arms, mode);
    let e_fractions: &[f64] = if mode == EMode::Zero {
        &[0.0]
    } else {
        &[0.1, 0.4, 0.7, 0.9]
    };
    let mut starts = Vec::new();
    for &alpha in &[0.02, 0.05, 0.1, 0.2, 0.4] {
        for &frac in e_fractions {
            starts.push(start_point(&problem, alpha, frac * min_loss));
        }
    }
    if let Some(laws) = warm {
        starts.push(warm_start(&problem, laws));
    }
    let mut best: Option<(f64, Vec<f64>)> = None;
    for start in starts {
        let Some(p) = minimise(&problem, start) else {
            continue;
        };
        let obj = problem.eval(&p).0;
        if obj.is_finite() && best.as_ref().is_none_or(|(b, _)| obj < *b) {
            best = Some((obj, p));
        }
    }
    best.map(|(objective, p)| Fit {
        laws: problem.laws(&p),
        objective,
    })
}

/// A refit from `laws` alone (one start): for a small perturbation of the data, where the
/// answer must stay in the same basin.
pub fn refine(arms: &[ArmPoints], mode: EMode, laws: &[Law]) -> Option<Fit> {
    if arms.is_empty() || arms.iter().any(|a| distinct(&a.compute) < 2) {
        return None;
    }
    let problem = Problem::new(arms, mode);
    let p = minimise(&problem, warm_start(&problem, laws))?;
    let objective = problem.eval(&p).0;
    objective.is_finite().then(|| Fit {
        laws: problem.laws(&p),
        objective,
    })
}

/// The parameter vector of `laws`.
fn warm_start(problem: &Problem, laws: &[Law]) -> Vec<f64> {
    let mode = problem.mode;
    let mut start = Vec::new();
    if mode == EMode::Shared {
        start.push(laws[0].e.max(1e-6).ln());
    }
    for law in laws {
        start.push(problem.centred(law.a.ln(), law.alpha));
        start.push(law.alpha);
        if mode == EMode::PerArm {
            start.push(law.e.max(1e-6).ln());
        }
    }
    start
}

/// Number of fitted parameters for `arms` arms.
pub fn parameter_count(arms: usize, mode: EMode) -> usize {
    match mode {
        EMode::Shared => 1 + 2 * arms,
        EMode::PerArm => 3 * arms,
        EMode::Zero => 2 * arms,
    }
}

/// How many different values `xs` holds.
pub(super) fn distinct(xs: &[f64]) -> usize {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v.len()
}

/// A start with the given `alpha` and `E`, and each arm's `A` from least squares.
fn start_point(problem: &Problem, alpha: f64, e: f64) -> Vec<f64> {
    let mut p = Vec::new();
    if problem.mode == EMode::Shared {
        p.push(e.max(1e-6).ln());
    }
    for arm in problem.arms {
        let n = arm.loss.len() as f64;
        let log_a = arm
            .compute
            .iter()
            .zip(&arm.loss)
            .map(|(&c, &l)| ((l - e).max(1e-6)).ln() + alpha * c.ln())
            .sum::<f64>()
            / n;
        p.push(problem.centred(log_a, alpha));
        p.push(alpha);
        if problem.mode == EMode::PerArm {
            p.push(e.max(1e-6).ln());
        }
    }
    p
}

fn minimise(problem: &Problem, start: Vec<f64>) -> Option<Vec<f64>> {
    let line_search = MoreThuenteLineSearch::new();
    let solver = LBFGS::new(line_search, 10)
        .with_tolerance_cost(1e-14)
        .ok()?;
    let result = Executor::new(
        Problem {
            arms: problem.arms,
            mode: problem.mode,
            log_c0: problem.log_c0,
        },
        solver,
    )
    .configure(|state| state.param(start).max_iters(500))
    .run()
    .ok()?;
    result.state.best_param
}
