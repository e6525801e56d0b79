//! The automatic warm-up rule: leading measured trials that are outliers
//! against the trials after them are warm-up, moved out of the samples by
//! the loop ([`super`]) and replaced by further trials.

use std::collections::BTreeMap;

use crate::stats;

/// Most measured trials the loop discards as warm-up; beyond that the
/// point is unstable, not warming up, and every trial is kept.
pub(crate) const AUTO_WARMUP_CAP: usize = 3;
/// A leading trial is only judged against at least this many later ones:
/// the MAD of fewer values is too rough to call anything an outlier.
pub(crate) const AUTO_WARMUP_MIN_REST: usize = 4;

/// Leading measured trials judged to be warm-up, and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Discard {
    pub(crate) count: usize,
    pub(crate) reason: String,
}

/// Trial k (k = 0, 1, … up to [`AUTO_WARMUP_CAP`]) is warm-up when, in any
/// metric, it is an outlier against the trials after it by the same MAD rule
/// the summaries use (modified z-score above 3.5, MAD scaled by 1.4826),
/// judged only with at least [`AUTO_WARMUP_MIN_REST`] later trials and a
/// non-zero MAD, and lies outside the range of those later trials. The
/// first trial that is not an outlier ends the warm-up.
/// `so_far` (the previous decision) is kept: the search goes on after it.
pub(crate) fn leading_warmup(
    samples: &BTreeMap<&'static str, Vec<f64>>,
    so_far: Discard,
) -> Discard {
    let mut out = so_far;
    let mut reasons: Vec<String> = Vec::new();
    if !out.reason.is_empty() {
        reasons.push(std::mem::take(&mut out.reason));
    }
    'trials: for k in out.count..AUTO_WARMUP_CAP {
        for (name, v) in samples {
            let Some(&x) = v.get(k) else { continue };
            let rest: Vec<f64> = v[k + 1..]
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .collect();
            if !x.is_finite() || rest.len() < AUTO_WARMUP_MIN_REST {
                continue;
            }
            let med = stats::median(&rest);
            let dev: Vec<f64> = rest.iter().map(|r| (r - med).abs()).collect();
            let mad = stats::median(&dev);
            if mad <= 0.0 || med == 0.0 {
                continue;
            }
            let z = (x - med).abs() / (1.4826 * mad);
            // ... and more extreme than every later trial: with 4-5 tight
            // later values the MAD alone would call a trial 10% off warm-up.
            let (lo, hi) = rest
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                    (l.min(*v), h.max(*v))
                });
            if z > 3.5 && (x < lo || x > hi) {
                reasons.push(format!(
                    "trial {}'s {name} was {:.2}× the median of the {} trials after it \
                     (modified z-score {z:.1} > 3.5)",
                    k + 1,
                    x / med,
                    rest.len()
                ));
                out.count = k + 1;
                continue 'trials;
            }
        }
        break;
    }
    out.reason = reasons.join("; ");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_detection_is_capped_and_needs_evidence() {
        let m = |v: &[f64]| {
            let mut b = BTreeMap::new();
            b.insert("t", v.to_vec());
            leading_warmup(&b, Discard::default()).count
        };
        // Too few later trials to judge.
        assert_eq!(m(&[100.0, 10.0, 10.1, 9.9]), 0);
        assert_eq!(m(&[100.0, 10.0, 10.1, 9.9, 10.2]), 1);
        // Two cold trials.
        assert_eq!(m(&[100.0, 50.0, 10.0, 10.1, 9.9, 10.2]), 2);
        // A slow drift over many trials is not warm-up beyond the cap.
        assert_eq!(
            m(&[90.0, 80.0, 70.0, 60.0, 10.0, 10.1, 9.9, 10.2, 10.0]),
            AUTO_WARMUP_CAP
        );
        // A faster first trial is a transient too (e.g. writes before the
        // dirty limit).
        assert_eq!(m(&[2.0, 10.0, 10.1, 9.9, 10.2]), 1);
        // Identical later values (a count, a quantised time): no spread to
        // judge against, nothing discarded.
        assert_eq!(m(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 0);
        // An ordinary first trial ends the search.
        assert_eq!(m(&[10.05, 100.0, 10.0, 10.1, 9.9, 10.2]), 0);
        // Tight later trials make the MAD tiny: a first trial inside their
        // range is not warm-up even with a large modified z-score.
        assert_eq!(m(&[11.0, 10.0, 10.01, 10.02, 12.0, 10.03]), 0);
        // A decision stands when later trials would have made the first
        // one look ordinary: the search resumes after it.
        let mut b = BTreeMap::new();
        b.insert("t", vec![13.0, 10.0, 10.1, 9.9, 10.2]);
        let first = leading_warmup(&b, Discard::default());
        assert_eq!(first.count, 1);
        b.insert(
            "t",
            vec![13.0, 10.0, 10.1, 9.9, 10.2, 12.5, 13.5, 11.8, 12.9],
        );
        assert_eq!(leading_warmup(&b, Discard::default()).count, 0);
        let again = leading_warmup(&b, first.clone());
        assert_eq!(again, first);
    }
}
