//! Application experiments: start-up and exit time (`app.time`), with the
//! process-control pieces `tunelab time` and `tunelab memory` share.

pub mod boot;
pub mod exec_helper;
pub mod proc;
pub mod time;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(time::AppTime)]
}
