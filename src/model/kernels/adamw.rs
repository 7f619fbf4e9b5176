//! One AdamW step of one parameter as one operation (SPEC section 7, docs/performance.md):
//! burn's `AdamW` takes fifteen tensor operations a parameter, each a pass over it with a
//! fresh output, some 34 reads and writes of a parameter-sized buffer; fused, one pass that
//! reads the parameter, its gradient and both moments and writes the three new tensors. On
//! the CPU in f32 (`rows`) the pass computes burn's products, quotients and sums in burn's
//! order, each rounded once to f32: the moments equal burn's bit for bit, and the parameter
//! may differ in its last place where libtorch's square root (MKL's) is not correctly
//! rounded and the CPU's is (`tests/kernels.rs`). Elsewhere (flex, CUDA, bf16) the same
//! operations run composed (`composed::adamw_step`).

use burn::backend::Dispatch;
use burn::tensor::Tensor;

use super::KernelOps;

/// One step's hyperparameters, as burn's `AdamW` takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub weight_decay: f32,
    pub lr: f64,
    /// The step's number, from 1: the moments' bias corrections.
    pub time: usize,
}

/// The step's scalars, each computed as burn's `AdamW` computes it and in its type (the
/// decay and the learning rate in f64, rounded to the tensor's float where they are applied).
#[derive(Clone, Copy, Debug)]
pub(super) struct Scalars {
    pub beta_1: f32,
    pub beta_2: f32,
    /// `1 - beta_1`, `1 - beta_2`.
    pub factor_1: f32,
    pub factor_2: f32,
    /// `1 - beta^t`: the bias corrections.
    pub correction_1: f32,
    pub correction_2: f32,
    pub epsilon: f32,
    /// `1 - lr weight_decay`, or none where that product is 0.
    pub keep: Option<f64>,
    pub lr: f64,
    /// No moments yet: they start from zero, as `g (1 - beta)` (burn's first step).
    pub first: bool,
}

impl AdamWStep {
    pub(super) fn scalars(&self, first: bool) -> Scalars {
        let time = self.time as i32;
        let decay_rate = self.lr * self.weight_decay as f64;
        Scalars {
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            factor_1: 1.0 - self.beta_1,
            factor_2: 1.0 - self.beta_2,
            correction_1: 1.0 - self.beta_1.powi(time),
            correction_2: 1.0 - self.beta_2.powi(time),
            epsilon: self.epsilon,
            keep: (decay_rate != 0.0).then_some(1.0 - decay_rate),
            lr: self.lr,
            first,
        }
    }
}

/// The parameter, first moment and second moment after one AdamW step of `param` with
/// `grad` from `moments` (`None` on the first step).
pub fn adamw_step<const D: usize>(
    param: Tensor<D>,
    grad: Tensor<D>,
    moments: Option<(Tensor<D>, Tensor<D>)>,
    step: AdamWStep,
) -> (Tensor<D>, Tensor<D>, Tensor<D>) {
    let first = moments.is_none();
    // The first step reads no moments: the gradient stands in for both.
    let (m1, m2) = moments.unwrap_or_else(|| (grad.clone(), grad.clone()));
    debug_assert!([&grad, &m1, &m2].iter().all(|t| t.shape() == param.shape()));
    let (p, m1, m2) = <Dispatch as KernelOps>::adamw_step(
        param.into_dispatch(),
        grad.into_dispatch(),
        m1.into_dispatch(),
        m2.into_dispatch(),
        step,
        first,
    );
    (
        Tensor::from_dispatch(p),
        Tensor::from_dispatch(m1),
        Tensor::from_dispatch(m2),
    )
}

/// The row kernel, over contiguous f32.
#[cfg(feature = "tch")]
mod rows {
    use super::Scalars;

