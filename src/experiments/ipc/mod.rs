//! Inter-process communication experiments (lmbench-class).

pub mod ctxsw;
pub mod fifo;
pub mod pipe;
pub mod unix;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(pipe::PIPE),
        Box::new(unix::UNIX),
        Box::new(fifo::FIFO),
        Box::new(ctxsw::Ctxsw::default()),
    ]
}
