//! From a sweep file to its runs: sizes, variants, budgets, learning rates and seeds,
//! crossed in a fixed order (task, size, residual, budget, seed), zipped and excluded.

use std::collections::HashSet;

use super::RunSpec;
use super::axes::{Arm, residuals, tasks};
use super::error::SpecError;
use super::grid::{excluded, grid_indices};
use super::presets::Size;
use super::sizes::sizes;
use super::wire::{Axis, LrSpec, SweepFile};
use crate::data::DataConfig;
use crate::model::ModelConfig;
use crate::model::config::ResidualConfig;
use crate::model::flops::param_counts;
use crate::train::config::{Budget, TrainConfig};

impl PlannedRun {
    /// The corpus or task it trains on: `shakespeare`, `khop hops=2`, ...
    pub fn task(&self) -> String {
        self.spec.data.corpus.label()
    }

    /// Its name in TensorBoard's run list: `mini block S=2 seed 3 (025fe2511f)`, with the
    /// task after the seed for synthetic tasks (`khop hops=2`); the id keeps names apart
    /// where runs differ in another axis.
    pub fn tensorboard_name(&self) -> String {
        let task = match self.spec.data.corpus.difficulty() {
            Some(_) => format!(" {}", self.task()),
            None => String::new(),
        };
        format!(
            "{} {} seed {}{task} ({})",
            self.size, self.arm, self.seed, self.id
        )
    }
}

/// One run of a sweep, with the axis values it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    pub id: String,
    pub spec: RunSpec,
    pub size: String,
    /// The residual label: `baseline`, `full`, `block S=4`, ...
    pub arm: String,
    pub block_size: Option<usize>,
    pub seed: u64,
    /// Where its size was written in the sweep file (`sizes.1`), for errors.
    pub size_key: String,
}

/// Expands `file` into runs, in a deterministic order, merging duplicate run ids.
pub fn expand(file: &SweepFile) -> Result<(Vec<PlannedRun>, usize), SpecError> {
    check_name(&file.name)?;
    let tasks = tasks(file)?;
    let sizes = sizes(file)?;
    let residuals = residuals(file)?;
    let budgets: Vec<Budget> = if file.budgets.is_empty() {
        vec![file.train.budget]
    } else {
        file.budgets.clone()
    };
    check_seeds(&file.seeds)?;
    let lens = [
        (Axis::Size, sizes.len()),
        (Axis::Residual, residuals.len()),
        (Axis::Budget, budgets.len()),
        (Axis::Seed, file.seeds.len()),
    ];
    let mut runs = Vec::new();
    let mut seen = HashSet::new();
    let mut merged = 0;
    let grid = grid_indices(file, &lens)?;
    for (data, idx) in tasks
        .iter()
        .flat_map(|t| grid.iter().map(move |idx| (t, idx)))
    {
        let (size, arm, seed) = (&sizes[idx[0]], &residuals[idx[1]], file.seeds[idx[3]]);
        if excluded(file, size, &arm.residual, arm.block_size, seed) {
            continue;
        }
        let point = GridPoint {
            size,
            size_index: idx[0],
            n_sizes: sizes.len(),
            arm,
            budget: budgets[idx[2]],
            budget_index: idx[2],
            seed,
            data,
        };
        let spec = resolve(file, &point)?;
        let id = spec.run_id();
        if !seen.insert(id.clone()) {
            merged += 1;
            continue;
        }
        runs.push(PlannedRun {
            id,
            arm: spec.model.arm_label(),
            spec,
            size: size.name.clone(),
            block_size: arm.block_size,
            seed,
            size_key: size.path.clone(),
        });
    }
    if runs.is_empty() {
        return Err(SpecError::at(
            "grid",
            "the grid is empty: every run is excluded; loosen grid.exclude",
        ));
    }
    check_reference_arm(file, &runs)?;
    Ok((runs, merged))
}

/// The longest sweep name: a folder name, well inside the 255 bytes a file name may have.
const MAX_NAME: usize = 128;

fn check_name(name: &str) -> Result<(), SpecError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(SpecError::at(
            "name",
            format!("`{name}` must be a folder name: letters, digits, - and _"),
        ));
    }
    if name.len() > MAX_NAME {
        return Err(SpecError::at(
            "name",
            format!(
                "{} characters; a sweep name is at most {MAX_NAME} (it names the results \
                 folder, and run paths must stay within the system's limits); shorten it",
                name.len()
            ),
        ));
    }
    Ok(())
}

/// `reference_arm`, when given, must be the label of one of the sweep's arms.
fn check_reference_arm(file: &SweepFile, runs: &[PlannedRun]) -> Result<(), SpecError> {
    let Some(reference) = &file.reference_arm else {
        return Ok(());
    };
    if runs.iter().any(|r| &r.arm == reference) {
        return Ok(());
    }
    let mut arms: Vec<&str> = runs.iter().map(|r| r.arm.as_str()).collect();
    arms.dedup();
    Err(SpecError::at(
        "reference_arm",
        format!(
            "no arm of this sweep is labelled `{reference}`; use one of: {}",
            arms.join(", ")
        ),
    ))
}

