//! Statistics: summaries, bootstrap CIs, outliers, comparisons, histograms.

pub mod calibrate;
pub mod changepoint;
pub mod compare;
pub mod histogram;
pub mod summary;

pub use compare::{compare, Comparison, Verdict};
pub use histogram::{HistogramData, LatencyRecorder};
pub use summary::{median, summarize, StopReason, Summary};
