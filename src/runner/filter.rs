//! `--filter`: select runs by `key=value` (size, arm, variant, block_size, seed, id, task) or by a
//! substring of their description.

use std::str::FromStr;

use crate::spec::PlannedRun;

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Key { key: String, value: String },
    Text(String),
}

const KEYS: &[&str] = &["size", "arm", "variant", "block_size", "seed", "id", "task"];

/// A `--filter` with a key that is not one of [`KEYS`].
#[derive(Debug, thiserror::Error)]
#[error("unknown filter key `{0}`; use one of {keys}", keys = KEYS.join(", "))]
pub struct UnknownFilterKey(String);

impl FromStr for Filter {
    type Err = UnknownFilterKey;

    fn from_str(s: &str) -> Result<Self, UnknownFilterKey> {
        match s.split_once('=') {
            Some((k, v)) if KEYS.contains(&k.trim()) => Ok(Self::Key {
                key: k.trim().into(),
                value: v.trim().into(),
            }),
            Some((k, _)) => Err(UnknownFilterKey(k.into())),
            None => Ok(Self::Text(s.into())),
        }
    }
}

/// The run's value under a filter key; None for `id` (matched by prefix) and for a run
/// without a block size.
fn field(key: &str, run: &PlannedRun) -> Option<String> {
    match key {
        "size" => Some(run.size.clone()),
        "arm" => Some(run.arm.clone()),
        "variant" => Some(run.spec.model.residual.variant().to_string()),
        "block_size" => run.block_size.map(|s| s.to_string()),
        "seed" => Some(run.seed.to_string()),
        "task" => Some(run.task().to_string()),
        _ => None,
    }
}

impl Filter {
    /// For a `key=value` filter other than `id`, the key and the values the runs have for
    /// it, in order.
    pub fn known_values(&self, runs: &[PlannedRun]) -> Option<(String, Vec<String>)> {
        let Self::Key { key, .. } = self else {
            return None;
        };
        if key == "id" {
            return None;
        }
        let mut values: Vec<String> = Vec::new();
        for value in runs.iter().filter_map(|run| field(key, run)) {
            if !values.contains(&value) {
                values.push(value);
            }
        }
        Some((key.clone(), values))
    }

    pub fn matches(&self, run: &PlannedRun) -> bool {
        match self {
            Self::Text(t) => super::describe(run).contains(t.as_str()),
            Self::Key { key, value } if key == "id" => run.id.starts_with(value.as_str()),
            Self::Key { key, value } => field(key, run).as_deref() == Some(value.as_str()),
        }
    }
}
