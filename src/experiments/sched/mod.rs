//! Scheduler experiments (hackbench-class, wake-up latency).

pub mod latency;
pub mod messaging;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(messaging::Messaging), Box::new(latency::Latency)]
}
