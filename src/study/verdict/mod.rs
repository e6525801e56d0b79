//! Judging a key issue: its criteria against the 95% confidence intervals of
//! the medians it measured.
//!
//! A criterion is judged on an interval, never on a bare median: PASS when
//! the whole interval meets the need, FAIL when the whole interval misses it,
//! MARGINAL when the interval straddles the threshold (the measurement cannot
//! tell; the interval is shown). Several points are combined with `over`:
//!
//! - `all` (default) and `worst`: the worst point must meet the need;
//! - `best`: the best point must meet it;
//! - `median`: the median of the points' medians must meet it.
//!
//! Each combination is a function that never decreases when one of its
//! arguments increases (max, min, median), so applying it to the lower ends
//! and to the upper ends of the points' intervals gives an interval that
//! holds the combined statistic whenever every point's interval holds its
//! median. For `all` that is the same as "PASS when every point's whole
//! interval meets the need, FAIL when some point's whole interval misses".
//! The intervals are per point (95% each), not simultaneous.
//!
//! A verdict resting on trials the validity guard flagged (throttling,
//! steal, competing load, swap, a failed cache drop, a full scratch file
//! system) keeps its PASS/FAIL/MARGINAL but says that it is on suspect data.

use super::profile::{Criterion, KeyIssue, Over};
use crate::model::run::{IssueVerdict, PointResult};
use crate::units::human;

/// The outcome of one criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    Fail,
    Marginal,
    Unknown,
}

/// One criterion, judged: the outcome and the figures in words.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    pub(crate) outcome: Outcome,
    pub(crate) text: String,
    pub(crate) metric: String,
    /// Judged on single-trial values (no interval).
    pub(crate) single: bool,
}

fn matches(r: &PointResult, c: &Criterion) -> bool {
    c.filter
        .iter()
        .all(|(k, v)| r.params.get(k).is_some_and(|p| &p.to_string() == v))
}

/// A point's median with its 95% CI (the CI falls back to the median when
/// it is undefined, e.g. one trial).
#[derive(Debug, Clone, Copy)]
struct Estimate {
    median: f64,
    low: f64,
    high: f64,
    n: usize,
}

fn estimate(r: &PointResult, metric: &str) -> Option<Estimate> {
    let s = &r.metric(metric)?.summary;
    if !s.median.is_finite() {
        return None;
    }
    let or_median = |v: f64| if v.is_finite() { v } else { s.median };
    let (a, b) = (or_median(s.ci95_low), or_median(s.ci95_high));
    Some(Estimate {
        median: s.median,
        low: a.min(b).min(s.median),
        high: a.max(b).max(s.median),
        n: s.n,
    })
}

/// Judge one interval `[low, high]` against `op threshold`.
pub(crate) fn judge_interval(c: &Criterion, low: f64, high: f64) -> Outcome {
    match (c.op.holds(low, c.value), c.op.holds(high, c.value)) {
        (true, true) => Outcome::Pass,
        (false, false) => Outcome::Fail,
        _ => Outcome::Marginal,
    }
}

