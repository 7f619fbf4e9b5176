//! `at_push`'s tests: the row kernels' push against the composed form, and a group of
//! sources against the same sources one at a time, bit for bit.
#![allow(deprecated)] // burn-tch: burn 0.22 deprecates it, but it is our fastest CPU backend.

use std::any::Any;
use std::sync::{Arc, Mutex};

use burn::backend::LibTorch;
use burn::backend::libtorch::TchTensor;
use tch::{Device, Kind, Tensor};

use super::tch_kernel;
use crate::model::kernels::composed;
use crate::model::kernels::step_record::StepRecord;

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
            let whole =
                tch_kernel::source_grad(TchTensor::new(v.narrow(0, j, 1)), k, sum, boxed(&rest));
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
