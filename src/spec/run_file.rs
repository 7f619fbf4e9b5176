//! A RunSpec file on its own (`attnres train`), checked as a sweep checks each of its runs,
//! with errors at the file, line, column and key; nothing is written before it passes.

use std::path::Path;

use super::{RunSpec, SpecError, locate::Locations, read};
use crate::model::ResidualConfig;

/// Reads, parses and checks a RunSpec file, its data files included.
pub fn load(path: &Path) -> Result<RunSpec, SpecError> {
    let text = read::read_text(path)?;
    let spec: RunSpec =
        serde_yaml_ng::from_str(&text).map_err(|e| SpecError::from_yaml_text(path, &e, &text))?;
    let locations = Locations::parse(&text);
    check(&spec)
        .and_then(|()| {
            let vocab = crate::data::check_available(&spec.data, spec.model.context)
                .map_err(|(key, e)| SpecError::at(key, e))?;
            check_vocab(&spec, vocab).map_err(|e| SpecError::at("model.vocab_size", e))
        })
        .map_err(|e| e.in_file(path, &locations))?;
    Ok(spec)
}

/// What the file alone says: the model, the block size against its depth, the training
/// settings, the data settings against the context, and a budget of at least one step.
fn check(spec: &RunSpec) -> Result<(), SpecError> {
    let model = &spec.model;
    model.validate().map_err(|e| {
        let key = e.key().map_or("model".into(), |k| format!("model.{k}"));
        SpecError::at(&key, e)
    })?;
    if let ResidualConfig::AttnRes(c) = &model.residual
        && c.block_sizes.is_none()
        && c.block_size > model.n_layers()
    {
        return Err(SpecError::at(
            "model.residual",
            format!(
                "block_size {} exceeds the model's {} sublayers; S = {} is already one block",
                c.block_size,
                model.n_layers(),
                model.n_layers()
            ),
        ));
    }
    spec.train
        .validate()
        .map_err(|(key, problem)| SpecError::at(&format!("train.{key}"), problem))?;
    crate::data::validate_config(&spec.data, model.context)
        .map_err(|(key, e)| SpecError::at(key, e))?;
    let step = spec.tokens_per_step();
    if spec.budget_tokens() < step as f64 {
        return Err(SpecError::at(
            "train.budget",
            format!(
                "{:.0} tokens is less than one optimizer step of {step} (batch_size {} x \
                 context {}); give at least {{tokens: {step}}}",
                spec.budget_tokens(),
                spec.train.batch_size,
                model.context
            ),
        ));
    }
    Ok(())
}

/// The model's vocabulary holds the data's `vocab` token ids.
pub fn check_vocab(spec: &RunSpec, vocab: usize) -> Result<(), String> {
    if spec.model.vocab_size < vocab {
        return Err(format!(
            "{} is smaller than the data's vocabulary of {vocab}; give at least {vocab}",
            spec.model.vocab_size
        ));
    }
    Ok(())
}
