//! Runs stored in SQLite (bundled), with versioned schema migrations. Every
//! raw sample, the environment and the monitor samples are kept.

mod schema;

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::engine::model::{MetricResult, PointResult, Run, RunStatus, RUN_SCHEMA};
use crate::{Error, Result};

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// One line of `tunelab runs`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    pub id: String,
    pub started: String,
    pub label: String,
    pub status: String,
    pub experiments: Vec<String>,
    pub results: usize,
}

/// Where the database lives: `--db`, `TUNELAB_DB`, else
/// `$XDG_DATA_HOME/tunelab/results.db` (~/.local/share by default).
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("tunelab").join("results.db")
}

impl Store {
    pub fn open(path: &Path) -> Result<Store> {
        let s = path.to_string_lossy();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Err(Error::usage(
                "a PostgreSQL store is not supported by this build yet; give a SQLite file path to --db",
            ));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io("cannot create the database directory", dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| {
            Error::environment(format!(
                "cannot open result database {}: {e}",
                path.display()
            ))
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&conn).map_err(|e| {
            Error::environment(format!(
                "result database {} cannot be used: {e}",
                path.display()
            ))
        })?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Save a whole run in one transaction: it is stored completely or not at all.
    pub fn save(&mut self, run: &Run) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO runs (id, label, status, started, finished, tool_version, argv, environment,
                               quietness, warnings, experiments, study)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                run.id,
                run.label,
                run.status.as_str(),
                run.started,
                run.finished,
                run.tool_version,
                serde_json::to_string(&run.argv)?,
                serde_json::to_string(&run.environment)?,
                serde_json::to_string(&run.quietness)?,
                serde_json::to_string(&run.warnings)?,
                run.experiments().join(","),
                run.study.as_ref().map(serde_json::to_string).transpose()?,
            ],
        )?;
        for (i, r) in run.results.iter().enumerate() {
            tx.execute(
                "INSERT INTO results (run_id, idx, experiment, params, series, histograms, notes, elapsed_s)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    run.id,
                    i as i64,
                    r.experiment,
                    serde_json::to_string(&r.params)?,
                    serde_json::to_string(&r.series)?,
                    serde_json::to_string(&r.histograms)?,
                    serde_json::to_string(&r.notes)?,
                    r.elapsed_s,
                ],
            )?;
            for (j, m) in r.metrics.iter().enumerate() {
                tx.execute(
                    "INSERT INTO metrics (run_id, result_idx, idx, name, unit, better, samples, warmup, summary)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        run.id,
                        i as i64,
                        j as i64,
                        m.name,
                        m.unit,
                        serde_json::to_string(&m.better)?,
                        serde_json::to_string(&m.samples)?,
                        serde_json::to_string(&m.warmup)?,
                        serde_json::to_string(&m.summary)?,
                    ],
                )?;
            }
        }
        for (i, s) in run.samples.iter().enumerate() {
            tx.execute(
                "INSERT INTO monitor_samples (run_id, idx, t, data) VALUES (?1, ?2, ?3, ?4)",
                params![run.id, i as i64, s.t, serde_json::to_string(s)?],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Runs, newest first.
    pub fn list(&self) -> Result<Vec<RunInfo>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.started, r.label, r.status, r.experiments,
                    (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)
             FROM runs r ORDER BY r.started DESC, r.id DESC",
        )?;
        let rows = stmt.query_map([], |row| {
            let exps: String = row.get(4)?;
            Ok(RunInfo {
                id: row.get(0)?,
                started: row.get(1)?,
                label: row.get(2)?,
                status: row.get(3)?,
                experiments: exps
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                results: row.get::<_, i64>(5)? as usize,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Resolve a run reference: a full id, a unique prefix, `last` (or
    /// `latest`), or `last~N` (the Nth before the last).
    pub fn resolve(&self, reference: &str) -> Result<String> {
        let ids: Vec<String> = self.list()?.into_iter().map(|r| r.id).collect();
        let back = match reference {
            "last" | "latest" => Some(0),
            r => r
                .strip_prefix("last~")
                .and_then(|n| n.parse::<usize>().ok()),
        };
        if let Some(n) = back {
            return ids.get(n).cloned().ok_or_else(|| {
                Error::usage(format!(
                    "no run '{reference}': the database holds {} run(s)",
                    ids.len()
                ))
            });
        }
        if ids.iter().any(|i| i == reference) {
            return Ok(reference.to_string());
        }
        let matches: Vec<&String> = ids.iter().filter(|i| i.starts_with(reference)).collect();
        match matches.len() {
            1 => Ok(matches[0].clone()),
            0 => Err(Error::usage(format!(
                "no run '{reference}' in {} (see 'tunelab runs')",
                self.path.display()
            ))),
            n => Err(Error::usage(format!(
                "run reference '{reference}' is ambiguous: {n} runs start with it"
            ))),
        }
    }

    pub fn load(&self, reference: &str) -> Result<Run> {
        let id = self.resolve(reference)?;
        let run = self
            .conn
            .query_row(
                "SELECT id, label, status, started, finished, tool_version, argv, environment, quietness, warnings,
                        study
                 FROM runs WHERE id = ?1",
                [&id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, String>(6)?,
                        row.get::<_, String>(7)?,
                        row.get::<_, String>(8)?,
                        row.get::<_, String>(9)?,
                        row.get::<_, Option<String>>(10)?,
                    ))
                },
            )
            .optional()?
            .ok_or_else(|| Error::usage(format!("no run '{id}'")))?;
        let status = match run.2.as_str() {
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            _ => RunStatus::Failed,
        };
        Ok(Run {
            schema: RUN_SCHEMA.to_string(),
            id: run.0.clone(),
            label: run.1,
            status,
            started: run.3,
            finished: run.4,
            tool_version: run.5,
            argv: serde_json::from_str(&run.6)?,
            environment: serde_json::from_str(&run.7)?,
            quietness: serde_json::from_str(&run.8)?,
            warnings: serde_json::from_str(&run.9)?,
            results: self.load_results(&run.0)?,
            samples: self.load_samples(&run.0)?,
            study: run.10.as_deref().map(serde_json::from_str).transpose()?,
        })
    }

    fn load_results(&self, id: &str) -> Result<Vec<PointResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT idx, experiment, params, series, histograms, notes, elapsed_s
             FROM results WHERE run_id = ?1 ORDER BY idx",
        )?;
        let rows = stmt
            .query_map([id], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, f64>(6)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (idx, experiment, params, series, histograms, notes, elapsed_s) in rows {
            out.push(PointResult {
                experiment,
                params: serde_json::from_str(&params)?,
                metrics: self.load_metrics(id, idx)?,
                series: serde_json::from_str(&series)?,
                histograms: serde_json::from_str(&histograms)?,
                notes: serde_json::from_str(&notes)?,
                elapsed_s,
            });
        }
        Ok(out)
    }

    fn load_metrics(&self, id: &str, result_idx: i64) -> Result<Vec<MetricResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT name, unit, better, samples, warmup, summary FROM metrics
             WHERE run_id = ?1 AND result_idx = ?2 ORDER BY idx",
        )?;
        let rows = stmt
            .query_map(params![id, result_idx], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(name, unit, better, samples, warmup, summary)| {
                Ok(MetricResult {
                    name,
                    unit,
                    better: serde_json::from_str(&better)?,
                    samples: serde_json::from_str(&samples)?,
                    warmup: serde_json::from_str(&warmup)?,
                    summary: serde_json::from_str(&summary)?,
                })
            })
            .collect()
    }

    fn load_samples(&self, id: &str) -> Result<Vec<crate::observe::sampler::MonitorSample>> {
        let mut stmt = self
            .conn
            .prepare("SELECT data FROM monitor_samples WHERE run_id = ?1 ORDER BY idx")?;
        let rows = stmt
            .query_map([id], |row| row.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.iter().map(|d| Ok(serde_json::from_str(d)?)).collect()
    }

    /// Stored results of one experiment across all runs, newest first (for advice).
    pub fn results_of(&self, experiment: &str, limit: usize) -> Result<Vec<(String, PointResult)>> {
        let mut stmt = self.conn.prepare(
            "SELECT x.run_id FROM results x JOIN runs r ON r.id = x.run_id
             WHERE x.experiment = ?1 GROUP BY x.run_id ORDER BY r.started DESC LIMIT ?2",
        )?;
        let ids = stmt
            .query_map(params![experiment, limit as i64], |row| {
                row.get::<_, String>(0)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::new();
        for id in ids {
            for r in self.load_results(&id)? {
                if r.experiment == experiment {
                    out.push((id.clone(), r));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
