//! Changing the system under test, always reversibly: knob definitions and
//! sweeps. The filesystem lab on loop devices and block I/O throttling moved
//! to `crate::lab` (below the experiments, which use it); the re-exports
//! below keep the old `tune::` paths working for one merge.

pub mod knobs;
pub mod sweep;

// Old paths, kept for one merge: use `crate::lab::…` in new code.
pub use crate::lab;
pub use crate::lab::loopfs as loopdev;
pub use crate::lab::throttle;
pub use crate::lab::{IoThrottle, LoopFs, LoopFsOptions, ThrottleLimits};
