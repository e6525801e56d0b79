//! What the rules look at: configuration facts (from `inspect`) plus the
//! stored measurements that concern the same device.

use std::path::Path;

use crate::engine::model::PointResult;
use crate::store::Store;
use crate::system::inspect::{inspect, Facts};

/// A measured figure with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub value: f64,
    /// e.g. "run 20261120-… io.record-size mode=direct record=1 MiB"
    pub source: String,
}

#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub facts: Facts,
    /// The device's sustained write rate (B/s), from O_DIRECT measurements.
    pub write_throughput: Option<Measured>,
    /// io.api results (stdio buffering), newest run only.
    pub api: Vec<PointResult>,
    /// io.pregrow results, newest run only.
    pub pregrow: Vec<PointResult>,
    /// Runs whose monitor saw Dirty+Writeback above the throttle point:
    /// (run id, peak dirty+writeback bytes, throttle point bytes).
    pub throttled: Vec<(String, u64, u64)>,
    /// The run the stored evidence comes from, for messages.
    pub store_path: Option<String>,
}

/// Collect facts for `target` and the stored measurements of its device.
pub fn gather(target: &Path, store: Option<&Store>) -> Evidence {
    let facts = inspect(Some(target));
    let mut ev = Evidence {
        facts,
        ..Default::default()
    };
    if let Some(store) = store {
        ev.store_path = Some(store.path().display().to_string());
        let device = ev.facts.get("block.disk").map(String::from);
        collect_measurements(&mut ev, store, device.as_deref());
    }
    ev
}

fn collect_measurements(ev: &mut Evidence, store: &Store, disk: Option<&str>) {
    let Ok(runs) = store.list() else { return };
    for info in runs.iter().take(200) {
        let Ok(run) = store.load(&info.id) else {
            continue;
        };
        let same_disk =
            disk.is_some() && run.environment.get("target.disk").map(String::as_str) == disk;
        if same_disk && ev.write_throughput.is_none() {
            ev.write_throughput = device_write_rate(&run.id, &run.results);
        }
        if same_disk && ev.api.is_empty() {
            ev.api = run
                .results
                .iter()
                .filter(|r| r.experiment == "io.api")
                .cloned()
                .collect();
        }
        if same_disk && ev.pregrow.is_empty() {
            ev.pregrow = run
                .results
                .iter()
                .filter(|r| r.experiment == "io.pregrow")
                .cloned()
                .collect();
        }
        let peak = run
            .samples
            .iter()
            .map(|s| {
                (
                    s.dirty.dirty_bytes + s.dirty.writeback_bytes,
                    s.dirty.throttle_point(),
                )
            })
            .max();
        if let Some((peak, point)) = peak.filter(|(p, t)| *t > 0 && p > t) {
            ev.throttled.push((run.id.clone(), peak, point));
        }
    }
}

/// The best O_DIRECT write rate of a run: io.record-size mode=direct or
/// io.cache phase (a).
fn device_write_rate(run_id: &str, results: &[PointResult]) -> Option<Measured> {
    results
        .iter()
        .filter_map(|r| {
            let (metric, ok) = match r.experiment.as_str() {
                "io.record-size" => (
                    "write_throughput",
                    r.params
                        .get("mode")
                        .is_some_and(|m| m.to_string() == "direct"),
                ),
                "io.cache" => ("direct_throughput", true),
                _ => return None,
            };
            let m = r.metric(metric).filter(|_| ok)?;
            Some(Measured {
                value: m.summary.median,
                source: format!(
                    "run {run_id}: {} {} {metric}",
                    r.experiment,
                    r.params_label()
                ),
            })
        })
        .max_by(|a, b| a.value.total_cmp(&b.value))
}
