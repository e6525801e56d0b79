//! A/B comparison of one metric: ratio of medians with a bootstrap CI and a
//! verdict that respects a noise threshold.

use std::fmt;

use rand::distributions::{Distribution, Uniform};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use super::summary::{
    median, median_in_place, quantile_sorted, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED,
};

/// Fewer finite samples than this on either side cannot support a verdict.
const MIN_SAMPLES: usize = 3;

/// Outcome of comparing a new result against a base.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Improved,
    Regressed,
    NoChange,
    Inconclusive,
}

impl Verdict {
    /// Human wording, as shown in tables.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Result of [`compare`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Comparison {
    /// median(new) / median(base).
    pub(crate) ratio: f64,
    /// Bootstrap 95% CI of the ratio.
    pub(crate) ci95_low: f64,
    pub(crate) ci95_high: f64,
    /// (ratio - 1) * 100.
    pub(crate) change_pct: f64,
    pub(crate) verdict: Verdict,
    /// One short sentence explaining the verdict.
    pub(crate) reason: String,
}

/// Compare `new` against `base` (non-finite samples ignored).
///
/// `ratio` = median(new) / median(base); its 95% CI comes from a percentile
/// bootstrap resampling both sides independently (2000 resamples, fixed
/// seed, so deterministic). `noise` is the relative threshold (0.02 = ±2%).
///
/// Verdict rules, in order:
/// 1. fewer than 3 finite samples on either side → `Inconclusive`;
/// 2. base median 0 (ratio undefined) → `Inconclusive`;
/// 3. CI entirely inside `[1 - noise, 1 + noise]` → `NoChange`;
/// 4. CI excludes 1 and the ratio is outside the noise band → `Improved` or
///    `Regressed`: new is larger when the CI is above 1, which is an
///    improvement iff `higher_is_better`;
/// 5. CI excludes 1 but the ratio is inside the band → `NoChange`
///    (significant but smaller than the threshold);
/// 6. otherwise (CI straddles 1 and reaches beyond the band) → `Inconclusive`.
pub(crate) fn compare(base: &[f64], new: &[f64], higher_is_better: bool, noise: f64) -> Comparison {
    let noise = if noise.is_finite() { noise.abs() } else { 0.0 };
    let base: Vec<f64> = base.iter().copied().filter(|x| x.is_finite()).collect();
    let new: Vec<f64> = new.iter().copied().filter(|x| x.is_finite()).collect();
    let (mb, mn) = (median(&base), median(&new));
    // Equal medians are a ratio of 1 even when both are zero (a run
    // compared with itself on a count that stayed 0): never NaN.
    let ratio = if mb == mn && mb.is_finite() {
        1.0
    } else {
        mn / mb
    };
    if base.len() < MIN_SAMPLES || new.len() < MIN_SAMPLES {
        let reason = format!(
            "need at least {MIN_SAMPLES} samples on each side (base has {}, new has {})",
            base.len(),
            new.len()
        );
        return inconclusive(ratio, reason);
    }
    if mb == 0.0 && mn == 0.0 && base.iter().chain(&new).all(|x| *x == 0.0) {
        return Comparison {
            ratio,
            ci95_low: 1.0,
            ci95_high: 1.0,
            change_pct: 0.0,
            verdict: Verdict::NoChange,
            reason: "every sample on both sides is 0".into(),
        };
    }
    if mb == 0.0 {
        return inconclusive(
            ratio,
            "base median is zero, so the ratio is undefined".into(),
        );
    }
    let Some((lo, hi)) = ratio_ci95(&base, &new) else {
        return inconclusive(ratio, "bootstrap ratios were all undefined".into());
    };
    let (verdict, reason) = judge(ratio, lo, hi, higher_is_better, noise);
    Comparison {
        ratio,
        ci95_low: lo,
        ci95_high: hi,
        change_pct: (ratio - 1.0) * 100.0,
        verdict,
        reason,
    }
}

