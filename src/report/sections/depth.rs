//! The report's sections on depth: block size (Fig. 6), the depth-attention weights
//! (Fig. 8), the magnitudes across depth (Fig. 5) and what depth mixing costs at scale.

use std::path::Path;

use crate::analysis::cost::cost_curves;
use crate::analysis::figures::Profile;
use crate::analysis::{depth_views, views};
use crate::model::config::{HyperKind, ResidualConfig};
use crate::plot;
use crate::report::Analysis;
use crate::report::doc::Doc;

/// Fig. 6: loss against block size, with baseline and Full as reference lines.
pub(super) fn block_size_section(
    doc: &mut Doc,
    a: &Analysis,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    if let Some(b) = views::block_view(&a.runs) {
        doc.h(2, "Block size (Fig. 6)");
        let rows = b
            .points
            .iter()
            .map(|(s, i)| {
                vec![
                    s.to_string(),
                    format!("{:.4}", i.mean),
                    if i.half.is_finite() {
                        format!("[{:.4}, {:.4}]", i.lo(), i.hi())
                    } else {
                        "-".into()
                    },
                    i.n.to_string(),
                ]
            })
            .collect();
        doc.table(&["S", "val loss", "95% t-interval", "seeds"], rows);
        doc.figure(
            plot::block_size(figs, &format!("{}: loss against block size, size {}", name, b.size), &b.points, b.baseline, b.full)?,
            "Validation loss against S with 95% Student-t intervals over seeds; baseline and Full AttnRes as reference lines (band: their t-interval).",
        );
    }
    Ok(())
}

/// Fig. 8: the depth-attention weights at the end of training.
pub(super) fn depth_attention_section(
    doc: &mut Doc,
    a: &Analysis,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    let weights = depth_views::depth_attention(&a.runs)?;
    let (routing_size, curves) = depth_views::routing(&a.runs)?;
    if !weights.sources.is_empty() || !weights.streams.is_empty() || !curves.is_empty() {
        doc.h(2, "Depth attention (Fig. 8)");
    }
    let size = &weights.size;
    if !weights.sources.is_empty() {
        let in_streams = a.runs.iter().any(|r| {
            matches!(&r.planned.spec.model.residual,
                ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes)
        });
        let caption = format!(
            "{SOURCES_CAPTION}{}",
            if in_streams {
                " For mhc_attnres, the sources are the embedding and each earlier layer's write into a stream, and the weights are averaged over its streams."
            } else {
                ""
            }
        );
        doc.figure(
            plot::depth_attention(
                figs,
                "depth_attention",
                &format!("{name}: depth-attention weights, size {size}"),
                &weights.sources,
                ("Source", "Mixing step (out = the output's)"),
            )?,
            &caption,
        );
    }
    if !weights.streams.is_empty() {
        doc.figure(
            plot::depth_attention(
                figs,
                "stream_weights",
                &format!("{name}: read weights over streams, size {size}"),
                &weights.streams,
                ("Stream", "Layer"),
            )?,
            "Hyper-connections, mHC and mHC-lite: each layer's mean read weight of each stream at the end of training, averaged over seeds, on a scale of its own (hyper-connections' weights may be negative).",
        );
    }
    if !curves.is_empty() {
        let names = views::arms(&a.runs);
        let colors = curves
            .iter()
            .map(|c| super::shapes::arm_color(&names, &c.arm))
            .collect();
        doc.figure(
            plot::routing(
                figs,
                &format!("{name}: routing over training, size {routing_size}"),
                &curves,
                colors,
            )?,
            "Each Full or Block AttnRes arm with softmax weights: its depth attention over training: the largest weight a mixing step gives any source, and the entropy of its weights, each averaged over mixing steps and seeds. A largest weight near 1 is routing collapsed onto one source; near 1/sources, uniform mixing.",
        );
    }
    Ok(())
}

