//! Pipeline-parallel communication of block summaries (the report's section 4.1): an
//! interleaved schedule of `P` physical stages and `V` virtual stages per stage runs the
//! model as `C = P V` chunks in order, chunk `c` on stage `c mod P`. Every layer reads the
//! completed blocks, so each transition between chunks must make them available to the
//! receiving stage. Without caching a transition sends every completed block; with
//! cross-stage caching it sends only what the receiver does not hold from earlier chunks.
//!
//! The report's closed forms (Eqs. 7-8) assume `N_p` blocks completed per chunk. Eq. 8
//! approximates each later transition's increment as `P N_p`; counted exactly it is
//! `(P - 1) N_p` (the receiver made one chunk's blocks itself). [`simulate`] counts block by
//! block for any layout, blocks that straddle chunks and the embedding included.

/// A pipeline layout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Physical stages `P`.
    pub stages: usize,
    /// Virtual stages per physical stage `V`.
    pub virtual_stages: usize,
}

impl Layout {
    /// `C = P V`.
    pub fn chunks(&self) -> usize {
        self.stages * self.virtual_stages
    }
}

/// Blocks sent over every transition of one forward pass, in units of one block summary
/// (`d` elements per token).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Communication {
    pub total: f64,
    /// The most sent by one transition.
    pub peak: f64,
}

/// Eq. 7: `sum_{j=1}^{C-1} j N_p = C (C - 1) / 2 * N_p`; the peak is the last transition's
/// `(C - 1) N_p`.
pub fn naive(layout: Layout, blocks_per_chunk: f64) -> Communication {
    let c = layout.chunks() as f64;
    Communication {
        total: c * (c - 1.0) / 2.0 * blocks_per_chunk,
        peak: (c - 1.0) * blocks_per_chunk,
    }
}

/// Eq. 8 as the report writes it: `P (P - 1) / 2 * N_p` in the first virtual stage, then
/// `(V - 1) P^2 N_p`; the peak is `P N_p` once `V > 1`.
pub fn cached_report(layout: Layout, blocks_per_chunk: f64) -> Communication {
    let (p, v) = (layout.stages as f64, layout.virtual_stages as f64);
    let first = p * (p - 1.0) / 2.0 * blocks_per_chunk;
    Communication {
        total: first + (v - 1.0) * p * p * blocks_per_chunk,
        peak: if v > 1.0 { p } else { p - 1.0 } * blocks_per_chunk,
    }
}

/// Eq. 8 counted exactly: each of the `(V - 1) P` later transitions sends `(P - 1) N_p`.
pub fn cached_exact(layout: Layout, blocks_per_chunk: f64) -> Communication {
    let (p, v) = (layout.stages as f64, layout.virtual_stages as f64);
    Communication {
        total: p * (p - 1.0) / 2.0 * blocks_per_chunk
            + (v - 1.0) * p * (p - 1.0) * blocks_per_chunk,
        peak: (p - 1.0) * blocks_per_chunk,
    }
}

/// A model for [`simulate`]: `layers` sublayers in AttnRes blocks of `block_size`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Blocks {
    pub layers: usize,
    pub block_size: usize,
    /// Whether the embedding `b_0` travels too (it is a source of every layer; stage 0
    /// makes it).
    pub embedding: bool,
}

