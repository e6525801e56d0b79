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
//! The interval of a point's trials is widened by the drift between runs
//! ([`Drift`]) before it is judged: trials seconds apart share one
//! minute's speed, and a verdict is a claim about the machine, which the
//! next run of the same study must not contradict. The drift is learned
//! per point from the stored runs of the machine where there are enough
//! (as a run comparison learns it), else [`BETWEEN_RUNS`]. A proportion with its
//! chances counted is judged on its exact binomial interval instead.
//!
//! A verdict resting on trials the validity guard flagged (throttling,
//! steal, competing load, swap, a failed cache drop, a full scratch file
//! system) keeps its PASS/FAIL/MARGINAL but says that it is on suspect data.

use super::profile::{Criterion, KeyIssue, Over};
use crate::model::run::{IssueVerdict, PointResult};
use crate::stats::calibrate::NoiseFloor;
use crate::stats::compare::fmt_pct;
use crate::units::human;

/// How far another run of the same study may drift from this one: the
/// comparison's default between-run floor (±10%, from A/A runs), which a
/// study's interval of trials is widened by before it is judged.
pub(crate) const BETWEEN_RUNS: f64 = crate::stats::calibrate::DEFAULT_FLOOR;

/// The drift between runs of `metric` at a point: a fixed band (`f64`,
/// relative) or one learned from stored runs.
pub(crate) trait Drift {
    fn of(&self, r: &PointResult, metric: &str) -> NoiseFloor;
}

impl Drift for f64 {
    fn of(&self, _: &PointResult, _: &str) -> NoiseFloor {
        NoiseFloor {
            band: *self,
            runs: 0,
        }
    }
}

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
    /// The drift between runs decided the outcome (the trials' own
    /// interval alone would have said otherwise).
    pub(crate) drifted: bool,
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
    /// The between-run drift the interval is widened by before it is
    /// judged: the criterion's for an interval of trials, else 0.
    drift: f64,
    /// Stored runs the drift was learned from (0: the default).
    learned: usize,
    n: usize,
    /// A proportion's events and chances pooled over the trials, when the
    /// criterion names its chances (then `low`/`high` are binomial).
    events: Option<(u64, u64)>,
    /// How much more the trials' proportions varied than chance (1: no
    /// more); the interval is of the counts shrunk by it.
    dispersion: f64,
    /// Whether that spread was seen within the trials (between their
    /// seconds, `{metric}_dispersion`) rather than between them.
    within: bool,
}

/// A proportion pooled over the trials: Σ ratio × chances of Σ chances,
/// with its exact binomial interval, of the counts divided by the trials'
/// over-dispersion (misses in bursts are fewer independent chances than
/// frames). None when a trial lacks either metric or nothing was due.
fn pooled(r: &PointResult, metric: &str, chances: &str) -> Option<Estimate> {
    let (m, c) = (r.metric(metric)?, r.metric(chances)?);
    if m.samples.len() != c.samples.len() || m.samples.is_empty() {
        return None;
    }
    let mut trials = Vec::with_capacity(m.samples.len());
    for (ratio, due) in m.samples.iter().zip(&c.samples) {
        if !(ratio.is_finite() && due.is_finite() && *due >= 0.0) {
            return None;
        }
        trials.push(((ratio * due).round() as u64, due.round() as u64));
    }
    let (k, n) = trials
        .iter()
        .fold((0u64, 0u64), |(k, n), t| (k + t.0, n + t.1));
    // Bursts show between trials and, where the experiment counts its
    // events per block (io.stream: per second), within each: the median
    // trial's spread, so that one recording's burst is not as many
    // independent frames either.
    let between = crate::stats::proportion::dispersion(&trials);
    let within = r
        .metric(&format!("{metric}_dispersion"))
        .map(|d| d.summary.median)
        .filter(|d| d.is_finite())
        .unwrap_or(1.0)
        .max(1.0);
    let phi = between.max(within);
    let shrunk = |x: u64| (x as f64 / phi).round() as u64;
    let (low, high) = crate::stats::proportion::clopper_pearson(shrunk(k), shrunk(n).max(1), 0.95)?;
    Some(Estimate {
        median: k as f64 / n as f64,
        low,
        high,
        drift: 0.0,
        learned: 0,
        n: m.samples.len(),
        events: Some((k, n)),
        dispersion: phi,
        within: within > between,
    })
}

