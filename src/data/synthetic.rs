//! Synthetic tasks generated from a seed, scored only on their answer positions.
//!
//! Each example is one row of exactly `context + 1` bytes (padded with `.`), so that batches
//! take whole examples and the answer mask lines up with the targets.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::SyntheticConfig;
use super::{DataError, Split};

const PAD: u8 = b'.';
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

/// One example: its text and which byte positions are answers.
struct Example {
    text: Vec<u8>,
    answers: Vec<usize>,
}

/// The train and validation splits of a task, from different streams of the same seed.
pub fn generate(
    config: &SyntheticConfig,
    context: usize,
    seed: u64,
) -> Result<(Split, Split), DataError> {
    let (train_n, val_n) = match config {
        SyntheticConfig::Khop {
            train_examples,
            val_examples,
            ..
        }
        | SyntheticConfig::Mqar {
            train_examples,
            val_examples,
            ..
        } => (*train_examples, *val_examples),
    };
    validate(config, context)?;
    let split = |stream: u64, n: usize| -> Result<Split, DataError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        let row = context + 1;
        let mut tokens = Vec::with_capacity(n * row);
        let mut mask = Vec::with_capacity(n * row);
        for _ in 0..n {
            let ex = match config {
                SyntheticConfig::Khop { hops, n_vars, .. } => khop(&mut rng, *hops, *n_vars),
                SyntheticConfig::Mqar { pairs, queries, .. } => mqar(&mut rng, *pairs, *queries),
            };
            debug_assert!(ex.text.len() <= max_example_len(config));
            let start = tokens.len();
            tokens.extend(ex.text.iter().map(|&b| u32::from(b)));
            tokens.resize(start + row, u32::from(PAD));
            let mut m = vec![false; row];
            for a in ex.answers {
                m[a] = true;
            }
            mask.extend(m);
        }
        Ok(Split::examples(tokens, mask, row))
    };
    Ok((split(1, train_n)?, split(2, val_n)?))
}

/// The answer accuracy of a model that has learnt the format but not the binding: one that
/// guesses uniformly among the distinct digits written before each answer. Measured on the
/// validation split a run of `seed` evaluates on (every answer position, each counted once).
pub fn guessing_accuracy(
    config: &SyntheticConfig,
    context: usize,
    seed: u64,
) -> Result<f64, DataError> {
    let (_, val) = generate(config, context, seed)?;
    let row = context + 1;
    let mask = val.mask.unwrap_or_default();
    let (mut sum, mut answers) = (0.0f64, 0usize);
    for (r, text) in val.tokens.chunks(row).enumerate() {
        for a in (0..row).filter(|&a| mask.get(r * row + a).copied().unwrap_or(false)) {
            let mut seen = [false; 10];
            for &t in &text[..a] {
                if let Some(d) = t.checked_sub(u32::from(b'0')).filter(|&d| d < 10) {
                    seen[d as usize] = true;
                }
            }
            let distinct = seen.iter().filter(|&&s| s).count().max(1);
            sum += 1.0 / distinct as f64;
            answers += 1;
        }
    }
    Ok(sum / answers.max(1) as f64)
}

/// Checks a task's parameters and that its longest example fits in `context + 1` tokens,
/// without generating anything. The message names the key under `data.corpus.synthetic`.
pub fn validate(config: &SyntheticConfig, context: usize) -> Result<(), DataError> {
    let (train, val) = match config {
        SyntheticConfig::Khop {
            hops,
            n_vars,
            train_examples,
            val_examples,
        } => {
            if *hops < 1 || *n_vars > LETTERS.len() || *n_vars < hops + 1 {
                return Err(DataError::Config(format!(
                    "synthetic khop needs hops >= 1 and hops + 1 <= n_vars <= 26, got hops {hops}, n_vars {n_vars}"
                )));
            }
            (*train_examples, *val_examples)
        }
        SyntheticConfig::Mqar {
            pairs,
            queries,
            train_examples,
            val_examples,
        } => {
            if *pairs < 1 || *pairs > LETTERS.len() || *queries < 1 || queries > pairs {
                return Err(DataError::Config(format!(
                    "synthetic mqar needs 1 <= queries <= pairs <= 26, got pairs {pairs}, queries {queries}"
                )));
            }
            (*train_examples, *val_examples)
        }
    };
    for (key, n) in [("train_examples", train), ("val_examples", val)] {
        if n == 0 {
            return Err(DataError::Config(format!(
                "{key} is 0; a split needs at least one example (e.g. {})",
                if key == "train_examples" {
                    20_000
                } else {
                    1_000
                }
            )));
        }
    }
    let longest = max_example_len(config);
    if longest > context + 1 {
        return Err(DataError::Config(format!(
            "synthetic examples take up to {longest} tokens but model.context + 1 is {}; raise model.context to at least {} or lower the task size",
            context + 1,
            longest - 1
        )));
    }
    Ok(())
}

