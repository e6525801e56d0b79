//! Statistics: summaries, bootstrap CIs, outliers, comparisons, histograms.

pub(crate) mod calibrate;
pub(crate) mod changepoint;
pub(crate) mod compare;
pub(crate) mod histogram;
pub(crate) mod proportion;
pub(crate) mod summary;

pub(crate) use compare::{compare, Comparison, Verdict};
pub(crate) use histogram::{HistogramData, LatencyRecorder};
pub use summary::{median, summarize, StopReason, Summary};
