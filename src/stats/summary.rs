//! Per-metric summaries: robust location, spread, a bootstrap CI of the
//! median and MAD-based outlier labels.
//!
//! Non-finite samples (NaN, ±inf) are ignored everywhere so a single broken
//! trial can never panic the runner or poison a summary.

use rand::distributions::{Distribution, Uniform};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// Bootstrap resamples used by [`summarize`]; 2000 keeps the 2.5/97.5
/// percentiles stable to well under 1% of the CI width for n <= 30.
pub(crate) const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Fixed seed so the same samples always give the same CI (reproducible
/// reports and stable stopping decisions).
pub(crate) const BOOTSTRAP_SEED: u64 = 0x7475_6e65_6c61_6221; // "tunelab!"

/// Modified z-score above which a sample is labelled an outlier
/// (Iglewicz & Hoaglin).
const OUTLIER_Z: f64 = 3.5;

/// Summary of one metric's samples. See [`summarize`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub(crate) n: usize,
    pub(crate) median: f64,
    pub(crate) mean: f64,
    pub(crate) trimmed_mean: f64,
    pub(crate) stddev: f64,
    pub(crate) cv: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) ci95_low: f64,
    pub(crate) ci95_high: f64,
    /// Indices (into the samples given to [`summarize`]) labelled outliers;
    /// they are kept in every statistic, only labelled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) outliers: Vec<usize>,
    /// The first trial is an outlier: often a sign of insufficient warm-up.
    #[serde(default)]
    pub(crate) first_is_outlier: bool,
    /// Why the measurement loop stopped; left `None` by [`summarize`].
    /// Stored as the same strings as before it was typed ("precision", …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

/// Why repetition stopped, stored in every metric summary. It lives here,
/// beside [`Summary`], so the ground floor owns the stored form; the loop
/// that decides it is `engine::measure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every metric's 95% CI of the median is within the precision target.
    Precision,
    /// The maximum number of trials (or rounds) was reached first.
    MaxTrials,
    /// The time budget ran out first.
    Budget,
    /// A fixed number of trials was asked for (`--trials N`, `--runs N`).
    Fixed,
    /// SIGINT/SIGTERM/SIGHUP arrived; the trials before it are kept.
    Interrupted,
    /// A trial failed; the trials before it are kept.
    Failed,
    /// A reason this version does not know (a run stored by a newer one):
    /// the run still loads.
    #[serde(other)]
    Unknown,
}

impl StopReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StopReason::Precision => "precision",
            StopReason::MaxTrials => "max_trials",
            StopReason::Budget => "budget",
            StopReason::Fixed => "fixed",
            StopReason::Interrupted => "interrupted",
            StopReason::Failed => "failed",
            StopReason::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Summary {
    /// The stop reason as shown in tables and CSV ("" when none was set).
    pub(crate) fn stop_reason_str(&self) -> &'static str {
        self.stop_reason.map_or("", StopReason::as_str)
    }
}

impl Summary {
    /// The summary of no samples: n = 0 and every statistic NaN.
    fn empty() -> Self {
        let nan = f64::NAN;
        Summary {
            n: 0,
            median: nan,
            mean: nan,
            trimmed_mean: nan,
            stddev: nan,
            cv: nan,
            min: nan,
            max: nan,
            ci95_low: nan,
            ci95_high: nan,
            outliers: Vec::new(),
            first_is_outlier: false,
            stop_reason: None,
        }
    }
}

