//! Verdicts on two stored runs that hold their false-verdict rate.
//!
//! A run's bootstrap CI describes the spread *within* the run; two runs of
//! the same build on the same machine also differ by drift *between* runs
//! (page cache, frequency, placement), which A/A runs showed to be the
//! larger part. So, before a run comparison claims "improved" or
//! "regressed":
//! - each side needs [`MIN_TRIALS`] trials: below that no order-statistic
//!   interval of a median reaches 95%, and a bootstrap of 3 samples
//!   cannot hold its coverage;
//! - the CI of the ratio is widened by a between-run noise floor: the
//!   spread of the run medians of the same point on the same machine
//!   (their standard deviation, scaled to a 95% prediction of the
//!   difference of two runs with Student's t for the runs it was learned
//!   from), or a stated default when too few runs are stored.
//!
//! `stats::compare` itself is unchanged: `tune` and `time` compare trials
//! interleaved in one run, where between-run drift does not apply.

use serde::Serialize;

use super::compare::{compare, fmt_pct, judge, Comparison, Verdict};
use super::summary::median;

/// Fewest finite trials per side for a 95% claim: with n ≥ 6 the extreme
/// order statistics bracket a median with at least 96.9% confidence
/// (1 − 2·0.5ⁿ); with 5 they reach only 93.8%.
pub(crate) const MIN_TRIALS: usize = 6;

/// Fewest other runs of the point to learn the floor from.
pub(crate) const MIN_HISTORY: usize = 4;

/// Most runs the floor is learned from (the newest): an old change of the
/// machine ages out of it.
pub(crate) const MAX_HISTORY: usize = 20;

/// The floor assumed with fewer runs stored: ±10%, the size of the drift
/// A/A runs showed for cached file reads (docs/calibration.md).
pub(crate) const DEFAULT_FLOOR: f64 = 0.10;

/// The between-run noise a comparison is widened by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct NoiseFloor {
    /// Relative half-width of a 95% interval of one run's median over
    /// another's (0.04 = ±4%).
    pub(crate) band: f64,
    /// Stored runs it was learned from; 0 when it is the default.
    pub(crate) runs: usize,
}

impl Default for NoiseFloor {
    fn default() -> Self {
        NoiseFloor {
            band: DEFAULT_FLOOR,
            runs: 0,
        }
    }
}

impl NoiseFloor {
    /// Learn the floor from the medians of other runs of the same point on
    /// the same machine; the default when fewer than [`MIN_HISTORY`] are
    /// usable or their median is not positive.
    pub(crate) fn learn(medians: &[f64]) -> NoiseFloor {
        let xs: Vec<f64> = medians.iter().copied().filter(|x| x.is_finite()).collect();
        let mid = median(&xs);
        if xs.len() < MIN_HISTORY || mid.is_nan() || mid <= 0.0 {
            return NoiseFloor::default();
        }
        // σ from successive differences of the medians in time order (von
        // Neumann's mean square successive difference), not a robust
        // spread: A/A runs showed drift with heavy tails (one run in six far
        // off) that a MAD of a few medians misses, while a real change in
        // the history is one step, one large difference, instead of
        // inflating every deviation from the mean. The difference of two
        // runs has σ√2; Student's t for k − 1 degrees of freedom covers
        // the estimate.
        let rel: Vec<f64> = xs.iter().map(|x| x / mid).collect();
        let var = rel.windows(2).map(|w| (w[1] - w[0]).powi(2)).sum::<f64>()
            / (2 * (rel.len() - 1)) as f64;
        NoiseFloor {
            band: t975(xs.len() - 1) * std::f64::consts::SQRT_2 * var.sqrt(),
            runs: xs.len(),
        }
    }

    /// What the floor is, in words.
    pub(crate) fn describe(&self) -> String {
        if self.runs > 0 {
            format!(
                "±{}% between-run noise learned from {} other runs of this point on this machine",
                pct(self.band),
                self.runs
            )
        } else {
            format!(
                "±{}% between-run noise assumed (fewer than {MIN_HISTORY} other runs of this \
                 point on this machine are stored)",
                pct(self.band)
            )
        }
    }
}

/// A run comparison's verdict and what it rests on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Calibrated {
    /// Ratio, the widened 95% CI the verdict is judged on, the verdict.
    #[serde(flatten)]
    pub(crate) comparison: Comparison,
    /// The bootstrap 95% CI of the ratio from the two runs' trials alone.
    pub(crate) run_ci95_low: f64,
    pub(crate) run_ci95_high: f64,
    pub(crate) noise_floor: NoiseFloor,
    /// What the verdict rests on, in words.
    pub(crate) basis: String,
}

