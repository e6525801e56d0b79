//! A key issue's pass criterion: metric, comparison and threshold, parsed
//! from a profile's `[[issue.criteria]]` and checked against the experiment.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::engine::Experiment;
use crate::units::{parse_duration, parse_size};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCriterion {
    metric: String,
    op: String,
    value: toml::Value,
    /// Only points whose parameters match (e.g. { mode = "paced" }).
    #[serde(default, rename = "where")]
    filter: BTreeMap<String, toml::Value>,
    /// How to combine several points: "all" must pass (default), or the
    /// "median" / "best" / "worst" of their medians.
    #[serde(default)]
    over: Option<String>,
    /// The metric that counts the chances behind a proportion (frames due
    /// for miss_ratio): the criterion is then judged on the exact binomial
    /// interval of the trials' events pooled.
    #[serde(default)]
    events: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Ge,
    Gt,
    Le,
    Lt,
}

impl Op {
    pub(crate) fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Ge => a >= b,
            Op::Gt => a > b,
            Op::Le => a <= b,
            Op::Lt => a < b,
        }
    }
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Op::Ge => "≥",
            Op::Gt => ">",
            Op::Le => "≤",
            Op::Lt => "<",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Over {
    All,
    Median,
    Best,
    Worst,
}

#[derive(Debug, Clone)]
pub(crate) struct Criterion {
    pub(crate) metric: String,
    pub(crate) unit: String,
    pub(crate) higher_is_better: bool,
    pub(crate) op: Op,
    /// Threshold in the metric's base unit.
    pub(crate) value: f64,
    pub(crate) filter: BTreeMap<String, String>,
    pub(crate) over: Over,
    /// The metric counting the chances of a proportion (see RawCriterion).
    pub(crate) events: Option<String>,
}

pub(super) fn criterion(
    exp: &dyn Experiment,
    c: &RawCriterion,
) -> std::result::Result<Criterion, String> {
    let metrics = exp.metrics();
    let spec = metrics.iter().find(|m| m.name == c.metric).ok_or_else(|| {
        format!(
            "criterion: {} has no metric '{}' (metrics: {})",
            exp.name(),
            c.metric,
            metrics
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let op = match c.op.as_str() {
        ">=" => Op::Ge,
        ">" => Op::Gt,
        "<=" => Op::Le,
        "<" => Op::Lt,
        other => {
            return Err(format!(
                "criterion: op '{other}' is not one of >=, >, <=, <"
            ))
        }
    };
    let value = match &c.value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        toml::Value::String(s) => quantity(s, spec.unit).ok_or_else(|| {
            format!(
                "criterion: '{s}' is not a value in {} (e.g. 100MB/s, 33ms, 1%)",
                spec.unit
            )
        })?,
        other => return Err(format!("criterion: value {other} is not a number")),
    };
    let over = match c.over.as_deref() {
        None | Some("all") => Over::All,
        Some("median") => Over::Median,
        Some("best") => Over::Best,
        Some("worst") => Over::Worst,
        Some(o) => {
            return Err(format!(
                "criterion: over '{o}' is not all, median, best or worst"
            ))
        }
    };
    let filter = c
        .filter
        .iter()
        .map(|(k, v)| {
            if !exp.params().iter().any(|p| p.name == k) {
                return Err(format!(
                    "criterion: where: {} has no parameter '{k}'",
                    exp.name()
                ));
            }
            let v = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            // Compare in base units: "1m" → 1048576.
            let spec = exp.spec().param(k).expect("checked above");
            let parsed = spec
                .parse_one(&v)
                .map_err(|e| format!("criterion: where {k}: {e}"))?;
            Ok((k.clone(), parsed.to_string()))
        })
        .collect::<std::result::Result<_, String>>()?;
    if let Some(e) = c
        .events
        .as_deref()
        .filter(|e| !metrics.iter().any(|m| m.name == *e))
    {
        return Err(format!(
            "criterion: events: {} has no metric '{e}'",
            exp.name()
        ));
    }
    // Chances count the events of a proportion only: on another metric the
    // pooled "events" would be the metric times the chances, a made-up count.
    if c.events.is_some() && spec.unit != "fraction" {
        return Err(format!(
            "criterion: events: {} is in {}, not a proportion (a fraction of the chances): \
             drop `events` or judge a fraction metric",
            c.metric, spec.unit
        ));
    }
    Ok(Criterion {
        metric: c.metric.clone(),
        unit: spec.unit.to_string(),
        higher_is_better: spec.better == crate::engine::Better::Higher,
        op,
        value,
        filter,
        over,
        events: c.events.clone(),
    })
}

/// A threshold with units, in the metric's base unit: `100MB/s`, `64MiB/s`,
/// `33ms`, `1%` (of a ratio), or a plain number.
pub(crate) fn quantity(s: &str, unit: &str) -> Option<f64> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        return p.trim().parse::<f64>().ok().map(|v| v / 100.0);
    }
    match unit {
        "B/s" => parse_size(s.trim_end_matches("/s")).map(|v| v as f64),
        "B" => parse_size(s).map(|v| v as f64),
        "s" => parse_duration(s),
        _ => s.parse().ok(),
    }
}
