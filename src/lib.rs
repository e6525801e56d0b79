//! tunelab: measure, explain and tune the performance of Linux systems.
//!
//! Data flows one way: CLI -> experiment registry -> runner (trials, stats,
//! sampler) -> run model -> store / report; `analysis` computes comparisons and
//! histories from stored runs, `report` renders them. See `docs/` and the README.
//!
//! Public are the modules the binary and the integration tests reach; the
//! rest (`advise`, `analysis`, `observe`, `report`, `study`, `system`,
//! `units`) are crate-private, so an unused item there is a warning.

pub(crate) mod advise;
pub(crate) mod analysis;
pub mod cli;
pub mod diagnose;
pub mod engine;
pub mod error;
pub mod experiments;
pub mod fleet;
pub mod lab;
pub mod model;
pub(crate) mod observe;
pub(crate) mod report;
pub mod safety;
pub mod stats;
pub mod store;
pub(crate) mod study;
pub(crate) mod system;
pub mod tune;
pub(crate) mod units;

pub use error::{Error, Result};
