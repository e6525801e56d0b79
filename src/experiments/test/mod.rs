//! Hidden experiments for tests: not shown by `tunelab list`, `run --help`
//! or the man pages, found by name all the same.

pub(crate) mod scripted;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(scripted::Scripted)]
}
