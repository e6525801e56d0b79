//! The sweep's verdict: every swept value against the live value, round by
//! round. A tune run measures the live value as one arm, interleaved with
//! the others in shuffled rounds, so round k of a value and round k of the
//! live arm ran side by side: their ratio cancels drift. Under "no effect"
//! the random order within a round makes the two trials exchangeable, so
//! the value wins a round with probability ½ — the sign test is exact
//! without any assumption on the noise. Several values are several tests:
//! Holm's step-down keeps the chance of any false "better" at 2.5% (the
//! better side of a two-sided 95% claim), and a claim also needs the median
//! per-round ratio beyond the noise threshold.

use serde::Serialize;

use crate::model::run::{MetricResult, PointResult};
use crate::model::Better;
use crate::{Error, Result};

/// Environment key: the value that was live when the sweep began, measured
/// as one of its arms (absent in runs made before tune measured it).
pub(crate) const ENV_LIVE: &str = "tune.live";

/// Two-sided family-wise error of a claim: "95%".
const ALPHA: f64 = 0.05;

/// One value against the live value.
#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    pub(crate) value: String,
    /// Rounds both arms finished.
    pub(crate) rounds: usize,
    /// Rounds the value did better / worse than the live value (ties drop).
    pub(crate) wins: usize,
    pub(crate) losses: usize,
    /// Median over rounds of value / live (the metric's own direction).
    pub ratio: f64,
    /// Order-statistic CI of that median at the level this value was tested.
    pub ci95_low: f64,
    pub(crate) ci95_high: f64,
    /// One-sided sign-test p-value of "better", and the Holm level it faced.
    pub(crate) p: f64,
    pub(crate) level: f64,
    /// Better than the live value: significant at its level and beyond noise.
    pub better: bool,
    /// The trials of either arm the validity guard flagged (other load
    /// during the sweep): a verdict on them is suspect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suspect: Option<String>,
}

/// The sweep's conclusion for one metric, against the live value.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub(crate) metric: String,
    pub(crate) live: String,
    /// The best value significantly better than the live one, if any.
    pub best: Option<String>,
    /// The value with the best median ratio (the candidate when none won).
    pub(crate) candidate: String,
    pub(crate) comparisons: Vec<Paired>,
    /// Rounds a claim needs with this many values, when fewer were run.
    pub too_few: Option<usize>,
    /// The candidate's comparison rests on flagged trials (what they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
    pub explanation: String,
}

impl Decision {
    /// The comparison of `value` with the live value.
    pub fn of(&self, value: &str) -> Option<&Paired> {
        self.comparisons.iter().find(|c| c.value == value)
    }
}

/// The fewest paired rounds with which a value can be claimed better than
/// the live one among `m` values, if it wins every round (0.5^n ≤ α/2/m).
pub fn rounds_for_a_claim(m: usize) -> usize {
    let level = ALPHA / 2.0 / m.max(1) as f64;
    (1..).find(|&n| 0.5f64.powi(n as i32) <= level).unwrap_or(1)
}

/// Rounds a default sweep runs at least: enough that one round lost to
/// noise still allows a claim (P(at least n-1 wins of n) ≤ α/2/m).
pub(crate) fn rounds_to_plan(m: usize) -> usize {
    let level = ALPHA / 2.0 / m.max(1) as f64;
    (2..).find(|&n| upper_tail(n, n - 1) <= level).unwrap_or(2)
}

/// The verdict of each lab file system's sweep (one, without --fs), each
/// against its own live value (`live` lists them as the run stored them,
/// ", "-separated); a sweep whose live value was not measured is an error
/// saying so, as apply will refuse it.
pub(crate) fn per_group(
    knob: &str,
    results: &[PointResult],
    metric: &str,
    noise: f64,
    live: Option<&str>,
) -> Vec<(Option<String>, Result<Decision>)> {
    let fs_of = |r: &PointResult| r.params.get("fs").map(|f| f.to_string());
    let mut groups: Vec<Option<String>> = Vec::new();
    for r in results {
        let fs = fs_of(r);
        if !groups.contains(&fs) {
            groups.push(fs);
        }
    }
    let lives: Vec<&str> = live.map(|l| l.split(", ").collect()).unwrap_or_default();
    groups
        .into_iter()
        .enumerate()
        .map(|(i, fs)| {
            let mine: Vec<_> = results.iter().filter(|r| fs_of(r) == fs).cloned().collect();
            let d = match lives.get(i).or(lives.first()) {
                Some(l) => decide(knob, &mine, metric, noise, l),
                None => Err(Error::usage(format!(
                    "the live value of {knob} was not measured: no value is judged (apply will \
                     refuse this run)"
                ))),
            };
            (fs, d)
        })
        .collect()
}

