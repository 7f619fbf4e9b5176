//! From a results folder to conclusions, without training: load runs into polars frames,
//! fit scaling laws, bootstrap compute multipliers, and shape what each figure shows.

pub mod fit;
pub mod load;
pub mod multiplier;
pub mod views;
