//! One AttnRes mixing step and the source stack's operations, composed of primitive tensor
//! operations (`kernels::mix`, `kernels::stack`): what flex, CUDA and bf16 run, and what
//! `mix_rows` and `mix_tch` are tested against.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::{Shape, Slice};

use super::inv_rms;
use crate::model::kernels::step_record::StepRecord;

/// What one mixing step's forward and backward share: the sources `[K', N, d]` (the partial
/// sum, if any, as the last), `s = v.q` and `u = 1/rms(v)` (ones without the key norm)
/// `[K', N, 1]`, and the softmax weights `a` `[K', N, 1]`.
struct Mix<B: Backend> {
    sources: FloatTensor<B>,
    s: FloatTensor<B>,
    u: FloatTensor<B>,
    a: FloatTensor<B>,
    /// Completed sources `K`.
    completed: usize,
}

impl<B: Backend> Mix<B> {
    fn new(
        stacked: FloatTensor<B>,
        partial: FloatTensor<B>,
        q: FloatTensor<B>,
        key_norm: bool,
    ) -> Self {
        let [completed, n, d] = stacked.shape().dims::<3>();
        let sources = if partial.shape().dims::<2>()[0] == 0 {
            stacked
        } else {
            let partial = B::float_reshape(partial, Shape::new([1, n, d]));
            B::float_cat(vec![stacked, partial], 0)
        };
        let q = B::float_reshape(q, Shape::new([1, 1, d]));
        let s = B::float_sum_dim(B::float_mul(sources.clone(), q), 2); // [K', N, 1]
        let u = if key_norm {
            inv_rms::<B>(sources.clone(), 2)
        } else {
            B::float_ones(s.shape(), &s.device(), s.dtype().into())
        };
        let z = B::float_mul(s.clone(), u.clone());
        let max = B::float_max_dim(z.clone(), 0); // [1, N, 1]
        let e = B::float_exp(B::float_sub(z, max));
        let a = B::float_div(e.clone(), B::float_sum_dim(e, 0));
        Self {
            sources,
            s,
            u,
            a,
            completed,
        }
    }
}

/// `x = sum_k a_k v_k` over the stacked sources `[K, N, d]` and the partial sum `[N, d]`
/// (none if it has zero rows), `a = softmax(v.q u)`; `q` `[d]` -> (`x` `[N, d]`, nothing
/// kept: [`depth_mix_backward`] recomputes the weights).
pub fn depth_mix<B: Backend>(
    stacked: FloatTensor<B>,
    partial: FloatTensor<B>,
    q: FloatTensor<B>,
    key_norm: bool,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let [_, n, d] = stacked.shape().dims::<3>();
    let m = Mix::<B>::new(stacked, partial, q, key_norm);
    let x = B::float_sum_dim(B::float_mul(m.sources, m.a), 0); // [1, N, d]
    let kept = B::float_zeros(Shape::new([0]), &x.device(), x.dtype().into());
    (B::float_reshape(x, Shape::new([n, d])), kept)
}

/// The gradients of [`depth_mix`] (stacked sources, partial sum, query), by the formulas of
/// `mix_rows::mix_backward`.
pub fn depth_mix_backward<B: Backend>(
    grad: FloatTensor<B>,
    stacked: FloatTensor<B>,
    partial: FloatTensor<B>,
    q: FloatTensor<B>,
    key_norm: bool,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let [_, n, d] = stacked.shape().dims::<3>();
    let partial_shape = partial.shape();
    let m = Mix::<B>::new(stacked, partial, q.clone(), key_norm);
    let g = B::float_reshape(grad, Shape::new([1, n, d]));
    let ga = B::float_sum_dim(B::float_mul(m.sources.clone(), g.clone()), 2); // [K', N, 1]
    let gx = B::float_sum_dim(B::float_mul(m.a.clone(), ga.clone()), 0); // [1, N, 1]
    let dz = B::float_mul(m.a.clone(), B::float_sub(ga, gx));
    let along_q = B::float_mul(dz.clone(), m.u.clone()); // [K', N, 1]
    let q3 = B::float_reshape(q, Shape::new([1, 1, d]));
    let mut dv = B::float_add(B::float_mul(m.a, g), B::float_mul(along_q.clone(), q3));
    if key_norm {
        let u3 = B::float_mul(B::float_mul(m.u.clone(), m.u.clone()), m.u);
        let along_v = B::float_mul_scalar(
            B::float_mul(B::float_mul(dz, m.s), u3),
            (1.0 / d as f64).into(),
        );
        dv = B::float_sub(dv, B::float_mul(along_v, m.sources.clone()));
    }
    let dq = B::float_sum_dim(B::float_sum_dim(B::float_mul(along_q, m.sources), 0), 1); // [1, 1, d]
    let k = m.completed;
    let (dstacked, dpartial) = if partial_shape.dims::<2>()[0] == 0 {
        (
            dv.clone(),
            B::float_zeros(partial_shape, &dv.device(), dv.dtype().into()),
        )
    } else {
        let dp = first_dim::<B>(dv.clone(), k, k + 1);
        (
            first_dim::<B>(dv, 0, k),
            B::float_reshape(dp, Shape::new([n, d])),
        )
    };
    (dstacked, dpartial, B::float_reshape(dq, Shape::new([d])))
}

