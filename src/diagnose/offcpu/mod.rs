//! Off-CPU analysis: the time the workload's tasks spent blocked, by cause.
//! The primary source is the profiler's off-CPU tracer (every switch out
//! with its user and kernel call chain, paired with the switch back in, as
//! `offcputime` or `perf sched` would see it); the sampled wchan/stack table
//! is the fallback and says so.
//!
//! Many kernel paths are one cause to a user: an fsync waits in
//! `folio_wait_writeback`, `jbd2_log_wait_commit` or `blkdev_issue_flush`
//! depending on the moment; a futex is a mutex, a condition variable or a
//! thread join depending on the user-space caller. `classify` turns a stack
//! into (class, cause, caller) and the rows are summed on that key, so one
//! cause is one row.
//!
//! `classify` reads one stack (class, cause, caller); `rows` sums the
//! traced or sampled waits into the report's rows.

mod classify;
mod rows;
mod section;

pub(crate) use classify::{c_library_image, c_library_internal, SLEEP_FRAMES};
pub(crate) use rows::{from_blocking, from_trace};
pub(crate) use section::section;

/// Causes kept.
pub(crate) const TOP: usize = 20;
