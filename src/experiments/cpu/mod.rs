//! CPU truth (sbc-bench-class): the clock each core really runs at, compute
//! throughput per cluster, and what a sustained load does to both.

pub(crate) mod clock;
pub(crate) mod compute;
pub(crate) mod sustained;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(clock::Clock),
        Box::new(compute::Compute),
        Box::new(sustained::Sustained),
    ]
}
