//! What one AttnRes mixing step's backward keeps for the pushes of the stacked sources it read
//! ([`StepRecord`]), in [`GradMode::AtPush`](super::stack::GradMode): the stack's gradient
//! (`stack_grad.rs`) holds the records, and each push forms its source's gradient from them
//! (`at_push/`).

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
