//! Errors every floor may raise. `InputError` is the user's mistake (a file, a flag, a
//! key): the command line exits with status 2 for it, 1 for everything else.

use thiserror::Error;

/// Bad input from the user (a file, a flag, a key). Exits with status 2.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct InputError(pub String);
