//! The task and residual axes of a sweep: each task's data, each residual entry's arms
//! (a `block` entry without a size expanded over the top-level `block_size` list).

use super::error::SpecError;
use super::wire::SweepFile;
use crate::data::{CorpusConfig, DataConfig};
use crate::model::config::{ResidualConfig, Variant};

/// The data of each task: `data` alone, or `data` with each of `tasks` as its corpus, each
/// validated against the context (errors at `data.corpus` or `tasks.N`).
pub(crate) fn tasks(file: &SweepFile) -> Result<Vec<DataConfig>, SpecError> {
    let context = file.model.context;
    let with = |corpus: &CorpusConfig| DataConfig {
        corpus: corpus.clone(),
        tokenizer: file.data.tokenizer.clone(),
    };
    let listed: Vec<(String, DataConfig)> = match (&file.data.corpus, file.tasks.is_empty()) {
        (Some(c), true) => vec![("data.corpus".into(), with(c))],
        (None, false) => file
            .tasks
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("tasks.{i}"), with(c)))
            .collect(),
        (Some(_), false) => {
            return Err(SpecError::at(
                "tasks",
                "give either data.corpus or tasks, not both",
            ));
        }
        (None, true) => {
            return Err(SpecError::at(
                "data.corpus",
                "missing: give a corpus (e.g. `corpus: shakespeare`) or a `tasks` list",
            ));
        }
    };
    let mut out: Vec<DataConfig> = Vec::new();
    for (key, data) in listed {
        crate::data::validate_config(&data, context).map_err(|(at, e)| {
            SpecError::at(
                if at == "data.corpus" {
                    key.as_str()
                } else {
                    at
                },
                e,
            )
        })?;
        if out.contains(&data) {
            return Err(SpecError::at(
                &key,
                format!(
                    "task `{}` is listed twice; a repeated task is the same runs, not new ones",
                    data.corpus.label()
                ),
            ));
        }
        out.push(data);
    }
    Ok(out)
}

/// One point of the residual axis: the family, its block size, and the value residual.
pub(crate) struct Arm {
    pub(crate) residual: ResidualConfig,
    pub(crate) block_size: Option<usize>,
    pub(crate) value_residual: bool,
}

/// The residual axis, with every `block` entry that has no size expanded over `block_size`.
pub(crate) fn residuals(file: &SweepFile) -> Result<Vec<Arm>, SpecError> {
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
            (Variant::Block, None) if wire.block_sizes.is_some() => vec![None],
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
            let value_residual = w.value_residual.take().unwrap_or(false);
            let config = ResidualConfig::try_from(w).map_err(|e| SpecError::at(&path, e))?;
            // Blocks of several lengths have no one S for the block-size axis.
            let block_size = match &config {
                ResidualConfig::AttnRes(c) if c.block_sizes.is_none() => Some(c.block_size),
                _ => None,
            };
            out.push(Arm {
                residual: config,
                block_size,
                value_residual,
            });
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