/// Apply rules 3–6 of [`compare`].
pub(super) fn judge(
    ratio: f64,
    lo: f64,
    hi: f64,
    higher_is_better: bool,
    noise: f64,
) -> (Verdict, String) {
    let band = format!("±{}%", fmt_pct(noise));
    if lo >= 1.0 - noise && hi <= 1.0 + noise {
        return (
            Verdict::NoChange,
            format!("the 95% CI lies within the {band} noise threshold"),
        );
    }
    let up = lo > 1.0;
    if !(up || hi < 1.0) {
        return (
            Verdict::Inconclusive,
            format!("the 95% CI includes no change but reaches beyond the {band} noise threshold"),
        );
    }
    let beyond = if up {
        ratio > 1.0 + noise
    } else {
        ratio < 1.0 - noise
    };
    if !beyond {
        return (
            Verdict::NoChange,
            format!("significant but smaller than the {band} noise threshold"),
        );
    }
    let (verdict, word) = if up == higher_is_better {
        (Verdict::Improved, "better")
    } else {
        (Verdict::Regressed, "worse")
    };
    let pct = fmt_pct((ratio - 1.0).abs());
    (
        verdict,
        format!("{pct}% {word}, beyond the {band} noise threshold"),
    )
}

/// Percentile-bootstrap 95% CI of median(new)/median(base); None when no
/// resample gave a finite ratio (e.g. base resample medians all zero).
fn ratio_ci95(base: &[f64], new: &[f64]) -> Option<(f64, f64)> {
    let mut rng = SmallRng::seed_from_u64(BOOTSTRAP_SEED);
    let (pick_b, pick_n) = (Uniform::new(0, base.len()), Uniform::new(0, new.len()));
    // Scratch buffers reused across resamples: no per-resample allocation.
    let (mut bb, mut nb) = (vec![0.0; base.len()], vec![0.0; new.len()]);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        bb.iter_mut()
            .for_each(|x| *x = base[pick_b.sample(&mut rng)]);
        nb.iter_mut()
            .for_each(|x| *x = new[pick_n.sample(&mut rng)]);
        let r = median_in_place(&mut nb) / median_in_place(&mut bb);
        if r.is_finite() {
            ratios.push(r);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_unstable_by(f64::total_cmp);
    Some((
        quantile_sorted(&ratios, 0.025),
        quantile_sorted(&ratios, 0.975),
    ))
}

fn inconclusive(ratio: f64, reason: String) -> Comparison {
    Comparison {
        ratio,
        ci95_low: f64::NAN,
        ci95_high: f64::NAN,
        change_pct: (ratio - 1.0) * 100.0,
        verdict: Verdict::Inconclusive,
        reason,
    }
}

/// A fraction as a short percentage: 0.02 → "2", 0.125 → "12.5".
pub(crate) fn fmt_pct(frac: f64) -> String {
    let s = format!("{:.1}", frac * 100.0);
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_medians_never_give_nan() {
        let z = [0.0; 5];
        let c = compare(&z, &z, true, 0.02);
        assert_eq!(c.ratio, 1.0);
        assert_eq!(c.verdict, Verdict::NoChange);
        assert!(c.ci95_low.is_finite() && c.ci95_high.is_finite());
        // Medians zero but not every sample: the ratio is still 1, not NaN.
        let c = compare(&[0.0, 0.0, 0.0, 1.0], &[0.0, 0.0, 0.0, 2.0], true, 0.02);
        assert_eq!(c.ratio, 1.0);
        assert!(!c.change_pct.is_nan());
    }

    /// Deterministic jittered samples around `center` (±`spread` relative).
    fn around(center: f64, spread: f64, n: usize) -> Vec<f64> {
        let pattern = [0.0, 0.6, -0.4, 1.0, -1.0, 0.2, -0.7, 0.9, -0.2, 0.4];
        (0..n)
            .map(|i| center * (1.0 + spread * pattern[i % pattern.len()]))
            .collect()
    }

    /// A base around 100 and a new set 20% lower, each with 1% spread.
    fn twenty_percent_lower() -> (Vec<f64>, Vec<f64>) {
        (around(100.0, 0.01, 10), around(80.0, 0.01, 10))
    }

    #[test]
    fn twenty_percent_slower_throughput_regressed() {
        let (base, new) = twenty_percent_lower();
        let c = compare(&base, &new, true, 0.02);
        assert_eq!(c.verdict, Verdict::Regressed, "{}", c.reason);
        assert!((c.ratio - 0.8).abs() < 1e-9);
        assert!((c.change_pct + 20.0).abs() < 1e-6);
        assert!(c.ci95_low <= c.ratio && c.ratio <= c.ci95_high);
        assert!(c.ci95_high < 1.0);
    }

    #[test]
    fn lower_is_better_flips_the_verdict() {
        let (base, new) = twenty_percent_lower();
        assert_eq!(compare(&base, &new, false, 0.02).verdict, Verdict::Improved);
        assert_eq!(
            compare(&new, &base, false, 0.02).verdict,
            Verdict::Regressed
        );
        assert_eq!(compare(&new, &base, true, 0.02).verdict, Verdict::Improved);
    }

    #[test]
    fn identical_sets_no_change() {
        let xs = around(50.0, 0.005, 8);
        let c = compare(&xs, &xs, true, 0.02);
        assert_eq!(c.verdict, Verdict::NoChange, "{}", c.reason);
        assert_eq!(c.ratio, 1.0);
        assert_eq!(c.change_pct, 0.0);
    }

    #[test]
    fn half_percent_difference_is_within_noise() {
        let base = around(100.0, 0.001, 10);
        let new = around(100.5, 0.001, 10);
        let c = compare(&base, &new, true, 0.02);
        assert_eq!(c.verdict, Verdict::NoChange, "{}", c.reason);
        assert!(c.reason.contains("±2%"), "{}", c.reason);
    }

    #[test]
    fn significant_but_below_threshold() {
        // Ratio 1.015 with a CI that excludes 1 but pokes past 1.02.
        let base = around(100.0, 0.002, 10);
        let new = around(101.5, 0.02, 10);
        let c = compare(&base, &new, true, 0.02);
        assert!(c.ci95_low > 1.0 && c.ci95_high > 1.02, "{c:?}");
        assert_eq!(c.verdict, Verdict::NoChange);
        assert!(
            c.reason.starts_with("significant but smaller"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn straddling_wide_ci_is_inconclusive() {
        let base = [50.0, 150.0, 80.0, 120.0, 100.0];
        let new = [60.0, 140.0, 90.0, 130.0, 101.0];
        let c = compare(&base, &new, true, 0.02);
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(c.ci95_low < 1.0 && c.ci95_high > 1.0);
    }

    #[test]
    fn too_few_samples_inconclusive() {
        let c = compare(&[1.0, 1.1], &[2.0, 2.1, 2.2], true, 0.02);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.reason.contains("base has 2"), "{}", c.reason);
        // Non-finite samples do not count.
        let c = compare(
            &[1.0, f64::NAN, 1.1, 1.0],
            &[2.0, 2.1, f64::INFINITY],
            true,
            0.02,
        );
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn zero_base_median_inconclusive() {
        let c = compare(&[0.0, 0.0, 0.0, 1.0], &[1.0, 1.0, 1.0], true, 0.02);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.reason.contains("zero"));
    }

    #[test]
    fn deterministic() {
        let base = around(10.0, 0.05, 7);
        let new = around(10.3, 0.05, 7);
        let (a, b) = (
            compare(&base, &new, true, 0.02),
            compare(&base, &new, true, 0.02),
        );
        assert_eq!((a.ci95_low, a.ci95_high), (b.ci95_low, b.ci95_high));
    }

    #[test]
    fn verdict_strings_and_serde() {
        assert_eq!(Verdict::NoChange.to_string(), "no change");
        assert_eq!(Verdict::Improved.as_str(), "improved");
        assert_eq!(
            serde_json::to_string(&Verdict::NoChange).unwrap(),
            "\"no_change\""
        );
        let v: Verdict = serde_json::from_str("\"regressed\"").unwrap();
        assert_eq!(v, Verdict::Regressed);
    }

    #[test]
    fn pct_formatting() {
        assert_eq!(fmt_pct(0.02), "2");
        assert_eq!(fmt_pct(0.125), "12.5");
    }
}
