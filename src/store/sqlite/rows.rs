//! How a [`Run`] maps to the SQLite rows and back: the run's head from a
//! `runs` row, one whole run inserted in a transaction, JSON text columns
//! and the stored status word.

use rusqlite::params;

use crate::model::run::{MetricResult, Run, RunStatus, RUN_SCHEMA};

/// A run's head from a `runs` row whose first columns are id, label,
/// status, started, finished, tool_version, argv, environment, quietness,
/// warnings, study (as `load` and `runs_about` select them): no results,
/// samples or diagnosis.
pub(super) fn run_head(row: &rusqlite::Row) -> rusqlite::Result<Run> {
    let status: String = row.get(2)?;
    let study: Option<String> = row.get(10)?;
    Ok(Run {
        schema: RUN_SCHEMA.to_string(),
        id: row.get(0)?,
        label: row.get(1)?,
        status: status_of(&status),
        started: row.get(3)?,
        finished: row.get(4)?,
        tool_version: row.get(5)?,
        argv: json_col(row, 6)?,
        environment: json_col(row, 7)?,
        quietness: json_col(row, 8)?,
        warnings: json_col(row, 9)?,
        results: Vec::new(),
        samples: Vec::new(),
        study: study.as_deref().map(|s| json_text(s, 10)).transpose()?,
        diagnosis: None,
    })
}

/// Insert one whole run (head, results, metrics, monitor samples) in `tx`;
/// with `replace`, a stored run of the same id goes first.
pub(super) fn insert_run(
    tx: &rusqlite::Transaction,
    run: &Run,
    replace: bool,
) -> rusqlite::Result<()> {
    {
        if replace {
            // Results, metrics and samples go with it (ON DELETE CASCADE).
            tx.execute("DELETE FROM runs WHERE id = ?1", [&run.id])?;
        }
        tx.execute(
            "INSERT INTO runs (id, label, status, started, finished, tool_version, argv, environment,
                               quietness, warnings, experiments, study, diagnosis)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                run.id,
                run.label,
                run.status.as_str(),
                run.started,
                run.finished,
                run.tool_version,
                json(&run.argv)?,
                json(&run.environment)?,
                json(&run.quietness)?,
                json(&run.warnings)?,
                run.experiments().join(","),
                run.study.as_ref().map(json).transpose()?,
                run.diagnosis.as_ref().map(json).transpose()?,
            ],
        )?;
        for (i, r) in run.results.iter().enumerate() {
            tx.execute(
                "INSERT INTO results (run_id, idx, experiment, params, series, histograms, notes, elapsed_s,
                                      validity, param_kinds, storage)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    run.id,
                    i as i64,
                    r.experiment,
                    json(&r.params)?,
                    json(&r.series)?,
                    json(&r.histograms)?,
                    json(&r.notes)?,
                    r.elapsed_s,
                    (!r.validity.is_empty())
                        .then(|| json(&r.validity))
                        .transpose()?,
                    (!r.param_kinds.is_empty())
                        .then(|| json(&r.param_kinds))
                        .transpose()?,
                    r.storage.as_ref().map(json).transpose()?,
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
                        json(&m.better)?,
                        json(&m.samples)?,
                        json(&m.warmup)?,
                        json(&m.summary)?,
                    ],
                )?;
            }
        }
        for (i, s) in run.samples.iter().enumerate() {
            tx.execute(
                "INSERT INTO monitor_samples (run_id, idx, t, data) VALUES (?1, ?2, ?3, ?4)",
                params![run.id, i as i64, s.t, json(s)?],
            )?;
        }
    }
    Ok(())
}

/// JSON text for a column (serialising the model cannot fail in practice;
/// if it does, it surfaces as a SQLite conversion error).
pub(super) fn json<T: serde::Serialize>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Decode a JSON text column inside a row closure.
/// A metric from a `metrics` row's name, unit, better, samples, warmup and
/// summary columns, the first of them at `first`.
pub(super) fn metric_at(row: &rusqlite::Row, first: usize) -> rusqlite::Result<MetricResult> {
    Ok(MetricResult {
        name: row.get(first)?,
        unit: row.get(first + 1)?,
        better: json_col(row, first + 2)?,
        samples: json_col(row, first + 3)?,
        warmup: json_col(row, first + 4)?,
        summary: json_col(row, first + 5)?,
    })
}

pub(super) fn json_col<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row,
    i: usize,
) -> rusqlite::Result<T> {
    json_text(&row.get::<_, String>(i)?, i)
}

pub(super) fn json_text<T: serde::de::DeserializeOwned>(
    text: &str,
    i: usize,
) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A run's stored status word, as `load` and `runs_about` read it.
pub(super) fn status_of(s: &str) -> RunStatus {
    match s {
        "complete" => RunStatus::Complete,
        "interrupted" => RunStatus::Interrupted,
        _ => RunStatus::Failed,
    }
}
