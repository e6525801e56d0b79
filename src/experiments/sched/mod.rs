//! Scheduler experiments (hackbench-class, wake-up latency).

pub(crate) mod latency;
pub(crate) mod messaging;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(messaging::Messaging), Box::new(latency::Latency)]
}