/// Counts, transition by transition, the blocks sent without and with caching. Chunk `c`
/// holds layers `[c L / C, (c + 1) L / C)`; block `k` (1-based) is complete after layer
/// `min(k S, L)`.
pub fn simulate(layout: Layout, model: Blocks) -> (Communication, Communication) {
    let (p, c) = (layout.stages, layout.chunks());
    let n_blocks = model.layers.div_ceil(model.block_size);
    let chunk_end = |chunk: usize| (chunk + 1) * model.layers / c;
    // Blocks complete by the end of chunk `chunk`, as ids (0 = the embedding).
    let complete = |chunk: usize| -> Vec<usize> {
        let done =
            (1..=n_blocks).filter(|k| (k * model.block_size).min(model.layers) <= chunk_end(chunk));
        model
            .embedding
            .then_some(0)
            .into_iter()
            .chain(done)
            .collect()
    };
    let mut held: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); p];
    let (mut naive, mut cached) = (
        Communication {
            total: 0.0,
            peak: 0.0,
        },
        Communication {
            total: 0.0,
            peak: 0.0,
        },
    );
    for chunk in 0..c {
        let stage = chunk % p;
        // What this stage makes while running the chunk.
        held[stage].extend(complete(chunk));
        if chunk + 1 == c {
            break;
        }
        let receiver = (chunk + 1) % p;
        let available = complete(chunk);
        let new: Vec<usize> = available
            .iter()
            .copied()
            .filter(|b| !held[receiver].contains(b))
            .collect();
        for (count, sent) in [(available.len(), &mut naive), (new.len(), &mut cached)] {
            sent.total += count as f64;
            sent.peak = sent.peak.max(count as f64);
        }
        held[receiver].extend(new);
    }
    (naive, cached)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With whole blocks per chunk and no embedding, Eq. 7 and the exact form of Eq. 8 are
    /// the step-by-step counts, and Eq. 8 as written bounds them from above.
    #[test]
    fn closed_forms_match_the_step_by_step_count() {
        for stages in 1..=6 {
            for virtual_stages in 1..=4 {
                for per_chunk in 1..=3 {
                    let layout = Layout {
                        stages,
                        virtual_stages,
                    };
                    let block_size = 2;
                    let layers = layout.chunks() * per_chunk * block_size;
                    let model = Blocks {
                        layers,
                        block_size,
                        embedding: false,
                    };
                    let (naive_sim, cached_sim) = simulate(layout, model);
                    let n_p = per_chunk as f64;
                    assert_eq!(
                        naive_sim,
                        naive(layout, n_p),
                        "P {stages} V {virtual_stages} N_p {per_chunk}"
                    );
                    assert_eq!(
                        cached_sim,
                        cached_exact(layout, n_p),
                        "P {stages} V {virtual_stages} N_p {per_chunk}"
                    );
                    let report = cached_report(layout, n_p);
                    assert!(report.total >= cached_sim.total && report.peak >= cached_sim.peak);
                }
            }
        }
    }

    /// The report's claim: caching cuts the peak per transition from O(C) to O(P), about V
    /// times; Eq. 7 over Eq. 8's peak is (C - 1) / P = V - 1/P.
    #[test]
    fn caching_cuts_the_peak_about_v_times() {
        let layout = Layout {
            stages: 8,
            virtual_stages: 4,
        };
        let ratio = naive(layout, 1.0).peak / cached_report(layout, 1.0).peak;
        assert!((ratio - (4.0 - 1.0 / 8.0)).abs() < 1e-12, "{ratio}");
        let (n, c) = simulate(
            layout,
            Blocks {
                layers: 64,
                block_size: 2,
                embedding: false,
            },
        );
        assert!(n.peak / c.peak >= 4.0, "exact ratio {}", n.peak / c.peak);
    }

    /// Blocks that straddle chunks and the embedding: every block still reaches every later
    /// stage exactly once with caching.
    #[test]
    fn caching_sends_each_block_once_per_stage_at_most() {
        let layout = Layout {
            stages: 4,
            virtual_stages: 2,
        };
        let model = Blocks {
            layers: 16,
            block_size: 4,
            embedding: true,
        };
        let (naive_sim, cached_sim) = simulate(layout, model);
        // 4 blocks + the embedding, each sent to at most the 3 stages that did not make it.
        assert!(cached_sim.total <= 5.0 * 3.0, "{cached_sim:?}");
        assert!(naive_sim.total > cached_sim.total);
    }
}
