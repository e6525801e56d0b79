//! The SQLite backend (the default): normalised tables, raw samples as JSON
//! text, versioned migrations in `schema`.
//!
//! The backend's connection, errors and queries are here; `rows` maps a
//! run to its rows and back.

mod rows;

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use super::{schema, Backend, Feed, RunInfo};
use crate::model::applied::AppliedChange;
use crate::model::run::{MetricResult, PointResult, Run};
use crate::observe::sampler::MonitorSample;
use crate::{Error, Result};

use rows::{insert_run, json, json_col, json_text, metric_at, run_head};

pub(crate) struct Sqlite {
    conn: Connection,
    path: std::path::PathBuf,
}

impl Sqlite {
    pub(crate) fn open(path: &Path) -> Result<Sqlite> {
        if path.is_dir() {
            return Err(Error::usage(format!(
                "the result database {} is a directory: give a file path (e.g. {})",
                path.display(),
                path.join("results.db").display()
            )));
        }
        // A device or a pipe (`--db /dev/null`) is no database: SQLite would
        // only say "disk I/O error" when it first writes.
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.is_file() {
                return Err(Error::usage(format!(
                    "the result database {} is not a regular file (a device, a pipe or a \
                     socket): give a file path, or --no-store to keep nothing",
                    path.display()
                )));
            }
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io("cannot create the database directory", dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| {
            Error::environment(format!(
                "cannot open result database {}: {e}{}",
                path.display(),
                access_hint(path)
            ))
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&conn).map_err(|e| {
            // SAFETY: as in write_failure: reads the last errno SQLite saw.
            let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) };
            let e = if errno == rustix::io::Errno::FBIG.raw_os_error() {
                "the file size limit (ulimit -f, RLIMIT_FSIZE) is below what the database \
                 needs: raise it (ulimit -f unlimited)"
                    .to_string()
            } else {
                e
            };
            Error::environment(format!(
                "result database {} cannot be used: {e}{}",
                path.display(),
                access_hint(path)
            ))
        })?;
        Ok(Sqlite {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn load_results(&self, id: &str) -> Result<Vec<PointResult>> {
        self.load_results_where(id, |_| true)
    }

    fn load_results_where(
        &self,
        id: &str,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<PointResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT idx, experiment, params, series, histograms, notes, elapsed_s, validity,
                    param_kinds, storage
             FROM results WHERE run_id = ?1 ORDER BY idx",
        )?;
        let rows = stmt
            .query_map([id], |row| {
                let result = PointResult {
                    experiment: row.get(1)?,
                    params: json_col(row, 2)?,
                    metrics: Vec::new(),
                    series: json_col(row, 3)?,
                    histograms: json_col(row, 4)?,
                    notes: json_col(row, 5)?,
                    elapsed_s: row.get(6)?,
                    validity: match row.get::<_, Option<String>>(7)? {
                        Some(text) => json_text(&text, 7)?,
                        None => Default::default(),
                    },
                    param_kinds: match row.get::<_, Option<String>>(8)? {
                        Some(text) => json_text(&text, 8)?,
                        None => Default::default(),
                    },
                    storage: match row.get::<_, Option<String>>(9)? {
                        Some(text) => json_text(&text, 9)?,
                        None => None,
                    },
                };
                Ok((row.get::<_, i64>(0)?, result))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .filter(|(_, r)| wanted(&r.experiment))
            .map(|(idx, mut r)| {
                r.metrics = self.load_metrics(id, idx)?;
                Ok(r)
            })
            .collect()
    }

    fn load_metrics(&self, id: &str, result_idx: i64) -> Result<Vec<MetricResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT name, unit, better, samples, warmup, summary FROM metrics
             WHERE run_id = ?1 AND result_idx = ?2 ORDER BY idx",
        )?;
        let rows = stmt.query_map(params![id, result_idx], |row| metric_at(row, 0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn load_samples(&self, id: &str) -> Result<Vec<MonitorSample>> {
        let mut stmt = self
            .conn
            .prepare("SELECT data FROM monitor_samples WHERE run_id = ?1 ORDER BY idx")?;
        let rows = stmt.query_map([id], |row| json_col(row, 0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// Why a database file cannot be created or written, when permissions
/// are the reason (SQLite itself only says "unable to open database file").
fn access_hint(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let writable = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map(|c| rustix::fs::access(&c, rustix::fs::Access::WRITE_OK).is_ok())
            .unwrap_or(true)
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Some(why) = locked(path) {
        format!(" ({why})")
    } else if path.exists() && !writable(path) {
        format!(
            " (permission denied: {} is not writable by this user; fix its permissions or \
             choose another --db)",
            path.display()
        )
    } else if !writable(dir) {
        format!(
            " (permission denied: the directory {} is not writable by this user, and SQLite \
             needs to create files there; fix its permissions or choose another --db)",
            dir.display()
        )
    } else {
        String::new()
    }
}

/// Why the database or its directory cannot be written whatever the
/// permissions: an immutable or append-only flag.
fn locked(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let what = immutable(path).or_else(|| immutable(dir))?;
    Some(format!(
        "{what} is marked immutable or append-only (chattr +i/+a), which even root cannot \
         write through: lsattr shows it, chattr -i -a removes it; or choose another --db"
    ))
}

/// `path`, named for a message, when its inode flags forbid writing
/// (FS_IMMUTABLE_FL, FS_APPEND_FL): permissions are not the cause then.
fn immutable(path: &Path) -> Option<String> {
    use rustix::fs::IFlags;
    let f = std::fs::File::open(path).ok()?;
    let flags = rustix::fs::ioctl_getflags(&f).ok()?;
    flags
        .intersects(IFlags::IMMUTABLE | IFlags::APPEND)
        .then(|| path.display().to_string())
}

/// Why SQLite could not write: the OS error behind it when there was one
/// (sqlite3_system_errno), else what the SQLite code means.
fn write_failure(conn: &Connection, path: &Path, e: &rusqlite::Error) -> String {
    // SAFETY: the handle is valid for the connection's lifetime; the call
    // only reads the last errno SQLite recorded.
    let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) };
    let code = e.sqlite_error_code();
    let meaning = match (errno, code) {
        (n, _) if n == rustix::io::Errno::FBIG.raw_os_error() => {
            "the file size limit (ulimit -f, RLIMIT_FSIZE) is below the \
             database's size: raise it (ulimit -f unlimited)"
                .into()
        }
        (n, _) if n > 0 => format!("{} (errno {n})", std::io::Error::from_raw_os_error(n)),
        (_, Some(rusqlite::ErrorCode::ReadOnly)) if locked(path).is_some() => {
            locked(path).unwrap_or_default()
        }
        (_, Some(rusqlite::ErrorCode::ReadOnly)) => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            let ro_fs = rustix::fs::statvfs(dir.unwrap_or(Path::new(".")))
                .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY));
            if ro_fs {
                "the file system holding the database is mounted read-only (EROFS)".into()
            } else {
                format!(
                    "the database is read-only (EACCES: the file or its directory is not \
                     writable){}",
                    access_hint(path)
                )
            }
        }
        (_, Some(rusqlite::ErrorCode::DiskFull)) => "no space left on the device".into(),
        (_, Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)) => {
            "another process holds the database locked".into()
        }
        _ => e.to_string(),
    };
    meaning
}

impl Sqlite {
    /// Save a whole run in one transaction: it is stored completely or not at
    /// all. A run already stored under the same id is replaced in the same
    /// transaction (a study saves its growing run after each key issue).
    /// Save runs in one transaction: all of them or none. With `replace`,
    /// a run already stored under the same id is replaced (a study's
    /// growing run); without, a duplicate id is an error.
    fn save(&mut self, runs: &[Run], replace: bool) -> Result<()> {
        self.save_tx(runs, replace).map_err(|e| {
            let why = write_failure(&self.conn, &self.path, &e);
            let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
            Error::environment(format!(
                "could not store run {} in {}: {why}; the results above are not saved \
                 (free space, make the file writable, or choose another --db)",
                ids.join(", "),
                self.path.display()
            ))
        })
    }

    fn save_tx(&mut self, runs: &[Run], replace: bool) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        for run in runs {
            insert_run(&tx, run, replace)?;
        }
        tx.commit()
    }
}

impl Backend for Sqlite {
    fn save_change(&mut self, c: &AppliedChange) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO applied_changes (id, run_id, knob, state, applied_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![c.id, c.run_id, c.knob, c.state, c.applied_at, json(c)?],
            )
            .map_err(|e| {
                Error::environment(format!(
                    "could not record the applied change {} in {}: {}",
                    c.id,
                    self.path.display(),
                    write_failure(&self.conn, &self.path, &e)
                ))
            })?;
        Ok(())
    }

