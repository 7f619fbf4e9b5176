//! Every completed source's gradient formed once, at its push (`stack::GradMode::AtPush`),
//! with the mixing steps' parts of it that need the source: a step's backward keeps what the
//! pushes need (`step_record::StepRecord`) and reads none of its completed sources; each push
//! reads its source once, forms its gradient and adds each step's share of that step's query
//! gradient (`mix_rows/at_push.rs` and `mix_rows/push.rs` have the formulas; a push may form
//! a group of sources at once, `stack_grad.rs`). On libtorch in f32 on the CPU the row kernels do
//! both ends; elsewhere a step's backward declines and the stack's buffer takes it.

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use std::any::Any;

    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use crate::model::kernels::composed;
    use crate::model::kernels::mix::tch_kernel::{slotted, sources};
    use crate::model::kernels::mix_rows;
    use crate::model::kernels::stack_grad::padded_slots;
    use crate::model::kernels::step_record::unbox;
    use crate::model::kernels::tch_memory::{
        cpu_f32, empty, floats, slice_mut, slots_of, slots_of_mut,
    };

    type T = FloatTensor<LibTorch>;

    /// See [`KernelOps::depth_mix_backward_at_push`](crate::model::kernels::KernelOps::depth_mix_backward_at_push):
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

    /// See [`KernelOps::stack_source_grad`](crate::model::kernels::KernelOps::stack_source_grad): the
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
mod tests;