/// `KernelOps::stack_source_grad` in tensor operations, by the formulas of
/// `mix_rows::source_gradients`: the gradients `[G, N, d]` of sources `lo..lo + G` (`v`
/// `[G, N, d]`: their rows), each summed over `steps` in their order, after `sum` (one
/// source's gradient so far `[N, d]`, or no entries); each step's share of its query's
/// gradient is added to the step's, source by source from the last to the first.
pub fn source_grad<B: Backend>(
    v: FloatTensor<B>,
    lo: usize,
    sum: FloatTensor<B>,
    steps: Vec<StepRecord<B>>,
) -> FloatTensor<B> {
    let [group, n, d] = v.shape().dims::<3>();
    let so_far = (sum.shape().num_elements() > 0).then_some(sum);
    let mut grads: Vec<FloatTensor<B>> = Vec::with_capacity(group);
    for j in (0..group).rev() {
        let rows = B::float_reshape(first_dim::<B>(v.clone(), j, j + 1), Shape::new([n, d]));
        let dv = one_source_grad::<B>(rows, lo + j, so_far.clone(), &steps);
        grads.push(B::float_reshape(dv, Shape::new([1, n, d])));
    }
    grads.reverse();
    B::float_cat(grads, 0)
}

/// One source's gradient `[N, d]` (source `k`, rows `v` `[N, d]`) for [`source_grad`].
fn one_source_grad<B: Backend>(
    v: FloatTensor<B>,
    k: usize,
    so_far: Option<FloatTensor<B>>,
    steps: &[StepRecord<B>],
) -> FloatTensor<B> {
    let [n, d] = v.shape().dims::<2>();
    let (device, dtype) = (v.device(), v.dtype());
    let mut sum = so_far;
    for s in steps {
        let column = |j: usize| {
            let at = |i: usize| Slice::new(i as isize, Some(i as isize + 1), 1);
            let c = B::float_slice(s.saved.clone(), &[Slice::from(..), at(k), at(j)]); // [N, 1, 1]
            B::float_reshape(c, Shape::new([n, 1]))
        };
        let (a, dot, u) = (column(0), column(1), column(2));
        let gv = B::float_sum_dim(B::float_mul(s.g.clone(), v.clone()), 1); // [N, 1]
        let gx = B::float_reshape(s.gx.clone(), Shape::new([n, 1]));
        let dz = B::float_mul(a.clone(), B::float_sub(gv, gx));
        let along_q = B::float_mul(dz.clone(), u.clone());
        let q = B::float_reshape(s.q.clone(), Shape::new([1, d]));
        let mut term = B::float_add(
            B::float_mul(a, s.g.clone()),
            B::float_mul(along_q.clone(), q),
        );
        if s.key_norm {
            let u3 = B::float_mul(B::float_mul(u.clone(), u.clone()), u);
            let along_v = B::float_mul_scalar(
                B::float_mul(B::float_mul(dz, dot), u3),
                (1.0 / d as f64).into(),
            );
            term = B::float_sub(term, B::float_mul(along_v, v.clone()));
        }
        let dq = B::float_sum_dim(B::float_mul(along_q, v.clone()), 0); // [1, d]
        s.add_dq(B::float_reshape(dq, Shape::new([d])));
        sum = Some(match sum {
            Some(s) => B::float_add(s, term),
            None => term,
        });
    }
    sum.unwrap_or_else(|| B::float_zeros(Shape::new([n, d]), &device, dtype.into()))
}

/// `[K, N, d]` and `[N, d]` -> `[K + 1, N, d]`, copied.
pub fn stack_push<B: Backend>(stacked: FloatTensor<B>, v: FloatTensor<B>) -> FloatTensor<B> {
    let [n, d] = v.shape().dims::<2>();
    B::float_cat(vec![stacked, B::float_reshape(v, Shape::new([1, n, d]))], 0)
}

/// A mixing step's gradient for its `K` stacked sources, `dv` `[K, N, d]`, put into the stack's
/// gradient buffer `into` `[C, N, d]`: added to its first `written` slots (the old sum plus the
/// new term, as burn's registering of gradients adds them), written into the rest of the first
/// `K`. An `into` of zero slots takes `dv` as it is.
pub fn accumulate_slots<B: Backend>(
    into: FloatTensor<B>,
    written: usize,
    dv: FloatTensor<B>,
) -> FloatTensor<B> {
    if into.shape().dims::<3>()[0] == 0 {
        return dv;
    }
    let k = dv.shape().dims::<3>()[0];
    let w = written.min(k);
    let slots = |start: usize, end: usize| {
        let range = Slice::new(start as isize, Some(end as isize), 1);
        [range, Slice::from(..), Slice::from(..)]
    };
    let mut into = into;
    if w > 0 {
        let old = first_dim::<B>(into.clone(), 0, w);
        let sum = B::float_add(old, first_dim::<B>(dv.clone(), 0, w));
        into = B::float_slice_assign(into, &slots(0, w), sum);
    }
    if k > w {
        into = B::float_slice_assign(into, &slots(w, k), first_dim::<B>(dv, w, k));
    }
    into
}

/// Entries `start..end` of the first dimension of a 3-d tensor.
pub(in crate::model::kernels) fn first_dim<B: Backend>(
    t: FloatTensor<B>,
    start: usize,
    end: usize,
) -> FloatTensor<B> {
    let range = Slice::new(start as isize, Some(end as isize), 1);
    B::float_slice(t, &[range, Slice::from(..), Slice::from(..)])
}
