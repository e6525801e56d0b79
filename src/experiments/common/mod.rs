//! What the experiments share and are not experiments themselves: scratch
//! file set-up and fitting (`util`), cache control, background load, the
//! io_uring pacer, forked children and the ping-pong engine, the memory
//! latency curve, the scheduler-latency load and cause tracing, the
//! workload data and the CPU kernels. Every file directly under another
//! folder of `experiments/` is an experiment `tunelab list` lists.

pub mod background_load;
pub mod cache_control;
pub(crate) mod child;
pub mod data;
pub mod flash;
pub mod kernels;
pub mod latency_cause;
pub mod latency_curve;
pub mod latency_load;
pub(crate) mod pingpong;
pub mod speed;
pub mod uring_pacer;
pub mod util;
