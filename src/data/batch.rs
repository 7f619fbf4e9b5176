//! Batches as pure functions of (seed, step): resuming at a step needs no saved cursor
//! beyond the step itself, and the same run always sees the same data.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Split;

/// `rows` sequences of `context` inputs and their next-token targets, flattened row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub rows: usize,
    pub context: usize,
    pub input: Vec<i64>,
    pub target: Vec<i64>,
    /// 1 where the target is scored (answer positions of synthetic tasks), else 0.
    pub mask: Option<Vec<f32>>,
}

impl Batch {
    /// The number of target tokens this batch trains on.
    pub fn scored(&self) -> usize {
        match &self.mask {
            Some(m) => m.iter().filter(|&&x| x > 0.0).count(),
            None => self.input.len(),
        }
    }
}

/// Training micro-batch `micro` of step `step`.
pub fn train_batch(
    split: &Split,
    seed: u64,
    step: u64,
    micro: u64,
    rows: usize,
    context: usize,
) -> Batch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_da7a);
    rng.set_stream(step.wrapping_mul(1 << 16).wrapping_add(micro));
    let starts: Vec<usize> = (0..rows)
        .map(|_| match split.row_len {
            Some(len) => rng.random_range(0..split.tokens.len() / len) * len,
            None => rng.random_range(0..=split.tokens.len() - context - 1),
        })
        .collect();
    gather(split, &starts, context)
}

/// The fixed validation batches: `count` batches of `rows` windows spread evenly over the
/// split (whole examples for synthetic tasks).
pub fn eval_batches(split: &Split, count: usize, rows: usize, context: usize) -> Vec<Batch> {
    let total = count * rows;
    let starts: Vec<usize> = match split.row_len {
        Some(len) => {
            let n = split.tokens.len() / len;
            (0..total).map(|i| (i * n / total) * len).collect()
        }
        None => {
            let span = split.tokens.len() - context - 1;
            (0..total).map(|i| i * span / total.max(1)).collect()
        }
    };
    starts
        .chunks(rows)
        .map(|s| gather(split, s, context))
        .collect()
}

fn gather(split: &Split, starts: &[usize], context: usize) -> Batch {
    let mut input = Vec::with_capacity(starts.len() * context);
    let mut target = Vec::with_capacity(starts.len() * context);
    let mut mask = split
        .mask
        .as_ref()
        .map(|_| Vec::with_capacity(starts.len() * context));
    for &s in starts {
        input.extend(split.tokens[s..s + context].iter().map(|&t| i64::from(t)));
        target.extend(
            split.tokens[s + 1..s + context + 1]
                .iter()
                .map(|&t| i64::from(t)),
        );
        if let (Some(out), Some(m)) = (mask.as_mut(), split.mask.as_ref()) {
            out.extend(
                m[s + 1..s + context + 1]
                    .iter()
                    .map(|&b| if b { 1.0 } else { 0.0 }),
            );
        }
    }
    Batch {
        rows: starts.len(),
        context,
        input,
        target,
        mask,
    }
}
