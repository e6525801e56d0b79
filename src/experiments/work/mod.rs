//! Application-like work on synthetic data: the mail-client sort and the
//! programme-listing search of the classic embedded studies. In memory only.

pub(crate) mod search;
pub(crate) mod sort;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(sort::Sort), Box::new(search::Search)]
}
