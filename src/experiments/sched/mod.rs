//! Scheduler experiments (hackbench-class).

pub mod messaging;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(messaging::Messaging)]
}
