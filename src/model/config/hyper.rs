//! The configuration of the multi-stream families: hyper-connections, mHC and mHC-lite
//! (SPEC section 6, docs/method.md).

use super::ConfigError;

/// The multi-stream families (SPEC section 6, docs/method.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HyperConfig {
    pub kind: HyperKind,
    /// `m`: residual streams.
    pub streams: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyperKind {
    /// Hyper-connections (arXiv 2409.19606); `dynamic` adds the input-dependent terms.
    Hc { dynamic: bool },
    /// mHC (arXiv 2512.24880): stream mixing made doubly stochastic by Sinkhorn-Knopp.
    Mhc { sinkhorn_iters: usize },
    /// mHC-lite (arXiv 2601.05732): a convex combination of permutation matrices.
    MhcLite,
    /// mHC's read and write with its stream mixing replaced by Full AttnRes inside each
    /// stream (ours, docs/method.md).
    MhcAttnRes,
}

impl HyperConfig {
    /// Streams when a sweep does not say: the papers' `m = 4`.
    pub const DEFAULT_STREAMS: usize = 4;
    /// mHC's Sinkhorn-Knopp iterations when a sweep does not say (the paper's 20).
    pub const DEFAULT_SINKHORN_ITERS: usize = 20;

    pub fn hc(streams: usize) -> Self {
        Self {
            kind: HyperKind::Hc { dynamic: true },
            streams,
        }
    }

    pub fn mhc(streams: usize) -> Self {
        Self {
            kind: HyperKind::Mhc {
                sinkhorn_iters: Self::DEFAULT_SINKHORN_ITERS,
            },
            streams,
        }
    }

    pub fn mhc_lite(streams: usize) -> Self {
        Self {
            kind: HyperKind::MhcLite,
            streams,
        }
    }

    pub fn mhc_attnres(streams: usize) -> Self {
        Self {
            kind: HyperKind::MhcAttnRes,
            streams,
        }
    }

    /// `hc`, `mhc`, `mhc_lite` or `mhc_attnres`.
    pub fn variant(&self) -> &'static str {
        match self.kind {
            HyperKind::Hc { .. } => "hc",
            HyperKind::Mhc { .. } => "mhc",
            HyperKind::MhcLite => "mhc_lite",
            HyperKind::MhcAttnRes => "mhc_attnres",
        }
    }

    /// The stream counts a family accepts: one stream makes HC the baseline; mHC needs two
    /// to mix (and mhc_attnres, its read weights, two to share); mHC-lite's `m!` permutations
    /// cap it at 6.
    pub fn stream_range(&self) -> (usize, usize) {
        match self.kind {
            HyperKind::Hc { .. } => (1, 16),
            HyperKind::Mhc { .. } | HyperKind::MhcAttnRes => (2, 16),
            HyperKind::MhcLite => (2, 6),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let (min, max) = self.stream_range();
        if !(min..=max).contains(&self.streams) {
            return Err(ConfigError::BadStreams {
                variant: self.variant(),
                streams: self.streams,
                min,
                max,
            });
        }
        if let HyperKind::Mhc { sinkhorn_iters } = self.kind {
            if sinkhorn_iters == 0 {
                return Err(ConfigError::NotPositive {
                    key: "sinkhorn_iters",
                    value: 0,
                });
            }
            if sinkhorn_iters > 1000 {
                return Err(ConfigError::TooLarge {
                    key: "sinkhorn_iters",
                    value: sinkhorn_iters,
                    max: 1000,
                });
            }
        }
        Ok(())
    }

    /// Mixing logits per layer and token: `m^2` (HC, mHC), `m!` (mHC-lite) or none
    /// (mhc_attnres: its streams do not mix).
    pub fn mixing_logits(&self) -> usize {
        match self.kind {
            HyperKind::MhcLite => (1..=self.streams).product(),
            HyperKind::MhcAttnRes => 0,
            _ => self.streams * self.streams,
        }
    }
}
