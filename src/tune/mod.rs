//! Changing the system under test, always reversibly: knob definitions and
//! sweeps. The filesystem lab on loop devices and block I/O throttling are
//! in `crate::lab` (below the experiments, which use it).

pub mod apply;
pub mod decide;
pub mod dry_run;
pub mod knobs;
pub mod persist;
pub mod plan;
pub mod relevance;
pub mod run;
pub mod sweep;
