//! Application experiments: start-up and exit time (`app.time`). The
//! process-control pieces it shares with `tunelab time`, `boot` and
//! `memory` are in `engine::process`.

pub(crate) mod time;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(time::AppTime)]
}
