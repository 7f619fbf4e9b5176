//! Memory I/O per token per layer caused by the residual mechanism (the report's Table 1,
//! section 4.2 and Appendix B), excluding the layer function's own I/O. A "layer" is one
//! sublayer (attention or MLP), so `L = 2 * n_blocks`. AttnRes counts assume the two-phase
//! schedule: phase 1 batches the inter-block reads of a block's `S` layers into one pass,
//! phase 2 merges each layer's intra-block part with an online softmax.

/// An amount of traffic: `d`-sized vectors plus scalars (mHC's mixing coefficients).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Traffic {
    /// In units of `d` elements.
    pub vectors: f64,
    /// Single elements, independent of `d`.
    pub scalars: f64,
}

impl Traffic {
    pub const fn d(vectors: f64) -> Self {
        Self {
            vectors,
            scalars: 0.0,
        }
    }

    pub const fn new(vectors: f64, scalars: f64) -> Self {
        Self { vectors, scalars }
    }

    pub fn plus(self, other: Self) -> Self {
        Self::new(self.vectors + other.vectors, self.scalars + other.scalars)
    }

    /// Elements for model width `d`.
    pub fn elements(self, d: f64) -> f64 {
        self.vectors * d + self.scalars
    }

    /// `5.5d`, `34d + 48`, `d`, `24`.
    pub fn text(self) -> String {
        let v = match self.vectors {
            1.0 => "d".to_string(),
            v => format!("{}d", trim(v)),
        };
        match (self.vectors, self.scalars) {
            (_, 0.0) => v,
            (0.0, s) => trim(s),
            (_, s) => format!("{v} + {}", trim(s)),
        }
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One row of Table 1: an operation and what it reads and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: &'static str,
    pub read: Traffic,
    pub write: Traffic,
}

/// A residual scheme with the shape parameters its I/O depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scheme {
    /// `h + f(h)`: read two vectors, write one.
    Standard,
    /// Manifold-constrained hyper-connections with `m` streams (arXiv 2512.24880).
    Mhc { m: f64 },
    /// Full AttnRes under the two-phase schedule, its `L` layers grouped into `n` groups of
    /// `s` for inference (Appendix B: a scheduling device, not a change to the model).
    Full { s: f64, n: f64 },
    /// Block AttnRes with `n` blocks of `s` layers.
    Block { s: f64, n: f64 },
    /// mhc_attnres (ours): mHC's read and write, and in each of `m` streams Full AttnRes
    /// grouped as [`Self::Full`] in place of the stream mixing `A`.
    MhcAttnRes { m: f64, s: f64, n: f64 },
    /// DenseFormer over `blocks` Transformer blocks: a standard residual inside each block,
    /// and after block `i` a weighted average of the embedding and `i + 1` block outputs.
    /// Our count (the report has none): the averages read `i + 2` vectors and write one,
    /// amortized over the `2 * blocks` layers, with no batching.
    DenseFormer { blocks: f64 },
}

impl Scheme {
    pub fn name(&self) -> String {
        match self {
            Self::Standard => "standard residual".into(),
            Self::Mhc { m } => format!("mHC (m = {})", trim(*m)),
            Self::Full { s, n } => format!(
                "Full AttnRes (two-phase, {} groups of {})",
                trim(*n),
                trim(*s)
            ),
            Self::Block { s, n } => format!("Block AttnRes (N = {}, S = {})", trim(*n), trim(*s)),
            Self::MhcAttnRes { m, .. } => format!("mhc_attnres (m = {})", trim(*m)),
            Self::DenseFormer { blocks } => format!("DenseFormer ({} blocks)", trim(*blocks)),
        }
    }

