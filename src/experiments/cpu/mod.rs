//! CPU truth (sbc-bench-class): the clock each core really runs at, compute
//! throughput per cluster, and what a sustained load does to both.

pub mod clock;
pub mod compute;
pub mod sustained;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(clock::Clock),
        Box::new(compute::Compute),
        Box::new(sustained::Sustained),
    ]
}
