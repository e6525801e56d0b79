//! The PostgreSQL backend, for a fleet of machines sharing one database
//! (`--db postgres://user:password@host/db`). A run's head (everything but
//! its results and monitor samples) is one JSONB document next to the
//! columns `runs` lists; results and samples are JSONB rows of their own, so
//! advice can read one experiment or one sample without a whole run.
//! Migrations are versioned in `tunelab_schema` and applied under an
//! advisory lock, so machines starting together do not race.

use std::cell::RefCell;
use std::collections::BTreeMap;

use postgres::{Client, NoTls};

use super::{Backend, Feed, RunInfo};
use crate::model::applied::AppliedChange;
use crate::model::run::{PointResult, Run};
use crate::observe::sampler::MonitorSample;
use crate::{Error, Result};

/// Migration N brings the database from version N-1 to N.
const MIGRATIONS: &[&str] = &[
    // 1: run heads, point results and monitor samples as JSONB.
    "CREATE TABLE runs (
        seq BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY, label TEXT NOT NULL, status TEXT NOT NULL,
        started TEXT NOT NULL, experiments TEXT NOT NULL,
        environment JSONB NOT NULL, head JSONB NOT NULL);
     CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
        experiment TEXT NOT NULL, result JSONB NOT NULL, PRIMARY KEY (run_id, idx));
     CREATE INDEX results_by_experiment ON results(experiment);
     CREATE TABLE monitor_samples (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
        sample JSONB NOT NULL, PRIMARY KEY (run_id, idx));",
    // 2: settings `tunelab apply` made persistent (one JSONB record each).
    "CREATE TABLE applied_changes (
        seq BIGSERIAL UNIQUE, id TEXT PRIMARY KEY, run_id TEXT NOT NULL, knob TEXT NOT NULL,
        state TEXT NOT NULL, applied_at TEXT NOT NULL, record JSONB NOT NULL);",
];

/// Any number of tunelab processes: one key for the migration lock.
const MIGRATION_LOCK: i64 = 0x0074_756e_656c_6162; // "tunelab"

pub(crate) struct Postgres {
    // postgres::Client needs &mut for every query; the store's readers take
    // &self, and a Store is used from one thread.
    client: RefCell<Client>,
}

fn db_error(e: postgres::Error) -> Error {
    Error::Environment(format!("result database (PostgreSQL): {}", explain(&e)))
}

/// The server's own message ("password authentication failed for user …")
/// or the cause of a connection failure, not just "db error".
fn explain(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The URL with its password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or("");
            format!("{scheme}://{name}:***@{host}")
        }
        _ => url.to_string(),
    }
}

impl Postgres {
    pub(crate) fn open(url: &str) -> Result<Postgres> {
        let mut client = Client::connect(url, NoTls).map_err(|e| {
            Error::environment(format!(
                "cannot connect to the result database {}: {} (is the server running and the \
                 URL right? e.g. postgres://user:password@host/dbname)",
                redact(url),
                explain(&e)
            ))
        })?;
        migrate(&mut client).map_err(|e| {
            Error::environment(format!(
                "result database {} cannot be used: {e}",
                redact(url)
            ))
        })?;
        Ok(Postgres {
            client: RefCell::new(client),
        })
    }

    fn results_where(&self, id: &str, experiments: Option<&[&str]>) -> Result<Vec<PointResult>> {
        let all: Vec<PointResult> = self.json_rows(
            "SELECT result::text FROM results WHERE run_id = $1 ORDER BY idx",
            id,
        )?;
        Ok(match experiments {
            Some(e) => all
                .into_iter()
                .filter(|r| e.contains(&r.experiment.as_str()))
                .collect(),
            None => all,
        })
    }

    /// Decode the single JSON text column of every row of `sql` (one `$1`).
    fn json_rows<T: serde::de::DeserializeOwned>(&self, sql: &str, id: &str) -> Result<Vec<T>> {
        let rows = self
            .client
            .borrow_mut()
            .query(sql, &[&id])
            .map_err(db_error)?;
        rows.iter()
            .map(|row| Ok(serde_json::from_str(row.get::<_, &str>(0))?))
            .collect()
    }
}

impl Postgres {
    /// One transaction: stored completely or not at all.
    fn save_runs(&mut self, runs: &[Run], replace: bool) -> Result<()> {
        let client = self.client.get_mut();
        let mut tx = client.transaction().map_err(db_error)?;
        for run in runs {
            insert_run(&mut tx, run, replace)?;
        }
        tx.commit().map_err(db_error)
    }
}

