//! The reasoning probes: answer accuracy on synthetic tasks (k-hop, MQAR) against their
//! difficulty (hops, pairs), per arm, with t-intervals over seeds and paired differences to
//! the reference arm on the same seed and task.

use std::collections::BTreeMap;

use super::load::LoadedRun;
use super::stats::{PairedTest, SeedMean};
use super::views::arms;
use crate::data::CorpusConfig;
use crate::data::synthetic::guessing_accuracy;

/// One arm at one difficulty.
#[derive(Debug, Clone)]
pub struct ProbePoint {
    pub difficulty: usize,
    /// Final answer accuracy over seeds (a fraction).
    pub accuracy: SeedMean,
    /// Arm minus the reference arm, paired by seed; None for the reference arm itself or
    /// when it has no run on any of the same seeds.
    pub vs_reference: Option<PairedTest>,
}

/// One task kind at one size: every arm's accuracy against difficulty.
#[derive(Debug, Clone)]
pub struct ProbeView {
    /// `khop` or `mqar`.
    pub kind: &'static str,
    pub size: String,
    /// Arms in sweep order, each with its points in increasing difficulty.
    pub arms: Vec<(String, Vec<ProbePoint>)>,
    /// Per difficulty, the accuracy of guessing uniformly among the digits written before
    /// each answer (`data::synthetic::guessing_accuracy`), over the seeds' validation sets.
    pub guess: Vec<(usize, SeedMean)>,
}

impl ProbeView {
    /// What the difficulty counts: `hops` or `pairs`.
    pub fn difficulty_name(&self) -> &'static str {
        match self.kind {
            "khop" => "hops",
            _ => "key-value pairs",
        }
    }
}

/// The probe views of `runs`: one per (task kind, size) with at least one run that scored
/// answers; empty when no run trained on a synthetic task.
pub fn probe_views(runs: &[LoadedRun], reference: &str) -> Vec<ProbeView> {
    // (kind, size) -> arm -> difficulty -> seed -> accuracy
    type Cells = BTreeMap<String, BTreeMap<usize, BTreeMap<u64, f64>>>;
    let mut groups: Vec<((&'static str, String), Cells)> = Vec::new();
    // The guessing reference per (kind, size, difficulty), one value per seed's data.
    let mut guesses: BTreeMap<(&'static str, String, usize), BTreeMap<u64, f64>> = BTreeMap::new();
    for r in runs {
        let spec = &r.planned.spec;
        let (Some((kind, difficulty)), Some(acc), CorpusConfig::Synthetic(task)) = (
            spec.data.corpus.difficulty(),
            r.accuracy(),
            &spec.data.corpus,
        ) else {
            continue;
        };
        let key = (kind, r.planned.size.clone());
        let at = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, BTreeMap::new()));
                groups.len() - 1
            }
        };
        groups[at]
            .1
            .entry(r.planned.arm.clone())
            .or_default()
            .entry(difficulty)
            .or_default()
            .insert(spec.seed, acc);
        let by_seed = guesses
            .entry((kind, r.planned.size.clone(), difficulty))
            .or_default();
        if !by_seed.contains_key(&spec.seed)
            && let Ok(g) = guessing_accuracy(task, spec.model.context, spec.seed)
        {
            by_seed.insert(spec.seed, g);
        }
    }
    let order = arms(runs);
    groups
        .into_iter()
        .map(|((kind, size), cells)| {
            let guess = guesses
                .iter()
                .filter(|((k, s, _), _)| *k == kind && *s == size)
                .map(|((.., d), by_seed)| {
                    let values: Vec<f64> = by_seed.values().copied().collect();
                    (*d, SeedMean::of(&values))
                })
                .collect();
            let reference_cells = cells.get(reference);
            let arms = order
                .iter()
                .filter_map(|arm| {
                    let by_difficulty = cells.get(arm)?;
                    let points = by_difficulty
                        .iter()
                        .map(|(&difficulty, seeds)| {
                            let base = (arm != reference)
                                .then(|| reference_cells.and_then(|c| c.get(&difficulty)))
                                .flatten();
                            probe_point(difficulty, seeds, base)
                        })
                        .collect();
                    Some((arm.clone(), points))
                })
                .collect();
            ProbeView {
                kind,
                size,
                arms,
                guess,
            }
        })
        .collect()
}

/// One arm's accuracy at one difficulty over its seeds, and its paired difference to the
/// reference arm's (`base`, by seed) on the seeds both have.
fn probe_point(
    difficulty: usize,
    seeds: &BTreeMap<u64, f64>,
    base: Option<&BTreeMap<u64, f64>>,
) -> ProbePoint {
    let values: Vec<f64> = seeds.values().copied().collect();
    let vs_reference = base
        .map(|base| {
            seeds
                .iter()
                .filter_map(|(s, v)| base.get(s).map(|b| v - b))
                .collect::<Vec<f64>>()
        })
        .filter(|d| !d.is_empty())
        .map(|d| PairedTest::of(&d));
    ProbePoint {
        difficulty,
        accuracy: SeedMean::of(&values),
        vs_reference,
    }
}
