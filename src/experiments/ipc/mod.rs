//! Inter-process communication experiments (lmbench-class).

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![]
}
