//! Why a sweep's runs give no scaling law: what went wrong, and what to do about it.

use thiserror::Error;

/// Why there is no scaling fit, or no law to read from the one made.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NoFit {
    #[error("no finished runs")]
    NoRuns,
    #[error(
        "the runs train on {count} tasks ({tasks}); loss is not comparable across tasks, so no \
         scaling law is fitted across them"
    )]
    SeveralTasks { count: usize, tasks: String },
    #[error("no runs of the baseline arm `{0}`; pass --baseline with one of the arms")]
    NoBaseline(String),
    #[error("arm `{arm}` has {sizes} size(s); a scaling fit needs at least two")]
    TooFewSizes { arm: String, sizes: usize },
    #[error("the scaling fit did not converge")]
    NotConverged,
    /// The fit was made but its laws cannot be read (`degenerate`'s reason).
    #[error("no law is drawn, since {0}")]
    Degenerate(String),
}