/// Judge one criterion against the results of its key issue.
pub(crate) fn judge_criterion(c: &Criterion, results: &[PointResult]) -> Judged {
    let est: Vec<Estimate> = results
        .iter()
        .filter(|r| matches(r, c))
        .filter_map(|r| estimate(r, &c.metric))
        .collect();
    if est.is_empty() {
        return Judged {
            outcome: Outcome::Unknown,
            text: format!("{} not measured", c.metric),
            metric: c.metric.clone(),
            single: false,
        };
    }
    let worse = |a: f64, b: f64| {
        if c.higher_is_better {
            a.min(b)
        } else {
            a.max(b)
        }
    };
    let better = |a: f64, b: f64| {
        if c.higher_is_better {
            a.max(b)
        } else {
            a.min(b)
        }
    };
    let combine = |f: &dyn Fn(&Estimate) -> f64| -> f64 {
        let vals: Vec<f64> = est.iter().map(f).collect();
        match c.over {
            Over::All | Over::Worst => vals.iter().copied().reduce(worse).unwrap_or(f64::NAN),
            Over::Best => vals.iter().copied().reduce(better).unwrap_or(f64::NAN),
            Over::Median => crate::stats::median(&vals),
        }
    };
    let (value, low, high) = (
        combine(&|e| e.median),
        combine(&|e| e.low),
        combine(&|e| e.high),
    );
    let how = match c.over {
        Over::All if est.len() > 1 => "worst ",
        Over::All => "",
        Over::Worst => "worst ",
        Over::Best => "best ",
        Over::Median => "median ",
    };
    let single = est.iter().all(|e| e.n < 2);
    let interval = if single {
        "1 trial, no interval".to_string()
    } else {
        format!("95% CI {} … {}", human(low, &c.unit), human(high, &c.unit))
    };
    let text = format!(
        "{how}{} {} ({interval}; needs {} {})",
        c.metric,
        human(value, &c.unit),
        c.op.symbol(),
        human(c.value, &c.unit)
    );
    Judged {
        outcome: judge_interval(c, low, high),
        text,
        metric: c.metric.clone(),
        single,
    }
}

/// What the flags of the summarised trials were, in a few words for the
/// conclusion ("other processes' CPU use, VM steal time").
fn suspect_kinds(results: &[PointResult]) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for f in results
        .iter()
        .flat_map(|r| r.validity.kept())
        .flat_map(|t| &t.flags)
    {
        let words = match f.kind.as_str() {
            "load" => "other processes' CPU use",
            "disk-io" => "other processes' disk I/O",
            "steal" => "VM steal time",
            "throttle" => "CPU throttling",
            "clock" => "CPU clock changes",
            "thermal" => "thermal trip or cooling",
            "swap" => "swapping",
            "cache-drop" => "a failed cache drop",
            "scratch-full" => "a full scratch file system",
            other => other,
        };
        if !kinds.contains(&words) {
            kinds.push(words);
        }
    }
    kinds.join(", ")
}

/// Suspect trials among the results, in words ("io.record-size: 2 of 5
/// trials flagged: other processes used the CPU"), one per suspect point.
fn suspect_notes(results: &[PointResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| {
            let s = r.suspect_summary()?;
            Some(format!("{} {}: {s}", r.experiment, r.params_label()))
        })
        .collect()
}

/// The verdict for one key issue given its results (and the error that
/// stopped its measurement, if any).
/// What backs a target that is not a block device, from the results'
/// `backing:` notes (experiments::common::util::backing_note): "RAM (tmpfs), not a
/// device's figure". A storage verdict at RAM speed must say so where it is read.
fn not_a_device(results: &[PointResult]) -> Option<String> {
    results.iter().flat_map(|r| &r.notes).find_map(|n| {
        let rest = n.strip_prefix("backing: ")?;
        if !rest.contains("not a block device") {
            return None;
        }
        let fs = rest.split([' ', ',']).next().unwrap_or("?");
        let kind = rest
            .split_once(" (")
            .and_then(|(_, k)| k.split_once(')'))
            .map(|(k, _)| k)
            .filter(|_| rest.starts_with(&format!("{fs} (")))
            .unwrap_or("not a block device");
        Some(format!("{kind} ({fs}), not a device's figure"))
    })
}