    fn changes(&self) -> Result<Vec<AppliedChange>> {
        let mut stmt = self
            .conn
            .prepare("SELECT record FROM applied_changes ORDER BY applied_at DESC, rowid DESC")?;
        let rows = stmt.query_map([], |row| json_col(row, 0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn save(&mut self, run: &Run) -> Result<()> {
        Sqlite::save(self, std::slice::from_ref(run), false)
    }

    /// The runs `feed` hands over, in one transaction: all or none. A
    /// database failure is worded as `save` words it, naming the run.
    fn save_all(&mut self, feed: &mut Feed) -> Result<usize> {
        let mut n = 0;
        let mut failed: Option<(String, rusqlite::Error)> = None;
        let outcome = match self.conn.transaction() {
            Err(e) => {
                failed = Some((String::new(), e));
                Ok(())
            }
            Ok(tx) => {
                let fed = feed(&mut |run| match insert_run(&tx, run, false) {
                    Ok(()) => {
                        n += 1;
                        Ok(())
                    }
                    Err(e) => {
                        let why = e.to_string();
                        failed = Some((run.id.clone(), e));
                        Err(Error::environment(why))
                    }
                });
                // Dropping the transaction without commit rolls it back.
                match fed {
                    Ok(()) if failed.is_none() => tx.commit().or_else(|e| {
                        failed = Some((String::new(), e));
                        Ok(())
                    }),
                    other => other,
                }
            }
        };
        if let Some((id, e)) = failed {
            let why = write_failure(&self.conn, &self.path, &e);
            return Err(Error::environment(format!(
                "could not store run {id} in {}: {why}; nothing was saved \
                 (free space, make the file writable, or choose another --db)",
                self.path.display()
            )));
        }
        outcome.map(|()| n)
    }

    fn replace(&mut self, run: &Run) -> Result<()> {
        Sqlite::save(self, std::slice::from_ref(run), true)
    }

    /// Runs, the latest saved first (rowid): `last` is what was stored
    /// last, never what a run (an imported one) claims as its start.
    fn list(&self) -> Result<Vec<RunInfo>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.started, r.label, r.status, r.experiments,
                    (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id),
                    COALESCE(json_extract(r.environment, '$.\"fleet.host\"'),
                             json_extract(r.environment, '$.\"host.name\"')),
                    json_extract(r.environment, '$.\"machine.id\"')
             FROM runs r ORDER BY r.rowid DESC",
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
                machine: row.get::<_, Option<String>>(6)?.unwrap_or_default(),
                machine_id: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The run with exactly this id, if stored.
    fn load(&self, id: &str) -> Result<Option<Run>> {
        let run = self
            .conn
            .query_row(
                "SELECT id, label, status, started, finished, tool_version, argv, environment, quietness, warnings,
                        study, diagnosis
                 FROM runs WHERE id = ?1",
                [id],
                |row| {
                    let diagnosis: Option<String> = row.get(11)?;
                    Ok(Run {
                        diagnosis: diagnosis
                            .as_deref()
                            .map(|s| json_text(s, 11))
                            .transpose()?,
                        ..run_head(row)?
                    })
                },
            )
            .optional()?;
        let Some(mut run) = run else {
            return Ok(None);
        };
        run.results = self.load_results(id)?;
        run.samples = self.load_samples(id)?;
        Ok(Some(run))
    }

    /// Id and environment of the newest `limit` runs, newest first, without
    /// their results or samples (for advice).
    fn recent_environments(&self, limit: usize) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, environment FROM runs ORDER BY started DESC, rowid DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], |row| Ok((row.get(0)?, json_col(row, 1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A run's results of the given experiments only.
    fn results_in(&self, id: &str, experiments: &[&str]) -> Result<Vec<PointResult>> {
        self.load_results_where(id, |e| experiments.contains(&e))
    }

    /// The monitor sample of a run with the most Dirty + Writeback (None: the
    /// run has no samples). SQLite returns the row the max() came from.
    fn peak_dirty_sample(&self, id: &str) -> Result<Option<MonitorSample>> {
        let data: Option<String> = self
            .conn
            .query_row(
                "SELECT data, MAX(json_extract(data, '$.dirty.dirty_bytes')
                                 + json_extract(data, '$.dirty.writeback_bytes'))
                 FROM monitor_samples WHERE run_id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?
            .flatten();
        data.map(|d| json_text(&d, 0).map_err(Error::from))
            .transpose()
    }

    /// Every run about `subject` in three queries (heads, results, metrics)
    /// instead of a `load` per run: a history over 100,000 runs reads only
    /// what it shows.
    fn runs_about(&self, subject: &str) -> Result<Vec<Run>> {
        let mut heads = self.conn.prepare(
            "SELECT id, label, status, started, finished, tool_version, argv, environment,
                    quietness, warnings, study
             FROM runs
             WHERE id IN (SELECT run_id FROM results WHERE experiment = ?1)
                OR json_extract(study, '$.profile') = ?1
             ORDER BY started DESC, rowid DESC",
        )?;
        let mut runs: Vec<Run> = heads
            .query_map([subject], run_head)?
            .collect::<rusqlite::Result<_>>()?;
        let at: std::collections::HashMap<String, usize> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        // The results that matter: the subject's, or all of a study of it.
        const WHICH: &str = "(r.experiment = ?1 OR r.run_id IN
                 (SELECT id FROM runs WHERE json_extract(study, '$.profile') = ?1))";
        let mut results = self.conn.prepare(&format!(
            "SELECT r.run_id, r.idx, r.experiment, r.params, r.notes, r.elapsed_s, r.param_kinds,
                    r.validity, r.storage
             FROM results r WHERE {WHICH} ORDER BY r.run_id, r.idx"
        ))?;
        let mut by_key: std::collections::HashMap<(String, i64), (usize, usize)> =
            std::collections::HashMap::new();
        let rows = results.query_map([subject], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                PointResult {
                    experiment: row.get(2)?,
                    params: json_col(row, 3)?,
                    metrics: Vec::new(),
                    notes: json_col(row, 4)?,
                    elapsed_s: row.get(5)?,
                    param_kinds: match row.get::<_, Option<String>>(6)? {
                        Some(text) => json_text(&text, 6)?,
                        None => Default::default(),
                    },
                    // History marks changes resting on flagged trials.
                    validity: match row.get::<_, Option<String>>(7)? {
                        Some(text) => json_text(&text, 7)?,
                        None => Default::default(),
                    },
                    // A point's history is of the same device (noise floors).
                    storage: match row.get::<_, Option<String>>(8)? {
                        Some(text) => Some(json_text(&text, 8)?),
                        None => None,
                    },
                    ..Default::default()
                },
            ))
        })?;
        for row in rows {
            let (id, idx, r) = row?;
            if let Some(&i) = at.get(&id) {
                by_key.insert((id, idx), (i, runs[i].results.len()));
                runs[i].results.push(r);
            }
        }
        let mut metrics = self.conn.prepare(&format!(
            "SELECT m.run_id, m.result_idx, m.name, m.unit, m.better, m.samples, m.warmup, m.summary
             FROM metrics m JOIN results r ON r.run_id = m.run_id AND r.idx = m.result_idx
             WHERE {WHICH} ORDER BY m.run_id, m.result_idx, m.idx"
        ))?;
        let rows = metrics.query_map([subject], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                metric_at(row, 2)?,
            ))
        })?;
        for row in rows {
            let (id, idx, m) = row?;
            if let Some(&(i, k)) = by_key.get(&(id, idx)) {
                runs[i].results[k].metrics.push(m);
            }
        }
        Ok(runs)
    }
}
