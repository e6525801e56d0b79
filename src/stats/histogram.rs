//! Latency distributions: an HDR histogram in nanoseconds plus optional exact
//! fixed-width buckets, exported as [`HistogramData`] in seconds.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant decimal digits kept by the HDR histogram.
const SIGFIG: u8 = 3;
/// Preallocated range (1 ns .. 100 s) so recording never allocates in
/// practice; larger values still fit because auto-resize is on.
const PREALLOC_MAX_NS: u64 = 100_000_000_000;
/// Percentiles exported by [`LatencyRecorder::to_data`].
const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 100.0];
const NS_PER_S: f64 = 1e9;

/// Records latencies in nanoseconds.
///
/// Percentiles are accurate to 3 significant digits (HDR histogram); count,
/// min, max, mean and the fixed-width buckets are exact.
#[derive(Debug, Clone)]
pub(crate) struct LatencyRecorder {
    hist: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    buckets: Option<Buckets>,
}

/// Exact fixed-width buckets; the last one is open-ended.
#[derive(Debug, Clone, PartialEq)]
struct Buckets {
    width_ns: u64,
    counts: Vec<u64>,
}

impl Buckets {
    /// Bucket index of `ns`: values past the last boundary land in the last.
    fn index(&self, ns: u64) -> usize {
        let i = ns / self.width_ns;
        (i.min(self.counts.len() as u64 - 1)) as usize
    }
}

/// A serialisable latency distribution, values in seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistogramData {
    pub(crate) name: String,
    /// Always "s".
    pub(crate) unit: String,
    pub(crate) count: u64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
    pub(crate) stddev: f64,
    /// p50, p90, p99, p99.9 and p100 (= max); empty when count is 0.
    pub(crate) percentiles: Vec<Percentile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) buckets: Vec<Bucket>,
}

/// One percentile: `p` in percent (e.g. 99.9), `value` in seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Percentile {
    pub(crate) p: f64,
    pub(crate) value: f64,
}

/// Values in `[low, high)` seconds; `high` None means "low and above".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Bucket {
    pub(crate) low: f64,
    pub(crate) high: Option<f64>,
    pub(crate) count: u64,
}