fn estimate(r: &PointResult, c: &Criterion, drift: &dyn Drift) -> Option<Estimate> {
    if let Some(chances) = &c.events {
        return pooled(r, &c.metric, chances);
    }
    let s = &r.metric(&c.metric)?.summary;
    if !s.median.is_finite() {
        return None;
    }
    let or_median = |v: f64| if v.is_finite() { v } else { s.median };
    let (a, b) = (or_median(s.ci95_low), or_median(s.ci95_high));
    let (low, high) = (a.min(b).min(s.median), a.max(b).max(s.median));
    // Trials taken seconds apart share the minute's speed; another run of
    // the same study, minutes later, drifts by more than their spread
    // (the A/A runs behind stats::calibrate). A single value has no
    // interval to widen and says so.
    let floor = if s.n >= 2 {
        drift.of(r, &c.metric)
    } else {
        NoiseFloor { band: 0.0, runs: 0 }
    };
    Some(Estimate {
        median: s.median,
        low,
        high,
        drift: floor.band,
        learned: floor.runs,
        n: s.n,
        events: None,
        dispersion: 1.0,
        within: false,
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

/// Judge one criterion against the results of its key issue; an interval
/// of trials is widened by its point's `drift` between runs (a relative
/// band such as 0.10 = ±10%, or one learned from stored runs).
pub(crate) fn judge_criterion(c: &Criterion, results: &[PointResult], drift: &dyn Drift) -> Judged {
    let est: Vec<Estimate> = results
        .iter()
        .filter(|r| matches(r, c))
        .filter_map(|r| estimate(r, c, drift))
        .collect();
    if est.is_empty() {
        return Judged {
            outcome: Outcome::Unknown,
            text: format!("{} not measured", c.metric),
            metric: c.metric.clone(),
            single: false,
            drifted: false,
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
    let (judged_low, judged_high) = (
        combine(&|e| e.low - e.low.abs() * e.drift),
        combine(&|e| e.high + e.high.abs() * e.drift),
    );
    // The widened interval is shown where it decides: where the trials'
    // own interval would have said otherwise.
    let outcome = judge_interval(c, judged_low, judged_high);
    let widened = outcome != judge_interval(c, low, high);
    let how = match c.over {
        Over::All if est.len() > 1 => "worst ",
        Over::All => "",
        Over::Worst => "worst ",
        Over::Best => "best ",
        Over::Median => "median ",
    };
    let single = est.iter().all(|e| e.n < 2 && e.events.is_none());
    let interval = match (single, est.as_slice()) {
        (true, _) => "1 trial, no interval".to_string(),
        (
            false,
            [Estimate {
                events: Some((k, n)),
                n: trials,
                dispersion,
                within,
                ..
            }],
        ) => format!(
            "{k} of {n} {} over {trials} trial{}, {}binomial 95% CI {} … {}",
            c.events.as_deref().unwrap_or("chances").replace('_', " "),
            if *trials == 1 { "" } else { "s" },
            if *dispersion > 1.0 {
                format!(
                    "varying {dispersion:.1}× more between {} than chance, so counted as \
                     {dispersion:.1}× fewer; ",
                    if *within { "seconds" } else { "trials" }
                )
            } else {
                String::new()
            },
            human(low, &c.unit),
            human(high, &c.unit)
        ),
        _ if widened => format!(
            "95% CI {} … {}, ±{}% between runs{}: {} … {}",
            human(low, &c.unit),
            human(high, &c.unit),
            fmt_pct(est.iter().map(|e| e.drift).fold(0.0, f64::max)),
            match est.iter().map(|e| e.learned).max().unwrap_or(0) {
                0 => String::new(),
                n => format!(" (learned from {n} stored runs)"),
            },
            human(judged_low, &c.unit),
            human(judged_high, &c.unit)
        ),
        _ => format!("95% CI {} … {}", human(low, &c.unit), human(high, &c.unit)),
    };
    let text = format!(
        "{how}{} {} ({interval}; needs {} {})",
        c.metric,
        human(value, &c.unit),
        c.op.symbol(),
        human(c.value, &c.unit)
    );
    Judged {
        outcome,
        text,
        metric: c.metric.clone(),
        single,
        drifted: widened,
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
    drift: &dyn Drift,
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
        .map(|c| judge_criterion(c, results, drift))
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
                    "does not meet the need: the whole interval of {} misses it",
                    failed.join(", ")
                )
            },
        )
    } else if !marginal.is_empty() {
        // Where the drift between runs alone makes it straddle, more trials
        // cannot help: the need is within that drift of the measurement.
        let drifted = judged
            .iter()
            .filter(|j| j.outcome == Outcome::Marginal)
            .all(|j| j.drifted);
        verdict(
            "marginal",
            result,
            format!(
                "cannot tell: the interval of {} straddles the need; {}",
                marginal.join(", "),
                if drifted {
                    "the need lies within the drift between runs of the measurement, which more \
                     trials do not narrow"
                } else {
                    "more trials (--trials) or a quieter machine narrow it"
                }
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
                "meets the need: the whole interval is on the right side".into()
            },
        )
    }
}

#[cfg(test)]
mod tests;
