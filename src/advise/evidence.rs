//! What the rules look at: configuration facts (from `inspect`) plus the
//! stored measurements that concern the same device.

use std::collections::BTreeMap;
use std::path::Path;

use crate::experiments::cpu::clock as cpu_clock;
use crate::experiments::flash::{au_size, open_units, steady_state};
use crate::experiments::io::{api, cache, pregrow, random, record_size};
use crate::experiments::sched::latency;
use crate::model::run::PointResult;
use crate::store::Store;
use crate::system::inspect::{inspect, Facts};

/// Every (experiment, metric) the advice reads, named by the experiments'
/// own constants; a test checks each pair against the registry, so renaming a
/// metric fails a test instead of silently removing a finding.
pub(crate) const READS: &[(&str, &str)] = &[
    (record_size::NAME, record_size::METRIC_WRITE_THROUGHPUT),
    (cache::NAME, cache::METRIC_DIRECT_THROUGHPUT),
    (api::NAME, api::METRIC_WRITE_THROUGHPUT),
    (pregrow::NAME, pregrow::METRIC_TOTAL_TIME),
    (random::NAME, random::METRIC_IOPS),
    (random::NAME, random::METRIC_LAT_P99),
    (random::NAME, random::METRIC_READ_P99),
    (latency::NAME, latency::METRIC_MAX),
    (cpu_clock::NAME, cpu_clock::METRIC_VS_MAX),
    (cpu_clock::NAME, cpu_clock::METRIC_CLOCK_MIN),
    (au_size::NAME, au_size::METRIC_MISALIGNED),
    (au_size::NAME, au_size::METRIC_UNIT),
    (open_units::NAME, open_units::METRIC_OPEN),
    (steady_state::NAME, steady_state::METRIC_CACHE),
    (steady_state::NAME, steady_state::METRIC_STEADY),
    (steady_state::NAME, steady_state::METRIC_BURST),
    (RECORDER, "record_fps"),
];

/// The recorder experiment whose `bitrate` the flash cache rule compares.
pub(crate) const RECORDER: &str = "io.stream";

/// The experiments of `READS`, each once.
fn experiments_read() -> Vec<&'static str> {
    let mut names: Vec<&str> = READS.iter().map(|(e, _)| *e).collect();
    names.dedup();
    names
}

/// A measured figure with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measured {
    pub(crate) value: f64,
    /// e.g. "run 20261120-… io.record-size mode=direct record=1 MiB"
    pub(crate) source: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Evidence {
    pub(crate) facts: Facts,
    /// The device's sustained write rate (B/s), from O_DIRECT measurements.
    pub(crate) write_throughput: Option<Measured>,
    /// io.api results (stdio buffering), newest run only.
    pub(crate) api: Vec<PointResult>,
    /// io.pregrow results, newest run only.
    pub(crate) pregrow: Vec<PointResult>,
    /// io.random results, newest run only.
    pub(crate) random_io: Vec<PointResult>,
    /// flash.* results (au-size, open-units, steady-state), newest run only.
    pub(crate) flash: Vec<PointResult>,
    /// io.stream results (the recorder's bit rate), newest run only.
    pub(crate) recorder: Vec<PointResult>,
    /// Runs whose monitor saw Dirty+Writeback above the throttle point:
    /// (run id, peak dirty+writeback bytes, throttle point bytes).
    pub(crate) throttled: Vec<(String, u64, u64)>,
    /// The run the stored evidence comes from, for messages.
    pub(crate) store_path: Option<String>,
    /// The newest stored `diagnose` run: (run id, its diagnosis).
    pub(crate) diagnosis: Option<(String, crate::model::diagnosis::Diagnosis)>,
    /// The newest run's sched.latency results (any disk): (run id, results).
    pub(crate) latency: Option<(String, Vec<PointResult>)>,
    /// The newest cpu.clock result of this machine: (run id, result).
    pub(crate) cpu_clock: Option<(String, PointResult)>,
}

/// Collect facts for `target` and the stored measurements of its device.
pub(crate) fn gather(target: &Path, store: Option<&Store>) -> Evidence {
    let facts = inspect(Some(target));
    let mut ev = Evidence {
        facts,
        ..Default::default()
    };
    if let Some(store) = store {
        ev.store_path = Some(store.location().to_string());
        let device = ev.facts.get("block.disk").map(String::from);
        collect_measurements(&mut ev, store, device.as_deref());
    }
    ev
}

/// How many of the newest runs advice looks at.
const RECENT_RUNS: usize = 200;

