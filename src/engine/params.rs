//! Typed experiment parameters: unit parsing (`4k`, `256MiB`, `500ms`),
//! comma lists that sweep, and the cartesian product of points.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::units::{format_size, parse_duration, parse_size};

/// Values are data of the run model; the specs that parse them live here.
pub use crate::model::ParamValue;
use crate::{Error, Result};

/// What kind of value a parameter takes, which decides how it is parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamKind {
    /// A byte count: `4096`, `4k` (= KiB), `4KiB`, `1M`, `1MB` (10^6), `2g`.
    Size,
    /// A duration stored in seconds: `500ms`, `60s`, `2m`, `1.5` (seconds).
    Duration,
    /// A whole number (count of files, processes, trials...).
    Count,
    /// A real number (ratios, rates).
    Float,
    /// One of a fixed list of words.
    Choice(&'static [&'static str]),
    /// A boolean: `yes/no`, `true/false`, `on/off`, `1/0`.
    Bool,
    /// Free text.
    Text,
}

impl ParamKind {
    /// The name stored with a result (`PointResult::param_kinds`), so a run
    /// displays its parameters without this build's registry.
    pub(crate) fn stored_name(&self) -> &'static str {
        match self {
            ParamKind::Size => "size",
            ParamKind::Duration => "duration",
            ParamKind::Count => "count",
            ParamKind::Float => "float",
            ParamKind::Choice(_) => "choice",
            ParamKind::Bool => "bool",
            ParamKind::Text => "text",
        }
    }
}

/// Declaration of one parameter of an experiment.
#[derive(Debug, Clone)]
pub struct ParamSpec {
    pub(crate) name: &'static str,
    pub(crate) kind: ParamKind,
    /// Default as the user would type it; may be a comma list (a default sweep).
    pub(crate) default: &'static str,
    /// Allowed range in base units (bytes, seconds, count), inclusive.
    pub(crate) min: Option<f64>,
    pub(crate) max: Option<f64>,
    pub(crate) help: &'static str,
    /// Left out of a point's stored parameters and label when it has its
    /// default value: for a parameter added after runs were stored, so the
    /// points of older runs and of new runs at the default stay the same
    /// (compare pairs them, `history` keeps one series).
    pub(crate) omit_default: bool,
}

impl ParamSpec {
    pub const fn new(
        name: &'static str,
        kind: ParamKind,
        default: &'static str,
        help: &'static str,
    ) -> Self {
        ParamSpec {
            name,
            kind,
            default,
            min: None,
            max: None,
            help,
            omit_default: false,
        }
    }

    /// See `omit_default`.
    pub(crate) const fn omitted_at_default(mut self) -> Self {
        self.omit_default = true;
        self
    }

    /// Whether `v` is this parameter's default and is left out of the point.
    fn omits(&self, v: &ParamValue) -> bool {
        self.omit_default && self.parse_one(self.default).is_ok_and(|d| d == *v)
    }

    pub(crate) const fn range(mut self, min: f64, max: f64) -> Self {
        self.min = Some(min);
        self.max = Some(max);
        self
    }

