//! Study profiles: TOML files listing key issues, each with an experiment,
//! its parameters and pass criteria. Built-in profiles are embedded in the
//! binary; user profiles are validated completely — with line numbers —
//! before anything runs.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::criterion::{criterion, RawCriterion};
pub(crate) use super::criterion::{Criterion, Over};
use crate::engine::params::{expand_points, split_assignment, Point};
use crate::engine::Experiment;
use crate::experiments::registry;
use crate::units::parse_duration;
use crate::{Error, Result};

/// Built-in profiles: (name, TOML text).
pub(crate) const BUILTIN: &[(&str, &str)] = &[
    ("quick", include_str!("../../profiles/quick.toml")),
    ("storage", include_str!("../../profiles/storage.toml")),
    ("micro", include_str!("../../profiles/micro.toml")),
    ("set-top", include_str!("../../profiles/set-top.toml")),
    ("pvr", include_str!("../../profiles/pvr.toml")),
    ("full", include_str!("../../profiles/full.toml")),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    title: String,
    /// For the reader of the TOML; nothing prints it.
    #[serde(default, rename = "description")]
    _description: String,
    /// Other built-in profiles whose key issues come first.
    #[serde(default)]
    include: Vec<Spanned<String>>,
    /// Defaults for `{{name}}` placeholders in parameters (override with --set).
    #[serde(default)]
    vars: BTreeMap<String, String>,
    #[serde(default)]
    issue: Vec<RawIssue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIssue {
    name: String,
    #[serde(default)]
    question: String,
    experiment: Spanned<String>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    trials: Option<usize>,
    /// Warm-up trials before the measured ones (the experiment's default
    /// when absent; the runner also discards warm-up it detects).
    #[serde(default)]
    warmup: Option<usize>,
    #[serde(default)]
    budget: Option<Spanned<String>>,
    /// Shortest time one trial lasts (the run's default when absent).
    #[serde(default)]
    trial_time: Option<Spanned<String>>,
    #[serde(default)]
    criteria: Vec<Spanned<RawCriterion>>,
}

pub(crate) struct KeyIssue {
    pub(crate) name: String,
    pub(crate) question: String,
    pub(crate) experiment: Box<dyn Experiment>,
    pub(crate) points: Vec<Point>,
    pub(crate) trials: Option<usize>,
    pub(crate) warmup: Option<usize>,
    pub(crate) budget: Option<f64>,
    pub(crate) trial_time: Option<f64>,
    pub(crate) criteria: Vec<Criterion>,
}

impl KeyIssue {
    /// How long the key issue should take when every point has a fixed
    /// length per trial (the experiment's `trial_seconds`, its `duration`
    /// parameter): that × (warm-up + trials) over its points
    /// (trials: the fixed count, else the minimum). None when any point's
    /// length depends on the machine (sized experiments stop on precision),
    /// so a progress line does not forecast what it cannot know.
    pub(crate) fn expected_seconds(
        &self,
        plan: &crate::engine::measure::Plan,
        fixed: bool,
    ) -> Option<f64> {
        let trials = if fixed {
            plan.max_trials
        } else {
            plan.min_trials
        };
        let per_point = |p: &Point| self.experiment.trial_seconds(p).filter(|d| *d > 0.0);
        self.points
            .iter()
            .map(|p| per_point(p).map(|d| d * (plan.warmup + trials) as f64))
            .sum()
    }
}

pub(crate) struct Profile {
    pub(crate) name: String,
    pub(crate) title: String,
    pub(crate) issues: Vec<KeyIssue>,
}

/// Load a built-in profile by name, or a TOML file by path.
pub(crate) fn load(name_or_path: &str, sets: &[(String, String)]) -> Result<Profile> {
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return parse(text, &format!("built-in profile {name_or_path}"), sets);
    }
    let path = std::path::Path::new(name_or_path);
    let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    let looks_like_file = name_or_path.contains('/') || name_or_path.ends_with(".toml");
    if !path.exists() && looks_like_file {
        return Err(Error::usage(format!(
            "profile file {name_or_path} does not exist (check the path, or use a built-in \
             profile: {})",
            names.join(", ")
        )));
    }
    if !path.exists() {
        return Err(Error::usage(format!(
            "no profile '{name_or_path}': built-in profiles are {} (or give a .toml file)",
            names.join(", ")
        )));
    }
    if path.is_dir() {
        return Err(Error::usage(format!(
            "profile {name_or_path} is a directory, not a TOML file (give the path of a .toml \
             file, or a built-in profile: {})",
            names.join(", ")
        )));
    }
    // A profile is a few KiB: a huge file is not one (read no further).
    const MAX_PROFILE: u64 = 1 << 20;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(|e| Error::io("cannot read profile", path, e))?,
            MAX_PROFILE + 1,
        ),
        &mut bytes,
    )
    .map_err(|e| Error::io("cannot read profile", path, e))?;
    if bytes.len() as u64 > MAX_PROFILE {
        return Err(Error::usage(format!(
            "profile {name_or_path} is larger than {} MiB: not a study profile",
            MAX_PROFILE >> 20
        )));
    }
    // Bad input is exit 2, whatever is wrong with it.
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::usage(format!(
            "profile {name_or_path} is not UTF-8 text (invalid byte at offset {}): a profile \
             is a TOML file",
            e.utf8_error().valid_up_to()
        ))
    })?;
    parse(&text, &path.display().to_string(), sets)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parse and validate a profile; every error names the line.