    /// What one task reads: the parameter, gradient and moments of its entries.
    pub struct Inputs<'a> {
        pub p: &'a [f32],
        pub g: &'a [f32],
        pub m1: &'a [f32],
        pub m2: &'a [f32],
    }

    /// What it writes: the new parameter and moments.
    pub struct Outputs<'a> {
        pub p: &'a mut [f32],
        pub m1: &'a mut [f32],
        pub m2: &'a mut [f32],
    }

    /// `m1 = m1 b1 + g (1 - b1)`, `m2 = m2 b2 + (g g)(1 - b2)` (`g (1 - b1)` and `(g g)(1 -
    /// b2)` on the first step), `p = p keep - (m1 / c1) / (sqrt(m2 / c2) + eps) lr`: burn's
    /// operations in its order, each rounded to f32 (Rust never fuses a multiply and an add).
    pub fn step(s: &Scalars, i: Inputs, o: &mut Outputs) {
        let n = o.p.len();
        assert!(
            [i.p.len(), i.g.len(), i.m1.len(), i.m2.len()]
                .iter()
                .all(|&l| l == n)
        );
        assert!(o.m1.len() == n && o.m2.len() == n);
        // libtorch rounds a scalar operand to the tensor's float.
        let (keep, lr) = (s.keep.map(|k| k as f32), s.lr as f32);
        for e in 0..n {
            let g = i.g[e];
            let (m1, m2) = if s.first {
                (g * s.factor_1, (g * g) * s.factor_2)
            } else {
                (
                    i.m1[e] * s.beta_1 + g * s.factor_1,
                    i.m2[e] * s.beta_2 + (g * g) * s.factor_2,
                )
            };
            let delta = (m1 / s.correction_1) / ((m2 / s.correction_2).sqrt() + s.epsilon);
            let kept = match keep {
                Some(keep) => i.p[e] * keep,
                None => i.p[e],
            };
            o.p[e] = kept - delta * lr;
            o.m1[e] = m1;
            o.m2[e] = m2;
        }
    }
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::AdamWStep;
    use super::rows::{self, Inputs, Outputs};
    use crate::model::kernels::omp::for_each_task;
    use crate::model::kernels::tch_memory::{empty, floats, slice_mut};

    type T = FloatTensor<LibTorch>;

    /// Entries per task (any split gives the same results).
    const TASK: usize = 1 << 14;

    /// The step on f32 CPU tensors of one shape; `None` for others, which take the composed
    /// form (`composed::adamw_step`).
    pub fn step(p: &T, g: &T, m1: &T, m2: &T, step: AdamWStep, first: bool) -> Option<(T, T, T)> {
        let [pc, gc, m1c, m2c] = [p, g, m1, m2].map(|t| t.tensor.contiguous());
        let same = [&gc, &m1c, &m2c].iter().all(|t| t.size() == pc.size());
        let (Some(pv), Some(gv), Some(m1v), Some(m2v), true) =
            (floats(&pc), floats(&gc), floats(&m1c), floats(&m2c), same)
        else {
            return None;
        };
        let s = step.scalars(first);
        let size = pc.size();
        let (mut po, mut m1o, mut m2o) = (empty(&size), empty(&size), empty(&size));
        let (p_out, m1_out, m2_out) = (chunks(&mut po), chunks(&mut m1o), chunks(&mut m2o));
        let tasks: Vec<Outputs> = p_out
            .into_iter()
            .zip(m1_out.into_iter().zip(m2_out))
            .map(|(p, (m1, m2))| Outputs { p, m1, m2 })
            .collect();
        for_each_task(tasks, &|task, out: &mut Outputs| {
            let at = task * TASK..task * TASK + out.p.len();
            let inputs = Inputs {
                p: &pv[at.clone()],
                g: &gv[at.clone()],
                m1: &m1v[at.clone()],
                m2: &m2v[at],
            };
            rows::step(&s, inputs, out);
        });
        Some((TchTensor::new(po), TchTensor::new(m1o), TchTensor::new(m2o)))
    }

    /// A fresh output's tasks' shares.
    fn chunks(t: &mut tch::Tensor) -> Vec<&mut [f32]> {
        slice_mut(t).chunks_mut(TASK).collect()
    }
}
