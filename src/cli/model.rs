//! `attnres model`: the size, cost and depth-source memory of model settings, side by side
//! for several residual variants.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::{InputError, thousands};
use crate::analysis::cost::scheme_at;
use crate::model::config::{HyperConfig, ModelConfig, ResidualConfig};
use crate::model::flops::{PFLOPS_DAY, flops_per_token, param_counts, source_bytes_per_token};
use crate::model::sources::{depth_source_counts, peak_stream_vectors};

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A YAML file holding a model config (d_model, n_blocks, n_heads, ff_mult, vocab_size,
    /// context, residual); flags given as well override its fields.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub d_model: Option<usize>,
    #[arg(long)]
    pub n_blocks: Option<usize>,
    /// Default: d_model / 64 (at least 1).
    #[arg(long)]
    pub n_heads: Option<usize>,
    #[arg(long)]
    pub ff_mult: Option<f64>,
    /// Default 256, the byte-level tokenizer.
    #[arg(long)]
    pub vocab_size: Option<usize>,
    /// Context length T. Default 256.
    #[arg(long)]
    pub context: Option<usize>,
    /// Residual variants to compare: baseline, full, block:S, block:2/2/4 (blocks of these
    /// lengths from the bottom up), denseformer, hc:M, mhc:M,
    /// mhc_lite:M, mhc_attnres:M, each optionally with `+vr` for the value residual (comma-separated).
    /// Default: the config file's, or baseline,full,block:4.
    #[arg(long, value_delimiter = ',')]
    pub residual: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    let configs = configs_from(&args)?;
    if args.json {
        let rows: Vec<_> = configs.iter().map(summary_json).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", render_table(&configs));
    }
    Ok(())
}

fn configs_from(args: &ModelArgs) -> anyhow::Result<Vec<ModelConfig>> {
    let file: Option<ModelConfig> = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read model config {}", path.display()))?;
            Some(serde_yaml_ng::from_str(&text).map_err(|e| {
                InputError::file(
                    path,
                    format!("{e}; see `attnres model --help` for the keys"),
                )
            })?)
        }
        None => None,
    };
    let d_model = args
        .d_model
        .or(file.as_ref().map(|f| f.d_model))
        .unwrap_or(256);
    let base = ModelConfig {
        vocab_size: args
            .vocab_size
            .or(file.as_ref().map(|f| f.vocab_size))
            .unwrap_or(256),
        d_model,
        n_blocks: args
            .n_blocks
            .or(file.as_ref().map(|f| f.n_blocks))
            .unwrap_or(8),
        n_heads: args
            .n_heads
            .or(file.as_ref().map(|f| f.n_heads))
            .unwrap_or((d_model / 64).max(1)),
        ff_mult: args
            .ff_mult
            .or(file.as_ref().map(|f| f.ff_mult))
            .unwrap_or(8.0 / 3.0),
        context: args
            .context
            .or(file.as_ref().map(|f| f.context))
            .unwrap_or(256),
        residual: ResidualConfig::Baseline,
        value_residual: false,
    };
    let residuals: Vec<(ResidualConfig, bool)> = if !args.residual.is_empty() {
        args.residual
            .iter()
            .map(|s| match s.strip_suffix("+vr") {
                Some(family) => parse_residual(family).map(|r| (r, true)),
                None => parse_residual(s).map(|r| (r, false)),
            })
            .collect::<Result<Vec<_>, _>>()?
    } else if let Some(f) = &file {
        vec![(f.residual.clone(), f.value_residual)]
    } else {
        vec![
            (ResidualConfig::Baseline, false),
            (ResidualConfig::full(), false),
            (ResidualConfig::block(4), false),
        ]
    };
    residuals
        .into_iter()
        .map(|(residual, value_residual)| {
            let c = ModelConfig {
                residual,
                value_residual,
                ..base.clone()
            };
            c.validate().map_err(|e| {
                InputError::Arguments(format!("model settings ({}): {e}", c.arm_label()))
            })?;
            Ok(c)
        })
        .collect()
}

/// `baseline`, `full`, `block:S`, `denseformer`, `hc:M`, `mhc:M`, `mhc_lite:M` or
/// `mhc_attnres:M` (`M`
/// streams; 4 when left out).
pub fn parse_residual(s: &str) -> Result<ResidualConfig, InputError> {
    let unknown = |other: &str| {
        InputError::flag(
            "--residual",
            format!(
                "unknown variant `{other}`; use baseline, full, block:S (e.g. block:4), \
                 block:S1/S2/... (blocks of these lengths, bottom up), denseformer, hc:M, mhc:M, \
                 mhc_lite:M or mhc_attnres:M (M streams, e.g. hc:4); ablations go in a --config \
                 file"
            ),
        )
    };
    let s = s.trim();
    // `block:2/2/4/8`: blocks of these lengths from the bottom up.
    if let Some(list) = s.strip_prefix("block:").filter(|l| l.contains('/')) {
        let sizes = list
            .split('/')
            .map(|x| x.parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| unknown(s))?;
        return Ok(ResidualConfig::AttnRes(
            crate::model::config::AttnResConfig::per_depth(sizes),
        ));
    }
    let (name, arg) = match s.split_once(':') {
        Some((name, arg)) => (name, Some(arg.parse::<usize>().map_err(|_| unknown(s))?)),
        None => (s, None),
    };
    let streams = arg.unwrap_or(HyperConfig::DEFAULT_STREAMS);
    let hyper = |h: HyperConfig| {
        h.validate()
            .map(|()| ResidualConfig::Hyper(h))
            .map_err(|e| InputError::flag(format!("--residual {s}"), e))
    };
    match (name, arg) {
        ("baseline", None) => Ok(ResidualConfig::Baseline),
        ("full", None) => Ok(ResidualConfig::full()),
        ("denseformer", None) => Ok(ResidualConfig::Denseformer),
        ("block", Some(size)) => Ok(ResidualConfig::block(size)),
        ("hc", _) => hyper(HyperConfig::hc(streams)),
        ("mhc", _) => hyper(HyperConfig::mhc(streams)),
        ("mhc_lite", _) => hyper(HyperConfig::mhc_lite(streams)),
        ("mhc_attnres", _) => hyper(HyperConfig::mhc_attnres(streams)),
        _ => Err(unknown(s)),
    }
}

