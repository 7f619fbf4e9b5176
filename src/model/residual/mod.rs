//! The residual families of SPEC section 6 behind one enum, and the probe trace they fill.
//!
//! A family only wires depth: it is handed the embedding and a [`Sublayers`] that runs
//! `f_l`, and returns `x_L`, the input of the final norm.

mod attnres;
mod baseline;
pub mod definition;
mod denseformer;
mod hc;
mod mhc;
mod mhc_attnres;
mod mhc_lite;
mod stacked;
mod streams;
mod two_phase;

pub use attnres::{AttnRes, DepthMix, Scorer};
pub use baseline::Baseline;
pub use denseformer::DenseFormer;
pub use hc::HyperConnections;
pub use mhc::{Mhc, sinkhorn};
pub use mhc_attnres::{MhcAttnRes, ReadWrite, StreamMix};
pub use mhc_lite::{Permutations, permutations};

use burn::module::Module;
use burn::tensor::{Tensor, TensorReadError};

use super::config::ModelConfig;
use super::init::Init;
use super::norm::mean_rms;

/// The Transformer's sublayers as the residual wiring sees them.
pub trait Sublayers {
    /// `y_l = f_l(x_l)` for sublayer `l` (even: attention, odd: MLP), `[B, T, d]`.
    fn apply(&self, layer: usize, x: Tensor<3>) -> Tensor<3>;
}

// One per model, so the size of its largest variant (mHC-lite's constant tensor) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Residual {
    Baseline(Baseline),
    AttnRes(AttnRes),
    DenseFormer(DenseFormer),
    Hc(HyperConnections),
    Mhc(Mhc),
    MhcAttnRes(MhcAttnRes),
}

impl Residual {
    pub fn init(config: &ModelConfig, init: &Init) -> Self {
        use super::config::ResidualConfig as R;
        match &config.residual {
            R::Baseline => Self::Baseline(Baseline::new(config.n_layers())),
            R::AttnRes(c) => Self::AttnRes(AttnRes::init(config, c, init)),
            R::Denseformer => Self::DenseFormer(DenseFormer::init(config.n_blocks, init)),
            R::Hyper(h) => {
                use super::config::HyperKind as K;
                let (l, d, m) = (config.n_layers(), config.d_model, h.streams);
                match h.kind {
                    K::Hc { dynamic } => Self::Hc(HyperConnections::init(l, d, m, dynamic, init)),
                    K::Mhc { sinkhorn_iters } => {
                        Self::Mhc(Mhc::init(l, d, m, sinkhorn_iters, false, init))
                    }
                    K::MhcLite => Self::Mhc(Mhc::init(l, d, m, 0, true, init)),
                    K::MhcAttnRes => Self::MhcAttnRes(MhcAttnRes::init(l, d, m, init)),
                }
            }
        }
    }

    /// The training and inference path: differentiable. Without a trace, Block AttnRes takes
    /// its stacked path (one fused operation per mixing step) where it applies, else its
    /// two-phase path (SPEC section 5) where that applies; with a trace, every family takes
    /// its naive path, which records each step's depth weights into `trace`.
    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        match self {
            Self::Baseline(r) => r.forward(e, layers, trace),
            Self::AttnRes(r) if trace.is_none() && r.supports_stacked() => {
                r.forward_stacked(e, layers)
            }
            Self::AttnRes(r) if trace.is_none() && r.supports_two_phase() => {
                r.forward_two_phase(e, layers)
            }
            Self::AttnRes(r) => r.forward_naive(e, layers, trace),
            Self::DenseFormer(r) => r.forward(e, layers, trace),
            Self::Hc(r) => r.forward(e, layers, trace),
            Self::Mhc(r) => r.forward(e, layers, trace),
            Self::MhcAttnRes(r) => r.forward(e, layers, trace),
        }
    }
}

/// The three equal paths of AttnRes: [`Residual::forward`] picks the fastest that applies;
/// tests take each in turn and hold it to the naive one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnResPath {
    /// One fused operation per mixing step ([`AttnRes::supports_stacked`]).
    Stacked,
    /// The batched two-phase computation ([`AttnRes::supports_two_phase`]).
    TwoPhase,
    /// One mixing step after another, the definition.
    Naive,
}

