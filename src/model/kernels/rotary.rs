//! Rotary position embedding as one operation (SPEC section 7): `x cos + rotate_half(x) sin`
//! over each head's last dimension. Composed, it is five kernels forward (negate, concatenate,
//! two products, a sum) and about eight backward for the queries and again for the keys of
//! every attention layer; fused, one pass each way, on the CPU in f32. It computes the same
//! products and sums in the same order as the composition, so its results equal it bit for
//! bit: the backward of a rotation is the rotation the other way, `g cos - rotate_half(g sin)`
//! read off in halves.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// `x cos + rotate_half(x) sin` with `rotate_half([x1, x2]) = [-x2, x1]` over the last
/// dimension: `x` `[B, T, H, hd]`, the tables `cos`, `sin` `[T, hd]` (constants, given no
/// gradient) -> `[B, T, H, hd]`.
pub fn rotary(x: Tensor<4>, cos: Tensor<2>, sin: Tensor<2>) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::rotary(
        x.into_dispatch(),
        cos.into_dispatch(),
        sin.into_dispatch(),
    ))
}

/// The composed form in tensor operations, differentiated op by op: what the model ran
/// before the fused kernel, and what it is tested against.
pub fn rotary_composed(x: Tensor<4>, cos: Tensor<2>, sin: Tensor<2>) -> Tensor<4> {
    let [_, t, _, hd] = x.dims();
    let cos = cos.reshape([1, t, 1, hd]); // [T, hd] -> [1, T, 1, hd]
    let sin = sin.reshape([1, t, 1, hd]);
    let half = hd / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.clone().narrow(3, half, half);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3); // [B, T, H, hd]
    x * cos + rotated * sin
}

/// The row kernels: one row a head's `hd` entries at one position.
#[cfg(feature = "tch")]
mod rows {
    /// Where a task's rows lie: the first row's index in `[B, T, H]` order, the heads `H`
    /// and the positions `T` of the tables.
    #[derive(Clone, Copy)]
    pub struct Layout {
        pub heads: usize,
        pub positions: usize,
        pub hd: usize,
    }

    /// Halves of a row of the tables, `cos` then `sin`.
    type Halves<'a> = [(&'a [f32], &'a [f32]); 2];

