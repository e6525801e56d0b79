//! `tunelab diagnose`: find the bottleneck.

pub mod profile;
