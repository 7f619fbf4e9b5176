//! From a sweep file to its runs: sizes, variants, budgets, learning rates and seeds,
//! crossed in a fixed order (size, residual, budget, seed), zipped and excluded.

use std::collections::HashSet;

use super::error::SpecError;
use super::presets::{Fixed, PRESETS, depth_width_shapes, preset};
use super::run::RunSpec;
use super::wire::{Axis, LrSpec, SizeEntry, SweepFile};
use crate::model::ModelConfig;
use crate::model::config::{ResidualConfig, Variant};
use crate::model::flops::param_counts;
use crate::train::config::{Budget, TrainConfig};

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
}

struct Size {
    name: String,
    d_model: usize,
    n_blocks: usize,
    n_heads: usize,
    /// Where it was written, for errors.
    path: String,
}

/// Expands `file` into runs, in a deterministic order, merging duplicate run ids.
pub fn expand(file: &SweepFile) -> Result<(Vec<PlannedRun>, usize), SpecError> {
    if file.name.is_empty()
        || !file
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(SpecError::at(
            "name",
            format!(
                "`{}` must be a folder name: letters, digits, - and _",
                file.name
            ),
        ));
    }
    let sizes = sizes(file)?;
    let residuals = residuals(file)?;
    let budgets: Vec<Budget> = if file.budgets.is_empty() {
        vec![file.train.budget]
    } else {
        file.budgets.clone()
    };
    if file.seeds.is_empty() {
        return Err(SpecError::at(
            "seeds",
            "the list is empty; give at least one seed (e.g. [0])",
        ));
    }
    let lens = [
        (Axis::Size, sizes.len()),
        (Axis::Residual, residuals.len()),
        (Axis::Budget, budgets.len()),
        (Axis::Seed, file.seeds.len()),
    ];
    let mut runs = Vec::new();
    let mut seen = HashSet::new();
    let mut merged = 0;
    for idx in grid_indices(file, &lens)? {
        let (size, (residual, block_size), budget, seed) = (
            &sizes[idx[0]],
            &residuals[idx[1]],
            budgets[idx[2]],
            file.seeds[idx[3]],
        );
        if excluded(file, size, residual, *block_size, seed) {
            continue;
        }
        let model = ModelConfig {
            vocab_size: file.model.vocab_size,
            d_model: size.d_model,
            n_blocks: size.n_blocks,
            n_heads: size.n_heads,
            ff_mult: file.model.ff_mult,
            context: file.model.context,
            residual: residual.clone(),
        };
        model.validate().map_err(|e| {
            SpecError::at(
                &size.path,
                format!("size `{}` with {}: {e}", size.name, residual.label()),
            )
        })?;
        let train = TrainConfig {
            lr: lr_for(file, idx[0], sizes.len(), &model)?,
            budget,
            ..file.train.clone()
        };
        train
            .validate()
            .map_err(|(key, problem)| SpecError::at(&format!("train.{key}"), problem))?;
        let spec = RunSpec {
            model,
            data: file.data.clone(),
            train,
            seed,
        };
        let id = spec.run_id();
        if !seen.insert(id.clone()) {
            merged += 1;
            continue;
        }
        runs.push(PlannedRun {
            id,
            arm: spec.model.residual.label(),
            spec,
            size: size.name.clone(),
            block_size: *block_size,
            seed,
        });
    }
    if runs.is_empty() {
        return Err(SpecError::at(
            "grid",
            "the grid is empty: every run is excluded; loosen grid.exclude",
        ));
    }
    Ok((runs, merged))
}