pub(crate) fn judge(
    issue: &KeyIssue,
    results: &[PointResult],
    error: Option<&str>,
) -> IssueVerdict {
    let suspect = suspect_notes(results);
    let kinds = suspect_kinds(results);
    let backing = not_a_device(results);
    let verdict = |v: &str, result: String, conclusion: String| {
        let conclusion = if suspect.is_empty() {
            conclusion
        } else {
            format!("{conclusion} — on suspect data ({kinds}; see `tunelab show`)")
        };
        let conclusion = match &backing {
            Some(b) => format!("{conclusion} — {b}"),
            None => conclusion,
        };
        IssueVerdict {
            name: issue.name.clone(),
            question: issue.question.clone(),
            result,
            verdict: v.to_string(),
            conclusion,
            suspect: suspect.clone(),
            seconds: None,
        }
    };
    if results.is_empty() {
        let why = error.unwrap_or("nothing was measured");
        return verdict(
            "unknown",
            format!("not measured: {why}"),
            "cannot judge: the measurement did not complete".into(),
        );
    }
    if issue.criteria.is_empty() {
        let first = results
            .iter()
            .filter_map(|r| r.metrics.first().map(|m| (r, m)))
            .take(3);
        let text: Vec<String> = first
            .map(|(r, m)| {
                format!(
                    "{} {} {}",
                    r.params_label(),
                    m.name,
                    human(m.summary.median, &m.unit)
                )
            })
            .collect();
        return verdict(
            "info",
            text.join("; "),
            "measured for reference (no pass criterion)".into(),
        );
    }
    let judged: Vec<Judged> = issue
        .criteria
        .iter()
        .map(|c| judge_criterion(c, results))
        .collect();
    let result = judged
        .iter()
        .map(|j| j.text.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let with = |o: Outcome| -> Vec<&str> {
        judged
            .iter()
            .filter(|j| j.outcome == o)
            .map(|j| j.metric.as_str())
            .collect()
    };
    let single = judged.iter().all(|j| j.single);
    let (failed, marginal, unknown) = (
        with(Outcome::Fail),
        with(Outcome::Marginal),
        with(Outcome::Unknown),
    );
    if !failed.is_empty() {
        verdict(
            "fail",
            result,
            if single {
                format!(
                    "does not meet the need ({}; one trial, no interval)",
                    failed.join(", ")
                )
            } else {
                format!(
                    "does not meet the need: the whole 95% CI of {} misses it",
                    failed.join(", ")
                )
            },
        )
    } else if !marginal.is_empty() {
        verdict(
            "marginal",
            result,
            format!(
                "cannot tell: the 95% CI of {} straddles the need; more trials (--trials) or a \
                 quieter machine narrow it",
                marginal.join(", ")
            ),
        )
    } else if !unknown.is_empty() {
        verdict(
            "unknown",
            result,
            "some criteria could not be evaluated".into(),
        )
    } else {
        verdict(
            "pass",
            result,
            if single {
                "meets the need (one trial, no interval)".into()
            } else {
                "meets the need: the whole 95% CI is on the right side".into()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::ParamValue;
    use crate::engine::Better;
    use crate::model::run::MetricResult;
    use crate::study::profile::Op;
    use std::collections::BTreeMap;

    /// A point of ipc.pipe whose round_trip summary has the given median
    /// and CI (seconds).
    fn point(test: &str, median: f64, low: f64, high: f64) -> PointResult {
        let mut summary = crate::stats::summarize(&[median; 5]);
        summary.ci95_low = low;
        summary.ci95_high = high;
        let mut params = BTreeMap::new();
        params.insert("test".to_string(), ParamValue::Text(test.into()));
        PointResult {
            experiment: "ipc.pipe".into(),
            params,
            metrics: vec![MetricResult {
                name: "round_trip".into(),
                unit: "s".into(),
                better: Better::Lower,
                samples: vec![median; 5],
                warmup: vec![],
                summary,
            }],
            series: vec![],
            histograms: vec![],
            notes: vec![],
            elapsed_s: 1.0,
            ..Default::default()
        }
    }

    fn le_50us(over: Over) -> Criterion {
        Criterion {
            metric: "round_trip".into(),
            unit: "s".into(),
            higher_is_better: false,
            op: Op::Le,
            value: 50e-6,
            filter: BTreeMap::new(),
            over,
        }
    }

    fn outcome(c: &Criterion, r: &[PointResult]) -> Outcome {
        judge_criterion(c, r).outcome
    }

    #[test]
    fn the_whole_interval_decides() {
        let c = le_50us(Over::All);
        // The issue's case: medians of 47.9 and 51.8 µs with intervals
        // straddling 50 µs are neither PASS nor FAIL.
        for (median, low, high, want) in [
            (47.9e-6, 45e-6, 52e-6, Outcome::Marginal),
            (51.8e-6, 48e-6, 53e-6, Outcome::Marginal),
            (40e-6, 38e-6, 42e-6, Outcome::Pass),
            (60e-6, 55e-6, 66e-6, Outcome::Fail),
        ] {
            let got = outcome(&c, &[point("latency", median, low, high)]);
            assert_eq!(got, want, "median {median}, CI {low} … {high}");
        }
        // The old rule judged the median alone: 47.9 µs passed although
        // its interval reaches 52 µs.
        let j = judge_criterion(&c, &[point("latency", 47.9e-6, 45e-6, 52e-6)]);
        assert!(j.text.contains("95% CI 45.0 µs … 52.0 µs"), "{}", j.text);
    }

    #[test]
    fn a_bound_on_the_threshold_meets_it() {
        let c = le_50us(Over::All);
        assert_eq!(
            outcome(&c, &[point("latency", 45e-6, 40e-6, 50e-6)]),
            Outcome::Pass
        );
        let mut lt = le_50us(Over::All);
        lt.op = Op::Lt;
        assert_eq!(
            outcome(&lt, &[point("latency", 45e-6, 40e-6, 50e-6)]),
            Outcome::Marginal
        );
    }

    #[test]
    fn higher_is_better_thresholds() {
        let c = Criterion {
            higher_is_better: true,
            op: Op::Ge,
            value: 10.0,
            ..le_50us(Over::All)
        };
        assert_eq!(outcome(&c, &[point("x", 12.0, 11.0, 13.0)]), Outcome::Pass);
        assert_eq!(
            outcome(&c, &[point("x", 10.5, 9.0, 12.0)]),
            Outcome::Marginal
        );
        assert_eq!(outcome(&c, &[point("x", 8.0, 7.0, 9.9)]), Outcome::Fail);
    }

    #[test]
    fn over_combines_intervals() {
        let pts = [
            point("a", 40e-6, 38e-6, 42e-6), // clear pass
            point("b", 49e-6, 47e-6, 52e-6), // straddles
            point("c", 70e-6, 65e-6, 75e-6), // clear fail
        ];
        // all/worst: one point misses with its whole interval → FAIL.
        assert_eq!(outcome(&le_50us(Over::All), &pts), Outcome::Fail);
        assert_eq!(outcome(&le_50us(Over::Worst), &pts), Outcome::Fail);
        assert_eq!(outcome(&le_50us(Over::All), &pts[..2]), Outcome::Marginal);
        assert_eq!(outcome(&le_50us(Over::All), &pts[..1]), Outcome::Pass);
        // best: one point meets with its whole interval → PASS.
        assert_eq!(outcome(&le_50us(Over::Best), &pts), Outcome::Pass);
        assert_eq!(outcome(&le_50us(Over::Best), &pts[1..]), Outcome::Marginal);
        assert_eq!(outcome(&le_50us(Over::Best), &pts[2..]), Outcome::Fail);
        // median of three: b's interval decides.
        assert_eq!(outcome(&le_50us(Over::Median), &pts), Outcome::Marginal);
        let j = judge_criterion(&le_50us(Over::Median), &pts);
        assert!(
            j.text.starts_with("median round_trip 49.0 µs"),
            "{}",
            j.text
        );
    }

    #[test]
    fn where_filters_points() {
        let mut c = le_50us(Over::All);
        c.filter.insert("test".into(), "a".into());
        let pts = [
            point("a", 40e-6, 38e-6, 42e-6),
            point("b", 70e-6, 65e-6, 75e-6),
        ];
        assert_eq!(outcome(&c, &pts), Outcome::Pass);
        c.filter.insert("test".into(), "zzz".into());
        assert_eq!(outcome(&c, &pts), Outcome::Unknown);
    }

    #[test]
    fn a_single_trial_is_judged_on_its_value_and_says_so() {
        let mut p = point("a", 40e-6, 40e-6, 40e-6);
        p.metrics[0].summary = crate::stats::summarize(&[40e-6]);
        let j = judge_criterion(&le_50us(Over::All), &[p]);
        assert_eq!(j.outcome, Outcome::Pass);
        assert!(j.text.contains("1 trial, no interval"), "{}", j.text);
    }

    #[test]
    fn nan_interval_falls_back_to_the_median() {
        let p = point("a", 40e-6, f64::NAN, f64::NAN);
        assert_eq!(outcome(&le_50us(Over::All), &[p]), Outcome::Pass);
    }

    fn issue(criteria: Vec<Criterion>) -> KeyIssue {
        KeyIssue {
            name: "Pipe round trip".into(),
            question: "fast?".into(),
            experiment: crate::experiments::registry::find("ipc.pipe").unwrap(),
            points: vec![],
            trials: None,
            warmup: None,
            budget: None,
            trial_time: None,
            criteria,
        }
    }

    fn flagged(kind: &str) -> crate::model::run::TrialCheck {
        crate::model::run::TrialCheck {
            flags: vec![crate::model::run::Flag {
                kind: kind.into(),
                detail: "cpu-thermal at 85.0 °C".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn issue_verdicts_and_suspect_data() {
        let ki = issue(vec![le_50us(Over::All)]);
        let v = judge(&ki, &[point("latency", 47.9e-6, 45e-6, 52e-6)], None);
        assert_eq!(v.verdict, "marginal");
        assert!(
            v.conclusion.contains("95% CI of round_trip straddles"),
            "{}",
            v.conclusion
        );
        assert!(v.suspect.is_empty());
        assert_eq!(v.label(), "MARGINAL");
        // A thermal flag on a summarised trial: the verdict says so.
        let mut p = point("latency", 40e-6, 38e-6, 42e-6);
        p.validity.trials = vec![Default::default(), flagged("thermal")];
        let v = judge(&ki, &[p.clone()], None);
        assert_eq!(v.verdict, "pass");
        assert_eq!(v.label(), "PASS (suspect)");
        assert!(
            v.conclusion
                .contains("on suspect data (thermal trip or cooling"),
            "{}",
            v.conclusion
        );
        assert!(
            v.suspect[0].contains("1 of 2 trials flagged"),
            "{:?}",
            v.suspect
        );
        // The same flag on a trial discarded as warm-up does not count.
        p.validity.trials = vec![flagged("thermal"), Default::default()];
        p.validity.warmup_discarded = 1;
        assert!(judge(&ki, &[p], None).suspect.is_empty());
        // Fail beats marginal.
        let ki = issue(vec![le_50us(Over::All), {
            let mut c = le_50us(Over::All);
            c.value = 10e-6;
            c
        }]);
        let v = judge(&ki, &[point("latency", 47.9e-6, 45e-6, 52e-6)], None);
        assert_eq!(v.verdict, "fail");
    }

    #[test]
    fn a_ram_backed_target_is_marked_in_the_verdict() {
        let ki = issue(vec![le_50us(Over::All)]);
        let mut p = point("latency", 40e-6, 38e-6, 42e-6);
        p.notes.push(
            "backing: tmpfs (RAM), not a block device: the figures are RAM speed, not a device's"
                .into(),
        );
        let v = judge(&ki, &[p.clone()], None);
        assert_eq!(v.verdict, "pass");
        assert!(
            v.conclusion
                .ends_with("— RAM (tmpfs), not a device's figure"),
            "{}",
            v.conclusion
        );
        // A block device's result is not marked.
        p.notes = vec!["backing: block device vda (ext4)".into()];
        assert!(!judge(&ki, &[p], None).conclusion.contains("not a device"));
    }
}
