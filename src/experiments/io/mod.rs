//! Storage experiments.

pub mod file_read;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(file_read::FileRead)]
}