/// Summarise `samples`, ignoring non-finite values (`n` counts finite ones).
///
/// - `median`: middle value, mean of the middle two for even n;
/// - `trimmed_mean`: mean without one lowest and one highest sample when
///   n >= 3 (the classic "drop best and worst"), else the mean;
/// - `stddev`: sample standard deviation (n - 1), 0 for n < 2;
/// - `cv`: stddev / |mean|, 0 when the mean is 0;
/// - `ci95_low..ci95_high`: percentile-bootstrap 95% CI of the median with
///   [`BOOTSTRAP_RESAMPLES`] resamples and a fixed seed (deterministic);
/// - `outliers`: see [`mad_outliers`].
///
/// Empty (or all non-finite) input gives n = 0 and NaN statistics.
pub fn summarize(samples: &[f64]) -> Summary {
    let xs = finite(samples);
    if xs.is_empty() {
        return Summary::empty();
    }
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let stddev = sample_stddev(&xs, mean);
    let (ci95_low, ci95_high) = median_ci95(&xs, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
    let outliers = mad_outliers(samples);
    Summary {
        n,
        median: median(&xs),
        mean,
        trimmed_mean: trimmed_mean(&xs, mean, min, max),
        stddev,
        cv: if mean == 0.0 {
            0.0
        } else {
            stddev / mean.abs()
        },
        min,
        max,
        ci95_low,
        ci95_high,
        first_is_outlier: outliers.first() == Some(&0),
        outliers,
        stop_reason: None,
    }
}

/// Median of the finite values of `xs`; NaN when there are none.
pub fn median(xs: &[f64]) -> f64 {
    let mut buf = finite(xs);
    median_in_place(&mut buf)
}

/// Percentile-bootstrap 95% CI of the median of the finite values of `xs`.
///
/// Deterministic for a given `seed`. One value gives `(x, x)`, none gives
/// NaNs. The bounds always lie within `[min, max]` of the data.
pub(crate) fn median_ci95(xs: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    let xs = finite(xs);
    match xs.len() {
        0 => return (f64::NAN, f64::NAN),
        1 => return (xs[0], xs[0]),
        _ => {}
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let pick = Uniform::new(0, xs.len());
    // One scratch buffer reused for every resample: no per-resample allocation.
    let mut buf = vec![0.0; xs.len()];
    let mut medians: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            buf.iter_mut().for_each(|b| *b = xs[pick.sample(&mut rng)]);
            median_in_place(&mut buf)
        })
        .collect();
    medians.sort_unstable_by(f64::total_cmp);
    (
        quantile_sorted(&medians, 0.025),
        quantile_sorted(&medians, 0.975),
    )
}

/// Indices of outliers among `xs` (indices into `xs`; non-finite values are
/// skipped and never labelled).
///
/// A value is an outlier when its modified z-score
/// `|x - median| / (1.4826 * MAD)` exceeds 3.5, MAD being the median absolute
/// deviation from the median. When MAD is 0 (more than half the values are
/// identical) the mean absolute deviation is used instead, scaled by
/// 1.2533 (the usual consistency constant); when that is 0 too, all values
/// are equal and there are no outliers.
pub(crate) fn mad_outliers(xs: &[f64]) -> Vec<usize> {
    let vals = finite(xs);
    if vals.len() < 3 {
        return Vec::new();
    }
    let med = median(&vals);
    let mut dev: Vec<f64> = vals.iter().map(|x| (x - med).abs()).collect();
    let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
    let mad = median_in_place(&mut dev);
    let scale = if mad > 0.0 {
        1.4826 * mad
    } else {
        1.253314 * mean_ad
    };
    if scale <= 0.0 {
        return Vec::new();
    }
    xs.iter()
        .enumerate()
        .filter(|(_, x)| x.is_finite() && (*x - med).abs() / scale > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

/// Half-width of the median's 95% CI relative to the median: the runner's
/// precision target. INFINITY when it is undefined (n < 2 or median 0).
pub(crate) fn relative_half_width(s: &Summary) -> f64 {
    if s.n < 2 || s.median == 0.0 || !s.median.is_finite() {
        return f64::INFINITY;
    }
    let w = (s.ci95_high - s.ci95_low) / 2.0 / s.median.abs();
    if w.is_nan() {
        f64::INFINITY
    } else {
        w
    }
}

/// The finite values of `xs`, in order.
fn finite(xs: &[f64]) -> Vec<f64> {
    xs.iter().copied().filter(|x| x.is_finite()).collect()
}

/// Median of `buf` (finite values), reordering it; NaN when empty.
/// Selection is O(n), which matters inside the bootstrap loop.
pub(crate) fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    if n == 0 {
        return f64::NAN;
    }
    let mid = n / 2;
    let (lower, m, _) = buf.select_nth_unstable_by(mid, f64::total_cmp);
    let hi = *m;
    if n % 2 == 1 {
        return hi;
    }
    // Even n: the lower middle is the largest value left of `mid`.
    let lo = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo + hi) / 2.0
}

