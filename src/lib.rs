//! tunelab: measure, explain and tune the performance of Linux systems.
//!
//! Data flows one way: CLI -> experiment registry -> runner (trials, stats,
//! sampler) -> run model -> store / report; `analysis` computes comparisons and
//! histories from stored runs, `report` renders them. See `docs/` and the README.

pub mod advise;
pub mod analysis;
pub mod cli;
pub mod diagnose;
pub mod engine;
pub mod error;
pub mod experiments;
pub mod fleet;
pub mod lab;
pub mod model;
pub mod observe;
pub mod report;
pub mod safety;
pub mod stats;
pub mod store;
pub mod study;
pub mod system;
pub mod tune;
pub mod units;

pub use error::{Error, Result};
