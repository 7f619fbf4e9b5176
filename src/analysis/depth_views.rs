//! The depth-attention views of a report: each arm's final depth-attention weights (the
//! paper's Fig. 8) as seed means, and its routing over training.

use super::figures::Grid;
use super::load::LoadedRun;
use super::views::{arms, profile_size};
use crate::model::config::ResidualConfig;
use crate::store::metrics::read_depth;

/// Fig. 8 at the profile size (`views::profile_size`), as the mean over seeds of each run's
/// weights at its last probe: the AttnRes arms' weights of each mixing step over its
/// sources, and apart (their own scale: hyper-connections' are signed) the multi-stream
/// arms' read weights of each layer over its streams.
pub struct DepthAttention {
    pub size: String,
    pub sources: Vec<Grid>,
    pub streams: Vec<Grid>,
}

pub fn depth_attention(runs: &[LoadedRun]) -> anyhow::Result<DepthAttention> {
    let mixing: Vec<LoadedRun> = runs
        .iter()
        .filter(|r| {
            let residual = &r.planned.spec.model.residual;
            matches!(residual, ResidualConfig::AttnRes(_)) || residual.is_multi_stream()
        })
        .cloned()
        .collect();
    let mut out = DepthAttention {
        size: profile_size(&mixing).unwrap_or_default(),
        sources: Vec::new(),
        streams: Vec::new(),
    };
    for arm in arms(&mixing) {
        let mine: Vec<&LoadedRun> = mixing
            .iter()
            .filter(|r| r.planned.size == out.size && r.planned.arm == arm)
            .collect();
        let grids = mine
            .iter()
            .map(|run| final_weights(run))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let Some(first) = mine.first() else { continue };
        let Some(mut cells) = mean_cells(&grids) else {
            continue;
        };
        let streams = first.planned.spec.model.residual.weights_over_streams();
        let window = match &first.planned.spec.model.residual {
            ResidualConfig::AttnRes(c) => c.window,
            _ => None,
        };
        let seeds = match mine.len() {
            1 => format!("seed {}", first.planned.seed),
            n => format!("mean of {n} seeds"),
        };
        if window.is_some() {
            cells.iter_mut().for_each(|row| latest_last(row));
        }
        let rows = cells.len();
        let grid = Grid {
            title: format!("{arm} ({seeds})"),
            // AttnRes has an output step after its layers; the multi-stream families' weights
            // are each layer's read weights over its streams, with no output step.
            rows: (0..rows)
                .map(|l| match l + 1 == rows && !streams {
                    true => "out".into(),
                    false => l.to_string(),
                })
                .collect(),
            cols: (0..cells[0].len())
                .map(|s| match (s, streams, window) {
                    (0, false, _) => "emb".into(),
                    // A window keeps the latest sources, whichever layers they are: -1 is
                    // the latest.
                    (_, false, Some(w)) => format!("-{}", w + 1 - s),
                    _ => s.to_string(),
                })
                .collect(),
            cells,
            mark: None,
        };
        match streams {
            true => out.streams.push(grid),
            false => out.sources.push(grid),
        }
    }
    Ok(out)
}

/// One run's weights at its last probe, `[mixing step][source]`.
fn final_weights(run: &LoadedRun) -> anyhow::Result<Vec<Vec<Option<f64>>>> {
    let rows = read_depth(&run.dir.depth_attn(), None)?;
    let last = rows.iter().map(|r| r.step).max().unwrap_or(0);
    let rows: Vec<_> = rows.into_iter().filter(|r| r.step == last).collect();
    let n_layers = rows.iter().map(|r| r.layer as usize + 1).max().unwrap_or(0);
    let n_sources = rows
        .iter()
        .map(|r| r.source as usize + 1)
        .max()
        .unwrap_or(0);
    let mut cells = vec![vec![None; n_sources]; n_layers];
    for r in rows {
        cells[r.layer as usize][r.source as usize] = Some(f64::from(r.weight));
    }
    Ok(cells)
}

/// A windowed step's row with its sources after the embedding moved to the right end, so
/// that each column is one place back from the latest source (a step with fewer sources
/// than the window leaves the oldest places empty).
fn latest_last(row: &mut [Option<f64>]) {
    if let Some(rest) = row.get_mut(1..) {
        let kept: Vec<Option<f64>> = rest.iter().copied().filter(Option::is_some).collect();
        let gap = rest.len() - kept.len();
        rest.fill(None);
        rest[gap..].copy_from_slice(&kept);
    }
}

