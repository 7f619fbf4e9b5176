//! Every completed source's gradient formed once, at its push (`stack::GradMode::AtPush`),
//! with the mixing steps' parts of it that need the source: a step's backward keeps what the
//! pushes need ([`StepRecord`]) and reads none of its completed sources; each push reads its
//! source once, forms its gradient and adds each step's share of that step's query gradient
//! (`mix_rows/at_push.rs` and `mix_rows/push.rs` have the formulas; a push may form a group
//! of sources at once, `stack/grad.rs`). On libtorch in f32 on the CPU the row kernels do
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
    use super::super::stack::padded_slots;
    use super::super::tch_memory::{cpu_f32, empty, floats, slice_mut, slots_of, slots_of_mut};
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
    /// row kernels' (`mix_rows::source_gradients`, the query gradients' shares added in
    /// place) where they take every tensor, else the composed form.
    pub fn source_grad(v: T, lo: usize, sum: T, steps: Vec<Box<dyn Any + Send>>) -> T {
        let steps = unbox::<LibTorch>(steps);
        let key_norm = steps.first().is_some_and(|s| s.key_norm);
        let contiguous = |t: &T| t.tensor.contiguous();
        let v_s = slotted(&v.tensor);
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
        let size = v_s.size();
        let (group, n, d) = (size[0] as usize, size[1] as usize, size[2] as usize);
        let continued = sum.tensor.numel() > 0;
        // The sum so far is written over in place: a gradient nobody else holds yet.
        let sum_fits = !continued || (group == 1 && floats(&sum.tensor).is_some());
        match (slots_of(&v_s), rows) {
            (Some((vs, slot)), Some(rows))
                if !rows.is_empty() && own && sum_fits && group <= mix_rows::MAX_GROUP =>
            {
                let mut out = match continued {
                    true => sum.tensor.reshape([1, n as i64, d as i64]), // [N, d] -> [1, N, d]
                    false => padded(group, n, d),
                };
                let (outs, out_slot) = slots_of_mut(&mut out).expect("a slotted buffer");
                // The group's sources from the last to the first, as their pushes run.
                let v: Vec<&[f32]> = (0..group)
                    .rev()
                    .map(|j| &vs[j * slot..j * slot + n * d])
                    .collect();
                let mut outs: Vec<&mut [f32]> = outs
                    .chunks_mut(out_slot)
                    .map(|rows| &mut rows[..n * d])
                    .rev()
                    .collect();
                let ks: Vec<usize> = (lo..lo + group).rev().collect();
                let mut dq: Vec<&mut [f32]> =
                    dq.iter_mut().map(|t| slice_mut(&mut t.tensor)).collect();
                mix_rows::source_gradients(&v, &ks, &rows, key_norm, continued, &mut outs, &mut dq);
                TchTensor::new(out)
            }
            _ => {
                drop(dq);
                composed::source_grad::<LibTorch>(v, lo, sum, steps)
            }
        }
    }

    /// A `[G, N, d]` view of a fresh buffer whose slots are a row apart
    /// (`stack::padded_slots`: the same rows of every slot would share cache sets).
    fn padded(group: usize, n: usize, d: usize) -> tch::Tensor {
        let shape = padded_slots(group, n, d).map(|x| x as i64);
        empty(&shape).narrow(1, 0, n as i64) // [G, N + 1, d] -> [G, N, d]
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

    /// Steps that read `completed` stacked sources each (and a partial sum), with random
    /// `g`, queries, saved weights, `g . x` and query gradients so far.
    fn steps(
        n: i64,
        d: i64,
        key_norm: bool,
        completed: impl Iterator<Item = i64>,
    ) -> Vec<StepRecord<LibTorch>> {
        completed
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

    fn boxed(steps: &[StepRecord<LibTorch>]) -> Vec<Box<dyn Any + Send>> {
        let boxed = steps
            .iter()
            .map(|s| Box::new(s.clone()) as Box<dyn Any + Send>);
        boxed.collect()
    }

    fn none() -> TchTensor {
        TchTensor::new(Tensor::empty([0], (Kind::Float, Device::Cpu)))
    }

    fn max_rel_diff(a: &Tensor, b: &Tensor) -> f64 {
        let scale = b.abs().max().double_value(&[]).max(1e-6);
        (a - b).abs().max().double_value(&[]) / scale
    }

    fn same_bits(a: &Tensor, b: &Tensor) -> bool {
        let bits = |t: &Tensor| Vec::<f32>::try_from(t.contiguous().view(-1)).unwrap();
        let (a, b) = (bits(a), bits(b));
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    /// The cases: widths with and without a tail of fewer than sixteen entries, with and
    /// without the key norm.
    const CASES: [(i64, bool); 4] = [(16, true), (21, true), (21, false), (64, true)];

    /// The row kernels' push (`mix_rows::source_gradients`) gives the composed form's source
    /// gradient and adds the same shares to the steps' query gradients, over several tasks of
    /// rows, with and without the key norm and with a tail of fewer than sixteen entries; a
    /// step's term left out is seen.
    #[test]
    fn the_row_kernels_push_equals_the_composed_one() {
        tch::manual_seed(24);
        for (d, key_norm) in CASES {
            let (n, k) = (70, 1);
            let v = randn(&[1, n, d]);
            let kernel = steps(n, d, key_norm, 2..5);
            let composed = apart(&kernel);
            let dv = tch_kernel::source_grad(TchTensor::new(v.copy()), k, none(), boxed(&kernel));
            let want = composed::source_grad::<LibTorch>(
                TchTensor::new(v.copy()),
                k,
                none(),
                composed.clone(),
            );
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
                none(),
                apart(&kernel)[1..].to_vec(),
            );
            assert!(
                max_rel_diff(&dv.tensor, &fewer.tensor) > 1e-3,
                "{case}: a step left out"
            );
        }
    }

    /// A group of sources pushed at once (the last one's push beginning those below it)
    /// gives each source's gradient and each step's query gradient bit for bit as the
    /// sources one at a time, last first, do; so does a group begun with some steps and
    /// each source then continued with the rest; and the composed form agrees with both.
    /// A group that took its sources in the other order would fail the query gradients.
    #[test]
    fn a_group_of_sources_equals_them_one_at_a_time_bit_for_bit() {
        tch::manual_seed(27);
        for (d, key_norm) in CASES {
            let (n, lo, group) = (70, 1, 4);
            let case = format!("d {d}, key norm {key_norm}");
            // Sources 0..=5 stacked a row apart, as a stack's slots are; the group is 1..=4.
            let buffer = randn(&[6, n + 1, d]);
            let v = buffer.narrow(1, 0, n).narrow(0, lo, group); // [6, N + 1, d] -> [G, N, d]
            let all = steps(n, d, key_norm, (6..10).rev());
            let (at_once, one_by_one, composed) = (apart(&all), apart(&all), apart(&all));
            let grads = tch_kernel::source_grad(
                TchTensor::new(v.shallow_clone()),
                lo as usize,
                none(),
                boxed(&at_once),
            );
            let grads_composed = composed::source_grad::<LibTorch>(
                TchTensor::new(v.shallow_clone()),
                lo as usize,
                none(),
                composed.clone(),
            );
            assert!(
                max_rel_diff(&grads.tensor, &grads_composed.tensor) < 1e-5,
                "{case}: the composed form"
            );
            for j in (0..group).rev() {
                let k = (lo + j) as usize;
                let one = tch_kernel::source_grad(
                    TchTensor::new(v.narrow(0, j, 1)),
                    k,
                    none(),
                    boxed(&one_by_one),
                );
                assert!(
                    same_bits(&grads.tensor.get(j), &one.tensor.get(0)),
                    "{case}: source {k}'s gradient"
                );
            }
            for (i, (a, b)) in at_once.iter().zip(&one_by_one).enumerate() {
                assert!(
                    same_bits(&a.dq().tensor, &b.dq().tensor),
                    "{case}: step {i}'s query gradient"
                );
            }
            // Begun with the first two steps, continued with the other two.
            let begun = tch_kernel::source_grad(
                TchTensor::new(v.shallow_clone()),
                lo as usize,
                none(),
                boxed(&apart(&all[..2])),
            );
            for j in 0..group {
                // The row kernels add onto the sum so far in place.
                let so_far = begun.tensor.get(j).copy();
                let sum = TchTensor::new(begun.tensor.get(j));
                let k = lo as usize + j as usize;
                let rest = apart(&all[2..]);
                let whole = tch_kernel::source_grad(
                    TchTensor::new(v.narrow(0, j, 1)),
                    k,
                    sum,
                    boxed(&rest),
                );
                let composed_whole = composed::source_grad::<LibTorch>(
                    TchTensor::new(v.narrow(0, j, 1)),
                    k,
                    TchTensor::new(so_far),
                    rest,
                );
                assert!(
                    same_bits(&whole.tensor.get(0), &grads.tensor.get(j)),
                    "{case}: source {k} continued"
                );
                assert!(
                    max_rel_diff(
                        &composed_whole.tensor,
                        &grads_composed.tensor.narrow(0, j, 1)
                    ) < 1e-5,
                    "{case}: source {k} continued, composed"
                );
            }
        }
    }
}