pub(crate) fn parse(text: &str, origin: &str, sets: &[(String, String)]) -> Result<Profile> {
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| format!("line {}: ", line_of(text, s.start)))
            .unwrap_or_default();
        Error::usage(format!(
            "{origin}: {line}{}",
            e.message().trim().replace('\n', "; ")
        ))
    })?;
    let at = |span: std::ops::Range<usize>, msg: String| {
        Error::usage(format!(
            "{origin}: line {}: {msg}",
            line_of(text, span.start)
        ))
    };
    let mut vars = raw.vars.clone();
    for (k, v) in sets {
        if !vars.contains_key(k) {
            let known: Vec<&String> = raw.vars.keys().collect();
            return Err(Error::usage(format!(
                "{origin}: --set {k}: the profile has no variable '{k}' (variables: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        vars.insert(k.clone(), v.clone());
    }
    // Verdicts are keyed by issue name: two issues of one name in one file
    // would overwrite each other's verdict (included profiles may repeat).
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = raw.issue.iter().find(|i| !seen.insert(i.name.as_str())) {
        return Err(Error::usage(format!(
            "{origin}: two key issues are named '{}': give each [[issue]] its own name",
            dup.name
        )));
    }
    let mut issues = Vec::new();
    for inc in &raw.include {
        let (_, inc_text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == inc.get_ref().as_str() && *n != raw.name)
            .ok_or_else(|| {
                at(
                    inc.span(),
                    format!("unknown profile '{}' in include", inc.get_ref()),
                )
            })?;
        let included = parse(
            inc_text,
            &format!("built-in profile {}", inc.get_ref()),
            &[],
        )?;
        issues.extend(included.issues);
    }
    for ri in raw.issue {
        let exp = registry::find(ri.experiment.get_ref())
            .map_err(|e| at(ri.experiment.span(), e.to_string()))?;
        let mut overrides = Vec::new();
        for (k, v) in &ri.params {
            let value = match v.get_ref() {
                toml::Value::String(s) => substitute(s, &vars).map_err(|m| at(v.span(), m))?,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.to_string(),
                other => {
                    return Err(at(
                        v.span(),
                        format!("parameter {k}: unsupported value {other}"),
                    ))
                }
            };
            let spec = exp.spec().param(k).ok_or_else(|| {
                at(
                    v.span(),
                    format!(
                        "{} has no parameter '{k}' (see tunelab list {})",
                        exp.name(),
                        exp.name()
                    ),
                )
            })?;
            spec.parse_list(&value)
                .map_err(|e| at(v.span(), e.to_string()))?;
            overrides.push((k.clone(), value));
        }
        let span = ri.experiment.span();
        let points =
            expand_points(exp.params(), &overrides).map_err(|e| at(span.clone(), e.to_string()))?;
        for p in &points {
            exp.validate(p)
                .map_err(|e| at(span.clone(), e.to_string()))?;
        }
        let duration = |what: &str, v: &Option<Spanned<String>>| match v {
            Some(b) => parse_duration(b.get_ref())
                .filter(|v| *v > 0.0)
                .map(Some)
                .ok_or_else(|| {
                    at(
                        b.span(),
                        format!("{what} '{}' is not a duration (e.g. 100ms)", b.get_ref()),
                    )
                }),
            None => Ok(None),
        };
        let budget = duration("budget", &ri.budget)?;
        let trial_time = duration("trial_time", &ri.trial_time)?;
        if let (Some(t), Some(raw)) = (trial_time, &ri.trial_time) {
            crate::engine::runner::trial_time(t).map_err(|m| at(raw.span(), m))?;
        }
        if ri.trials == Some(0) {
            return Err(at(span, "trials must be at least 1".into()));
        }
        crate::engine::runner::check_repetition(
            &[("trials", ri.trials), ("warmup", ri.warmup)],
            budget,
        )
        .map_err(|m| at(span.clone(), m))?;
        let criteria = ri
            .criteria
            .iter()
            .map(|c| criterion(exp.as_ref(), c.get_ref()).map_err(|m| at(c.span(), m)))
            .collect::<Result<Vec<_>>>()?;
        issues.push(KeyIssue {
            name: ri.name,
            question: ri.question,
            experiment: exp,
            points,
            trials: ri.trials,
            warmup: ri.warmup,
            budget,
            trial_time,
            criteria,
        });
    }
    if issues.is_empty() {
        return Err(Error::usage(format!(
            "{origin}: the profile has no [[issue]] entries"
        )));
    }
    Ok(Profile {
        name: raw.name,
        title: raw.title,
        issues,
    })
}

/// Replace `{{var}}` placeholders.
fn substitute(s: &str, vars: &BTreeMap<String, String>) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find("}}")
            .ok_or_else(|| format!("unclosed {{{{ in '{s}'"))?;
        let name = rest[i + 2..i + end].trim();
        out.push_str(
            vars.get(name)
                .ok_or_else(|| format!("unknown variable '{name}' in '{s}'"))?,
        );
        rest = &rest[i + end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parse `--set key=value` arguments.
pub(crate) fn parse_sets(raw: &[String]) -> Result<Vec<(String, String)>> {
    raw.iter().map(|r| split_assignment(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::criterion::quantity;

    #[test]
    fn a_missing_profile_file_is_named_as_a_file() {
        let e = load("/nonexistent/mine.toml", &[]).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e
            .to_string()
            .contains("profile file /nonexistent/mine.toml does not exist"));
        let e = load("quik", &[]).err().unwrap().to_string();
        assert!(e.contains("built-in profiles are quick"), "{e}");
    }

    #[test]
    fn every_builtin_profile_is_valid() {
        for (name, text) in BUILTIN {
            let p = parse(text, name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!p.issues.is_empty(), "{name}");
        }
    }

    #[test]
    fn errors_name_the_line() {
        let bad_exp =
            "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.nope\"\n";
        let e = parse(bad_exp, "p.toml", &[]).err().unwrap().to_string();
        assert!(
            e.contains("p.toml: line 5: unknown experiment 'io.nope'"),
            "{e}"
        );
        let bad_crit = "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.file-read\"\n\
                        [[issue.criteria]]\nmetric = \"read_throughput\"\nop = \"=>\"\nvalue = \"1MB/s\"\n";
        let e = parse(bad_crit, "p.toml", &[]).err().unwrap().to_string();
        assert!(e.contains("line 6") && e.contains("op '=>'"), "{e}");
        let bad_toml = "name = \"x\"\ntitle = \n";
        let e = parse(bad_toml, "p.toml", &[]).err().unwrap().to_string();
        assert!(e.contains("line 2"), "{e}");
        let bad_param = "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.file-read\"\nparams = { size = \"big\" }\n";
        let e = parse(bad_param, "p.toml", &[]).err().unwrap().to_string();
        assert!(
            e.contains("line 6") && e.contains("'big' is not a size"),
            "{e}"
        );
        let trial = |v: &str| {
            parse(
                &format!("name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.file-read\"\ntrial_time = \"{v}\"\n"),
                "p.toml",
                &[],
            )
        };
        let e = trial("soon").err().unwrap().to_string();
        assert!(
            e.contains("line 6") && e.contains("trial_time 'soon' is not a duration"),
            "{e}"
        );
        assert_eq!(trial("50ms").unwrap().issues[0].trial_time, Some(0.05));
        let e = trial("2m").err().unwrap().to_string();
        assert!(e.contains("line 6") && e.contains("1ms to 60s"), "{e}");
    }

    #[test]
    fn quantities_use_the_metric_unit() {
        assert_eq!(quantity("100MB/s", "B/s"), Some(1e8));
        assert_eq!(quantity("33ms", "s"), Some(0.033));
        assert_eq!(quantity("1%", "ratio"), Some(0.01));
        assert_eq!(quantity("30", "frames/s"), Some(30.0));
        assert_eq!(quantity("fast", "B/s"), None);
    }

    #[test]
    fn variables_substitute_and_unknown_sets_are_refused() {
        let text =
            "name = \"x\"\ntitle = \"t\"\n[vars]\ncommand = \"true\"\n[[issue]]\nname = \"a\"\n\
                    experiment = \"app.time\"\nparams = { command = \"{{command}}\" }\n";
        let p = parse(text, "p", &[("command".into(), "/bin/ls".into())]).unwrap();
        assert_eq!(p.issues[0].points[0].text("command").unwrap(), "/bin/ls");
        assert!(parse(text, "p", &[("colour".into(), "x".into())]).is_err());
    }
}
