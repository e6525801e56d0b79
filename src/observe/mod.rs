//! Samplers of system activity: vmstat, iostat, dirty page cache, hogs,
//! interrupts, slab, pressure, power, process memory.
//!
//! Each source is split into raw cumulative counters read at one instant
//! (`read()`) and a pure `delta()` that turns two readings into rates, so the
//! arithmetic is unit-testable and the `monitor` command reuses the pieces.

pub(crate) mod dirty;
pub(crate) mod dirtywatch;
pub(crate) mod hints;
pub(crate) mod hogs;
pub(crate) mod iostat;
pub(crate) mod irq;
pub(crate) mod pressure;
pub(crate) mod procmem;
pub(crate) mod sampler;
pub(crate) mod validity;
pub(crate) mod vmstat;

pub(crate) use iostat::IostatRow;
pub(crate) use vmstat::VmstatRow;