/// Compare the trials of two runs (`noise` is the user's threshold, as in
/// [`compare`]); the verdict is judged on the run CI widened by `floor`.
pub(crate) fn compare_runs(
    base: &[f64],
    new: &[f64],
    higher_is_better: bool,
    noise: f64,
    floor: NoiseFloor,
) -> Calibrated {
    let mut c = compare(base, new, higher_is_better, noise);
    let (run_lo, run_hi) = (c.ci95_low, c.ci95_high);
    let n = |xs: &[f64]| xs.iter().filter(|x| x.is_finite()).count();
    let (nb, nn) = (n(base), n(new));
    let basis;
    if nb < MIN_TRIALS || nn < MIN_TRIALS {
        let few = if nb == nn {
            format!("n={nb}")
        } else {
            format!("n={nb} and {nn}")
        };
        basis = format!("too few trials for a 95% claim ({few}; {MIN_TRIALS} per run needed)");
        c.verdict = Verdict::Inconclusive;
        c.reason = basis.clone();
    } else if run_lo.is_finite() && run_hi.is_finite() {
        // The spreads add linearly on each side of the ratio, not in
        // quadrature: a floor learned from a few runs is itself uncertain,
        // and on the A/A drift of tests/aa_calibration.rs quadrature still
        // called ±4% drift a change (a wrong verdict is worse than none).
        let lo = c.ratio - ((c.ratio - run_lo) + floor.band);
        let hi = c.ratio + ((run_hi - c.ratio) + floor.band);
        let (verdict, why) = judge(c.ratio, lo, hi, higher_is_better, noise);
        basis = format!(
            "the run CI {}…{}× widened by the {}",
            sig3(run_lo),
            sig3(run_hi),
            floor.describe()
        );
        c.ci95_low = lo;
        c.ci95_high = hi;
        c.verdict = verdict;
        c.reason = format!("{why}; {basis}");
    } else {
        // Undefined ratio or all zeros: the plain comparison already says why.
        basis = c.reason.clone();
    }
    Calibrated {
        comparison: c,
        run_ci95_low: run_lo,
        run_ci95_high: run_hi,
        noise_floor: floor,
        basis,
    }
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 1.96,
    }
}

fn pct(frac: f64) -> String {
    fmt_pct(frac)
}

/// A ratio with three decimals.
fn sig3(v: f64) -> String {
    format!("{v:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn around(center: f64, spread: f64, n: usize) -> Vec<f64> {
        let pattern = [0.0, 0.6, -0.4, 1.0, -1.0, 0.2, -0.7, 0.9, -0.2, 0.4];
        (0..n)
            .map(|i| center * (1.0 + spread * pattern[i % pattern.len()]))
            .collect()
    }

    #[test]
    fn three_trials_make_no_claim() {
        let c = compare_runs(
            &around(100.0, 0.001, 3),
            &around(50.0, 0.001, 3),
            true,
            0.02,
            NoiseFloor::default(),
        );
        assert_eq!(c.comparison.verdict, Verdict::Inconclusive);
        assert!(c.basis.contains("too few trials") && c.basis.contains("n=3"));
    }

    #[test]
    fn the_floor_widens_the_interval() {
        // 1% spread within each run, 4% apart: significant within the runs,
        // inside a ±10% floor.
        let (b, n) = (around(100.0, 0.01, 10), around(104.0, 0.01, 10));
        assert_eq!(compare(&b, &n, true, 0.02).verdict, Verdict::Improved);
        let c = compare_runs(&b, &n, true, 0.02, NoiseFloor::default());
        assert_ne!(c.comparison.verdict, Verdict::Improved, "{c:?}");
        assert!(
            c.comparison.ci95_low < 0.96 && c.run_ci95_low > 1.0,
            "{c:?}"
        );
        assert!(
            c.basis.contains("±10% between-run noise assumed"),
            "{}",
            c.basis
        );
        // A 20% shift still stands out.
        let c = compare_runs(
            &b,
            &around(80.0, 0.01, 10),
            true,
            0.02,
            NoiseFloor::default(),
        );
        assert_eq!(c.comparison.verdict, Verdict::Regressed);
    }

    #[test]
    fn learned_floor_follows_the_spread_of_run_medians() {
        let quiet = NoiseFloor::learn(&[100.0, 100.5, 99.5, 100.2, 99.8, 100.0]);
        let loud = NoiseFloor::learn(&[100.0, 110.0, 90.0, 105.0, 95.0, 100.0]);
        assert_eq!(quiet.runs, 6);
        assert!(quiet.band < 0.02 && loud.band > 0.1, "{quiet:?} {loud:?}");
        assert!(quiet.describe().contains("learned from 6 other runs"));
        // Too few runs, or a zero median: the default.
        assert_eq!(NoiseFloor::learn(&[1.0, 2.0, 3.0]), NoiseFloor::default());
        assert_eq!(NoiseFloor::learn(&[0.0; 6]), NoiseFloor::default());
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t975(4), 2.776);
        assert_eq!(t975(100), 1.96);
        assert!(t975(0).is_infinite());
    }
}
