//! Named model sizes, and the depth/width family of the report's Fig. 7.

use crate::model::ModelConfig;
use crate::model::flops::{flops_per_token, param_counts};

/// A size of a sweep, resolved: its name and shape.
pub(crate) struct Size {
    pub(crate) name: String,
    pub(crate) d_model: usize,
    pub(crate) n_blocks: usize,
    pub(crate) n_heads: usize,
    /// Where it was written, for errors.
    pub(crate) path: String,
}

/// `(name, d_model, n_blocks)`, smallest first: CPU sizes up to `medium`, GPU sizes above.
pub const PRESETS: &[(&str, usize, usize)] = &[
    ("nano", 32, 2),
    ("micro", 64, 4),
    ("tiny", 96, 4),
    ("mini", 128, 6),
    ("small", 192, 6),
    ("medium", 256, 8),
    ("base", 384, 8),
    ("large", 512, 10),
    ("xl", 640, 12),
    ("xxl", 768, 14),
];

/// The presets as the Markdown table of docs/sweeps.md: shape, heads at the default
/// `head_dim` of 32, and the baseline's non-embedding parameters at the defaults (byte
/// vocabulary, `ff_mult` 8/3, context 128).
pub fn presets_markdown() -> String {
    let mut out = String::from(
        "| size | d_model | blocks | sublayers | heads (head_dim 32) | non-embedding params (baseline) |\n\
         |---|---|---|---|---|---|\n",
    );
    for &(name, d_model, n_blocks) in PRESETS {
        let config = ModelConfig {
            vocab_size: 256,
            d_model,
            n_blocks,
            n_heads: (d_model / 32).max(1),
            ff_mult: 8.0 / 3.0,
            context: 128,
            residual: Default::default(),
            value_residual: false,
        };
        let params = param_counts(&config).non_embedding;
        out.push_str(&format!(
            "| `{name}` | {d_model} | {n_blocks} | {} | {} | {} |\n",
            2 * n_blocks,
            config.n_heads,
            crate::fmt::thousands(params)
        ));
    }
    out
}

pub fn preset(name: &str) -> Option<(usize, usize)> {
    PRESETS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|&(_, d, b)| (d, b))
}

/// What a depth/width family holds fixed across its shapes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fixed {
    NonEmbeddingParams(f64),
    /// Training FLOPs per token.
    FlopsPerToken(f64),
}

/// For each `d_model / n_blocks` ratio, the shape (d_model a multiple of `head_dim`) whose
/// non-embedding parameters or FLOPs per token come closest to the target.
pub fn depth_width_shapes(
    ratios: &[f64],
    fixed: Fixed,
    head_dim: usize,
    template: &ModelConfig,
) -> Vec<(usize, usize)> {
    let measure = |d: usize, n: usize| {
        let c = ModelConfig {
            d_model: d,
            n_blocks: n,
            n_heads: d / head_dim,
            ..template.clone()
        };
        match fixed {
            Fixed::NonEmbeddingParams(_) => param_counts(&c).non_embedding as f64,
            Fixed::FlopsPerToken(_) => flops_per_token(&c).training() as f64,
        }
    };
    let target = match fixed {
        Fixed::NonEmbeddingParams(x) | Fixed::FlopsPerToken(x) => x,
    };
    ratios
        .iter()
        .map(|&ratio| {
            (1..=256)
                .map(|n| {
                    let d =
                        ((ratio * n as f64 / head_dim as f64).round() as usize).max(1) * head_dim;
                    (d, n)
                })
                .min_by(|a, b| {
                    let err = |&(d, n): &(usize, usize)| (measure(d, n) / target).ln().abs();
                    err(a).total_cmp(&err(b))
                })
                .unwrap_or((head_dim, 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/sweeps.md's table of sizes is this code's; `ATTNRES_UPDATE_DOCS=1 cargo test`
    /// rewrites it.
    #[test]
    fn the_docs_table_of_sizes_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/sweeps.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (begin, end) = ("<!-- sizes:begin -->\n", "<!-- sizes:end -->");
        let start = doc
            .find(begin)
            .expect("docs/sweeps.md lacks <!-- sizes:begin -->")
            + begin.len();
        let stop = doc
            .find(end)
            .expect("docs/sweeps.md lacks <!-- sizes:end -->");
        let table = presets_markdown();
        if std::env::var_os("ATTNRES_UPDATE_DOCS").is_some() {
            std::fs::write(&path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[start..stop],
            table,
            "docs/sweeps.md's sizes differ from src/spec/presets.rs; run ATTNRES_UPDATE_DOCS=1 cargo test"
        );
        assert!(
            table.contains("| `micro` | 64 | 4 | 8 | 2 | 201,280 |"),
            "{table}"
        );
    }
}
