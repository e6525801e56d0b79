//! speedscope's JSON file format (https://www.speedscope.app/file-format-schema.json):
//! one "sampled" profile per stored profile of a diagnosis (CPU in samples,
//! off-CPU in microseconds), frames shared, stacks root first with their
//! weights.

use serde_json::{json, Value};

use super::folded::profiles;
use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct Speedscope;

impl Exporter for Speedscope {
    fn name(&self) -> &'static str {
        "speedscope"
    }
    fn about(&self) -> &'static str {
        "a diagnosis's CPU and off-CPU profiles for speedscope"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let (all, _) = profiles(s, self.name())?;
        let mut frames: Vec<&str> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut out_profiles = Vec::new();
        for p in &all {
            let mut samples = Vec::with_capacity(p.stacks.len());
            let mut weights = Vec::with_capacity(p.stacks.len());
            for st in p.stacks {
                let stack: Vec<usize> = st
                    .stack
                    .split(';')
                    .map(|f| {
                        *index.entry(f).or_insert_with(|| {
                            frames.push(f);
                            frames.len() - 1
                        })
                    })
                    .collect();
                samples.push(stack);
                weights.push(st.samples);
            }
            let total: u64 = weights.iter().sum();
            out_profiles.push(json!({
                "type": "sampled",
                "name": format!("{} ({})", p.name, p.event),
                "unit": if p.unit == "microseconds" { "microseconds" } else { "none" },
                "startValue": 0,
                "endValue": total,
                "samples": samples,
                "weights": weights,
            }));
        }
        let run = s.run().map_or("", |r| r.id.as_str());
        let doc = json!({
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": { "frames": frames.iter().map(|f| json!({ "name": f })).collect::<Vec<Value>>() },
            "profiles": out_profiles,
            "name": format!("tunelab diagnosis {run}"),
            "activeProfileIndex": 0,
            "exporter": format!("tunelab {}", env!("CARGO_PKG_VERSION")),
        });
        Ok((serde_json::to_string(&doc)? + "\n").into_bytes())
    }
}