impl Residual {
    /// AttnRes through `path` (untraced); None for another family or a path that does
    /// not apply to this configuration.
    pub fn forward_attnres_path(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        path: AttnResPath,
    ) -> Option<Tensor<3>> {
        let Self::AttnRes(r) = self else {
            return None;
        };
        match path {
            AttnResPath::Stacked if r.supports_stacked() => Some(r.forward_stacked(e, layers)),
            AttnResPath::TwoPhase if r.supports_two_phase() => Some(r.forward_two_phase(e, layers)),
            AttnResPath::Naive => Some(r.forward_naive(e, layers, None)),
            _ => None,
        }
    }
}

/// Per-layer statistics of SPEC section 8, kept as device scalars until [`Trace::read`].
#[derive(Default, Debug)]
pub struct Trace {
    in_rms: Vec<Tensor<1>>,
    out_rms: Vec<Tensor<1>>,
    block_out_rms: Vec<Tensor<1>>,
    /// The attention output of the current Transformer block, until its MLP output comes.
    attn_out: Option<Tensor<3>>,
    depth_attn: Vec<Tensor<1>>,
    stream_spread: Vec<Tensor<1>>,
}

/// The trace read back to the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    /// RMS over d of `x_l`, averaged over tokens, per layer.
    pub in_rms: Vec<f32>,
    /// RMS over d of `y_l`, averaged over tokens, per layer.
    pub out_rms: Vec<f32>,
    /// RMS over d of `y_2i + y_2i+1`, averaged over tokens, per Transformer block `i`: the
    /// block's whole contribution (SPEC section 8), which the two RMS values cannot give.
    pub block_out_rms: Vec<f32>,
    /// Mean weight of each source, per mixing step (AttnRes: layers then the output step;
    /// DenseFormer: one step per Transformer block; HC, mHC, mHC-lite: each layer's read
    /// weight of each stream). Empty for the baseline.
    pub depth_attn: Vec<Vec<f32>>,
    /// Multi-stream families only, per layer after its update: how far the streams are
    /// apart, `RMS_d(h_i - mean_j h_j) / RMS_d(mean_j h_j)` averaged over streams and tokens.
    /// Zero while every stream is the same (as at init); empty for the other families.
    pub stream_spread: Vec<f32>,
}

impl Trace {
    /// Records the input and output of one sublayer; sublayers come in order, attention
    /// then MLP, so every second call completes a Transformer block.
    pub fn layer(&mut self, x: &Tensor<3>, y: &Tensor<3>) {
        let y = y.clone().detach();
        self.in_rms.push(mean_rms(x.clone().detach()));
        self.out_rms.push(mean_rms(y.clone()));
        match self.attn_out.take() {
            None => self.attn_out = Some(y),
            Some(attn) => self.block_out_rms.push(mean_rms(attn + y)),
        }
    }

    /// Records one mixing step's weights, already averaged to one value per source.
    pub fn depth(&mut self, weights: Tensor<1>) {
        self.depth_attn.push(weights.detach());
    }

    /// Records how far the streams `h` `[B, T, m, d]` are apart after a layer.
    pub fn streams(&mut self, h: &Tensor<4>) {
        let h = h.clone().detach();
        let mean = h.clone().mean_dim(2); // [B, T, 1, d]
        let apart = (h - mean.clone()).powi_scalar(2).mean_dim(3).sqrt(); // [B, T, m, 1]
        let size = mean.powi_scalar(2).mean_dim(3).sqrt(); // [B, T, 1, 1]
        self.stream_spread
            .push((apart / (size + 1e-12)).mean().reshape([1]));
    }

    /// Reads every recorded statistic back to the host (one sync per tensor).
    pub fn read(self) -> Result<Probes, TensorReadError> {
        let host = |t: Tensor<1>| t.try_to_vec_as::<f32>();
        let scalars = |v: Vec<Tensor<1>>| -> Result<Vec<f32>, TensorReadError> {
            Ok(v.into_iter()
                .map(host)
                .collect::<Result<Vec<_>, _>>()?
                .concat())
        };
        Ok(Probes {
            in_rms: scalars(self.in_rms)?,
            out_rms: scalars(self.out_rms)?,
            block_out_rms: scalars(self.block_out_rms)?,
            stream_spread: scalars(self.stream_spread)?,
            depth_attn: self
                .depth_attn
                .into_iter()
                .map(host)
                .collect::<Result<_, _>>()?,
        })
    }
}
