use super::*;
use crate::model::run::{new_run_id, now_rfc3339, MetricResult, RunStatus, RUN_SCHEMA};
use crate::model::Better;
use crate::model::ParamValue;
use crate::stats::summarize;

/// A small complete run (one io.file-read result), for tests elsewhere too.
pub(crate) fn sample_run(label: &str) -> Run {
    let samples = vec![1.0, 2.0, 3.0, 4.0, 5.0];
    Run {
        schema: RUN_SCHEMA.into(),
        id: new_run_id(),
        label: label.into(),
        status: RunStatus::Complete,
        started: now_rfc3339(),
        finished: now_rfc3339(),
        tool_version: "test".into(),
        argv: vec!["tunelab".into(), "run".into()],
        environment: [("kernel.release".to_string(), "6.1".to_string())].into(),
        quietness: Default::default(),
        results: vec![PointResult {
            experiment: "io.file-read".into(),
            params: [("chunk".to_string(), ParamValue::Int(65536))].into(),
            metrics: vec![MetricResult {
                name: "read_throughput".into(),
                unit: "B/s".into(),
                better: Better::Higher,
                summary: summarize(&samples),
                samples,
                warmup: vec![0.5],
            }],
            series: vec![],
            histograms: vec![],
            notes: vec!["a note".into()],
            elapsed_s: 1.5,
            validity: crate::model::run::Validity {
                warmup_discarded: 1,
                warmup_reason: "trial 1 was an outlier".into(),
                trials: vec![crate::model::run::TrialCheck {
                    seconds: 0.5,
                    other_cpu_pct: Some(40.0),
                    flags: vec![crate::model::run::Flag {
                        kind: "load".into(),
                        detail: "other processes used 40% of a CPU".into(),
                    }],
                    ..Default::default()
                }],
                skipped: vec!["thermal: none".into()],
            },
            ..Default::default()
        }],
        samples: vec![],
        warnings: vec![],
        study: None,
        diagnosis: None,
    }
}

/// A store on each backend this machine can test: SQLite always, PostgreSQL
/// when `TUNELAB_TEST_PG` holds a server URL (`.ci/run` starts one), in a
/// schema of its own that is dropped afterwards.
fn each_backend(test: impl Fn(Store)) {
    let dir = tempfile::tempdir().unwrap();
    test(Store::open(&dir.path().join("r.db")).unwrap());
    match pg::PgSchema::new() {
        Some(pg) => test(pg.store()),
        None => eprintln!("SKIPPED (PostgreSQL part): set TUNELAB_TEST_PG to a server URL"),
    }
}

/// The PostgreSQL test schema helper, shared with the integration tests
/// (where its items must be `pub`).
#[allow(unreachable_pub)]
#[path = "../../tests/common/pg.rs"]
mod pg;

impl pg::PgSchema {
    fn store(&self) -> Store {
        Store::open(Path::new(&self.url())).unwrap()
    }
}

#[test]
fn a_run_round_trips_through_the_database() {
    each_backend(|mut store| {
        let run = sample_run("before");
        store.save(&run).unwrap();
        let back = store.load(&run.id).unwrap();
        assert_eq!(back.results, run.results);
        assert_eq!(back.environment, run.environment);
        assert_eq!(back.label, "before");
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.resolve("last").unwrap(), run.id);
        assert_eq!(store.resolve(&run.id[..15]).unwrap(), run.id);
        assert_eq!(store.resolve("nope").unwrap_err().exit_code(), 2);
        let envs = store.recent_environments(5).unwrap();
        assert_eq!(envs, [(run.id.clone(), run.environment.clone())]);
        assert_eq!(
            store.results_in(&run.id, &["io.file-read"]).unwrap().len(),
            1
        );
        assert!(store.results_in(&run.id, &["io.api"]).unwrap().is_empty());
        assert_eq!(store.peak_dirty_sample(&run.id).unwrap(), None);
    });
}

#[test]
fn runs_started_in_the_same_second_keep_their_order() {
    each_backend(|mut store| {
        // Ids carry a random suffix: "z…" would sort after "a…" by id.
        let mut first = sample_run("first");
        let mut second = sample_run("second");
        first.id = "20261121-010203-ffff".into();
        second.id = "20261121-010203-0000".into();
        second.started = first.started.clone();
        store.save(&first).unwrap();
        store.save(&second).unwrap();
        assert_eq!(store.resolve("last").unwrap(), second.id);
        assert_eq!(store.resolve("last~1").unwrap(), first.id);
    });
}

#[test]
fn a_duplicate_id_saves_nothing() {
    each_backend(|mut store| {
        let run = sample_run("x");
        store.save(&run).unwrap();
        assert!(store.save(&run).is_err());
        assert_eq!(
            store.list().unwrap().len(),
            1,
            "the failed save left no partial run"
        );
    });
}

