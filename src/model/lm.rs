//! The Llama-style decoder LM around the residual family (SPEC section 7).

use std::cell::RefCell;

use burn::module::{Module, Param};
use burn::tensor::module::embedding;
use burn::tensor::{Device, Int, Tensor};

use super::attention::Attention;
use super::config::{ConfigError, ModelConfig};
use super::init::Init;
use super::kernels::linear::linear;
use super::mlp::Mlp;
use super::norm::RmsNorm;
use super::residual::{AttnResPath, Residual, Sublayers, Trace};
use super::rope::Rope;

/// One Transformer block: two sublayers, each with its own PreNorm.
#[derive(Module, Debug)]
pub struct TransformerBlock {
    pub attn_norm: RmsNorm,
    pub attn: Attention,
    pub mlp_norm: RmsNorm,
    pub mlp: Mlp,
}

#[derive(Module, Debug)]
pub struct Lm {
    /// `[vocab, d]`.
    pub embed: Param<Tensor<2>>,
    pub blocks: Vec<TransformerBlock>,
    pub residual: Residual,
    pub final_norm: RmsNorm,
    /// `[d, vocab]`, untied from the embedding.
    pub head: Param<Tensor<2>>,
    pub rope: Rope,
}

/// The blocks seen as `L = 2 * n_blocks` sublayers `f_l`, for one forward pass.
struct BlockSublayers<'a> {
    blocks: &'a [TransformerBlock],
    rope: &'a Rope,
    /// With the value residual: the first attention layer's values, kept from layer 0 for
    /// the later ones (every family applies sublayers in order, once each).
    first_values: Option<RefCell<Option<Tensor<4>>>>,
}

impl Sublayers for BlockSublayers<'_> {
    fn apply(&self, layer: usize, x: Tensor<3>) -> Tensor<3> {
        let block = &self.blocks[layer / 2];
        if !layer.is_multiple_of(2) {
            return block.mlp.forward(block.mlp_norm.forward(x));
        }
        let x = block.attn_norm.forward(x);
        let Some(first) = &self.first_values else {
            return block.attn.forward(x, self.rope, None).0;
        };
        let given = if layer == 0 {
            None
        } else {
            first.borrow().clone()
        };
        let (y, own) = block.attn.forward(x, self.rope, given);
        if layer == 0 {
            *first.borrow_mut() = Some(own);
        }
        y
    }
}

impl Lm {
    /// Builds the model with the init of SPEC section 7, reproducibly from `seed`.
    pub fn init(config: &ModelConfig, seed: u64, device: &Device) -> Result<Self, ConfigError> {
        config.validate()?;
        let init = Init::new(seed, device);
        let (d, v) = (config.d_model, config.vocab_size);
        let out_std = 0.02 / (2.0 * config.n_blocks as f64).sqrt();
        let blocks = (0..config.n_blocks)
            .map(|i| TransformerBlock {
                attn_norm: RmsNorm::init(d, &init),
                attn: Attention::init(
                    &format!("blocks.{i}.attn"),
                    d,
                    config.n_heads,
                    out_std,
                    config.value_residual && i > 0,
                    &init,
                ),
                mlp_norm: RmsNorm::init(d, &init),
                mlp: Mlp::init(
                    &format!("blocks.{i}.mlp"),
                    d,
                    config.ff_hidden(),
                    out_std,
                    &init,
                ),
            })
            .collect();
        Ok(Self {
            embed: init.normal("embed", [v, d], 0.02),
            blocks,
            residual: Residual::init(config, &init),
            final_norm: RmsNorm::init(d, &init),
            head: init.normal("head", [d, v], 0.02),
            rope: Rope::new(config.context, config.head_dim(), device),
        })
    }

    fn sublayers(&self) -> BlockSublayers<'_> {
        let value_residual = self.blocks.iter().any(|b| b.attn.value_mix.is_some());
        BlockSublayers {
            blocks: &self.blocks,
            rope: &self.rope,
            first_values: value_residual.then(|| RefCell::new(None)),
        }
    }

    /// `tokens` `[B, T]` -> logits `[B, T, vocab]`: the differentiable path of training, eval
    /// and generation (two-phase Block AttnRes where it applies).
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let e = embedding(self.embed.val(), tokens); // [B, T, d]
        let x = self.residual.forward(e, &self.sublayers(), None);
        self.logits(x)
    }

    /// The naive path, recording the probes of SPEC section 8 into `trace`.
    pub fn forward_traced(&self, tokens: Tensor<2, Int>, trace: &mut Trace) -> Tensor<3> {
        let e = embedding(self.embed.val(), tokens); // [B, T, d]
        let x = self.residual.forward(e, &self.sublayers(), Some(trace));
        self.logits(x)
    }

    /// [`Self::forward`] through one AttnRes path; None for another family or a path that
    /// does not apply (tests hold each path to the naive one).
    pub fn forward_attnres_path(
        &self,
        tokens: Tensor<2, Int>,
        path: AttnResPath,
    ) -> Option<Tensor<3>> {
        let e = embedding(self.embed.val(), tokens); // [B, T, d]
        let x = self
            .residual
            .forward_attnres_path(e, &self.sublayers(), path)?;
        Some(self.logits(x))
    }

    fn logits(&self, x: Tensor<3>) -> Tensor<3> {
        linear(self.final_norm.forward(x), self.head.val()) // [B, T, vocab]
    }
}