/// Read only what the rules use: the environments of recent runs, the
/// storage results of runs on the same disk, and each run's peak-dirty
/// monitor sample; never whole runs.
fn collect_measurements(ev: &mut Evidence, store: &Store, disk: Option<&str>) {
    let Ok(runs) = store.recent_environments(RECENT_RUNS) else {
        return;
    };
    let here = crate::system::env::machine_id(Path::new("/")).map(|m| m.0);
    for (id, environment) in &runs {
        // CPU results belong to the machine, not to a disk.
        if ev.cpu_clock.is_none()
            && here.is_some()
            && environment.get("machine.id") == here.as_ref()
        {
            ev.cpu_clock = store
                .results_in(id, &[cpu_clock::NAME])
                .unwrap_or_default()
                .into_iter()
                .find(|r| {
                    matches!(r.params.get("cpus"),
                        Some(crate::model::ParamValue::Text(t)) if t == "all")
                })
                .map(|r| (id.clone(), r));
        }
        let same_disk =
            disk.is_some() && environment.get("target.disk").map(String::as_str) == disk;
        let wanted = ev.write_throughput.is_none()
            || ev.api.is_empty()
            || ev.pregrow.is_empty()
            || ev.random_io.is_empty()
            || ev.flash.is_empty()
            || ev.recorder.is_empty();
        if same_disk && wanted {
            let results: Vec<PointResult> = store
                .results_in(id, &experiments_read())
                .unwrap_or_default()
                .into_iter()
                .filter(|r| measured_on(r, environment, disk))
                .collect();
            if ev.write_throughput.is_none() {
                ev.write_throughput = device_write_rate(id, &results);
            }
            let of = |exp: &str| -> Vec<PointResult> {
                results
                    .iter()
                    .filter(|r| r.experiment == exp)
                    .cloned()
                    .collect()
            };
            if ev.api.is_empty() {
                ev.api = of(api::NAME);
            }
            if ev.pregrow.is_empty() {
                ev.pregrow = of(pregrow::NAME);
            }
            if ev.random_io.is_empty() {
                ev.random_io = of(random::NAME);
            }
            if ev.recorder.is_empty() {
                ev.recorder = of(RECORDER);
            }
            if ev.flash.is_empty() {
                ev.flash = results
                    .iter()
                    .filter(|r| r.experiment.starts_with("flash."))
                    .cloned()
                    .collect();
            }
        }
        if ev.latency.is_none() {
            let r = store.results_in(id, &[latency::NAME]).unwrap_or_default();
            if !r.is_empty() {
                ev.latency = Some((id.clone(), r));
            }
        }
        if ev.diagnosis.is_none() && diagnose_run(environment) {
            if let Ok(run) = store.load(id) {
                ev.diagnosis = run.diagnosis.map(|d| (id.clone(), *d));
            }
        }
        // A throttled device drains slowly on purpose: its dirty-page peak
        // says nothing about the machine's own devices.
        if throttled_run(environment) {
            continue;
        }
        if let Ok(Some(s)) = store.peak_dirty_sample(id) {
            let (peak, point) = (
                s.dirty.dirty_bytes + s.dirty.writeback_bytes,
                s.dirty.throttle_point(),
            );
            if point > 0 && peak > point {
                ev.throttled.push((id.clone(), peak, point));
            }
        }
    }
}

/// Whether `r` was measured on `disk` itself, as the system uses it: not on
/// a lab file system's loop device, not under `--throttle`. Results stored
/// with their storage say so; older ones are judged by their `fs` lab tag
/// and the run's command line.
fn measured_on(
    r: &PointResult,
    environment: &BTreeMap<String, String>,
    disk: Option<&str>,
) -> bool {
    match &r.storage {
        Some(s) => s.is_native() && Some(s.disk.as_str()) == disk,
        None => {
            !r.params.contains_key("fs") && !lab_run(environment) && !throttled_run(environment)
        }
    }
}

fn argv_has(environment: &BTreeMap<String, String>, flag: &str) -> bool {
    environment.get("tool.argv").is_some_and(|a| {
        a.split_whitespace()
            .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
    })
}

/// Whether a run was made by `tunelab diagnose` (its words before `--`).
fn diagnose_run(environment: &BTreeMap<String, String>) -> bool {
    environment.get("tool.argv").is_some_and(|a| {
        a.split_whitespace()
            .take_while(|w| *w != "--")
            .any(|w| w == "diagnose")
    })
}

fn lab_run(environment: &BTreeMap<String, String>) -> bool {
    argv_has(environment, "--fs")
}

fn throttled_run(environment: &BTreeMap<String, String>) -> bool {
    argv_has(environment, "--throttle")
}