    impl Layout {
        /// The tables' halves for row `r` (its position's row).
        fn tables<'a>(&self, tables: [&'a [f32]; 2], r: usize) -> Halves<'a> {
            let t = (r / self.heads) % self.positions;
            tables.map(|table| table[t * self.hd..(t + 1) * self.hd].split_at(self.hd / 2))
        }
    }

    /// Each pair of entries `(x1, x2)` of the two halves of rows `first..` of `x` `[rows,
    /// hd]`, with the tables' entries `(c1, c2)`, `(s1, s2)` at their position and column,
    /// mapped by `pair` into `y`.
    #[inline]
    fn by_pairs(
        x: &[f32],
        tables: [&[f32]; 2],
        at: Layout,
        first: usize,
        y: &mut [f32],
        pair: impl Fn([f32; 2], [f32; 2], [f32; 2]) -> [f32; 2],
    ) {
        let rows = y.chunks_exact_mut(at.hd).zip(x.chunks_exact(at.hd));
        for (i, (y, x)) in rows.enumerate() {
            let [(c1, c2), (s1, s2)] = at.tables(tables, first + i);
            let ((y1, y2), (x1, x2)) = (y.split_at_mut(at.hd / 2), x.split_at(at.hd / 2));
            let ins = x1
                .iter()
                .zip(x2)
                .zip(c1.iter().zip(c2).zip(s1.iter().zip(s2)));
            for ((y1, y2), ((x1, x2), ((c1, c2), (s1, s2)))) in y1.iter_mut().zip(y2).zip(ins) {
                [*y1, *y2] = pair([*x1, *x2], [*c1, *c2], [*s1, *s2]);
            }
        }
    }

    /// `y = x cos + rotate_half(x) sin` for rows `first..` of `x`, `y` `[rows, hd]`, with
    /// the tables `cos`, `sin` `[T, hd]`: `x cos` and `rotate_half(x) sin` rounded and then
    /// added, as the composition computes them.
    pub fn forward(x: &[f32], tables: [&[f32]; 2], at: Layout, first: usize, y: &mut [f32]) {
        by_pairs(x, tables, at, first, y, |[x1, x2], [c1, c2], [s1, s2]| {
            [x1 * c1 + -x2 * s1, x2 * c2 + x1 * s2]
        });
    }

    /// The gradient of [`forward`] given `g` (its transpose, the rotation back):
    /// `dx1 = g1 cos1 + g2 sin2`, `dx2 = g2 cos2 - g1 sin1` by halves.
    pub fn backward(g: &[f32], tables: [&[f32]; 2], at: Layout, first: usize, dx: &mut [f32]) {
        by_pairs(g, tables, at, first, dx, |[g1, g2], [c1, c2], [s1, s2]| {
            [g1 * c1 + g2 * s2, g2 * c2 - g1 * s1]
        });
    }
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::rows::{self, Layout};
    use crate::model::kernels::composed;
    use crate::model::kernels::omp::for_each_task;
    use crate::model::kernels::tch_memory::{empty, floats, slice_mut};

    type T = FloatTensor<LibTorch>;

    /// Rows per task (any split gives the same results).
    const ROWS_PER_TASK: usize = 256;

    /// Runs `kernel` over `input` `[B, T, H, hd]` in tasks of rows, into a new tensor; `None`
    /// where the row kernels don't apply (not f32 on the CPU, or an odd `hd`).
    #[allow(clippy::type_complexity)] // a row kernel's signature
    fn by_rows(
        input: &tch::Tensor,
        cos: &tch::Tensor,
        sin: &tch::Tensor,
        kernel: fn(&[f32], [&[f32]; 2], Layout, usize, &mut [f32]),
    ) -> Option<tch::Tensor> {
        let (x, cos, sin) = (input.contiguous(), cos.contiguous(), sin.contiguous());
        let size = x.size();
        let [_, positions, heads, hd] = [size[0], size[1], size[2], size[3]].map(|n| n as usize);
        let tables = [floats(&cos)?, floats(&sin)?];
        let xs = floats(&x)?;
        if hd % 2 != 0 || tables.iter().any(|t| t.len() != positions * hd) {
            return None;
        }
        let at = Layout {
            heads,
            positions,
            hd,
        };
        let mut y = empty(&size);
        let chunk = ROWS_PER_TASK * hd;
        let tasks: Vec<(&[f32], &mut [f32])> = xs
            .chunks(chunk)
            .zip(slice_mut(&mut y).chunks_mut(chunk))
            .collect();
        for_each_task(tasks, &|task, (x, y)| {
            kernel(x, tables, at, task * ROWS_PER_TASK, y)
        });
        Some(y)
    }

    pub fn forward(x: T, cos: T, sin: T) -> T {
        match by_rows(&x.tensor, &cos.tensor, &sin.tensor, rows::forward) {
            Some(y) => TchTensor::new(y),
            None => composed::rotary::<LibTorch>(x, cos, sin),
        }
    }

    pub fn backward(grad: T, cos: T, sin: T) -> T {
        match by_rows(&grad.tensor, &cos.tensor, &sin.tensor, rows::backward) {
            Some(dx) => TchTensor::new(dx),
            None => composed::rotary_backward::<LibTorch>(grad, cos, sin),
        }
    }
}

#[derive(Debug)]
struct Rotary;

impl<B: Backend + KernelOps> Backward<B, 1> for Rotary {
    /// The tables.
    type State = [FloatTensor<B>; 2];

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [cos, sin] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        if let [Some(node)] = ops.parents {
            grads.register::<B>(node.id, B::rotary_backward(grad, cos, sin));
        }
    }
}

/// The autodiff forward: the backend's forward, with [`Rotary`] as its backward (the tables
/// are constants: they get no gradient).
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    cos: FloatTensor<Autodiff<B, C>>,
    sin: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [x.node()];
    let [x, cos, sin] = [x, cos, sin].map(|t| t.into_primitive());
    let y = B::rotary(x, cos.clone(), sin.clone());
    match Rotary.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([cos, sin], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}
