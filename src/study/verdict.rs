//! Judging a key issue: its criteria against the medians it measured.

use super::profile::{Criterion, KeyIssue, Over};
use crate::engine::model::{IssueVerdict, PointResult};
use crate::report::units::human;

enum Judged {
    Pass(String),
    Fail(String),
    Unknown(String),
}

fn matches(r: &PointResult, c: &Criterion) -> bool {
    c.filter
        .iter()
        .all(|(k, v)| r.params.get(k).is_some_and(|p| &p.to_string() == v))
}

fn judge_criterion(c: &Criterion, results: &[PointResult]) -> Judged {
    let values: Vec<f64> = results
        .iter()
        .filter(|r| matches(r, c))
        .filter_map(|r| r.metric(&c.metric).map(|m| m.summary.median))
        .filter(|v| v.is_finite())
        .collect();
    if values.is_empty() {
        return Judged::Unknown(format!("{} not measured", c.metric));
    }
    let better = |a: f64, b: f64| {
        if c.higher_is_better {
            a.max(b)
        } else {
            a.min(b)
        }
    };
    let worse = |a: f64, b: f64| {
        if c.higher_is_better {
            a.min(b)
        } else {
            a.max(b)
        }
    };
    let (value, how) = match c.over {
        Over::All => (
            values.iter().copied().reduce(worse).unwrap_or(f64::NAN),
            if values.len() > 1 { "worst " } else { "" },
        ),
        Over::Worst => (
            values.iter().copied().reduce(worse).unwrap_or(f64::NAN),
            "worst ",
        ),
        Over::Best => (
            values.iter().copied().reduce(better).unwrap_or(f64::NAN),
            "best ",
        ),
        Over::Median => (crate::stats::median(&values), "median "),
    };
    let text = format!(
        "{how}{} {} (needs {} {})",
        c.metric,
        human(value, &c.unit),
        c.op.symbol(),
        human(c.value, &c.unit)
    );
    if c.op.holds(value, c.value) {
        Judged::Pass(text)
    } else {
        Judged::Fail(text)
    }
}

/// The verdict for one key issue given its results (and the error that
/// stopped its measurement, if any).
pub fn judge(issue: &KeyIssue, results: &[PointResult], error: Option<&str>) -> IssueVerdict {
    let verdict = |v: &str, result: String, conclusion: String| IssueVerdict {
        name: issue.name.clone(),
        question: issue.question.clone(),
        result,
        verdict: v.to_string(),
        conclusion,
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
    let texts: Vec<&str> = judged
        .iter()
        .map(|j| match j {
            Judged::Pass(t) | Judged::Fail(t) | Judged::Unknown(t) => t.as_str(),
        })
        .collect();
    let failed: Vec<&str> = judged
        .iter()
        .filter_map(|j| {
            if let Judged::Fail(t) = j {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    let unknown = judged.iter().any(|j| matches!(j, Judged::Unknown(_)));
    let result = texts.join("; ");
    if !failed.is_empty() {
        verdict(
            "fail",
            result,
            format!("does not meet the need: {}", failed.join("; ")),
        )
    } else if unknown {
        verdict(
            "unknown",
            result,
            "some criteria could not be evaluated".into(),
        )
    } else {
        verdict(
            "pass",
            result,
            "meets the need with the measured margin".into(),
        )
    }
}
