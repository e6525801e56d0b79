//! Changing the system under test, always reversibly: a filesystem lab on
//! loop devices (`loopdev`) and block I/O throttling with cgroups
//! (`throttle`). Every object here is a guard whose `Drop` undoes what it
//! did, on every exit path.

pub mod knobs;
pub mod lab;
pub mod loopdev;
pub mod sweep;
pub mod throttle;

pub use loopdev::{LoopFs, LoopFsOptions};
pub use throttle::{IoThrottle, ThrottleLimits};