#[test]
fn reopening_keeps_the_schema_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    drop(Store::open(&path).unwrap());
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let e = Store::open(&path).err().unwrap();
    assert_eq!(e.exit_code(), 4);
    assert!(e.to_string().contains("newer tunelab"), "{e}");
}

#[test]
fn the_peak_dirty_sample_is_the_one_with_most_dirty_plus_writeback() {
    use crate::observe::dirty::DirtyState;
    use crate::observe::sampler::MonitorSample;
    each_backend(|mut store| {
        let mut run = sample_run("dirty");
        run.samples = [(10, 5), (40, 30), (60, 0)]
            .iter()
            .enumerate()
            .map(|(i, &(d, w))| MonitorSample {
                t: i as f64,
                vmstat: Default::default(),
                disk: None,
                dirty: DirtyState {
                    dirty_bytes: d,
                    writeback_bytes: w,
                    ..Default::default()
                },
            })
            .collect();
        store.save(&run).unwrap();
        let peak = store.peak_dirty_sample(&run.id).unwrap().unwrap();
        assert_eq!(peak, run.samples[1]);
    });
}

#[test]
fn a_postgres_schema_from_a_newer_tunelab_is_refused() {
    let Some(pg) = pg::PgSchema::new() else {
        return eprintln!("SKIPPED: set TUNELAB_TEST_PG to a PostgreSQL server URL");
    };
    drop(pg.store());
    drop(pg.store()); // reopening migrates nothing
    let mut c = ::postgres::Client::connect(&pg.url(), ::postgres::NoTls).unwrap();
    c.batch_execute("UPDATE tunelab_schema SET version = 99")
        .unwrap();
    let e = Store::open(Path::new(&pg.url())).err().unwrap();
    assert_eq!(e.exit_code(), 4);
    assert!(e.to_string().contains("newer tunelab"), "{e}");
}

#[test]
fn an_unreachable_postgres_server_is_a_clear_environment_error() {
    let e = Store::open(Path::new("postgres://fleet:s3cret@127.0.0.1:1/tunelab"))
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 4);
    let msg = e.to_string();
    assert!(
        msg.contains("cannot connect") && msg.contains("fleet:***@"),
        "{msg}"
    );
    assert!(!msg.contains("s3cret"), "{msg}");
}

#[test]
fn imports_keep_ids_skip_stored_runs_and_are_all_or_nothing() {
    use crate::model::run::StorageFact;
    each_backend(|mut store| {
        let mut board = sample_run("board");
        board
            .environment
            .insert("host.name".into(), "board-a".into());
        // A parameter of an experiment this build does not know, whose kind
        // came with the run; and the storage it ran on.
        board.results[0].experiment = "io.from-a-newer-build".into();
        board.results[0].params = [("record".to_string(), ParamValue::Int(65536))].into();
        board.results[0]
            .param_kinds
            .insert("record".into(), "size".into());
        board.results[0].storage = Some(StorageFact {
            path: "/data".into(),
            device: "mmcblk0p2".into(),
            disk: "mmcblk0".into(),
            fs: "ext4".into(),
            ..Default::default()
        });
        let done = store.import(std::slice::from_ref(&board)).unwrap();
        assert_eq!(done[0].outcome, "imported");
        assert_eq!(done[0].machine, "board-a");
        let back = store.load(&board.id).unwrap();
        assert_eq!(back.results, board.results);
        assert_eq!(back.results[0].params_label(), "record=64 KiB");
        assert_eq!(store.list().unwrap()[0].machine, "board-a");
        // Again, with a new run next to it: the stored one is a no-op.
        let other = sample_run("second");
        let done = store.import(&[board.clone(), other.clone()]).unwrap();
        let outcomes: Vec<&str> = done.iter().map(|d| d.outcome).collect();
        assert_eq!(outcomes, ["already stored", "imported"]);
        assert_eq!(store.list().unwrap().len(), 2);
        // A different run under a stored id is refused, and the good run
        // offered with it is not stored either.
        let mut clash = sample_run("clash");
        clash.id = board.id.clone();
        clash.started = "2001-01-01T00:00:00Z".into();
        let fresh = sample_run("fresh");
        let e = store.import(&[fresh.clone(), clash]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            store.load(&fresh.id).is_err(),
            "a partial import was stored"
        );
        // Two different runs under one id in the same batch: refused, none stored.
        let dup = sample_run("dup");
        let mut dup2 = dup.clone();
        dup2.started = "2001-01-01T00:00:00Z".into();
        assert!(store.import(&[dup.clone(), dup2]).is_err());
        assert!(store.load(&dup.id).is_err());
        // A feed that fails after handing over a run (the file went bad on
        // the second pass) leaves nothing stored.
        let half = sample_run("half");
        let e = store
            .import_save(&mut |sink| {
                sink(&half)?;
                Err(crate::Error::usage("the file changed"))
            })
            .unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(store.load(&half.id).is_err(), "a partial import was stored");
        assert_eq!(store.import_save(&mut |sink| sink(&half)).unwrap(), 1);
        assert!(store.load(&half.id).is_ok());
    });
}

