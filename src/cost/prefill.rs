//! Memory of the block cache during prefill (the report's section 4.2): every layer reads the
//! `N` block summaries, `T x d` each per sequence, so prefill holds `N T d` elements. Sharding
//! along the sequence over the `tp` tensor-parallel ranks leaves `N (T / tp) d` per device;
//! chunked prefill holds only one chunk's rows at a time, `N (chunk / tp) d`.

use super::Dtype;

/// One long-context prefill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefill {
    /// Block summaries `N` (the embedding not counted, as in the report's example).
    pub blocks: f64,
    /// Context `T` in tokens.
    pub context: f64,
    pub d_model: f64,
    pub dtype: Dtype,
    /// Tensor-parallel ranks the sequence is sharded over.
    pub tp: f64,
    /// Chunked prefill's chunk length, if any.
    pub chunk: Option<f64>,
}

/// Bytes of the block cache of one sequence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefillMemory {
    /// On one device, unsharded.
    pub whole: f64,
    /// Per device, sharded along the sequence.
    pub sharded: f64,
    /// Per device, sharded and chunked (the sharded figure when there are no chunks).
    pub chunked: f64,
}

pub fn block_cache(p: &Prefill) -> PrefillMemory {
    let bytes = |tokens: f64| p.blocks * tokens * p.d_model * p.dtype.bytes();
    let whole = bytes(p.context);
    let sharded = whole / p.tp;
    PrefillMemory {
        whole,
        sharded,
        chunked: p.chunk.map_or(sharded, |c| bytes(c.min(p.context)) / p.tp),
    }
}

/// The report's example: 8 blocks, 128K tokens, about 15 GB; about 1.9 GB per device sharded;
/// under 0.3 GB with 16K chunks. It states neither `d`, the dtype nor the ranks: bf16 and
/// `d = 7168` give 15.03 GB, and 15 / 1.9 implies 8 ranks (our reading; docs/cost.md).
pub fn report_example() -> Prefill {
    Prefill {
        blocks: 8.0,
        context: 131_072.0,
        d_model: 7168.0,
        dtype: Dtype::Bf16,
        tp: 8.0,
        chunk: Some(16_384.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the rounding the report uses: "15 GB", "roughly 1.9 GB", "under 0.3 GB".
    #[test]
    fn the_reports_prefill_figures() {
        let m = block_cache(&report_example());
        assert_eq!(format!("{:.0}", m.whole / 1e9), "15");
        assert_eq!(format!("{:.1}", m.sharded / 1e9), "1.9");
        assert!(m.chunked < 0.3e9, "{}", m.chunked);
        // d recovered from 15 GB alone lies within 1% of 7168.
        let d: f64 = 15e9 / (8.0 * 131_072.0 * 2.0);
        assert!((d / 7168.0 - 1.0).abs() < 0.01, "{d}");
    }

    #[test]
    fn chunks_longer_than_the_context_change_nothing() {
        let p = Prefill {
            chunk: Some(1e9),
            ..report_example()
        };
        let m = block_cache(&p);
        assert_eq!(m.chunked, m.sharded);
    }
}