fn check_seeds(seeds: &[u64]) -> Result<(), SpecError> {
    if seeds.is_empty() {
        return Err(SpecError::at(
            "seeds",
            "the list is empty; give at least one seed (e.g. [0])",
        ));
    }
    if let Some((i, seed)) = seeds
        .iter()
        .enumerate()
        .find(|(i, s)| seeds[..*i].contains(s))
    {
        return Err(SpecError::at(
            &format!("seeds.{i}"),
            format!(
                "seed {seed} is listed twice; a repeated seed is the same run, not a new replicate"
            ),
        ));
    }
    Ok(())
}

/// One point of the grid, with the indices its errors are reported at.
struct GridPoint<'a> {
    size: &'a Size,
    size_index: usize,
    n_sizes: usize,
    arm: &'a Arm,
    budget: Budget,
    budget_index: usize,
    seed: u64,
    data: &'a DataConfig,
}

/// The RunSpec of one grid point, validated: the model (and block size against its depth),
/// the training settings and the budget against one optimizer step.
fn resolve(file: &SweepFile, p: &GridPoint) -> Result<RunSpec, SpecError> {
    let (size, residual) = (p.size, &p.arm.residual);
    let model = ModelConfig {
        vocab_size: file.model.vocab_size,
        d_model: size.d_model,
        n_blocks: size.n_blocks,
        n_heads: size.n_heads,
        ff_mult: file.model.ff_mult,
        context: file.model.context,
        residual: residual.clone(),
        value_residual: p.arm.value_residual,
    };
    model.validate().map_err(|e| {
        SpecError::at(
            &size.path,
            format!("size `{}` with {}: {e}", size.name, model.arm_label()),
        )
    })?;
    // The model accepts S > L (SPEC section 4: it behaves as S = L), but in a sweep it
    // would be the same model as S = L under another run id.
    if let ResidualConfig::AttnRes(c) = &model.residual
        && c.block_sizes.is_none()
        && c.block_size > 2 * model.n_blocks
    {
        return Err(SpecError::at(
            &size.path,
            format!(
                "size `{}` with {}: block_size {} exceeds the model's {} sublayers; S = {} is already one block, and a larger S trains the same model under another run id",
                size.name,
                residual.label(),
                c.block_size,
                2 * model.n_blocks,
                2 * model.n_blocks
            ),
        ));
    }
    let train = TrainConfig {
        lr: lr_for(file, p.size_index, p.n_sizes, &model)?,
        budget: p.budget,
        ..file.train.clone()
    };
    train
        .validate()
        .map_err(|(key, problem)| SpecError::at(&format!("train.{key}"), problem))?;
    let spec = RunSpec {
        model,
        data: p.data.clone(),
        train,
        seed: p.seed,
    };
    let step_tokens = spec.tokens_per_step();
    if spec.budget_tokens() < step_tokens as f64 {
        let key = if file.budgets.is_empty() {
            "train.budget".to_string()
        } else {
            format!("budgets.{}", p.budget_index)
        };
        return Err(SpecError::at(
            &key,
            format!(
                "size `{}`: the budget is {:.0} tokens, less than one optimizer step of {step_tokens} (batch_size {} x context {}); give at least {{tokens: {step_tokens}}}",
                size.name,
                spec.budget_tokens(),
                spec.train.batch_size,
                spec.model.context
            ),
        ));
    }
    Ok(spec)
}

/// `value` at `key` when it is a positive, finite number.
fn positive(key: &str, value: f64) -> Result<f64, SpecError> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(SpecError::at(
            key,
            format!("{value} must be a positive, finite number"),
        ))
    }
}

fn lr_for(
    file: &SweepFile,
    size_index: usize,
    n_sizes: usize,
    model: &ModelConfig,
) -> Result<f64, SpecError> {
    match &file.lr {
        None => Ok(file.train.lr),
        Some(LrSpec::PerSize(list)) => {
            if list.len() != n_sizes {
                return Err(SpecError::at(
                    "lr.per_size",
                    format!(
                        "gives {} learning rates for {n_sizes} sizes; give one per size",
                        list.len()
                    ),
                ));
            }
            positive(&format!("lr.per_size.{size_index}"), list[size_index])
        }
        Some(LrSpec::Rule {
            base,
            ref_params,
            exponent,
        }) => {
            positive("lr.rule.base", *base)?;
            positive("lr.rule.ref_params", *ref_params)?;
            if !exponent.is_finite() {
                return Err(SpecError::at(
                    "lr.rule.exponent",
                    format!("{exponent} must be a finite number (e.g. -0.2)"),
                ));
            }
            let n = param_counts(model).non_embedding as f64;
            positive("lr.rule", base * (n / ref_params).powf(*exponent))
        }
    }
}
