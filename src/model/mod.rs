//! The run model: the data a measurement produces, a store keeps and a
//! report renders (`tunelab.run/1`, see docs/result-model.md). Pure data and
//! its display helpers, below the engine, store and report, so the layers
//! that persist and render a run need nothing that measures one.

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod applied;
pub(crate) mod diagnosis;
pub mod profile;
pub mod run;

/// Whether a larger or a smaller value of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// A parsed parameter value in base units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(u64),
    Float(f64),
    Text(String),
}

impl ParamValue {
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(v) => Some(*v as f64),
            ParamValue::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{}", if *b { "yes" } else { "no" }),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Text(s) => write!(f, "{s}"),
        }
    }
}