    /// Human description of the unit and range for help text.
    pub(crate) fn unit_text(&self) -> String {
        let unit = match &self.kind {
            ParamKind::Size => "bytes (4k = 4 KiB, 1M = 1 MiB, 1MB = 10^6 B)".to_string(),
            ParamKind::Duration => "duration (500ms, 3s, 2m; plain number = seconds)".to_string(),
            ParamKind::Count => "whole number".to_string(),
            ParamKind::Float => "number".to_string(),
            ParamKind::Choice(c) => format!("one of {}", c.join("|")),
            ParamKind::Bool => "yes|no".to_string(),
            ParamKind::Text => "text".to_string(),
        };
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!("{unit}, range {}..{}", self.show(lo), self.show(hi)),
            _ => unit,
        }
    }

    fn show(&self, v: f64) -> String {
        match self.kind {
            ParamKind::Size => format_size(v as u64),
            ParamKind::Duration => format!("{v}s"),
            _ => format!("{v}"),
        }
    }

    /// Parse one (non-list) value of this parameter, checking its range.
    pub(crate) fn parse_one(&self, raw: &str) -> Result<ParamValue> {
        let raw = raw.trim();
        let bad = |what: &str| {
            Error::usage(format!(
                "parameter {}: '{raw}' is not {what} (expected {})",
                self.name,
                self.unit_text()
            ))
        };
        let value = match &self.kind {
            ParamKind::Size => ParamValue::Int(parse_size(raw).ok_or_else(|| bad("a size"))?),
            ParamKind::Duration => {
                ParamValue::Float(parse_duration(raw).ok_or_else(|| bad("a duration"))?)
            }
            ParamKind::Count => {
                ParamValue::Int(raw.parse::<u64>().map_err(|_| bad("a whole number"))?)
            }
            ParamKind::Float => {
                let v: f64 = raw.parse().map_err(|_| bad("a number"))?;
                if !v.is_finite() {
                    return Err(bad("a finite number"));
                }
                ParamValue::Float(v)
            }
            ParamKind::Choice(choices) => {
                let lower = raw.to_ascii_lowercase();
                if !choices.contains(&lower.as_str()) {
                    return Err(bad("an allowed choice"));
                }
                ParamValue::Text(lower)
            }
            ParamKind::Bool => ParamValue::Bool(match raw.to_ascii_lowercase().as_str() {
                "yes" | "true" | "on" | "1" => true,
                "no" | "false" | "off" | "0" => false,
                _ => return Err(bad("yes or no")),
            }),
            ParamKind::Text => {
                if raw.is_empty() {
                    return Err(bad("a non-empty text"));
                }
                ParamValue::Text(raw.to_string())
            }
        };
        if let Some(v) = value.as_f64() {
            let out = self.min.is_some_and(|lo| v < lo) || self.max.is_some_and(|hi| v > hi);
            if out {
                return Err(Error::usage(format!(
                    "parameter {}: {raw} is out of range (expected {})",
                    self.name,
                    self.unit_text()
                )));
            }
        }
        Ok(value)
    }

    /// Whether a stored value (an imported run's) is one this parameter
    /// takes: of its kind, in its range, one of its choices.
    pub(crate) fn accepts(&self, v: &ParamValue) -> std::result::Result<(), String> {
        let kind_ok = match (&self.kind, v) {
            (ParamKind::Size | ParamKind::Count, ParamValue::Int(_)) => true,
            (ParamKind::Duration | ParamKind::Float, ParamValue::Int(_)) => true,
            (ParamKind::Duration | ParamKind::Float, ParamValue::Float(x)) => x.is_finite(),
            (ParamKind::Choice(choices), ParamValue::Text(t)) => choices.contains(&t.as_str()),
            (ParamKind::Bool, ParamValue::Bool(_)) => true,
            (ParamKind::Text, ParamValue::Text(t)) => {
                !t.is_empty() && t.chars().count() <= 256 && !t.chars().any(char::is_control)
            }
            _ => false,
        };
        if !kind_ok {
            return Err(format!("expected {}", self.unit_text()));
        }
        if let Some(x) = v.as_f64() {
            if self.min.is_some_and(|lo| x < lo) || self.max.is_some_and(|hi| x > hi) {
                return Err(format!("out of range: expected {}", self.unit_text()));
            }
        }
        Ok(())
    }

    /// Parse a comma list: each element is one value of a sweep.
    pub(crate) fn parse_list(&self, raw: &str) -> Result<Vec<ParamValue>> {
        let mut out = Vec::new();
        for part in raw.split(',') {
            if part.trim().is_empty() {
                return Err(Error::usage(format!(
                    "parameter {}: empty element in list '{raw}'",
                    self.name
                )));
            }
            let v = self.parse_one(part)?;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        Ok(out)
    }
}

/// One combination of parameter values: what a trial function is called with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Point(pub BTreeMap<String, ParamValue>);

impl Point {
    fn get(&self, name: &str) -> Result<&ParamValue> {
        self.0.get(name).ok_or_else(|| {
            Error::measurement(format!("internal: parameter {name} missing from point"))
        })
    }

    /// A size or count parameter.
    pub(crate) fn u64(&self, name: &str) -> Result<u64> {
        match self.get(name)? {
            ParamValue::Int(v) => Ok(*v),
            ParamValue::Float(v) => Ok(*v as u64),
            other => Err(Error::measurement(format!(
                "internal: parameter {name} is {other}, not a number"
            ))),
        }
    }

    pub(crate) fn usize(&self, name: &str) -> Result<usize> {
        Ok(self.u64(name)? as usize)
    }

    /// A duration (seconds) or float parameter.
    pub(crate) fn f64(&self, name: &str) -> Result<f64> {
        self.get(name)?
            .as_f64()
            .ok_or_else(|| Error::measurement(format!("internal: parameter {name} is not numeric")))
    }

    pub(crate) fn text(&self, name: &str) -> Result<&str> {
        match self.get(name)? {
            ParamValue::Text(s) => Ok(s),
            other => Err(Error::measurement(format!(
                "internal: parameter {name} is {other}, not text"
            ))),
        }
    }

    pub(crate) fn bool(&self, name: &str) -> Result<bool> {
        match self.get(name)? {
            ParamValue::Bool(b) => Ok(*b),
            other => Err(Error::measurement(format!(
                "internal: parameter {name} is {other}, not yes/no"
            ))),
        }
    }

    /// The parameters a result stores: all but those declared
    /// `omitted_at_default` that have their default value.
    pub(crate) fn stored(&self, specs: &[ParamSpec]) -> BTreeMap<String, ParamValue> {
        let mut params = self.0.clone();
        params.retain(|k, v| !specs.iter().any(|s| s.name == k && s.omits(v)));
        params
    }

