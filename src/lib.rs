//! attnres: scaling-law and ablation experiments for Attention Residuals (arXiv 2603.15031).
//!
//! The flow is one way: `spec` -> `runner` -> `train` -> results folder -> `analysis` ->
//! `plot` -> `report`. This crate holds the library; `main.rs` is the command line.

pub mod analysis;
pub mod backend;
pub mod cli;
pub mod cost;
pub mod data;
pub mod error;
pub mod fmt;
pub mod model;
pub mod plot;
pub mod report;
pub mod runner;
pub mod spec;
pub mod store;
pub mod train;