fn sizes(file: &SweepFile) -> Result<Vec<Size>, SpecError> {
    let head_dim = file.model.head_dim;
    let heads = |d: usize| (d / head_dim).max(1);
    match (&file.depth_width, file.sizes.is_empty()) {
        (Some(_), false) => Err(SpecError::at(
            "depth_width",
            "give either `sizes` or `depth_width`, not both",
        )),
        (None, true) => Err(SpecError::at(
            "sizes",
            "no model sizes: add `sizes: [micro, tiny]` or a `depth_width` family",
        )),
        (None, false) => file
            .sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let path = format!("sizes.{i}");
                match s {
                    SizeEntry::Preset(name) => {
                        let (d, n) = preset(name).ok_or_else(|| {
                            let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                            let hint = super::locate::did_you_mean(name, names.iter().copied())
                                .map(|m| format!("did you mean `{m}`? "))
                                .unwrap_or_default();
                            SpecError::at(
                                &path,
                                format!(
                                    "unknown size preset `{name}`; {hint}presets: {}",
                                    names.join(", ")
                                ),
                            )
                        })?;
                        Ok(Size {
                            name: name.clone(),
                            d_model: d,
                            n_blocks: n,
                            n_heads: heads(d),
                            path,
                        })
                    }
                    SizeEntry::Explicit(e) => Ok(Size {
                        name: e
                            .name
                            .clone()
                            .unwrap_or_else(|| format!("d{}x{}", e.d_model, e.n_blocks)),
                        d_model: e.d_model,
                        n_blocks: e.n_blocks,
                        n_heads: e.n_heads.unwrap_or_else(|| heads(e.d_model)),
                        path,
                    }),
                }
            })
            .collect(),
        (Some(dw), true) => {
            let targets: Vec<Fixed> = match (
                dw.non_embedding_params.is_empty(),
                dw.flops_per_token.is_empty(),
            ) {
                (false, true) => dw
                    .non_embedding_params
                    .iter()
                    .map(|&n| Fixed::NonEmbeddingParams(n))
                    .collect(),
                (true, false) => dw
                    .flops_per_token
                    .iter()
                    .map(|&f| Fixed::FlopsPerToken(f))
                    .collect(),
                _ => {
                    return Err(SpecError::at(
                        "depth_width",
                        "give exactly one positive target: non_embedding_params or flops_per_token (a number or a list)",
                    ));
                }
            };
            if targets.iter().any(|t| match t {
                Fixed::NonEmbeddingParams(x) | Fixed::FlopsPerToken(x) => {
                    !(x.is_finite() && *x > 0.0)
                }
            }) {
                return Err(SpecError::at(
                    "depth_width",
                    "targets must be positive numbers",
                ));
            }
            if dw.ratios.is_empty() || dw.ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
                return Err(SpecError::at(
                    "depth_width.ratios",
                    "give positive d_model/n_blocks ratios, e.g. [16, 32, 64]",
                ));
            }
            let template = ModelConfig {
                vocab_size: file.model.vocab_size,
                d_model: head_dim,
                n_blocks: 1,
                n_heads: 1,
                ff_mult: file.model.ff_mult,
                context: file.model.context,
                residual: ResidualConfig::Baseline,
            };
            let mut shapes: Vec<Size> = Vec::new();
            for fixed in targets {
                for (i, (d, n)) in depth_width_shapes(&dw.ratios, fixed, head_dim, &template)
                    .into_iter()
                    .enumerate()
                {
                    if shapes.iter().any(|s| s.d_model == d && s.n_blocks == n) {
                        continue;
                    }
                    shapes.push(Size {
                        name: format!("d{d}x{n}"),
                        d_model: d,
                        n_blocks: n,
                        n_heads: heads(d),
                        path: format!("depth_width.ratios.{i}"),
                    });
                }
            }
            Ok(shapes)
        }
    }
}

/// The residual axis, with every `block` entry that has no size expanded over `block_size`.
fn residuals(file: &SweepFile) -> Result<Vec<(ResidualConfig, Option<usize>)>, SpecError> {
    if file.residual.is_empty() {
        return Err(SpecError::at(
            "residual",
            "the list is empty; add variants such as [baseline, full]",
        ));
    }
    if let Some(i) = file.block_size.iter().position(|&s| s == 0) {
        return Err(SpecError::at(
            &format!("block_size.{i}"),
            "a block size must be at least 1",
        ));
    }
    let mut out = Vec::new();
    let mut used_list = false;
    for (i, entry) in file.residual.iter().enumerate() {
        let path = format!("residual.{i}");
        let wire = &entry.0;
        let sizes: Vec<Option<usize>> = match (wire.variant, wire.block_size) {
            (Variant::Block, None) if file.block_size.is_empty() => {
                return Err(SpecError::at(
                    &path,
                    "`block` needs a block_size: give one here or a top-level `block_size: [2, 4, 8]`",
                ));
            }
            (Variant::Block, None) => {
                used_list = true;
                file.block_size.iter().map(|&s| Some(s)).collect()
            }
            (_, s) => vec![s],
        };
        for s in sizes {
            let mut w = wire.clone();
            w.block_size = s;
            let config = ResidualConfig::try_from(w).map_err(|e| SpecError::at(&path, e))?;
            let block_size = match &config {
                ResidualConfig::AttnRes(c) => Some(c.block_size),
                _ => None,
            };
            out.push((config, block_size));
        }
    }
    if !file.block_size.is_empty() && !used_list {
        return Err(SpecError::at(
            "block_size",
            "no `block` entry in `residual` takes its size from this list; add `{variant: block}`",
        ));
    }
    Ok(out)
}

