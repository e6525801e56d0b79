//! Application-like work on synthetic data: the mail-client sort and the
//! programme-listing search of the classic embedded studies. In memory only.

pub mod search;
pub mod sort;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(sort::Sort), Box::new(search::Search)]
}
