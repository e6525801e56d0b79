//! What the experiments share and are not experiments themselves: scratch
//! file set-up and fitting (`util`), cache control, background load, the
//! io_uring pacer, forked children and the ping-pong engine, the memory
//! latency curve, the scheduler-latency load and cause tracing, the
//! workload data and the CPU kernels. Every file directly under another
//! folder of `experiments/` is an experiment `tunelab list` lists.

pub(crate) mod background_load;
pub(crate) mod cache_control;
pub(crate) mod child;
pub(crate) mod data;
pub mod flash;
pub(crate) mod kernels;
pub(crate) mod latency_cause;
pub(crate) mod latency_curve;
pub(crate) mod latency_load;
pub(crate) mod pingpong;
pub(crate) mod speed;
pub mod uring_pacer;
pub(crate) mod util;
