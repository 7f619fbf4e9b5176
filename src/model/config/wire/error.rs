//! What is wrong with a `residual` entry of a sweep or run file, and how to write it instead.

use thiserror::Error;

use crate::model::config::ConfigError;

/// A `residual` entry whose keys do not fit its variant.
#[derive(Debug, Error)]
pub enum ResidualError {
    #[error(
        "`value_residual` belongs to a sweep's `residual` entry (it sets the model, not the \
         residual family); it is not accepted here"
    )]
    ValueResidualHere,
    #[error(
        "`{key}` applies only to the multi-stream variants (hc, mhc, mhc_lite, mhc_attnres), \
         not `{variant}`"
    )]
    StreamKey {
        key: &'static str,
        variant: &'static str,
    },
    #[error("`block_sizes` applies only to `variant: block`, not `{0}`")]
    BlockSizesOff(&'static str),
    #[error(
        "give `block_size` (one size for every block) or `block_sizes` (one per block), not both"
    )]
    BothBlockSizes,
    #[error("`block_size` applies only to the `full` and `block` variants, not `{0}`")]
    BlockSizeOff(&'static str),
    #[error(
        "AttnRes ablation keys (key_norm, normalize, query, mixing, window, heads) apply only to \
         `full` and `block`, not `{0}`"
    )]
    AblationKeysOff(&'static str),
    #[error("`full` means block_size 1, got block_size {0}; use `variant: block` instead")]
    FullWithBlockSize(usize),
    #[error("`block_sizes` {0:?} must list block lengths of at least 1, e.g. [2, 2, 4]")]
    BadBlockSizes(Vec<usize>),
    #[error("`block_sizes` of all 1s is Full AttnRes; write `full`")]
    AllBlocksOne,
    #[error("`variant: block` needs `block_size` (layers per block, e.g. 4)")]
    NoBlockSize,
    #[error(
        "AttnRes keys (block_size, block_sizes, key_norm, normalize, query, mixing, window, \
         heads) do not apply to `{variant}`; it takes `streams`{also}"
    )]
    AttnResKeysOnStreams {
        variant: &'static str,
        /// What else the variant takes (" and `dynamic`"), or nothing.
        also: &'static str,
    },
    #[error("`dynamic` applies only to `hc`, not `{0}`")]
    DynamicOff(&'static str),
    #[error("`sinkhorn_iters` applies only to `mhc`, not `{0}` (mhc_lite needs no iterations)")]
    SinkhornOff(&'static str),
    #[error(transparent)]
    Config(#[from] ConfigError),
}