impl Backend for Postgres {
    fn save_change(&mut self, c: &AppliedChange) -> Result<()> {
        let record = serde_json::to_string(c)?;
        self.client
            .get_mut()
            .execute(
                "INSERT INTO applied_changes (id, run_id, knob, state, applied_at, record)
                 VALUES ($1, $2, $3, $4, $5, $6::text::jsonb)
                 ON CONFLICT (id) DO UPDATE SET run_id = $2, knob = $3, state = $4,
                     applied_at = $5, record = $6::text::jsonb",
                &[&c.id, &c.run_id, &c.knob, &c.state, &c.applied_at, &record],
            )
            .map_err(db_error)?;
        Ok(())
    }

    fn changes(&self) -> Result<Vec<AppliedChange>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT record::text FROM applied_changes ORDER BY applied_at DESC, seq DESC",
                &[],
            )
            .map_err(db_error)?;
        rows.iter()
            .map(|row| Ok(serde_json::from_str(row.get::<_, &str>(0))?))
            .collect()
    }

    /// Save a whole run in one transaction: stored completely or not at all.
    fn save(&mut self, run: &Run) -> Result<()> {
        self.save_runs(std::slice::from_ref(run), false)
    }

    /// Save the runs `feed` hands over in one transaction: all or none.
    fn save_all(&mut self, feed: &mut Feed) -> Result<usize> {
        let client = self.client.get_mut();
        let mut tx = client.transaction().map_err(db_error)?;
        let mut n = 0;
        feed(&mut |run| {
            insert_run(&mut tx, run, false)?;
            n += 1;
            Ok(())
        })?;
        tx.commit().map_err(db_error)?;
        Ok(n)
    }

    /// A study's growing run: the stored copy is replaced in one transaction.
    fn replace(&mut self, run: &Run) -> Result<()> {
        self.save_runs(std::slice::from_ref(run), true)
    }

    /// Runs, newest first (same second: the later save first).
    fn list(&self) -> Result<Vec<RunInfo>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT r.id, r.started, r.label, r.status, r.experiments,
                        (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id),
                        COALESCE(r.environment->>'fleet.host', r.environment->>'host.name'),
                        r.environment->>'machine.id'
                 FROM runs r ORDER BY r.seq DESC",
                &[],
            )
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| {
                let exps: String = row.get(4);
                RunInfo {
                    id: row.get(0),
                    started: row.get(1),
                    label: row.get(2),
                    status: row.get(3),
                    experiments: exps
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect(),
                    results: row.get::<_, i64>(5) as usize,
                    machine: row.get::<_, Option<String>>(6).unwrap_or_default(),
                    machine_id: row.get::<_, Option<String>>(7).unwrap_or_default(),
                }
            })
            .collect())
    }

    /// The run with exactly this id, if stored.
    fn load(&self, id: &str) -> Result<Option<Run>> {
        let head = self
            .client
            .borrow_mut()
            .query_opt("SELECT head::text FROM runs WHERE id = $1", &[&id])
            .map_err(db_error)?;
        let Some(head) = head else {
            return Ok(None);
        };
        let mut run: Run = serde_json::from_str(head.get::<_, &str>(0))?;
        run.results = self.results_where(id, None)?;
        run.samples = self.json_rows(
            "SELECT sample::text FROM monitor_samples WHERE run_id = $1 ORDER BY idx",
            id,
        )?;
        Ok(Some(run))
    }

    fn recent_environments(&self, limit: usize) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT id, environment::text FROM runs ORDER BY started DESC, seq DESC LIMIT $1",
                &[&(limit as i64)],
            )
            .map_err(db_error)?;
        rows.iter()
            .map(|row| Ok((row.get(0), serde_json::from_str(row.get::<_, &str>(1))?)))
            .collect()
    }

    fn results_in(&self, id: &str, experiments: &[&str]) -> Result<Vec<PointResult>> {
        self.results_where(id, Some(experiments))
    }

    /// The sample with the most Dirty + Writeback.
    fn peak_dirty_sample(&self, id: &str) -> Result<Option<MonitorSample>> {
        let mut v: Vec<MonitorSample> = self.json_rows(
            "SELECT sample::text FROM monitor_samples WHERE run_id = $1
             ORDER BY (sample->'dirty'->>'dirty_bytes')::numeric
                      + (sample->'dirty'->>'writeback_bytes')::numeric DESC, idx
             LIMIT 1",
            id,
        )?;
        Ok(v.pop())
    }

    /// Every run about `subject` in two queries (heads, then the results
    /// that matter without their series and histograms).
    fn runs_about(&self, subject: &str) -> Result<Vec<Run>> {
        let mut client = self.client.borrow_mut();
        let heads = client
            .query(
                "SELECT head::text FROM runs
                 WHERE id IN (SELECT run_id FROM results WHERE experiment = $1)
                    OR head->'study'->>'profile' = $1
                 ORDER BY started DESC, seq DESC",
                &[&subject],
            )
            .map_err(db_error)?;
        let mut runs: Vec<Run> = heads
            .iter()
            .map(|row| Ok(serde_json::from_str(row.get::<_, &str>(0))?))
            .collect::<Result<_>>()?;
        let at: std::collections::HashMap<String, usize> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        let rows = client
            .query(
                "SELECT run_id, (result - 'series' - 'histograms')::text
                 FROM results
                 WHERE experiment = $1
                    OR run_id IN (SELECT id FROM runs WHERE head->'study'->>'profile' = $1)
                 ORDER BY run_id, idx",
                &[&subject],
            )
            .map_err(db_error)?;
        for row in &rows {
            if let Some(&i) = at.get(row.get::<_, &str>(0)) {
                let r: PointResult = serde_json::from_str(row.get::<_, &str>(1))?;
                runs[i].results.push(r);
            }
        }
        for r in &mut runs {
            r.diagnosis = None;
        }
        Ok(runs)
    }
}