    /// `key=value` pairs for display, sizes shown in binary units (the
    /// stored parameters: see `stored`).
    pub(crate) fn label(&self, specs: &[ParamSpec]) -> String {
        self.stored(specs)
            .iter()
            .map(|(k, v)| {
                let is_size = specs
                    .iter()
                    .any(|s| s.name == k && s.kind == ParamKind::Size);
                match (is_size, v) {
                    (true, ParamValue::Int(n)) => format!("{k}={}", format_size(*n)),
                    _ => format!("{k}={v}"),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Parse `-p key=v[,v…]` overrides against the specs and expand every
/// combination into points (the first parameter varies slowest).
pub(crate) fn expand_points(
    specs: &[ParamSpec],
    overrides: &[(String, String)],
) -> Result<Vec<Point>> {
    for (key, _) in overrides {
        if !specs.iter().any(|s| s.name == key) {
            let known: Vec<&str> = specs.iter().map(|s| s.name).collect();
            return Err(Error::usage(format!(
                "unknown parameter '{key}' (this experiment takes: {})",
                if known.is_empty() {
                    "no parameters".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
    }
    // A key given twice is a mistake (which one was meant?), never "the last wins".
    for (i, (key, v)) in overrides.iter().enumerate() {
        if let Some((_, first)) = overrides[..i].iter().find(|(k, _)| k == key) {
            return Err(Error::usage(format!(
                "parameter '{key}' is given twice ({key}={first} and {key}={v}): give it once; \
                 to sweep, list the values with commas (-p {key}={first},{v})"
            )));
        }
    }
    let mut lists: Vec<(&'static str, Vec<ParamValue>)> = Vec::new();
    for spec in specs {
        let raw = overrides
            .iter()
            .find(|(k, _)| k == spec.name)
            .map(|(_, v)| v.as_str())
            .unwrap_or(spec.default);
        lists.push((spec.name, spec.parse_list(raw)?));
    }
    let mut points = vec![Point::default()];
    for (name, values) in lists {
        let mut next = Vec::with_capacity(points.len() * values.len());
        for p in &points {
            for v in &values {
                let mut q = p.clone();
                q.0.insert(name.to_string(), v.clone());
                next.push(q);
            }
        }
        points = next;
    }
    Ok(points)
}

/// Split `key=value` (the argument of `-p`).
pub(crate) fn split_assignment(raw: &str) -> Result<(String, String)> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
            Ok((k.trim().to_string(), v.trim().to_string()))
        }
        _ => Err(Error::usage(format!(
            "-p expects key=value (e.g. -p size=64M or -p record=4k,64k), got '{raw}'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("size", ParamKind::Size, "1M", "file size").range(4096.0, 1e12),
            ParamSpec::new(
                "mode",
                ParamKind::Choice(&["buffered", "direct"]),
                "buffered",
                "mode",
            ),
        ]
    }

    #[test]
    fn lists_sweep_every_combination() {
        let o = vec![
            ("size".to_string(), "4k,64k".to_string()),
            ("mode".to_string(), "buffered,direct".to_string()),
        ];
        let pts = expand_points(&specs(), &o).unwrap();
        assert_eq!(pts.len(), 4);
        assert_eq!(pts[0].u64("size").unwrap(), 4096);
        assert_eq!(pts[1].text("mode").unwrap(), "direct");
        assert_eq!(pts[3].u64("size").unwrap(), 65536);
    }

    #[test]
    fn a_parameter_added_later_is_stored_only_away_from_its_default() {
        let mut specs = specs();
        specs.push(ParamSpec::new("jobs", ParamKind::Count, "1", "workers").omitted_at_default());
        let o = vec![("jobs".to_string(), "1,4".to_string())];
        let pts = expand_points(&specs, &o).unwrap();
        // The experiment sees every parameter; the result stores jobs=1 as
        // runs from before the parameter did: not at all.
        assert_eq!(pts[0].u64("jobs").unwrap(), 1);
        assert!(!pts[0].stored(&specs).contains_key("jobs"));
        assert_eq!(pts[0].label(&specs), "mode=buffered size=1 MiB");
        assert_eq!(pts[1].stored(&specs)["jobs"], ParamValue::Int(4));
        assert_eq!(pts[1].label(&specs), "jobs=4 mode=buffered size=1 MiB");
        // Parameters not so declared are stored at their default too.
        assert!(pts[0].stored(&specs).contains_key("mode"));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        let o = vec![("colour".to_string(), "red".to_string())];
        let e = expand_points(&specs(), &o).unwrap_err();
        assert!(matches!(e, Error::Usage(_)));
        assert!(e.to_string().contains("unknown parameter 'colour'"));
        let o = vec![("size".to_string(), "12q".to_string())];
        assert!(expand_points(&specs(), &o)
            .unwrap_err()
            .to_string()
            .contains("'12q' is not a size"));
        let o = vec![("size".to_string(), "1".to_string())];
        assert!(expand_points(&specs(), &o)
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        let o = vec![("mode".to_string(), "sideways".to_string())];
        assert!(expand_points(&specs(), &o).is_err());
        assert!(split_assignment("novalue").is_err());
        let o = vec![
            ("size".to_string(), "4k".to_string()),
            ("size".to_string(), "64k".to_string()),
        ];
        let e = expand_points(&specs(), &o).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("given twice"), "{e}");
    }
}
