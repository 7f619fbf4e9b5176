//! Sweep errors that name the file, the line and column, the key, what is wrong and what to do.

use std::fmt;
use std::path::{Path, PathBuf};

use saphyr::LoadableYamlNode;

use super::locate::{Locations, suggest_unknown};

#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// Dotted path of the offending key (`sizes.1`, `train.lr`).
    pub key: String,
    pub message: String,
    pub file: Option<PathBuf>,
    pub location: Option<(usize, usize)>,
}

impl SpecError {
    pub fn at(key: &str, message: impl fmt::Display) -> Self {
        Self {
            key: key.to_string(),
            message: message.to_string(),
            file: None,
            location: None,
        }
    }

    /// Attaches the file and the key's line and column.
    pub fn in_file(mut self, file: &Path, locations: &Locations) -> Self {
        self.file = Some(file.to_path_buf());
        if self.location.is_none() {
            self.location = locations.find(&self.key);
        }
        self
    }

    /// From a serde_yaml_ng error, which carries its own location and key path.
    pub fn from_yaml(file: &Path, e: &serde_yaml_ng::Error) -> Self {
        let raw = e.to_string();
        // serde_yaml_ng writes "path.to.key: message at line L column C".
        let body = raw.split(" at line ").next().unwrap_or(&raw).to_string();
        let (key, message) = match body.split_once(": ") {
            Some((k, m)) if !k.contains(' ') => (k.to_string(), m.to_string()),
            _ => (String::new(), body.clone()),
        };
        let message = match suggest_unknown(&message).or_else(|| number_hint(&message)) {
            Some(hint) => format!("{message}; {hint}"),
            None => message,
        };
        Self {
            key,
            message,
            file: Some(file.to_path_buf()),
            location: e.location().map(|l| (l.line(), l.column())),
        }
    }
}

impl SpecError {
    /// A serde_yaml_ng error of `text`, with a key given twice located at its second use.
    pub fn from_yaml_text(file: &Path, e: &serde_yaml_ng::Error, text: &str) -> Self {
        let mut err = Self::from_yaml(file, e);
        let field = err
            .message
            .strip_prefix("duplicate field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string);
        // serde points at the mapping; saphyr's own check stops at the second use.
        if let Some(field) = field
            && let Err(scan) = saphyr::MarkedYamlOwned::load_from_str(text)
            && scan.info().contains("duplicate")
        {
            let at = scan.marker();
            err.location = Some((at.line(), at.col() + 1));
            err.message = format!("`{field}` is given twice; keep one of them");
        }
        if err.message.contains("more than one document")
            && let Some(line) = second_document(text)
        {
            err.location = Some((line, 1));
            err.message = "a second YAML document starts here; a file holds one: remove this \
                           `---` and what follows, or make it a file of its own"
                .into();
        }
        err
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some((line, col)) = self.location {
                write!(f, ":{line}:{col}")?;
            }
            write!(f, ": ")?;
        }
        if !self.key.is_empty() {
            write!(f, "`{}`: ", self.key)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for SpecError {}

/// The line (from 1) of the `---` that starts a second document: the first such line, or
/// the second where the file opens with one.
fn second_document(text: &str) -> Option<usize> {
    let mut starts = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("---"))
        .map(|(i, _)| i);
    let first = starts.next()?;
    let opens = text
        .lines()
        .take(first)
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    if opens { starts.next() } else { Some(first) }.map(|i| i + 1)
}

/// What a number serde could not take really is: YAML reads `1e309` (beyond f64) as a
/// string, and `-0` as the integer 0 with a sign that u64 refuses.
fn number_hint(message: &str) -> Option<String> {
    if let Some(rest) = message.strip_prefix("invalid type: string \"")
        && let Some((word, expected)) = rest.split_once("\", expected ")
        && matches!(expected, "f64" | "f32")
        && word.parse::<f64>().is_ok_and(f64::is_infinite)
    {
        return Some(format!(
            "{word} is beyond the largest 64-bit float (about 1.8e308); give a finite number"
        ));
    }
    if message.starts_with("invalid type: integer `0`, expected u")
        || message.starts_with("invalid type: integer `-")
    {
        return Some("give a whole number from 0 up, without a sign (0, not -0)".into());
    }
    None
}
