//! From a results folder to conclusions, without training: load runs into polars frames,
//! fit scaling laws, bootstrap compute multipliers, and shape what each figure shows.

pub mod bootstrap;
pub mod cost;
pub mod degenerate;
pub mod depth_views;
pub mod design;
pub mod figures;
pub mod fit;
pub mod load;
pub mod multiplier;
pub mod no_fit;
pub mod paired;
pub mod power;
pub mod probes;
pub mod shapes;
pub mod stats;
pub mod validation;
pub mod views;
pub mod wall_clock;
