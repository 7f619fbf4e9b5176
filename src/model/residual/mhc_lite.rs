//! mHC-lite (arXiv 2601.05732; SPEC section 6, docs/method.md): mHC's stream mixing made
//! doubly stochastic by construction instead of by Sinkhorn iterations. By Birkhoff-von
//! Neumann, every doubly stochastic `m x m` matrix is a convex combination of the `m!`
//! permutation matrices, so `H_res = sum_k softmax(z)_k P_k` with `m!` logits `z` per token
//! from the same projection mHC uses. Exact, differentiable, no iteration; `m!` grows fast,
//! so `m` is at most 6 (720 permutations; `HyperConfig::stream_range`). The rest is `mhc.rs`.

use burn::module::Module;
use burn::tensor::activation::softmax;
use burn::tensor::{Tensor, TensorData};

use crate::model::init::Init;

/// The `m!` permutation matrices of `m` streams, flattened, as one constant.
#[derive(Module, Debug)]
pub struct Permutations {
    /// `[m!, m * m]`: row `k` is `P_k` row-major, `P_k[j, i] = 1` when stream `j` takes
    /// stream `i`.
    matrices: Tensor<2>,
    m: usize,
}

impl Permutations {
    pub fn new(m: usize, init: &Init) -> Self {
        let perms = permutations(m);
        let mut values = Vec::with_capacity(perms.len() * m * m);
        for p in &perms {
            // Row j of P_k: a one at the stream that stream j takes.
            for &taken in p {
                values.extend((0..m).map(|i| f32::from(taken == i)));
            }
        }
        Self {
            matrices: Tensor::from_data(
                TensorData::new(values, [perms.len(), m * m]),
                init.device(),
            ),
            m,
        }
    }

    pub fn count(&self) -> usize {
        self.matrices.dims()[0]
    }

    /// `logits` `[B, T, m!]` -> `sum_k softmax(logits)_k P_k`, `[B, T, m, m]`.
    pub fn combine(&self, logits: Tensor<3>) -> Tensor<4> {
        let [b, t, _] = logits.dims();
        let weights = softmax(logits, 2); // [B, T, m!]
        weights
            .matmul(self.matrices.clone().unsqueeze()) // [B, T, m * m]
            .reshape([b, t, self.m, self.m])
    }
}

/// Every permutation of `0..m`, in lexicographic order, identity first.
pub fn permutations(m: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current: Vec<usize> = (0..m).collect();
    loop {
        out.push(current.clone());
        // The next permutation in lexicographic order.
        let Some(i) = (1..m).rev().find(|&i| current[i - 1] < current[i]) else {
            return out;
        };
        let j = (i..m)
            .rev()
            .find(|&j| current[j] > current[i - 1])
            .expect("a larger element");
        current.swap(i - 1, j);
        current[i..].reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::permutations;

    #[test]
    fn permutations_are_all_distinct_and_complete() {
        for m in 1..=5 {
            let p = permutations(m);
            let factorial: usize = (1..=m).product();
            assert_eq!(p.len(), factorial, "m = {m}");
            let mut sorted = p.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), factorial);
            assert_eq!(p[0], (0..m).collect::<Vec<_>>());
        }
    }
}
