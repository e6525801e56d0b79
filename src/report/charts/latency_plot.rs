//! The OSADL-style latency plot: per CPU, the number of samples in each
//! fixed-width latency bin on a logarithmic count axis, one line per
//! distribution (CPU), so rare long wake-ups stay visible next to millions
//! of short ones. Drawn from histograms with many fixed-width buckets
//! (`sched.latency`'s 2 µs bins); a bar per bin would be unreadable.

use super::{Axis, Chart, Line, LineChart};
use crate::stats::HistogramData;

/// Histograms with more buckets than this get the log-count plot instead
/// of a bar chart.
pub(crate) const MANY_BUCKETS: usize = 40;

/// One chart for all `hists` (name, histogram) with many buckets; None
/// when there is none. Empty bins are left out (a log axis has no zero);
/// the open last bin is drawn at its lower edge.
pub(crate) fn log_count(title: &str, hists: &[(String, &HistogramData)]) -> Option<Chart> {
    let lines: Vec<Line> = hists
        .iter()
        .filter(|(_, h)| h.buckets.len() > MANY_BUCKETS && h.count > 0)
        .map(|(name, h)| Line {
            name: name.clone(),
            points: h
                .buckets
                .iter()
                .filter(|b| b.count > 0)
                .map(|b| (b.low, b.count as f64))
                .collect(),
            ..Default::default()
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let unit = hists[0].1.unit.clone();
    Some(Chart::Line(LineChart {
        title: format!("{title}: samples per bin, log count (OSADL plot)"),
        x: Axis::new("latency", unit),
        y: Axis::new("samples", "count").log(true),
        lines,
        vlines: Vec::new(),
        hlines: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyRecorder;

    #[test]
    fn one_line_per_cpu_without_empty_bins() {
        let mut r = LatencyRecorder::with_buckets(2_000, 501);
        for ns in [10_000, 11_000, 50_000, 5_000_000] {
            r.record_ns(ns);
        }
        let h = r.to_data("wake-up latency cpu0");
        let Some(Chart::Line(c)) = log_count("sched.latency", &[("cpu0".into(), &h)]) else {
            panic!("no chart");
        };
        assert!(c.y.log);
        assert_eq!(c.lines.len(), 1);
        assert_eq!(
            c.lines[0].points,
            vec![(10e-6, 2.0), (50e-6, 1.0), (1e-3, 1.0)]
        );
        let few = LatencyRecorder::with_buckets(10_000_000, 11).to_data("frames");
        assert!(log_count("x", &[("f".into(), &few)]).is_none());
    }
}