/// The cell-wise mean of same-shaped grids; None when they are empty or differ in shape.
fn mean_cells(grids: &[Vec<Vec<Option<f64>>>]) -> Option<Vec<Vec<Option<f64>>>> {
    let first = grids.first().filter(|g| !g.is_empty())?;
    let same = |g: &Vec<Vec<Option<f64>>>| {
        g.len() == first.len() && g.iter().zip(first).all(|(a, b)| a.len() == b.len())
    };
    if !grids.iter().all(same) {
        return None;
    }
    let n = grids.len() as f64;
    Some(
        first
            .iter()
            .enumerate()
            .map(|(r, row)| {
                (0..row.len())
                    .map(|c| {
                        let values: Option<Vec<f64>> = grids.iter().map(|g| g[r][c]).collect();
                        values.map(|v| v.iter().sum::<f64>() / n)
                    })
                    .collect()
            })
            .collect(),
    )
}

/// Routing over training for one AttnRes arm: at each probed step, the largest depth-attention
/// weight of each mixing step and the weights' entropy (nats), each averaged over mixing steps
/// and then over seeds. A largest weight near 1/sources is uniform mixing; near 1, routing has
/// collapsed onto one source.
#[derive(Debug, Clone)]
pub struct RoutingCurve {
    pub arm: String,
    pub seeds: usize,
    /// (training tokens, mean largest weight, mean entropy).
    pub points: Vec<(f64, f64, f64)>,
}

/// The routing curves of every Full or Block AttnRes arm with softmax weights at the profile
/// size (`views::profile_size`) (sigmoid weights and the other families' mixing weights are not a distribution).
pub fn routing(runs: &[LoadedRun]) -> anyhow::Result<(String, Vec<RoutingCurve>)> {
    let Some(size) = profile_size(runs) else {
        return Ok((String::new(), Vec::new()));
    };
    let mut out: Vec<RoutingCurve> = Vec::new();
    for arm in arms(runs) {
        let mine: Vec<&LoadedRun> = runs
            .iter()
            .filter(|r| {
                r.planned.size == size
                    && r.planned.arm == arm
                    && matches!(
                        &r.planned.spec.model.residual,
                        ResidualConfig::AttnRes(c) if c.normalize == crate::model::config::Normalize::Softmax
                    )
            })
            .collect();
        // step -> per seed (max, entropy) averaged over mixing steps.
        let mut per_step: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
        for r in &mine {
            let rows = read_depth(&r.dir.depth_attn(), None)?;
            let mut by_step: std::collections::BTreeMap<
                u64,
                std::collections::BTreeMap<u32, Vec<f64>>,
            > = Default::default();
            for row in rows {
                by_step
                    .entry(row.step)
                    .or_default()
                    .entry(row.layer)
                    .or_default()
                    .push(f64::from(row.weight));
            }
            for (step, layers) in by_step {
                let n = layers.len() as f64;
                let (max, entropy) = layers.values().fold((0.0, 0.0), |(m, h), w| {
                    let largest = w.iter().copied().fold(0.0f64, f64::max);
                    let ent: f64 = w.iter().filter(|&&x| x > 0.0).map(|&x| -x * x.ln()).sum();
                    (m + largest / n, h + ent / n)
                });
                per_step.entry(step).or_default().push((max, entropy));
            }
        }
        let seeds = mine.len();
        let Some(first) = mine.first() else { continue };
        let tokens_per_step = first.planned.spec.tokens_per_step() as f64;
        let points = per_step
            .into_iter()
            .filter(|(_, v)| v.len() == seeds)
            .map(|(step, v)| {
                let k = v.len() as f64;
                (
                    step as f64 * tokens_per_step,
                    v.iter().map(|x| x.0).sum::<f64>() / k,
                    v.iter().map(|x| x.1).sum::<f64>() / k,
                )
            })
            .collect::<Vec<_>>();
        if !points.is_empty() {
            out.push(RoutingCurve { arm, seeds, points });
        }
    }
    Ok((size, out))
}

#[cfg(test)]
mod tests {
    use super::latest_last;

    #[test]
    fn a_windowed_row_keeps_the_embedding_first_and_the_latest_source_last() {
        let mut short = [Some(0.8), Some(0.2), None];
        latest_last(&mut short);
        assert_eq!(short, [Some(0.8), None, Some(0.2)]);
        let mut full = [Some(0.5), Some(0.3), Some(0.2)];
        latest_last(&mut full);
        assert_eq!(full, [Some(0.5), Some(0.3), Some(0.2)]);
    }
}
