//! The grid: the cartesian product of the size, residual, budget and seed axes, in that
//! order, with zipped axes advancing together and excluded points dropped.

use std::collections::HashSet;

use super::error::SpecError;
use super::presets::Size;
use super::wire::{Axis, SweepFile};
use crate::model::config::{HyperKind, ResidualConfig, Variant};

/// Index tuples `[size, residual, budget, seed]` of the grid, zipped axes advancing together.
pub(crate) fn grid_indices(
    file: &SweepFile,
    lens: &[(Axis, usize); 4],
) -> Result<Vec<[usize; 4]>, SpecError> {
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

pub(crate) fn excluded(
    file: &SweepFile,
    size: &Size,
    residual: &ResidualConfig,
    block_size: Option<usize>,
    seed: u64,
) -> bool {
    let variant = match residual {
        ResidualConfig::Baseline => Variant::Baseline,
        ResidualConfig::Denseformer => Variant::Denseformer,
        ResidualConfig::AttnRes(c) if c.is_full() => Variant::Full,
        ResidualConfig::AttnRes(_) => Variant::Block,
        ResidualConfig::Hyper(h) => match h.kind {
            HyperKind::Hc { .. } => Variant::Hc,
            HyperKind::Mhc { .. } => Variant::Mhc,
            HyperKind::MhcLite => Variant::MhcLite,
            HyperKind::MhcAttnRes => Variant::MhcAttnRes,
        },
    };
    file.grid.exclude.iter().any(|e| {
        e.size.as_ref().is_none_or(|s| s.contains(&size.name))
            && e.variant.as_ref().is_none_or(|v| v.contains(&variant))
            && e.block_size
                .as_ref()
                .is_none_or(|s| block_size.is_some_and(|b| s.contains(&b)))
            && e.seed.as_ref().is_none_or(|s| s.contains(&seed))
    })
}

fn axis_name(a: Axis) -> &'static str {
    match a {
        Axis::Size => "size",
        Axis::Residual => "residual",
        Axis::Budget => "budget",
        Axis::Seed => "seed",
    }
}
