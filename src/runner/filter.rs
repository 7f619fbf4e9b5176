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

impl FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((k, v)) if KEYS.contains(&k.trim()) => Ok(Self::Key {
                key: k.trim().into(),
                value: v.trim().into(),
            }),
            Some((k, _)) => Err(format!(
                "unknown filter key `{k}`; use one of {}",
                KEYS.join(", ")
            )),
            None => Ok(Self::Text(s.into())),
        }
    }
}

impl Filter {
    /// For a `key=value` filter, the key and the values the runs have for it, in order.
    pub fn known_values(&self, runs: &[PlannedRun]) -> Option<(String, Vec<String>)> {
        let Self::Key { key, .. } = self else {
            return None;
        };
        let mut values: Vec<String> = Vec::new();
        for run in runs {
            let value = match key.as_str() {
                "size" => run.size.clone(),
                "arm" => run.arm.clone(),
                "variant" => run.spec.model.residual.variant().to_string(),
                "block_size" => match run.block_size {
                    Some(s) => s.to_string(),
                    None => continue,
                },
                "seed" => run.seed.to_string(),
                "task" => run.task().to_string(),
                _ => return None,
            };
            if !values.contains(&value) {
                values.push(value);
            }
        }
        Some((key.clone(), values))
    }

    pub fn matches(&self, run: &PlannedRun) -> bool {
        match self {
            Self::Text(t) => super::describe(run).contains(t.as_str()),
            Self::Key { key, value } => match key.as_str() {
                "size" => run.size == *value,
                "arm" => run.arm == *value,
                "variant" => run.spec.model.residual.variant() == value.as_str(),
                "block_size" => {
                    run.block_size.map(|s| s.to_string()).as_deref() == Some(value.as_str())
                }
                "seed" => run.seed.to_string() == *value,
                "id" => run.id.starts_with(value.as_str()),
                "task" => run.task() == *value,
                _ => false,
            },
        }
    }
}