/// Linear-interpolated quantile `q` in [0, 1] of sorted, non-empty `xs`.
pub(crate) fn quantile_sorted(xs: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (xs.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    match xs.get(i + 1) {
        Some(next) => xs[i] + (next - xs[i]) * frac,
        None => xs[i],
    }
}

fn sample_stddev(xs: &[f64], mean: f64) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    (ss / (xs.len() - 1) as f64).sqrt()
}

fn trimmed_mean(xs: &[f64], mean: f64, min: f64, max: f64) -> f64 {
    let n = xs.len();
    if n < 3 {
        return mean;
    }
    (mean * n as f64 - min - max) / (n - 2) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn known_small_set_with_outlier() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0, 100.0]);
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mean, 22.0);
        assert_eq!(s.trimmed_mean, 3.0);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        // Deviations from 22: -21,-20,-19,-18,78 -> SS = 7610, /4 = 1902.5.
        assert!(close(s.stddev, 1902.5_f64.sqrt()));
        assert!(close(s.cv, 1902.5_f64.sqrt() / 22.0));
        assert_eq!(s.outliers, vec![4]);
        assert!(!s.first_is_outlier);
        assert!(s.stop_reason.is_none());
    }

    #[test]
    fn even_length_median() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[10.0, 20.0]), 15.0);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn trimmed_mean_drops_one_each_side() {
        // Drop 1 and 10 -> mean of 2,2,3 = 7/3.
        let s = summarize(&[10.0, 2.0, 1.0, 2.0, 3.0]);
        assert!(close(s.trimmed_mean, 7.0 / 3.0));
        // n < 3: plain mean.
        assert_eq!(summarize(&[1.0, 3.0]).trimmed_mean, 2.0);
    }

    #[test]
    fn ci_contains_median_and_is_within_range() {
        let xs = [9.8, 10.1, 10.0, 9.9, 10.3, 10.2, 9.7, 10.0, 10.4, 9.6];
        let s = summarize(&xs);
        assert!(s.ci95_low <= s.median && s.median <= s.ci95_high);
        assert!(s.min <= s.ci95_low && s.ci95_high <= s.max);
        assert!(s.ci95_low < s.ci95_high);
    }

    #[test]
    fn ci_is_deterministic() {
        let xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0];
        assert_eq!(summarize(&xs), summarize(&xs));
        assert_eq!(median_ci95(&xs, 500, 7), median_ci95(&xs, 500, 7));
    }

    #[test]
    fn single_sample() {
        let s = summarize(&[5.0]);
        assert_eq!((s.n, s.median, s.mean, s.trimmed_mean), (1, 5.0, 5.0, 5.0));
        assert_eq!((s.stddev, s.ci95_low, s.ci95_high), (0.0, 5.0, 5.0));
        assert!(s.outliers.is_empty());
        assert_eq!(relative_half_width(&s), f64::INFINITY);
    }

    #[test]
    fn empty_and_non_finite_never_panic() {
        let s = summarize(&[]);
        assert_eq!(s.n, 0);
        assert!(s.median.is_nan() && s.mean.is_nan() && s.ci95_low.is_nan());
        assert_eq!(relative_half_width(&s), f64::INFINITY);
        assert_eq!(summarize(&[f64::NAN, f64::INFINITY]).n, 0);

        let s = summarize(&[f64::NAN, 1.0, 2.0, f64::NEG_INFINITY, 3.0]);
        assert_eq!((s.n, s.median, s.mean), (3, 2.0, 2.0));
        assert!(s.ci95_low.is_finite() && s.ci95_high.is_finite());
    }

    #[test]
    fn outlier_indices_refer_to_original_samples() {
        let xs = [f64::NAN, 1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!(mad_outliers(&xs), vec![5]);
        assert!(summarize(&[100.0, 1.0, 2.0, 3.0, 4.0]).first_is_outlier);
    }

    #[test]
    fn zero_mad_falls_back_to_mean_absolute_deviation() {
        // MAD = 0; mean abs dev = 9/6 = 1.5, scale 1.88; z(10) = 4.79 > 3.5.
        assert_eq!(mad_outliers(&[1.0, 1.0, 1.0, 1.0, 1.0, 10.0]), vec![5]);
        // All equal: no spread at all, no outliers.
        assert!(mad_outliers(&[2.0; 8]).is_empty());
    }

    #[test]
    fn zero_mean_gives_zero_cv() {
        let s = summarize(&[-1.0, 0.0, 1.0]);
        assert_eq!(s.cv, 0.0);
        assert_eq!(relative_half_width(&s), f64::INFINITY);
    }

    #[test]
    fn relative_half_width_tight_vs_spread() {
        let tight = [100.0, 100.1, 99.9, 100.05, 99.95, 100.02, 99.98];
        let spread = [50.0, 150.0, 80.0, 120.0, 60.0, 140.0, 100.0];
        let t = relative_half_width(&summarize(&tight));
        let w = relative_half_width(&summarize(&spread));
        assert!(t < 0.002, "tight {t}");
        assert!(w > 0.1, "spread {w}");
    }

    #[test]
    fn quantile_interpolates() {
        let xs = [0.0, 10.0, 20.0];
        assert_eq!(quantile_sorted(&xs, 0.0), 0.0);
        assert_eq!(quantile_sorted(&xs, 0.25), 5.0);
        assert_eq!(quantile_sorted(&xs, 1.0), 20.0);
    }

    #[test]
    fn property_loop_invariants() {
        // Cheap pseudo-random property check (no proptest needed).
        let mut rng = SmallRng::seed_from_u64(1);
        let len = Uniform::new(1, 31);
        let val = Uniform::new(-1e3, 1e3);
        for _ in 0..200 {
            let xs: Vec<f64> = (0..len.sample(&mut rng))
                .map(|_| val.sample(&mut rng))
                .collect();
            let s = summarize(&xs);
            assert_eq!(s.n, xs.len());
            assert!(s.min <= s.median && s.median <= s.max);
            assert!(s.min <= s.trimmed_mean && s.trimmed_mean <= s.max);
            assert!(s.min <= s.ci95_low && s.ci95_low <= s.ci95_high);
            assert!(s.ci95_high <= s.max);
            assert!(s.stddev >= 0.0);
            let mut sorted = xs.clone();
            sorted.sort_by(f64::total_cmp);
            assert!(close(s.median, quantile_sorted(&sorted, 0.5)));
        }
    }

    /// Runs stored before the stop reason was typed hold plain strings:
    /// they load into the same reasons and are written back unchanged.
    #[test]
    fn stop_reasons_keep_their_stored_strings() {
        let base = serde_json::to_value(summarize(&[1.0, 2.0, 3.0])).unwrap();
        assert!(base.get("stop_reason").is_none(), "none set: not written");
        for (text, want) in [
            ("precision", StopReason::Precision),
            ("max_trials", StopReason::MaxTrials),
            ("budget", StopReason::Budget),
            ("fixed", StopReason::Fixed),
            ("interrupted", StopReason::Interrupted),
            ("failed", StopReason::Failed),
        ] {
            let mut v = base.clone();
            v["stop_reason"] = text.into();
            let s: Summary = serde_json::from_value(v).unwrap();
            assert_eq!(s.stop_reason, Some(want));
            assert_eq!(s.stop_reason_str(), text);
            let back = serde_json::to_value(&s).unwrap();
            assert_eq!(back["stop_reason"], text);
        }
        // A reason from a newer version does not stop the run loading.
        let mut v = base.clone();
        v["stop_reason"] = "converged".into();
        let s: Summary = serde_json::from_value(v).unwrap();
        assert_eq!(s.stop_reason, Some(StopReason::Unknown));
        let s: Summary = serde_json::from_value(base).unwrap();
        assert_eq!(s.stop_reason, None);
    }
}
