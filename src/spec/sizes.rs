//! A sweep's sizes resolved to model shapes: named presets or shapes given in the file,
//! each with its heads checked against `model.head_dim`.

use super::error::SpecError;
use super::family::depth_width_sizes;
use super::presets::{PRESETS, Size, preset};
use super::wire::{SizeEntry, SweepFile};

pub(super) fn sizes(file: &SweepFile) -> Result<Vec<Size>, SpecError> {
    let head_dim = file.model.head_dim;
    if head_dim == 0 {
        return Err(SpecError::at(
            "model.head_dim",
            "must be at least 1 (e.g. 32); n_heads = d_model / head_dim",
        ));
    }
    // n_heads = d_model / head_dim, which must divide exactly: two heads of 20 for
    // d_model 40 and head_dim 16 would silently be another model than the one asked for.
    let heads = |d: usize, path: &str| -> Result<usize, SpecError> {
        if d == 0 || !d.is_multiple_of(head_dim) {
            let below = (d / head_dim).max(1) * head_dim;
            return Err(SpecError::at(
                path,
                format!(
                    "d_model {d} is not a multiple of model.head_dim {head_dim}; use d_model {below} or {}, or give this size its own n_heads",
                    below + head_dim
                ),
            ));
        }
        Ok(d / head_dim)
    };
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
                            n_heads: heads(d, &path)?,
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
                        n_heads: match e.n_heads {
                            Some(h) => h,
                            None => heads(e.d_model, &format!("{path}.d_model"))?,
                        },
                        path,
                    }),
                }
            })
            .collect(),
        (Some(dw), true) => depth_width_sizes(file, dw, &heads),
    }
}
