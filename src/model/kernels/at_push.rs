//! Every completed source's gradient formed once, at its push (`stack::GradMode::AtPush`),
//! with the mixing steps' parts of it that need the source: a step's backward keeps what the
//! pushes need ([`StepRecord`]) and reads none of its completed sources; each push reads its
//! source once, forms its gradient and adds each step's share of that step's query gradient
//! (`mix_rows/at_push.rs` has the formulas). On libtorch in f32 on the CPU the row kernels do
//! both ends; elsewhere a step's backward declines and the stack's buffer takes it.

use std::any::Any;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::NodeId;
use burn::backend::{Backend, tensor::FloatTensor};

/// What one mixing step's backward keeps for the pushes of the stacked sources it read: its
/// `g` `[N, d]`, query `[d]`, the softmax weights its forward saved `[N, K', 3]`, its
/// `g . x` `[N]`, how many stacked sources it read (`K`), whether the key norm applies,
/// and the node of its query and the query's gradient `[d]` so far,
/// to which each push adds its share (the clones of a record share it).
#[derive(Clone)]
pub(super) struct StepRecord<B: Backend> {
    pub g: FloatTensor<B>,
    pub q: FloatTensor<B>,
    pub saved: FloatTensor<B>,
    pub gx: FloatTensor<B>,
    pub completed: usize,
    pub key_norm: bool,
    pub q_node: Option<NodeId>,
    pub dq: Arc<Mutex<FloatTensor<B>>>,
}

