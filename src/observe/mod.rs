//! Samplers of system activity: vmstat, iostat, dirty page cache, ...
//!
//! Each source is split into raw cumulative counters read at one instant
//! (`read()`) and a pure `delta()` that turns two readings into rates, so the
//! arithmetic is unit-testable and a `monitor` command can reuse the pieces.

pub mod dirty;
pub mod iostat;
pub mod sampler;
pub mod vmstat;

pub use dirty::DirtyState;
pub use iostat::{DiskCounters, IostatRow};
pub use sampler::{MonitorSample, Sampler};
pub use vmstat::{VmstatCounters, VmstatRow};
