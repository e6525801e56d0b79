//! Hidden experiments for tests: not shown by `tunelab list`, `run --help`
//! or the man pages, found by name all the same.

pub mod scripted;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(scripted::Scripted)]
}
