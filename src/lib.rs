//! tunelab: measure, explain and tune the performance of Linux systems.
//!
//! Data flows one way: CLI -> experiment registry -> runner (trials, stats,
//! sampler) -> run model -> store / report; `analysis` computes comparisons and
//! histories from stored runs, `report` renders them. See `docs/` and the README.
//!
//! Items are `pub(crate)` by default. `pub` marks exactly the paths the
//! binary and the integration tests reach (the rest of the library is not
//! an API); `unreachable_pub` turns a `pub` nobody outside can reach into a
//! warning, and clippy `-D warnings` into an error, so the surface stays
//! what is used and an unused item anywhere is a warning.

#![warn(unreachable_pub)]

pub(crate) mod advise;
pub(crate) mod analysis;
pub mod cli;
pub mod diagnose;
pub mod engine;
pub(crate) mod error;
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