/// Decide `metric` of a sweep of `knob` against the arm whose value is `live`.
pub fn decide(
    knob: &str,
    results: &[PointResult],
    metric: &str,
    noise: f64,
    live: &str,
) -> Result<Decision> {
    let rows: Vec<(String, &MetricResult, Option<String>)> = results
        .iter()
        .filter_map(|r| {
            let v = r.params.get(knob)?.to_string();
            Some((v, r.metric(metric)?, r.suspect_summary()))
        })
        .collect();
    let base = rows.iter().find(|r| r.0 == live).ok_or_else(|| {
        Error::usage(format!(
            "no {metric} results for the live value {knob}={live}: nothing was measured \
                 against the value in use"
        ))
    })?;
    let (base, base_suspect) = (base.1, &base.2);
    let higher = base.better == Better::Higher;
    let others: Vec<_> = rows.iter().filter(|r| r.0 != live).collect();
    if others.is_empty() {
        return Err(Error::usage(format!(
            "the sweep measured only the live value {knob}={live}: nothing to compare"
        )));
    }
    let m = others.len();
    let per_round: Vec<Vec<f64>> = others
        .iter()
        .map(|(_, r, _)| ratios(&base.samples, &r.samples))
        .collect();
    let mut comparisons: Vec<Paired> = others
        .iter()
        .zip(&per_round)
        .map(|((v, _, sus), r)| {
            let mut p = paired(v, r, higher);
            p.suspect = flagged(knob, &[(live, base_suspect), (v.as_str(), sus)]);
            p
        })
        .collect();
    // Holm: the i-th smallest p faces α/2/(m-i); the first failure stops.
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| comparisons[*a].p.total_cmp(&comparisons[*b].p));
    let mut open = true;
    for (rank, &i) in order.iter().enumerate() {
        let c = &mut comparisons[i];
        c.level = ALPHA / 2.0 / (m - rank) as f64;
        (c.ci95_low, c.ci95_high) = median_ci(&per_round[i], c.level);
        let significant = open && c.p <= c.level;
        open = significant;
        let beyond = if higher {
            c.ratio > 1.0 + noise
        } else {
            c.ratio < 1.0 - noise
        };
        c.better = significant && beyond;
    }
    let by_ratio = |a: &&Paired, b: &&Paired| {
        if higher {
            a.ratio.total_cmp(&b.ratio)
        } else {
            b.ratio.total_cmp(&a.ratio)
        }
    };
    let top = comparisons
        .iter()
        .max_by(by_ratio)
        .ok_or_else(|| Error::measurement("no values"))?;
    let best = comparisons.iter().filter(|c| c.better).max_by(by_ratio);
    let rounds = comparisons.iter().map(|c| c.rounds).min().unwrap_or(0);
    let need = rounds_for_a_claim(m);
    let too_few = (rounds < need).then_some(need);
    let mut explanation = explain(
        knob,
        metric,
        live,
        noise,
        m,
        &comparisons,
        best,
        top,
        too_few,
    );
    let suspect = best.unwrap_or(top).suspect.clone();
    if let Some(s) = &suspect {
        explanation.push_str(&format!(
            " (suspect: it rests on trials the validity guard flagged, {s}; tune again on a \
             quiet machine: apply refuses this verdict without --trust-suspect)"
        ));
    }
    Ok(Decision {
        metric: metric.into(),
        live: live.into(),
        best: best.map(|b| b.value.clone()),
        candidate: best.unwrap_or(top).value.clone(),
        comparisons: comparisons.clone(),
        too_few,
        suspect,
        explanation,
    })
}