/// Bytes of the longest example: khop writes every variable once (`x=y;`) and asks one
/// (`x?d`); mqar writes `pairs` triples and `queries` triples, comma-separated, around `|`.
fn max_example_len(config: &SyntheticConfig) -> usize {
    match config {
        SyntheticConfig::Khop { n_vars, .. } => 4 * n_vars + 3,
        SyntheticConfig::Mqar { pairs, queries, .. } => 4 * pairs + 4 * queries - 1,
    }
}

fn digit(rng: &mut ChaCha8Rng) -> u8 {
    b'0' + rng.random_range(0..10u8)
}

/// `hops` assignments chain a digit to the queried variable; the other variables form
/// distractor chains. Statements keep each chain in order but interleave chains at random.
fn khop(rng: &mut ChaCha8Rng, hops: usize, n_vars: usize) -> Example {
    let mut vars: Vec<u8> = LETTERS.to_vec();
    vars.shuffle(rng);
    let vars = &vars[..n_vars];
    // Chains of variables: the target chain has hops + 1 variables; the rest split at random.
    let mut chains: Vec<Vec<u8>> = vec![vars[..=hops].to_vec()];
    let mut rest = vars[hops + 1..].to_vec();
    while !rest.is_empty() {
        let len = rng.random_range(1..=rest.len().min(hops + 1));
        chains.push(rest.drain(..len).collect());
    }
    let mut statements: Vec<Vec<Vec<u8>>> = chains
        .iter()
        .map(|chain| {
            let mut s = vec![vec![chain[0], b'=', digit(rng)]];
            s.extend(chain.windows(2).map(|w| vec![w[1], b'=', w[0]]));
            s
        })
        .collect();
    let value = statements[0][0][2];
    let mut text = Vec::new();
    while statements.iter().any(|s| !s.is_empty()) {
        let live: Vec<usize> = (0..statements.len())
            .filter(|&i| !statements[i].is_empty())
            .collect();
        let pick = live[rng.random_range(0..live.len())];
        text.extend(statements[pick].remove(0));
        text.push(b';');
    }
    text.extend([chains[0][hops], b'?']);
    text.push(value);
    Example {
        answers: vec![text.len() - 1],
        text,
    }
}

