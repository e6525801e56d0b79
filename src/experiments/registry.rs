//! Looking experiments up by name, with a suggestion for typos. It lives
//! with the experiments it lists: the engine below never asks for one by name.

use crate::engine::Experiment;
use crate::{Error, Result};

/// Every experiment this build shows (`list`, `run --help`, man pages), in
/// family order; hidden test fixtures (`test.scripted`) are left out.
pub fn all() -> Vec<Box<dyn Experiment>> {
    let mut all = super::all();
    all.retain(|e| !e.spec().hidden);
    all
}

/// One experiment by name, hidden ones included.
pub fn find(name: &str) -> Result<Box<dyn Experiment>> {
    let mut all = super::all();
    if let Some(i) = all.iter().position(|e| e.spec().name == name) {
        return Ok(all.swap_remove(i));
    }
    let names: Vec<&str> = all
        .iter()
        .map(|e| e.spec())
        .filter(|s| !s.hidden)
        .map(|s| s.name)
        .collect();
    let hint = names
        .iter()
        .min_by_key(|n| edit_distance(n, name))
        .filter(|n| edit_distance(n, name) <= 3 || n.ends_with(&format!(".{name}")))
        .map(|n| format!(" — did you mean '{n}'?"))
        .unwrap_or_default();
    Err(Error::usage(format!(
        "unknown experiment '{name}'{hint} (see 'tunelab list')"
    )))
}

/// The stored kind name of an experiment's parameter, for results stored
/// before kinds travelled with them (the CLI hands this to the store it
/// opens: `Store::learning_kinds`).
pub fn param_kind(experiment: &str, param: &str) -> Option<&'static str> {
    let exp = find(experiment).ok()?;
    Some(exp.spec().param(param)?.kind.stored_name())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_well_formed() {
        let all = super::super::all();
        for (i, e) in all.iter().enumerate() {
            let e = e.spec();
            assert!(e.name.contains('.'), "{} is not family.name", e.name);
            assert!(
                all[i + 1..].iter().all(|o| o.spec().name != e.name),
                "duplicate {}",
                e.name
            );
            for p in e.params {
                p.parse_list(p.default)
                    .unwrap_or_else(|err| panic!("{} default of {}: {err}", e.name, p.name));
            }
        }
    }

    /// A study forecasts a key issue from each point's trial length: every
    /// experiment with a `duration` parameter reports it (through its own
    /// `parse`), the others report none, as the by-name read did before.
    #[test]
    fn trial_seconds_is_the_duration_parameter() {
        let mut with_duration = 0;
        for e in super::super::all() {
            let spec = e.spec();
            let points = crate::engine::params::expand_points(spec.params, &[]).unwrap();
            for p in &points {
                let want = p.0.get("duration").and_then(|v| v.as_f64());
                assert_eq!(e.trial_seconds(p), want, "{} at {p:?}", spec.name);
            }
            with_duration += usize::from(spec.param("duration").is_some());
        }
        assert!(
            with_duration >= 6,
            "{with_duration} experiments with a duration"
        );
    }

    #[test]
    fn typos_get_a_suggestion() {
        let e = find("io.file-raed").err().unwrap();
        assert!(e.to_string().contains("did you mean 'io.file-read'"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn legacy_results_learn_kinds_from_the_registry() {
        use crate::model::run::PointResult;
        use crate::model::ParamValue;
        let mut r: PointResult = serde_json::from_str(
            r#"{"experiment":"io.file-read","params":{"chunk":65536},
               "metrics":[],"elapsed_s":0.0}"#,
        )
        .unwrap();
        assert!(r.param_kinds.is_empty());
        let stored_as_count = {
            let mut r = r.clone();
            r.param_kinds.insert("chunk".into(), "count".into());
            r
        };
        r.learn_kinds(param_kind);
        assert_eq!(r.params_label(), "chunk=64 KiB");
        // A stored kind wins over the lookup.
        let mut r = stored_as_count;
        r.learn_kinds(param_kind);
        assert_eq!(r.params.get("chunk"), Some(&ParamValue::Int(65536)));
        assert_eq!(r.params_label(), "chunk=65536");
    }
}