fn summary_json(c: &ModelConfig) -> serde_json::Value {
    serde_json::json!({
        "config": c,
        "label": c.arm_label(),
        "params": param_counts(c),
        "flops_per_token": flops_per_token(c),
        "forward_flops_per_token": flops_per_token(c).forward(),
        "training_flops_per_token": flops_per_token(c).training(),
        "depth_sources": depth_source_counts(c),
        "source_vectors_per_token": peak_stream_vectors(c),
        "source_bytes_per_token_f32": source_bytes_per_token(c),
        "depth_io_per_layer_d_vectors": scheme_at(&c.residual, c.n_layers()).total().vectors,
    })
}

/// One column per config, one row per quantity.
pub fn render_table(configs: &[ModelConfig]) -> String {
    let Some(first) = configs.first() else {
        return String::new();
    };
    let mut out = format!(
        "model: d_model {}, n_blocks {} (L = {} sublayers), n_heads {}, ff_hidden {}, vocab {}, context {}\n\n",
        first.d_model,
        first.n_blocks,
        first.n_layers(),
        first.n_heads,
        first.ff_hidden(),
        first.vocab_size,
        first.context
    );
    let rows = quantity_rows(configs);
    let name_width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let col_width: Vec<usize> = (0..configs.len())
        .map(|i| rows.iter().map(|(_, v)| v[i].len()).max().unwrap_or(0))
        .collect();
    for (name, values) in &rows {
        out.push_str(&format!("{name:<name_width$}"));
        for (v, w) in values.iter().zip(&col_width) {
            out.push_str(&format!("  {v:>w$}"));
        }
        out.push('\n');
    }
    out.push_str(&source_counts(configs));
    out
}

/// The table's rows: a header of arm labels, then one row per quantity.
fn quantity_rows(configs: &[ModelConfig]) -> Vec<(String, Vec<String>)> {
    let mut rows: Vec<(String, Vec<String>)> =
        vec![("".into(), configs.iter().map(|c| c.arm_label()).collect())];
    let mut row = |name: &str, f: &dyn Fn(&ModelConfig) -> String| {
        rows.push((name.to_string(), configs.iter().map(f).collect()));
    };
    row("params, total", &|c| thousands(param_counts(c).total));
    row("params, non-embedding", &|c| {
        thousands(param_counts(c).non_embedding)
    });
    row("  of which residual mixing", &|c| {
        thousands(param_counts(c).residual)
    });
    row("FLOPs/token fwd, matrices", &|c| {
        thousands(flops_per_token(c).matrices)
    });
    row("FLOPs/token fwd, attention", &|c| {
        thousands(flops_per_token(c).attention)
    });
    row("FLOPs/token fwd, depth mixing", &|c| {
        thousands(flops_per_token(c).depth)
    });
    row("FLOPs/token fwd, head", &|c| {
        thousands(flops_per_token(c).head)
    });
    row("FLOPs/token fwd, total", &|c| {
        thousands(flops_per_token(c).forward())
    });
    row("FLOPs/token train (3x fwd)", &|c| {
        thousands(flops_per_token(c).training())
    });
    row("  vs 6N (non-embedding)", &|c| {
        let six_n = 6.0 * param_counts(c).non_embedding as f64;
        format!("{:.3}x", flops_per_token(c).training() as f64 / six_n)
    });
    row("PF-days per 1B train tokens", &|c| {
        format!(
            "{:.3e}",
            flops_per_token(c).training() as f64 * 1e9 / PFLOPS_DAY
        )
    });
    row("depth sources, max per step", &|c| {
        depth_source_counts(c)
            .iter()
            .max()
            .copied()
            .unwrap_or(0)
            .to_string()
    });
    row("depth I/O/token/layer (Table 1)", &|c| {
        scheme_at(&c.residual, c.n_layers()).total().text()
    });
    row("source memory/token (f32)", &|c| {
        format!(
            "{} vec = {} B",
            peak_stream_vectors(c),
            thousands(source_bytes_per_token(c))
        )
    });
    rows
}

/// Each config's number of depth sources at every mixing step, a line per config.
fn source_counts(configs: &[ModelConfig]) -> String {
    let Some(first) = configs.first() else {
        return String::new();
    };
    let mut out = format!(
        "\ndepth sources per mixing step (AttnRes: layers l0..l{}, then the output; \
         DenseFormer: after each block):\n",
        first.n_layers() - 1
    );
    let width = configs
        .iter()
        .map(|c| c.arm_label().len())
        .max()
        .unwrap_or(0);
    for c in configs {
        let counts: Vec<String> = depth_source_counts(c)
            .iter()
            .map(usize::to_string)
            .collect();
        out.push_str(&format!(
            "  {:<width$} {}\n",
            c.arm_label(),
            counts.join(" ")
        ));
    }
    out
}