/// `pairs` key:value pairs, then `queries` of them asked back in random order.
fn mqar(rng: &mut ChaCha8Rng, pairs: usize, queries: usize) -> Example {
    let mut keys: Vec<u8> = LETTERS.to_vec();
    keys.shuffle(rng);
    let kv: Vec<(u8, u8)> = keys[..pairs].iter().map(|&k| (k, digit(rng))).collect();
    let mut text = Vec::new();
    for (i, (k, v)) in kv.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        text.extend([*k, b':', *v]);
    }
    text.push(b'|');
    let mut asked: Vec<usize> = (0..pairs).collect();
    asked.shuffle(rng);
    let mut answers = Vec::new();
    for (i, &q) in asked[..queries].iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        text.extend([kv[q].0, b'?', kv[q].1]);
        answers.push(text.len() - 1);
    }
    Example { text, answers }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Option<char> {
        let (body, query) = text.rsplit_once(';')?;
        let var = query.chars().next()?;
        let mut env = std::collections::HashMap::new();
        for stmt in body.split(';') {
            let (k, v) = stmt.split_once('=')?;
            let v = v.chars().next()?;
            let val = if v.is_ascii_digit() { v } else { *env.get(&v)? };
            env.insert(k.chars().next()?, val);
        }
        env.get(&var).copied()
    }

    #[test]
    fn khop_answers_resolve() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..200 {
            let ex = khop(&mut rng, 3, 8);
            let text = String::from_utf8(ex.text.clone()).unwrap();
            assert_eq!(ex.answers, vec![text.len() - 1]);
            assert_eq!(resolve(&text), text.chars().last(), "{text}");
        }
    }

    /// Guessing among the prompt's digits: exactly 1 for MQAR with one pair (one digit in
    /// the prompt), and strictly between 1/10 and 1 for k-hop with distractors.
    #[test]
    fn guessing_accuracy_counts_the_prompts_digits() {
        let one = SyntheticConfig::Mqar {
            pairs: 1,
            queries: 1,
            train_examples: 4,
            val_examples: 50,
        };
        assert_eq!(guessing_accuracy(&one, 16, 0).unwrap(), 1.0);
        let khop = SyntheticConfig::Khop {
            hops: 2,
            n_vars: 8,
            train_examples: 4,
            val_examples: 200,
        };
        let g = guessing_accuracy(&khop, 40, 0).unwrap();
        assert!(g > 0.1 && g < 1.0, "{g}");
    }

    /// The plan-time length check must be exact: no example longer, the longest as long.
    #[test]
    fn the_length_bound_is_the_longest_example() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (hops, n_vars) in [(1, 2), (3, 8), (5, 26)] {
            let cfg = SyntheticConfig::Khop {
                hops,
                n_vars,
                train_examples: 1,
                val_examples: 1,
            };
            let longest = (0..100)
                .map(|_| khop(&mut rng, hops, n_vars).text.len())
                .max();
            assert_eq!(longest, Some(max_example_len(&cfg)), "khop {hops} {n_vars}");
        }
        for (pairs, queries) in [(1, 1), (6, 3), (26, 26)] {
            let cfg = SyntheticConfig::Mqar {
                pairs,
                queries,
                train_examples: 1,
                val_examples: 1,
            };
            let longest = (0..100)
                .map(|_| mqar(&mut rng, pairs, queries).text.len())
                .max();
            assert_eq!(
                longest,
                Some(max_example_len(&cfg)),
                "mqar {pairs} {queries}"
            );
        }
        let cfg = SyntheticConfig::Khop {
            hops: 2,
            n_vars: 5,
            train_examples: 0,
            val_examples: 1,
        };
        assert!(
            validate(&cfg, 64).is_err(),
            "zero training examples must be refused"
        );
    }

    #[test]
    fn mqar_answers_match_pairs() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let ex = mqar(&mut rng, 6, 3);
        let text = String::from_utf8(ex.text.clone()).unwrap();
        let (pairs, asked) = text.split_once('|').unwrap();
        for (q, &pos) in asked.split(',').zip(&ex.answers) {
            let key = q.as_bytes()[0] as char;
            let value = ex.text[pos] as char;
            assert!(pairs.contains(&format!("{key}:{value}")), "{text}");
        }
        assert_eq!(ex.answers.len(), 3);
    }

    #[test]
    fn splits_are_deterministic_and_disjoint_streams() {
        let cfg = SyntheticConfig::Khop {
            hops: 2,
            n_vars: 5,
            train_examples: 50,
            val_examples: 10,
        };
        let (a, va) = generate(&cfg, 40, 7).unwrap();
        let (b, vb) = generate(&cfg, 40, 7).unwrap();
        assert_eq!((&a.tokens, &va.tokens), (&b.tokens, &vb.tokens));
        // The two splits share no example: validation is not a copy, shift or reuse of a
        // training example.
        let len = a.row_len.expect("whole examples");
        let train: std::collections::HashSet<&[u32]> = a.tokens.chunks(len).collect();
        let val: Vec<&[u32]> = va.tokens.chunks(len).collect();
        assert_eq!(
            (train.len(), val.len()),
            (50, 10),
            "distinct examples per split"
        );
        assert!(
            val.iter().all(|row| !train.contains(row)),
            "a validation example is also a training one"
        );
        // Another seed draws other examples.
        let (c, _) = generate(&cfg, 40, 8).unwrap();
        assert!(c.tokens.chunks(len).all(|row| !train.contains(row)));
        assert!(
            generate(&cfg, 8, 7).is_err(),
            "too short a context must be refused"
        );
    }
}
