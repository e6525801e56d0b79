//! Memory hierarchy experiments (lmbench-class).

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![]
}
