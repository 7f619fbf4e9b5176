//! The model: a Llama-style decoder LM whose residual family is chosen by config.
//! Knows nothing of files; everything is built from a [`ModelConfig`] and a seed.

pub mod attention;
pub mod config;
pub mod flops;
pub mod init;
#[allow(deprecated)] // the extension macro names burn-tch's backend, which burn 0.22 deprecates.
pub mod kernels;
pub mod lm;
pub mod memory;
pub mod mlp;
pub mod norm;
pub mod params;
pub mod residual;
pub mod rope;
pub mod sources;

pub use config::{AttnResConfig, ModelConfig, ResidualConfig};
pub use lm::Lm;
pub use residual::{Probes, Trace};