/// The best O_DIRECT write rate of a run: io.record-size mode=direct or
/// io.cache phase (a).
fn device_write_rate(run_id: &str, results: &[PointResult]) -> Option<Measured> {
    results
        .iter()
        .filter_map(|r| {
            let (metric, ok) = match r.experiment.as_str() {
                record_size::NAME => (
                    record_size::METRIC_WRITE_THROUGHPUT,
                    r.params
                        .get("mode")
                        .is_some_and(|m| m.to_string() == "direct"),
                ),
                cache::NAME => (cache::METRIC_DIRECT_THROUGHPUT, true),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::ParamValue;
    use crate::observe::dirty::DirtyState;
    use crate::observe::sampler::MonitorSample;
    use crate::store::tests::sample_run;

    /// A stored run on `disk`: one io.record-size `mode` result writing at
    /// `rate` B/s, and one monitor sample with `dirty` bytes dirty against
    /// a 100-byte throttle point.
    fn stored(store: &mut Store, disk: &str, mode: &str, rate: f64, dirty: u64) -> String {
        let mut run = sample_run(disk);
        run.environment
            .insert("target.disk".into(), disk.to_string());
        let r = &mut run.results[0];
        r.experiment = "io.record-size".into();
        r.params = [("mode".to_string(), ParamValue::Text(mode.into()))].into();
        r.metrics[0].name = "write_throughput".into();
        r.metrics[0].summary.median = rate;
        run.samples = vec![MonitorSample {
            t: 1.0,
            vmstat: Default::default(),
            disk: None,
            dirty: DirtyState {
                dirty_bytes: dirty,
                threshold_bytes: 100,
                background_threshold_bytes: 100,
                ..Default::default()
            },
        }];
        store.save(&run).unwrap();
        run.id
    }

    /// Issue 11 item 7: a `--fs ext4 --throttle` lab run is stored with the
    /// host target's environment (target.disk = the host's disk); its slow
    /// loop device must not become the host disk's write rate, and its
    /// dirty-page peak must not count either.
    #[test]
    fn lab_and_throttled_runs_are_not_evidence_for_the_host_disk() {
        use crate::model::run::StorageFact;
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let argv = "tunelab run io.record-size --fs ext4 --throttle write=2MB/s";
        // Stored with the storage it ran on (this build).
        let mut run = sample_run("lab");
        run.environment.insert("target.disk".into(), "vda".into());
        run.environment.insert("tool.argv".into(), argv.into());
        let r = &mut run.results[0];
        r.experiment = "io.record-size".into();
        r.params = [
            ("mode".to_string(), ParamValue::Text("direct".into())),
            ("fs".to_string(), ParamValue::Text("ext4".into())),
        ]
        .into();
        r.metrics[0].name = "write_throughput".into();
        r.metrics[0].summary.median = 2e6;
        r.storage = Some(StorageFact {
            path: "/tmp/tunelab-lab/mnt".into(),
            device: "loop7".into(),
            disk: "loop7".into(),
            fs: "ext4".into(),
            lab: Some("ext4".into()),
            throttle: Some("write=2000000B/s".into()),
            ..Default::default()
        });
        run.samples = vec![MonitorSample {
            t: 1.0,
            vmstat: Default::default(),
            disk: None,
            dirty: DirtyState {
                dirty_bytes: 900,
                threshold_bytes: 100,
                background_threshold_bytes: 100,
                ..Default::default()
            },
        }];
        store.save(&run).unwrap();
        // The same run as stored before results carried their storage.
        let mut old = run.clone();
        old.id = format!("{}-old", run.id);
        old.results[0].storage = None;
        store.save(&old).unwrap();
        let mut ev = Evidence::default();
        collect_measurements(&mut ev, &store, Some("vda"));
        assert_eq!(
            ev.write_throughput, None,
            "lab figure used for the host disk"
        );
        assert!(ev.throttled.is_empty(), "{:?}", ev.throttled);
        // A direct measurement of the host disk itself still counts.
        let host = stored(&mut store, "vda", "direct", 5e8, 10);
        let mut ev = Evidence::default();
        collect_measurements(&mut ev, &store, Some("vda"));
        let w = ev.write_throughput.expect("the host disk's own rate");
        assert!(w.source.contains(&host) && w.value == 5e8, "{w:?}");
    }

    #[test]
    fn evidence_comes_from_runs_on_the_same_disk_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mine = stored(&mut store, "vda", "direct", 5e8, 10);
        let other = stored(&mut store, "sdb", "direct", 9e9, 500);
        stored(&mut store, "vda", "buffered", 7e9, 0);
        let mut ev = Evidence::default();
        collect_measurements(&mut ev, &store, Some("vda"));
        let w = ev.write_throughput.expect("a direct write rate");
        assert_eq!(w.value, 5e8);
        assert!(w.source.contains(&mine), "{}", w.source);
        // Dirty-page throttling is a machine-wide fact: any run counts.
        assert_eq!(ev.throttled, [(other, 500, 100)]);
    }

    #[test]
    fn every_metric_the_advice_reads_exists() {
        for (exp, metric) in READS {
            let e = crate::experiments::registry::find(exp)
                .unwrap_or_else(|err| panic!("advice reads {exp}, which does not exist: {err}"));
            assert!(
                e.metrics().iter().any(|m| m.name == *metric),
                "advice reads {exp} metric {metric}, which {exp} does not declare"
            );
        }
    }
}