#[test]
fn a_schema_2_database_migrates_and_its_results_read_without_the_new_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let run = sample_run("old");
    {
        let mut store = Store::open(&path).unwrap();
        store.save(&run).unwrap();
    }
    // Make it a schema-2 database as an older tunelab left it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE results DROP COLUMN param_kinds; ALTER TABLE results DROP COLUMN storage;
         ALTER TABLE results DROP COLUMN validity; ALTER TABLE runs DROP COLUMN diagnosis;
         DROP TABLE applied_changes;
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    let store = Store::open(&path).unwrap();
    let back = store.load(&run.id).unwrap();
    assert_eq!(back.results[0].storage, None);
    assert!(back.results[0].param_kinds.is_empty());
    assert!(back.diagnosis.is_none());
    assert!(back.results[0].validity.is_empty());
    // Display falls back to the CLI's legacy lookup: tested in
    // experiments::registry (the store does not know the registry).
}

#[test]
fn runs_about_reads_the_subjects_runs_and_results_only() {
    each_backend(|mut store| {
        // a: the experiment; b: another experiment only; c: both, with two
        // metrics; d: a study of profile "quick" measuring something else.
        let mut a = sample_run("a");
        // The device it ran on comes along (a point's history is of one device).
        a.results[0].storage = Some(crate::model::run::StorageFact {
            device: "mmcblk0p2".into(),
            fs: "ext4".into(),
            ..Default::default()
        });
        let mut b = sample_run("b");
        b.id = format!("{}-b", a.id);
        b.results[0].experiment = "io.api".into();
        let mut c = sample_run("c");
        c.id = format!("{}-c", a.id);
        let mut other = c.results[0].clone();
        other.experiment = "io.api".into();
        c.results.insert(0, other);
        let mut extra = c.results[1].metrics[0].clone();
        extra.name = "second".into();
        c.results[1].metrics.push(extra);
        let mut d = sample_run("d");
        d.id = format!("{}-d", a.id);
        d.results[0].experiment = "mem.bandwidth".into();
        d.study = Some(crate::model::run::StudySummary {
            profile: "quick".into(),
            title: "quick".into(),
            issues: vec![],
        });
        for r in [&a, &b, &c, &d] {
            store.save(r).unwrap();
        }
        let mut got = store.runs_about("io.file-read").unwrap();
        got.sort_by(|x, y| x.id.cmp(&y.id));
        let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, [a.id.as_str(), c.id.as_str()]);
        assert_eq!(got[0].environment, a.environment);
        // Only the subject's result, with its metrics in order.
        assert_eq!(got[1].results.len(), 1);
        let r = &got[1].results[0];
        assert_eq!(r.experiment, "io.file-read");
        assert_eq!(r.params, c.results[1].params);
        assert_eq!(r.metrics, c.results[1].metrics);
        // Validity comes along (history marks change points on flagged
        // runs); the series stay behind.
        assert_eq!(
            serde_json::to_value(&r.validity).unwrap(),
            serde_json::to_value(&c.results[1].validity).unwrap()
        );
        assert!(r.series.is_empty());
        assert_eq!(got[0].results[0].storage, a.results[0].storage);
        // A study of the profile brings every result of the run.
        let study = store.runs_about("quick").unwrap();
        assert_eq!(study.len(), 1);
        assert_eq!(study[0].results[0].experiment, "mem.bandwidth");
        assert!(store.runs_about("nothing").unwrap().is_empty());
        assert_eq!(store.load_id(&b.id).unwrap().label, "b");
    });
}

/// Runs keep their figures as JSON text in the store: a value must read back
/// as the same f64 it was written as (serde_json's `float_roundtrip`), or an
/// exported run no longer matches its stored self and `import` refuses it as
/// a different run. 11680095458.287199 read back one ULP off without it.
#[test]
fn figures_read_back_from_json_text_bit_for_bit() {
    for v in [
        11680095458.287199_f64,
        14962473308.463253,
        16759389269.959417,
        10714927058.656681,
    ] {
        let text = serde_json::to_string(&v).unwrap();
        let back: f64 = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_bits(), v.to_bits(), "{text}");
    }
}
