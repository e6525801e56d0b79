//! Transition only: the registry moved to `crate::experiments::registry`
//! (the engine must not import experiments). This re-export keeps other
//! branches compiling until they are merged; the lead removes it then, and
//! tests/architecture.rs allow-lists this one upward edge until that day.

pub use crate::experiments::registry::{all, find};