/// What each arm's depth mixing costs at scale, next to what it buys (docs/cost.md).
pub(super) fn depth_cost(
    doc: &mut Doc,
    a: &Analysis,
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    let arms: Vec<ResidualConfig> = a
        .runs
        .iter()
        .map(|r| r.planned.spec.model.residual.clone())
        .collect();
    let curves = cost_curves(&arms);
    doc.h(2, "Cost of depth mixing at scale");
    let rows = curves
        .iter()
        .map(|c| {
            let at = |v: &[(f64, f64)], l: f64| {
                v.iter()
                    .find(|p| p.0 == l)
                    .map_or("-".into(), |p| format!("{:.2}d", p.1))
            };
            vec![
                c.arm.clone(),
                at(&c.io, 128.0),
                at(&c.state, 128.0),
                at(&c.io, 256.0),
                at(&c.state, 256.0),
            ]
        })
        .collect();
    doc.table(
        &[
            "variant",
            "I/O per layer, L = 128",
            "extra state, L = 128",
            "I/O per layer, L = 256",
            "extra state, L = 256",
        ],
        rows,
    );
    doc.figure(
        plot::depth_cost(figs, &format!("{name}: depth-mixing cost against depth"), &curves)?,
        "Memory I/O per token per layer caused by the residual mechanism (the report's Table 1, two-phase schedule for AttnRes; Full in 8 groups as in Table 1) and d-vectors per token kept beyond a standard residual's hidden state, for each arm of this sweep with Block at 8 blocks of L/8 layers (the paper's block count), from L = 8 to 256 layers. Formulas, sources and assumptions: docs/cost.md; `attnres cost` prints them for any shape and parallel layout.",
    );
    Ok(())
}

/// Fig. 5 and its table: the per-block view of SPEC section 8 at the profile size
/// (`views::profile_size`).
pub(super) fn magnitudes(
    doc: &mut Doc,
    size: &str,
    profiles: &[Profile],
    figs: &Path,
    name: &str,
) -> anyhow::Result<()> {
    if profiles.is_empty() {
        return Ok(());
    }
    doc.h(2, "Magnitudes across depth (Fig. 5)");
    let blocks = profiles
        .iter()
        .map(|p| p.in_rms.len() / 2)
        .max()
        .unwrap_or(0);
    let mut header: Vec<String> = vec!["variant".into(), "per block".into()];
    header.extend((0..blocks).map(|b| format!("block {b}")));
    header.push("max / min".into());
    let mut rows = Vec::new();
    let mut missing = false;
    for p in profiles {
        let [hidden, output, grad] = p.per_block();
        for (what, values) in [
            ("hidden-state RMS", &hidden),
            ("output RMS", &output),
            ("gradient norm", &grad),
        ] {
            let mut row = vec![p.arm.clone(), what.to_string()];
            if values.is_empty() {
                missing = true;
                row.extend((0..=blocks).map(|_| "-".to_string()));
            } else {
                let (lo, hi) = values
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
                row.extend(values.iter().map(|v| format!("{v:.3}")));
                row.push(format!("{:.2}", hi / lo));
            }
            rows.push(row);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    doc.p(format!(
        "At the end of training, size {size}, mean over seeds. Per Transformer block i (sublayers 2i and 2i+1): the hidden state it reads (RMS of x_2i), its output (RMS of y_2i + y_2i+1, the `block_out_rms` probe) and the L2 norm of its gradient (root-sum-square of the two sublayers').{}",
        if missing {
            " A dash: the run predates the `block_out_rms` probe; retrain it to record it."
        } else {
            ""
        }
    ));
    doc.table(&header, rows);
    for png in plot::layer_profiles(
        figs,
        &format!("{name}: size {size}, end of training"),
        profiles,
    )? {
        let what = if png.ends_with("blocks.png") {
            "per Transformer block (block input, block output, block gradient norm)"
        } else {
            "per sublayer"
        };
        doc.figure(
            png,
            format!("Hidden-state RMS, output RMS and gradient norm {what}, size {size}, mean over seeds."),
        );
    }
    Ok(())
}

/// The depth-attention figure's caption for the AttnRes families.
const SOURCES_CAPTION: &str = "The mean weight each mixing step puts on each source at the end of training, averaged over seeds (each panel says how many). Sources: `emb` is the embedding; then, for Full AttnRes, each earlier layer's output, and for Block AttnRes, each completed block. In a block after its first layer, a row's last cell is the block's partial sum. With a window of W sources, the columns after `emb` are the W latest, -1 the latest.";
