//! tunelab: measure, explain and tune the performance of Linux systems.
//!
//! Data flows one way: CLI -> experiment registry -> runner (trials, stats,
//! sampler) -> run model -> store / report. See `docs/` and the README.

pub mod error;
pub mod observe;
pub mod stats;
pub mod system;

pub use error::{Error, Result};
