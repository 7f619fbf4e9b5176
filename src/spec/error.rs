//! Sweep errors that name the file, the line and column, the key, what is wrong and what to do.

use std::fmt;
use std::path::{Path, PathBuf};

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
        let message = match suggest_unknown(&message) {
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
