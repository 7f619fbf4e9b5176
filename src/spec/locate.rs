//! Where a key sits in a YAML file, and did-you-mean suggestions, for error messages that
//! point at the line and column and say what to do.

use std::collections::HashMap;

use saphyr::{LoadableYamlNode, MarkedYamlOwned, YamlDataOwned};

/// Line and column (both 1-based) of every key and list item, by dotted path
/// (`sizes.1.d_model`, `grid.zip.0`).
#[derive(Debug, Clone, Default)]
pub struct Locations(HashMap<String, (usize, usize)>);

impl Locations {
    pub fn parse(text: &str) -> Self {
        let mut map = HashMap::new();
        if let Ok(docs) = MarkedYamlOwned::load_from_str(text)
            && let Some(root) = docs.first()
        {
            walk(root, String::new(), &mut map);
        }
        Self(map)
    }

    /// The location of `path`, or of its nearest ancestor that has one.
    pub fn find(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            if let Some(&loc) = self.0.get(p) {
                return Some(loc);
            }
            p = &p[..p.rfind('.')?];
        }
    }
}

fn walk(node: &MarkedYamlOwned, path: String, map: &mut HashMap<String, (usize, usize)>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match &node.data {
        YamlDataOwned::Mapping(m) => {
            for (k, v) in m {
                let Some(key) = k.data.as_str() else { continue };
                let child = join(key);
                map.insert(child.clone(), (k.span.start.line(), k.span.start.col() + 1));
                walk(v, child, map);
            }
        }
        YamlDataOwned::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                let child = join(&i.to_string());
                map.insert(
                    child.clone(),
                    (item.span.start.line(), item.span.start.col() + 1),
                );
                walk(item, child, map);
            }
        }
        _ => {}
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Adds a did-you-mean to serde's `unknown field `x`, expected one of `a`, `b`` messages.
pub fn suggest_unknown(message: &str) -> Option<String> {
    let (kind, rest) = if let Some(r) = message.split_once("unknown field `") {
        ("field", r.1)
    } else {
        ("variant", message.split_once("unknown variant `")?.1)
    };
    let (word, rest) = rest.split_once('`')?;
    let expected: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let best = did_you_mean(word, expected.iter().copied())?;
    Some(format!(
        "did you mean `{best}` instead of the {kind} `{word}`?"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_and_list_items() {
        let text =
            "name: x\nsizes:\n  - micro\n  - {d_model: 100, n_blocks: 4}\ntrain:\n  lr: 0.1\n";
        let loc = Locations::parse(text);
        assert_eq!(loc.find("name"), Some((1, 1)));
        assert_eq!(loc.find("sizes.1"), Some((4, 5)));
        assert_eq!(loc.find("sizes.1.d_model"), Some((4, 6)));
        assert_eq!(loc.find("train.lr"), Some((6, 3)));
        assert_eq!(loc.find("train.lr.nothing"), Some((6, 3)));
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("lrr", ["lr", "seeds", "batch_size"]),
            Some("lr")
        );
        assert_eq!(did_you_mean("zzzzzz", ["lr", "seeds"]), None);
        let msg = "train: unknown field `learning_rat`, expected one of `batch_size`, `lr`, `learning_rate`";
        assert_eq!(
            suggest_unknown(msg).unwrap(),
            "did you mean `learning_rate` instead of the field `learning_rat`?"
        );
    }
}
