//! Sweep specs: YAML wire types, validation, grid expansion and run ids. Knows nothing of burn.

pub mod run;

pub use run::RunSpec;
