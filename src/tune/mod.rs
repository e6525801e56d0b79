//! Changing the system under test, always reversibly: knob definitions and
//! sweeps. The filesystem lab on loop devices and block I/O throttling are
//! in `crate::lab` (below the experiments, which use it).

pub(crate) mod apply;
pub mod decide;
pub(crate) mod dry_run;
pub(crate) mod knobs;
pub mod persist;
pub(crate) mod plan;
pub mod relevance;
pub(crate) mod run;
pub mod sweep;