    /// The operations of Table 1, per token per layer.
    pub fn operations(&self) -> Vec<Operation> {
        let op = |name, read, write| Operation { name, read, write };
        match *self {
            Self::Standard => vec![op("residual merge", Traffic::d(2.0), Traffic::d(1.0))],
            Self::Mhc { m } => vec![
                op(
                    "compute alpha, beta, A",
                    Traffic::d(m),
                    Traffic::new(0.0, m * m + 2.0 * m),
                ),
                op("apply alpha", Traffic::new(m, m), Traffic::d(1.0)),
                op("apply beta", Traffic::new(1.0, m), Traffic::d(m)),
                op("apply A", Traffic::new(m, m * m), Traffic::d(m)),
                op("residual merge", Traffic::d(2.0 * m), Traffic::d(m)),
            ],
            // Appendix B, Eqs. 11-17: keys and values are both read (factor 2); per layer
            // the inter-block pass reads (N - 1) d and the intra-block merge (S - 1) d, each
            // writing d.
            Self::Full { s, n } => vec![
                op("phase 1 (amortized)", Traffic::d(n - 1.0), Traffic::d(1.0)),
                op("phase 2", Traffic::d(s - 1.0), Traffic::d(1.0)),
            ],
            // Table 1: the phase-1 read of the N block summaries once per block of S layers,
            // amortized; phase 2 as the table gives it (3d read, d write; the report does not
            // break the 3d down).
            Self::Block { s, n } => vec![
                op("phase 1 (amortized)", Traffic::d(n / s), Traffic::d(1.0)),
                op("phase 2", Traffic::d(3.0), Traffic::d(1.0)),
            ],
            Self::MhcAttnRes { m, s, n } => vec![
                op(
                    "compute alpha, beta",
                    Traffic::d(m),
                    Traffic::new(0.0, 2.0 * m),
                ),
                op("apply alpha", Traffic::new(m, m), Traffic::d(1.0)),
                op("apply beta", Traffic::new(1.0, m), Traffic::d(m)),
                op(
                    "phase 1 in each stream (amortized)",
                    Traffic::d(m * (n - 1.0)),
                    Traffic::d(m),
                ),
                op(
                    "phase 2 in each stream",
                    Traffic::d(m * (s - 1.0)),
                    Traffic::d(m),
                ),
            ],
            Self::DenseFormer { blocks } => vec![
                op("residual merge", Traffic::d(2.0), Traffic::d(1.0)),
                // sum_{i<B} (i + 2) reads and B writes, over 2B layers.
                op(
                    "depth-weighted average (amortized)",
                    Traffic::d((blocks + 3.0) / 4.0),
                    Traffic::d(0.5),
                ),
            ],
        }
    }

    /// Reads plus writes per token per layer.
    pub fn total(&self) -> Traffic {
        self.operations()
            .iter()
            .fold(Traffic::default(), |acc, o| acc.plus(o.read).plus(o.write))
    }

    /// `d`-vectors per token kept alive by the residual mechanism beyond the one hidden state
    /// a standard residual keeps (training without recomputation): Full keeps every layer
    /// output (`L`), Block its `N` summaries and the partial sum, mHC `m - 1` more streams,
    /// mhc_attnres every layer's write in every stream, DenseFormer the embedding and every
    /// block output.
    pub fn extra_state(&self) -> f64 {
        match *self {
            Self::Standard => 0.0,
            Self::Mhc { m } => m - 1.0,
            Self::Full { s, n } => s * n,
            Self::MhcAttnRes { m, s, n } => m * s * n + m - 1.0,
            Self::Block { n, .. } => n + 1.0,
            Self::DenseFormer { blocks } => blocks + 1.0,
        }
    }
}

/// Table 1's typical values: `L = 128`, `N = 8`, `S = 16`, `m = 4`.
pub fn table1_schemes() -> [Scheme; 4] {
    [
        Scheme::Standard,
        Scheme::Mhc { m: 4.0 },
        Scheme::Full { s: 16.0, n: 8.0 },
        Scheme::Block { s: 16.0, n: 8.0 },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's totals at its typical values: 3d, 34d (plus 48 scalars that the table
    /// leaves out), 24d and 5.5d.
    #[test]
    fn table1_totals_are_the_reports() {
        let totals: Vec<Traffic> = table1_schemes().iter().map(Scheme::total).collect();
        assert_eq!(totals[0], Traffic::d(3.0));
        assert_eq!(totals[1], Traffic::new(34.0, 48.0));
        assert_eq!(totals[2], Traffic::d(24.0));
        assert_eq!(totals[3], Traffic::d(5.5));
        assert_eq!(totals[3].text(), "5.5d");
        assert_eq!(totals[1].text(), "34d + 48");
        assert_eq!(Traffic::d(1.0).text(), "d");
        assert_eq!(Traffic::new(0.0, 24.0).text(), "24");
        assert_eq!(Traffic::d(0.0).text(), "0d");
    }

    /// The symbolic totals of Table 1: (8m + 2)d + 2m^2 + 4m, (S + N)d and (N/S + 5)d.
    #[test]
    fn totals_follow_the_symbolic_forms() {
        for m in [1.0, 2.0, 4.0, 8.0] {
            let t = Scheme::Mhc { m }.total();
            assert_eq!(t, Traffic::new(8.0 * m + 2.0, 2.0 * m * m + 4.0 * m));
        }
        for (s, n) in [(1.0, 128.0), (6.0, 9.0), (16.0, 8.0), (32.0, 4.0)] {
            assert_eq!(Scheme::Full { s, n }.total(), Traffic::d(s + n));
            assert_eq!(Scheme::Block { s, n }.total(), Traffic::d(n / s + 5.0));
        }
    }

    /// DenseFormer's average, written out: blocks 0..B read i + 2 vectors and write one.
    #[test]
    fn denseformer_amortization_matches_a_direct_sum() {
        for b in [1usize, 4, 27, 64] {
            let reads: usize = (0..b).map(|i| i + 2).sum();
            let direct = 3.0 + (reads + b) as f64 / (2 * b) as f64;
            let t = Scheme::DenseFormer { blocks: b as f64 }.total();
            assert!(
                (t.vectors - direct).abs() < 1e-12,
                "B = {b}: {} vs {direct}",
                t.vectors
            );
        }
    }
}
