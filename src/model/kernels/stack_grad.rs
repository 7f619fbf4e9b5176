//! Where the backward passes of a [`SourceStack`](super::stack::SourceStack)'s mixing steps put its
//! sources' gradients ([`StackGrad`]): one buffer slot per source that every step adds to,
//! or ([`GradMode::AtPush`]) the steps' records, from which each push forms its source's
//! gradient (`kernels::at_push`), and begins those of the sources just below it where
//! enough steps read them all (`GROUP`).

use std::any::Any;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::NodeId;
use burn::backend::{Backend, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{FloatDType, Shape, Slice};

use super::KernelOps;
use super::composed::{accumulate_slots, first_dim};
use super::step_record::StepRecord;

/// Where the backward passes of a stack's mixing steps put its sources' gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradMode {
    /// Added into one buffer slot per source by every step that reads it.
    Buffer,
    /// Formed once per source at its push, from what every step that read it kept (where the
    /// backend does: libtorch in f32 on the CPU; the buffer elsewhere). It keeps one `g`
    /// `[N, d]` per mixing step until the backward ends, where the buffer keeps one slot per
    /// source: the same memory where each step has a source of its own (Full AttnRes).
    AtPush,
}

/// The shape of a buffer for `slots` sources of `[N, d]` with room for one more row after
/// each: `[C, N + 1, d]`, so that one slot's rows start `(N + 1) d` floats after the
/// previous slot's. With `N d` floats apart (a power of two at the usual sizes) the same row
/// of every slot fell on the same cache sets and 4 KB offsets, and the mixing kernels, which
/// read that row of every slot and write that row of every gradient slot in turn, stalled on
/// it: the padding made their backward 28-44% faster (git log -- docs/performance.md).
pub(super) fn padded_slots(slots: usize, n: usize, d: usize) -> [usize; 3] {
    [slots, n + 1, d]
}

/// Where the backward passes of one [`SourceStack`]'s mixing steps add up the gradients of its
/// sources, `[C, N, d]` (`C` at least the stack's length), in place; or, for a mixing step on
/// a stack made some other way ([`StackGrad::none`]), nowhere: it registers its own.
#[derive(Clone, Default)]
pub struct StackGrad(Option<Arc<Mutex<Accumulated>>>);

/// The buffer (of the autodiff backend's inner backend, whose type the stack does not know)
/// and how many of its leading slots hold a gradient: always a prefix, since every mixing step
/// reads the first `K` sources; and, in [`GradMode::AtPush`], the steps' records
/// ([`StepRecord`] of that backend) in the order their backward ran.
struct Accumulated {
    buffer: Option<Box<dyn Any + Send>>,
    written: usize,
    capacity: usize,
    records: Option<Vec<Box<dyn Any + Send>>>,
    /// Whether the first source's push has a backward: the records' query gradients go to
    /// their nodes there.
    first_tracked: bool,
    /// Sources below a push whose gradients it began with its own (`Ahead`).
    ahead: Vec<Ahead>,
}

/// A source's gradient begun at a later source's push, from the records of the steps
/// that read both (the first `records` of them); its own push adds the rest.
struct Ahead {
    source: usize,
    sum: Box<dyn Any + Send>,
    records: usize,
}

/// What the buffer, the records and a later source's push kept for one source
/// ([`StackGrad::kept_for`]).
struct Kept<B: Backend> {
    buffer: Option<FloatTensor<B>>,
    steps: Vec<StepRecord<B>>,
    ahead: Option<(FloatTensor<B>, usize)>,
}

/// Sources one push forms gradients for at most: its own and those just below it, which
/// the same steps read, so that each step's `g` row is read once for all of them
/// (git log -- docs/performance.md).
const GROUP: usize = 4;

/// Steps that must read a push's source for it to begin the sources below: each saves
/// the group a read of every one's `g` row for each source but the first, and costs each
/// of those sources a gradient row written and read again and its own row read twice.
const GROUP_FROM_STEPS: usize = 4;

impl std::fmt::Debug for StackGrad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StackGrad"
        } else {
            "StackGrad(none)"
        })
    }
}