/// Insert one whole run (head, results, monitor samples) in `tx`; with
/// `replace`, a stored run of the same id goes first (its rows cascade).
fn insert_run(tx: &mut postgres::Transaction, run: &Run, replace: bool) -> Result<()> {
    let mut head = run.clone();
    head.results.clear();
    head.samples.clear();
    if replace {
        tx.execute("DELETE FROM runs WHERE id = $1", &[&run.id])
            .map_err(db_error)?;
    }
    tx.execute(
        "INSERT INTO runs (id, label, status, started, experiments, environment, head)
         VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7::text::jsonb)",
        &[
            &run.id,
            &run.label,
            &run.status.as_str(),
            &run.started,
            &run.experiments().join(","),
            &serde_json::to_string(&run.environment)?,
            &serde_json::to_string(&head)?,
        ],
    )
    .map_err(db_error)?;
    for (i, r) in run.results.iter().enumerate() {
        tx.execute(
            "INSERT INTO results (run_id, idx, experiment, result)
             VALUES ($1, $2, $3, $4::text::jsonb)",
            &[
                &run.id,
                &(i as i32),
                &r.experiment,
                &serde_json::to_string(r)?,
            ],
        )
        .map_err(db_error)?;
    }
    for (i, s) in run.samples.iter().enumerate() {
        tx.execute(
            "INSERT INTO monitor_samples (run_id, idx, sample) VALUES ($1, $2, $3::text::jsonb)",
            &[&run.id, &(i as i32), &serde_json::to_string(s)?],
        )
        .map_err(db_error)?;
    }
    Ok(())
}

/// Apply every migration the database has not seen, in one transaction
/// holding an advisory lock. A database from a newer tunelab is refused.
fn migrate(client: &mut Client) -> std::result::Result<(), String> {
    let known = MIGRATIONS.len() as i32;
    let mut tx = client.transaction().map_err(|e| e.to_string())?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(|e| e.to_string())?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS tunelab_schema (version INTEGER NOT NULL)")
        .map_err(|e| e.to_string())?;
    let current: i32 = tx
        .query_opt("SELECT version FROM tunelab_schema", &[])
        .map_err(|e| e.to_string())?
        .map_or(0, |r| r.get(0));
    if current > known {
        return Err(format!(
            "it was written by a newer tunelab (schema {current}, this build knows {known}); \
             upgrade tunelab"
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.batch_execute(sql)
            .map_err(|e| format!("migration to schema {} failed: {e}", i + 1))?;
    }
    if current < known {
        tx.execute("DELETE FROM tunelab_schema", &[])
            .map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT INTO tunelab_schema (version) VALUES ($1)",
            &[&known],
        )
        .map_err(|e| e.to_string())?;
    }
    tx.commit().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://fleet:s3cret@db.lan:5432/tunelab"),
            "postgres://fleet:***@db.lan:5432/tunelab"
        );
        assert_eq!(
            redact("postgres://fleet@db.lan/tunelab"),
            "postgres://fleet@db.lan/tunelab"
        );
    }
}