/// "KNOB=V: 2 of 9 trials flagged: …" for each arm with flagged trials.
fn flagged(knob: &str, arms: &[(&str, &Option<String>)]) -> Option<String> {
    let parts: Vec<String> = arms
        .iter()
        .filter_map(|(v, s)| Some(format!("{knob}={v}: {}", s.as_ref()?)))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Per-round ratios value / live over the rounds both finished (a round
/// with a non-finite or zero live value has no ratio).
fn ratios(live: &[f64], value: &[f64]) -> Vec<f64> {
    live.iter()
        .zip(value)
        .filter(|(l, v)| l.is_finite() && v.is_finite() && **l != 0.0)
        .map(|(l, v)| v / l)
        .collect()
}

fn paired(value: &str, r: &[f64], higher: bool) -> Paired {
    let wins = r
        .iter()
        .filter(|x| if higher { **x > 1.0 } else { **x < 1.0 })
        .count();
    let losses = r
        .iter()
        .filter(|x| if higher { **x < 1.0 } else { **x > 1.0 })
        .count();
    Paired {
        value: value.to_string(),
        rounds: r.len(),
        wins,
        losses,
        ratio: crate::stats::summary::median(r),
        ci95_low: f64::NAN,
        ci95_high: f64::NAN,
        p: upper_tail(wins + losses, wins),
        level: ALPHA / 2.0,
        better: false,
        suspect: None,
    }
}

/// P(X ≥ k) for X ~ Binomial(n, ½), summed in log space (no underflow).
fn upper_tail(n: usize, k: usize) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    let ln2 = std::f64::consts::LN_2;
    // ln C(n, k) built up from ln C(n, 0) = 0.
    let mut ln_c = 0.0;
    for j in 0..k {
        ln_c += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    let mut sum = 0.0;
    for j in k..=n {
        sum += (ln_c - n as f64 * ln2).exp();
        if j < n {
            ln_c += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
        }
    }
    sum.min(1.0)
}

/// The distribution-free CI of a median: sorted values k from each end,
/// with k the largest such that P(X < k) ≤ `tail` for X ~ Bin(n, ½). With
/// too few values for any such k, the whole range (no claim rests on it).
fn median_ci(xs: &[f64], tail: f64) -> (f64, f64) {
    let mut s: Vec<f64> = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    // P(X ≤ j) = P(X ≥ n - j) by symmetry.
    let mut k = 0;
    while k < n / 2 && upper_tail(n, n - k) <= tail {
        k += 1;
    }
    // k values lie below the lower bound s[k-1]… keep s[k-1] as the bound.
    let lo = k.saturating_sub(1);
    (s[lo], s[n - 1 - lo])
}

#[allow(clippy::too_many_arguments)]
fn explain(
    knob: &str,
    metric: &str,
    live: &str,
    noise: f64,
    m: usize,
    all: &[Paired],
    best: Option<&Paired>,
    top: &Paired,
    too_few: Option<usize>,
) -> String {
    let basis = format!(
        "paired rounds, sign test{}",
        if m > 1 {
            format!(" with Holm's correction for {m} values")
        } else {
            String::new()
        }
    );
    let figures = |c: &Paired| {
        format!(
            "×{:.3} per round (95% CI {:.3}–{:.3}), better in {} of {} rounds",
            c.ratio, c.ci95_low, c.ci95_high, c.wins, c.rounds
        )
    };
    if let Some(b) = best {
        let also: Vec<&str> = all
            .iter()
            .filter(|c| c.better && c.value != b.value)
            .map(|c| c.value.as_str())
            .collect();
        return format!(
            "{knob}={} is significantly better than the live value ({live}) for {metric}: {} \
             ({basis}; beyond the ±{:.0}% noise){}",
            b.value,
            figures(b),
            noise * 100.0,
            if also.is_empty() {
                String::new()
            } else {
                format!("; also better than the live value: {}", also.join(", "))
            }
        );
    }
    let why = match too_few {
        Some(need) => format!(
            "{} paired rounds are too few for a 95% claim among {m} value(s) against the live one: \
             at least {need} are needed even if every round agrees (--trials {need} or more)",
            top.rounds
        ),
        None => format!(
            "{knob}={} has the best median, {}: not beyond the ±{:.0}% noise with 95% confidence \
             ({basis})",
            top.value,
            figures(top),
            noise * 100.0
        ),
    };
    format!("no value is significantly better than the live value ({live}) for {metric}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_tail_is_exact_for_small_n() {
        assert!((upper_tail(6, 6) - 1.0 / 64.0).abs() < 1e-12);
        assert!((upper_tail(3, 2) - 0.5).abs() < 1e-12);
        assert_eq!(upper_tail(5, 0), 1.0);
        assert!(upper_tail(2000, 1900) < 1e-100);
    }

    #[test]
    fn a_claim_needs_enough_rounds() {
        assert_eq!(rounds_for_a_claim(1), 6);
        assert_eq!(rounds_for_a_claim(2), 7);
        assert_eq!(rounds_to_plan(1), 9);
        assert!(rounds_to_plan(3) > rounds_to_plan(1));
    }

    #[test]
    fn the_median_ci_widens_with_fewer_values() {
        let xs: Vec<f64> = (1..=30).map(f64::from).collect();
        let (lo, hi) = median_ci(&xs, 0.025);
        assert!(lo > 5.0 && lo < 15.5 && hi > 15.5 && hi < 26.0, "{lo} {hi}");
        assert_eq!(median_ci(&xs[..3], 0.025), (1.0, 3.0));
    }
}
