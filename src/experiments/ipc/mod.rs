//! Inter-process communication experiments (lmbench-class).

pub(crate) mod ctxsw;
pub(crate) mod fifo;
pub(crate) mod pipe;
pub(crate) mod unix;

use crate::engine::Experiment;
use crate::experiments::common::pingpong::{Medium, RoundTrip};

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    // One round-trip experiment, with a declaration per channel.
    let round_trip = |spec, medium| -> Box<dyn Experiment> { Box::new(RoundTrip { spec, medium }) };
    vec![
        round_trip(&pipe::SPEC, Medium::Pipes),
        round_trip(&unix::SPEC, Medium::UnixStream),
        round_trip(&fifo::SPEC, Medium::Fifos),
        Box::new(ctxsw::Ctxsw::default()),
    ]
}