impl<B: Backend> StepRecord<B> {
    /// The query's gradient so far.
    pub fn dq(&self) -> FloatTensor<B> {
        self.dq.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds `share` to the query's gradient.
    pub fn add_dq(&self, share: FloatTensor<B>) {
        let mut dq = self.dq.lock().unwrap_or_else(|e| e.into_inner());
        *dq = B::float_add(dq.clone(), share);
    }
}

/// The boxed records `KernelOps::stack_source_grad` takes, unboxed (every one a
/// `StepRecord<B>`: the stack hands over only those).
pub(super) fn unbox<B: Backend>(steps: Vec<Box<dyn Any + Send>>) -> Vec<StepRecord<B>> {
    steps
        .into_iter()
        .filter_map(|s| s.downcast::<StepRecord<B>>().ok())
        .map(|s| *s)
        .collect()
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use std::any::Any;

    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::super::composed;
    use super::super::mix::tch_kernel::{slotted, sources};
    use super::super::mix_rows;
    use super::super::tch_memory::{cpu_f32, empty, floats, slice_mut};
    use super::unbox;

    type T = FloatTensor<LibTorch>;

    /// See [`KernelOps::depth_mix_backward_at_push`](super::super::KernelOps::depth_mix_backward_at_push):
    /// the row kernels' (`mix_rows::mix_backward_at_push`), `None` for tensors they do not
    /// take.
    #[allow(clippy::too_many_arguments)] // the step's tensors
    pub fn backward_at_push(
        grad: T,
        stacked: T,
        partial: T,
        q: T,
        saved: T,
        x: T,
        key_norm: bool,
    ) -> Option<(T, T, T)> {
        if !cpu_f32(&stacked.tensor) {
            return None;
        }
        let (g, v, p, q_c, x_c) = (
            grad.tensor.contiguous(),
            slotted(&stacked.tensor),
            partial.tensor.contiguous(),
            q.tensor.contiguous(),
            x.tensor.contiguous(),
        );
        let kept = floats(&saved.tensor).filter(|s| !s.is_empty())?;
        let (src, qs, gs, xs) = (sources(&v, &p)?, floats(&q_c)?, floats(&g)?, floats(&x_c)?);
        let mut gx = empty(&[src.n as i64]);
        let mut dp = empty(&p.size());
        let has_partial = src.partial.is_some();
        let dq = mix_rows::mix_backward_at_push(
            gs,
            src,
            qs,
            kept,
            xs,
            key_norm,
            slice_mut(&mut gx),
            has_partial.then(|| slice_mut(&mut dp)),
        );
        let dq = tch::Tensor::from_slice(&dq);
        Some((TchTensor::new(gx), TchTensor::new(dp), TchTensor::new(dq)))
    }

    /// See [`KernelOps::stack_source_grad`](super::super::KernelOps::stack_source_grad): the
    /// row kernels' (`mix_rows::source_gradient`, the query gradients' shares added in
    /// place) where they take every tensor, else the composed form.
    pub fn source_grad(v: T, k: usize, steps: Vec<Box<dyn Any + Send>>) -> T {
        let steps = unbox::<LibTorch>(steps);
        let key_norm = steps.first().is_some_and(|s| s.key_norm);
        let contiguous = |t: &T| t.tensor.contiguous();
        let v_c = contiguous(&v);
        let kept: Vec<[tch::Tensor; 4]> = steps
            .iter()
            .map(|s| [&s.g, &s.q, &s.saved, &s.gx].map(contiguous))
            .collect();
        let rows: Option<Vec<mix_rows::StepRows>> = kept
            .iter()
            .zip(&steps)
            .map(|([g, q, saved, gx], s)| {
                Some(mix_rows::StepRows {
                    g: floats(g)?,
                    q: floats(q)?,
                    saved: floats(saved)?,
                    gx: floats(gx)?,
                    sources: saved.size()[1] as usize,
                })
                .filter(|_| s.key_norm == key_norm)
            })
            .collect();
        // The query gradients so far, which this backend's records hold as fresh
        // contiguous f32 tensors of their own (`backward_at_push`).
        let mut dq: Vec<_> = steps
            .iter()
            .map(|s| s.dq.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let own = dq.iter().all(|t| floats(&t.tensor).is_some());
        match (floats(&v_c), rows) {
            (Some(vs), Some(rows)) if !rows.is_empty() && own => {
                let mut out = empty(&v_c.size());
                let mut dq: Vec<&mut [f32]> =
                    dq.iter_mut().map(|t| slice_mut(&mut t.tensor)).collect();
                mix_rows::source_gradient(vs, k, &rows, key_norm, slice_mut(&mut out), &mut dq);
                TchTensor::new(out)
            }
            _ => {
                drop(dq);
                composed::source_grad::<LibTorch>(v, k, steps)
            }
        }
    }
}

#[cfg(all(test, feature = "tch"))]
#[allow(deprecated)] // burn-tch, as above.
mod tests {
    use std::any::Any;
    use std::sync::{Arc, Mutex};

    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use tch::{Device, Kind, Tensor};

    use super::super::composed;
    use super::{StepRecord, tch_kernel};

    fn randn(shape: &[i64]) -> Tensor {
        Tensor::randn(shape, (Kind::Float, Device::Cpu))
    }

    /// Three steps that read 2, 3 and 4 stacked sources (and a partial sum), with random
    /// `g`, queries, saved weights, `g . x` and query gradients so far.
    fn steps(n: i64, d: i64, key_norm: bool) -> Vec<StepRecord<LibTorch>> {
        (2..5)
            .map(|completed: i64| {
                let a = Tensor::rand([n, completed + 1, 1], (Kind::Float, Device::Cpu));
                let u = Tensor::rand([n, completed + 1, 1], (Kind::Float, Device::Cpu)) + 0.5;
                let saved = Tensor::cat(&[a, randn(&[n, completed + 1, 1]), u], 2);
                StepRecord {
                    g: TchTensor::new(randn(&[n, d])),
                    q: TchTensor::new(randn(&[d])),
                    saved: TchTensor::new(saved),
                    gx: TchTensor::new(randn(&[n])),
                    completed: completed as usize,
                    key_norm,
                    q_node: None,
                    dq: Arc::new(Mutex::new(TchTensor::new(randn(&[d])))),
                }
            })
            .collect()
    }

    /// The same records with query gradients of their own (copies of `steps`').
    fn apart(steps: &[StepRecord<LibTorch>]) -> Vec<StepRecord<LibTorch>> {
        let copy = |t: &TchTensor| TchTensor::new(t.tensor.copy());
        steps
            .iter()
            .map(|s| StepRecord {
                dq: Arc::new(Mutex::new(copy(&s.dq()))),
                ..s.clone()
            })
            .collect()
    }

    fn max_rel_diff(a: &Tensor, b: &Tensor) -> f64 {
        let scale = b.abs().max().double_value(&[]).max(1e-6);
        (a - b).abs().max().double_value(&[]) / scale
    }

    /// The row kernels' push (`mix_rows::source_gradient`) gives the composed form's source
    /// gradient and adds the same shares to the steps' query gradients, over several tasks of
    /// rows, with and without the key norm and with a tail of fewer than sixteen entries; a
    /// step's term left out is seen.
    #[test]
    fn the_row_kernels_push_equals_the_composed_one() {
        tch::manual_seed(24);
        for (d, key_norm) in [(16, true), (21, true), (21, false)] {
            let (n, k) = (70, 1);
            let v = randn(&[n, d]);
            let kernel = steps(n, d, key_norm);
            let composed = apart(&kernel);
            let boxed = kernel
                .iter()
                .map(|s| Box::new(s.clone()) as Box<dyn Any + Send>);
            let dv = tch_kernel::source_grad(TchTensor::new(v.copy()), k, boxed.collect());
            let want =
                composed::source_grad::<LibTorch>(TchTensor::new(v.copy()), k, composed.clone());
            let case = format!("d {d}, key norm {key_norm}");
            assert!(
                max_rel_diff(&dv.tensor, &want.tensor) < 1e-5,
                "{case}: source gradient"
            );
            for (i, (a, b)) in kernel.iter().zip(&composed).enumerate() {
                let diff = max_rel_diff(&a.dq().tensor, &b.dq().tensor);
                assert!(diff < 1e-5, "{case}: step {i}'s query gradient");
            }
            let fewer = composed::source_grad::<LibTorch>(
                TchTensor::new(v),
                k,
                apart(&kernel)[1..].to_vec(),
            );
            assert!(
                max_rel_diff(&dv.tensor, &fewer.tensor) > 1e-3,
                "{case}: a step left out"
            );
        }
    }
}
