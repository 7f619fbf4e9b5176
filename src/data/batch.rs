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

/// Batches of at most `rows` sequences that score every token of the split once: windows of
/// `context` laid end to end (the last partial window is dropped: under `context` tokens),
/// or every example once for synthetic tasks. The final validation of a run uses these.
pub fn whole_split_batches(split: &Split, rows: usize, context: usize) -> Vec<Batch> {
    let starts: Vec<usize> = match split.row_len {
        Some(len) => (0..split.tokens.len() / len).map(|i| i * len).collect(),
        None => (0..split.tokens.len().saturating_sub(1) / context)
            .map(|i| i * context)
            .collect(),
    };
    starts
        .chunks(rows.max(1))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_split_batches_score_every_token_once() {
        // 1 + 3 windows of 4 and 2 tokens left over: 12 targets, positions 1..=12.
        let split = Split::stream((0..15).collect());
        let batches = whole_split_batches(&split, 2, 4);
        assert_eq!(batches.iter().map(|b| b.rows).collect::<Vec<_>>(), [2, 1]);
        let targets: Vec<i64> = batches.iter().flat_map(|b| b.target.clone()).collect();
        assert_eq!(targets, (1..=12).collect::<Vec<i64>>());
        for b in &batches {
            for (i, t) in b.input.iter().zip(&b.target) {
                assert_eq!(i + 1, *t, "each target is the next token of its input");
            }
        }
        // Exactly one window's worth plus its target: one window; one token short: none.
        assert_eq!(
            whole_split_batches(&Split::stream((0..5).collect()), 8, 4).len(),
            1
        );
        assert!(whole_split_batches(&Split::stream((0..4).collect()), 8, 4).is_empty());
    }

    #[test]
    fn whole_split_batches_take_every_example_of_a_task() {
        let (len, n) = (5, 7);
        let tokens: Vec<u32> = (0..(len * n) as u32).collect();
        let mask = vec![true; tokens.len()];
        let batches = whole_split_batches(&Split::examples(tokens, mask, len), 3, len - 1);
        let firsts: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.input.chunks(len - 1).map(|row| row[0]))
            .collect();
        assert_eq!(
            firsts,
            (0..n as i64).map(|i| i * len as i64).collect::<Vec<_>>()
        );
    }
}