/// Index tuples `[size, residual, budget, seed]` of the grid, zipped axes advancing together.
fn grid_indices(file: &SweepFile, lens: &[(Axis, usize); 4]) -> Result<Vec<[usize; 4]>, SpecError> {
    let pos = |a: Axis| lens.iter().position(|(x, _)| *x == a).unwrap_or(0);
    // Each group is a set of axes that share one counter; ungrouped axes are alone.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut grouped = HashSet::new();
    for (g, zip) in file.grid.zip.iter().enumerate() {
        let path = format!("grid.zip.{g}");
        if zip.len() < 2 {
            return Err(SpecError::at(
                &path,
                "a zip group needs at least two axes, e.g. [size, budget]",
            ));
        }
        let axes: Vec<usize> = zip.iter().map(|&a| pos(a)).collect();
        let n = lens[axes[0]].1;
        for &a in &axes {
            if !grouped.insert(a) {
                return Err(SpecError::at(
                    &path,
                    format!("axis `{}` is zipped twice", axis_name(lens[a].0)),
                ));
            }
            if lens[a].1 != n {
                let desc: Vec<String> = axes
                    .iter()
                    .map(|&x| format!("{} has {}", axis_name(lens[x].0), lens[x].1))
                    .collect();
                return Err(SpecError::at(
                    &path,
                    format!("zipped axes must have equal lengths: {}", desc.join(", ")),
                ));
            }
        }
        groups.push(axes);
    }
    for a in 0..4 {
        if !grouped.contains(&a) {
            groups.push(vec![a]);
        }
    }
    // Keep the fixed axis order: sort groups by their first axis.
    groups.sort_by_key(|g| *g.iter().min().unwrap_or(&0));
    let mut out = vec![[0usize; 4]];
    for group in &groups {
        let n = lens[group[0]].1;
        out = out
            .into_iter()
            .flat_map(|base| {
                (0..n).map(move |i| {
                    let mut t = base;
                    for &a in group {
                        t[a] = i;
                    }
                    t
                })
            })
            .collect();
    }
    Ok(out)
}

fn excluded(
    file: &SweepFile,
    size: &Size,
    residual: &ResidualConfig,
    block_size: Option<usize>,
    seed: u64,
) -> bool {
    let variant = match residual {
        ResidualConfig::Baseline => Variant::Baseline,
        ResidualConfig::Denseformer => Variant::Denseformer,
        ResidualConfig::AttnRes(c) if c.block_size == 1 => Variant::Full,
        ResidualConfig::AttnRes(_) => Variant::Block,
    };
    file.grid.exclude.iter().any(|e| {
        e.size.as_ref().is_none_or(|s| *s == size.name)
            && e.variant.is_none_or(|v| v == variant)
            && e.block_size.is_none_or(|s| Some(s) == block_size)
            && e.seed.is_none_or(|s| s == seed)
    })
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
            Ok(list[size_index])
        }
        Some(LrSpec::Rule {
            base,
            ref_params,
            exponent,
        }) => {
            let n = param_counts(model).non_embedding as f64;
            Ok(base * (n / ref_params).powf(*exponent))
        }
    }
}

fn axis_name(a: Axis) -> &'static str {
    match a {
        Axis::Size => "size",
        Axis::Residual => "residual",
        Axis::Budget => "budget",
        Axis::Seed => "seed",
    }
}
