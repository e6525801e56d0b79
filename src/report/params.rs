//! Parameters of stored results for display: their kinds as stored with
//! each result, `key=value` text in human units, which parameters vary.
//! Shared by the report document and the chart picker.

use std::collections::BTreeMap;

use crate::model::run::PointResult;
use crate::model::ParamValue;
use crate::units::{format_size, seconds};

/// The kind of each parameter, as stored with the results (a stored or
/// imported run displays from itself, never from this build's registry).
pub(super) type Kinds = BTreeMap<String, String>;

pub(super) fn param_kinds(results: &[&PointResult]) -> Kinds {
    let mut kinds = Kinds::new();
    for r in results {
        for k in r.params.keys() {
            if !kinds.contains_key(k) {
                if let Some(kind) = r.param_kind(k) {
                    kinds.insert(k.clone(), kind);
                }
            }
        }
    }
    kinds
}

pub(super) fn param_unit(kinds: &Kinds, key: &str) -> &'static str {
    match kinds.get(key).map(String::as_str) {
        Some("size") => "B",
        Some("duration") => "s",
        _ => "count",
    }
}

/// `key=value` with sizes in binary units.
pub(super) fn param_text(kinds: &Kinds, key: &str, v: Option<&ParamValue>) -> String {
    match v {
        None => format!("{key}=–"),
        Some(ParamValue::Int(n)) if param_unit(kinds, key) == "B" => {
            format!("{key}={}", format_size(*n))
        }
        Some(ParamValue::Float(x)) if param_unit(kinds, key) == "s" => {
            format!("{key}={}", seconds(*x))
        }
        Some(v) => format!("{key}={v}"),
    }
}

/// Parameters whose values differ between the results, in key order.
pub(super) fn varying(results: &[&PointResult]) -> Vec<String> {
    let mut keys: Vec<&String> = results.iter().flat_map(|r| r.params.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| {
            let first = results[0].params.get(*k);
            results.iter().any(|r| r.params.get(*k) != first)
        })
        .cloned()
        .collect()
}
