//! Evaluation on the fixed validation batches, and the probes of SPEC section 8.

use burn::tensor::{DType, Device, FloatDType, Int, Tensor, TensorData, TensorReadError};

use crate::data::Batch;
use crate::model::residual::Probes;
use crate::model::{Lm, Trace};

/// Tensors of one batch on `device`: input `[B, T]`, target `[B, T]`, mask `[B, T]`.
pub struct BatchTensors {
    pub input: Tensor<2, Int>,
    pub target: Tensor<2, Int>,
    pub mask: Option<Tensor<2>>,
}

impl BatchTensors {
    pub fn new(batch: &Batch, device: &Device) -> Self {
        let shape = [batch.rows, batch.context];
        let ints =
            |v: &Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v.clone(), shape), device);
        Self {
            input: ints(&batch.input),
            target: ints(&batch.target),
            mask: batch
                .mask
                .as_ref()
                .map(|m| Tensor::from_data(TensorData::new(m.clone(), shape), device)),
        }
    }
}

/// Mean next-token cross-entropy over scored positions: logits `[B, T, V]`. Reduced in f32
/// whatever the training precision: a bf16 log-softmax and mean would round the loss to
/// about three digits.
pub fn masked_cross_entropy(
    logits: Tensor<3>,
    target: Tensor<2, Int>,
    mask: Option<Tensor<2>>,
) -> Tensor<1> {
    let logits = in_f32(logits);
    let mask = mask.map(in_f32);
    let nll = burn::tensor::activation::log_softmax(logits, 2)
        .gather(2, target.unsqueeze_dim::<3>(2)) // [B, T, 1]
        .squeeze_dim::<2>(2)
        .neg(); // [B, T]
    match mask {
        Some(m) => (nll * m.clone()).sum() / m.sum(),
        None => nll.mean(),
    }
}

/// `t` as f32: itself when it is f32 already (f32 training stays bit for bit what it was).
fn in_f32<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    if t.dtype() == DType::F32 {
        t
    } else {
        t.cast(FloatDType::F32)
    }
}

/// Validation loss (nats per scored token) and, for masked tasks, answer accuracy.
pub struct EvalResult {
    pub loss: f32,
    pub accuracy: Option<f32>,
}

/// Evaluates `model` (an inference copy, no autodiff) on `batches` with the inference path.
pub fn evaluate(
    model: &Lm,
    batches: &[Batch],
    device: &Device,
) -> Result<EvalResult, TensorReadError> {
    let (mut nats, mut scored, mut correct) = (0.0f64, 0usize, 0.0f64);
    for batch in batches {
        let t = BatchTensors::new(batch, device);
        let logits = model.forward(t.input);
        let n = batch.scored();
        let loss = masked_cross_entropy(logits.clone(), t.target.clone(), t.mask.clone())
            .try_into_scalar::<f32>()?;
        nats += f64::from(loss) * n as f64;
        scored += n;
        if let Some(mask) = t.mask {
            let hits = logits.argmax(2).squeeze_dim::<2>(2).equal(t.target).float() * mask;
            correct += f64::from(hits.sum().try_into_scalar::<f32>()?);
        }
    }
    let accuracy = batches[0]
        .mask
        .is_some()
        .then(|| (correct / scored.max(1) as f64) as f32);
    Ok(EvalResult {
        loss: (nats / scored.max(1) as f64) as f32,
        accuracy,
    })
}

/// The per-layer statistics of SPEC section 8 on one eval batch.
pub fn probe(model: &Lm, batch: &Batch, device: &Device) -> Result<Probes, TensorReadError> {
    let t = BatchTensors::new(batch, device);
    let mut trace = Trace::default();
    let _ = model.forward_traced(t.input, &mut trace);
    trace.read()
}
