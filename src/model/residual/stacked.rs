//! The stacked path of single-head, softmax Block AttnRes (and Full AttnRes, its `S = 1`
//! case), which training and inference take whenever no probe trace is asked for: the
//! completed sources are kept stacked (`[K, N, d]`, `kernels::stack`), grown in place by
//! one source as each block completes, and every mixing step is one fused operation
//! (`kernels::mix`) over that stack and the block's partial sum, which computes the naive
//! path's softmax in one pass over the sources instead of a dozen tensor operations,
//! without copying the partial sum in.
//!
//! It reads a block's completed sources once per layer where the two-phase path
//! (`two_phase.rs`) reads them once per block, but needs neither the phase-1 tensors nor
//! their gradients, which the layers' slices of them zero-fill; measured, it is the
//! faster of the two on the CPU (docs/performance.md). Multi-head and sigmoid mixing keep
//! the two-phase path.

use burn::tensor::Tensor;

use super::Sublayers;
use super::attnres::AttnRes;
use super::two_phase::effective_query;
use crate::model::kernels::stack::{GradMode, SourceStack};

impl AttnRes {
    /// Whether [`Self::forward_stacked`] applies: the two-phase path's scorers with one
    /// head and softmax weights.
    pub fn supports_stacked(&self) -> bool {
        self.supports_two_phase() && self.mixes.iter().all(|m| m.heads == 1 && !m.sigmoid)
    }

    /// Equals [`AttnRes::forward_naive`] up to float rounding; needs
    /// [`Self::supports_stacked`]. Differentiable.
    pub fn forward_stacked(&self, e: Tensor<3>, layers: &dyn Sublayers) -> Tensor<3> {
        let [b, t, d] = e.dims();
        let n_layers = self.n_layers();
        let key_norm = self.mixes[0].uses_key_norm();
        let q = |l: usize| effective_query(&self.mixes[l]);
        // Layer `l` on its mix, added onto the block's partial sum.
        let layer = |sources: &SourceStack, partial: Option<Tensor<2>>, l: usize| {
            let x = sources.mix(partial.clone(), q(l), key_norm); // [BT, d]
            let y = layers.apply(l, x.reshape([b, t, d])).reshape([b * t, d]); // [BT, d]
            match partial {
                Some(p) => p + y,
                None => y,
            }
        };
        // The embedding and every block's output.
        let completed = 1 + self.block_starts.len();
        // Full AttnRes, with a source per mixing step, forms each source's gradient at its
        // push for the memory the buffer would take; Block keeps the buffer, whose memory
        // grows with the blocks, not the layers.
        let mode = if n_layers < completed {
            GradMode::AtPush
        } else {
            GradMode::Buffer
        };
        let mut sources = SourceStack::new(e.reshape([b * t, d]), completed, mode); // [K = 1, BT, d]
        for (k, &start) in self.block_starts.iter().enumerate() {
            let end = self.block_starts.get(k + 1).copied().unwrap_or(n_layers);
            let mut partial: Option<Tensor<2>> = None;
            for l in start..end {
                partial = Some(layer(&sources, partial, l));
            }
            if let Some(p) = partial {
                sources.push(p); // [K + 1, BT, d]
            }
        }
        let x = sources.mix(None, q(n_layers), key_norm); // the final norm's input
        x.reshape([b, t, d]) // [BT, d] -> [B, T, d]
    }
}