impl StackGrad {
    /// A stack's, for `capacity` sources.
    pub fn new(capacity: usize, mode: GradMode) -> Self {
        Self(Some(Arc::new(Mutex::new(Accumulated {
            buffer: None,
            written: 0,
            capacity,
            records: (mode == GradMode::AtPush).then(Vec::new),
            first_tracked: false,
            ahead: Vec::new(),
        }))))
    }

    /// For mixing steps whose sources are not a [`SourceStack`]'s.
    pub fn none() -> Self {
        Self(None)
    }

    pub(in crate::model::kernels) fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Whether the stack's sources get their gradients at their pushes ([`GradMode::AtPush`]).
    pub(in crate::model::kernels) fn at_push(&self) -> bool {
        self.lock()
            .is_some_and(|acc| acc.records.is_some() && acc.first_tracked)
    }

    /// Notes that the first source's push has a backward ([`Self::at_push`] needs it).
    pub(super) fn mark_first_tracked(&self) {
        if let Some(mut acc) = self.lock() {
            acc.first_tracked = true;
        }
    }

    /// Keeps a mixing step's record for the pushes of the sources it read.
    pub(in crate::model::kernels) fn record<B: Backend>(&self, step: StepRecord<B>) {
        if let Some(records) = self.lock().as_mut().and_then(|acc| acc.records.as_mut()) {
            records.push(Box::new(step));
        }
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, Accumulated>> {
        // A poisoned lock means a backward pass panicked; the buffer is then unused anyway.
        self.0
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The buffer to add a mixing step's gradients for `like`'s `K` sources into, with room
    /// for at least `K` (allocated on first use), and the number of slots already written.
    /// Without a stack: an empty `[0, N, d]`, which asks for a fresh gradient.
    pub(in crate::model::kernels) fn take<B: Backend>(
        &self,
        like: &FloatTensor<B>,
    ) -> (FloatTensor<B>, usize) {
        let [k, n, d] = like.shape().dims::<3>();
        let empty = |shape: [usize; 3]| {
            B::float_empty(Shape::new(shape), &like.device(), like.dtype().into())
        };
        // `[slots, N, d]`, a view of a buffer with a spare row after each slot.
        let fresh = |slots: usize| {
            let rows = [
                Slice::from(..),
                Slice::new(0, Some(n as isize), 1),
                Slice::from(..),
            ];
            B::float_slice(empty(padded_slots(slots, n, d)), &rows)
        };
        let Some(mut acc) = self.lock() else {
            return (empty([0, n, d]), 0);
        };
        let written = acc.written;
        let kept = acc
            .buffer
            .take()
            .and_then(|b| b.downcast::<FloatTensor<B>>().ok());
        let buffer = match kept {
            Some(b) if b.shape().dims::<3>()[0] >= k => *b,
            // Room for fewer (a stack longer than its capacity): move into a larger one.
            Some(b) => accumulate_slots::<B>(fresh(k), 0, first_dim::<B>(*b, 0, written)),
            None => fresh(acc.capacity.max(k)),
        };
        (buffer, written)
    }

    /// Puts the buffer back after a mixing step wrote its first `k` slots.
    pub(in crate::model::kernels) fn put<B: Backend>(&self, buffer: FloatTensor<B>, k: usize) {
        if let Some(mut acc) = self.lock() {
            acc.written = acc.written.max(k);
            acc.buffer = Some(Box::new(buffer));
        }
    }

    /// What the buffer, the records and a later source's push kept for source `k`: the
    /// buffer (if a step wrote its slot), the records of the steps that read it, and the sum
    /// that push began for it with the number of records that sum took (taken out).
    fn kept_for<B: Backend>(&self, k: usize) -> Kept<B> {
        match self.lock() {
            Some(mut acc) => {
                let buffer = acc
                    .buffer
                    .as_ref()
                    .and_then(|b| b.downcast_ref::<FloatTensor<B>>())
                    .filter(|_| k < acc.written)
                    .cloned();
                let steps: Vec<StepRecord<B>> = acc
                    .records
                    .iter()
                    .flatten()
                    .filter_map(|r| r.downcast_ref::<StepRecord<B>>())
                    .filter(|r| k < r.completed)
                    .cloned()
                    .collect();
                let ahead = acc
                    .ahead
                    .iter()
                    .position(|a| a.source == k)
                    .map(|i| acc.ahead.swap_remove(i))
                    .and_then(|a| Some((*a.sum.downcast::<FloatTensor<B>>().ok()?, a.records)));
                Kept {
                    buffer,
                    steps,
                    ahead,
                }
            }
            None => Kept {
                buffer: None,
                steps: Vec::new(),
                ahead: None,
            },
        }
    }

    /// Source `k`'s gradient `[N, d]` (`stack`: a stack holding it): its slot of the buffer
    /// (a view), formed from the records of the steps that read it, or zeros where no mixing
    /// step read it; at the first source's, the records' query gradients, for the queries'
    /// nodes. (A stack whose steps went some to the records and some to the buffer,
    /// which a backend declining some steps would make, gets the sum of the two.)
    ///
    /// Where at least [`GROUP_FROM_STEPS`] steps read source `k`, its push also begins the
    /// gradients of the sources below it (up to [`GROUP`] in all) from the same steps, which
    /// read them too; their pushes then add the steps recorded since.
    pub(super) fn slot<B: Backend + KernelOps>(
        &self,
        k: usize,
        stack: &FloatTensor<B>,
        (device, dtype): &(B::Device, FloatDType),
    ) -> (FloatTensor<B>, Vec<(NodeId, FloatTensor<B>)>) {
        let [_, n, d] = stack.shape().dims::<3>();
        let shape = Shape::new([n, d]);
        let Kept {
            buffer,
            steps,
            ahead,
        } = self.kept_for::<B>(k);
        // Entry `i` of a `[G, N, d]` tensor, `[N, d]`.
        let one = |t: FloatTensor<B>, i: usize| {
            B::float_reshape(first_dim::<B>(t, i, i + 1), shape.clone())
        };
        let from_buffer = buffer.map(|b| one(b, k));
        let boxed = |steps: &[StepRecord<B>]| -> Vec<Box<dyn Any + Send>> {
            let boxed = steps
                .iter()
                .map(|s| Box::new(s.clone()) as Box<dyn Any + Send>);
            boxed.collect()
        };
        let none = || B::float_empty(Shape::new([0]), device, *dtype);
        let from_records = match ahead {
            // Begun at a later push: the steps recorded since (none: it is whole).
            Some((sum, done)) if done < steps.len() => {
                let v = first_dim::<B>(stack.clone(), k, k + 1);
                Some(one(
                    B::stack_source_grad(v, k, sum, boxed(&steps[done..])),
                    0,
                ))
            }
            Some((sum, _)) => Some(sum),
            None if steps.is_empty() => None,
            None => {
                let lo = match steps.len() >= GROUP_FROM_STEPS {
                    true => (k + 1).saturating_sub(GROUP),
                    false => k,
                };
                let v = first_dim::<B>(stack.clone(), lo, k + 1);
                let dv = B::stack_source_grad(v, lo, none(), boxed(&steps));
                if let Some(mut acc) = self.lock() {
                    for j in lo..k {
                        acc.ahead.push(Ahead {
                            source: j,
                            sum: Box::new(one(dv.clone(), j - lo)),
                            records: steps.len(),
                        });
                    }
                }
                Some(one(dv, k - lo))
            }
        };
        let mut queries = Vec::new();
        // Every step reads the first source: after its push, the queries' gradients are
        // whole.
        if k == 0 && from_records.is_some() {
            queries.extend(steps.iter().filter_map(|s| Some((s.q_node?, s.dq()))));
        }
        let dv = match (from_buffer, from_records) {
            (Some(b), Some(r)) => B::float_add(b, r),
            (Some(g), None) | (None, Some(g)) => g,
            (None, None) => B::float_zeros(shape, device, *dtype),
        };
        (dv, queries)
    }
}
