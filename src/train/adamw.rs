//! AdamW with each parameter's step one fused operation (`model::kernels::adamw`): the same
//! update as burn's `AdamW` (decoupled weight decay, bias-corrected moments, no AMSGrad), in
//! one pass over a parameter where burn's takes fifteen (git log -- docs/performance.md);
//! the same floats but for a correctly rounded square root. Its state is burn's
//! `AdamWState`, so checkpoints written with burn's optimizer resume with this one and back.

use burn::optim::{AdamWState, AdaptiveMomentumState, LearningRate, Optimizer};
use burn::tensor::{Device, Tensor};

use crate::model::kernels::adamw::{AdamWStep, adamw_step};

/// AdamW's hyperparameters (burn's `AdamWConfig` without its options we never set).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedAdamW {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub weight_decay: f32,
}

impl Optimizer for FusedAdamW {
    type State<const D: usize> = AdamWState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let (moments, time) = match state {
            Some(s) => (
                Some((s.momentum.moment_1, s.momentum.moment_2)),
                s.momentum.time + 1,
            ),
            None => (None, 1),
        };
        let step = AdamWStep {
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            weight_decay: self.weight_decay,
            lr,
            time,
        };
        let (tensor, moment_1, moment_2) = adamw_step(tensor, grad, moments, step);
        let momentum = AdaptiveMomentumState {
            time,
            moment_1,
            moment_2,
            max_moment_2: None,
        };
        (tensor, Some(AdamWState { momentum }))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &Device) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}