impl HistogramData {
    /// The stored value of percentile `p` (50, 90, 99, 99.9 or 100), if any.
    pub(crate) fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|e| (e.p - p).abs() < 1e-9)
            .map(|e| e.value)
    }
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// A recorder without fixed-width buckets.
    pub(crate) fn new() -> Self {
        let mut hist = Histogram::new_with_bounds(1, PREALLOC_MAX_NS, SIGFIG)
            .expect("valid constant histogram bounds");
        hist.auto(true);
        LatencyRecorder {
            hist,
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            buckets: None,
        }
    }

    /// A recorder with `count` exact buckets of `width_ns`: bucket i holds
    /// `[i*width, (i+1)*width)` and the last holds `(count-1)*width` and
    /// above. E.g. 10 ms frame buckets 0–9, 10–19, …, 100+ are
    /// `with_buckets(10_000_000, 11)`. `count` 0 means no buckets; a zero
    /// width is treated as 1 ns.
    pub(crate) fn with_buckets(width_ns: u64, count: usize) -> Self {
        let mut r = Self::new();
        if count > 0 {
            r.buckets = Some(Buckets {
                width_ns: width_ns.max(1),
                counts: vec![0; count],
            });
        }
        r
    }

    /// Record one latency. O(1) and allocation-free for values up to 100 s.
    #[inline]
    pub(crate) fn record_ns(&mut self, ns: u64) {
        if self.hist.record(ns).is_err() {
            // Only beyond what auto-resize can represent: clamp, never reject
            // (exact max is still tracked below).
            self.hist.saturating_record(ns);
        }
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
        if let Some(b) = &mut self.buckets {
            let i = b.index(ns);
            b.counts[i] += 1;
        }
    }

    /// Record one latency given as a Duration (saturating at u64::MAX ns).
    #[inline]
    pub(crate) fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Number of recorded values.
    pub(crate) fn len(&self) -> u64 {
        self.hist.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add everything recorded by `other`.
    ///
    /// Buckets merge exactly when both layouts match (or `self` is empty and
    /// has none, in which case it adopts `other`'s). With different layouts
    /// `other`'s values are re-binned from its histogram (3 significant
    /// digits), so bucket counts may be off near boundaries.
    pub(crate) fn merge(&mut self, other: &LatencyRecorder) {
        if other.is_empty() {
            return;
        }
        if self.buckets.is_none() && self.is_empty() {
            self.buckets = other.buckets.as_ref().map(|b| Buckets {
                width_ns: b.width_ns,
                counts: vec![0; b.counts.len()],
            });
        }
        self.merge_buckets(other);
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                let ns = other.hist.highest_equivalent(v.value_iterated_to());
                self.hist.saturating_record_n(ns, v.count_at_value());
            }
        }
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
    }

    fn merge_buckets(&mut self, other: &LatencyRecorder) {
        let Some(mine) = &mut self.buckets else {
            return;
        };
        match &other.buckets {
            Some(theirs)
                if theirs.width_ns == mine.width_ns && theirs.counts.len() == mine.counts.len() =>
            {
                mine.counts
                    .iter_mut()
                    .zip(&theirs.counts)
                    .for_each(|(a, b)| *a += b);
            }
            _ => {
                for v in other.hist.iter_recorded() {
                    let ns = v.value_iterated_to().clamp(other.min_ns, other.max_ns);
                    let i = mine.index(ns);
                    mine.counts[i] += v.count_at_value();
                }
            }
        }
    }

    /// Number of values strictly greater than `threshold_ns`.
    ///
    /// Thresholds are not known in advance, so this reads the HDR histogram:
    /// accurate to 3 significant digits (values in the same histogram bin as
    /// the threshold count as not above it). Exact when the threshold is
    /// below the minimum or at/above the maximum.
    pub(crate) fn count_above_ns(&self, threshold_ns: u64) -> u64 {
        if self.is_empty() || threshold_ns >= self.max_ns {
            return 0;
        }
        if threshold_ns < self.min_ns {
            return self.len();
        }
        self.len() - self.hist.count_between(0, threshold_ns)
    }

    /// Export as seconds, with percentiles clamped to the observed min/max
    /// (HDR reports a bin's highest equivalent value, which can exceed the
    /// true max).
    pub(crate) fn to_data(&self, name: &str) -> HistogramData {
        let count = self.len();
        let mut data = HistogramData {
            name: name.to_owned(),
            unit: "s".to_owned(),
            count,
            min: 0.0,
            max: 0.0,
            mean: 0.0,
            stddev: 0.0,
            percentiles: Vec::new(),
            buckets: self.bucket_data(),
        };
        if count == 0 {
            return data;
        }
        data.min = secs(self.min_ns);
        data.max = secs(self.max_ns);
        data.mean = self.sum_ns as f64 / count as f64 / NS_PER_S;
        data.stddev = self.hist.stdev() / NS_PER_S;
        data.percentiles = PERCENTILES
            .iter()
            .map(|&p| Percentile {
                p,
                value: secs(self.percentile_ns(p)),
            })
            .collect();
        data
    }

    /// Percentile `p` (in percent) in ns, clamped to the exact [min, max].
    fn percentile_ns(&self, p: f64) -> u64 {
        if p >= 100.0 {
            return self.max_ns;
        }
        // HDR takes rank = ceil(q * n); p / 100 carries float error (99.9 /
        // 100 * 1000 = 999.0000000000001 -> rank 1000), so fix the rank here
        // and pass a quantile half a rank below it.
        let n = self.len() as f64;
        let exact = p.max(0.0) / 100.0 * n;
        let rank = if (exact - exact.round()).abs() < 1e-9 {
            exact.round()
        } else {
            exact.ceil()
        };
        let q = (rank.max(1.0) - 0.5) / n;
        self.hist
            .value_at_quantile(q)
            .clamp(self.min_ns, self.max_ns)
    }

    fn bucket_data(&self) -> Vec<Bucket> {
        let Some(b) = &self.buckets else {
            return Vec::new();
        };
        let last = b.counts.len() - 1;
        b.counts
            .iter()
            .enumerate()
            .map(|(i, &count)| {
                let low = i as u64 * b.width_ns;
                Bucket {
                    low: secs(low),
                    high: (i < last).then(|| secs(low + b.width_ns)),
                    count,
                }
            })
            .collect()
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / NS_PER_S
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn rel_close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs()
    }

    fn one_to_thousand_us() -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        (1..=1000).for_each(|i| r.record_ns(i * US));
        r
    }

    #[test]
    fn percentiles_of_uniform_microseconds() {
        let d = one_to_thousand_us().to_data("lat");
        assert_eq!(
            (d.count, d.unit.as_str(), d.name.as_str()),
            (1000, "s", "lat")
        );
        assert_eq!((d.min, d.max), (1e-6, 1e-3));
        assert!(rel_close(d.mean, 500.5e-6, 1e-12));
        // Population stddev of 1..=1000 is ~288.67 µs.
        assert!(rel_close(d.stddev, 288.67e-6, 0.01), "{}", d.stddev);
        for (p, want) in [
            (50.0, 500e-6),
            (90.0, 900e-6),
            (99.0, 990e-6),
            (99.9, 999e-6),
        ] {
            let got = d.percentile(p).unwrap();
            assert!(rel_close(got, want, 1e-3), "p{p}: {got}");
        }
        assert_eq!(d.percentile(100.0), Some(1e-3));
        assert_eq!(d.percentile(42.0), None);
    }

    #[test]
    fn percentiles_clamped_to_observed_range() {
        // 123_456_789 ns lands in a bin whose highest equivalent is larger.
        let mut r = LatencyRecorder::new();
        (0..10).for_each(|_| r.record_ns(123_456_789));
        let d = r.to_data("x");
        for p in &d.percentiles {
            assert_eq!(p.value, 0.123456789, "p{}", p.p);
        }
        assert_eq!((d.min, d.max), (0.123456789, 0.123456789));
    }

    #[test]
    fn bucket_counts_are_exact() {
        let mut r = LatencyRecorder::with_buckets(10 * MS, 11);
        for ms in [5, 15, 105, 250] {
            r.record(Duration::from_millis(ms));
        }
        let d = r.to_data("frames");
        assert_eq!(d.buckets.len(), 11);
        let counts = bucket_counts(&d);
        assert_eq!(counts, [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!((d.buckets[1].low, d.buckets[1].high), (0.01, Some(0.02)));
        assert_eq!((d.buckets[10].low, d.buckets[10].high), (0.1, None));
        // Boundary values go to the upper bucket.
        let mut r = LatencyRecorder::with_buckets(10 * MS, 3);
        r.record_ns(10 * MS - 1);
        r.record_ns(10 * MS);
        let counts = bucket_counts(&r.to_data("b"));
        assert_eq!(counts, [1, 1, 0]);
    }

    /// The count of each bucket, in order.
    fn bucket_counts(d: &HistogramData) -> Vec<u64> {
        d.buckets.iter().map(|b| b.count).collect()
    }

    #[test]
    fn merge_combines_everything() {
        let mut a = LatencyRecorder::with_buckets(10 * MS, 11);
        let mut b = LatencyRecorder::with_buckets(10 * MS, 11);
        a.record_ns(5 * MS);
        b.record_ns(250 * MS);
        b.record_ns(15 * MS);
        a.merge(&b);
        let d = a.to_data("m");
        assert_eq!(d.count, 3);
        assert_eq!((d.min, d.max), (0.005, 0.25));
        assert!(rel_close(d.mean, 0.09, 1e-12));
        let counts = bucket_counts(&d);
        assert_eq!(counts, [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

        // An empty recorder adopts the bucket layout of what it merges.
        let mut total = LatencyRecorder::new();
        total.merge(&a);
        assert_eq!(total.to_data("t"), a.to_data("t"));
    }

    #[test]
    fn merge_rebins_different_layouts() {
        let mut a = LatencyRecorder::with_buckets(100 * MS, 2);
        let mut b = LatencyRecorder::with_buckets(10 * MS, 11);
        b.record_ns(5 * MS);
        b.record_ns(250 * MS);
        a.merge(&b);
        let counts = bucket_counts(&a.to_data("r"));
        assert_eq!(counts, [1, 1]);
    }

    #[test]
    fn count_above_threshold() {
        let r = one_to_thousand_us();
        assert_eq!(r.count_above_ns(900 * US), 100);
        assert_eq!(r.count_above_ns(0), 1000);
        assert_eq!(r.count_above_ns(1000 * US), 0);
        assert_eq!(r.count_above_ns(u64::MAX), 0);
        assert_eq!(LatencyRecorder::new().count_above_ns(5), 0);
    }

    #[test]
    fn empty_recorder() {
        let r = LatencyRecorder::with_buckets(MS, 4);
        assert!(r.is_empty());
        assert_eq!(r.len(), 0);
        let d = r.to_data("none");
        assert_eq!(
            (d.count, d.min, d.max, d.mean, d.stddev),
            (0, 0.0, 0.0, 0.0, 0.0)
        );
        assert!(d.percentiles.is_empty());
        assert_eq!(d.percentile(50.0), None);
        assert_eq!(d.buckets.len(), 4);
        assert!(LatencyRecorder::new().to_data("e").buckets.is_empty());
    }

    #[test]
    fn extreme_values_are_never_rejected() {
        let mut r = LatencyRecorder::new();
        r.record_ns(0);
        r.record_ns(u64::MAX);
        r.record(Duration::MAX);
        let d = r.to_data("x");
        assert_eq!(d.count, 3);
        assert_eq!(d.min, 0.0);
        assert_eq!(d.max, u64::MAX as f64 / 1e9);
        assert!(d.percentiles.iter().all(|p| p.value <= d.max));
    }

    #[test]
    fn serde_round_trip_skips_empty_buckets() {
        let d = one_to_thousand_us().to_data("rt");
        let json = serde_json::to_string(&d).unwrap();
        assert!(!json.contains("buckets"));
        let back: HistogramData = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }
}
