//! Bencher Metric Format (BMF) JSON, which `bencher run --adapter json`
//! reads: `{benchmark: {measure: {value, lower_value, upper_value}}}`. A
//! run's benchmark is "experiment params", its measures the metrics (median,
//! bounds from the 95% CI); a comparison's measure is the ratio new/base
//! with its 95% CI.

use serde_json::{json, Map, Value};

use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct Bmf;

impl Exporter for Bmf {
    fn name(&self) -> &'static str {
        "bmf"
    }
    fn about(&self) -> &'static str {
        "Bencher Metric Format JSON (median, 95% CI bounds)"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        Ok((serde_json::to_string_pretty(&document(s))? + "\n").into_bytes())
    }
}

/// One measure; None when a figure is not finite (JSON has no NaN).
fn measure(value: f64, low: f64, high: f64) -> Option<Value> {
    [value, low, high]
        .iter()
        .all(|v| v.is_finite())
        .then(|| json!({ "value": value, "lower_value": low, "upper_value": high }))
}

fn add(doc: &mut Map<String, Value>, bench: String, name: &str, m: Option<Value>) {
    let Some(m) = m else { return };
    let entry = doc.entry(bench).or_insert_with(|| json!({}));
    if let Some(o) = entry.as_object_mut() {
        o.insert(name.to_string(), m);
    }
}

fn bench(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn document(s: &Subject) -> Value {
    let mut doc = Map::new();
    match *s {
        Subject::Run(r) | Subject::Timed(r, _) => {
            for p in &r.results {
                let b = bench(&[&p.experiment, &p.params_label()]);
                for m in &p.metrics {
                    let x = &m.summary;
                    add(
                        &mut doc,
                        b.clone(),
                        &m.name,
                        measure(x.median, x.ci95_low, x.ci95_high),
                    );
                }
            }
        }
        Subject::Comparison(c) => {
            for p in &c.pairs {
                for m in &p.metrics {
                    let x = m.comparison();
                    let b = bench(&[&p.experiment, &p.params(), &m.name]);
                    add(
                        &mut doc,
                        b,
                        "ratio",
                        measure(x.ratio, x.ci95_low, x.ci95_high),
                    );
                }
            }
        }
        Subject::Devices(c) => {
            for m in &c.metrics {
                for (i, d) in c.devices.iter().enumerate() {
                    if let Some(Some(x)) = m.vs_baseline.get(i) {
                        let b = bench(&[&d.name, &m.experiment, &m.params, &m.metric]);
                        add(
                            &mut doc,
                            b,
                            "ratio",
                            measure(x.ratio, x.ci95_low, x.ci95_high),
                        );
                    }
                }
            }
        }
    }
    Value::Object(doc)
}
