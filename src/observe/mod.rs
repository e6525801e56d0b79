//! Samplers of system activity: vmstat, iostat, dirty page cache, hogs,
//! interrupts, slab, pressure, power, process memory.
//!
//! Each source is split into raw cumulative counters read at one instant
//! (`read()`) and a pure `delta()` that turns two readings into rates, so the
//! arithmetic is unit-testable and the `monitor` command reuses the pieces.

pub mod dirty;
pub mod dirtywatch;
pub mod hints;
pub mod hogs;
pub mod iostat;
pub mod irq;
pub mod pressure;
pub mod procmem;
pub mod sampler;
pub mod validity;
pub mod vmstat;

pub use iostat::IostatRow;
pub use vmstat::VmstatRow;
